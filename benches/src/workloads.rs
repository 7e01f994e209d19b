//! The workloads, as generic functions over [`TimerQueue`]: fixed seeds, virtual time in ms.
//!
//! Each function times only the operations it reports, verifies the outcome (every timer fired or
//! cancelled exactly as planned, nothing early) and panics with the implementation's name if not.
//!
//! | id | shape |
//! |----|-------|
//! | W1 | N timers, deadlines log-uniform in 1 ms ..= 24 h; insert all, then advance to the last deadline |
//! | W2 | Kafka purgatory churn: 30 s timeouts, 99 % cancelled 1..=1000 ms after insert, ~N live |
//! | W3 | N timers, deadlines uniform in 1 ..= 500 ms; insert all, then fire all |
//! | W4 | W1 at growing N |
//! | W5 | bytes per pending timer holding a `Box<dyn FnOnce() + Send>` that captures nothing |

use std::hint::black_box;
use std::time::{Duration, Instant};

use tickwheel_wheel::TimingWheel;

use crate::alloc;
use crate::rng::Rng;
use crate::{Cancel, TimerQueue};

/// One day in ms: the upper end of W1's deadlines.
pub const DAY_MS: u64 = 86_400_000;

/// Upper end of W3's deadlines, in ms.
pub const SHORT_MS: u64 = 500;

/// The seed of every generated workload.
pub const SEED: u64 = 0x5EED_2026_0001;

/// Item type of W5: a boxed task, as a timer service stores it.
pub type Job = Box<dyn FnOnce() + Send>;

/// How long the timed part of a run took, and how many operations it did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    /// Wall-clock time of the timed part.
    pub elapsed: Duration,
    /// Operations (inserts, cancels, fires) or timers it covers.
    pub ops: u64,
}

impl Timing {
    /// Nanoseconds per operation.
    pub fn ns_per_op(&self) -> f64 {
        self.elapsed.as_nanos() as f64 / self.ops.max(1) as f64
    }

    /// The faster of two runs of the same thing.
    pub fn min(self, other: Timing) -> Timing {
        if other.elapsed < self.elapsed {
            other
        } else {
            self
        }
    }
}

/// `n` deadlines log-uniform in `1 ..= DAY_MS` (ms), in random order.
pub fn long_range_deadlines(n: usize, seed: u64) -> Vec<u64> {
    let mut rng = Rng::new(seed);
    let hi = (DAY_MS as f64).ln();
    (0..n)
        .map(|_| ((rng.unit() * hi).exp() as u64).clamp(1, DAY_MS))
        .collect()
}

/// `n` deadlines uniform in `1 ..= SHORT_MS` (ms), in random order.
pub fn short_range_deadlines(n: usize, seed: u64) -> Vec<u64> {
    let mut rng = Rng::new(seed);
    (0..n).map(|_| rng.range(1, SHORT_MS)).collect()
}

/// W1, W3, W4: inserts one timer per deadline (the item is its deadline), then advances to the
/// last deadline as each implementation's timer thread would (every [`TimerQueue::advance`]
/// steps through its own expirations). Times insert + fire; checks that everything fired
/// exactly once and nothing fired before its deadline.
pub fn insert_then_fire<Q: TimerQueue<u64>>(deadlines: &[u64]) -> Timing {
    let end = deadlines.iter().copied().max().unwrap_or(1);
    let expected_sum = deadlines.iter().fold(0u64, |s, &d| s.wrapping_add(d));
    let mut q = Q::new();
    let start = Instant::now();
    for &d in deadlines {
        black_box(q.insert(d, d));
    }
    let (mut fired, mut sum, mut early) = (0usize, 0u64, 0usize);
    q.advance(end, |d| {
        fired += 1;
        sum = sum.wrapping_add(d);
        early += usize::from(d > end);
    });
    let elapsed = start.elapsed();
    assert_eq!(
        fired,
        deadlines.len(),
        "{}: fired {fired} of {}",
        Q::NAME,
        deadlines.len()
    );
    assert_eq!(
        sum,
        expected_sum,
        "{}: fired a different set of timers",
        Q::NAME
    );
    assert_eq!(early, 0, "{}: fired {early} timers early", Q::NAME);
    assert!(
        q.is_empty(),
        "{}: {} timers left after the end",
        Q::NAME,
        q.len()
    );
    Timing {
        elapsed,
        ops: deadlines.len() as u64,
    }
}

