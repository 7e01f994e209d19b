//! The threaded service workloads (W6–W8) on the real clock: each runs, verifies and measures.
//!
//! | id | shape |
//! |----|-------|
//! | W6 | 1 or 2 threads, each adding a 30 s timer and cancelling it, M times; wall time |
//! | W7 | N timers pending an hour out; the tick thread's wake-ups and the CPU used over an idle window |
//! | W8 | N timers due uniformly over a window; each task records how late it ran |
//!
//! Like [`workloads`](crate::workloads), every function checks its counts (every add accepted,
//! every cancel successful, every task run exactly once, none early) and panics on a miscount.
//! Timing figures are only reported, never checked: the machine may be shared.

use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use tickwheel::{Stats, Task, Timer};

use crate::mutex_heap::MutexHeapTimer;
use crate::procfs::{self, ThreadSample};
use crate::rng::Rng;

/// Name of our `Timer` in the tables.
pub const TIMER_NAME: &str = "tickwheel Timer";

/// W6's delay: long enough that nothing fires during the run.
pub const W6_DELAY: Duration = Duration::from_secs(30);

/// W7's delay: "an hour out".
pub const W7_DELAY: Duration = Duration::from_secs(3600);

/// Runs `body(thread_index)` on `threads` threads started together; returns the wall time from
/// the common start until the last one finished.
fn run_threads(threads: usize, body: impl Fn(usize) + Sync) -> Duration {
    let barrier = Barrier::new(threads + 1);
    thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let (barrier, body) = (&barrier, &body);
                s.spawn(move || {
                    barrier.wait();
                    body(i);
                })
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        for h in handles {
            if let Err(panic) = h.join() {
                std::panic::resume_unwind(panic);
            }
        }
        start.elapsed()
    })
}

/// The shape of a W6 run: threads, pairs per thread, other timers pending alongside, and how long
/// each task lives before its cancel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AddCancel {
    /// Threads adding and cancelling at once.
    pub threads: usize,
    /// Add + cancel pairs per thread.
    pub ops: usize,
    /// Tasks pending alongside (due in 1 min ..= 1 h, added untimed first).
    pub background: usize,
    /// 0: each add is cancelled at once; `w`: each thread keeps its last `w` tasks and cancels
    /// the oldest after each add (a request timeout cancelled when the request completes a little
    /// later: by then the task sits in the wheel, not in the add path's queue).
    pub window: usize,
}

/// Runs `add` and `cancel` through the window of `shape` on the current thread: `ops` adds,
/// each followed by the cancel of the task `window` adds older (or of itself).
fn add_cancel_loop<H>(
    shape: AddCancel,
    mut add: impl FnMut() -> H,
    mut cancel: impl FnMut(H) -> bool,
    name: &str,
) {
    let mut live = std::collections::VecDeque::with_capacity(shape.window + 1);
    for _ in 0..shape.ops {
        live.push_back(add());
        if live.len() > shape.window {
            let h = live.pop_front().expect("just pushed");
            assert!(cancel(h), "W6 {name}: cancel of a pending timer failed");
        }
    }
    for h in live {
        assert!(cancel(h), "W6 {name}: cancel of a pending timer failed");
    }
}

/// W6 on our [`Timer`]: each thread adds a [`W6_DELAY`] task (a closure capturing nothing) and
/// cancels it through its handle, in the shape `shape`. Returns the wall time.
///
/// # Panics
///
/// If an add is refused, a cancel fails, anything fires, or the counters disagree at the end.
pub fn add_cancel_timer(shape: AddCancel) -> Duration {
    let timer = Timer::builder()
        .name("w6")
        .threads(1)
        .build()
        .unwrap_or_else(|e| panic!("W6 {TIMER_NAME}: build failed: {e}"));
    for d in background_delays(shape.background) {
        // Fire-and-forget: the handle is dropped, the task stays.
        let _ = timer
            .add_or_submit(Task::after(d, || {}))
            .unwrap_or_else(|e| panic!("W6 {TIMER_NAME}: add refused: {e}"));
    }
    let elapsed = run_threads(shape.threads, |_| {
        add_cancel_loop(
            shape,
            || {
                timer
                    .add_or_submit(Task::after(W6_DELAY, || {}))
                    .unwrap_or_else(|e| panic!("W6 {TIMER_NAME}: add refused: {e}"))
            },
            |h| h.cancel(),
            TIMER_NAME,
        )
    });
    let n = (shape.threads * shape.ops) as u64;
    let s = timer.stats();
    let bg = shape.background;
    assert!(
        s.added == n + bg as u64 && s.cancelled == n && s.fired == 0 && s.pending == bg,
        "W6 {TIMER_NAME}: expected {n} added and cancelled, {bg} pending, none fired; got {s:?}"
    );
    let left = timer.shutdown().len();
    assert_eq!(
        left, bg,
        "W6 {TIMER_NAME}: shutdown must hand back the pending tasks"
    );
    elapsed
}

