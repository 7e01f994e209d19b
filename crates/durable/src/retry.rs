//! [`RetryPolicy`]: how often a failing job runs again, and after how long.

use std::time::Duration;

/// How a job whose handler failed (returned an error or panicked) is retried: up to
/// `max_attempts` runs in all, the n-th retry `first_delay * factor^(n-1)` after the failure
/// (at most `max_delay`). After its last attempt the job moves to the dead-letter set.
///
/// The default: 5 attempts, retried after 1 s, 2 s, 4 s, 8 s.
///
/// ```
/// use std::time::Duration;
/// use tickwheel_durable::RetryPolicy;
///
/// let policy = RetryPolicy::new(3).backoff(Duration::from_secs(10), 3);
/// assert_eq!(policy.delay_after(1), Some(Duration::from_secs(10)));
/// assert_eq!(policy.delay_after(2), Some(Duration::from_secs(30)));
/// assert_eq!(policy.delay_after(3), None); // dead
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    max_attempts: u32,
    first_delay: Duration,
    factor: u32,
    max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 5,
            first_delay: Duration::from_secs(1),
            factor: 2,
            max_delay: Duration::from_secs(3600),
        }
    }
}

impl RetryPolicy {
    /// At most `max_attempts` runs (the first included; 0 is taken as 1), with the default
    /// backoff.
    pub fn new(max_attempts: u32) -> RetryPolicy {
        RetryPolicy {
            max_attempts: max_attempts.max(1),
            ..RetryPolicy::default()
        }
    }

    /// No retry: a failed job goes to the dead-letter set at once.
    pub fn never() -> RetryPolicy {
        RetryPolicy::new(1)
    }

    /// The first retry `first_delay` after the failure, each next one `factor` times longer
    /// (a factor of 0 is taken as 1: a constant delay).
    pub fn backoff(mut self, first_delay: Duration, factor: u32) -> RetryPolicy {
        self.first_delay = first_delay;
        self.factor = factor.max(1);
        self
    }

    /// No retry later than `max_delay` after its failure.
    pub fn max_delay(mut self, max_delay: Duration) -> RetryPolicy {
        self.max_delay = max_delay;
        self
    }

    /// The most runs a job gets.
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// How long after its `failed`-th failed run a job runs again; `None` if that was its last
    /// attempt.
    pub fn delay_after(&self, failed: u32) -> Option<Duration> {
        if failed >= self.max_attempts {
            return None;
        }
        let power = failed.saturating_sub(1);
        let scale = self.factor.checked_pow(power).unwrap_or(u32::MAX);
        let delay = self.first_delay.checked_mul(scale).unwrap_or(Duration::MAX);
        Some(delay.min(self.max_delay))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_per_policy() {
        let s = Duration::from_secs;
        let default = RetryPolicy::default();
        let capped = RetryPolicy::new(100).max_delay(s(60));
        // (policy, failed runs so far, the delay before the next run)
        let table = [
            (default, 1, Some(s(1))),
            (default, 2, Some(s(2))),
            (default, 4, Some(s(8))),
            (default, 5, None),
            (default, u32::MAX, None),
            (RetryPolicy::never(), 1, None),
            (RetryPolicy::new(0), 1, None),
            (capped, 7, Some(s(60))),
            (capped, 99, Some(s(60))),
            (RetryPolicy::new(3).backoff(s(5), 0), 2, Some(s(5))),
            (
                RetryPolicy::new(3).backoff(Duration::MAX, 2),
                2,
                Some(s(3600)),
            ),
        ];
        for (policy, failed, delay) in table {
            assert_eq!(
                policy.delay_after(failed),
                delay,
                "{policy:?} after {failed}"
            );
        }
    }
}