/// W1's "batch drain" row: our wheel advanced ONCE to the last deadline, which no timer thread
/// does (it skips every cascade a stepped drive performs). Kept as a secondary figure, to show
/// what the cascades cost; the headline steps ([`TimerQueue::advance`] for the wheel).
pub fn insert_then_fire_one_advance(deadlines: &[u64]) -> Timing {
    let end = deadlines.iter().copied().max().unwrap_or(1);
    let expected_sum = deadlines.iter().fold(0u64, |s, &d| s.wrapping_add(d));
    let mut w = <TimingWheel<u64> as TimerQueue<u64>>::new();
    let start = Instant::now();
    for &d in deadlines {
        black_box(TimerQueue::insert(&mut w, d, d));
    }
    let (mut fired, mut sum) = (0usize, 0u64);
    TimingWheel::advance(&mut w, end, |d| {
        fired += 1;
        sum = sum.wrapping_add(d);
    });
    let elapsed = start.elapsed();
    assert_eq!(
        (fired, sum),
        (deadlines.len(), expected_sum),
        "tickwheel-wheel batch drain: fired a different set of timers"
    );
    Timing {
        elapsed,
        ops: deadlines.len() as u64,
    }
}

/// W2's parameters: Kafka's purgatory shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChurnParams {
    /// Timers inserted per ms.
    pub rate_per_ms: u64,
    /// Every timer's timeout, ms.
    pub timeout_ms: u64,
    /// One timer in this many is left to time out; the others are cancelled.
    pub timeout_one_in: u64,
    /// A cancelled timer is cancelled this long after its insert: uniform in `1 ..= max`, ms.
    pub complete_max_ms: u64,
    /// Untimed warm-up, ms of virtual time (at least the timeout, to reach the steady state).
    pub warmup_ms: u64,
    /// Timed window after the warm-up, ms of virtual time.
    pub window_ms: u64,
}

impl ChurnParams {
    /// Parameters that keep about `live` timers pending in the steady state.
    pub fn for_live(live: usize, window_ms: u64) -> Self {
        let mut p = ChurnParams {
            rate_per_ms: 1,
            timeout_ms: 30_000,
            timeout_one_in: 100,
            complete_max_ms: 1000,
            warmup_ms: 31_000,
            window_ms,
        };
        p.rate_per_ms = ((live as f64 / p.mean_lifetime_ms()).round() as u64).max(1);
        p
    }

    /// Mean time a timer stays pending, ms.
    pub fn mean_lifetime_ms(&self) -> f64 {
        let timeout_share = 1.0 / self.timeout_one_in as f64;
        (1.0 - timeout_share) * (1 + self.complete_max_ms) as f64 / 2.0
            + timeout_share * self.timeout_ms as f64
    }

    /// Timers pending in the steady state, by Little's law.
    pub fn expected_live(&self) -> f64 {
        self.rate_per_ms as f64 * self.mean_lifetime_ms()
    }
}

/// What a W2 run did and measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ChurnResult {
    /// The timed window: inserts + cancels + fires in it.
    pub timing: Timing,
    /// Highest heap usage of the implementation during the run (0 without the counting allocator).
    pub peak_bytes: usize,
    /// Most timers pending at once (sampled every ms).
    pub max_live: usize,
    /// Totals over the run.
    pub inserted: u64,
    /// Cancels (each returned true).
    pub cancelled: u64,
    /// Timeouts fired.
    pub fired: u64,
}