/// W6's optional background: `n` delays uniform in 1 min ..= 1 h, fixed seed (none comes due
/// during a run: a slow, oversubscribed baseline run once outlasted the shortest of 1 s).
fn background_delays(n: usize) -> impl Iterator<Item = Duration> {
    let mut rng = Rng::new(crate::workloads::SEED);
    (0..n).map(move |_| Duration::from_millis(rng.range(60_000, 3_600_000)))
}

/// W6 on the [`MutexHeapTimer`] baseline, exactly as [`add_cancel_timer`].
///
/// # Panics
///
/// If a cancel fails, anything fires, or a job is left at the end.
pub fn add_cancel_baseline(shape: AddCancel) -> Duration {
    let timer = MutexHeapTimer::new();
    for d in background_delays(shape.background) {
        timer.schedule(d, Box::new(|| {}));
    }
    let name = MutexHeapTimer::NAME;
    let elapsed = run_threads(shape.threads, |_| {
        add_cancel_loop(
            shape,
            || timer.schedule(W6_DELAY, Box::new(|| {})),
            |id| timer.cancel(id),
            name,
        )
    });
    let bg = shape.background;
    assert!(
        timer.len() == bg && timer.fired() == 0,
        "W6 {name}: {} pending (expected {bg}), {} fired after all cancels",
        timer.len(),
        timer.fired()
    );
    let left = timer.shutdown().len();
    assert_eq!(
        left, bg,
        "W6 {name}: shutdown must hand back the pending jobs"
    );
    elapsed
}

/// Latency of single adds, nanoseconds: what one `Instant::now()` pair around the add measured,
/// less the same pair around nothing (the clock's own cost, measured in the same run).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct AddLatency {
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Largest.
    pub max: f64,
    /// The clock pair's own median cost, subtracted from each figure above.
    pub clock: f64,
}

fn latency_of(mut ns: Vec<u64>, clock: f64) -> AddLatency {
    ns.sort_unstable();
    let at = |q: f64| {
        let i = ((ns.len() as f64 * q).ceil() as usize).clamp(1, ns.len()) - 1;
        (ns[i] as f64 - clock).max(0.0)
    };
    AddLatency {
        p50: at(0.50),
        p99: at(0.99),
        p999: at(0.999),
        max: (ns[ns.len() - 1] as f64 - clock).max(0.0),
        clock,
    }
}

/// The median cost of an `Instant::now()` pair around nothing.
fn clock_pair_cost(n: usize) -> f64 {
    let mut ns: Vec<u64> = (0..n)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(());
            t.elapsed().as_nanos() as u64
        })
        .collect();
    ns.sort_unstable();
    ns[ns.len() / 2] as f64
}

/// W6 latency: `n` single adds on one thread, each timed alone (the cancel that follows is not),
/// through our [`Timer`] and through the baseline, with `background` other timers pending.
/// Includes every add that drains a full ring (one in 256 here).
///
/// # Panics
///
/// If an add is refused or a cancel fails.
pub fn add_latency(n: usize, background: usize) -> (AddLatency, AddLatency) {
    let clock = clock_pair_cost(n.min(100_000));
    let timer = Timer::builder()
        .name("w6l")
        .threads(1)
        .build()
        .unwrap_or_else(|e| panic!("W6 {TIMER_NAME}: build failed: {e}"));
    for d in background_delays(background) {
        let _ = timer.add_or_submit(Task::after(d, || {}));
    }
    let heap = MutexHeapTimer::new();
    for d in background_delays(background) {
        heap.schedule(d, Box::new(|| {}));
    }
    let (mut ours, mut base) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for _ in 0..n {
        let t = Instant::now();
        let h = timer.add_or_submit(Task::after(W6_DELAY, || {}));
        ours.push(t.elapsed().as_nanos() as u64);
        assert!(
            h.map(|h| h.cancel()).unwrap_or(false),
            "W6 {TIMER_NAME}: add or cancel failed"
        );
        let t = Instant::now();
        let id = heap.schedule(W6_DELAY, Box::new(|| {}));
        base.push(t.elapsed().as_nanos() as u64);
        assert!(
            heap.cancel(id),
            "W6 {}: cancel failed",
            MutexHeapTimer::NAME
        );
    }
    (latency_of(ours, clock), latency_of(base, clock))
}

/// What W7 measured over its idle window.
#[derive(Clone, Debug, PartialEq)]
pub struct IdleResult {
    /// Timers pending through the window.
    pub timers: usize,
    /// Wall time to add them.
    pub add_time: Duration,
    /// Length of the idle window.
    pub window: Duration,
    /// `stats().tick_wakeups` at the end of the window minus at its start.
    pub wakeups: u64,
    /// The tick thread at the start and end of the window, if `/proc` could tell.
    pub tick_thread: Option<(ThreadSample, ThreadSample)>,
    /// CPU time of the whole process over the window, if `/proc` could tell.
    pub process_cpu: Option<Duration>,
}

