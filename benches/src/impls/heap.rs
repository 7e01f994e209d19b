//! `std::collections::BinaryHeap` with lazy cancellation (`java.util.Timer` /
//! `ScheduledThreadPoolExecutor` without `setRemoveOnCancelPolicy`).
//!
//! The heap holds compact records `(deadline, slot, generation)`; items live in a [`GenSlab`].
//! Cancel frees the item and its slot at once and leaves the record in the heap: it is recognised
//! as stale (its generation no longer matches) and skipped when it reaches the top. Once stale
//! records outnumber live ones (plus a small slack) the heap is compacted, as Go's timers are, so
//! a cancel-heavy load keeps it at most about twice its live size: a competent baseline, not one
//! that grows without bound.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::impls::slab::GenSlab;
use crate::{Cancel, TimerQueue};

/// Stale records tolerated before a compaction, besides "as many as live ones".
const COMPACT_SLACK: usize = 1024;

/// Handle of a [`LazyHeap`] entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HeapId {
    slot: u32,
    generation: u32,
}

/// A binary heap of deadline records with lazily skipped cancellations.
#[derive(Debug)]
pub struct LazyHeap<T> {
    heap: BinaryHeap<Reverse<(u64, u32, u32)>>,
    slab: GenSlab<T>,
    now: u64,
}

impl<T> TimerQueue<T> for LazyHeap<T> {
    type Id = HeapId;
    const NAME: &'static str = "binary heap (lazy, compacting)";

    fn new() -> Self {
        LazyHeap {
            heap: BinaryHeap::new(),
            slab: GenSlab::new(),
            now: 0,
        }
    }

    #[inline]
    fn insert(&mut self, deadline: u64, item: T) -> HeapId {
        assert!(
            deadline > self.now,
            "deadline {deadline} is not after now {}",
            self.now
        );
        let (slot, generation) = self.slab.insert(item);
        self.heap.push(Reverse((deadline, slot, generation)));
        HeapId { slot, generation }
    }

    fn advance(&mut self, now: u64, mut f: impl FnMut(T)) {
        self.now = self.now.max(now);
        while let Some(&Reverse((deadline, slot, generation))) = self.heap.peek() {
            if deadline > self.now {
                break;
            }
            self.heap.pop();
            if let Some(item) = self.slab.take(slot, generation) {
                f(item);
            }
        }
    }

    fn len(&self) -> usize {
        self.slab.len()
    }
}

impl<T> LazyHeap<T> {
    /// Records in the heap, live and stale: what lazy cancellation costs in memory.
    pub fn records(&self) -> usize {
        self.heap.len()
    }
}

impl<T> Cancel<T> for LazyHeap<T> {
    #[inline]
    fn cancel(&mut self, id: HeapId) -> bool {
        if self.slab.take(id.slot, id.generation).is_none() {
            return false;
        }
        if self.heap.len() > 2 * self.slab.len() + COMPACT_SLACK {
            let slab = &self.slab;
            self.heap
                .retain(|&Reverse((_, slot, generation))| slab.is_live(slot, generation));
        }
        true
    }
}
