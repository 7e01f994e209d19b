//! A shard's slots: a never-moving array, the owner's free list (`free.rs`), and a stack for
//! slots vacated on other threads.

use crossbeam_utils::CachePadded;

use crate::chunked::{Chunked, MAX_INDEX};
use crate::free::FreeList;
#[cfg(test)]
use crate::free::{LISTED, SWEEP_STEP};
use crate::loom::atomic::{AtomicU32, AtomicU64, Ordering::*};
use crate::slot::{Mine, OwnerToken, Slot, Vacant};
use crate::word::VACANT;

/// The vacated stack's word: its head (slot index + 1, 0 if empty) in the low half, then how many
/// slots were vacated onto it (31 bits, saturating), and `SWEEPING` on top: while the owner
/// sweeps, slots vacated elsewhere are only counted, never linked (see `free.rs`).
const INDEX: u64 = u32::MAX as u64;
const DEPTH_SHIFT: u32 = 32;
const DEPTH_MAX: u64 = (1 << 31) - 1;
const SWEEPING: u64 = 1 << 63;

/// How many slots the vacated stack's word `head` counts.
fn depth(head: u64) -> usize {
    ((head >> DEPTH_SHIFT) & DEPTH_MAX) as usize
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
    /// The stack of slots vacated on other threads (`INDEX`, `DEPTH_SHIFT`, `SWEEPING`). Any
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
                let i = free.pop(|i| self.is_vacant(i), |i| self.link_of(i));
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

    /// True if slot `i` is vacant.
    fn is_vacant(&self, i: u32) -> bool {
        self.get(i).word().state() == VACANT
    }

    /// The next slot of the chain after slot `i` (index + 1, 0 at the end), prefetched for the
    /// next add; `None` if `i` is not vacant or its link names no slot (a bug elsewhere: the
    /// chain ends there rather than follow it, and never hands a slot out twice).
    fn link_of(&self, i: u32) -> Option<u64> {
        let s = self.get(i);
        if s.word().state() != VACANT {
            return None;
        }
        // A slot on the chain was linked by a thread that vacated it, before its release-CAS of
        // the stack that `refill` acquired.
        let next = s.link.load(Relaxed);
        match next.checked_sub(1) {
            None => Some(0),
            Some(n) if n < u64::from(self.len.load(Relaxed)) => {
                // As in `alloc`: the next add takes that one.
                crate::prefetch::line(self.get(n as u32));
                Some(next)
            }
            Some(_) => None,
        }
    }

    /// The owner's free list is empty: end a sweep that has read its last slot, then sweep if
    /// enough slots are unlisted, else take back the slots vacated elsewhere (as its chain),
    /// else make a new slot (and sweep for any unlisted ones once the shard is full). A sweep
    /// that read its step's worth of slots without finding one makes a new slot too.
    #[cold]
    fn refill(&self) -> Option<u32> {
        let len = self.len.load(Relaxed);
        let vacant = |i| self.is_vacant(i);
        let sweep = |free: &mut FreeList, full| {
            // Whatever the vacated stack holds is below `len` and vacant: the sweep passes it.
            // From here until the sweep ends, slots vacated elsewhere are only counted.
            self.vacated.swap(SWEEPING, Acquire);
            free.start_sweep(len, full, vacant)
        };
        let found = self.mine.with_free(|free| {
            if free.is_sweeping() {
                if !free.sweep_over() {
                    return None;
                }
                let head = self.vacated.swap(0, Acquire);
                debug_assert!(head & INDEX == 0, "nothing is linked during a sweep");
                free.end_sweep(depth(head));
            }
            if free.wants_sweep(len, false) {
                return sweep(free, false);
            }
            let head = self.vacated.swap(0, Acquire);
            let first = ((head & INDEX).checked_sub(1)?) as u32;
            // `link_of` checks the head's link as the chain's others are checked (`None`: a
            // broken chain, left to a sweep like the rest of a long one).
            free.take_chain(self.link_of(first), depth(head));
            Some(first)
        })?;
        found.or_else(|| self.grow()).or_else(|| {
            self.mine
                .with_free(|free| {
                    if free.is_sweeping() || !free.wants_sweep(len, true) {
                        return None;
                    }
                    sweep(free, true)
                })
                .flatten()
        })
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
            let counted = ((head >> DEPTH_SHIFT) & DEPTH_MAX)
                .saturating_add(1)
                .min(DEPTH_MAX);
            let next = if head & SWEEPING != 0 {
                // The owner is sweeping: linked, the slot could be handed out twice (the sweep
                // may pass it) and its link overwritten. Counted, the sweep or the next finds it.
                SWEEPING | (counted << DEPTH_SHIFT)
            } else {
                slot.link.store(head & INDEX, Relaxed);
                (counted << DEPTH_SHIFT) | (u64::from(i) + 1)
            };
            match self
                .vacated
                .compare_exchange_weak(head, next, Release, Relaxed)
            {
                Ok(_) => return,
                Err(now) => head = now,
            }
        }
    }

    /// Offers every vacant slot lowest first to the shard's next timer: it then packs its tasks
    /// into the lowest slots instead of taking them in the order the last timer freed them,
    /// scattered over the whole array (after a burst of millions, a cache and TLB miss on most
    /// adds and cancels: W11 after W10 in one process cost 3.7 us per timeout against 0.9 in a
    /// fresh one). O(1) here: the lists are dropped and a sweep starts, which the next owner's
    /// allocations carry on (a scan here ran on whichever thread let the shard go, a tokio
    /// worker's add among them: 0.8 s late sleeps in W11). `false`, and nothing done, if a
    /// thread owns the shard. (Under loom the registry forgets a timer's shards instead.)
    #[cfg(not(loom))]
    pub(crate) fn repack(&self) -> bool {
        let Some(token) = self.attach() else {
            return false;
        };
        // As when the owner starts a sweep (`refill`): what the stack holds, the sweep passes.
        self.vacated.swap(SWEEPING, Acquire);
        let len = self.len();
        self.mine.with_free(|free| *free = FreeList::sweeping(len));
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
            // LISTED from the stack, or (nothing stacked) from one chain, in the order freed.
            let listed = LISTED;
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

    /// Where the owner's sweep is, if one is going on.
    fn sweep_at(slots: &Slots) -> Option<u32> {
        slots.mine.with_free(|free| free.sweep_at()).unwrap()
    }

    #[test]
    fn a_sweep_reads_at_most_a_step_of_slots_per_add() {
        // Long-lived tasks low in the array, a burst above them freed here: the sweep that
        // starts must cross the live ones a step per add, taking new slots meanwhile, not read
        // them all in one add.
        let slots = Slots::new();
        let _me = slots.attach().unwrap();
        let (live, burst) = (20_000u32, 4_000u32);
        for _ in 0..live + burst {
            publish(slots.alloc().unwrap());
        }
        for i in (live..live + burst).rev() {
            vacate(&slots, i); // the first LISTED stacked, the rest counted
        }
        for _ in 0..LISTED {
            assert!(publish(slots.alloc().unwrap()) >= live + burst - LISTED as u32);
        }
        assert_eq!(sweep_at(&slots), None);
        let mut at = 0;
        let mut grown = 0;
        loop {
            let i = publish(slots.alloc().unwrap());
            let now = sweep_at(&slots).expect("a sweep is going on");
            assert!(
                now - at <= SWEEP_STEP,
                "{} slots read for one add",
                now - at
            );
            at = now;
            if i >= live + burst {
                grown += 1;
            } else {
                assert_eq!(i, live, "the sweep's first find: the lowest freed slot");
                break;
            }
        }
        assert_eq!(grown, live / SWEEP_STEP, "a new slot per step of live ones");
    }

    #[test]
    fn nothing_is_linked_while_a_sweep_goes_on() {
        // Slots freed elsewhere during a sweep are only counted in the vacated stack's word: a
        // sweep may pass them and hand them out, which would overwrite their links. Once the
        // sweep is over they are unlisted, for the next one.
        let slots = Slots::new();
        let _me = slots.attach().unwrap();
        let n = 4096u32;
        fill_then_scatter(&slots, n, n as usize);
        let mut live = std::collections::HashSet::new();
        let take = |slots: &Slots, live: &mut std::collections::HashSet<u32>| {
            let i = publish(slots.alloc().unwrap());
            assert!(live.insert(i), "slot {i} handed out twice");
            i
        };
        for _ in 0..=LISTED {
            take(&slots, &mut live); // the stack, then the sweep's first
        }
        assert!(sweep_at(&slots).is_some());
        let behind: Vec<u32> = (0..96).map(|_| take(&slots, &mut live)).collect();
        std::thread::scope(|s| {
            s.spawn(|| behind.iter().for_each(|&i| vacate(&slots, i)));
        });
        let head = slots.vacated.load(Relaxed);
        assert_eq!(head & INDEX, 0, "nothing linked");
        assert!(
            head & SWEEPING != 0 && depth(head) == behind.len(),
            "counted instead"
        );
        for i in &behind {
            live.remove(i);
        }
        // The sweep takes the rest of the vacant slots above them, lowest first.
        let left = n as usize - live.len() - behind.len();
        let rest: Vec<u32> = (0..left).map(|_| take(&slots, &mut live)).collect();
        assert!(rest.windows(2).all(|w| w[0] < w[1]) && rest.iter().all(|&i| i < n));
        // Then the next add ends the sweep (the count becomes unlisted, fewer than a sweep
        // needs) and makes a new slot; the ones behind the sweep wait for the next.
        assert_eq!(take(&slots, &mut live), n);
        assert_eq!(sweep_at(&slots), None);
        assert_eq!(slots.vacated.load(Relaxed), 0);
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