/// W7: adds `n` tasks due [`W7_DELAY`] out, lets the timer settle, then watches it for `window`.
///
/// # Panics
///
/// If an add is refused, anything fires, or shutdown does not hand back all `n` tasks.
pub fn idle(n: usize, window: Duration, settle: Duration) -> IdleResult {
    let timer = Timer::builder()
        .name("w7")
        .threads(2)
        .build()
        .unwrap_or_else(|e| panic!("W7 {TIMER_NAME}: build failed: {e}"));
    let start = Instant::now();
    for _ in 0..n {
        // The handle is dropped: fire-and-forget adds keep their task.
        let _ = timer
            .add_or_submit(Task::after(W7_DELAY, || {}))
            .unwrap_or_else(|e| panic!("W7 {TIMER_NAME}: add refused: {e}"));
    }
    let add_time = start.elapsed();
    thread::sleep(settle);
    let before = timer.stats();
    let (tick0, cpu0) = (procfs::thread_named("w7-tick"), procfs::process_cpu());
    thread::sleep(window);
    let (tick1, cpu1) = (procfs::thread_named("w7-tick"), procfs::process_cpu());
    let after = timer.stats();
    let check = |s: &Stats| {
        assert!(
            s.pending == n && s.fired == 0,
            "W7 {TIMER_NAME}: expected {n} pending and none fired; got {s:?}"
        );
    };
    check(&before);
    check(&after);
    let left = timer.shutdown().len();
    assert_eq!(
        left, n,
        "W7 {TIMER_NAME}: shutdown must hand back every pending task"
    );
    IdleResult {
        timers: n,
        add_time,
        window,
        wakeups: after.tick_wakeups - before.tick_wakeups,
        tick_thread: tick0.zip(tick1),
        process_cpu: cpu0.zip(cpu1).map(|(a, b)| b.saturating_sub(a)),
    }
}

/// Lateness percentiles, in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Lateness {
    /// Median.
    pub p50: i64,
    /// 99th percentile.
    pub p99: i64,
    /// Largest.
    pub max: i64,
}

