//! Errors: one type per operation, and an error that refuses a task hands it back.

use std::fmt;
use std::time::Duration;

use crate::Task;

/// Why [`TimerBuilder::build`](crate::TimerBuilder::build) refused a configuration.
#[derive(Debug)]
#[non_exhaustive]
pub enum BuildError {
    /// The tick was below [`TimerBuilder::MIN_TICK`](crate::TimerBuilder::MIN_TICK).
    TickTooSmall {
        /// The refused tick.
        tick: Duration,
        /// The smallest tick accepted.
        min: Duration,
    },
    /// The wheel size broke a rule of the wheel (power of two, 2 ..= 65536); the
    /// [`ConfigError`](crate::ConfigError) says which (also as the error's `source`).
    WheelSize(tickwheel_wheel::ConfigError),
    /// `threads(0)`: the pool needs a thread.
    ZeroThreads,
    /// `max_pending(0)`: no task could ever be added.
    ZeroMaxPending,
    /// The thread name holds a NUL byte, which no operating system accepts.
    InvalidName {
        /// The refused name.
        name: String,
    },
    /// The operating system refused to start the tick thread. (A pool is started by the first
    /// task that needs it, not at build: see [`TimerBuilder::threads`](crate::TimerBuilder::threads).)
    Spawn(std::io::Error),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::TickTooSmall { tick, min } => write!(
                f,
                "invalid tick {tick:?}: the tick must be at least {min:?}"
            ),
            // The wheel's own error, as it is (its message names the value and the rule): not a
            // source as well, so a chain shows it once, and `{e}` alone shows the reason.
            BuildError::WheelSize(e) => fmt::Display::fmt(e, f),
            BuildError::ZeroThreads => {
                f.write_str("invalid thread count 0: the pool needs at least one thread")
            }
            BuildError::ZeroMaxPending => {
                f.write_str("invalid max_pending 0: no task could ever be added")
            }
            BuildError::InvalidName { name } => {
                write!(f, "invalid thread name {name:?}: it contains a NUL byte")
            }
            BuildError::Spawn(e) => write!(f, "could not start the timer's threads: {e}"),
        }
    }
}

/// No `source`: every variant's message holds its cause (see `Display`).
impl std::error::Error for BuildError {}

/// Why [`Timer::add_or_submit`](crate::Timer::add_or_submit) refused a task. Every variant hands
/// the task back, so nothing is lost.
///
/// `Send + Sync + 'static` (a [`Task`] is, though its closure need only be `Send`), so `?`
/// converts it into `Box<dyn Error + Send + Sync>` or `anyhow::Error` (the task is then dropped
/// with the error); take the task out first with [`into_task`](Self::into_task) to keep it.
///
/// ```
/// use std::time::Duration;
/// use tickwheel::{Task, Timer};
///
/// fn schedule(timer: &Timer) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
///     timer.add_or_submit(Task::after(Duration::from_secs(1), || {}))?;
///     Ok(())
/// }
/// let timer = Timer::new()?;
/// timer.shutdown();
/// assert_eq!(schedule(&timer).unwrap_err().to_string(), "timer is shut down");
/// # Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
/// ```
#[non_exhaustive]
pub enum AddError {
    /// `max_pending` tasks are already waiting; try again after one fires or is cancelled.
    Full(Task),
    /// The timer was shut down.
    Shutdown(Task),
}

impl AddError {
    /// The refused task.
    pub fn into_task(self) -> Task {
        match self {
            AddError::Full(t) | AddError::Shutdown(t) => t,
        }
    }
}

impl fmt::Debug for AddError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            AddError::Full(_) => "Full",
            AddError::Shutdown(_) => "Shutdown",
        };
        f.debug_tuple(name).field(&format_args!("..")).finish()
    }
}

impl fmt::Display for AddError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AddError::Full(_) => "timer is full: max_pending tasks are already waiting",
            AddError::Shutdown(_) => "timer is shut down",
        })
    }
}

impl std::error::Error for AddError {}
