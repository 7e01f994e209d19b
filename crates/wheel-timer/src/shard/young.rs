//! The young queue: far tasks wait here, stamped, on their way from the ring to the wheel.
//!
//! Most far timers never fire: a request timeout of 5 or 30 s is cancelled when the request
//! completes, a few milliseconds later. A task in the wheel is cancelled under the shard lock
//! and unlinked from its bucket (a few cache misses); a task not yet in the wheel (`QUEUED`) is
//! cancelled with one compare-and-swap on its slot word. So a stamped task due at least
//! `2 * YOUNG_TICKS` ticks out stays `QUEUED` (now `STAMPED`), in a FIFO of its shard, for
//! `YOUNG_TICKS` ticks before it is filed in the wheel; the tasks cancelled meanwhile are skipped
//! by that filing for the price of reading their slot word. The queue is in stamping order, so
//! its head is the next filing, which `next_wake` covers. Filing times are rounded up to a
//! multiple of `YOUNG_BATCH_TICKS` (64), so a stream of far adds costs the tick thread one look
//! per 64 ticks, not one per tick; a task is filed at least `YOUNG_TICKS - YOUNG_BATCH_TICKS`
//! (192) ticks before its deadline, so the queue never makes it late unless the tick thread
//! itself is that late (a task filed after its deadline is handed out at once, never early).

use std::collections::VecDeque;

use tickwheel_reaper::Due;

use super::*;

/// Ticks a far task waits in the young queue before it is filed in the wheel (see the module
/// docs); tasks due at least twice as far out go through it.
pub(crate) const YOUNG_TICKS: u64 = 256;

/// How many records ahead of the one it reads the young queue's filing and sweep prefetch.
const YOUNG_PREFETCH: usize = 16;

/// Young tasks are filed in batches: at multiples of this many ticks (see `Shard::file_at`).
/// Well under `YOUNG_TICKS`, so a task is still filed long before its deadline.
const YOUNG_BATCH_TICKS: u64 = 64;

impl<K: Kind> Shard<K> {
    /// Files the young tasks whose time came by clock time `now` (see the module docs); the
    /// ones cancelled meanwhile are skipped.
    pub(super) fn file_young(&self, locked: &mut Locked, now: u64, due: &mut Vec<Due<Fire>>) {
        let stamping = self.stamping(now, false, false);
        while let Some(&Young { rec, file_at }) = locked.young.front() {
            if file_at > now {
                break;
            }
            self.prefetch_young(&locked.young, YOUNG_PREFETCH);
            locked.young.pop_front();
            let (i, generation) = ring::split(rec);
            if self.slots.get(i).word().is(generation, QUEUED) {
                self.stamp(locked, rec, &stamping, due);
            }
        }
        let young = &mut locked.young;
        if young.capacity() > 4096 && young.len() * 4 < young.capacity() {
            young.shrink_to(young.len() * 2); // a burst went by: give its memory back
        }
    }

    /// Drops the records of young tasks cancelled meanwhile, keeping the order (under the lock).
    fn sweep_young(&self, young: &mut VecDeque<Young>) {
        let mut kept = 0;
        for k in 0..young.len() {
            self.prefetch_young(young, k + YOUNG_PREFETCH);
            let y = young[k];
            let (i, generation) = ring::split(y.rec);
            if self.slots.get(i).word().is(generation, QUEUED) {
                young[kept] = y;
                kept += 1;
            }
        }
        young.truncate(kept);
    }

    /// Starts fetching the slot of the young record at `k`, if there is one: the filing and the
    /// sweep read one slot word per record, each cold by then, so they ask for the line
    /// `YOUNG_PREFETCH` records ahead (as the wheel's flush does for its entries).
    #[inline]
    fn prefetch_young(&self, young: &VecDeque<Young>, k: usize) {
        if let Some(y) = young.get(k) {
            crate::slots::prefetch::line(self.slots.get(ring::split(y.rec).0));
        }
    }

    /// Files a young task in the wheel now (a reschedule moves it there). Under the lock.
    pub(super) fn file_young_now(&self, locked: &mut Locked, rec: u64, due: &mut Vec<Due<Fire>>) {
        let stamping = self.stamping(locked.wheel.now(), false, false);
        self.stamp(locked, rec, &stamping, due); // its record in the queue is skipped later
    }

    /// Queues the stamped record `rec` for its filing at clock time `file_at` (see `file_at`). Under
    /// the lock.
    pub(super) fn push_young(&self, locked: &mut Locked, rec: u64, file_at: u64) {
        if locked.young.len() == locked.young.capacity() {
            // Full: drop the records of tasks cancelled meanwhile before it grows, so it holds
            // at most twice the young tasks still waiting, however long the clock stands still.
            self.sweep_young(&mut locked.young);
            let live = locked.young.len();
            if live * 2 > locked.young.capacity() {
                locked.young.reserve(live); // mostly live: grow (the sweeps stay O(1) each)
            }
        }
        locked.young.push_back(Young { rec, file_at });
    }

    /// How long a far task stays young, clock ns.
    #[inline]
    pub(super) fn young_ns(&self) -> u64 {
        self.bound.load(Relaxed).saturating_mul(YOUNG_TICKS)
    }

    /// When a task made young at clock time `now` is filed: `YOUNG_TICKS` later, rounded up to
    /// a multiple of `YOUNG_BATCH_TICKS`, so that the tick thread files a stream of them in one
    /// look per batch rather than one per tick.
    #[inline]
    pub(super) fn file_at(&self, now: u64) -> u64 {
        let batch = self.bound.load(Relaxed).saturating_mul(YOUNG_BATCH_TICKS);
        now.saturating_add(self.young_ns())
            .checked_next_multiple_of(batch.max(1))
            .unwrap_or(u64::MAX)
    }
}
