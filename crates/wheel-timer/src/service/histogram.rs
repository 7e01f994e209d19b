//! A histogram of nanoseconds in log-linear buckets: lateness and run times, recorded by any
//! thread with one relaxed add.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

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

impl Default for Histogram {
    fn default() -> Self {
        Histogram::new()
    }
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
