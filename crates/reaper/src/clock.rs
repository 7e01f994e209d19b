//! Clocks the tick thread reads: the real monotonic clock, and a manual one tests move by hand.

use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

use crate::loom::Mutex;
use crate::loom::atomic::{AtomicU64, Ordering::SeqCst};

/// Nanoseconds in a `Duration`, saturating at `u64::MAX` (584 years: the far future).
#[inline]
pub fn duration_to_ns(d: Duration) -> u64 {
    d.as_secs()
        .checked_mul(1_000_000_000)
        .and_then(|ns| ns.checked_add(u64::from(d.subsec_nanos())))
        .unwrap_or(u64::MAX)
}

/// A source of time in nanoseconds since some origin.
pub trait Clock: Send + Sync + 'static {
    /// Nanoseconds since the clock's origin. Never decreases.
    fn now(&self) -> u64;

    /// The real instant at which the clock will read `t`, if the clock follows real time; `None`
    /// for clocks that only move when told to (the tick thread then sleeps until woken).
    fn instant_of(&self, t: u64) -> Option<Instant>;

    /// Called once by a driver that wants to be told when the clock is moved by hand.
    fn attach(&self, _driver: Weak<dyn Driver>) {}

    /// For a clock that does not follow real time: the `Instant` its time 0 stands for, the same
    /// for every timer on it, so that an instant one timer gives (a deadline handed back by
    /// shutdown, `now()`) means the same clock time to another. `None` (the default): each timer
    /// maps instants to readings from the moment it is built. A clock that follows real time
    /// answers [`instant_of`](Self::instant_of)`(0)` instead, which wins.
    fn epoch(&self) -> Option<Instant> {
        None
    }

    /// True if the clock moves on its own (it has an [`instant_of`](Self::instant_of)); false
    /// for a clock that stands still between moves by hand, whose reading is then exact for as
    /// long as nobody moves it. Timers stamp every deadline at add time on such a clock.
    fn follows_real_time(&self) -> bool {
        self.instant_of(0).is_some()
    }
}

/// Something a [`ManualClock`] tells about each move, and waits for.
pub trait Driver: Send + Sync {
    /// The clock now reads `now`: process everything due by then before returning.
    fn catch_up(&self, now: u64);
}

/// The monotonic clock, with its origin at construction.
#[derive(Clone, Copy, Debug)]
pub struct RealClock {
    origin: Instant,
}

impl RealClock {
    /// A clock reading 0 now.
    pub fn new() -> Self {
        RealClock {
            origin: Instant::now(),
        }
    }

    /// The instant this clock reads 0 at.
    pub fn origin(&self) -> Instant {
        self.origin
    }
}

impl Default for RealClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for RealClock {
    #[inline]
    fn now(&self) -> u64 {
        duration_to_ns(self.origin.elapsed())
    }

    fn instant_of(&self, t: u64) -> Option<Instant> {
        self.origin.checked_add(Duration::from_nanos(t))
    }
}

/// A clock that moves only when a test moves it, driving the very same tick thread and wheel.
///
/// [`advance`](Self::advance) returns once every attached timer has handed out everything due by
/// the new time, so a test can run "three days" of timers in milliseconds and then assert.
///
/// ```
/// use std::time::Duration;
/// use tickwheel_reaper::ManualClock;
///
/// let clock = ManualClock::new();
/// clock.advance(Duration::from_secs(3 * 86_400));
/// assert_eq!(clock.elapsed(), Duration::from_secs(3 * 86_400));
/// ```
#[derive(Clone, Default)]
pub struct ManualClock {
    inner: Arc<ManualInner>,
}

struct ManualInner {
    /// What its time 0 stands for ([`Clock::epoch`]), fixed when first asked.
    epoch: OnceLock<Instant>,
    /// The reading: read without a lock, written only under `moving`.
    now: AtomicU64,
    /// Serialises moves, so two `advance` calls never lose a step.
    moving: Mutex<()>,
    drivers: Mutex<Vec<Weak<dyn Driver>>>,
}

