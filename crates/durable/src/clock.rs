//! The wall clock the deadlines are read on: [`SystemClock`] (the default), or in tests a
//! [`ManualWall`] that moves with the timer's [`ManualClock`](tickwheel::ManualClock).

use std::time::SystemTime;

use tickwheel::ManualClock;

/// Tells the time of day. Deadlines are wall-clock times (a stored deadline must keep its
/// meaning across a restart, when every `Instant` is new); the timer maps each one onto its own
/// clock when the job enters the window, and a job is never run before this clock reads its
/// deadline.
pub trait WallClock: Send + Sync + 'static {
    /// The time now.
    fn now(&self) -> SystemTime;
}

/// The system's wall clock ([`SystemTime::now`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl WallClock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// A wall clock that reads `start` plus the time a [`ManualClock`] has moved: give the timer
/// the same manual clock, and hours of jobs run in milliseconds.
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use tickwheel::ManualClock;
/// use tickwheel_durable::{ManualWall, WallClock};
///
/// let clock = ManualClock::new();
/// let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
/// let wall = ManualWall::new(clock.clone(), start);
/// clock.advance(Duration::from_secs(3600));
/// assert_eq!(wall.now(), start + Duration::from_secs(3600));
/// ```
#[derive(Clone, Debug)]
pub struct ManualWall {
    clock: ManualClock,
    start: SystemTime,
}

impl ManualWall {
    /// A wall clock at `start` while `clock` reads zero.
    pub fn new(clock: ManualClock, start: SystemTime) -> ManualWall {
        ManualWall { clock, start }
    }
}

impl WallClock for ManualWall {
    fn now(&self) -> SystemTime {
        self.start
            .checked_add(self.clock.elapsed())
            .unwrap_or(self.start)
    }
}
