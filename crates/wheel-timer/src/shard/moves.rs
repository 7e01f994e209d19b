//! Moves of a task through a handle or its job: cancel, reschedule, and re-arming a periodic
//! task. A task already in the wheel is moved under the shard lock; one still in the ring needs
//! only its slot word.

use tickwheel_reaper::{Clock, Due};

use crate::slots::word::BUSY;

use super::*;

impl<K: Kind> Shard<K> {
    /// Stops the task in slot `i` (pinned by the caller's handle): whether this call stopped it
    /// from running (again), and if a run of it is in progress. The closure is dropped before
    /// returning, outside every lock, and after the cancel is counted: a panic in its `Drop`
    /// reaches the caller, not the counts.
    #[inline(always)]
    pub(crate) fn cancel(&self, i: u32) -> Cancel {
        let s = self.slots.get(i);
        let generation = s.word().generation();
        // The common case: a task not yet stamped.
        if s.discard(
            generation,
            |w| w.state() == QUEUED,
            |w| w.with_state(CANCELLED),
            || self.count_cancel(true),
        )
        .is_some()
        {
            return Cancel::Stopped;
        }
        self.cancel_slow(i, generation)
    }

    /// A cancel and the drop of the one handle naming slot `i`, as one move when the task is
    /// not yet stamped and no other handle names it (a future's task, whose future holds its
    /// only handle): vacant at once, one generation on, as the two steps would leave it, and
    /// the slot back on the free list. `keep` takes what the caller wants out of the task (the
    /// future's waker, if a poll left one) before the rest is dropped. `None` if the task is not
    /// in that case: the caller then cancels and drops its handle as usual.
    #[inline(always)]
    pub(crate) fn cancel_sole<R>(&self, i: u32, keep: impl FnOnce(&mut K::Work) -> R) -> Option<R> {
        let s = self.slots.get(i);
        let generation = s.word().generation();
        let kept = s.discard_keeping(
            generation,
            |w| w.state() == QUEUED && w.handles() == 1,
            Word::vacated,
            keep,
        )?;
        self.count_cancel(true);
        self.slots.release(i);
        Some(kept)
    }

    #[inline(never)]
    fn cancel_slow(&self, i: u32, generation: u32) -> Cancel {
        let s = self.slots.get(i);
        loop {
            let w = s.word();
            if w.generation() != generation {
                return Cancel::Refused;
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
                        return Cancel::Stopped;
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
                    return Cancel::Stopped;
                }
                RUNNING if w.has(PERIODIC) && !w.has(STOP) => {
                    if let Some(old) = s.transition(
                        generation,
                        |w| w.state() == RUNNING && !w.has(STOP),
                        |w| w.with(STOP),
                    ) {
                        self.count_cancel(false);
                        return match old.has(BUSY) {
                            true => Cancel::StoppedRunning(generation),
                            false => Cancel::Stopped,
                        };
                    }
                }
                _ => return Cancel::Refused,
            }
        }
    }

    /// True while the run of the periodic task in slot `i` (of `generation`) that a cancel
    /// landed in is still in progress (see [`Cancel::StoppedRunning`]).
    pub(crate) fn run_in_progress(&self, i: u32, generation: u32) -> bool {
        let w = self.slots.get(i).word();
        w.is(generation, RUNNING) && w.has(BUSY)
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
    /// now has it. A deadline already come sends it to the executor at once (`due`). Also returns
    /// the time the tick thread must be woken by (`u64::MAX`: no need), moved or not: the drain of
    /// the ring on the way may need it (see `lower_after_drain`).
    pub(crate) fn reschedule(
        &self,
        i: u32,
        clock: &dyn Clock,
        now: u64,
        delay: u64,
        due: &mut Vec<Due<Fire>>,
    ) -> (bool, u64) {
        let s = self.slots.get(i);
        let generation = s.word().generation();
        let mut locked = self.locked.lock();
        let mut wake = u64::MAX;
        if s.word().is(generation, QUEUED) {
            // Stamp it (and the ring with it) first: it then has a place in the wheel to move.
            let unstamped = self.drain_ring(&mut locked, clock, due, false);
            if s.word().is(generation, QUEUED) {
                // Young (see `young.rs`): filed in the wheel now.
                self.file_young_now(&mut locked, ring::record(i, generation), due);
            }
            wake = self.lower_after_drain(&locked, now, unstamped);
        }
        if !s.word().is(generation, WAITING) {
            return (false, wake);
        }
        let deadline = now.saturating_add(delay);
        let id = TimerId::from_raw(s.link.load(Relaxed));
        if deadline <= now {
            if s.transition(generation, |w| w.state() == WAITING, |w| w.with_state(DUE))
                .is_none()
            {
                return (false, wake);
            }
            locked.wheel.cancel(id);
            bump(&self.in_lock.left);
            s.deadline.store(deadline, Relaxed);
            s.meant.store(deadline, Relaxed);
            due.push(self.fire(i, generation, deadline, deadline));
            return (true, wake);
        }
        s.deadline.store(deadline, Relaxed);
        s.meant.store(deadline, Relaxed);
        let moved = locked.wheel.reschedule(id, deadline);
        debug_assert!(moved, "a WAITING task is in the wheel");
        (true, wake.min(self.lower_next_wake(&locked)))
    }

    /// Puts a periodic task back for its run at `next` (from its job, through its hold on the
    /// task): into the wheel, or, if the wheel's clock has passed `next`, onto the list the tick
    /// thread hands out first at its next turn (so a task that is always behind takes turns with
    /// the other due tasks instead of re-queuing itself on the pool's local queue). Returns the
    /// time the tick thread must wake by. Fails, handing back the hold and the work, if a cancel
    /// asked the task to stop, or if `open()` says shutdown has begun: that is read under the
    /// shard lock, and shutdown drains each shard under it after it closed, so a task is either
    /// filed before the drain (which claims it) or handed back by its job, never left in a
    /// wheel nobody drains again.
    pub(crate) fn rearm<'a>(
        &self,
        run: Run<'a, K>,
        fire: Fire,
        next: u64,
        work: K::Work,
        open: impl FnOnce() -> bool,
    ) -> Result<u64, Rearm<'a, K>> {
        let s = run.slot();
        let mut locked = self.locked.lock();
        if !open() {
            return Err(Rearm::Closing(run, work));
        }
        let to_due = next <= locked.wheel.now();
        s.deadline.store(next, Relaxed);
        s.meant.store(next, Relaxed);
        run.park(work, if to_due { DUE } else { WAITING })
            .map_err(|(run, work)| Rearm::Stopped(run, work))?;
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
}

/// What [`Shard::cancel`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cancel {
    /// Nothing: the task had ended, or another cancel stopped it first.
    Refused,
    /// Stopped: it will not run (again).
    Stopped,
    /// Stopped, while a run of the periodic task (of this generation) is in progress: the run
    /// finishes, and a caller that promises "no run after I return" waits for it.
    StoppedRunning(u32),
}

/// Why [`Shard::rearm`] did not put a periodic task back: the job keeps its hold and the work.
pub(crate) enum Rearm<'a, K: Kind> {
    /// A cancel asked it to stop.
    Stopped(Run<'a, K>, K::Work),
    /// Shutdown has begun: the task goes back to its caller.
    Closing(Run<'a, K>, K::Work),
}
