//! A shard: the task slots, the ring of unstamped adds and the wheel of one adding thread.
//!
//! ## Who writes what
//!
//! | data | written by | how |
//! |------|------------|-----|
//! | `owner` counters, ring tail, new slots | the owner thread only | plain load + store on atomics |
//! | ring head, the wheel, `link`, `deadline`, `meant` of stamped tasks, `in_lock` counters | whoever holds `locked`: the owner flushing a full ring, the tick thread collecting, a cancel or reschedule of a task in the wheel, a job re-arming, shutdown | under the lock |
//! | `next_wake` | lowered by anyone (`fetch_min`); set by whoever consumes the ring | sequentially consistent |
//! | `remote` counters, the vacated-slot stack | threads other than the owner | atomic read-modify-write |
//! | slot words | see `word.rs` | compare-and-swap |
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
//! instant the user meant. Records wait at most `bound` (one tick) for their stamp: `next_wake`
//! is never later than the owner's last clock reading plus `bound` while the ring holds records.

use std::sync::Weak;

use crossbeam_utils::CachePadded;
use reaper::{Clock, Due};
use timing_wheel::{TimerId, TimingWheel};

use crate::core::Core;
use crate::loom::atomic::{AtomicU64, Ordering::*, fence};
use crate::loom::{Mutex, MutexGuard};
use crate::ring::{self, Ring};
use crate::slot::{OwnerToken, Run, Slots};
use crate::task::Work;
use crate::word::{
    CANCELLED, DUE, PERIODIC, QUEUED, RETURNED, RUNNING, STAMPED, STOP, WAITING, Word,
};

/// A task found due: what its job needs to find and run it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Fire {
    pub(crate) shard: u32,
    pub(crate) slot: u32,
    pub(crate) generation: u32,
    /// The instant the user meant, clock ns: lateness is measured from it.
    pub(crate) meant: u64,
}

/// A task handed back by shutdown: its deadline (clock ns) and its closure.
pub(crate) struct Returned {
    pub(crate) deadline: u64,
    pub(crate) work: Work,
}

pub(crate) struct Shard {
    /// Its id in the process-wide registry.
    pub(crate) id: u32,
    pub(crate) slots: Slots,
    ring: Ring,
    owner: CachePadded<OwnerSide>,
    consumer: CachePadded<ConsumerSide>,
    remote: CachePadded<RemoteSide>,
    in_lock: CachePadded<LockedCounts>,
    locked: Mutex<Locked>,
    /// Longest an unstamped record may wait for its stamp, clock ns (the tick of its timer).
    bound: AtomicU64,
    /// The timer the shard belongs to now (it is reused by the next one when that one is gone).
    core: Mutex<Weak<Core>>,
}

/// Written by the owner thread only.
#[derive(Default)]
struct OwnerSide {
    /// The owner's latest clock reading: no later than any add it makes until the ring is
    /// drained again (it then reads the clock anew).
    reading: AtomicU64,
    /// `flushes` when `reading` was taken.
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
}

/// Adds one to a counter that only one thread (or one lock holder) writes.
#[inline]
fn bump(counter: &AtomicU64) {
    counter.store(counter.load(Relaxed) + 1, Release);
}