impl Lateness {
    /// Nearest-rank percentiles of `sorted` (ascending, not empty).
    pub fn of_sorted(sorted: &[i64]) -> Self {
        let at =
            |q: f64| sorted[((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len()) - 1];
        Lateness {
            p50: at(0.50),
            p99: at(0.99),
            max: sorted[sorted.len() - 1],
        }
    }
}

/// What W8 measured.
#[derive(Clone, Debug, PartialEq)]
pub struct AccuracyResult {
    /// Timers run.
    pub timers: usize,
    /// Wall time to add them (all before the first deadline).
    pub add_time: Duration,
    /// Lateness as the tasks measured it: `Instant::now()` at the start of the task minus its
    /// deadline.
    pub measured: Lateness,
    /// Earliest run relative to its deadline (negative: early).
    pub min: i64,
    /// Tasks that ran before their deadline (the run panics after reporting them).
    pub early: usize,
    /// The timer's own lateness histogram (`stats()`), p50/p99/max.
    pub stats: Lateness,
    /// The distribution measured by the tasks: (percentile, lateness ns) at a few percentiles.
    pub percentiles: Vec<(f64, i64)>,
}

/// Not run yet, in a lateness slot.
const NOT_RUN: i64 = i64::MIN;

/// Where W8's tasks record their lateness: one slot per task, preallocated.
struct Slots {
    lateness: Vec<AtomicI64>,
    ran: AtomicUsize,
    doubles: AtomicUsize,
}

/// Signed nanoseconds from `deadline` to `now` (negative: early).
pub(crate) fn signed_ns(now: Instant, deadline: Instant) -> i64 {
    match now.checked_duration_since(deadline) {
        Some(late) => i64::try_from(late.as_nanos()).unwrap_or(i64::MAX),
        None => -i64::try_from((deadline - now).as_nanos()).unwrap_or(i64::MAX),
    }
}

/// W8: `n` real-clock tasks due uniformly over `spread`, starting `lead` from now, on a timer
/// with a 1 ms tick and 2 executor threads; each records its lateness.
///
/// # Panics
///
/// If an add is refused, a task is lost (not run 10 s after the last deadline) or runs twice,
/// the timer's counters disagree, or any task ran early (after building the result, so the
/// message carries the figures).
pub fn accuracy(n: usize, spread: Duration, lead: Duration, seed: u64) -> AccuracyResult {
    let timer = Timer::builder()
        .name("w8")
        .tick(Duration::from_millis(1))
        .threads(2)
        .build()
        .unwrap_or_else(|e| panic!("W8 {TIMER_NAME}: build failed: {e}"));
    let slots = Arc::new(Slots {
        lateness: (0..n).map(|_| AtomicI64::new(NOT_RUN)).collect(),
        ran: AtomicUsize::new(0),
        doubles: AtomicUsize::new(0),
    });
    let mut rng = Rng::new(seed);
    let spread_ns = u64::try_from(spread.as_nanos()).unwrap_or(u64::MAX).max(1);
    let offsets: Vec<u64> = (0..n).map(|_| rng.range(0, spread_ns - 1)).collect();
    let start = Instant::now();
    let base = start + lead;
    for (i, &off) in offsets.iter().enumerate() {
        let deadline = base + Duration::from_nanos(off);
        let slots = slots.clone();
        let task = Task::at(deadline, move || {
            let late = signed_ns(Instant::now(), deadline);
            if slots.lateness[i].swap(late, Relaxed) != NOT_RUN {
                slots.doubles.fetch_add(1, Relaxed);
            }
            slots.ran.fetch_add(1, Relaxed);
        });
        timer
            .add_or_submit(task)
            .unwrap_or_else(|e| panic!("W8 {TIMER_NAME}: add refused: {e}"));
    }
    let add_time = start.elapsed();
    let give_up = base + spread + Duration::from_secs(10);
    thread::sleep((base + spread).saturating_duration_since(Instant::now()));
    while slots.ran.load(Relaxed) < n && Instant::now() < give_up {
        thread::sleep(Duration::from_millis(10));
    }
    let ran = slots.ran.load(Relaxed);
    assert!(
        ran == n,
        "W8 {TIMER_NAME}: lost tasks: {} of {n} never ran (10 s after the last deadline)",
        n - ran
    );
    let s = timer.stats();
    let left = timer.shutdown();
    let doubles = slots.doubles.load(Relaxed);
    assert!(
        doubles == 0 && s.fired == n as u64 && s.pending == 0 && left.is_empty(),
        "W8 {TIMER_NAME}: {doubles} tasks ran twice; expected {n} fired, none pending or returned; \
         got {s:?}, {} returned",
        left.len()
    );
    let mut sorted: Vec<i64> = slots.lateness.iter().map(|l| l.load(Relaxed)).collect();
    sorted.sort_unstable();
    let early = sorted.iter().take_while(|&&l| l < 0).count();
    let ns = |d: Duration| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX);
    let result = AccuracyResult {
        timers: n,
        add_time,
        measured: Lateness::of_sorted(&sorted),
        min: sorted[0],
        early,
        percentiles: [1.0, 10.0, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.9, 100.0]
            .iter()
            .map(|&q| {
                let rank =
                    ((sorted.len() as f64 * q / 100.0).ceil() as usize).clamp(1, sorted.len());
                (q, sorted[rank - 1])
            })
            .collect(),
        stats: Lateness {
            p50: ns(s.lateness_p50),
            p99: ns(s.lateness_p99),
            max: ns(s.lateness_max),
        },
    };
    assert!(
        early == 0,
        "W8 {TIMER_NAME}: {early} of {n} tasks ran early (the earliest {} ns before its deadline): {result:?}",
        -result.min
    );
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_by_nearest_rank() {
        let v: Vec<i64> = (1..=1000).collect();
        assert_eq!(
            Lateness::of_sorted(&v),
            Lateness {
                p50: 500,
                p99: 990,
                max: 1000
            }
        );
        assert_eq!(Lateness::of_sorted(&[7]).p99, 7);
    }

    #[test]
    fn signed_lateness() {
        let t = Instant::now();
        let later = t + Duration::from_micros(3);
        assert_eq!(signed_ns(later, t), 3000);
        assert_eq!(signed_ns(t, later), -3000);
        assert_eq!(signed_ns(t, t), 0);
    }

    #[test]
    fn small_runs_verify() {
        for shape in [
            AddCancel {
                threads: 2,
                ops: 1000,
                background: 0,
                window: 0,
            },
            AddCancel {
                threads: 1,
                ops: 1000,
                background: 500,
                window: 100,
            },
        ] {
            assert!(add_cancel_timer(shape) > Duration::ZERO);
            assert!(add_cancel_baseline(shape) > Duration::ZERO);
        }
        let (ours, base) = add_latency(2000, 100);
        assert!(ours.p50 <= ours.p999 && base.p50 <= base.p999);
        let r = accuracy(
            500,
            Duration::from_millis(100),
            Duration::from_millis(50),
            1,
        );
        assert_eq!((r.timers, r.early), (500, 0));
        let i = idle(1000, Duration::from_millis(100), Duration::from_millis(20));
        assert_eq!(i.timers, 1000);
    }
}
