//! Task slots: one cache line per task in a shard's never-moving array, and the crate's one
//! `unsafe`: the cell a slot keeps its task's closure in, owned by the slot word's protocol
//! instead of a lock.
//!
//! A mutex per slot would cost two more atomic operations on every add and two on every cancel,
//! on the path users call millions of times a second; the word already decides who owns the
//! task. This file turns that rule into a safe API: the only ways to reach a cell are a won
//! compare-and-swap of the word ([`Slot::take`], [`Slot::start`]) or a token that proves
//! ownership ([`Vacant`] from the shard's owner thread, [`Run`] from a job's claim).
//!
//! ## Who owns the cell
//!
//! The cell holds a task exactly while the word is `QUEUED`, `WAITING` or `DUE` ("holding"
//! states). Ownership passes with an acquire/release operation on the word:
//!
//! | owner | from | until |
//! |-------|------|-------|
//! | the shard's owner thread | it pops a `VACANT` slot ([`Slots::alloc`]) | it publishes the word ([`Vacant::publish`], a release store) |
//! | nobody: the task sits in the cell | publication | a compare-and-swap out of a holding state |
//! | the winner of that compare-and-swap: a cancel, shutdown, an add rolling back ([`Slot::take`]), or the job ([`Slot::start`], into `RUNNING`) | its success | forever (it took the task), or for a job, until [`Run::park`] puts the task back and moves the word into a holding state with release ordering |
//!
//! [`Slot::transition`] moves the word between states on the same side of that line and never
//! touches the cell.

#![allow(unsafe_code)]

use crossbeam_utils::CachePadded;

use std::marker::PhantomData;

use crate::chunked::{Chunked, MAX_INDEX};
use crate::local::thread_key;
use crate::loom::UnsafeCell;
use crate::loom::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::*};
use crate::task::Work;
use crate::word::{DUE, QUEUED, RUNNING, STOP, State, VACANT, WAITING, Word};

/// True for the states in which the cell holds the task.
fn holds(state: State) -> bool {
    matches!(state, QUEUED | WAITING | DUE)
}

/// Everything the service keeps for one task.
///
/// | field      | written by | holds |
/// |------------|------------|-------|
/// | `word`     | compare-and-swap by whoever moves the task (see `word.rs`) | generation, handles, state |
/// | `task`     | the cell's owner (see the module docs) | the closure and how it repeats |
/// | `deadline` | the adder before publishing; then under the shard lock, or the job holding `RUNNING` | `QUEUED` unstamped: the delay; otherwise the deadline, clock ns |
/// | `meant`    | as `deadline` | `QUEUED` unstamped: a clock reading no later than the add; otherwise the instant the user meant (lateness is measured from it) |
/// | `link`     | `WAITING`: under the shard lock; `VACANT`: the thread vacating it | `WAITING`: the wheel id; `VACANT`: the next vacated slot + 1 |
#[repr(align(64))]
pub(crate) struct Slot {
    pub(crate) word: AtomicU64,
    task: UnsafeCell<Option<Work>>,
    pub(crate) deadline: AtomicU64,
    pub(crate) meant: AtomicU64,
    pub(crate) link: AtomicU64,
}

// SAFETY: `task` is the only field that is not `Sync`. It is touched only by its owner under the
// protocol in the module docs, enforced by this file's API: ownership is acquired by a successful
// compare-and-swap of `word` (acquire) or held through a `Vacant` or `Run` token, and released by
// a release operation on `word`. So no two threads access the cell at once, and each owner sees
// the previous owner's writes. `Work` is `Send`, so moving it between threads is sound.
unsafe impl Sync for Slot {}

impl Default for Slot {
    fn default() -> Self {
        Slot {
            word: AtomicU64::new(0),
            task: UnsafeCell::new(None),
            deadline: AtomicU64::new(0),
            meant: AtomicU64::new(0),
            link: AtomicU64::new(0),
        }
    }
}

impl Slot {
    #[inline]
    pub(crate) fn word(&self) -> Word {
        Word(self.word.load(Acquire))
    }

    /// Moves the word of generation `generation` from a word accepted by `from` to `to(word)`,
    /// retrying while only the handle count changes under it. Returns the word it replaced, or
    /// `None` if the slot no longer matches. A move must stay on one side of "the cell holds the
    /// task" (see the module docs).
    ///
    /// # Panics
    ///
    /// If `to` crosses that line: a bug in this crate, caught before any access to the cell.
    #[inline]
    pub(crate) fn transition(
        &self,
        generation: u32,
        from: impl Fn(Word) -> bool,
        to: impl Fn(Word) -> Word,
    ) -> Option<Word> {
        self.exchange(generation, from, |w| {
            let next = to(w);
            assert_eq!(
                holds(w.state()),
                holds(next.state()),
                "{w:?} -> {next:?} changes the cell's owner: use take/start/park"
            );
            next
        })
    }

