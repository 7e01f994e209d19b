//! Where entries live: locating an entry's bucket, placing records, and counting and compacting
//! dead ones.

use std::cmp::Reverse;

use super::{Bucket, OVERDUE, RETAINED_CAPACITY, Rec, TimingWheel};
use crate::time::{bucket_start, level_for, max_levels, slot_for};

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

    /// Puts a record into the bucket its entry, due at `due > cur`, belongs in, creating the level
    /// and offering the bucket to the queue when this is its first record of the round.
    #[inline]
    pub(super) fn place_in_bucket(&mut self, rec: Rec, due: u64) {
        let level = level_for(self.cur, due, self.bits);
        let slot = slot_for(due, level, self.bits);
        if level as usize >= self.levels.len() {
            self.grow_levels(level);
        }
        let bucket = &mut self.levels[level as usize][slot as usize];
        if bucket.recs.is_empty() {
            if level == 0 {
                self.level0.set(slot);
            } else {
                let id = (level << self.bits) | slot;
                debug_assert!(
                    self.queue.get(&id).is_none(),
                    "an empty bucket is never queued"
                );
                self.queue
                    .push(id, Reverse(bucket_start(due, level, self.bits)));
            }
        }
        bucket.recs.push(rec);
    }

    /// The earliest non-empty level-0 bucket, as (slot, first tick).
    #[inline]
    pub(super) fn first_level0(&self) -> Option<(u32, u64)> {
        let mask = (1u64 << self.bits) - 1;
        let from = (self.cur & mask) + 1; // level 0 holds only ticks after `cur`, in its span
        let slot = self.level0.first_from(from as u32)?;
        Some((slot, (self.cur & !mask) | u64::from(slot)))
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

    /// Counts one more dead record at `loc`, compacting it once half its records are dead.
    pub(super) fn note_dead(&mut self, loc: u32) {
        let slab = &self.slab;
        let emptied = if loc == OVERDUE {
            note_dead_in(&mut self.overdue, |r| slab.is_live(r.slot, r.stamp))
        } else {
            let (level, slot) = self.split(loc);
            note_dead_in(&mut self.levels[level][slot], |r| {
                slab.is_live(r.slot, r.stamp)
            })
        };
        if emptied && loc != OVERDUE {
            if loc >> self.bits == 0 {
                self.level0.clear(loc);
            } else {
                self.queue.remove(&loc);
            }
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

/// Records one more dead record in `bucket` and compacts it when at least half are dead. Returns
/// true if that left the bucket empty.
fn note_dead_in<R>(bucket: &mut Bucket<R>, live: impl Fn(&R) -> bool) -> bool {
    bucket.dead += 1;
    if (bucket.dead as usize) * 2 < bucket.recs.len() {
        return false;
    }
    bucket.recs.retain(|r| live(r));
    bucket.dead = 0;
    if bucket.recs.capacity() > RETAINED_CAPACITY && bucket.recs.capacity() > 4 * bucket.recs.len()
    {
        bucket.recs.shrink_to(2 * bucket.recs.len());
    }
    bucket.recs.is_empty()
}
