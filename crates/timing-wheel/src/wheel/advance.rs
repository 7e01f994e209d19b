//! Advancing: popping due buckets in order (levels 0 and 1 by bit scan, then the queue's),
//! cascading the rest of the last one, and handing items out; and what a panicking callback
//! leaves behind.

use std::cmp::Reverse;
use std::mem;

use super::{Due, PREFETCH_AHEAD, RETAINED_CAPACITY, TimingWheel, is_marked};
use crate::time::{bucket_span_mask, reached_tick};

impl<T> TimingWheel<T> {
    /// Moves the clock to `now` and calls `f` with every item that is due, earliest first.
    ///
    /// An item is due when `now` has reached its deadline rounded up to a multiple of the tick
    /// (saturating at `u64::MAX`), or when it was rescheduled to a deadline already passed. Items
    /// come out in nondecreasing order of their rounded deadlines. The clock never goes backwards:
    /// an earlier `now` is ignored (items rescheduled into the past are still handed out).
    ///
    /// If `f` panics, the advance still completes without it: the clock reads `now`, and every
    /// item it had not handed out stays in the wheel as overdue (under a new id, so its old
    /// `TimerId` goes stale). The next `advance` hands those out first, in order, before anything
    /// due later, including items rescheduled into the past meanwhile.
    pub fn advance(&mut self, now: u64, f: impl FnMut(T)) {
        self.advance_prefetching(now, |_| {}, f);
    }

