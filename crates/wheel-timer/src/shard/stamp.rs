//! The consumer's side of a shard: draining the ring into the wheel (stamping deadlines),
//! collecting what is due for the tick thread, and `next_wake`; and shutdown's drain. Far tasks
//! wait in the young queue on their way to the wheel (`young.rs`).

use std::cell::Cell;

use tickwheel_reaper::{Clock, Due};

use super::*;

impl<K: Kind> Shard<K> {
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
        self.drain_ring(&mut locked, clock, due, true);
        if let Some(rec) = extra {
            let (i, generation) = ring::split(rec);
            if self.slots.get(i).word().is(generation, QUEUED) {
                // Its deadline is stamped; the owner's reading (taken for this add) dates it for
                // the young queue.
                let now = self.owner.reading.load(Relaxed);
                self.stamp(&mut locked, rec, &self.stamping(now, true, true), due);
            }
        }
        // The ring is empty and its only producer is here: the wheel and the young queue say it
        // all, unless a task re-armed already due waits in `overdue` for the tick thread
        // (`rearm` lowered `next_wake` to 0 for it: this store must not raise it over that).
        let next = if locked.overdue.is_empty() {
            locked.next_expiration()
        } else {
            0
        };
        self.consumer.next_wake.store(next, SeqCst);
        next
    }

    /// Takes every record out of the ring and files each still-`QUEUED` task: into the wheel, or
    /// into `due` if the wheel's clock has passed its deadline. Unstamped deadlines are stamped
    /// from a clock reading taken after the ring's tail was read, so after every add it drains.
    /// Returns the number of unstamped tasks it stamped (the adds that want the next look within
    /// a tick, see `wake_after_drain`). `by_owner`: called on the shard's owner thread, which
    /// stamps without pinning (see `stamp`); other callers pass `false` even there.
    pub(super) fn drain_ring(
        &self,
        locked: &mut MutexGuard<'_, Locked>,
        clock: &dyn Clock,
        due: &mut Vec<Due<Fire>>,
        by_owner: bool,
    ) -> usize {
        let batch = self.ring.published();
        if batch.0 == batch.1 {
            return 0;
        }
        let stamping = self.stamping(clock.now(), true, by_owner);
        let mut unstamped = 0;
        let file = |rec| {
            let (i, generation) = ring::split(rec);
            // Most records of a busy shard were cancelled already: skip them without a call.
            // (The acquire load of the ring's tail made the publication of each word of the
            // batch visible; `stamp` reads the word again, ordered.)
            let w = self.slots.get(i).peek_word();
            if w.is(generation, QUEUED) {
                unstamped += usize::from(!w.has(STAMPED));
                self.stamp(locked, rec, &stamping, due);
            }
        };
        // The owner's own drains (a full ring, a short delay) find the slots it just wrote in
        // its cache. Other drains (the tick thread's each tick, a stamp on demand, a reschedule)
        // mostly find them cold: written on the owner's core, most of them a tick ago, so they
        // fetch the next records' lines while this one is filed. (Not under loom, where the
        // prefetch does nothing and a second load of each record is one more step to interleave.)
        if by_owner || cfg!(loom) {
            self.ring.consume(batch, file);
        } else {
            let prefetch = |rec| crate::slots::prefetch::line(self.slots.get(ring::split(rec).0));
            self.ring.consume_ahead(batch, prefetch, file);
        }
        self.consumer.flushes.fetch_add(1, Release);
        unstamped
    }

    /// What the stamps of one drain (or one filing of young tasks) at clock time `now` share;
    /// `young`: far tasks may go to the young queue; `by_owner`: the caller is the shard's owner
    /// thread (told by the caller, not read: under loom a read of the owner word is one more
    /// step to interleave in every drain).
    pub(super) fn stamping(&self, now: u64, young: bool, by_owner: bool) -> Stamping {
        debug_assert!(!by_owner || self.slots.owned_here());
        Stamping {
            now,
            young: young.then(|| (self.young_ns().saturating_mul(2), self.file_at(now))),
            owner: by_owner,
        }
    }

    /// Files one `QUEUED` record (see `drain_ring`): due, into the young queue (if the stamping
    /// allows it and it is due far enough out), or into the wheel.
    #[inline(never)]
    pub(super) fn stamp(
        &self,
        locked: &mut Locked,
        rec: u64,
        stamping: &Stamping,
        due: &mut Vec<Due<Fire>>,
    ) {
        let (i, generation) = ring::split(rec);
        let s = self.slots.get(i);
        let now = stamping.now;
        // Pinned (one more handle) while its fields are written, unless the owner thread stamps
        // (its own drains, `flush_now`). A cancel takes no lock while the task is `QUEUED`, and
        // without the pin could end it and free the slot, and the owner's next add take the
        // slot, between the check and the writes, which would then give the new task this one's
        // deadline (loom `stamping_races_cancel_and_reuse_of_the_slot`: early). With it, a
        // cancel leaves the slot to the unpin below. Only the owner takes slots, so while the
        // owner stamps, a slot a cancel frees stays vacant (the writes land in a vacant slot,
        // and the filing's compare-and-swap fails on its generation): the owner's drains, most
        // of them when one thread adds fast, skip a compare-and-swap per task.
        let pinned = !stamping.owner;
        let w = if pinned {
            s.transition(generation, |w| w.state() == QUEUED, Word::plus_handle)
        } else {
            Some(s.word()).filter(|w| w.is(generation, QUEUED))
        };
        let Some(w) = w else {
            return; // cancelled, rolled back or returned since: nothing to file
        };
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
        // Each move out of the pin unpins in the same compare-and-swap.
        let moved = |to: fn(Word) -> Word| {
            let moved = s.transition(
                generation,
                |w| w.state() == QUEUED,
                |w| if pinned { to(w).minus_handle() } else { to(w) },
            );
            if moved.is_none() && pinned {
                self.let_go(i, s.word()); // cancelled meanwhile
            }
            moved.is_some()
        };
        // Due by the clock, or by the wheel's (which may lag the clock in a shard not collected
        // lately): a deadline at the end of time is never left in the wheel, where it would
        // read as "never".
        if deadline <= now.max(locked.wheel.now()) {
            if moved(|w| w.with_state(DUE)) {
                bump(&self.in_lock.left);
                due.push(self.fire(i, generation, deadline, meant));
            }
        } else if let Some((far, file_at)) = stamping.young
            && deadline - now >= far
        {
            if moved(|w| w.with(STAMPED)) {
                self.push_young(locked, rec, file_at);
            }
        } else if moved(|w| w.with_state(WAITING)) {
            let id = locked
                .wheel
                .insert(deadline, rec)
                .unwrap_or_else(|_| unreachable!("deadline after the wheel's clock"));
            s.link.store(id.into_raw(), Relaxed);
        }
    }

    /// The hand-out of the task in `slot` of `generation`, just found due (its slot is in the
    /// cache: its word was read to claim it). Reads where it runs now, so that the tick thread
    /// does not come back to the slot for it (a cache miss per task, with millions pending).
    #[inline]
    pub(crate) fn fire(&self, slot: u32, generation: u32, deadline: u64, meant: u64) -> Due<Fire> {
        let route = if self.slots.get(slot).word().has(WAKE) {
            WAKE_HERE
        } else {
            self.slots.route(slot).load(Relaxed)
        };
        Due {
            deadline,
            item: Fire {
                shard: self.id,
                slot,
                generation,
                route,
                meant,
            },
        }
    }

    /// Lowers `next_wake` to the wheel's next expiration (under the lock); returns it.
    pub(super) fn lower_next_wake(&self, locked: &Locked) -> u64 {
        let next = locked.next_expiration();
        self.consumer.next_wake.fetch_min(next, SeqCst);
        next
    }

    /// Sets `next_wake` after the tick thread drained the ring (under the lock): the wheel's next
    /// expiration, or sooner if records arrived meanwhile. Storing may overwrite an owner's
    /// `fetch_min` for such a record, so the tick thread issues a process-wide barrier after its
    /// round and then looks at the ring again ([`settle`](tickwheel_reaper::Shard::settle)): any
    /// record the store did not account for is either seen there or its owner sees the new value
    /// and lowers it again (the owner's half is `barrier::light` in `service/add.rs`).
    ///
    /// While unstamped adds keep coming (this drain stamped some), the tick thread keeps looking
    /// once a tick: otherwise the next such add after every drain would have to wake it. It stops
    /// one tick after they stop. Adds with a deadline (the futures') need no such look: each only
    /// asks for one by its deadline, which the wheel's next expiration usually covers already.
    fn publish_next_wake(&self, locked: &Locked, now: u64, unstamped: usize) {
        let next = self.wake_after_drain(locked, now, unstamped);
        self.consumer.next_wake.store(next, SeqCst);
    }

    /// After a drain by a thread that is not the tick thread (a handle asking for its deadline, a
    /// reschedule), `next_wake` may only be lowered: raising it needs the tick thread's barrier
    /// (above). A value left too low costs one early look by the tick thread, which then raises it.
    /// Returns the time the caller must wake the tick thread by: the drain may have filed a record
    /// that only asked for a look by its deadline into the young queue, whose filing comes sooner
    /// than any look the tick thread has promised, and later adds trust `next_wake`.
    #[must_use = "the tick thread must be woken by the returned time"]
    pub(super) fn lower_after_drain(&self, locked: &Locked, now: u64, unstamped: usize) -> u64 {
        let next = self.wake_after_drain(locked, now, unstamped);
        self.consumer.next_wake.fetch_min(next, SeqCst);
        next
    }

    /// When the tick thread should look next after a drain that stamped `unstamped` records.
    fn wake_after_drain(&self, locked: &Locked, now: u64, unstamped: usize) -> u64 {
        let next = locked.next_expiration();
        if unstamped > 0 {
            next.min(now.saturating_add(self.bound.load(Relaxed)))
        } else {
            next
        }
    }

    /// Hands back every task not yet running (`QUEUED`, `WAITING`, `DUE`), with its deadline
    /// (stamped with `now` if it had none yet), and empties the wheel and the ring.
    pub(crate) fn drain(&self, now: u64, out: &mut Vec<Returned<K::Work>>) {
        let mut locked = self.locked.lock();
        self.ring.clear(); // the scan below finds their slots
        for i in 0..self.slots.len() {
            let s = self.slots.get(i);
            // Sequentially consistent: the other half of the add's handshake (see `service/add.rs`).
            let generation = Word(s.word.load(SeqCst)).generation();
            // A future whose deadline this shutdown's clock reading has reached ends as fired,
            // not shut down: it is elapsed. Decided from the word the take replaces (an add
            // racing this may have published it since the load above), whose deadline was
            // written before it was published or under this lock; an unstamped one is due
            // later.
            let elapsed = Cell::new(false);
            let Some((old, work)) = s.take(
                generation,
                |w| matches!(w.state(), QUEUED | WAITING | DUE),
                |w| {
                    elapsed.set(
                        w.has(WAKE)
                            && (w.has(STAMPED) || w.state() != QUEUED)
                            && s.deadline.load(Relaxed) <= now,
                    );
                    w.finished(if elapsed.get() { DONE } else { RETURNED })
                },
            ) else {
                continue;
            };
            // A future's waker came out with its task (see `slots/waker.rs`): shutdown wakes it,
            // outside the lock.
            let deadline = if old.state() == QUEUED && !old.has(STAMPED) {
                // Stamped now, under the shard lock as every stamp (see `stamped_deadline`).
                let deadline = now.saturating_add(s.deadline.load(Relaxed));
                s.deadline.store(deadline, Relaxed);
                deadline
            } else {
                s.deadline.load(Relaxed)
            };
            let route = self.slots.route(i).load(Relaxed);
            out.push(Returned {
                deadline,
                work,
                elapsed: elapsed.get(),
                route,
            });
            if old.state() != DUE {
                bump(&self.in_lock.left);
            }
            if old.handles() == 0 {
                self.slots.release(i);
            }
        }
        let _ = locked.wheel.drain();
        locked.overdue.clear(); // their slots were DUE: returned by the scan above
        locked.young.clear(); // QUEUED: the same
        self.consumer.next_wake.store(u64::MAX, SeqCst);
    }
}

