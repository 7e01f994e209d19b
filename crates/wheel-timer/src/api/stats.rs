//! [`Stats`], [`ClassStats`] and [`RunTimes`]: the snapshot `Timer::stats` returns (the
//! histograms behind them are `service/histogram.rs`).

use std::time::Duration;

use crate::service::histogram::Histogram;

/// A snapshot of a timer's counters. Runs of periodic tasks count in `fired`, each run once.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use tickwheel::{InlineExecutor, ManualClock, Task, Timer};
///
/// let clock = ManualClock::new();
/// let timer = Timer::builder().clock(clock.clone()).executor(Arc::new(InlineExecutor::new())).build()?;
/// let paid = timer.add_or_submit(Task::after(Duration::from_secs(900), || {}))?;
/// timer.add_or_submit(Task::after(Duration::from_secs(5), || {}))?;
/// assert!(paid.cancel());
/// clock.advance(Duration::from_secs(6)); // one second late on the manual clock's terms
/// let stats = timer.stats();
/// assert_eq!((stats.added, stats.cancelled, stats.fired, stats.pending), (2, 1, 1, 0));
/// assert_eq!(stats.lateness_max, Duration::from_secs(1));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Tasks waiting for their deadline (see [`Timer::pending`](crate::Timer::pending)).
    pub pending: u64,
    /// Tasks accepted by `add_or_submit`.
    pub added: u64,
    /// Task runs started (one-shot runs plus every periodic run), panicking ones included.
    pub fired: u64,
    /// Successful cancels (`cancel` returned true).
    pub cancelled: u64,
    /// Adds refused by `max_pending`.
    pub rejected: u64,
    /// Runs that panicked (caught; the pool lives on), and drops of a closure by the timer (at
    /// the end of a repeating task, at shutdown) that panicked.
    pub panicked: u64,
    /// Tasks handed back by `shutdown`.
    pub returned: u64,
    /// Repeating tasks and [`Interval`](crate::Interval)s added with a period below the tick,
    /// which run (tick) at the tick instead: the one rule for sub-tick periods.
    pub periods_rounded_up: u64,
    /// Periodic runs and [`Interval`](crate::Interval) ticks that never happened because the
    /// timer fell behind: the ones [`MisfirePolicy::RunOnce`](crate::MisfirePolicy::RunOnce)
    /// folded into one, the ones [`Skip`](crate::MisfirePolicy::Skip) skipped, and those
    /// [`CatchUp`](crate::MisfirePolicy::CatchUp) gave up beyond
    /// [`MisfirePolicy::MAX_CATCH_UP`](crate::MisfirePolicy::MAX_CATCH_UP).
    pub skipped: u64,
    /// Median lateness of a run (start minus deadline), to within 1/8 of its value.
    pub lateness_p50: Duration,
    /// 99th percentile lateness, to within 1/8 of its value.
    pub lateness_p99: Duration,
    /// Largest lateness seen, exact.
    pub lateness_max: Duration,
    /// 99th percentile of the tick thread's own lateness: when it handed a task to the executor,
    /// minus the task's deadline. Unlike `lateness_*`, this leaves out time spent queued in a busy
    /// pool, so it shows whether the tick thread keeps time when the executor does not.
    pub handoff_p99: Duration,
    /// Largest hand-off lateness seen, exact.
    pub handoff_max: Duration,
    /// Times the tick thread woke from sleep: for a due task, to stamp adds within a tick of
    /// them, for a clock move, or (at most once for each) for an earliest deadline that was
    /// cancelled or moved later while it slept. Stays still while nothing is due and nothing is
    /// added.
    pub tick_wakeups: u64,
    /// The message of the latest panic, if any.
    pub last_panic: Option<String>,
    /// Classes isolated now (their tasks run on the slow pool; see
    /// [`Isolation`](crate::Isolation)), by name; `""` is the default class of unnamed one-shot
    /// tasks. Repeating tasks that are a class of their own are not listed (see `isolations`).
    pub isolated_classes: Vec<String>,
    /// Times a class was isolated, own classes of repeating tasks included.
    pub isolations: u64,
    /// Run times on the timer's executor (and executors tasks named): empty without isolation,
    /// which is what times runs.
    pub run_time: RunTimes,
    /// Run times on the slow pool.
    pub slow_run_time: RunTimes,
    /// Each named class ([`Task::class`](crate::Task::class)) in the order first named, with its
    /// own figures: empty without isolation, which is what times runs.
    pub classes: Vec<ClassStats>,
}

/// One named class's figures (see [`Stats::classes`]): what its runs took, how late they started,
/// how many of its periodic runs were skipped, and its isolation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClassStats {
    /// The class's name.
    pub name: String,
    /// Its run times, on every pool (the timer's and the slow pool), on the timer's clock.
    pub run_time: RunTimes,
    /// 99th percentile lateness of its runs (start minus the instant meant), to within 1/8.
    pub lateness_p99: Duration,
    /// Largest lateness of its runs, exact.
    pub lateness_max: Duration,
    /// Its periodic runs skipped by their misfire policy (see [`Stats::skipped`]).
    pub skipped: u64,
    /// True while it is isolated (its tasks run on the slow pool).
    pub isolated: bool,
    /// Times it was isolated.
    pub isolations: u64,
}

/// The distribution of run times on one pool, measured on the timer's clock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunTimes {
    /// Runs timed.
    pub runs: u64,
    /// Median, to within 1/8 of its value.
    pub p50: Duration,
    /// 99th percentile, to within 1/8 of its value.
    pub p99: Duration,
    /// Longest, exact.
    pub max: Duration,
}

impl RunTimes {
    pub(crate) fn of(h: &Histogram) -> Self {
        let (p50, p99, max) = h.summary();
        RunTimes {
            runs: h.count(),
            p50: Duration::from_nanos(p50),
            p99: Duration::from_nanos(p99),
            max: Duration::from_nanos(max),
        }
    }
}
