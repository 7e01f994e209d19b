//! The waker cell of a future's slot, and how an arming ended ([`Outcome`]).
//!
//! Each slot has a [`WakerCell`] beside it (`Slots::wakers`, allocated a chunk at a time by the
//! first future polled there), so a future needs no allocation of its own: its arming is the
//! slot, named by the future's handle, and how the arming ended is the slot's word (`RUNNING` or
//! `DONE`: the deadline came; `RETURNED`: the timer shut down first). The protocol:
//!
//! - A poll locks the cell, reads the word, and stores its waker only if the task is still
//!   waiting (`QUEUED`, `WAITING` or `DUE`). (A new waker is cloned with the lock released,
//!   then stored under it after a second look at the word: no user code runs under the lock.)
//! - The thread that ends the arming moves the word first (the job's claim, or shutdown's), then
//!   takes the waker under the cell's lock, and wakes it after unlocking. The job does so before
//!   it finishes the task, so before the slot can be vacated and reused: the waker it takes is
//!   this arming's. (Shutdown's drain makes the word final first, so the future may let the slot
//!   go before the drain takes the waker; but an add to a timer shutting down is refused and
//!   never touches a cell, so nothing else reaches that cell meanwhile.)
//!
//! So either the poll sees the word moved, or the ending side finds the waker: no wake-up is lost.
//! A future that stops waiting on an arming takes its waker back out (if a poll of it left one)
//! while its handle still pins the slot, and the ending side takes it too, so no runtime task is kept alive by a timer it no
//! longer waits on, and a later arming in the slot finds its cell empty. A re-armed future (a
//! `reset` that could not move its task) moves the waker to the new arming's cell, or wakes it if
//! that arming ended at once: whoever polled it still waits, and is woken by the new deadline
//! without polling again.

use std::task::{Context, Poll, Waker};

use crate::loom::Mutex;
use crate::slots::word::{DONE, RETURNED, RUNNING, Word};

/// How an arming ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The deadline came.
    Fired,
    /// The timer shut down (or was gone) first.
    Shutdown,
}

impl Outcome {
    /// How the arming of a future's task whose word is `w` ended, if it did. (`CANCELLED` only
    /// follows the future's own cancel, after which it asks no more.)
    pub(crate) fn of(w: Word) -> Option<Outcome> {
        match w.state() {
            RUNNING | DONE => Some(Outcome::Fired),
            RETURNED => Some(Outcome::Shutdown),
            _ => None,
        }
    }
}

/// Where a polled future leaves its waker for the thread that ends its arming (see the module
/// docs). One per slot; empty while the slot is vacant.
#[derive(Debug, Default)]
pub(crate) struct WakerCell(Mutex<Option<Waker>>);

impl WakerCell {
    /// Ready if the arming ended (by `word()`, read under the cell's lock); else keeps `cx`'s
    /// waker, replacing a different one.
    ///
    /// No foreign code runs under the lock: a waker's `clone` and `drop` may do anything (move
    /// a manual clock, whose advance waits for the fire that needs this cell; cancel a sleep
    /// under its shard's lock, which shutdown holds while it takes cells), so the lock is a
    /// leaf. A new waker is cloned first and stored by [`store`](Self::store).
    pub(crate) fn poll(&self, cx: &mut Context<'_>, word: impl Fn() -> Word) -> Poll<Outcome> {
        {
            let slot = self.0.lock();
            if let Some(o) = Outcome::of(word()) {
                return Poll::Ready(o);
            }
            if slot.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                return Poll::Pending;
            }
        }
        match self.store(cx.waker().clone(), word) {
            Ok(()) => Poll::Pending,
            Err((o, unused)) => {
                drop(unused); // foreign code: outside the lock
                Poll::Ready(o)
            }
        }
    }

    /// Keeps `waker` for the thread that ends the arming, if it has not ended (by `word()`,
    /// read under the lock); if it has, gives `waker` back with how it ended. The waker it
    /// replaces is dropped outside the lock.
    pub(crate) fn store(
        &self,
        waker: Waker,
        word: impl Fn() -> Word,
    ) -> Result<(), (Outcome, Waker)> {
        let mut slot = self.0.lock();
        if let Some(o) = Outcome::of(word()) {
            return Err((o, waker));
        }
        let replaced = slot.replace(waker);
        drop(slot);
        drop(replaced); // foreign code: outside the lock
        Ok(())
    }

    /// Takes the waker out (the caller wakes or drops it outside the lock).
    pub(crate) fn take(&self) -> Option<Waker> {
        self.0.lock().take()
    }
}
