//! A shard's slots: a never-moving array, the owner's free list (`free.rs`), and a stack for
//! slots vacated on other threads.

use crossbeam_utils::CachePadded;

use crate::chunked::{Chunked, MAX_INDEX};
use crate::free::FreeList;
#[cfg(test)]
use crate::free::LISTED;
use crate::loom::atomic::{AtomicU32, AtomicU64, Ordering::*};
use crate::slot::{Mine, OwnerToken, Slot, Vacant};
use crate::word::VACANT;

/// The head's half of the vacated stack's word (slot index + 1); the depth is above it.
const INDEX: u64 = u32::MAX as u64;
const DEPTH_SHIFT: u32 = 32;

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
    /// The stack of slots vacated on other threads: its depth (the high half, saturating) and
    /// its head (slot index + 1, 0 if empty; the low half, `INDEX`). Any
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
    /// stack, a sweep, or a new one. `None` on any other thread, or once the shard holds
    /// `u32::MAX` slots.
    #[inline(always)]
    pub(crate) fn alloc(&self) -> Option<Vacant<'_>> {
        loop {
            let i = self.mine.with_free(|free| {
                // A slot on the chain was linked by a thread that vacated it, before its
                // release-CAS of the stack that `refill` acquired. A slot listed by mistake
                // (not vacant: `claim` skips it below) may hold a wheel id in `link`: the chain
                // ends there rather than follow it (the slots after it are lost to this shard,
                // never handed out twice).
                let i = free.pop(
                    |i| self.get(i).word().state() == VACANT,
                    |i| {
                        let s = self.get(i);
                        if s.word().state() != VACANT {
                            return 0;
                        }
                        let next = s.link.load(Relaxed);
                        if let Some(next) = next.checked_sub(1) {
                            // As below: the chain's next slot, for the next add.
                            crate::prefetch::line(self.get(next as u32));
                        }
                        next
                    },
                );
                if let Some(next) = free.next_stacked() {
                    // The next add takes that one: a slot vacated long ago is cold by now, and
                    // the time until that add hides its fetch. (A sweep reads the slots in
                    // order, which the CPU fetches ahead by itself.)
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
    /// sweep for the unlisted ones if there are enough of them, or make a new slot (and sweep
    /// for any unlisted ones once the shard is full).
    #[cold]
    fn refill(&self) -> Option<u32> {
        let head = self.vacated.swap(0, Acquire);
        if head & INDEX != 0 {
            let first = ((head & INDEX) - 1) as u32;
            let rest = self.get(first).link.load(Relaxed);
            let depth = (head >> DEPTH_SHIFT) as usize;
            self.mine.with_free(|free| free.take_chain(rest, depth));
            return Some(first);
        }
        let len = self.len.load(Relaxed);
        let sweep = |anyway| {
            self.mine.with_free(|free| {
                if free.start_sweep(len, anyway) {
                    free.pop_unstacked(|i| self.get(i).word().state() == VACANT, |_| 0)
                } else {
                    None
                }
            })?
        };
        sweep(false).or_else(|| self.grow()).or_else(|| sweep(true))
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
            slot.link.store(head & INDEX, Relaxed);
            let depth = ((head >> DEPTH_SHIFT) + 1).min(u64::from(u32::MAX));
            match self.vacated.compare_exchange_weak(
                head,
                (depth << DEPTH_SHIFT) | (u64::from(i) + 1),
                Release,
                Relaxed,
            ) {
                Ok(_) => return,
                Err(now) => head = now,
            }
        }
    }

    /// Lists every vacant slot lowest first, for the shard's next timer: it then packs its tasks
    /// into the lowest slots instead of taking them in the order the last timer freed them,
    /// scattered over the whole array (after a burst of millions, a cache and TLB miss on most
    /// adds and cancels: W11 after W10 in one process cost 3.7 us per timeout against 0.9 in a
    /// fresh one). O(1) here: the lists are dropped and the next owner's allocations sweep up
    /// the slot array, one slot each (a scan here ran on whichever thread let the shard go, a
    /// tokio worker's add among them: 0.8 s late sleeps in W11). `false`, and nothing done, if
    /// a thread owns the shard. (Under loom the registry forgets a timer's shards instead.)
    ///
    /// A slot vacated meanwhile by a handle the old timer left may be listed twice (by the
    /// sweep, and on a stack): harmless, since [`Mine::claim`] hands a listed slot out only
    /// while it is vacant, and only the owner claims.
    #[cfg(not(loom))]
    pub(crate) fn repack(&self) -> bool {
        let Some(token) = self.attach() else {
            return false;
        };
        // Taken before the sweep is set: the sweep offers every slot on it, and what is vacated
        // from here on is pushed on the stack again, for refills.
        self.vacated.swap(0, Acquire);
        let sweep_end = self.len();
        self.mine.with_free(|free| {
            *free = FreeList::sweeping(sweep_end);
        });
        self.detach(token);
        true
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
    fn a_repacked_shard_hands_out_its_lowest_vacant_slots_first() {
        let slots = Slots::new();
        let me = slots.attach().unwrap();
        let all: Vec<u32> = (0..200).map(|_| publish(slots.alloc().unwrap())).collect();
        assert!(!slots.repack(), "an owned shard is left alone");
        // Freed in a scrambled order, some by the owner, some elsewhere (the vacated stack);
        // slot 3 keeps its task (a handle outlives the timer, say).
        let mut order: Vec<u32> = all.iter().copied().filter(|&i| i != 3).collect();
        order.sort_by_key(|&i| (i * 7919) % 200);
        let (mine, theirs) = order.split_at(120);
        for &i in mine {
            vacate(&slots, i);
        }
        std::thread::scope(|s| {
            s.spawn(|| theirs.iter().for_each(|&i| vacate(&slots, i)));
        });
        slots.detach(me);
        assert!(slots.repack());
        let _me = slots.attach().unwrap();
        let next: Vec<u32> = (0..199).map(|_| publish(slots.alloc().unwrap())).collect();
        let expected: Vec<u32> = (0..200).filter(|&i| i != 3).collect();
        assert_eq!(
            next, expected,
            "lowest first, each once, the occupied one skipped"
        );
        assert_eq!(publish(slots.alloc().unwrap()), 200, "then new ones");
    }

    /// Slots `0..n` published, then vacated in a scrambled order: the first `here` by the owner,
    /// the rest on another thread (the vacated stack).
    fn fill_then_scatter(slots: &Slots, n: u32, here: usize) {
        let all: Vec<u32> = (0..n).map(|_| publish(slots.alloc().unwrap())).collect();
        assert_eq!(all, (0..n).collect::<Vec<_>>());
        let mut order = all;
        order.sort_by_key(|&i| (u64::from(i) * 7919) % u64::from(n));
        let (mine, theirs) = order.split_at(here);
        mine.iter().for_each(|&i| vacate(slots, i));
        std::thread::scope(|s| {
            s.spawn(|| theirs.iter().for_each(|&i| vacate(slots, i)));
        });
    }

    #[test]
    fn past_the_bounded_lists_a_burst_of_frees_is_swept_up_lowest_first() {
        for here in [4096, 0, 2048] {
            let slots = Slots::new();
            let _me = slots.attach().unwrap();
            fill_then_scatter(&slots, 4096, here);
            // At most LISTED from the stack and LISTED from one chain, in the order freed.
            let listed = LISTED.min(here) + LISTED.min(4096 - here);
            let mut taken: Vec<u32> = (0..listed)
                .map(|_| publish(slots.alloc().unwrap()))
                .collect();
            // Then a sweep from slot 0 (3/4 of the slots are unlisted): the lowest vacant ones,
            // in order, each once.
            let swept: Vec<u32> = (listed..4096)
                .map(|_| publish(slots.alloc().unwrap()))
                .collect();
            assert!(
                swept.windows(2).all(|w| w[0] < w[1]),
                "here {here}: lowest first"
            );
            taken.extend(&swept);
            taken.sort_unstable();
            assert_eq!(
                taken,
                (0..4096).collect::<Vec<_>>(),
                "here {here}: each slot once"
            );
            assert_eq!(
                publish(slots.alloc().unwrap()),
                4096,
                "here {here}: then new ones"
            );
        }
    }

    #[test]
    fn a_few_unlisted_slots_wait_while_the_shard_grows() {
        let slots = Slots::new();
        let _me = slots.attach().unwrap();
        let n = 2 * LISTED as u32 + 20;
        fill_then_scatter(&slots, n, LISTED + 10);
        for _ in 0..LISTED * 2 {
            publish(slots.alloc().unwrap()); // the stack, then the chain
        }
        // 10 + 10 left off the lists, fewer than LISTED: new slots instead of a sweep.
        assert_eq!(publish(slots.alloc().unwrap()), n);
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
