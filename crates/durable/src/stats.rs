//! [`Stats`]: what the jobs did since they were opened, and the histogram behind its lateness and
//! commit-latency figures.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// What the jobs did since this handle opened the store (counters of this process; the store's
/// own counts are [`Jobs::counts`](crate::Jobs::counts)).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Jobs stored by `schedule`, `upsert`, `schedule_batch` and `requeue`.
    pub scheduled: u64,
    /// Runs of a handler started.
    pub fired: u64,
    /// Runs that succeeded (the job is then deleted).
    pub succeeded: u64,
    /// Failed runs with an attempt left (the job runs again after its backoff).
    pub retried: u64,
    /// Jobs moved to the dead-letter set (out of attempts, or skipped at open).
    pub dead: u64,
    /// Of those, jobs the misfire policy skipped at open.
    pub misfired: u64,
    /// Jobs removed by `cancel`.
    pub cancelled: u64,
    /// Jobs in the in-memory window now (armed in the timer, or running).
    pub in_memory: u64,
    /// Shards this node holds now (the embedded store: its one shard; a store for many nodes:
    /// this node's share).
    pub shards: u64,
    /// Lateness of runs, from the job's wall-clock deadline to its handler's start: median.
    pub lateness_p50: Duration,
    /// The same, 99th percentile.
    pub lateness_p99: Duration,
    /// The same, the largest.
    pub lateness_max: Duration,
    /// Time from an operation's request to the commit that holds it (its fsync included in the
    /// default durability): median.
    pub commit_p50: Duration,
    /// The same, 99th percentile.
    pub commit_p99: Duration,
    /// Transactions committed (each holds every operation that arrived while the last one
    /// committed).
    pub commits: u64,
    /// Reads of the store by the jobs themselves (the window's range reads, and the read of a
    /// job as it fires), not counting the caller's `get`, `counts` and `dead_letters`.
    pub store_reads: u64,
}

/// Sub-buckets per power of two: figures are kept to within 1/16 (about 6%), rounded up.
const SUB_BITS: u32 = 4;
const SUB: u64 = 1 << SUB_BITS;
const BUCKETS: usize = (64 - SUB_BITS as usize + 1) * SUB as usize;

/// A histogram of nanoseconds, written from any thread without a lock.
pub(crate) struct Histogram {
    counts: Box<[AtomicU64]>,
    max: AtomicU64,
}

impl Histogram {
    pub(crate) fn new() -> Histogram {
        Histogram {
            counts: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            max: AtomicU64::new(0),
        }
    }

    pub(crate) fn record(&self, ns: u64) {
        self.counts[bucket(ns)].fetch_add(1, Relaxed);
        self.max.fetch_max(ns, Relaxed);
    }

    /// The value at quantile `q` (0..=1), rounded up to its bucket's upper bound (never below
    /// the true figure), and no more than the largest recorded; zero if empty.
    pub(crate) fn quantile(&self, q: f64) -> Duration {
        let counts: Vec<u64> = self.counts.iter().map(|c| c.load(Relaxed)).collect();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return Duration::ZERO;
        }
        let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
        let mut seen = 0;
        for (i, n) in counts.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Duration::from_nanos(upper(i).min(self.max.load(Relaxed)));
            }
        }
        Duration::from_nanos(self.max.load(Relaxed))
    }

    pub(crate) fn max(&self) -> Duration {
        Duration::from_nanos(self.max.load(Relaxed))
    }
}

/// The bucket of `ns`: exact below `SUB`, then `SUB` buckets per power of two.
fn bucket(ns: u64) -> usize {
    if ns < SUB {
        return ns as usize;
    }
    let power = 63 - ns.leading_zeros(); // >= SUB_BITS
    let sub = (ns >> (power - SUB_BITS)) & (SUB - 1);
    ((power - SUB_BITS + 1) as u64 * SUB + sub) as usize
}

/// The largest value in bucket `i`.
fn upper(i: usize) -> u64 {
    let i = i as u64;
    if i < SUB {
        return i;
    }
    let power = i / SUB + u64::from(SUB_BITS) - 1;
    let sub = i % SUB;
    let low = (SUB + sub) << (power - u64::from(SUB_BITS));
    low.saturating_add((1u64 << (power - u64::from(SUB_BITS))) - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_hold_their_values() {
        for ns in [
            0,
            1,
            15,
            16,
            17,
            31,
            32,
            1000,
            1 << 40,
            u64::MAX - 1,
            u64::MAX,
        ] {
            let b = bucket(ns);
            assert!(b < BUCKETS, "{ns}");
            assert!(upper(b) >= ns, "{ns}: bucket {b} ends at {}", upper(b));
            assert!(
                b == 0 || upper(b - 1) < ns,
                "{ns}: also fits bucket {}",
                b - 1
            );
            // Within 1/16 above the value.
            assert!(upper(b) - ns <= ns / 16, "{ns}: {}", upper(b));
        }
    }

    #[test]
    fn quantiles_round_up_and_never_pass_the_max() {
        let h = Histogram::new();
        assert_eq!(h.quantile(0.5), Duration::ZERO);
        for ns in 1..=100u64 {
            h.record(ns * 1000);
        }
        let p50 = h.quantile(0.5).as_nanos() as u64;
        assert!((50_000..=50_000 + 50_000 / 16).contains(&p50), "{p50}");
        assert_eq!(h.quantile(1.0), Duration::from_micros(100));
        assert_eq!(h.max(), Duration::from_micros(100));
    }
}
