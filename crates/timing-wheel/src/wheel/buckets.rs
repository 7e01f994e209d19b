//! Where entries live: locating an entry's bucket, placing its record there, and letting go of it
//! (counting it stale, compacting, emptying a bucket).

use std::cmp::Reverse;

use std::mem;

use super::{
    Bucket, COMPACT_MIN, OVERDUE, OverdueRec, PREFETCH_AHEAD, RETAINED_CAPACITY, STALE_PER_LIVE,
    TimingWheel,
};
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
        if bucket.recs.is_empty() {
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
        // The entry's store first: pushed first, the record's store (a miss when inserts land in
        // many buckets) held the entry's back, W1 about 3% slower.
        self.slab.set_pos(slot, bucket.recs.len() as u32);
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
            self.levels.push(
                (0..1usize << self.bits)
                    .map(|_| Bucket::default())
                    .collect(),
            );
        }
    }

    /// Lets go of the record at index `pos` of location `loc`, whose entry has left it (vacated,
    /// or moved elsewhere with its `pos`). The overdue list takes it out at once by moving its
    /// last record into the hole. A bucket takes it out at once only if it is the last record;
    /// otherwise it counts it stale ([`Bucket`]). Then a bucket left with no live record is
    /// emptied (leaving the bitmap or the queue), one whose stale records are more than
    /// `STALE_PER_LIVE` times the live ones (and reach `COMPACT_MIN`) is compacted, and one whose
    /// capacity a burst had grown past four times its records gives most of it back. O(1)
    /// amortized: a compaction sweeps at most one and a half times as many records as the
    /// cancels and reschedules that called for it.
    #[inline]
    pub(super) fn forget(&mut self, loc: u32, pos: u32) {
        if loc == OVERDUE {
            self.forget_overdue(pos);
            return;
        }
        self.count_stale(loc, pos);
        self.tidy_if_due(loc);
    }

    /// `forget`'s first half for bucket `loc`: takes the record at `pos` out if it is the last
    /// one, else marks it and counts it stale.
    #[inline]
    fn count_stale(&mut self, loc: u32, pos: u32) {
        let (level, bucket_slot) = self.split(loc);
        self.levels[level][bucket_slot].let_go(pos as usize);
    }

    /// `forget`'s second half for bucket `loc`: empties, compacts or shrinks it if it needs it.
    #[inline]
    fn tidy_if_due(&mut self, loc: u32) {
        let (level, bucket_slot) = self.split(loc);
        let bucket = &self.levels[level][bucket_slot];
        if bucket.live() == 0
            || (bucket.stale >= COMPACT_MIN
                && bucket.stale as usize > STALE_PER_LIVE * bucket.live())
            || oversized(&bucket.recs)
        {
            self.tidy(loc);
        }
    }

    /// Does the bucket bookkeeping of the cancels since the last settle (see
    /// [`Unsettled`](super::Unsettled)): every count first, then the tidying, so that no
    /// compaction moves a record an unsettled cancel still points at. Before the clock moves
    /// (the cancels' buckets are located by it) and before anything else forgets or compacts.
    #[inline]
    pub(super) fn settle(&mut self) {
        if !self.unsettled.is_empty() {
            self.settle_now();
        }
    }

    #[inline(never)]
    fn settle_now(&mut self) {
        let mut cancels = mem::take(&mut self.unsettled);
        for c in &cancels {
            self.count_stale(self.locate(c.due), c.pos);
        }
        for c in &cancels {
            self.tidy_if_due(self.locate(c.due));
        }
        cancels.clear();
        self.unsettled = cancels;
    }

    /// `forget` for the overdue list: the record goes at once, the last one moving into its place.
    /// Out of line: the overdue list holds only entries rescheduled into the past and those a
    /// panicking callback left behind, so cancels rarely come here.
    #[cold]
    #[inline(never)]
    fn forget_overdue(&mut self, pos: u32) {
        let i = pos as usize;
        self.overdue.swap_remove(i);
        if let Some(moved) = self.overdue.get(i) {
            self.slab.set_pos(moved.slot, pos);
        }
    }

    /// `forget`'s rare half, out of line so a cancel stays short (the CPU overlaps the cache
    /// misses of consecutive cancels only as far as it can run ahead): empties bucket `id` if no
    /// live record is left in it, else drops its stale records; then shrinks an oversized buffer.
    #[cold]
    #[inline(never)]
    fn tidy(&mut self, id: u32) {
        let (level, bucket_slot) = self.split(id);
        let bucket = &mut self.levels[level][bucket_slot];
        let mut taken = mem::take(bucket);
        if taken.live() == 0 {
            taken.clear();
            if let Some(bits) = self.bitmaps.get_mut(level) {
                bits.clear(bucket_slot as u32);
            } else {
                self.queue.remove(&id);
            }
        } else if taken.stale > 0 {
            self.retain_live(&mut taken);
        }
        if oversized(&taken.recs) {
            taken.recs.shrink_to(2 * taken.recs.len());
            taken.marks.shrink_to(2 * taken.marks.len());
        }
        self.levels[level][bucket_slot] = taken;
    }

    /// Keeps the live records of a settled bucket `b` (taken out of its level), in their order,
    /// and points the entries of those that move at their new indexes; clears the marks. One pass; the slab is
    /// written only for the records that move (its lines prefetched ahead), and never read.
    pub(super) fn retain_live(&mut self, b: &mut Bucket) {
        let mut kept = 0;
        for i in 0..b.recs.len() {
            let ahead = i + PREFETCH_AHEAD;
            if ahead < b.recs.len() && !b.is_marked(ahead) {
                self.slab.prefetch(b.recs[ahead]);
            }
            if !b.is_marked(i) {
                let s = b.recs[i];
                if kept != i {
                    b.recs[kept] = s;
                    self.slab.set_pos(s, kept as u32);
                }
                kept += 1;
            }
        }
        b.recs.truncate(kept);
        b.marks.clear();
        b.marks.resize(kept.div_ceil(64), 0);
        b.stale = 0;
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

/// A bucket buffer a burst grew: past `RETAINED_CAPACITY` and four times its records.
#[inline]
fn oversized(recs: &Vec<u32>) -> bool {
    recs.capacity() > RETAINED_CAPACITY && recs.capacity() > 4 * recs.len()
}