/// W2: the churn loop. Each ms: advance to it (checking every fired timer is due, and late by no
/// more than 1 ms), cancel the timers completing now (each cancel must succeed: it comes long
/// before the timeout), insert `rate_per_ms` new ones.
pub fn churn<Q: Cancel<u64>>(p: &ChurnParams) -> ChurnResult {
    const RING: usize = 1024;
    assert!(p.complete_max_ms < RING as u64 && p.complete_max_ms < p.timeout_ms);
    let mut rng = Rng::new(SEED ^ 0xC0FFEE);
    // The cancel schedule, by ms modulo RING; allocated before the memory measurement starts.
    let mut ring: Vec<Vec<Q::Id>> = (0..RING)
        .map(|_| Vec::with_capacity(2 * p.rate_per_ms as usize + 64))
        .collect();
    let end = p.warmup_ms + p.window_ms;
    let (mut inserted, mut cancelled, mut fired) = (0u64, 0u64, 0u64);
    let (mut expect_cancelled, mut expect_fired) = (0u64, 0u64);
    let (mut early, mut too_late, mut failed_cancels) = (0u64, 0u64, 0u64);
    let (mut max_live, mut ops_at_window) = (0usize, 0u64);
    let mut window_start = None;

    let base = alloc::current();
    alloc::reset_peak();
    let mut q = Q::new();
    for t in 1..=end {
        if t == p.warmup_ms + 1 {
            ops_at_window = inserted + cancelled + fired;
            window_start = Some(Instant::now());
        }
        q.advance(t, |d| {
            fired += 1;
            early += u64::from(d > t);
            too_late += u64::from(t > d + 1);
        });
        for id in ring[(t % RING as u64) as usize].drain(..) {
            if q.cancel(id) {
                cancelled += 1;
            } else {
                failed_cancels += 1;
            }
        }
        for _ in 0..p.rate_per_ms {
            let deadline = t + p.timeout_ms;
            let id = q.insert(deadline, deadline);
            inserted += 1;
            if rng.range(1, p.timeout_one_in) == 1 {
                expect_fired += u64::from(deadline <= end);
            } else {
                let at = t + rng.range(1, p.complete_max_ms);
                expect_cancelled += u64::from(at <= end);
                ring[(at % RING as u64) as usize].push(id);
            }
        }
        max_live = max_live.max(q.len());
    }
    let elapsed = window_start.map_or(Duration::ZERO, |s| s.elapsed());
    let peak_bytes = alloc::peak().saturating_sub(base);
    let name = Q::NAME;
    assert_eq!(early, 0, "{name}: {early} timers fired early");
    assert_eq!(
        too_late, 0,
        "{name}: {too_late} timers fired more than 1 ms late"
    );
    assert_eq!(
        failed_cancels, 0,
        "{name}: {failed_cancels} cancels of pending timers failed"
    );
    assert_eq!(cancelled, expect_cancelled, "{name}: cancelled count");
    assert_eq!(fired, expect_fired, "{name}: fired count");
    assert_eq!(
        q.len() as u64,
        inserted - cancelled - fired,
        "{name}: pending count does not add up"
    );
    drop(q);
    ChurnResult {
        timing: Timing {
            elapsed,
            ops: inserted + cancelled + fired - ops_at_window,
        },
        peak_bytes,
        max_live,
        inserted,
        cancelled,
        fired,
    }
}

/// W2's second shape: `live` timers, all with the same timeout, cancelled uniformly at random
/// among the live ones (request timeouts that complete at any point of their life).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UniformParams {
    /// Timers pending once the warm-up is over.
    pub live: usize,
    /// Every timer's timeout, ms.
    pub timeout_ms: u64,
    /// Timed window after the warm-up, ms of virtual time.
    pub window_ms: u64,
}

impl UniformParams {
    /// Inserts per ms: `live` timers over one timeout.
    pub fn rate_per_ms(&self) -> u64 {
        (self.live as u64 / self.timeout_ms).max(1)
    }
}

/// W2, uniform shape. Warm-up: `rate` inserts per ms for one timeout (no cancels), so `live`
/// timers are pending. Then each ms of the window: advance to it (checking each fired timer is
/// due and at most 1 ms late), cancel `rate / 2` timers picked uniformly among the live ones
/// (each must succeed), insert `rate`. The bookkeeping (which timers are live) is allocated before
/// the memory measurement starts.
pub fn churn_uniform<Q: Cancel<u64>>(p: &UniformParams) -> ChurnResult {
    let rate = p.rate_per_ms();
    let total = (rate * (p.timeout_ms + p.window_ms)) as usize;
    let mut rng = Rng::new(SEED ^ 0x0051_F0A1);
    // The live timers (id, item) in any order, and each item's index there.
    let mut live: Vec<(Q::Id, u64)> = Vec::with_capacity(total);
    let mut pos: Vec<u32> = vec![u32::MAX; total];
    let (mut inserted, mut cancelled, mut fired) = (0u64, 0u64, 0u64);
    let (mut early, mut too_late, mut failed_cancels, mut max_live) = (0u64, 0u64, 0u64, 0usize);
    let (mut ops_at_window, mut window_start) = (0u64, None);

    let base = alloc::current();
    alloc::reset_peak();
    let mut q = Q::new();
    let take = |live: &mut Vec<(Q::Id, u64)>, pos: &mut Vec<u32>, i: usize| {
        let (id, item) = live.swap_remove(i);
        if let Some(&(_, moved)) = live.get(i) {
            pos[moved as usize] = i as u32;
        }
        pos[item as usize] = u32::MAX;
        id
    };
    for t in 1..=p.timeout_ms + p.window_ms {
        if t == p.timeout_ms + 1 {
            ops_at_window = inserted + cancelled + fired;
            window_start = Some(Instant::now());
        }
        q.advance(t, |item| {
            fired += 1;
            // Item k was inserted at ms k / rate + 1, due a timeout later.
            let due = item / rate + 1 + p.timeout_ms;
            early += u64::from(due > t);
            too_late += u64::from(t > due + 1);
            let i = pos[item as usize] as usize;
            take(&mut live, &mut pos, i);
        });
        if t > p.timeout_ms {
            for _ in 0..rate / 2 {
                if live.is_empty() {
                    break;
                }
                let i = rng.range(0, live.len() as u64 - 1) as usize;
                let id = take(&mut live, &mut pos, i);
                if q.cancel(id) {
                    cancelled += 1;
                } else {
                    failed_cancels += 1;
                }
            }
        }
        for _ in 0..rate {
            let item = inserted;
            let id = q.insert(t + p.timeout_ms, item);
            pos[item as usize] = live.len() as u32;
            live.push((id, item));
            inserted += 1;
        }
        max_live = max_live.max(q.len());
    }
    let elapsed = window_start.map_or(Duration::ZERO, |s| s.elapsed());
    let peak_bytes = alloc::peak().saturating_sub(base);
    let name = Q::NAME;
    assert_eq!(early, 0, "{name}: {early} timers fired early");
    assert_eq!(
        too_late, 0,
        "{name}: {too_late} timers fired more than 1 ms late"
    );
    assert_eq!(
        failed_cancels, 0,
        "{name}: {failed_cancels} cancels of live timers failed"
    );
    assert_eq!(q.len(), live.len(), "{name}: pending count does not add up");
    drop(q);
    ChurnResult {
        timing: Timing {
            elapsed,
            ops: inserted + cancelled + fired - ops_at_window,
        },
        peak_bytes,
        max_live,
        inserted,
        cancelled,
        fired,
    }
}

