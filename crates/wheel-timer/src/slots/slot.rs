//! Task slots: one cache line per task in a shard's never-moving array, and the crate's main
//! `unsafe`: the cell a slot keeps its task's closure in, owned by the slot word's protocol
//! instead of a lock. (Which thread may allocate slots at all is `owner.rs`.)
//!
//! A mutex per slot would cost two more atomic operations on every add and two on every cancel,
//! on the path users call millions of times a second; the word already decides who owns the
//! task. This file turns that rule into a safe API: the only ways to reach a cell are a won
//! compare-and-swap of the word ([`Slot::take`], [`Slot::start`]) or a token that proves
//! ownership ([`Vacant`] from the shard's owner thread via [`OwnedFree::claim`], [`Run`] from a job's
//! claim).
//!
//! ## Who owns the cell
//!
//! The cell holds a task exactly while the word is `QUEUED`, `WAITING` or `DUE` ("holding"
//! states). Ownership passes with an acquire/release operation on the word:
//!
//! | owner | from | until |
//! |-------|------|-------|
//! | the shard's owner thread | it claims a `VACANT` slot ([`OwnedFree::claim`]) | it publishes the word ([`Vacant::publish`], a release store) |
//! | nobody: the task sits in the cell | publication | a compare-and-swap out of a holding state |
//! | the winner of that compare-and-swap: a cancel, shutdown, an add rolling back ([`Slot::take`]), or the job ([`Slot::start`], into `RUNNING`) | its success | forever (it took the task), or for a job, until [`Run::park`] puts the task back and moves the word into a holding state with release ordering |
//!
//! [`Slot::transition`] moves the word between states on the same side of that line and never
//! touches the cell.
//!
//! One more way in, while the task sits in the cell: a future's poll sets the word's `HELD` bit
//! ([`Slot::with_held`], acquire) to leave its waker in (or take it from) its own task, and
//! clears it (release). A move that takes the task waits while the bit is set, so the two never
//! meet in the cell; the bit's holder runs no foreign code while it holds it (see `waker.rs`).

#![allow(unsafe_code)]

use crate::loom::UnsafeCell;
use crate::loom::atomic::{AtomicU64, Ordering::*};
use crate::loom::spin;
use crate::slots::owner::OwnedFree;
use crate::slots::word::{
    BUSY, DUE, HELD, PLAIN, QUEUED, RUNNING, STOP, State, VACANT, WAITING, Word,
};

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
/// | `link`     | under the shard lock, while `WAITING` | the task's wheel id (nothing else: a free slot is listed without writing into it, see `table.rs`) |
#[repr(align(64))]
pub(crate) struct Slot<T> {
    pub(crate) word: AtomicU64,
    task: UnsafeCell<Option<T>>,
    pub(crate) deadline: AtomicU64,
    pub(crate) meant: AtomicU64,
    pub(crate) link: AtomicU64,
}

// SAFETY: `task` is the only field that is not `Sync`. It is touched only by its owner under the
// protocol in the module docs, enforced by this file's API: ownership is acquired by a successful
// compare-and-swap of `word` (acquire) or held through a `Vacant` or `Run` token, and released by
// a release operation on `word`. So no two threads access the cell at once, and each owner sees
// the previous owner's writes. `T` is `Send`, so moving it between threads is sound.
unsafe impl<T: Send> Sync for Slot<T> {}

impl<T> Default for Slot<T> {
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

impl<T> Slot<T> {
    #[inline]
    pub(crate) fn word(&self) -> Word {
        Word(self.word.load(Acquire))
    }

