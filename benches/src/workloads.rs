//! What the virtual-time workloads share: the seed, W1's deadlines, [`Timing`], insert-then-fire.
//!
//! Every workload is a generic function over [`TimerQueue`] on a fixed seed, in virtual time (ms,
//! clock starting at 0). Each times only the operations it reports, verifies the outcome (every
//! timer fired or cancelled exactly as planned, nothing early) and panics with the
//! implementation's name if not. The workloads themselves live with their report sections in
//! [`scenario`](crate::scenario), one file each; here is what several of them use:
//! [`long_range_deadlines`] (W1, W4, W5), [`insert_then_fire`] (W1, W3, W4) and [`ChurnResult`]
//! (W2, W9).

use std::hint::black_box;
use std::time::{Duration, Instant};

use crate::TimerQueue;
use crate::rng::Rng;

/// One day in ms: the upper end of W1's deadlines.
pub const DAY_MS: u64 = 86_400_000;

/// The seed of every generated workload.
pub const SEED: u64 = 0x5EED_2026_0001;

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

/// What a churn run (W2's two shapes, W9) did and measured.
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