    /// Moves the word out of a holding state (accepted by `from`) into a state without the task
    /// (`to(word)`), and takes the task: a cancel, shutdown, or an add rolling back.
    ///
    /// # Panics
    ///
    /// If `from` accepts a state without the task, or `to` keeps it: a bug in this crate.
    #[inline]
    pub(crate) fn take(
        &self,
        generation: u32,
        from: impl Fn(Word) -> bool,
        to: impl Fn(Word) -> Word,
    ) -> Option<(Word, Work)> {
        let old = self.exchange(generation, from, |w| {
            let next = to(w);
            assert!(
                holds(w.state()) && !holds(next.state()),
                "{w:?} -> {next:?} does not take the task out"
            );
            next
        })?;
        // SAFETY: the exchange just moved the word out of a holding state (asserted above), so
        // this thread owns the cell from now on (module docs).
        let work = self.task.with_mut(|cell| unsafe { (*cell).take() });
        Some((old, work.expect("a holding state holds its task")))
    }

    /// As [`take`](Self::take), but drops the task where it lies instead of moving it out (a
    /// cancel: no lock is held, and the closure is dropped before this returns).
    #[inline]
    pub(crate) fn discard(
        &self,
        generation: u32,
        from: impl Fn(Word) -> bool,
        to: impl Fn(Word) -> Word,
    ) -> Option<Word> {
        let old = self.exchange(generation, from, |w| {
            let next = to(w);
            assert!(
                holds(w.state()) && !holds(next.state()),
                "{w:?} -> {next:?} does not take the task out"
            );
            next
        })?;
        // SAFETY: as in `take`: the exchange made this thread the cell's owner.
        self.task.with_mut(|cell| unsafe { *cell = None });
        Some(old)
    }

    /// The job's claim: `DUE` -> `RUNNING`, with the task. `None` if the task was cancelled or
    /// handed back meanwhile.
    #[inline]
    pub(crate) fn start(&self, generation: u32) -> Option<(Run<'_>, Work)> {
        let (_, work) = self.take(generation, |w| w.state() == DUE, |w| w.with_state(RUNNING))?;
        Some((
            Run {
                slot: self,
                generation,
            },
            work,
        ))
    }

    #[inline]
    fn exchange(
        &self,
        generation: u32,
        from: impl Fn(Word) -> bool,
        to: impl Fn(Word) -> Word,
    ) -> Option<Word> {
        let mut w = self.word();
        loop {
            if w.generation() != generation || !from(w) {
                return None;
            }
            match self
                .word
                .compare_exchange_weak(w.0, to(w).0, AcqRel, Acquire)
            {
                Ok(_) => return Some(w),
                Err(now) => w = Word(now),
            }
        }
    }
}

/// A job's hold on a task it claimed (`RUNNING`): the job owns the cell until it parks the task.
pub(crate) struct Run<'a> {
    slot: &'a Slot,
    generation: u32,
}

impl<'a> Run<'a> {
    #[inline]
    pub(crate) fn slot(&self) -> &'a Slot {
        self.slot
    }

    /// Re-claims the task between two back-to-back runs: false if a cancel asked it to stop. A
    /// compare-and-swap of the word with itself, so a cancel that returned `true` before it is
    /// always seen (a plain load could miss one that lands just after it).
    #[inline]
    pub(crate) fn still_running(&self) -> bool {
        self.slot
            .exchange(
                self.generation,
                |w| w.state() == RUNNING && !w.has(STOP),
                |w| w,
            )
            .is_some()
    }

    /// Puts the task back and moves the word to `to` (`WAITING` or `DUE`) for its next run.
    /// Fails, handing back the hold and the task, if a cancel asked it to stop.
    pub(crate) fn park(self, work: Work, to: State) -> Result<(), (Run<'a>, Work)> {
        debug_assert!(holds(to) && to != QUEUED);
        // SAFETY: this job holds the word in RUNNING, so it owns the cell (module docs); the task
        // is published by the release in the exchange below, or taken back if that fails.
        self.slot
            .task
            .with_mut(|cell| unsafe { *cell = Some(work) });
        match self.slot.exchange(
            self.generation,
            |w| w.state() == RUNNING && !w.has(STOP),
            |w| w.with_state(to),
        ) {
            Some(_) => Ok(()),
            None => {
                // SAFETY: the word is still RUNNING (only STOP was added), so the job still owns
                // the cell.
                let work = self.slot.task.with_mut(|cell| unsafe { (*cell).take() });
                Err((self, work.expect("just put")))
            }
        }
    }

    /// Ends the task: `RUNNING` -> `to(word)` (a final state, or vacant if no handle is left).
    /// Returns the new word.
    pub(crate) fn finish(self, to: impl Fn(Word) -> Word) -> Word {
        let old = self
            .slot
            .exchange(self.generation, |w| w.state() == RUNNING, &to)
            .expect("the job holds its task RUNNING");
        to(old)
    }
}