impl Shard {
    /// A shard for the timer `core` (whose tick is `tick_ns`, wheels `wheel_size` wide).
    pub(crate) fn new(id: u32, core: Weak<Core>, tick_ns: u64, wheel_size: usize) -> Self {
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
            }),
            bound: AtomicU64::new(tick_ns),
            core: Mutex::new(core),
        }
    }

    /// Gives a spare shard, whose last timer is gone, to the timer `core`: a fresh wheel, zero
    /// counts, an empty ring. Its slots stay as they are (vacant, or pinned by an old handle to
    /// a task that is final).
    pub(crate) fn adopt(&self, core: Weak<Core>, tick_ns: u64, wheel_size: usize) {
        let mut locked = self.locked.lock();
        locked.wheel =
            TimingWheel::new(tick_ns, wheel_size, 0).expect("the builder validated the wheel");
        locked.overdue.clear();
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
        *self.core.lock() = core;
    }

    /// The timer the shard belongs to, if it is still there.
    pub(crate) fn core(&self) -> Option<std::sync::Arc<Core>> {
        self.core.lock().upgrade()
    }

    // ----- ownership -----

    /// Makes this thread the owner (`None` if the shard has one).
    pub(crate) fn attach(&self) -> Option<OwnerToken> {
        self.slots.attach()
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

    /// The owner's clock reading, read again if the ring has been drained since it was taken.
    #[inline]
    pub(crate) fn reading(&self, clock: &dyn reaper::Clock) -> u64 {
        let flushes = self.consumer.flushes.load(Acquire);
        if flushes == self.owner.seen_flushes.load(Relaxed) {
            self.owner.reading.load(Relaxed)
        } else {
            self.read(clock)
        }
    }

    /// A fresh clock reading for the owner, remembered with the drain count it follows.
    pub(crate) fn read(&self, clock: &dyn reaper::Clock) -> u64 {
        let flushes = self.consumer.flushes.load(Acquire);
        let now = clock.now();
        self.owner.seen_flushes.store(flushes, Relaxed);
        self.owner.reading.store(now, Relaxed);
        now
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

    /// Owner only, after a push and a fence: makes sure the tick thread stamps the ring within
    /// `bound` of the owner's latest clock reading (no later than the add). Returns the time the
    /// tick thread must wake by if it lowered `next_wake`.
    #[inline]
    pub(crate) fn cover(&self) -> Option<u64> {
        let by = self
            .owner
            .reading
            .load(Relaxed)
            .saturating_add(self.bound.load(Relaxed));
        (self.consumer.next_wake.load(Relaxed) > by).then(|| {
            self.consumer.next_wake.fetch_min(by, SeqCst);
            by
        })
    }

    /// Drains the ring now, and then files `extra` (a record whose deadline is already stamped)
    /// the same way. Used by the owner (a full ring, a short delay) with the ring's producer side
    /// idle. Due items are appended to `due`; returns the new `next_wake`.
    #[cold]
    pub(crate) fn flush_now(
        &self,
        clock: &dyn Clock,
        extra: Option<u64>,
        due: &mut Vec<Due<Fire>>,
    ) -> u64 {
        let mut locked = self.locked.lock();
        self.drain_ring(&mut locked, clock, due);
        self.owner
            .seen_flushes
            .store(self.consumer.flushes.load(Relaxed), Relaxed);
        if let Some(rec) = extra {
            let (i, generation) = ring::split(rec);
            if self.slots.get(i).word().is(generation, QUEUED) {
                self.stamp(&mut locked, rec, 0, due); // stamped: `now` is not used
            }
        }
        // The ring is empty and its only producer is here: the wheel says it all.
        let next = locked.wheel.next_expiration().unwrap_or(u64::MAX);
        self.consumer.next_wake.store(next, SeqCst);
        next
    }

    // ----- the consumer's side -----

    /// Takes every record out of the ring and files each still-`QUEUED` task: into the wheel, or
    /// into `due` if the wheel's clock has passed its deadline. Unstamped deadlines are stamped
    /// from a clock reading taken after the ring's tail was read, so after every add it drains.
    /// Returns the number of records drained.
    fn drain_ring(
        &self,
        locked: &mut MutexGuard<'_, Locked>,
        clock: &dyn Clock,
        due: &mut Vec<Due<Fire>>,
    ) -> usize {
        let batch = self.ring.published();
        let drained = batch.1.wrapping_sub(batch.0) as usize;
        if drained == 0 {
            return 0;
        }
        let now = clock.now();
        self.ring.consume(batch, |rec| {
            let (i, generation) = ring::split(rec);
            // Most records of a busy shard were cancelled already: skip them without a call.
            if self.slots.get(i).word().is(generation, QUEUED) {
                self.stamp(locked, rec, now, due);
            }
        });
        self.consumer.flushes.fetch_add(1, Release);
        drained
    }

    /// Files one `QUEUED` record (see `drain_ring`).
    #[inline(never)]
    fn stamp(&self, locked: &mut Locked, rec: u64, now: u64, due: &mut Vec<Due<Fire>>) {
        let (i, generation) = ring::split(rec);
        let s = self.slots.get(i);
        let w = s.word();
        if !w.is(generation, QUEUED) {
            return; // cancelled, rolled back or returned since: nothing to file
        }
        let (deadline, meant) = if w.has(STAMPED) {
            (s.deadline.load(Relaxed), s.meant.load(Relaxed))
        } else {
            let delay = s.deadline.load(Relaxed);
            (
                now.saturating_add(delay),
                s.meant.load(Relaxed).saturating_add(delay),
            )
        };
        s.deadline.store(deadline, Relaxed);
        s.meant.store(meant, Relaxed);
        if deadline <= locked.wheel.now() {
            if s.transition(generation, |w| w.state() == QUEUED, |w| w.with_state(DUE))
                .is_some()
            {
                bump(&self.in_lock.left);
                due.push(self.fire(i, generation, deadline, meant));
            }
        } else if s
            .transition(
                generation,
                |w| w.state() == QUEUED,
                |w| w.with_state(WAITING),
            )
            .is_some()
        {
            let id = locked
                .wheel
                .insert(deadline, rec)
                .unwrap_or_else(|_| unreachable!("deadline after the wheel's clock"));
            s.link.store(id.into_raw(), Relaxed);
        }
    }

    #[inline]
    pub(crate) fn fire(&self, slot: u32, generation: u32, deadline: u64, meant: u64) -> Due<Fire> {
        Due {
            deadline,
            item: Fire {
                shard: self.id,
                slot,
                generation,
                meant,
            },
        }
    }

    // ----- cancel and reschedule (any thread, through a handle) -----

    /// Stops the task in slot `i` (pinned by the caller's handle): true iff this call stopped it
    /// from running (again). The closure is dropped before returning, outside every lock.
    #[inline]
    pub(crate) fn cancel(&self, i: u32) -> bool {
        let s = self.slots.get(i);
        let generation = s.word().generation();
        // The common case: a task not yet stamped. Its closure is dropped where it lies.
        if s.discard(
            generation,
            |w| w.state() == QUEUED,
            |w| w.with_state(CANCELLED),
        )
        .is_some()
        {
            self.count_cancel(true);
            return true;
        }
        self.cancel_slow(i, generation)
    }

    #[inline(never)]
    fn cancel_slow(&self, i: u32, generation: u32) -> bool {
        let s = self.slots.get(i);
        loop {
            let w = s.word();
            if w.generation() != generation {
                return false;
            }
            match w.state() {
                QUEUED | DUE => {
                    debug_assert!(w.handles() > 0, "cancel comes through a handle");
                    if let Some((old, task)) = s.take(
                        generation,
                        |w| matches!(w.state(), QUEUED | DUE),
                        |w| w.with_state(CANCELLED),
                    ) {
                        self.count_cancel(old.state() == QUEUED);
                        drop(task);
                        return true;
                    }
                }
                WAITING => {
                    let mut locked = self.locked.lock();
                    let Some((_, task)) = s.take(
                        generation,
                        |w| w.state() == WAITING,
                        |w| w.with_state(CANCELLED),
                    ) else {
                        continue; // it moved meanwhile (fired, say): look again
                    };
                    locked.wheel.cancel(TimerId::from_raw(s.link.load(Relaxed)));
                    bump(&self.in_lock.left);
                    drop(locked);
                    self.count_cancel(false);
                    drop(task);
                    return true;
                }
                RUNNING if w.has(PERIODIC) && !w.has(STOP) => {
                    if s.transition(
                        generation,
                        |w| w.state() == RUNNING && !w.has(STOP),
                        |w| w.with(STOP),
                    )
                    .is_some()
                    {
                        self.count_cancel(false);
                        return true;
                    }
                }
                _ => return false,
            }
        }
    }

    #[inline(always)]
    fn count_cancel(&self, queued: bool) {
        if self.on_owner_thread() {
            bump(if queued {
                &self.owner.cancelled_queued
            } else {
                &self.owner.cancelled_other
            });
        } else if queued {
            self.remote.cancelled_queued.fetch_add(1, Relaxed);
        } else {
            self.remote.cancelled_other.fetch_add(1, Relaxed);
        }
    }

    /// Gives the waiting task in slot `i` the deadline `now + delay`: true if it was waiting and
    /// now has it. A deadline already come sends it to the executor at once (`due`).
    pub(crate) fn reschedule(
        &self,
        i: u32,
        clock: &dyn Clock,
        now: u64,
        delay: u64,
        due: &mut Vec<Due<Fire>>,
    ) -> Option<u64> {
        let s = self.slots.get(i);
        let generation = s.word().generation();
        let mut locked = self.locked.lock();
        if s.word().is(generation, QUEUED) {
            // Stamp it (and the ring with it) first: it then has a place in the wheel to move.
            let drained = self.drain_ring(&mut locked, clock, due);
            self.publish_next_wake(&locked, now, drained);
        }
        if !s.word().is(generation, WAITING) {
            return None;
        }
        let deadline = now.saturating_add(delay);
        let id = TimerId::from_raw(s.link.load(Relaxed));
        if deadline <= now {
            s.transition(generation, |w| w.state() == WAITING, |w| w.with_state(DUE))?;
            locked.wheel.cancel(id);
            bump(&self.in_lock.left);
            s.deadline.store(deadline, Relaxed);
            s.meant.store(deadline, Relaxed);
            due.push(self.fire(i, generation, deadline, deadline));
            return Some(u64::MAX);
        }
        s.deadline.store(deadline, Relaxed);
        s.meant.store(deadline, Relaxed);
        let moved = locked.wheel.reschedule(id, deadline);
        debug_assert!(moved, "a WAITING task is in the wheel");
        Some(self.lower_next_wake(&locked))
    }

    /// Puts a periodic task back for its run at `next` (from its job, through its hold on the
    /// task): into the wheel, or, if the wheel's clock has passed `next`, onto the list the tick
    /// thread hands out first at its next turn (so a task that is always behind takes turns with
    /// the other due tasks instead of re-queuing itself on the pool's local queue). Fails,
    /// handing back the hold and the work, if a cancel asked the task to stop. Returns the time
    /// the tick thread must wake by.
    pub(crate) fn rearm<'a>(
        &self,
        run: Run<'a>,
        fire: Fire,
        next: u64,
        work: Work,
    ) -> Result<u64, (Run<'a>, Work)> {
        let s = run.slot();
        let mut locked = self.locked.lock();
        let to_due = next <= locked.wheel.now();
        s.deadline.store(next, Relaxed);
        s.meant.store(next, Relaxed);
        run.park(work, if to_due { DUE } else { WAITING })?;
        if to_due {
            locked
                .overdue
                .push(self.fire(fire.slot, fire.generation, next, next));
            self.consumer.next_wake.fetch_min(0, SeqCst);
            return Ok(0);
        }
        let rec = ring::record(fire.slot, fire.generation);
        let id = locked
            .wheel
            .insert(next, rec)
            .unwrap_or_else(|_| unreachable!("deadline after the wheel's clock"));
        s.link.store(id.into_raw(), Relaxed);
        bump(&self.in_lock.entered);
        Ok(self.lower_next_wake(&locked))
    }

    /// Lowers `next_wake` to the wheel's next expiration (under the lock); returns it.
    fn lower_next_wake(&self, locked: &Locked) -> u64 {
        let next = locked.wheel.next_expiration().unwrap_or(u64::MAX);
        self.consumer.next_wake.fetch_min(next, SeqCst);
        next
    }

    /// Sets `next_wake` after draining the ring (under the lock): the wheel's next expiration,
    /// or sooner if records arrived meanwhile. Storing may overwrite an owner's `fetch_min` for
    /// such a record, so the ring is looked at afterwards: any record the store did not account
    /// for is either seen here or its owner sees the new value and lowers it again.
    ///
    /// While adds keep coming (this drain found records), the tick thread keeps looking once a
    /// tick: otherwise the next add after every drain would have to wake it. It stops one tick
    /// after the adds stop.
    fn publish_next_wake(&self, locked: &Locked, now: u64, drained: usize) {
        let mut next = locked.wheel.next_expiration().unwrap_or(u64::MAX);
        let bound = self.bound.load(Relaxed);
        if drained > 0 {
            next = next.min(now.saturating_add(bound));
        }
        self.consumer.next_wake.store(next, SeqCst);
        fence(SeqCst); // the other half of the handshake in `add.rs`
        if !self.ring.is_empty() {
            self.consumer
                .next_wake
                .fetch_min(now.saturating_add(bound), SeqCst);
        }
    }

    // ----- shutdown -----

    /// Hands back every task not yet running (`QUEUED`, `WAITING`, `DUE`), with its deadline
    /// (stamped with `now` if it had none yet), and empties the wheel and the ring.
    pub(crate) fn drain(&self, now: u64, out: &mut Vec<Returned>) {
        let mut locked = self.locked.lock();
        self.ring.clear(); // the scan below finds their slots
        for i in 0..self.slots.len() {
            let s = self.slots.get(i);
            // Sequentially consistent: the other half of the add's handshake (see `add.rs`).
            let generation = Word(s.word.load(SeqCst)).generation();
            let Some((old, work)) = s.take(
                generation,
                |w| matches!(w.state(), QUEUED | WAITING | DUE),
                |w| w.finished(RETURNED),
            ) else {
                continue;
            };
            let deadline = if old.state() == QUEUED && !old.has(STAMPED) {
                now.saturating_add(s.deadline.load(Relaxed))
            } else {
                s.deadline.load(Relaxed)
            };
            out.push(Returned { deadline, work });
            if old.state() != DUE {
                bump(&self.in_lock.left);
            }
            if old.handles() == 0 {
                self.slots.release(i);
            }
        }
        let _ = locked.wheel.drain();
        locked.overdue.clear(); // their slots were DUE: returned by the scan above
        self.consumer.next_wake.store(u64::MAX, SeqCst);
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
        self.slots.heap_bytes()
            + ring::CAPACITY as usize * std::mem::size_of::<u64>()
            + self.locked.lock().wheel.heap_bytes()
    }
}

impl reaper::Shard for Shard {
    type Item = Fire;

    fn next_wake(&self) -> u64 {
        self.consumer.next_wake.load(SeqCst)
    }

    fn collect(&self, clock: &dyn Clock, now: u64, due: &mut Vec<Due<Fire>>) {
        let mut locked = self.locked.lock();
        due.append(&mut locked.overdue);
        let drained = self.drain_ring(&mut locked, clock, due);
        locked.wheel.advance(now, |rec| {
            let (i, generation) = ring::split(rec);
            let s = self.slots.get(i);
            if s.transition(generation, |w| w.state() == WAITING, |w| w.with_state(DUE))
                .is_some()
            {
                bump(&self.in_lock.left);
                due.push(self.fire(
                    i,
                    generation,
                    s.deadline.load(Relaxed),
                    s.meant.load(Relaxed),
                ));
            }
        });
        self.publish_next_wake(&locked, now, drained);
    }
}
