//! `Timer`: the service users hold. Adds go to the adding thread's own shard; a tick thread
//! hands due tasks to the executor; `shutdown` hands back what never ran.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use std::time::{Duration, Instant};
use sync_wrapper::SyncWrapper;

use tickwheel_reaper::Due;

use crate::api::builder::TimerBuilder;
use crate::api::error::{AddError, BuildError};
use crate::api::future::{Interval, Sleep, Timeout};
use crate::api::handle::TimerHandle;
use crate::api::shutdown::{self, ShutdownFuture, ShutdownOptions, ShutdownReport};
use crate::api::stats::{ClassStats, RunTimes, Stats};
use crate::api::task::Task;
use crate::api::task::context::WeakTimer;
use crate::loom::atomic::Ordering::Relaxed;
use crate::service::core::Core;
use crate::service::dispatch;
use crate::shard::Fire;

/// A timer service on hierarchical timing wheels.
///
/// Add tasks from any thread with [`add_or_submit`](Self::add_or_submit): each adding thread
/// has its own shard of the timer (slots, wheel, counters), so adds from different threads never
/// write the same memory and never wait for each other. A tick thread sleeps until the earliest
/// shard has something due and hands due tasks, earliest deadline first across all shards, to a
/// rayon pool (or your [`Executor`](crate::Executor)); it never runs your code. `Timer` is
/// `Send + Sync`; share it with an `Arc` or by reference.
///
/// ```
/// use std::time::Duration;
/// use tickwheel::{Task, Timer};
///
/// let timer = Timer::new()?;
/// let handle = timer.add_or_submit(Task::after(Duration::from_secs(900), || println!("too late")))?;
/// assert!(handle.cancel());
/// assert!(timer.shutdown().is_empty());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// Dropping the timer shuts it down as [`shutdown`](Self::shutdown) does, but waits for the
/// tasks running now for at most [`TimerBuilder::drop_wait`](crate::TimerBuilder::drop_wait)
/// (1 s by default), so a drop in async code never blocks a runtime's worker for longer than
/// that. A task still running then keeps running on its pool, and its job drops its closure when
/// it ends (a repeating one ends after its current run), as with
/// [`ShutdownOptions::wait_at_most`]. The tasks that never ran (due ones on their way to the
/// executor included) go to the [`on_drop`](crate::TimerBuilder::on_drop) hook if the builder
/// set one, and are dropped otherwise. To keep them without a hook, call `shutdown` (or
/// [`shutdown_with`](Self::shutdown_with), or await [`shutdown_async`](Self::shutdown_async))
/// before the drop; a drop after a shutdown has begun waits for nothing.
pub struct Timer {
    core: Arc<Core>,
    /// Given the tasks that never ran when the timer is dropped. (`SyncWrapper`: only the drop,
    /// through `&mut`, reaches it, so the timer stays `Sync`.)
    on_drop: SyncWrapper<Option<DropHook>>,
    /// The longest a drop waits for running tasks (`Duration::MAX`: no limit).
    drop_wait: Duration,
}

/// See [`TimerBuilder::on_drop`](crate::TimerBuilder::on_drop).
pub(crate) type DropHook = Box<dyn FnOnce(Vec<Task>) + Send>;

impl Timer {
    /// A timer with the defaults: tick 1 ms, 256 buckets per level, tasks on the process's shared
    /// rayon pool (as wide as the machine, started by the first task that needs it: a timer used
    /// only for futures starts no pool), no `max_pending`.
    pub fn new() -> Result<Timer, BuildError> {
        Timer::builder().build()
    }

    /// A builder with the defaults of [`new`](Self::new).
    pub fn builder() -> TimerBuilder {
        TimerBuilder::default()
    }

