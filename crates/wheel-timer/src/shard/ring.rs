//! The owner's ring: adds whose deadlines are not yet stamped, as `(slot, generation)` records,
//! written by the owner without a lock and taken out under the shard lock (single producer,
//! single consumer at a time).

use crossbeam_utils::CachePadded;

use crate::loom::atomic::{AtomicU32, AtomicU64, Ordering::*};

/// Records a ring holds; a full ring is flushed by its owner.
#[cfg(not(loom))]
pub(crate) const CAPACITY: u32 = 256;
/// Under loom each record is an object the model creates on every execution it explores; its
/// models add a few tasks per shard, so a small ring keeps their cost in the interleavings (and
/// lets a model reach the full ring).
#[cfg(loom)]
pub(crate) const CAPACITY: u32 = 8;

/// How many records ahead of the one it hands out `consume_ahead` asks for.
const AHEAD: u32 = 16;

pub(crate) struct Ring {
    records: Box<[AtomicU64; CAPACITY as usize]>,
    /// Written by the owner only, after the record.
    tail: CachePadded<AtomicU32>,
    /// Written by the consumer (whoever holds the shard lock).
    head: CachePadded<AtomicU32>,
}

/// A ring record: slot index and generation.
pub(crate) fn record(slot: u32, generation: u32) -> u64 {
    (u64::from(generation) << 32) | u64::from(slot)
}

/// `(slot, generation)` of a record.
pub(crate) fn split(record: u64) -> (u32, u32) {
    (record as u32, (record >> 32) as u32)
}

impl Ring {
    pub(crate) fn new() -> Self {
        Ring {
            records: Box::new(std::array::from_fn(|_| AtomicU64::new(0))),
            tail: CachePadded::new(AtomicU32::new(0)),
            head: CachePadded::new(AtomicU32::new(0)),
        }
    }

    /// Appends `rec`: the owner only. False if the ring is full.
    #[inline(always)]
    pub(crate) fn push(&self, rec: u64) -> bool {
        let tail = self.tail.load(Relaxed);
        if tail.wrapping_sub(self.head.load(Acquire)) >= CAPACITY {
            return false;
        }
        self.records[(tail % CAPACITY) as usize].store(rec, Relaxed);
        self.tail.store(tail.wrapping_add(1), Release);
        true
    }

    /// The records published so far, `(head, tail)`: the consumer only (under the shard lock).
    /// Everything it names was published before this returned (acquire).
    pub(crate) fn published(&self) -> (u32, u32) {
        (self.head.load(Relaxed), self.tail.load(Acquire))
    }

    /// Takes out the records `published` named: the consumer only (under the shard lock).
    #[inline(always)]
    pub(crate) fn consume(&self, batch: (u32, u32), f: impl FnMut(u64)) {
        self.peek(batch, f);
        self.head.store(batch.1, Release);
    }

    /// `consume`, calling `ahead` with the record `AHEAD` places after the one it hands to `f`
    /// (if the batch has it) just before: a consumer that reads a cold line per record starts
    /// fetching the lines of the next ones meanwhile, so their misses overlap.
    #[inline(always)]
    pub(crate) fn consume_ahead(
        &self,
        batch: (u32, u32),
        mut ahead: impl FnMut(u64),
        mut f: impl FnMut(u64),
    ) {
        let (head, tail) = batch;
        let at = |i: u32| self.records[(i % CAPACITY) as usize].load(Relaxed);
        let len = tail.wrapping_sub(head);
        for k in 0..AHEAD.min(len) {
            ahead(at(head.wrapping_add(k)));
        }
        for k in 0..len {
            if k + AHEAD < len {
                ahead(at(head.wrapping_add(k + AHEAD)));
            }
            f(at(head.wrapping_add(k)));
        }
        self.head.store(tail, Release);
    }

    /// Reads the records `published` named and leaves them in: the consumer only (under the
    /// shard lock).
    #[inline(always)]
    pub(crate) fn peek(&self, (head, tail): (u32, u32), mut f: impl FnMut(u64)) {
        let mut i = head;
        while i != tail {
            f(self.records[(i % CAPACITY) as usize].load(Relaxed));
            i = i.wrapping_add(1);
        }
    }

    /// Takes out and ignores every record published so far (the consumer only).
    pub(crate) fn clear(&self) {
        self.consume(self.published(), |_| {});
    }
}