impl Default for ManualInner {
    fn default() -> Self {
        ManualInner {
            epoch: OnceLock::new(),
            now: AtomicU64::new(0),
            moving: Mutex::new(()),
            drivers: Mutex::new(Vec::new()),
        }
    }
}

impl ManualClock {
    /// A clock reading 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// Moves the clock forward by `d` (saturating at the far future) and waits until every
    /// attached timer has handed out what is due by then.
    ///
    /// Called from inside a task that an inline executor runs on a tick thread, the wait for that
    /// same thread is skipped (it would wait for itself): when that call returns, and when an
    /// outer `advance` that ran the task returns, tasks due by the clock's new reading may not
    /// have run yet; another `advance(Duration::ZERO)` waits for them. Two timers on one clock,
    /// both with inline executors, whose tasks move the clock at the same moment wait for each
    /// other's tick thread, and so does a task of one that drops the other while the other's
    /// task moves the clock (the drop waits for that task): give such tests one timer per clock,
    /// or a pool.
    pub fn advance(&self, d: Duration) {
        let now = {
            let _moving = self.inner.moving.lock();
            let now = self
                .inner
                .now
                .load(SeqCst)
                .saturating_add(duration_to_ns(d));
            self.inner.now.store(now, SeqCst);
            now
        };
        self.catch_up(now);
    }

    /// Moves the clock to `elapsed` since its origin; a time earlier than the current one is
    /// ignored, as a monotonic clock never goes backwards.
    pub fn set(&self, elapsed: Duration) {
        let now = {
            let _moving = self.inner.moving.lock();
            let now = self.inner.now.load(SeqCst).max(duration_to_ns(elapsed));
            self.inner.now.store(now, SeqCst);
            now
        };
        self.catch_up(now);
    }

    /// Time since the origin.
    pub fn elapsed(&self) -> Duration {
        Duration::from_nanos(self.inner.now.load(SeqCst))
    }

    fn catch_up(&self, now: u64) {
        let drivers: Vec<_> = {
            let mut list = self.inner.drivers.lock();
            list.retain(|d| d.strong_count() > 0);
            list.iter().filter_map(Weak::upgrade).collect()
        };
        for d in drivers {
            d.catch_up(now);
        }
    }
}

impl std::fmt::Debug for ManualClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ManualClock")
            .field("elapsed", &self.elapsed())
            .finish()
    }
}

impl Clock for ManualClock {
    fn now(&self) -> u64 {
        self.inner.now.load(SeqCst)
    }

    fn instant_of(&self, _t: u64) -> Option<Instant> {
        None
    }

    fn attach(&self, driver: Weak<dyn Driver>) {
        self.inner.drivers.lock().push(driver);
    }

    /// Fixed when first asked, that is when the first timer is built on this clock or one of its
    /// clones: the real instant then stands for the clock's reading then, so that timer reads
    /// `Instant::now()` as "now", and every later timer on the clock reads instants as it does.
    fn epoch(&self) -> Option<Instant> {
        Some(*self.inner.epoch.get_or_init(|| {
            let now = Instant::now();
            now.checked_sub(Duration::from_nanos(self.now()))
                .unwrap_or(now)
        }))
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn durations_to_nanoseconds_saturate() {
        let max = Duration::from_nanos(u64::MAX);
        // (duration, nanoseconds)
        let table = [
            (Duration::ZERO, 0),
            (Duration::from_nanos(1), 1),
            (Duration::from_secs(1), 1_000_000_000),
            (Duration::new(5, 7), 5_000_000_007),
            (max, u64::MAX),
            (max + Duration::from_nanos(1), u64::MAX),
            (Duration::from_secs(u64::MAX / 1_000_000_000 + 1), u64::MAX),
            (Duration::MAX, u64::MAX),
        ];
        for (d, ns) in table {
            assert_eq!(duration_to_ns(d), ns, "{d:?}");
        }
    }
}