    /// Starts the tick thread of a freshly built core.
    pub(crate) fn start(
        core: Arc<Core>,
        name: &str,
        on_drop: Option<DropHook>,
        drop_wait: Duration,
    ) -> std::io::Result<Timer> {
        let weak = Arc::downgrade(&core);
        core.reaper.spawn(name, move |batch: &mut Vec<Due<Fire>>| {
            let Some(core) = weak.upgrade() else {
                batch.clear();
                return;
            };
            dispatch::hand_out(&core, batch);
        })?;
        Ok(Timer {
            core,
            on_drop: SyncWrapper::new(on_drop),
            drop_wait,
        })
    }

    /// Adds `task`; a task whose deadline has already come goes straight to the executor, never
    /// queued behind a tick. Returns a handle to cancel or reschedule it.
    ///
    /// O(1) and lock-free for a task due 64 ticks or more from now: the task goes into this
    /// thread's shard and its deadline is stamped within one tick by whoever next drains the
    /// shard (never early: from a clock reading taken after the add). A task due sooner, or any
    /// task on a [`ManualClock`](crate::ManualClock), is stamped at once.
    ///
    /// Refused, with the task handed back, when `max_pending` tasks are waiting
    /// ([`AddError::Full`]) or after [`shutdown`](Self::shutdown) ([`AddError::Shutdown`]).
    ///
    /// ```
    /// use std::time::Duration;
    /// use tickwheel::{AddError, Task, Timer};
    ///
    /// let timer = Timer::builder().max_pending(1).build()?;
    /// let _first = timer.add_or_submit(Task::after(Duration::from_secs(60), || {}))?;
    /// match timer.add_or_submit(Task::after(Duration::from_secs(60), || println!("later"))) {
    ///     Err(AddError::Full(task)) => drop(task), // handed back: retry, run or drop it
    ///     other => panic!("expected Full, got {other:?}"),
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn add_or_submit(&self, task: Task) -> Result<TimerHandle, AddError> {
        crate::api::add::add(&self.core, task)
    }

    /// A reference to this timer that does not keep it alive (for tasks that add tasks: see
    /// [`WeakTimer`]).
    pub fn downgrade(&self) -> WeakTimer {
        WeakTimer::new(&self.core)
    }

