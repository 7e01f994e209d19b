//! A shard: the task slots, the ring of unstamped adds and the wheel of one adding thread.
//!
//! ## Who writes what
//!
//! | data | written by | how |
//! |------|------------|-----|
//! | `owner` counters, ring tail, new slots | the owner thread only | plain load + store on atomics |
//! | ring head, the wheel, the young queue, `link`, `deadline`, `meant` of stamped tasks, `in_lock` counters | whoever holds `locked`: the owner flushing a full ring, the tick thread collecting, a cancel or reschedule of a task in the wheel, a job re-arming, shutdown | under the lock |
//! | `next_wake` | lowered by anyone (`fetch_min`); set by whoever consumes the ring | sequentially consistent |
//! | `remote` counters | threads other than the owner | atomic read-modify-write |
//! | the bits listing slots vacated elsewhere (`slots/remote_free.rs`) | threads other than the owner set them; the owner swaps them out to refill | atomic read-modify-write |
//! | slot words | see `slots/word.rs` | compare-and-swap |
//!
//! The owner's add takes no lock and writes only its slot and lines no other adding thread
//! writes; the lock is shared with the tick thread once per tick at most, and with cancels of
//! tasks already in the wheel.
//!
//! ## Never early
//!
//! An unstamped record keeps the task's delay. Whoever drains the ring reads the clock *after*
//! taking the records (the ring's tail is read with acquire ordering, then the clock), so every
//! drained add happened before that reading, and `reading + delay` is no earlier than the
//! instant the user meant. Unstamped records wait at most `bound` (one tick) for their stamp:
//! `next_wake` is never later than the owner's last clock reading plus `bound` while the ring
//! holds one. A stamped record (its deadline known at the add) only needs a look by its deadline,
//! and `next_wake` is never later than that while the ring holds it. A drain on another thread
//! (a reschedule, a handle's deadline) may file records in the young queue, whose filing comes
//! sooner than either: it wakes the tick thread by what it lowered `next_wake` to.

use std::collections::VecDeque;
use std::sync::{Arc, Weak};
use std::task::Waker;

use crossbeam_utils::CachePadded;
use tickwheel_reaper::Due;
use tickwheel_wheel::{TimerId, TimingWheel};

mod deadline;
mod moves;
pub(crate) mod ring;
pub(crate) use moves::{Cancel, Rearm};
mod stamp;
mod young;

use crate::loom::atomic::{AtomicU64, Ordering::*};
use crate::loom::{Mutex, MutexGuard};
use crate::slots::owner::OwnerToken;
use crate::slots::table::Slots;
use crate::slots::word::{
    CANCELLED, DONE, DUE, PERIODIC, QUEUED, RETURNED, RUNNING, STAMPED, STOP, VACANT, WAITING,
    WAKE, Word,
};
use ring::Ring;

/// What a shard's slots hold and whom the shard serves: fixed by the layer above (the service's
/// `Tasks`), so this layer names neither.
pub(crate) trait Kind: Sized + 'static {
    /// A task, as a slot holds it.
    type Work: Send + 'static;
    /// The timer the shard belongs to (its back-pointer: [`Shard::timer`]).
    type Timer: Send + Sync + 'static;
    /// The waker place of a task that wakes a future (`None` for any other task): the future's
    /// poll leaves its waker there (see `slots/waker.rs`), and whoever ends the arming finds it
    /// in the task it takes.
    fn waker(work: &mut Self::Work) -> Option<&mut Option<Waker>>;
}

/// A job's hold on the task it claimed (see `slots/slot.rs`).
pub(crate) type Run<'a, K> = crate::slots::slot::Run<'a, <K as Kind>::Work>;

/// A task found due: what its job needs to find and run it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Fire {
    pub(crate) shard: u32,
    pub(crate) slot: u32,
    pub(crate) generation: u32,
    /// Where it runs: its route word (see `service/route.rs`), or [`WAKE_HERE`] for a future's wake-up.
    /// Read when the task is found due, while its slot is in the cache: the tick thread then
    /// hands it out without touching the slot again (see `service/dispatch.rs`).
    pub(crate) route: u32,
    /// The instant the user meant, clock ns: lateness is measured from it.
    pub(crate) meant: u64,
}

/// [`Fire::route`] of a future's wake-up, done where it is handed out (never a route word: those
/// with `SELF_CLASS` set have no id bits).
pub(crate) const WAKE_HERE: u32 = u32::MAX;