    /// [`advance`](Self::advance), calling `prefetch` with each due item a few items before `f`
    /// gets it: a caller whose `f` touches memory of its own per item (a task's slot, found
    /// from the item) starts fetching it there, so the misses of consecutive items overlap
    /// instead of each stalling `f` in turn. `prefetch` should only hint (it may not see every
    /// item, and items it saw may not come out of this advance if `f` panics). A panic in
    /// `prefetch` is treated as one in `f`: nothing is lost.
    ///
    /// ```
    /// use tickwheel_wheel::TimingWheel;
    ///
    /// let slots = vec![10u64, 20, 30];
    /// let mut wheel = TimingWheel::new(1, 64, 0)?;
    /// for i in 0..3 {
    ///     wheel.insert(5 + i as u64, i)?;
    /// }
    /// let (mut hinted, mut sum) = (0, 0);
    /// wheel.advance_prefetching(10, |&i| hinted += usize::from(slots.get(i).is_some()), |i| sum += slots[i]);
    /// assert_eq!((hinted, sum), (3, 60));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn advance_prefetching(
        &mut self,
        now: u64,
        mut prefetch: impl FnMut(&T),
        mut f: impl FnMut(T),
    ) {
        self.settle(); // before the clock moves: the cancels' buckets are located by it
        self.now = self.now.max(now);
        let target = reached_tick(self.now, self.tick);
        // Finishes the advance when dropped: a no-op after the loop below, the rest of the work
        // (without `f`) if `f` panicked.
        let mut guard = Finish {
            wheel: self,
            target,
            complete: false,
        };
        let w = &mut *guard.wheel;
        if !w.overdue.is_empty() {
            w.collect_overdue();
            w.emit(&mut prefetch, &mut f);
        }
        while let Some(last) = w.pop_due_bucket(target) {
            w.emit(&mut prefetch, &mut f);
            if last >= target {
                // Buckets cover disjoint tick ranges and come out earliest first, so every other
                // bucket starts after this one's last tick: none is due. (Stepping from one
                // `next_expiration` to the next, nearly every advance ends here, without another
                // look at the bitmaps and the queue.)
                break;
            }
        }
        guard.complete = true;
    }

    /// Pops the earliest queued bucket if it starts by `target` and collects it into `self.due`
    /// (the records of items not yet due re-enter finer levels). Returns the bucket's last tick,
    /// or `None` if no bucket is due.
    pub(super) fn pop_due_bucket(&mut self, target: u64) -> Option<u64> {
        // The levels kept in bitmaps first: their buckets expire before every queued one.
        let (id, start) = match self.first_in_bitmaps() {
            Some((id, start)) => {
                if start > target {
                    return None;
                }
                let (level, slot) = self.split(id);
                self.bitmaps[level].clear(slot as u32);
                (id, start)
            }
            None => {
                let (&id, &Reverse(start)) = self.queue.peek()?;
                if start > target {
                    return None;
                }
                self.queue.pop();
                (id, start)
            }
        };
        Some(self.collect_bucket(id, start, target))
    }

    /// Takes the overdue items out into `self.due`, sorted.
    pub(super) fn collect_overdue(&mut self) {
        let mut recs = mem::take(&mut self.overdue);
        for r in recs.drain(..) {
            self.due.push(Due {
                due: r.due,
                item: self.slab.remove(r.slot),
            });
        }
        self.len -= self.due.len();
        self.due.sort_unstable_by_key(|d| d.due);
        self.overdue = recs; // empty, keeping its allocation
    }

    /// Empties the popped bucket `id` (first tick `start`): items due by `target` go to
    /// `self.due`, sorted; the rest re-enter finer levels.
    ///
    /// Only the bucket `target` falls inside can hold entries not yet due, and every other bucket
    /// expires after it (no other bucket holds ticks in its range, and buckets are popped
    /// earliest first). So when this is that bucket the clock may move to `target` before the
    /// loop, and each entry not yet due is placed at once, while its slab entry is in the cache:
    /// a second pass would miss on every one of them again. Returns the bucket's last tick.
    pub(super) fn collect_bucket(&mut self, id: u32, start: u64, target: u64) -> u64 {
        let (level, slot) = self.split(id);
        let bucket = &mut self.levels[level][slot];
        let mut recs = mem::take(&mut bucket.recs);
        let stale = mem::replace(&mut bucket.stale, 0);
        let last = start | bucket_span_mask(level as u32, self.bits);
        if last > target {
            debug_assert!(self.queue.peek().is_none_or(|(_, &Reverse(s))| s > target));
            self.cur = target;
        }
        if stale == 0 {
            // Nothing was cancelled out of it (a wheel without cancels never goes below).
            for (i, &s) in recs.iter().enumerate() {
                if let Some(&ahead) = recs.get(i + PREFETCH_AHEAD) {
                    self.slab.prefetch(ahead);
                }
                self.collect_record(s, start, last, target);
            }
        } else {
            let marks = mem::take(&mut self.levels[level][slot].marks);
            for (i, &s) in recs.iter().enumerate() {
                if let Some(&ahead) = recs.get(i + PREFETCH_AHEAD)
                    && !is_marked(&marks, i + PREFETCH_AHEAD)
                {
                    self.slab.prefetch(ahead);
                }
                if !is_marked(&marks, i) {
                    self.collect_record(s, start, last, target);
                }
            }
            self.levels[level][slot].marks = marks;
        }
        self.len -= self.due.len();
        if level > 0 {
            // A level-0 bucket is one tick wide: all its items are due at `start`, in any order.
            self.due.sort_unstable_by_key(|d| d.due);
        }
        recs.clear();
        let bucket = &mut self.levels[level][slot];
        if recs.capacity() <= RETAINED_CAPACITY {
            bucket.recs = recs;
            bucket.marks.clear();
        } else {
            bucket.marks = Vec::new(); // a burst's, given back with its records
        }
        last
    }

    /// `collect_bucket` for the live record of `slot`: its item to `self.due` if it is due by
    /// `target`, else its record to a finer level (never the bucket being collected, which holds
    /// ticks up to its last on its level).
    #[inline(always)]
    fn collect_record(&mut self, slot: u32, start: u64, last: u64, target: u64) {
        let due = self.slab.at(slot).due();
        debug_assert!(start <= due && due <= last, "record outside its bucket");
        if due <= target {
            self.due.push(Due {
                due,
                item: self.slab.remove(slot),
            });
        } else {
            self.place_in_bucket(slot, due);
        }
    }

    /// Hands out `self.due` in order. If `f` or `prefetch` panics, the items not handed out yet
    /// go back into the wheel: each call is made while they are all still in the guard.
    pub(super) fn emit(&mut self, prefetch: &mut impl FnMut(&T), f: &mut impl FnMut(T)) {
        let mut due = mem::take(&mut self.due);
        let mut guard = EmitGuard {
            wheel: self,
            rest: due.drain(..),
        };
        for d in guard.rest.as_slice().iter().take(PREFETCH_AHEAD) {
            prefetch(&d.item);
        }
        loop {
            if let Some(ahead) = guard.rest.as_slice().get(PREFETCH_AHEAD) {
                prefetch(&ahead.item);
            }
            let Some(d) = guard.rest.next() else { break };
            f(d.item);
        }
        drop(guard);
        self.due = due; // empty, keeping its allocation
    }

    /// Puts a due item that was not handed out back into the wheel, as overdue (a new entry).
    pub(super) fn defer(&mut self, d: Due<T>) {
        let (slot, _) = self.slab.insert(d.due.min(self.cur), d.item);
        self.push_overdue(slot, d.due);
        self.len += 1;
    }
}

/// Holds the items `emit` has not handed out yet; if `f` panics, defers them (the next `advance`
/// hands them out).
struct EmitGuard<'a, 'b, T> {
    wheel: &'a mut TimingWheel<T>,
    rest: std::vec::Drain<'b, Due<T>>,
}

impl<T> Drop for EmitGuard<'_, '_, T> {
    fn drop(&mut self) {
        for d in self.rest.by_ref() {
            self.wheel.defer(d);
        }
    }
}

/// Completes an `advance` to `target` when dropped: buckets it has not reached yet are collected
/// and their due items deferred, and the clock moves to `target`. After a normal advance no
/// bucket is left to collect; after a panic in the callback this keeps "earlier ticks first":
/// nothing due in the interrupted advance can come out after something due later.
struct Finish<'a, T> {
    wheel: &'a mut TimingWheel<T>,
    target: u64,
    /// The advance ran to its end: no bucket is due by `target` any more.
    complete: bool,
}

impl<T> Drop for Finish<'_, T> {
    fn drop(&mut self) {
        let w = &mut *self.wheel;
        while !self.complete && w.pop_due_bucket(self.target).is_some() {
            let mut due = mem::take(&mut w.due);
            for d in due.drain(..) {
                w.defer(d);
            }
            w.due = due;
        }
        w.cur = self.target;
    }
}
