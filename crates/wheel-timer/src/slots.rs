//! A shard's slots: a never-moving array, the owner's free list, and a stack for slots vacated
//! on other threads.

use crossbeam_utils::CachePadded;

use crate::chunked::{Chunked, MAX_INDEX};
use crate::loom::atomic::{AtomicU32, AtomicU64, Ordering::*};
use crate::slot::{Mine, OwnerToken, Slot, Vacant};
use crate::word::VACANT;

/// The owner's vacant slots: a stack of its own frees, then a chain taken whole from the
/// vacated stack, each slot's `link` naming the next (index + 1, 0 at the end).
///
/// The chain is walked one slot per allocation, not all at once: the slot an allocation takes
/// is read anyway (its word), its `link` with it, and the next one is prefetched then. Walking
/// a chain of thousands at once (as refills did) was a pointer chase of one cache miss per
/// slot, serial: 1.6% of a W11 profile on its own.
#[derive(Debug, Default)]
pub(crate) struct FreeList {
    stack: Vec<u32>,
    chain: u64,
}

impl FreeList {
    /// Keeps slot `i`, vacated on the owner thread.
    #[inline]
    pub(crate) fn push(&mut self, i: u32) {
        self.stack.push(i);
    }

    /// The slot the next [`pop`](Self::pop) takes, if any.
    fn next(&self) -> Option<u32> {
        match self.stack.last() {
            Some(&i) => Some(i),
            None => self.chain.checked_sub(1).map(|i| i as u32),
        }
    }

    /// Takes a slot: from the stack, else from the chain (`link(i)` is slot `i`'s `link`).
    fn pop(&mut self, link: impl FnOnce(u32) -> u64) -> Option<u32> {
        if let Some(i) = self.stack.pop() {
            return Some(i);
        }
        let i = self.chain.checked_sub(1)? as u32;
        self.chain = link(i);
        Some(i)
    }
}

/// A shard's slots. The owner thread allocates; any thread may vacate.
pub(crate) struct Slots {
    all: Chunked<Slot>,
    /// Each slot's route word (see `route.rs`), beside the slot's cache line: written by the
    /// adder before it publishes the slot (and by a repeating task's job while it runs), read by
    /// the tick thread and the job.
    routes: Chunked<std::sync::atomic::AtomicU32>,
    /// Slots created so far; written by the owner (sequentially consistent, after the slot
    /// exists), read by scans (shutdown).
    len: CachePadded<AtomicU32>,
    /// Head of the stack of slots vacated on other threads: slot index + 1, 0 if empty. Any
    /// thread pushes; only the owner pops, all at once.
    vacated: CachePadded<AtomicU64>,
    /// The owner's side: touched only by the thread whose key is in `owner`.
    mine: CachePadded<Mine>,
}

impl Slots {
    pub(crate) fn new() -> Self {
        Slots {
            all: Chunked::new(),
            routes: Chunked::new(),
            len: CachePadded::new(AtomicU32::new(0)),
            vacated: CachePadded::new(AtomicU64::new(0)),
            mine: CachePadded::new(Mine::new()),
        }
    }

    /// Makes this thread the owner, if the shard has none.
    pub(crate) fn attach(&self) -> Option<OwnerToken> {
        self.mine.attach()
    }

    /// Gives the shard up (its free list stays for the next owner).
    pub(crate) fn detach(&self, token: OwnerToken) {
        self.mine.detach(token);
    }

    /// True on the thread that owns the shard.
    #[inline(always)]
    pub(crate) fn owned_here(&self) -> bool {
        self.mine.owned_here()
    }

    /// The slot at `i`, which this shard created.
    #[inline(always)]
    pub(crate) fn get(&self, i: u32) -> &Slot {
        self.all
            .get(i as usize)
            .expect("slot indexes come from this shard")
    }

    /// The route word of slot `i` (see `route.rs`).
    #[inline(always)]
    pub(crate) fn route(&self, i: u32) -> &std::sync::atomic::AtomicU32 {
        self.routes
            .get(i as usize)
            .expect("slot indexes come from this shard")
    }

    /// Slots created so far (every index below it is valid).
    pub(crate) fn len(&self) -> u32 {
        self.len.load(SeqCst)
    }