/// A task handed back by shutdown: its deadline (clock ns) and its closure.
pub(crate) struct Returned<W> {
    pub(crate) deadline: u64,
    pub(crate) work: W,
    /// A future's task that shutdown's drain ended as fired (`DONE`): its deadline had come by
    /// the drain's clock reading. False for every other task.
    pub(crate) elapsed: bool,
    /// Its route word (its class and executor, see `route.rs`).
    pub(crate) route: u32,
}

pub(crate) struct Shard<K: Kind> {
    /// Its id in the process-wide registry.
    pub(crate) id: u32,
    pub(crate) slots: Slots<K::Work>,
    ring: Ring,
    owner: CachePadded<OwnerSide>,
    consumer: CachePadded<ConsumerSide>,
    remote: CachePadded<RemoteSide>,
    in_lock: CachePadded<LockedCounts>,
    locked: Mutex<Locked>,
    /// Longest an unstamped record may wait for its stamp, clock ns (the tick of its timer).
    bound: AtomicU64,
    /// The timer the shard belongs to now (it is reused by the next one when that one is gone).
    timer: Mutex<Weak<K::Timer>>,
}

/// `seen_flushes` of a reading that is not to be reused (no drain count reaches it).
const NOT_SEEN: u64 = u64::MAX;

/// Written by the owner thread only.
#[derive(Default)]
struct OwnerSide {
    /// The owner's latest clock reading (see `Shard::reading`).
    reading: AtomicU64,
    /// `flushes` when `reading` was taken by an unstamped add, else `NOT_SEEN` (starts at 0,
    /// which `attach` forgets before any add).
    seen_flushes: AtomicU64,
    /// Adds allowed before `max_pending` is looked at again.
    budget: AtomicU64,
    /// Adds that entered the waiting set (`QUEUED`).
    added: AtomicU64,
    /// Adds sent straight to the executor (already due).
    added_due: AtomicU64,
    rejected: AtomicU64,
    /// Cancels of `QUEUED` tasks (they leave the waiting set without the lock) ...
    cancelled_queued: AtomicU64,
    /// ... and of tasks in any other state.
    cancelled_other: AtomicU64,
}

/// Written by whoever consumes the ring, and lowered by anyone.
#[derive(Default)]
struct ConsumerSide {
    /// See the reaper's ground rules.
    next_wake: AtomicU64,
    /// Bumped by every drain of the ring: the owner takes a fresh clock reading when it moved.
    flushes: AtomicU64,
}

/// Written by threads other than the owner.
#[derive(Default)]
struct RemoteSide {
    cancelled_queued: AtomicU64,
    cancelled_other: AtomicU64,
}

/// Changed only under the lock (load + store), read without it.
#[derive(Default)]
struct LockedCounts {
    /// Tasks that entered the waiting set under the lock (periodic re-arms).
    entered: AtomicU64,
    /// Tasks that left the waiting set under the lock (fired, cancelled from the wheel, moved to
    /// due, handed back by shutdown).
    left: AtomicU64,
}

struct Locked {
    /// Items are ring records of waiting slots.
    wheel: TimingWheel<u64>,
    /// Periodic tasks re-armed already due (`DUE`): handed out first by the next collect.
    overdue: Vec<Due<Fire>>,
    /// Stamped tasks due far out, in the order they were stamped, waiting to be filed in the
    /// wheel (see `young.rs`): most far timers are cancelled young, and a cancel of a task not
    /// yet in the wheel is one compare-and-swap.
    young: VecDeque<Young>,
}

/// A task in the young queue: its ring record, and when it is filed in the wheel (clock ns).
#[derive(Clone, Copy)]
struct Young {
    rec: u64,
    file_at: u64,
}

impl Locked {
    /// When the consumer must look next: the wheel's next expiration, or the first young task's
    /// filing time if that is sooner.
    fn next_expiration(&self) -> u64 {
        let wheel = self.wheel.next_expiration().unwrap_or(u64::MAX);
        self.young.front().map_or(wheel, |y| wheel.min(y.file_at))
    }
}

/// Adds one to a counter that only one thread (or one lock holder) writes.
#[inline]
fn bump(counter: &AtomicU64) {
    counter.store(counter.load(Relaxed) + 1, Release);
}

