//! [`ShutdownOptions`] and [`ShutdownReport`]: how `Timer::shutdown_with` stops the timer, and
//! what it hands back (the collecting is `service/shutdown.rs`).

use std::sync::Arc;
use std::time::Duration;

use crate::api::task::Task;
use crate::service::core::Core;
use crate::service::work::When;

/// How [`Timer::shutdown_with`](crate::Timer::shutdown_with) stops the timer. The default is
/// what [`Timer::shutdown`](crate::Timer::shutdown) does: wait for running tasks without a
/// limit, and hand back every task that has not started.
///
/// ```
/// use std::time::Duration;
/// use tickwheel::{ShutdownOptions, Task, Timer};
///
/// let timer = Timer::new()?;
/// timer.add_or_submit(Task::after(Duration::ZERO, || println!("due: runs before shutdown returns")))?;
/// timer.add_or_submit(Task::after(Duration::from_secs(3600), || {}).keyed("lease-7"))?;
/// let report = timer.shutdown_with(
///     ShutdownOptions::new()
///         .wait_at_most(Duration::from_secs(5)) // for tasks already running
///         .run_due(true),                       // run the due ones here instead of handing them back
/// );
/// assert_eq!(report.still_running, 0);
/// let keys: Vec<_> = report.tasks.iter().filter_map(|t| t.key()).collect();
/// assert_eq!(keys, ["lease-7"]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[must_use = "options do nothing until passed to Timer::shutdown_with"]
pub struct ShutdownOptions {
    run_due: bool,
    limit: Option<Duration>,
}

impl ShutdownOptions {
    /// The defaults (see the type's docs).
    pub fn new() -> Self {
        Self::default()
    }

    /// Run the tasks whose deadline has come (on their way to the executor, or in the wheels and
    /// due by the shutdown's clock reading) instead of handing them back: on the calling thread,
    /// earliest first, after the running tasks ended (or the limit passed), with adds already
    /// refused. A due repeating task runs once (a `Skip` one only if it is less than a period
    /// plus a tick late, as [`MisfirePolicy::Skip`](crate::MisfirePolicy::Skip) runs) and comes
    /// back with its next deadline. Their
    /// handles say [`TaskState::Returned`](crate::TaskState::Returned); the runs count in
    /// `Stats::fired`, not `Stats::returned`.
    pub fn run_due(mut self, run: bool) -> Self {
        self.run_due = run;
        self
    }

    /// Wait at most `limit` for tasks already running. A task still running then keeps running
    /// (a thread cannot be stopped from outside): the report counts it in
    /// [`ShutdownReport::still_running`], and a repeating one is not handed back (it ends after
    /// its current run).
    pub fn wait_at_most(mut self, limit: Duration) -> Self {
        self.limit = Some(limit);
        self
    }
}

/// What [`Timer::shutdown_with`](crate::Timer::shutdown_with) did.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct ShutdownReport {
    /// Every task that never ran (and was not run by [`ShutdownOptions::run_due`]), earliest
    /// deadline first, each with its [`deadline`](Task::deadline),
    /// [`remaining`](Task::remaining) time and [`key`](Task::key).
    pub tasks: Vec<Task>,
    /// Due tasks run on the calling thread ([`ShutdownOptions::run_due`]); a `Skip` task a period
    /// plus a tick or more late is skipped instead (and counted in `Stats::skipped`).
    pub ran_due: u64,
    /// Tasks still running when the wait limit passed ([`ShutdownOptions::wait_at_most`]).
    /// Counted, not named: a running task's closure and key are with the thread that runs it,
    /// out of the timer's reach until the run ends (a repeating one then ends, not handed
    /// back). Keep the keys of long runs yourself if a restart must know them.
    pub still_running: u64,
}

/// Shuts `core` down as `options` say, and hands back what never ran as tasks.
pub(crate) fn shutdown(core: &Arc<Core>, options: ShutdownOptions) -> ShutdownReport {
    let collected = core.shutdown(options.run_due, options.limit);
    let (now, wall) = (collected.now, std::time::SystemTime::now());
    let tasks = collected
        .back
        .into_iter()
        .map(|mut r| Task {
            // A run due at once for an instant before the clock began is due at that instant.
            when: When::Returned(Box::new((
                (r.work.take_stale()).unwrap_or_else(|| core.instant_of(r.deadline)),
                Duration::from_nanos(r.deadline.saturating_sub(now)),
                wall,
            ))),
            work: r.work,
            route: core.routes.spec_of(r.route),
        })
        .collect();
    ShutdownReport {
        tasks,
        ran_due: collected.ran_due,
        still_running: collected.still_running,
    }
}
