//! `std::collections::BinaryHeap` with lazy cancellation (`java.util.Timer` /
//! `ScheduledThreadPoolExecutor` without `setRemoveOnCancelPolicy`).
//!
//! The heap holds compact records `(deadline, slot, generation)`; items live in a [`GenSlab`].
//! Cancel frees the item and its slot at once and leaves the record in the heap: it is recognised
//! as stale (its generation no longer matches) and skipped when it reaches the top.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::slab::GenSlab;
use crate::{Cancel, TimerQueue};

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
    const NAME: &'static str = "binary heap (lazy)";

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
        self.slab.take(id.slot, id.generation).is_some()
    }
}