/// W5's measurement: heap bytes per pending timer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MemoryResult {
    /// Bytes held per pending timer after inserting them all.
    pub retained_per_timer: f64,
    /// Peak bytes per timer while inserting (growth doubles buffers for a moment).
    pub peak_per_timer: f64,
}

/// W5: inserts one boxed no-capture closure per deadline and measures the heap the queue holds,
/// with the counting allocator (all zeros without it). Checks the pending count, then drops the
/// queue (firing a day of timers would only measure the flat wheel's ticking again).
pub fn memory_per_timer<Q: TimerQueue<Job>>(deadlines: &[u64]) -> MemoryResult {
    let n = deadlines.len().max(1) as f64;
    let base = alloc::current();
    alloc::reset_peak();
    let mut q = Q::new();
    for &d in deadlines {
        let job: Job = Box::new(|| {});
        black_box(q.insert(d, job));
    }
    let retained = alloc::current().saturating_sub(base);
    let peak = alloc::peak().saturating_sub(base);
    assert_eq!(
        q.len(),
        deadlines.len(),
        "{}: pending count after inserts",
        Q::NAME
    );
    drop(q);
    MemoryResult {
        retained_per_timer: retained as f64 / n,
        peak_per_timer: peak as f64 / n,
    }
}

/// W5b: heap bytes per pending task through the `Timer` service (a captureless
/// `Task::after`, handle dropped; everything the service holds for it), measured with the
/// counting allocator, and what `Timer::heap_bytes()` reports, both per task. On a manual clock
/// that never moves, so nothing fires.
pub fn timer_memory_per_task(deadlines: &[u64]) -> (f64, f64) {
    use std::sync::Arc;
    use tickwheel::{InlineExecutor, ManualClock, Task, Timer};
    let timer = Timer::builder()
        .clock(ManualClock::new())
        .executor(Arc::new(InlineExecutor::new()))
        .build()
        .expect("W5b: a timer");
    let n = deadlines.len().max(1) as f64;
    let base = alloc::current();
    for &d in deadlines {
        let h = timer
            .add_or_submit(Task::after(Duration::from_millis(d), || {}))
            .expect("W5b: add");
        drop(h);
    }
    let held = alloc::current().saturating_sub(base);
    assert_eq!(timer.pending(), deadlines.len(), "W5b: pending count");
    (held as f64 / n, timer.heap_bytes() as f64 / n)
}

/// W5 cross-check: what our wheel's own `heap_bytes()` reports per timer for the same inserts.
pub fn wheel_heap_bytes_per_timer(deadlines: &[u64]) -> f64 {
    let mut w = <TimingWheel<Job> as TimerQueue<Job>>::new();
    for &d in deadlines {
        let job: Job = Box::new(|| {});
        TimerQueue::insert(&mut w, d, job);
    }
    w.heap_bytes() as f64 / deadlines.len().max(1) as f64
}
