//! `std::collections::BinaryHeap` with lazy cancellation (`java.util.Timer` /
//! `ScheduledThreadPoolExecutor` without `setRemoveOnCancelPolicy`).
//!
//! The heap holds compact records `(deadline, slot, generation)`; items live in a slab. Cancel
//! frees the item and its slot at once and leaves the record in the heap: it is recognised as
//! stale (its generation no longer matches) and skipped when it reaches the top.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::{Cancel, TimerQueue};

const NIL: u32 = u32::MAX;

/// Handle of a [`LazyHeap`] entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HeapId {
    slot: u32,
    generation: u32,
}

#[derive(Debug)]
struct Slot<T> {
    item: Option<T>,
    generation: u32,
    /// Next vacant slot while this one is vacant.
    next_free: u32,
}

/// A binary heap of deadline records with lazily skipped cancellations.
#[derive(Debug)]
pub struct LazyHeap<T> {
    heap: BinaryHeap<Reverse<(u64, u32, u32)>>,
    slots: Vec<Slot<T>>,
    free: u32,
    now: u64,
    len: usize,
}

impl<T> TimerQueue<T> for LazyHeap<T> {
    type Id = HeapId;
    const NAME: &'static str = "binary heap (lazy)";

    fn new() -> Self {
        LazyHeap {
            heap: BinaryHeap::new(),
            slots: Vec::new(),
            free: NIL,
            now: 0,
            len: 0,
        }
    }

    #[inline]
    fn insert(&mut self, deadline: u64, item: T) -> HeapId {
        assert!(
            deadline > self.now,
            "deadline {deadline} is not after now {}",
            self.now
        );
        let slot = if self.free != NIL {
            let slot = self.free;
            let s = &mut self.slots[slot as usize];
            self.free = s.next_free;
            s.item = Some(item);
            slot
        } else {
            let slot = u32::try_from(self.slots.len()).expect("heap capacity overflow");
            self.slots.push(Slot {
                item: Some(item),
                generation: 0,
                next_free: NIL,
            });
            slot
        };
        let generation = self.slots[slot as usize].generation;
        self.heap.push(Reverse((deadline, slot, generation)));
        self.len += 1;
        HeapId { slot, generation }
    }

    fn advance(&mut self, now: u64, mut f: impl FnMut(T)) {
        self.now = self.now.max(now);
        while let Some(&Reverse((deadline, slot, generation))) = self.heap.peek() {
            if deadline > self.now {
                break;
            }
            self.heap.pop();
            if let Some(item) = self.take(HeapId { slot, generation }) {
                f(item);
            }
        }
    }

    fn len(&self) -> usize {
        self.len
    }
}

impl<T> LazyHeap<T> {
    /// Vacates the slot if `id` is live and returns its item.
    #[inline]
    fn take(&mut self, id: HeapId) -> Option<T> {
        let s = self.slots.get_mut(id.slot as usize)?;
        if s.generation != id.generation {
            return None;
        }
        let item = s.item.take()?;
        s.generation = s.generation.wrapping_add(1);
        s.next_free = self.free;
        self.free = id.slot;
        self.len -= 1;
        Some(item)
    }

    /// Records in the heap, live and stale: what lazy cancellation costs in memory.
    pub fn records(&self) -> usize {
        self.heap.len()
    }
}

impl<T> Cancel<T> for LazyHeap<T> {
    #[inline]
    fn cancel(&mut self, id: HeapId) -> bool {
        self.take(id).is_some()
    }
}