/// Proof that this thread owns a shard's slots (from [`Slots::attach`]). Not `Send`: only the
/// thread that attached can give the shard up.
pub(crate) struct OwnerToken {
    _not_send: PhantomData<*const ()>,
}

/// A vacant slot reserved by its shard's owner thread: only it can publish a task into the slot.
pub(crate) struct Vacant<'a> {
    slot: &'a Slot,
    pub(crate) index: u32,
    pub(crate) generation: u32,
}

impl<'a> Vacant<'a> {
    pub(crate) fn slot(&self) -> &'a Slot {
        self.slot
    }

    /// Puts `work` in the cell and publishes `word` (a holding state of this slot's generation)
    /// with a release store; `add.rs` fences after it.
    #[inline]
    pub(crate) fn publish(self, word: Word, work: Work) {
        assert!(
            holds(word.state()) && word.generation() == self.generation,
            "{word:?} does not publish a task"
        );
        // SAFETY: `Slots::alloc` handed this slot out only after seeing it VACANT, on the one
        // thread that owns the shard (the only one that allocates), so nobody else owns the cell
        // until the store below.
        self.slot
            .task
            .with_mut(|cell| unsafe { *cell = Some(work) });
        self.slot.word.store(word.0, Release);
    }
}

/// A shard's slots. The owner thread allocates; any thread may vacate.
pub(crate) struct Slots {
    all: Chunked<Slot>,
    /// Slots created so far; written by the owner (sequentially consistent, after the slot
    /// exists), read by scans (shutdown).
    len: CachePadded<AtomicU32>,
    /// Head of the stack of slots vacated on other threads: slot index + 1, 0 if empty. Any
    /// thread pushes; only the owner pops, all at once.
    vacated: CachePadded<AtomicU64>,
    /// The owner's side: touched only by the thread whose key is in `owner`.
    mine: CachePadded<Mine>,
}

struct Mine {
    /// `thread_key()` of the thread that owns the shard; 0 while it has none.
    owner: AtomicU64,
    /// The owner is inside `with_free` (a guard against re-entry on its own thread).
    busy: AtomicBool,
    /// Vacant slots only the owner hands out.
    free: UnsafeCell<Vec<u32>>,
}

// SAFETY: `free` is the only field that is not `Sync`; it is touched only inside `with_free`, on
// the one thread whose key is in `owner` (see the SAFETY comment there).
unsafe impl Sync for Mine {}

impl Slots {
    pub(crate) fn new() -> Self {
        Slots {
            all: Chunked::new(),
            len: CachePadded::new(AtomicU32::new(0)),
            vacated: CachePadded::new(AtomicU64::new(0)),
            mine: CachePadded::new(Mine {
                owner: AtomicU64::new(0),
                busy: AtomicBool::new(false),
                free: UnsafeCell::new(Vec::new()),
            }),
        }
    }

    /// Makes this thread the owner, if the shard has none.
    pub(crate) fn attach(&self) -> Option<OwnerToken> {
        let key = thread_key();
        self.mine
            .owner
            .compare_exchange(0, key, AcqRel, Acquire)
            .ok()
            .map(|_| OwnerToken {
                _not_send: PhantomData,
            })
    }

    /// Gives the shard up (its free list stays for the next owner).
    pub(crate) fn detach(&self, _token: OwnerToken) {
        self.mine.owner.store(0, Release);
    }

    /// True on the thread that owns the shard.
    #[inline(always)]
    pub(crate) fn owned_here(&self) -> bool {
        self.mine.owner.load(Acquire) == thread_key()
    }

