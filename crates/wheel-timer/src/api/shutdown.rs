//! [`ShutdownOptions`], [`ShutdownReport`] and [`ShutdownFuture`]: how `Timer::shutdown_with`
//! and `Timer::shutdown_async` stop the timer, and what they hand back (the collecting is
//! `service/shutdown.rs`).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use crate::api::task::Task;
use crate::service::core::Core;
use crate::service::shutdown::{Closing, Collected};
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
    ///
    /// With [`Timer::shutdown_async`](crate::Timer::shutdown_async), which must not run tasks on
    /// the thread that polls it (a runtime's worker), they run the same way, in one job on the
    /// timer's executor instead, and the future resolves once that job has ended. If the
    /// executor drops that job unrun, its tasks are handed back.
    pub fn run_due(mut self, run: bool) -> Self {
        self.run_due = run;
        self
    }

    /// Wait at most `limit` for tasks already running. A task still running then keeps running
    /// (a thread cannot be stopped from outside): the report counts it in
    /// [`ShutdownReport::still_running`], and a repeating one is not handed back (it ends after
    /// its current run).
    ///
    /// Not for [`Timer::shutdown_async`](crate::Timer::shutdown_async), which has no clock to
    /// wait by and refuses it (it panics): compose its future with your runtime's timeout
    /// instead, and take what it collected with [`ShutdownFuture::into_report`] if the timeout
    /// passes first.
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
    /// Due tasks run by the shutdown ([`ShutdownOptions::run_due`]: on the calling thread, or on
    /// the timer's executor for [`Timer::shutdown_async`](crate::Timer::shutdown_async)); a
    /// `Skip` task a period plus a tick or more late is skipped instead (and counted in
    /// `Stats::skipped`).
    pub ran_due: u64,
    /// Tasks still running when the wait limit passed ([`ShutdownOptions::wait_at_most`]), or
    /// when [`ShutdownFuture::into_report`] was called (due tasks whose job had not ended count
    /// here too).
    /// Counted, not named: a running task's closure and key are with the thread that runs it,
    /// out of the timer's reach until the run ends (a repeating one then ends, not handed
    /// back). Keep the keys of long runs yourself if a restart must know them.
    pub still_running: u64,
}

/// Shuts `core` down as `options` say, and hands back what never ran as tasks.
pub(crate) fn shutdown(core: &Arc<Core>, options: ShutdownOptions) -> ShutdownReport {
    report(core, core.shutdown(options.run_due, options.limit))
}

/// Begins an asynchronous shutdown of `core` (see [`Timer::shutdown_async`]).
///
/// [`Timer::shutdown_async`]: crate::Timer::shutdown_async
#[track_caller]
pub(crate) fn shutdown_async(core: &Arc<Core>, options: ShutdownOptions) -> ShutdownFuture {
    assert!(
        options.limit.is_none(),
        "Timer::shutdown_async has no clock to wait by: instead of ShutdownOptions::wait_at_most, \
         wrap the future in your runtime's timeout and call ShutdownFuture::into_report if it passes"
    );
    ShutdownFuture {
        closing: Closing::begin(core, options.run_due),
    }
}

/// What a shutdown collected, as tasks.
fn report(core: &Arc<Core>, collected: Collected) -> ShutdownReport {
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

/// A shutdown in progress, from [`Timer::shutdown_async`](crate::Timer::shutdown_async): resolves to its [`ShutdownReport`]
/// once the tasks that were running have finished, without blocking the thread that polls it.
///
/// The shutdown has begun when the future is made, polled or not: adds are refused, the tasks
/// that had not started are collected (they are in the future, for its report), and pending
/// futures of the timer are woken. Polling it only checks whether the running tasks have ended;
/// the end of each wakes it. `Send` and `Unpin`; for any runtime (no timer or reactor of one is
/// used).
///
/// To bound the wait, wrap it in your runtime's timeout, by `&mut`, and if the timeout passes
/// take what it collected with [`into_report`](Self::into_report), which counts the tasks still
/// running:
///
/// ```
/// use std::time::Duration;
/// use tickwheel::{ShutdownOptions, Task, Timer};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let timer = Timer::new()?;
/// timer.add_or_submit(Task::after(Duration::from_secs(900), || {}).keyed("order-42"))?;
/// let mut shutdown = timer.shutdown_async(ShutdownOptions::new());
/// let report = match tokio::time::timeout(Duration::from_secs(5), &mut shutdown).await {
///     Ok(report) => report,
///     Err(_elapsed) => shutdown.into_report(), // tasks still running are counted
/// };
/// assert_eq!(report.tasks[0].key(), Some("order-42"));
/// # Ok(())
/// # }
/// ```
///
/// Dropped before it resolved, it ends the shutdown as `into_report` does and drops the tasks it
/// collected (their closures' `Drop` guarded as a task's run). It panics if polled again after it
/// resolved.
#[must_use = "the shutdown has begun; the tasks that never ran are in the future's report: await it or call into_report"]
pub struct ShutdownFuture {
    closing: Closing,
}

impl ShutdownFuture {
    /// The report now, without waiting any longer: the tasks that never ran, and, in
    /// [`still_running`](ShutdownReport::still_running), the tasks still running (as
    /// [`ShutdownOptions::wait_at_most`] counts them when its limit passes; for
    /// [`run_due`](ShutdownOptions::run_due), the due tasks whose job has not ended count there
    /// too, and due tasks not yet given to a job are handed back unrun). A repeating task still
    /// running is not handed back: it ends after its current run.
    pub fn into_report(mut self) -> ShutdownReport {
        let collected = self.closing.now();
        report(self.closing.core(), collected)
    }
}

impl Future for ShutdownFuture {
    type Output = ShutdownReport;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<ShutdownReport> {
        let this = &mut *self;
        this.closing
            .poll(cx)
            .map(|collected| report(this.closing.core(), collected))
    }
}

impl fmt::Debug for ShutdownFuture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShutdownFuture").finish_non_exhaustive()
    }
}
