//! The context a task's run sees: [`TaskContext`], public, made here by the job that runs the
//! task. (Its [`timer`](TaskContext::timer) method, which reaches back to the API, is in
//! `api/task/context.rs`, beside [`WeakTimer`](crate::WeakTimer).)

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::service::core::Core;

/// Given to a task's closure when it asks for it (`|cx: &mut TaskContext<'_>| ..`): when this
/// run was due, how late it started, how many runs there have been, the task's key, and its
/// timer. A repeating task can end itself with [`stop`](Self::stop).
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use tickwheel::{InlineExecutor, ManualClock, Task, TaskContext, Timer};
///
/// let clock = ManualClock::new();
/// let timer = Timer::builder().clock(clock.clone()).executor(Arc::new(InlineExecutor::new())).build()?;
/// let renew = timer.add_or_submit(Task::every(Duration::from_secs(10), |cx: &mut TaskContext<'_>| {
///     println!("lease renewed, run {} ({:?} late)", cx.run_count(), cx.lateness());
///     if cx.run_count() == 3 {
///         cx.stop(); // the lease is given up: no more runs
///     }
/// }))?;
/// for _ in 0..6 {
///     clock.advance(Duration::from_secs(10)); // one run per move (one jump would be one late run)
/// }
/// assert!(renew.is_done() && !renew.is_cancelled());
/// assert_eq!(timer.stats().fired, 3);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct TaskContext<'a> {
    core: Option<&'a Arc<Core>>,
    scheduled: Instant,
    lateness: Duration,
    run: u64,
    key: Option<&'a String>,
    stop: bool,
}

impl<'a> TaskContext<'a> {
    pub(crate) fn new(
        core: Option<&'a Arc<Core>>,
        scheduled: Instant,
        lateness: Duration,
        run: u64,
        key: Option<&'a String>,
    ) -> Self {
        TaskContext {
            core,
            scheduled,
            lateness,
            run,
            key,
            stop: false,
        }
    }

    /// The instant this run was due (for a fixed-rate task, its point on the grid), on the
    /// timer's clock (see [`Timer::now`](crate::Timer::now)).
    pub fn scheduled(&self) -> Instant {
        self.scheduled
    }

    /// How late this run started: the timer's clock at the start, minus [`scheduled`](Self::scheduled).
    pub fn lateness(&self) -> Duration {
        self.lateness
    }

    /// Which run this is: 1 for the first (and a one-shot task's only) run. Runs skipped by
    /// [`MisfirePolicy::Skip`](crate::MisfirePolicy::Skip) are not counted.
    pub fn run_count(&self) -> u64 {
        self.run
    }

    /// The task's key, if it was given one ([`Task::keyed`](crate::Task::keyed)).
    pub fn key(&self) -> Option<&str> {
        self.key.map(String::as_str)
    }

    /// Ends a repeating task after this run: it runs no more, and its handle reports it done
    /// (not cancelled). No effect on a one-shot task, which ends after this run anyway. (The
    /// timer learns of it when the closure returns: a `cancel` that lands before that still
    /// returns `true`, and the task ends cancelled.)
    pub fn stop(&mut self) {
        self.stop = true;
    }

    /// True once [`stop`](Self::stop) was called in this run.
    pub fn is_stopped(&self) -> bool {
        self.stop
    }

    /// The timer running this run (`None`: a task run by hand with `Task::run`).
    pub(crate) fn core(&self) -> Option<&'a Arc<Core>> {
        self.core
    }
}

impl fmt::Debug for TaskContext<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskContext")
            .field("scheduled", &self.scheduled)
            .field("lateness", &self.lateness)
            .field("run", &self.run)
            .field("key", &self.key())
            .field("stop", &self.stop)
            .finish()
    }
}
