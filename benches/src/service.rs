//! What the threaded service workloads (W6–W8, W10–W12) share: our timer's name, lateness.
//!
//! Those workloads run the `tickwheel::Timer` service on the real clock; each lives with its
//! report section in [`scenario`](crate::scenario), one file each. Like the virtual-time ones,
//! every one checks its counts (every add accepted, every cancel successful, every task run
//! exactly once, none early) and panics on a miscount. Timing figures are only reported, never
//! checked: the machine may be shared.

use std::time::Instant;

/// Name of our `Timer` in the tables.
pub const TIMER_NAME: &str = "tickwheel Timer";

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

/// Signed nanoseconds from `deadline` to `now` (negative: early).
pub fn signed_ns(now: Instant, deadline: Instant) -> i64 {
    match now.checked_duration_since(deadline) {
        Some(late) => i64::try_from(late.as_nanos()).unwrap_or(i64::MAX),
        None => -i64::try_from((deadline - now).as_nanos()).unwrap_or(i64::MAX),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

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
}
