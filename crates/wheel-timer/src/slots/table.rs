//! A shard's slots: a never-moving array, the owner's free slots (handed out lowest first, see
//! `free_list.rs`), and the slots vacated on other threads, listed for the owner (`remote_free.rs`).

use crossbeam_utils::CachePadded;

use crate::loom::atomic::{AtomicU32, Ordering::*};
use crate::slots::append_only::{AppendOnly, MAX_INDEX};
use crate::slots::free_list::FreeList;
use crate::slots::owner::{OwnedFree, OwnerToken, Ownership};
use crate::slots::remote_free::RemoteFree;
use crate::slots::slot::{Slot, Vacant};

/// A shard's slots. The owner thread allocates; any thread may vacate.
pub(crate) struct Slots<T> {
    all: AppendOnly<Slot<T>>,
    /// Each slot's route word (see `service/route.rs`), beside the slot's cache line: written by the
    /// adder before it publishes the slot (and by a repeating task's job while it runs), read by
    /// the tick thread and the job.
    routes: AppendOnly<std::sync::atomic::AtomicU32>,
    /// Slots created so far; written by the owner (sequentially consistent, after the slot
    /// exists), read by scans (shutdown).
    len: CachePadded<AtomicU32>,
    /// Slots vacated on other threads, each listed once by the thread that vacated it, after the
    /// word says `VACANT`, without writing into the slot. Lock-free on both sides; the owner
    /// takes them all when its own set is empty.
    vacated: RemoteFree,
    /// The owner's side: touched only by the thread whose key is in `owner`.
    mine: CachePadded<Ownership>,
}