    /// A vacant slot, for the owner thread only: from its free list, refilled from the vacated
    /// stack, or a new one. `None` on any other thread, or once the shard holds `u32::MAX` slots.
    #[inline(always)]
    pub(crate) fn alloc(&self) -> Option<Vacant<'_>> {
        loop {
            let i = self.mine.with_free(|free| {
                // A slot on the chain was linked by a thread that vacated it, before its
                // release-CAS of the stack that `refill` acquired. A slot listed by mistake
                // (not vacant: `claim` skips it below) may hold a wheel id in `link`: the chain
                // ends there rather than follow it (the slots after it are lost to this shard,
                // never handed out twice).
                let i = free.pop(|i| {
                    let s = self.get(i);
                    if s.word().state() == VACANT {
                        s.link.load(Relaxed)
                    } else {
                        0
                    }
                });
                if let Some(next) = free.next() {
                    // The next add takes that one: a slot vacated long ago is cold by now, and
                    // the time until that add hides its fetch.
                    crate::prefetch::line(self.get(next));
                }
                i
            })?;
            let i = match i {
                Some(i) => i,
                None => self.refill()?,
            };
            // Only vacant slots are ever listed; `claim` checks anyway (that is what keeps
            // `publish` sound), so a slot listed by mistake is skipped.
            if let Some(vacant) = self.mine.claim(self.get(i), i) {
                return Some(vacant);
            }
        }
    }

    /// The owner's free list is empty: take back the slots vacated elsewhere (as its chain), or
    /// make a new one.
    #[cold]
    fn refill(&self) -> Option<u32> {
        let head = self.vacated.swap(0, Acquire);
        if head == 0 {
            return self.grow();
        }
        let first = (head - 1) as u32;
        let rest = self.get(first).link.load(Relaxed);
        self.mine.with_free(|free| free.chain = rest);
        Some(first)
    }

    fn grow(&self) -> Option<u32> {
        let i = self.len.load(Relaxed);
        if i == u32::MAX || i as usize > MAX_INDEX {
            return None;
        }
        self.all.get_or_grow(i as usize)?;
        self.routes.get_or_grow(i as usize)?;
        self.len.store(i + 1, SeqCst);
        Some(i)
    }

    /// Gives back slot `i`, whose word the caller just vacated. Any thread: the owner keeps it
    /// in its free list, others push it on the vacated stack.
    #[inline]
    pub(crate) fn release(&self, i: u32) {
        if self.mine.with_free(|free| free.push(i)).is_none() {
            self.release_elsewhere(i);
        }
    }

    #[cold]
    fn release_elsewhere(&self, i: u32) {
        let slot = self.get(i);
        let mut head = self.vacated.load(Relaxed);
        loop {
            slot.link.store(head, Relaxed);
            match self
                .vacated
                .compare_exchange_weak(head, u64::from(i) + 1, Release, Relaxed)
            {
                Ok(_) => return,
                Err(now) => head = now,
            }
        }
    }

    /// Bytes of the slot array.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.all.heap_bytes() + self.routes.heap_bytes()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::task::Work;
    use crate::word::{QUEUED, Word};

    fn publish(v: Vacant<'_>) -> u32 {
        let (i, g) = (v.index, v.generation);
        v.publish(Word::occupied(g, QUEUED, 0), Work::noop());
        i
    }

    fn vacate(slots: &Slots, i: u32) {
        let s = slots.get(i);
        let g = s.word().generation();
        s.take(g, |w| w.state() == QUEUED, Word::vacated).unwrap();
        slots.release(i);
    }

    #[test]
    fn vacated_slots_come_back_to_the_owner() {
        let slots = Slots::new();
        let _me = slots.attach().unwrap();
        let a: Vec<u32> = (0..3).map(|_| publish(slots.alloc().unwrap())).collect();
        assert_eq!(a, [0, 1, 2]);
        vacate(&slots, 1);
        vacate(&slots, 0);
        let mut back = [
            publish(slots.alloc().unwrap()),
            publish(slots.alloc().unwrap()),
        ];
        back.sort();
        assert_eq!(back, [0, 1]);
        assert_eq!(slots.get(0).word().generation(), 1, "a new generation");
        assert_eq!(publish(slots.alloc().unwrap()), 3, "then new ones");
    }

    #[test]
    fn only_the_owner_allocates_and_frees_elsewhere_reach_it() {
        let slots = Slots::new();
        assert!(slots.alloc().is_none(), "no owner yet");
        let me = slots.attach().unwrap();
        let i = publish(slots.alloc().unwrap());
        std::thread::scope(|s| {
            s.spawn(|| {
                assert!(slots.alloc().is_none(), "not the owner");
                vacate(&slots, i); // pushed on the vacated stack
            });
        });
        assert_eq!(slots.alloc().unwrap().index, i, "back to the owner");
        slots.detach(me);
        assert!(slots.alloc().is_none());
    }

    #[test]
    fn an_occupied_slot_listed_by_mistake_is_never_handed_out() {
        let slots = Slots::new();
        let _me = slots.attach().unwrap();
        let i = publish(slots.alloc().unwrap());
        slots.release(i); // a bug elsewhere: the slot is still QUEUED
        assert_ne!(slots.alloc().unwrap().index, i);
    }
}
