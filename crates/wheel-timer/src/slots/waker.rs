//! A future's waker, kept in its own task in the slot's cell, and how an arming ended
//! ([`Outcome`]).
//!
//! A future needs no allocation of its own: its arming is a task in a slot, named by the
//! future's handle, whose work is a wake-up (`Work::Wake`) with room for one waker; how the
//! arming ended is the slot's word (`RUNNING` or `DONE`: the deadline came; `RETURNED`: the timer
//! shut down first). The waker lives in the slot's own cache line, the one a poll, a fire and a
//! cancel touch anyway: no second line, no look-up, no lock. The protocol:
//!
//! - A poll sets the word's `HELD` bit while the task is still waiting (`QUEUED`, `WAITING` or
//!   `DUE`), puts its waker in the task, and clears the bit ([`Slot::with_held`]). If the task
//!   no longer waits, the bit is not set and the poll is ready: the word says how it ended. (A
//!   new waker is cloned before, and the one it replaces dropped after: no foreign code runs
//!   while the bit is set.)
//! - The thread that ends the arming takes the task out of the cell with a compare-and-swap of
//!   the word (the job's claim, shutdown's drain), which waits while `HELD` is set, and wakes the
//!   waker it found in the task. The job does so before it finishes the task, so before the slot
//!   can be vacated and reused: the waker it finds is this arming's.
//!
//! So either the poll finds the task gone (and is ready), or the ending side finds the waker: no
//! wake-up is lost. A future that stops waiting on an arming takes its waker back out of the
//! task, before its cancel or with it (a sleep in its ring, cancelled and vacated in one move),
//! so no runtime task is kept alive by a timer it no longer waits on. A re-armed future (a `reset`
//! that could not move its task) moves the waker to the new arming, or wakes it if that arming
//! ended at once: whoever polled it still waits, and is woken by the new deadline without
//! polling again.

use std::task::{Context, Poll, Waker};

use crate::slots::slot::Slot;
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

    /// How an arming ended, from the word a poll found not waiting.
    fn ended(w: Word) -> Outcome {
        // Not waiting, so `RUNNING`, `DONE` or `RETURNED`: the future's handle pins the slot, and
        // only the future itself cancels its task (it polls no more after that).
        debug_assert!(Outcome::of(w).is_some(), "{w:?}");
        Outcome::of(w).unwrap_or(Outcome::Shutdown)
    }
}

/// Where a task keeps its future's waker: `None` for a task that wakes no future (never one a
/// future's handle names).
pub(crate) type Place<T> = fn(&mut T) -> Option<&mut Option<Waker>>;

impl<T> Slot<T> {
    /// Ready if the arming of `generation` ended; else leaves `cx`'s waker in the task,
    /// replacing a different one. `empty`: the caller knows it left no waker there yet (a first
    /// poll), so the look for the same waker is skipped.
    pub(crate) fn poll_waker(
        &self,
        generation: u32,
        cx: &mut Context<'_>,
        place: Place<T>,
        empty: bool,
    ) -> Poll<Outcome> {
        if !empty {
            let same = self.with_held(generation, |t| {
                place(t).is_some_and(|w| w.as_ref().is_some_and(|w| w.will_wake(cx.waker())))
            });
            match same {
                Err(w) => return Poll::Ready(Outcome::ended(w)),
                Ok(true) => return Poll::Pending,
                Ok(false) => {}
            }
        }
        match self.store_waker(generation, cx.waker().clone(), place) {
            Ok(replaced) => {
                drop(replaced); // foreign code: with the bit clear
                Poll::Pending
            }
            Err((o, unused)) => {
                drop(unused);
                Poll::Ready(o)
            }
        }
    }

    /// Leaves `waker` in the task of `generation` for the thread that ends the arming, and
    /// returns the waker it replaced (for the caller to drop); if the arming has ended, gives
    /// `waker` back with how it ended.
    pub(crate) fn store_waker(
        &self,
        generation: u32,
        waker: Waker,
        place: Place<T>,
    ) -> Result<Option<Waker>, (Outcome, Waker)> {
        let mut waker = Some(waker);
        let stored = self.with_held(generation, |t| {
            place(t).map(|w| std::mem::replace(w, waker.take()))
        });
        match stored {
            Ok(Some(replaced)) => Ok(replaced),
            Ok(None) => unreachable!("a future's task keeps its waker"),
            Err(w) => Err((Outcome::ended(w), waker.expect("not stored"))),
        }
    }

    /// Takes the waker left in the task of `generation` back out (the future no longer waits
    /// on this arming); `None` if there is none, or the arming ended (its ending side took it).
    pub(crate) fn take_waker(&self, generation: u32, place: Place<T>) -> Option<Waker> {
        self.with_held(generation, |t| place(t).and_then(Option::take))
            .ok()
            .flatten()
    }
}