/// What the stamps of one run share (`Shard::stamping`): computed once, not per task.
pub(crate) struct Stamping {
    /// The clock reading deadlines are stamped from: taken after the adds it stamps.
    now: u64,
    /// If far tasks may go young: how far out a deadline must be (clock ns), and when a task
    /// made young now is filed.
    young: Option<(u64, u64)>,
    /// The stamping thread is the shard's owner (see `stamp`).
    owner: bool,
}

impl<K: Kind> tickwheel_reaper::Shard for Shard<K> {
    type Item = Fire;

    fn next_wake(&self) -> u64 {
        self.consumer.next_wake.load(SeqCst)
    }

    fn collect(&self, clock: &dyn Clock, now: u64, due: &mut Vec<Due<Fire>>) {
        let mut locked = self.locked.lock();
        due.append(&mut locked.overdue);
        let unstamped = self.drain_ring(&mut locked, clock, due, false);
        self.file_young(&mut locked, now, due);
        // The slot and the route word of each due task are cold with millions pending: ask for
        // them ahead of `fire`, which reads both.
        let prefetch = |&rec: &u64| {
            let i = ring::split(rec).0;
            crate::slots::prefetch::line(self.slots.get(i));
            crate::slots::prefetch::line(self.slots.route(i));
        };
        locked.wheel.advance_prefetching(now, prefetch, |rec| {
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
        self.publish_next_wake(&locked, now, unstamped);
    }

    fn settle(&self, now: u64) {
        // After the tick thread's barrier: the other half of the add's handshake (`service/add.rs`).
        // Under the lock: another thread may have drained a record the owner did not wake for
        // since `collect` (a handle's `deadline`, a reschedule); it lowers `next_wake` before it
        // unlocks, so an empty ring here means the lowering is visible to the tick thread's next
        // look at `next_wake`. A record found here gets the look its add asked for (`cover`):
        // within a tick to be stamped, or by its deadline.
        let _locked = self.locked.lock();
        let mut by = u64::MAX;
        self.ring.peek(self.ring.published(), |rec| {
            let (i, generation) = ring::split(rec);
            let s = self.slots.get(i);
            let w = s.word();
            if !w.is(generation, QUEUED) {
                return; // cancelled since: nothing to look for
            }
            let within_a_tick = now.saturating_add(self.bound.load(Relaxed));
            let look = if w.has(STAMPED) {
                // Written before the word was published (which `word` acquired), and rewritten
                // only under the lock while the record lives. A cancel may vacate the slot
                // meanwhile and its owner reuse it, writing `deadline` without the lock; the
                // second read of the word catches that only sometimes (nothing orders the new
                // write before it), but a dead record's value can only make `by` earlier: one
                // early look at worst.
                let deadline = s.deadline.load(Acquire);
                if s.word() == w {
                    deadline
                } else {
                    within_a_tick
                }
            } else {
                within_a_tick
            };
            by = by.min(look);
        });
        if by != u64::MAX {
            self.consumer.next_wake.fetch_min(by, SeqCst);
        }
    }
}