    /// Runs `f` with the owner's free list, if this thread owns the shard and is not already
    /// inside a call of this. `f` must not unwind (it only pushes and pops).
    #[inline(always)]
    fn with_free<R>(&self, f: impl FnOnce(&mut Vec<u32>) -> R) -> Option<R> {
        let mine = &self.mine;
        if !self.owned_here() || mine.busy.load(Relaxed) {
            return None;
        }
        mine.busy.store(true, Relaxed);
        // SAFETY: this thread owns the shard (its key is the owner's: keys are unique and only
        // `attach` on this thread set it, only `detach` with this thread's non-`Send` token
        // clears it), so no other thread gets here; `busy` rules out a second borrow on this
        // thread. The acquire load of `owner` sees the previous owner's last writes.
        let r = mine.free.with_mut(|free| f(unsafe { &mut *free }));
        mine.busy.store(false, Relaxed);
        Some(r)
    }

    /// The slot at `i`, which this shard created.
    #[inline(always)]
    pub(crate) fn get(&self, i: u32) -> &Slot {
        self.all
            .get(i as usize)
            .expect("slot indexes come from this shard")
    }

    /// Slots created so far (every index below it is valid).
    pub(crate) fn len(&self) -> u32 {
        self.len.load(SeqCst)
    }

    /// A vacant slot, for the owner thread only: from its free list, refilled from the vacated
    /// stack, or a new one. `None` on any other thread, or once the shard holds `u32::MAX` slots.
    #[inline]
    pub(crate) fn alloc(&self) -> Option<Vacant<'_>> {
        loop {
            let i = self.with_free(|free| free.pop())?;
            let i = match i {
                Some(i) => i,
                None => self.refill()?,
            };
            let slot = self.get(i);
            let w = slot.word();
            // Only vacant slots are ever listed; checking keeps `publish` sound regardless.
            if w.state() == VACANT {
                return Some(Vacant {
                    slot,
                    index: i,
                    generation: w.generation(),
                });
            }
        }
    }

    /// The owner's free list is empty: take back the slots vacated elsewhere, or make a new one.
    #[cold]
    fn refill(&self) -> Option<u32> {
        let mut head = self.vacated.swap(0, Acquire);
        if head == 0 {
            return self.grow();
        }
        let first = (head - 1) as u32;
        head = self.get(first).link.load(Relaxed);
        self.with_free(|free| {
            while head != 0 {
                let i = (head - 1) as u32;
                head = self.get(i).link.load(Relaxed);
                free.push(i);
            }
        });
        Some(first)
    }

    fn grow(&self) -> Option<u32> {
        let i = self.len.load(Relaxed);
        if i == u32::MAX || i as usize > MAX_INDEX {
            return None;
        }
        self.all.get_or_grow(i as usize)?;
        self.len.store(i + 1, SeqCst);
        Some(i)
    }

    /// Gives back slot `i`, whose word the caller just vacated. Any thread: the owner keeps it
    /// in its free list, others push it on the vacated stack.
    #[inline]
    pub(crate) fn release(&self, i: u32) {
        if self.with_free(|free| free.push(i)).is_none() {
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
        self.all.heap_bytes()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_slot_is_one_cache_line() {
        assert_eq!(std::mem::size_of::<Slot>(), 64);
    }

    fn publish(v: Vacant<'_>) -> u32 {
        let (i, g) = (v.index, v.generation);
        v.publish(Word::occupied(g, QUEUED, 0), Work::Once(Box::new(|| {})));
        i
    }

    #[test]
    fn vacated_slots_come_back_to_the_owner() {
        let slots = Slots::new();
        let _me = slots.attach().unwrap();
        let a: Vec<u32> = (0..3).map(|_| publish(slots.alloc().unwrap())).collect();
        assert_eq!(a, [0, 1, 2]);
        for i in [1, 0] {
            let s = slots.get(i);
            let g = s.word().generation();
            s.take(g, |w| w.state() == QUEUED, Word::vacated).unwrap();
            slots.release(i);
        }
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
        assert!(slots.attach().is_none(), "one owner at a time");
        let i = publish(slots.alloc().unwrap());
        std::thread::scope(|s| {
            s.spawn(|| {
                assert!(slots.alloc().is_none(), "not the owner");
                let g = slots.get(i).word().generation();
                slots.get(i).take(g, |w| w.state() == QUEUED, Word::vacated);
                slots.release(i); // pushed on the vacated stack
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

    #[test]
    #[should_panic(expected = "changes the cell's owner")]
    fn a_transition_that_would_take_the_task_is_refused() {
        let slots = Slots::new();
        let _me = slots.attach().unwrap();
        let i = publish(slots.alloc().unwrap());
        let s = slots.get(i);
        s.transition(0, |_| true, |w| w.with_state(RUNNING));
    }
}
