//! `hierarchical_hash_wheel_timer`'s `QuadWheelWithOverflow`, driven through its public API.
//!
//! The crate's wheel counts ticks itself and takes delays relative to its own position, so the
//! adapter keeps the virtual clock and drives the wheel to `now` the way the crate's own timers do:
//! [`can_skip`](QuadWheelWithOverflow::can_skip) says how many empty ticks may be jumped with
//! `skip`, and `tick` moves one tick and returns what expired. Two flavours:
//!
//! - [`Hhwt`]: the plain wheel (`wheels::quad_wheel`), no cancellation.
//! - [`HhwtCancel`]: the crate's cancellable wheel (`wheels::cancellable`): each entry is an `Rc`
//!   in a hash map by id, the wheel holds a `Weak`; cancel removes the map entry and the dead
//!   `Weak` is pruned when its slot comes round.

use std::fmt;
use std::rc::Rc;
use std::time::Duration;

use hierarchical_hash_wheel_timer::TimerError;
use hierarchical_hash_wheel_timer::wheels::Skip;
use hierarchical_hash_wheel_timer::wheels::cancellable::{
    CancellableTimerEntry, QuadWheelWithOverflow as CancellableWheel,
};
use hierarchical_hash_wheel_timer::wheels::quad_wheel::QuadWheelWithOverflow;

use crate::{Cancel, TimerQueue};

/// The wheel's entry type: the crate wants `Debug` entries, items need not be.
struct Entry<T>(T);

impl<T> fmt::Debug for Entry<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Entry")
    }
}

/// `Debug` for the adapters: type name, clock and length (the wheels and items need not be `Debug`).
macro_rules! debug_cur_len {
    ($($adapter:ident),+) => {$(
        impl<T> fmt::Debug for $adapter<T> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_struct(stringify!($adapter))
                    .field("cur", &self.cur)
                    .field("len", &self.len)
                    .finish()
            }
        }
    )+};
}

debug_cur_len!(Hhwt, HhwtCancel);

/// Moves a wheel from tick `cur` to tick `now`, skipping what `can_skip` allows and ticking the rest.
#[inline]
fn drive(
    cur: &mut u64,
    now: u64,
    can_skip: impl Fn() -> Skip,
    mut skip: impl FnMut(u32),
    mut tick: impl FnMut(),
) {
    while *cur < now {
        match can_skip() {
            // Nothing pending: the wheel's position is only a reference for future delays.
            Skip::Empty => *cur = now,
            Skip::Millis(ms) => {
                let jump = u64::from(ms).min(now - *cur);
                skip(jump as u32);
                *cur += jump;
                if *cur < now {
                    tick();
                    *cur += 1;
                }
            }
            Skip::None => {
                tick();
                *cur += 1;
            }
        }
    }
}

/// The plain `QuadWheelWithOverflow` (no cancellation).
pub struct Hhwt<T> {
    wheel: QuadWheelWithOverflow<Entry<T>>,
    cur: u64,
    len: usize,
}

impl<T> TimerQueue<T> for Hhwt<T> {
    type Id = ();
    const NAME: &'static str = "hierarchical_hash_wheel_timer";

    fn new() -> Self {
        Hhwt {
            wheel: QuadWheelWithOverflow::default(),
            cur: 0,
            len: 0,
        }
    }

    #[inline]
    fn insert(&mut self, deadline: u64, item: T) {
        assert!(
            deadline > self.cur,
            "deadline {deadline} is not after now {}",
            self.cur
        );
        let delay = Duration::from_millis(deadline - self.cur);
        match self.wheel.insert_with_delay(Entry(item), delay) {
            Ok(()) => self.len += 1,
            Err(_) => panic!("hierarchical_hash_wheel_timer refused a delay of {delay:?}"),
        }
    }

    fn advance(&mut self, now: u64, mut f: impl FnMut(T)) {
        let Hhwt { wheel, cur, len } = self;
        let wheel = std::cell::RefCell::new(wheel);
        drive(
            cur,
            now,
            || wheel.borrow().can_skip(),
            |ms| wheel.borrow_mut().skip(ms),
            || {
                for e in wheel.borrow_mut().tick() {
                    *len -= 1;
                    f(e.0);
                }
            },
        );
    }

    fn len(&self) -> usize {
        self.len
    }
}

/// The cancellable entry: an id for the crate's map, and the item.
struct CEntry<T> {
    id: u64,
    item: T,
}

impl<T> fmt::Debug for CEntry<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CEntry").field("id", &self.id).finish()
    }
}

impl<T> CancellableTimerEntry for CEntry<T> {
    type Id = u64;

    fn id(&self) -> &u64 {
        &self.id
    }
}

/// The crate's cancellable `QuadWheelWithOverflow`.
pub struct HhwtCancel<T> {
    wheel: CancellableWheel<CEntry<T>>,
    cur: u64,
    next_id: u64,
    len: usize,
}

impl<T> TimerQueue<T> for HhwtCancel<T> {
    type Id = u64;
    const NAME: &'static str = "hierarchical_hash_wheel_timer (cancellable)";

    fn new() -> Self {
        HhwtCancel {
            wheel: CancellableWheel::new(),
            cur: 0,
            next_id: 0,
            len: 0,
        }
    }

    #[inline]
    fn insert(&mut self, deadline: u64, item: T) -> u64 {
        assert!(
            deadline > self.cur,
            "deadline {deadline} is not after now {}",
            self.cur
        );
        let id = self.next_id;
        self.next_id += 1;
        let delay = Duration::from_millis(deadline - self.cur);
        match self
            .wheel
            .insert_ref_with_delay(Rc::new(CEntry { id, item }), delay)
        {
            Ok(()) => self.len += 1,
            Err(_) => panic!("hierarchical_hash_wheel_timer refused a delay of {delay:?}"),
        }
        id
    }

    fn advance(&mut self, now: u64, mut f: impl FnMut(T)) {
        let HhwtCancel {
            wheel, cur, len, ..
        } = self;
        let wheel = std::cell::RefCell::new(wheel);
        drive(
            cur,
            now,
            || wheel.borrow().can_skip(),
            |ms| wheel.borrow_mut().skip(ms),
            || {
                for rc in wheel.borrow_mut().tick() {
                    *len -= 1;
                    match Rc::try_unwrap(rc) {
                        Ok(e) => f(e.item),
                        Err(_) => panic!("an expired entry is still shared"),
                    }
                }
            },
        );
    }

    fn len(&self) -> usize {
        self.len
    }
}

impl<T> Cancel<T> for HhwtCancel<T> {
    #[inline]
    fn cancel(&mut self, id: u64) -> bool {
        match self.wheel.cancel(&id) {
            Ok(()) => {
                self.len -= 1;
                true
            }
            Err(TimerError::NotFound) => false,
            Err(TimerError::Expired(never)) => match never {},
        }
    }
}
