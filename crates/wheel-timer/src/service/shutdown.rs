//! Shutdown: refuse adds, stop the tick thread, claim every task that has not started, wait for
//! the running ones (for at most a limit, if given), run the due ones if asked, and hand the rest
//! back earliest first.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::api::task::{Cadence, MisfirePolicy, Repeat, Task, When, Work};
use crate::loom::atomic::Ordering::*;
use crate::service::core::Core;
use crate::service::job::next_run;
use crate::service::running::active;
use crate::shard::Returned;

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
/// timer.add_or_submit(Task::after(Duration::from_secs(3600), || {}).with_key("lease-7"))?;
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

impl Core {
    /// See [`Timer::shutdown_with`](crate::Timer::shutdown_with). Idempotent: only the first
    /// call does anything.
    pub(crate) fn shutdown(self: &Arc<Self>, options: ShutdownOptions) -> ShutdownReport {
        let limit = options.limit.map(|l| Instant::now().checked_add(l));
        if !self.lifecycle.begin_close() {
            return ShutdownReport::default();
        }
        // The other half of the add's handshake (`add.rs`): an add either sees the lifecycle
        // closing or its slot is seen by the scans below.
        tickwheel_reaper::barrier::heavy();
        // Joined, unless this is the tick thread itself (a task on an inline executor): it then
        // exits after its current batch, whose tasks are `DUE` and claimed below.
        self.reaper.close();
        let now = self.clock.now();
        let mut back: Vec<Returned> = Vec::new();
        // Adds racing this see the lifecycle and take their task back, or their slot is seen
        // here (see `add.rs`); a shard registered meanwhile is counted before its first add.
        for shard in self.shards() {
            shard.drain(now, &mut back);
        }
        // Futures are not handed back: they are woken now (not after the running tasks, one of
        // which may wait for what an awaiting future does), and complete saying how they ended:
        // elapsed if this clock reading reached their deadline (the drain ended them so), else
        // shut down.
        back.retain_mut(|r| match &mut r.work {
            Work::Wake(waker) => {
                if r.elapsed {
                    self.count_run(now.saturating_sub(r.deadline));
                } else {
                    self.returned.fetch_add(1, Relaxed);
                }
                if let Some(w) = waker.take() {
                    self.panics.run(|| w.wake());
                }
                false
            }
            _ => true,
        });
        // Running jobs finish; periodic ones hand their task back into `late` as they do. The
        // jobs of this very thread (a task calling shutdown) are not waited for. (A limit too far
        // ahead for an `Instant` is no limit.)
        let still_running = self
            .running
            .wait_for_others(active::own(self.id), limit.flatten());
        back.extend(self.late.lock().take().unwrap_or_default());
        self.lifecycle.finish_close();
        back.sort_by_key(|r| r.deadline);
        let mut ran_due = 0;
        if options.run_due {
            let due = back.partition_point(|r| r.deadline <= now);
            let mut again = Vec::new();
            for r in back.drain(..due) {
                let (ran, next) = self.run_at_shutdown(r);
                ran_due += u64::from(ran);
                again.extend(next);
            }
            // Repeating tasks come back with their next deadline, in order.
            back.extend(again);
            back.sort_by_key(|r| r.deadline);
        }
        self.returned.fetch_add(back.len() as u64, Relaxed);
        let wall = std::time::SystemTime::now();
        let tasks = back
            .into_iter()
            .map(|mut r| Task {
                // A run due at once for an instant before the clock began is due at that instant.
                when: When::Returned(Box::new((
                    (r.work.take_stale()).unwrap_or_else(|| self.instant_of(r.deadline)),
                    Duration::from_nanos(r.deadline.saturating_sub(now)),
                    wall,
                ))),
                work: r.work,
                route: self.routes.spec_of(r.route),
            })
            .collect();
        ShutdownReport {
            tasks,
            ran_due,
            still_running,
        }
    }

    /// Runs a due task claimed by shutdown, on this thread (unless a `Skip` task is too late):
    /// whether it ran, and, for a repeating task, itself for its next run, unless it stopped
    /// itself or would run past the end of time.
    fn run_at_shutdown(self: &Arc<Self>, r: Returned) -> (bool, Option<Returned>) {
        let now = self.clock.now();
        let late = now.saturating_sub(r.deadline);
        match r.work {
            Work::Once { f, mut label, .. } => {
                let mut cx = self.start_run(r.deadline, now, 1, &mut label);
                self.panics.run(|| f.into_inner()(&mut cx));
                (true, None)
            }
            Work::Every(mut repeat) => {
                let period = repeat.period.max(self.tick_ns);
                // `Skip` does not run late here either (see `job.rs`).
                let skip = repeat.cadence == Cadence::Rate(MisfirePolicy::Skip)
                    && late >= period.saturating_add(self.tick_ns);
                if skip {
                    self.skipped.fetch_add(1, Relaxed);
                } else {
                    repeat.runs += 1;
                    let Repeat { f, runs, label, .. } = &mut *repeat;
                    let mut cx = self.start_run(r.deadline, now, *runs, label);
                    self.panics.run(|| f.get_mut()(&mut cx));
                    if cx.is_stopped() {
                        self.panics.drop_task(repeat);
                        return (true, None);
                    }
                }
                let now = self.clock.now();
                let (next, skipped) = match repeat.cadence {
                    Cadence::Rate(policy) => next_run(r.deadline, period, now, policy),
                    Cadence::Delay => (now.checked_add(period), 0),
                };
                self.skipped.fetch_add(skipped, Relaxed);
                let Some(deadline) = next else {
                    self.panics.drop_task(repeat); // past the end of time: it ends here
                    return (!skip, None);
                };
                let again = Returned {
                    deadline,
                    work: Work::Every(repeat),
                    elapsed: false,
                    route: r.route,
                };
                (!skip, Some(again))
            }
            Work::Wake(..) => unreachable!("futures are woken, not run, by shutdown"),
        }
    }
}