impl<K: Kind> Shard<K> {
    /// A shard for the timer `core` (whose tick is `tick_ns`, wheels `wheel_size` wide).
    pub(crate) fn new(id: u32, timer: Weak<K::Timer>, tick_ns: u64, wheel_size: usize) -> Self {
        let wheel =
            TimingWheel::new(tick_ns, wheel_size, 0).expect("the builder validated the wheel");
        let consumer = ConsumerSide::default();
        consumer.next_wake.store(u64::MAX, Relaxed);
        Shard {
            id,
            slots: Slots::new(),
            ring: Ring::new(),
            owner: CachePadded::default(),
            consumer: CachePadded::new(consumer),
            remote: CachePadded::default(),
            in_lock: CachePadded::default(),
            locked: Mutex::new(Locked {
                wheel,
                overdue: Vec::new(),
                young: VecDeque::new(),
            }),
            bound: AtomicU64::new(tick_ns),
            timer: Mutex::new(timer),
        }
    }

    /// Gives a spare shard, whose last timer is gone, to the timer `core`: a fresh wheel, zero
    /// counts, an empty ring. Its slots stay as they are (vacant, or pinned by an old handle to
    /// a task that is final).
    pub(crate) fn adopt(&self, timer: Weak<K::Timer>, tick_ns: u64, wheel_size: usize) {
        let mut locked = self.locked.lock();
        locked.wheel =
            TimingWheel::new(tick_ns, wheel_size, 0).expect("the builder validated the wheel");
        locked.overdue.clear();
        locked.young.clear();
        self.ring.clear(); // records of adds that raced the old timer's shutdown
        for c in [
            &self.owner.added,
            &self.owner.added_due,
            &self.owner.rejected,
            &self.owner.cancelled_queued,
            &self.owner.cancelled_other,
            &self.owner.budget,
            &self.remote.cancelled_queued,
            &self.remote.cancelled_other,
            &self.in_lock.entered,
            &self.in_lock.left,
        ] {
            c.store(0, Relaxed);
        }
        self.consumer.next_wake.store(u64::MAX, SeqCst);
        self.bound.store(tick_ns, Relaxed);
        *self.timer.lock() = timer;
    }

    /// The timer the shard belongs to, if it is still there.
    pub(crate) fn timer(&self) -> Option<Arc<K::Timer>> {
        self.timer.lock().upgrade()
    }

    // ----- ownership -----

    /// Makes this thread the owner (`None` if the shard has one).
    pub(crate) fn attach(&self) -> Option<OwnerToken> {
        let token = self.slots.attach()?;
        self.forget_reading();
        Some(token)
    }

    /// The owner leaves; the shard waits for the next one, its tasks where they are.
    pub(crate) fn detach(&self, token: OwnerToken) {
        self.slots.detach(token);
    }

    #[inline(always)]
    fn on_owner_thread(&self) -> bool {
        self.slots.owned_here()
    }

    // ----- the owner's side of an add -----

    /// A clock reading no later than now for an unstamped add, which is about to record itself
    /// in the ring: the owner's last such reading while the ring has not been drained since,
    /// else a fresh one. The record makes the tick thread drain the ring within a tick (see
    /// `cover`), so a reading is reused for about a tick at most: it dates the add for lateness
    /// (`meant`) and for when the tick thread must look.
    #[inline]
    pub(crate) fn reading(&self, now: impl FnOnce() -> u64) -> u64 {
        let flushes = self.consumer.flushes.load(Acquire);
        if flushes == self.owner.seen_flushes.load(Relaxed) {
            self.owner.reading.load(Relaxed)
        } else {
            let now = now();
            self.owner.seen_flushes.store(flushes, Relaxed);
            self.owner.reading.store(now, Relaxed);
            now
        }
    }

    /// A fresh clock reading for the owner, for this add only: an add that leaves no unstamped
    /// record in the ring makes nobody drain it soon, so its reading could stay in use for as
    /// long as the thread goes on adding (an hour-old `meant`, measured as an hour late).
    pub(crate) fn read(&self, clock: &dyn tickwheel_reaper::Clock) -> u64 {
        let now = clock.now();
        self.forget_reading();
        self.owner.reading.store(now, Relaxed);
        now
    }

