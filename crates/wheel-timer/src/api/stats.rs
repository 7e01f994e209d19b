//! Counters and a lock-free lateness histogram, read by `Timer::stats`.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

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

/// Lateness in nanoseconds, in log-linear buckets: 8 per power of two, so any value lands in a
/// bucket whose bounds are within 12.5% of it. 64 * 8 counters, one relaxed add per record.
pub(crate) struct Histogram {
    buckets: Box<[AtomicU64]>,
    max: AtomicU64,
}

const SUB: u32 = 3; // 2^3 sub-buckets per power of two

fn index(v: u64) -> usize {
    if v < (1 << SUB) {
        return v as usize;
    }
    let exp = 63 - v.leading_zeros(); // >= SUB
    let sub = (v >> (exp - SUB)) & ((1 << SUB) - 1);
    (((exp - SUB + 1) << SUB) as u64 + sub) as usize
}

/// The largest value that lands in bucket `i`.
fn upper(i: usize) -> u64 {
    let i = i as u64;
    if i < (1 << SUB) {
        return i;
    }
    let exp = (i >> SUB) + u64::from(SUB) - 1;
    let sub = i & ((1 << SUB) - 1);
    let low = (1u64 << exp) | (sub << (exp - u64::from(SUB)));
    low.saturating_add((1u64 << (exp - u64::from(SUB))) - 1)
}

impl Histogram {
    pub(crate) fn new() -> Self {
        Histogram {
            buckets: (0..=index(u64::MAX)).map(|_| AtomicU64::new(0)).collect(),
            max: AtomicU64::new(0),
        }
    }

    pub(crate) fn record(&self, ns: u64) {
        self.buckets[index(ns)].fetch_add(1, Relaxed);
        // Most values are no new maximum: a load keeps the line shared between the threads that
        // record, where `fetch_max` would take it from the others every time.
        if ns > self.max.load(Relaxed) {
            self.max.fetch_max(ns, Relaxed);
        }
    }

    /// Values recorded.
    pub(crate) fn count(&self) -> u64 {
        self.buckets.iter().map(|b| b.load(Relaxed)).sum()
    }

    /// `(p50, p99, max)` in nanoseconds; zeros when empty.
    pub(crate) fn summary(&self) -> (u64, u64, u64) {
        let counts: Vec<u64> = self.buckets.iter().map(|b| b.load(Relaxed)).collect();
        let total: u64 = counts.iter().sum();
        let max = self.max.load(Relaxed);
        if total == 0 {
            return (0, 0, max);
        }
        let quantile = |q: f64| {
            let rank = ((total as f64 * q).ceil() as u64).max(1);
            let mut seen = 0;
            for (i, &c) in counts.iter().enumerate() {
                seen += c;
                if seen >= rank {
                    return upper(i).min(max);
                }
            }
            max
        };
        (quantile(0.50), quantile(0.99), max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_bound_their_values_within_an_eighth() {
        for v in (0..5000u64).chain([1 << 20, 123_456_789, u64::MAX / 3, u64::MAX - 1, u64::MAX]) {
            let i = index(v);
            assert!(upper(i) >= v, "v {v} bucket {i} upper {}", upper(i));
            assert!(
                i == 0 || upper(i - 1) < v,
                "v {v} also fits bucket {}",
                i - 1
            );
            assert!(
                upper(i) - v <= v / 8 + 1,
                "v {v}: bucket too wide ({})",
                upper(i)
            );
        }
    }

    #[test]
    fn percentiles() {
        let h = Histogram::new();
        assert_eq!(h.summary(), (0, 0, 0));
        for v in 1..=1000u64 {
            h.record(v * 1000);
        }
        let (p50, p99, max) = h.summary();
        assert!((500_000..=570_000).contains(&p50), "{p50}");
        assert!((990_000..=1_000_000).contains(&p99), "{p99}");
        assert_eq!(max, 1_000_000);
    }
}