    /// The word, without ordering: only to decide whether to act on the slot, which then reads
    /// or compares-and-swaps the word with the ordering it needs. (A drain skips the records of
    /// tasks cancelled since; with an acquire load per record, the loop reloaded its bases from
    /// memory on every record.)
    #[inline]
    pub(crate) fn peek_word(&self) -> Word {
        Word(self.word.load(Relaxed))
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
    ) -> Option<(Word, T)> {
        let old = self.exchange_out(generation, from, |w| {
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
    /// cancel: no lock is held, and the closure is dropped before this returns). `counted` runs
    /// first, once the task is this thread's: the closure's `Drop` is the user's code and may
    /// panic, and the caller's bookkeeping must stand if it does. A `PLAIN` task is overwritten
    /// instead: dropping its closure's box frees nothing but reads the box's vtable, which the
    /// add has just written (W6's add + cancel pair, pinned: 18.9 -> 18.1 ns).
    #[inline]
    pub(crate) fn discard(
        &self,
        generation: u32,
        from: impl Fn(Word) -> bool,
        to: impl Fn(Word) -> Word,
        counted: impl FnOnce(),
    ) -> Option<Word> {
        let old = self.exchange_out(generation, from, |w| {
            let next = to(w);
            assert!(
                holds(w.state()) && !holds(next.state()),
                "{w:?} -> {next:?} does not take the task out"
            );
            next
        })?;
        counted();
        // SAFETY: as in `take`: the exchange made this thread the cell's owner. A `PLAIN` task
        // has nothing to drop (see `word.rs`), so overwriting it drops all there is.
        self.task.with_mut(|cell| unsafe {
            if old.has(PLAIN) {
                cell.write(None);
            } else {
                *cell = None;
            }
        });
        Some(old)
    }

    /// As [`discard`](Self::discard), for a cancel that keeps a part of the task: `keep` moves
    /// it out of the task in place (a future's waker), then the rest is dropped where it lies.
    /// (Taken out whole, the task went through the stack as unaligned 16-byte halves read back
    /// at once as 8-byte words: a failed store-to-load forward that took a third of a sleep's
    /// drop.) `keep` runs no foreign code; the rest's drop may (see `discard`).
    #[inline]
    pub(crate) fn discard_keeping<R>(
        &self,
        generation: u32,
        from: impl Fn(Word) -> bool,
        to: impl Fn(Word) -> Word,
        keep: impl FnOnce(&mut T) -> R,
    ) -> Option<R> {
        self.exchange_out(generation, from, |w| {
            let next = to(w);
            assert!(
                holds(w.state()) && !holds(next.state()),
                "{w:?} -> {next:?} does not take the task out"
            );
            next
        })?;
        // SAFETY: as in `take`: the exchange made this thread the cell's owner.
        Some(self.task.with_mut(|cell| unsafe {
            let kept = keep((*cell).as_mut().expect("a holding state holds its task"));
            *cell = None;
            kept
        }))
    }

    /// The job's claim: `DUE` -> `RUNNING | BUSY`, with the task. `None` if the task was
    /// cancelled or handed back meanwhile.
    #[inline]
    pub(crate) fn start(&self, generation: u32) -> Option<(Run<'_, T>, T)> {
        let (_, work) = self.take(
            generation,
            |w| w.state() == DUE,
            |w| w.with_state(RUNNING).with(BUSY),
        )?;
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
        self.exchange_when(generation, from, to, false)
    }

    /// [`exchange`](Self::exchange) for a move that takes the task out of the cell: it waits
    /// while a future's poll holds the cell (`HELD`, see [`with_held`](Self::with_held)).
    #[inline]
    fn exchange_out(
        &self,
        generation: u32,
        from: impl Fn(Word) -> bool,
        to: impl Fn(Word) -> Word,
    ) -> Option<Word> {
        self.exchange_when(generation, from, to, true)
    }

    #[inline(always)]
    fn exchange_when(
        &self,
        generation: u32,
        from: impl Fn(Word) -> bool,
        to: impl Fn(Word) -> Word,
        wait_held: bool,
    ) -> Option<Word> {
        let mut w = self.word();
        let mut turn = 0;
        loop {
            if w.generation() != generation || !from(w) {
                return None;
            }
            if wait_held && w.has(HELD) {
                spin(turn);
                turn += 1;
                w = self.word();
                continue;
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

    /// Runs `f` on the task in the cell while the word is in a holding state of `generation`,
    /// the cell held by this thread through the word's `HELD` bit: a move that takes the task
    /// waits meanwhile. `Err(word)`, without running `f`, if the slot holds no task of that
    /// generation (it ended, or was taken).
    ///
    /// For the task's future (it reaches the slot through `&mut`, so one caller at a time per
    /// slot in practice); a second caller would wait for the first, as the moves do, so the bit
    /// is a lock between holders too and nothing rests on that practice. `f` runs no foreign code
    /// (a waker's `clone` or `drop` may do anything, including wait for this slot's task): it
    /// only moves a waker in or out. If `f` unwinds all the same, the bit is cleared on the way
    /// out, so no move waits for ever.
    #[inline]
    pub(crate) fn with_held<R>(
        &self,
        generation: u32,
        f: impl FnOnce(&mut T) -> R,
    ) -> Result<R, Word> {
        let mut w = self.word();
        let mut turn = 0;
        loop {
            if w.generation() != generation || !holds(w.state()) {
                return Err(w);
            }
            if w.has(HELD) {
                spin(turn);
                turn += 1;
                w = self.word();
                continue;
            }
            match self
                .word
                .compare_exchange_weak(w.0, w.with(HELD).0, Acquire, Acquire)
            {
                Ok(_) => break,
                Err(now) => w = Word(now),
            }
        }
        let held = Held(&self.word);
        // SAFETY: the word is in a holding state and this thread set `HELD`: every move that
        // takes the task waits for the bit to clear (`exchange_out`), so does every other
        // holder (above), and nobody else writes the cell in a holding state (the owner writes
        // it only while `VACANT`, a job only while `RUNNING`). The acquire above saw the release
        // that put the task there (or the previous holder's clearing of the bit).
        let r = self.task.with_mut(|cell| unsafe {
            f((*cell).as_mut().expect("a holding state holds its task"))
        });
        drop(held);
        Ok(r)
    }
}

/// `HELD`, set on a slot's word by [`Slot::with_held`]: cleared when this is dropped, after the
/// holder's closure returned or while it unwinds. Release: the next taker (or holder), whose
/// compare-and-swap acquires this, sees what the closure wrote.
struct Held<'a>(&'a AtomicU64);

impl Drop for Held<'_> {
    #[inline]
    fn drop(&mut self) {
        self.0.fetch_and(!HELD, Release);
    }
}

/// A job's hold on a task it claimed (`RUNNING`): the job owns the cell until it parks the task.
pub(crate) struct Run<'a, T> {
    slot: &'a Slot<T>,
    generation: u32,
}

impl<'a, T> Run<'a, T> {
    #[inline]
    pub(crate) fn slot(&self) -> &'a Slot<T> {
        self.slot
    }

    /// Marks the run in progress ended (`BUSY` cleared). Returns the word it replaced: with
    /// `STOP` if a cancel asked the task to stop during the run (and may be waiting for this).
    pub(crate) fn end_run(&self) -> Word {
        self.slot
            .exchange(
                self.generation,
                |w| w.state() == RUNNING,
                |w| w.without(BUSY),
            )
            .expect("the job holds its task RUNNING")
    }

    /// Claims the next of back-to-back runs (`BUSY` again): false if a cancel asked the task to
    /// stop. A compare-and-swap, so a cancel that returned `true` before it is always seen.
    pub(crate) fn claim_next(&self) -> bool {
        self.slot
            .exchange(
                self.generation,
                |w| w.state() == RUNNING && !w.has(STOP),
                |w| w.with(BUSY),
            )
            .is_some()
    }

    /// Puts the task back and moves the word to `to` (`WAITING` or `DUE`) for its next run.
    /// Fails, handing back the hold and the task, if a cancel asked it to stop.
    pub(crate) fn park(self, work: T, to: State) -> Result<(), (Run<'a, T>, T)> {
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

/// A vacant slot reserved by its shard's owner thread: only it can publish a task into the slot.
///
/// Two words (the slot, and its index and generation in one), so that a function returning an
/// `Option<Vacant>` returns it in registers: with three fields it went through memory, and the
/// caller's wider load of what the callee had just stored as two halves stalled (37 instead of
/// 28 ns per add + cancel, W6 at one thread).
pub(crate) struct Vacant<'a, T> {
    slot: &'a Slot<T>,
    /// Generation (high half) and index (low half).
    id: u64,
}

impl<'a, T> Vacant<'a, T> {
    /// The slot's index in its shard.
    #[inline(always)]
    pub(crate) fn index(&self) -> u32 {
        self.id as u32
    }

    /// The generation the slot is claimed at.
    #[inline(always)]
    pub(crate) fn generation(&self) -> u32 {
        (self.id >> 32) as u32
    }

    pub(crate) fn slot(&self) -> &'a Slot<T> {
        self.slot
    }

    /// Puts `work` in the cell and publishes the occupied word of this slot's generation in
    /// `state` (a holding one) with `flags`, with a release store; returns the word. `service/add.rs`
    /// fences after it. (Built here, the word has the slot's generation by construction: the
    /// check a word passed in needed was 5 of the add's instructions.)
    #[inline]
    pub(crate) fn publish(self, state: State, flags: u64, work: T) -> Word {
        debug_assert!(holds(state), "{state} does not hold a task");
        let word = Word::occupied(self.generation(), state, flags);
        // SAFETY: `OwnedFree::claim` handed this slot out only after seeing it VACANT, on the one
        // thread that owns the shard (the only thread that can claim), so nobody else owns the
        // cell until the store below.
        self.slot
            .task
            .with_mut(|cell| unsafe { *cell = Some(work) });
        self.slot.word.store(word.0, Release);
        word
    }
}

impl OwnedFree<'_> {
    /// Reserves `slot` (number `index`, of the shard whose [`Ownership`](crate::slots::owner::Ownership) lent this) for a task, if it
    /// is vacant: the one way to get a [`Vacant`], on the owner thread only (this is the proof).
    /// Sound as long as the thread still owns the shard: nothing between `with_free`'s check
    /// and here may run foreign code that makes it give the shard up, or must check again (the
    /// free set's refill, which allocates, does).
    #[inline(always)]
    pub(crate) fn claim<'a, T>(&self, slot: &'a Slot<T>, index: u32) -> Option<Vacant<'a, T>> {
        let w = slot.word();
        (w.state() == VACANT).then_some(Vacant {
            slot,
            id: (u64::from(w.generation()) << 32) | u64::from(index),
        })
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::slots::owner::Ownership;
    use crate::slots::word::CANCELLED;

