//! Errors: one type per operation, and an error that refuses a task hands it back.

use std::fmt;
use std::time::Duration;

use crate::Task;

/// Why [`TimerBuilder::build`](crate::TimerBuilder::build) refused a configuration.
#[derive(Debug)]
#[non_exhaustive]
pub enum BuildError {
    /// The tick was below [`MIN_TICK`](crate::MIN_TICK).
    TickTooSmall {
        /// The refused tick.
        tick: Duration,
        /// The smallest tick accepted.
        min: Duration,
    },
    /// The wheel size broke a rule of the wheel (power of two, 2 ..= 65536).
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
    /// The operating system refused to start a thread.
    Spawn(std::io::Error),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::TickTooSmall { tick, min } => write!(
                f,
                "invalid tick {tick:?}: the tick must be at least {min:?}"
            ),
            BuildError::WheelSize(e) => e.fmt(f),
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

impl std::error::Error for BuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BuildError::WheelSize(e) => Some(e),
            BuildError::Spawn(e) => Some(e),
            _ => None,
        }
    }
}

/// Why [`Timer::add_or_submit`](crate::Timer::add_or_submit) refused a task. Every variant hands
/// the task back, so nothing is lost.
///
/// Because it holds the task (a `Send` closure), `AddError` is `Send` but not `Sync`, so `?`
/// into `Box<dyn Error + Send + Sync>` or `anyhow::Error` does not compile: take the task out
/// with [`into_task`](Self::into_task), or convert with `.map_err(|e| e.to_string())`.
#[non_exhaustive]
pub enum AddError {
    /// `max_pending` tasks are already waiting; try again after one fires or is cancelled.
    Full(Task),
    /// The timer was shut down.
    Shutdown(Task),
    /// A periodic task with a zero period would run without end.
    ZeroPeriod(Task),
}

impl AddError {
    /// The refused task.
    pub fn into_task(self) -> Task {
        match self {
            AddError::Full(t) | AddError::Shutdown(t) | AddError::ZeroPeriod(t) => t,
        }
    }
}

impl fmt::Debug for AddError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            AddError::Full(_) => "Full",
            AddError::Shutdown(_) => "Shutdown",
            AddError::ZeroPeriod(_) => "ZeroPeriod",
        };
        f.debug_tuple(name).field(&format_args!("..")).finish()
    }
}

impl fmt::Display for AddError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AddError::Full(_) => "timer is full: max_pending tasks are already waiting",
            AddError::Shutdown(_) => "timer is shut down",
            AddError::ZeroPeriod(_) => "a periodic task needs a period above zero",
        })
    }
}

impl std::error::Error for AddError {}
