//! Our `tickwheel_wheel::TimingWheel` (tick 1 ms, 256 buckets per level, the `Timer`'s default)
//! behind the common trait.

use tickwheel_wheel::{TimerId, TimingWheel};

use crate::{Cancel, TimerQueue};

/// Buckets per level used in every benchmark.
pub const WHEEL_SIZE: usize = 256;

impl<T> TimerQueue<T> for TimingWheel<T> {
    type Id = TimerId;
    const NAME: &'static str = "tickwheel-wheel";

    fn new() -> Self {
        TimingWheel::new(1, WHEEL_SIZE, 0).expect("tick 1, 256 buckets is a valid configuration")
    }

    #[inline]
    fn insert(&mut self, deadline: u64, item: T) -> TimerId {
        match TimingWheel::insert(self, deadline, item) {
            Ok(id) => id,
            Err(_) => panic!("deadline {deadline} is not after now {}", self.now()),
        }
    }

    /// As the tick thread drives the wheel: to each `next_expiration()` up to `now` in turn (so
    /// coarse buckets cascade into finer levels on the way), then to `now`. The peers step
    /// through their deadlines the same way inside their `advance`.
    #[inline]
    fn advance(&mut self, now: u64, mut f: impl FnMut(T)) {
        while let Some(t) = self.next_expiration().filter(|&t| t < now) {
            TimingWheel::advance(self, t, &mut f);
        }
        TimingWheel::advance(self, now, f);
    }

    fn len(&self) -> usize {
        TimingWheel::len(self)
    }
}

impl<T> Cancel<T> for TimingWheel<T> {
    #[inline]
    fn cancel(&mut self, id: TimerId) -> bool {
        TimingWheel::cancel(self, id).is_some()
    }
}
