//! Where entries live: locating an entry's bucket, placing its record there, and taking the record
//! out again.

use std::cmp::Reverse;

use super::{OVERDUE, OverdueRec, RETAINED_CAPACITY, TimingWheel};
use crate::time::{bucket_span_mask, bucket_start, level_for, max_levels, slot_for};

impl<T> TimingWheel<T> {
    /// Where an entry due at tick `due` lives now: `OVERDUE` or a bucket id.
    #[inline]
    pub(super) fn locate(&self, due: u64) -> u32 {
        if due <= self.cur {
            OVERDUE
        } else {
            let level = level_for(self.cur, due, self.bits);
            (level << self.bits) | slot_for(due, level, self.bits)
        }
    }

    /// Records the entry at `slot`, due at `due > cur`, in the bucket it belongs in, creating the
    /// level and offering the bucket to the queue when this is its first record of the round.
    #[inline]
    pub(super) fn place_in_bucket(&mut self, slot: u32, due: u64) {
        let level = level_for(self.cur, due, self.bits);
        let bucket_slot = slot_for(due, level, self.bits);
        if level as usize >= self.levels.len() {
            self.grow_levels(level);
        }
        let bucket = &mut self.levels[level as usize][bucket_slot as usize];
        if bucket.is_empty() {
            if let Some(bits) = self.bitmaps.get_mut(level as usize) {
                bits.set(bucket_slot);
            } else {
                let id = (level << self.bits) | bucket_slot;
                debug_assert!(
                    self.queue.get(&id).is_none(),
                    "an empty bucket is never queued"
                );
                self.queue
                    .push(id, Reverse(bucket_start(due, level, self.bits)));
            }
        }
        self.slab.set_pos(slot, bucket.len() as u32);
        bucket.push(slot);
    }

    /// Records the entry at `slot` on the overdue list; `due` is its true due tick (the entry's
    /// own is clamped to `cur`).
    pub(super) fn push_overdue(&mut self, slot: u32, due: u64) {
        self.slab.set_pos(slot, self.overdue.len() as u32);
        self.overdue.push(OverdueRec { due, slot });
    }

    /// The earliest non-empty bucket of the levels kept in bitmaps, as (bucket id, first tick).
    ///
    /// Level `k` holds only ticks of the clock's current level-`k+1` bucket whose digit `k` is
    /// past the clock's (the aligned levels' rule), so its earliest bucket is the first set bit
    /// after the clock's digit, with no wrap-around; and every bucket of level `k` expires before
    /// every bucket of the levels above.
    #[inline]
    pub(super) fn first_in_bitmaps(&self) -> Option<(u32, u64)> {
        let mask = (1u64 << self.bits) - 1;
        for (level, bits) in self.bitmaps.iter().enumerate() {
            let shift = level as u32 * self.bits; // at most 16: `bits <= 16`
            let from = ((self.cur >> shift) & mask) + 1;
            if let Some(slot) = bits.first_from(from as u32) {
                let span = (mask << shift) | bucket_span_mask(level as u32, self.bits);
                let start = (self.cur & !span) | (u64::from(slot) << shift);
                return Some((((level as u32) << self.bits) | slot, start));
            }
        }
        None
    }

    #[cold]
    pub(super) fn grow_levels(&mut self, level: u32) {
        debug_assert!(level < max_levels(self.bits));
        while self.levels.len() <= level as usize {
            self.levels
                .push((0..1usize << self.bits).map(|_| Vec::new()).collect());
        }
    }

    /// Takes the record at index `pos` out of location `loc` by moving the location's last record
    /// into its place, and leaves a bucket it empties out of the bitmap or the queue. O(1),
    /// besides a rare shrink of a bucket that a burst had grown.
    #[inline]
    pub(super) fn unlink(&mut self, loc: u32, pos: u32) {
        let i = pos as usize;
        if loc == OVERDUE {
            self.overdue.swap_remove(i);
            if let Some(moved) = self.overdue.get(i) {
                self.slab.set_pos(moved.slot, pos);
            }
            return;
        }
        let (level, bucket_slot) = self.split(loc);
        let bucket = &mut self.levels[level][bucket_slot];
        bucket.swap_remove(i);
        if let Some(&moved) = bucket.get(i) {
            self.slab.set_pos(moved, pos);
        } else if bucket.is_empty() {
            if let Some(bits) = self.bitmaps.get_mut(level) {
                bits.clear(bucket_slot as u32);
            } else {
                self.queue.remove(&loc);
            }
        }
        if bucket.capacity() > RETAINED_CAPACITY && bucket.capacity() > 4 * bucket.len() {
            bucket.shrink_to(2 * bucket.len());
        }
    }

    /// `(level, slot)` of a bucket id.
    #[inline]
    pub(super) fn split(&self, id: u32) -> (usize, usize) {
        (
            (id >> self.bits) as usize,
            (id & ((1 << self.bits) - 1)) as usize,
        )
    }
}