    /// Takes one hold (a handle, or `stamp`'s pin) off slot `i`, whose word was last seen as
    /// `w`: the last hold on a final task frees the slot.
    pub(crate) fn let_go(&self, i: u32, mut w: Word) {
        let s = self.slots.get(i);
        loop {
            let next = w.minus_handle();
            if next == w {
                return; // a sticky count: the slot stays pinned
            }
            match s.word.compare_exchange_weak(w.0, next.0, AcqRel, Acquire) {
                Ok(_) => {
                    if next.state() == VACANT {
                        self.slots.release(i);
                    }
                    return;
                }
                Err(actual) => w = Word(actual),
            }
        }
    }

    /// Makes the next unstamped add read the clock (a new owner: the reading it finds is
    /// another thread's, or another timer's, and may be hours old).
    pub(crate) fn forget_reading(&self) {
        self.owner.seen_flushes.store(NOT_SEEN, Relaxed);
    }

    /// `max_pending`: takes one add from the owner's budget, refilling it from the whole timer's
    /// count (`pending`) when it is spent. False if the timer is full.
    #[inline]
    pub(crate) fn admit(&self, max: u64, batch: u64, pending: impl FnOnce() -> u64) -> bool {
        let mut budget = self.owner.budget.load(Relaxed);
        if budget == 0 {
            let pending = pending();
            if pending >= max {
                return false;
            }
            budget = (max - pending).min(batch);
        }
        self.owner.budget.store(budget - 1, Relaxed);
        true
    }

    /// `max_pending`: takes one add from the owner's budget, if any is left, for an add that is
    /// never refused (a future's).
    #[inline]
    pub(crate) fn spend(&self) {
        let budget = self.owner.budget.load(Relaxed);
        self.owner.budget.store(budget.saturating_sub(1), Relaxed);
    }

    #[inline]
    pub(crate) fn count_added(&self, waiting: bool) {
        bump(if waiting {
            &self.owner.added
        } else {
            &self.owner.added_due
        });
    }

    pub(crate) fn count_rejected(&self) {
        bump(&self.owner.rejected);
    }

    /// Owner only: records an unstamped add. False if the ring is full (flush, then retry).
    #[inline]
    pub(crate) fn push(&self, slot: u32, generation: u32) -> bool {
        self.ring.push(ring::record(slot, generation))
    }

    /// Owner only, after a push and a fence: makes sure the tick thread looks at the ring in
    /// time for the record just pushed. An unstamped one (`deadline` is `None`) must be stamped
    /// within `bound` of the owner's latest clock reading (no later than the add); a stamped one
    /// only by its deadline (it is handed out in the look that finds it due). Returns the time
    /// the tick thread must wake by if it lowered `next_wake`.
    #[inline]
    pub(crate) fn cover(&self, deadline: Option<u64>) -> Option<u64> {
        let by = deadline.unwrap_or_else(|| {
            self.owner
                .reading
                .load(Relaxed)
                .saturating_add(self.bound.load(Relaxed))
        });
        (self.consumer.next_wake.load(Relaxed) > by).then(|| {
            self.consumer.next_wake.fetch_min(by, SeqCst);
            by
        })
    }

    // ----- counts -----

    /// Tasks waiting for their deadline (`QUEUED` or `WAITING`). Exact when no operation on the
    /// shard is in flight; each operation updates it before it returns.
    pub(crate) fn pending(&self) -> u64 {
        let into = self.owner.added.load(Acquire) + self.in_lock.entered.load(Acquire);
        let out = self.in_lock.left.load(Acquire)
            + self.owner.cancelled_queued.load(Acquire)
            + self.remote.cancelled_queued.load(Acquire);
        into.saturating_sub(out)
    }

    /// `(added, rejected, cancelled)`.
    pub(crate) fn counts(&self) -> (u64, u64, u64) {
        (
            self.owner.added.load(Acquire) + self.owner.added_due.load(Acquire),
            self.owner.rejected.load(Acquire),
            self.owner.cancelled_queued.load(Acquire)
                + self.owner.cancelled_other.load(Acquire)
                + self.remote.cancelled_queued.load(Relaxed)
                + self.remote.cancelled_other.load(Relaxed),
        )
    }

    /// Bytes the shard holds besides the tasks' own closures: slots, ring, wheel.
    pub(crate) fn heap_bytes(&self) -> usize {
        let locked = self.locked.lock();
        self.slots.heap_bytes()
            + ring::CAPACITY as usize * std::mem::size_of::<u64>()
            + locked.wheel.heap_bytes()
            + locked.young.capacity() * std::mem::size_of::<Young>()
    }
}