    /// The timer's clock as an instant: `Instant::now()` on the real clock; on a
    /// [`ManualClock`](crate::ManualClock), the instant its reading stands for, which moves only
    /// with the clock. Use it for [`Task::at`] and [`TimerHandle::reschedule_at`] instants, so
    /// tests on a manual clock stay exact.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tickwheel::{ManualClock, Timer};
    ///
    /// let clock = ManualClock::new();
    /// let timer = Timer::builder().clock(clock.clone()).build()?;
    /// let start = timer.now();
    /// clock.advance(Duration::from_secs(15 * 60));
    /// assert_eq!(timer.now() - start, Duration::from_secs(15 * 60));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn now(&self) -> Instant {
        self.core.instant_of(self.core.clock.now())
    }

    /// Tasks waiting for their deadline: added (or re-armed) and not yet handed to the executor,
    /// cancelled or returned. Tasks already handed to a busy executor are not counted.
    ///
    /// The sum of per-thread counts, each updated by an add, cancel or fire before it returns:
    /// exact while nothing is in flight, and never more than the operations in flight away from
    /// the truth while they are.
    pub fn pending(&self) -> u64 {
        self.core.pending()
    }

    /// A snapshot of the counters and the lateness histograms.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tickwheel::{Task, Timer};
    ///
    /// let timer = Timer::new()?;
    /// let h = timer.add_or_submit(Task::after(Duration::from_secs(5), || {}))?;
    /// h.cancel();
    /// let stats = timer.stats();
    /// assert_eq!((stats.added, stats.cancelled, stats.pending), (1, 1, 0));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn stats(&self) -> Stats {
        let core = &self.core;
        let mut s = Stats::default();
        for shard in core.shards().iter() {
            let (added, rejected, cancelled) = shard.counts();
            s.added += added;
            s.rejected += rejected;
            s.cancelled += cancelled;
            s.pending += shard.pending();
        }
        let (p50, p99, max) = core.lateness.summary();
        let (_, handoff_p99, handoff_max) = core.handoff.summary();
        s.fired = core.fired.load(Relaxed);
        s.panicked = core.panics.count();
        s.returned = core.returned.load(Relaxed);
        s.skipped = core.skipped.load(Relaxed);
        s.periods_rounded_up = core.rounded.load(Relaxed);
        // One clock reading for both, so a class is isolated in both lists or in neither.
        let now = core.clock.now();
        s.isolated_classes = core.routes.isolated(now);
        s.run_time = RunTimes::of(&core.routes.main_runs);
        s.slow_run_time = RunTimes::of(&core.routes.slow_runs);
        s.classes = (core.routes.classes(now).into_iter())
            .map(|c| {
                let (_, p99, max) = c.figures.lateness.summary();
                ClassStats {
                    name: c.name.to_owned(),
                    run_time: RunTimes::of(&c.figures.run_time),
                    lateness_p99: Duration::from_nanos(p99),
                    lateness_max: Duration::from_nanos(max),
                    skipped: c.figures.skipped.load(Relaxed),
                    isolated: c.isolated,
                    isolations: c.isolations,
                }
            })
            .collect();
        // After the classes': each isolation is counted here first, so no class shows more.
        s.isolations = core.routes.notice.isolations.load(Relaxed);
        s.lateness_p50 = Duration::from_nanos(p50);
        s.lateness_p99 = Duration::from_nanos(p99);
        s.lateness_max = Duration::from_nanos(max);
        s.handoff_p99 = Duration::from_nanos(handoff_p99);
        s.handoff_max = Duration::from_nanos(handoff_max);
        s.tick_wakeups = core.reaper.wakeups();
        s.last_panic = core.panics.last();
        s
    }

    /// A future that completes `delay` from now by this timer's clock (see [`Sleep`]).
    ///
    /// ```
    /// # async fn example(timer: &tickwheel::Timer) {
    /// timer.sleep(std::time::Duration::from_millis(250)).await;
    /// # }
    /// ```
    pub fn sleep(&self, delay: Duration) -> Sleep {
        Sleep::after(&self.core, tickwheel_reaper::duration_to_ns(delay))
    }

    /// A future that completes at `deadline` (at once if it passed; see [`Sleep`]). An instant
    /// before the timer's clock began (the instant the timer was built, or a
    /// [`ManualClock`](crate::ManualClock)'s epoch) is that beginning: the sleep completes at
    /// once, and its [`deadline`](Sleep::deadline) says so.
    pub fn sleep_until(&self, deadline: Instant) -> Sleep {
        Sleep::new(&self.core, self.core.ns_of(deadline))
    }

    /// Runs `future` for at most `delay`: see [`Timeout`].
    pub fn timeout<F: Future>(&self, delay: Duration, future: F) -> Timeout<F> {
        Timeout::new(future, self.sleep(delay))
    }

    /// Runs `future` until `deadline` at most: see [`Timeout`].
    pub fn timeout_at<F: Future>(&self, deadline: Instant, future: F) -> Timeout<F> {
        Timeout::new(future, self.sleep_until(deadline))
    }

    /// Ticks every `period`, the first tick at once: see [`Interval`].
    pub fn interval(&self, period: Duration) -> Interval {
        Interval::new(
            &self.core,
            Sleep::new(&self.core, self.core.clock.now()),
            tickwheel_reaper::duration_to_ns(period),
        )
    }

    /// Ticks every `period`, the first tick at `start`: see [`Interval`].
    ///
    /// If `start` is before the timer's clock began (the instant the timer was built, or a
    /// [`ManualClock`](crate::ManualClock)'s epoch), the grid `start + k * period` keeps its
    /// phase: the first tick is its first point at or after that beginning (the points before
    /// it precede the timer and are not ticked).
    pub fn interval_at(&self, start: Instant, period: Duration) -> Interval {
        let ns = tickwheel_reaper::duration_to_ns(period);
        let first = self.core.ns_at(start, || Some(ns));
        Interval::new(&self.core, Sleep::new(&self.core, first), ns)
    }

    /// Stops the timer: waits for tasks already running, and returns every task that never ran
    /// (waiting for its deadline, or handed to the executor but not started), earliest deadline
    /// first. Afterwards every add is refused with [`AddError::Shutdown`]. Idempotent: later
    /// calls return nothing. Called from inside one of this timer's tasks, it does not wait for
    /// that task (and so does not deadlock); that task is not among the returned ones (a
    /// repeating one ends after its current run).
    ///
    /// Pending futures ([`Sleep`], [`Timeout`], [`Interval`]) are not returned: they are woken at
    /// once, before shutdown waits for running tasks (one of which may wait for what an awaiting
    /// future does). One whose deadline shutdown's clock reading has reached completes as
    /// elapsed and counts in [`Stats::fired`](crate::Stats::fired); the others complete saying
    /// the timer shut down ([`Sleep::is_shutdown`],
    /// [`TimeoutError::Shutdown`](crate::TimeoutError::Shutdown), [`Interval::is_shutdown`]) and
    /// count in [`Stats::returned`](crate::Stats::returned) with the returned tasks.
    ///
    /// It blocks the calling thread until the running tasks have finished: from async code, use
    /// [`shutdown_async`](Self::shutdown_async), which does the same without blocking.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tickwheel::{Task, Timer};
    ///
    /// let timer = Timer::new()?;
    /// let _h = timer.add_or_submit(Task::after(Duration::from_secs(3600), || println!("ran late")))?;
    /// let never_ran = timer.shutdown();
    /// assert_eq!(never_ran.len(), 1);
    /// for task in never_ran {
    ///     task.run(); // or persist it, or drop it
    /// }
    /// assert!(timer.add_or_submit(Task::after(Duration::ZERO, || {})).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn shutdown(&self) -> Vec<Task> {
        shutdown::shutdown(&self.core, ShutdownOptions::new()).tasks
    }

    /// [`shutdown`](Self::shutdown) with options: a limit on the wait for running tasks, and
    /// running the due tasks instead of handing them back. Returns what it did.
    ///
    /// To persist pending work across a restart, give tasks a key ([`Task::keyed`]) and
    /// store each returned task's key with its wall-clock deadline:
    ///
    /// ```
    /// use std::time::{Duration, SystemTime};
    /// use tickwheel::{ShutdownOptions, Task, Timer};
    ///
    /// let timer = Timer::new()?;
    /// timer.add_or_submit(Task::after(Duration::from_secs(900), || {}).keyed("order-42"))?;
    /// let report = timer.shutdown_with(ShutdownOptions::new().wait_at_most(Duration::from_secs(5)));
    /// assert_eq!(report.still_running, 0);
    /// let saved: Vec<(String, SystemTime)> = report
    ///     .tasks
    ///     .iter()
    ///     .filter_map(|t| Some((t.key()?.to_owned(), SystemTime::now() + t.remaining()?)))
    ///     .collect();
    /// assert_eq!(saved[0].0, "order-42");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn shutdown_with(&self, options: ShutdownOptions) -> ShutdownReport {
        shutdown::shutdown(&self.core, options)
    }

    /// [`shutdown_with`](Self::shutdown_with) for async code: begins the shutdown at once, as
    /// `shutdown_with` does (adds refused, the tasks that never ran collected, pending futures
    /// woken), and returns a [`ShutdownFuture`] that resolves to the same [`ShutdownReport`]
    /// once the tasks running now have finished, never blocking the thread that polls it (as
    /// Java's `shutdown` returns at once and `awaitTermination` waits). It works under any
    /// runtime, or a plain `block_on`.
    ///
    /// Called from inside one of this timer's tasks, it does not wait for that task (as
    /// `shutdown`). With [`run_due`](ShutdownOptions::run_due) the due tasks run in one job on
    /// the timer's executor, not on the polling thread, and the future resolves after them.
    /// Idempotent like `shutdown`: a later call's future resolves at once to an empty report.
    ///
    /// # Panics
    ///
    /// With [`ShutdownOptions::wait_at_most`], before anything is done: the future has no clock
    /// to wait by. Wrap it in your runtime's timeout instead (see [`ShutdownFuture`]).
    ///
    /// ```
    /// use std::time::Duration;
    /// use tickwheel::{ShutdownOptions, Task, Timer};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let timer = Timer::new()?;
    /// timer.add_or_submit(Task::after(Duration::from_secs(3600), || {}).keyed("lease-7"))?;
    /// let report = timer.shutdown_async(ShutdownOptions::new()).await;
    /// assert_eq!(report.still_running, 0);
    /// assert_eq!(report.tasks[0].key(), Some("lease-7"));
    /// assert!(timer.add_or_submit(Task::after(Duration::ZERO, || {})).is_err());
    /// # Ok(())
    /// # }
    /// ```
    #[track_caller]
    pub fn shutdown_async(&self, options: ShutdownOptions) -> ShutdownFuture {
        shutdown::shutdown_async(&self.core, options)
    }

    /// Waits until every task handed to the executor so far has finished running (or was
    /// discarded by the executor). With a [`ManualClock`](crate::ManualClock), whose `advance`
    /// returns once every due task has been handed out, `advance` then `wait_idle` means every
    /// task due by then has run: assert right after it, on any executor.
    ///
    /// Called from inside a task (of any timer) it returns at once: waiting there could wait for
    /// the calling task itself, for a task queued behind it on a busy pool, or for another task
    /// waiting the same way. A `CatchUp` task more than [`MisfirePolicy::BURST`](crate::MisfirePolicy::BURST) runs behind goes back to the tick thread
    /// between turns, and is handed out again after this returns.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::time::Duration;
    /// use tickwheel::{ManualClock, Task, Timer};
    ///
    /// let clock = ManualClock::new();
    /// let timer = Timer::builder().clock(clock.clone()).build()?; // the default rayon pool
    /// let runs = Arc::new(AtomicUsize::new(0));
    /// for i in 0..100 {
    ///     let runs = runs.clone();
    ///     timer.add_or_submit(Task::after(Duration::from_millis(i), move || {
    ///         runs.fetch_add(1, Ordering::SeqCst);
    ///     }))?;
    /// }
    /// clock.advance(Duration::from_millis(100));
    /// timer.wait_idle();
    /// assert_eq!(runs.load(Ordering::SeqCst), 100);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn wait_idle(&self) {
        if crate::service::running::active::inside_a_task() {
            return; // it could wait for itself, or for a task waiting for it
        }
        let core = &self.core;
        core.running.wait_idle();
    }

    /// Bytes of memory the timer holds for its tasks, besides the tasks' own closures: every
    /// shard's slots (64 bytes per task slot, kept for reuse), ring and wheels.
    pub fn heap_bytes(&self) -> usize {
        self.core.shards().iter().map(|s| s.heap_bytes()).sum()
    }

    /// The timer's clock reading: time since the timer was built on the real clock, or the
    /// manual clock's own elapsed time.
    pub fn elapsed(&self) -> Duration {
        Duration::from_nanos(self.core.clock.now())
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        let mut options = ShutdownOptions::new();
        if self.drop_wait != Duration::MAX {
            options = options.wait_at_most(self.drop_wait);
        }
        let report = shutdown::shutdown(&self.core, options);
        let hook = self.on_drop.get_mut().take();
        match hook {
            Some(hook) => {
                let tasks = report.tasks;
                self.core.panics.run(move || hook(tasks));
            }
            // Each closure's `Drop` is the user's code: one that panics must not leave the
            // others undropped, nor unwind out of this drop.
            None => report
                .tasks
                .into_iter()
                .for_each(|task| self.core.panics.drop_task(task)),
        }
    }
}

impl fmt::Debug for Timer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Timer")
            .field("pending", &self.pending())
            .field("shut_down", &!self.core.lifecycle.is_open())
            .finish_non_exhaustive()
    }
}