    fn claim<'a>(mine: &Ownership, slot: &'a Slot<u32>, index: u32) -> Option<Vacant<'a, u32>> {
        mine.with_free(|owned| owned.claim(slot, index)).flatten()
    }

    #[test]
    #[should_panic(expected = "changes the cell's owner")]
    fn a_transition_that_would_take_the_task_is_refused() {
        let mine = Ownership::new();
        let _me = mine.attach().unwrap();
        let slot = Slot::<u32>::default();
        let v = claim(&mine, &slot, 0).unwrap();
        v.publish(QUEUED, 0, 7);
        slot.transition(0, |_| true, |w| w.with_state(RUNNING));
    }

    #[test]
    fn only_the_owner_claims_and_only_vacant_slots() {
        let mine = Ownership::new();
        let slot = Slot::<u32>::default();
        assert!(claim(&mine, &slot, 0).is_none(), "no owner yet");
        let me = mine.attach().unwrap();
        assert!(mine.attach().is_none(), "one owner at a time");
        std::thread::scope(|s| {
            s.spawn(|| assert!(claim(&mine, &slot, 0).is_none(), "not the owner"));
        });
        let v = claim(&mine, &slot, 0).unwrap();
        v.publish(QUEUED, 0, 7);
        assert!(claim(&mine, &slot, 0).is_none(), "occupied");
        mine.detach(me);
    }

    /// A slot holding a `QUEUED` task `7` of generation 0, and its ownership (kept alive).
    fn queued() -> (Ownership, Slot<u32>) {
        let mine = Ownership::new();
        let me = mine.attach().unwrap();
        let slot = Slot::<u32>::default();
        claim(&mine, &slot, 0).unwrap().publish(QUEUED, 0, 7);
        mine.detach(me);
        (mine, slot)
    }

    #[test]
    fn a_holder_that_unwinds_lets_the_cell_go() {
        let (_mine, slot) = queued();
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            slot.with_held(0, |_| panic!("a holder's closure panics"))
        }));
        assert!(unwound.is_err());
        assert!(!slot.word().has(HELD), "the bit outlived its holder");
        // A move that waits for the bit goes through (it would spin for ever otherwise).
        let (old, task) = slot
            .take(0, |w| w.state() == QUEUED, |w| w.with_state(CANCELLED))
            .expect("the task is still there");
        assert_eq!((old.state(), task), (QUEUED, 7));
    }

    #[test]
    fn a_second_holder_waits_for_the_first() {
        let (_mine, slot) = queued();
        let inside = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            slot.with_held(0, |t| {
                // While this thread holds the cell, another holder must not get in.
                let other = s.spawn(|| {
                    slot.with_held(0, |t| {
                        *t += 1;
                        inside.load(SeqCst)
                    })
                });
                inside.store(true, SeqCst);
                std::thread::sleep(std::time::Duration::from_millis(20));
                *t *= 10;
                inside.store(false, SeqCst);
                other
            })
            .unwrap()
            .join()
            .unwrap()
            .map(|overlapped| assert!(!overlapped, "two holders at once"))
            .unwrap();
        });
        let (_, task) = slot.take(0, |_| true, |w| w.with_state(CANCELLED)).unwrap();
        assert_eq!(task, 71, "the second holder ran after the first");
    }
}