impl<T> Slots<T> {
    pub(crate) fn new() -> Self {
        Slots {
            all: AppendOnly::new(),
            routes: AppendOnly::new(),
            len: CachePadded::new(AtomicU32::new(0)),
            vacated: RemoteFree::new(),
            mine: CachePadded::new(Ownership::new()),
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
    pub(crate) fn get(&self, i: u32) -> &Slot<T> {
        self.all
            .get(i as usize)
            .expect("slot indexes come from this shard")
    }

    /// The route word of slot `i` (see `service/route.rs`).
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

    /// A vacant slot, for the owner thread only: the lowest of its free set, refilled from the
    /// slots vacated elsewhere, or a new one. `None` on any other thread, or once the shard
    /// holds `u32::MAX` slots.
    #[inline(always)]
    pub(crate) fn alloc(&self) -> Option<Vacant<'_, T>> {
        self.mine.with_free(|free| {
            // The common case inline: the slot kept aside (in W6's pair, the one this thread
            // freed last). With the search below, the closure was a call of 40 instructions,
            // 16 of them saving and restoring registers (callgrind, W6's pair).
            if let Some(i) = free.take_hot()
                && let Some(vacant) = free.claim(self.get(i), i)
            {
                return Some(vacant);
            }
            self.alloc_from_set(free)
        })?
    }

    /// [`alloc`](Self::alloc) without a slot kept aside (none is: nothing in here keeps one):
    /// the lowest of the free set, refilled if need be.
    #[inline(never)]
    fn alloc_from_set<'a>(&'a self, free: &mut OwnedFree<'_>) -> Option<Vacant<'a, T>> {
        loop {
            let i = match free.pop() {
                Some(i) => i,
                None => self.refill(free)?,
            };
            // The next add likely takes the next lowest: a slot vacated long ago is cold by now,
            // and the time until that add hides its fetch.
            if let Some(next) = free.peek() {
                crate::slots::prefetch::line(self.get(next));
            }
            // Only vacant slots are ever listed; `claim` checks anyway (that is what keeps
            // `publish` sound), so a slot listed by mistake is skipped.
            if let Some(vacant) = free.claim(self.get(i), i) {
                return Some(vacant);
            }
        }
    }

    /// The owner's free set is empty: take the lowest group of slots vacated elsewhere, or make
    /// a new one. `None` as well if this thread no longer owns the shard when done: this may
    /// allocate, and an allocator is foreign code (`service/thread_cache.rs` keeps such code from making the
    /// thread give the shard up meanwhile; this checks that it did not, since `claim` relies on
    /// it).
    #[cold]
    fn refill(&self, free: &mut FreeList) -> Option<u32> {
        self.vacated
            .take_lowest(self.len.load(Relaxed), |i| free.insert_ordered(i));
        let i = free.pop().or_else(|| self.grow());
        self.mine.owned_here().then_some(i)?
    }

    fn grow(&self) -> Option<u32> {
        let i = self.len.load(Relaxed);
        if i == u32::MAX || i as usize > MAX_INDEX {
            return None;
        }
        self.all.get_or_grow(i as usize)?;
        self.routes.get_or_grow(i as usize)?;
        self.vacated.grow(i)?;
        self.len.store(i + 1, SeqCst);
        Some(i)
    }

    /// Gives back slot `i`, whose word the caller just vacated. Any thread: the owner keeps it
    /// in its free set, others list it for the owner.
    #[inline]
    pub(crate) fn release(&self, i: u32) {
        if self.mine.with_free(|free| free.insert(i)).is_none() {
            self.release_elsewhere(i);
        }
    }

    #[cold]
    fn release_elsewhere(&self, i: u32) {
        self.vacated.push(i);
    }

    /// Bytes of the slot array and of the list of slots vacated elsewhere (not of the owner's
    /// free set: a bit per slot, readable only by the owner).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.all.heap_bytes() + self.routes.heap_bytes() + self.vacated.heap_bytes()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::slots::word::{QUEUED, Word};

    fn publish(v: Vacant<'_, u32>) -> u32 {
        let i = v.index();
        v.publish(QUEUED, 0, 7);
        i
    }

    fn vacate(slots: &Slots<u32>, i: u32) {
        let s = slots.get(i);
        let g = s.word().generation();
        s.take(g, |w| w.state() == QUEUED, Word::vacated).unwrap();
        slots.release(i);
    }

    #[test]
    fn vacated_slots_come_back_to_the_owner() {
        let slots = Slots::<u32>::new();
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
        let slots = Slots::<u32>::new();
        assert!(slots.alloc().is_none(), "no owner yet");
        let me = slots.attach().unwrap();
        let i = publish(slots.alloc().unwrap());
        std::thread::scope(|s| {
            s.spawn(|| {
                assert!(slots.alloc().is_none(), "not the owner");
                vacate(&slots, i); // pushed on the vacated stack
            });
        });
        assert_eq!(slots.alloc().unwrap().index(), i, "back to the owner");
        slots.detach(me);
        assert!(slots.alloc().is_none());
    }

    #[test]
    fn after_a_burst_freed_in_random_order_slots_come_back_lowest_first() {
        let slots = Slots::<u32>::new();
        let _me = slots.attach().unwrap();
        let burst: Vec<u32> = (0..1000).map(|_| publish(slots.alloc().unwrap())).collect();
        // Freed in a scrambled order, half here and half on another thread.
        let mut order: Vec<u32> = burst.iter().map(|&i| (i * 617) % 1000).collect();
        let elsewhere = order.split_off(500);
        for &i in &order {
            vacate(&slots, i);
        }
        std::thread::scope(|s| {
            s.spawn(|| elsewhere.iter().for_each(|&i| vacate(&slots, i)));
        });
        // The first slot freed here went aside (the set was empty); then the owner's own frees
        // lowest first; then, once those are used, the ones freed elsewhere, lowest first.
        let again: Vec<u32> = (0..1000).map(|_| publish(slots.alloc().unwrap())).collect();
        assert_eq!(again[0], order[0]);
        let mut own = order[1..].to_vec();
        own.sort_unstable();
        assert_eq!(again[1..500], own[..]);
        let mut theirs = elsewhere.clone();
        theirs.sort_unstable();
        assert_eq!(again[500..], theirs[..]);
        assert_eq!(publish(slots.alloc().unwrap()), 1000, "then a new one");
    }

    #[test]
    fn an_occupied_slot_listed_by_mistake_is_never_handed_out() {
        let slots = Slots::<u32>::new();
        let _me = slots.attach().unwrap();
        let i = publish(slots.alloc().unwrap());
        slots.release(i); // a bug elsewhere: the slot is still QUEUED
        assert_ne!(slots.alloc().unwrap().index(), i);
    }
}
