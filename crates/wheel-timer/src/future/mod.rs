//! Futures on the timer: [`Sleep`], [`Timeout`] and [`Interval`], for any async runtime (no
//! runtime dependency: they only need a [`Waker`]).
//!
//! A future is a timer like any other: arming it adds a task to the calling thread's shard, so it
//! counts in `pending()` and `stats()`, is never early and fires at most once per arming. Its task
//! holds a [`Waiter`] instead of a closure; the thread that hands the task out (the tick thread,
//! or an add that is due at once) wakes the future itself, outside every lock, instead of sending
//! a job through the pool. Dropping the future cancels its task at once.
//!
//! ## The waiter
//!
//! One word, `epoch << 2 | status`, and a slot for the waker. The future owns the epoch: each
//! arming (a new sleep, a `reset` that could not move the armed task) starts a new one, so a late
//! fire of an older arming is ignored. The firing side moves `ARMED` to `FIRED` (or `SHUT_DOWN`)
//! with a compare-and-swap of the current epoch, then takes the waker under its lock and wakes it
//! after unlocking; a poll checks the status and stores its waker under the same lock. So either
//! the poll sees the new status, or the firing side finds the waker: no wake-up is lost.
//!
//! A dropped sleep gives its waiter to its thread's spares (at most 64) when nothing else holds
//! it, reset as new; the next sleep made on that thread takes it instead of allocating one.

mod interval;
mod sleep;
mod timeout;

pub use interval::Interval;
pub use sleep::Sleep;
pub use timeout::{Timeout, TimeoutError};

use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use crate::loom::Mutex;
use crate::loom::atomic::{AtomicU64, Ordering::*};

const ARMED: u64 = 0;
const FIRED: u64 = 1;
const SHUT_DOWN: u64 = 2;
const STATUS: u64 = 0b11;

/// Waiters each thread keeps for its next sleeps (see [`Waiter::take`]): a few kilobytes at most.
#[cfg(not(loom))]
const SPARE: usize = 64;

#[cfg(not(loom))]
std::thread_local! {
    static SPARES: std::cell::RefCell<Vec<Arc<Waiter>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// How an arming ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The deadline came.
    Fired,
    /// The timer shut down (or was gone) first.
    ShutDown,
}

/// The state a future shares with its task.
#[derive(Debug)]
pub(crate) struct Waiter {
    state: AtomicU64,
    waker: Mutex<Option<Waker>>,
}

impl Waiter {
    /// A waiter for a new sleep: one this thread kept ([`put_back`](Self::put_back)), else a new
    /// one. A sleep that wraps a request lives a few milliseconds and is made and dropped on the
    /// same worker threads: allocating each one, and freeing it on whichever thread dropped it
    /// last, was about a fifth of a cancelled timeout's cost under tokio (W11).
    pub(crate) fn take() -> Arc<Waiter> {
        #[cfg(not(loom))]
        if let Ok(Some(w)) = SPARES.try_with(|s| s.borrow_mut().pop()) {
            return w;
        }
        Arc::new(Waiter::new())
    }

    /// Keeps a sleep's waiter for the next sleep made on this thread, if nothing else holds it
    /// (a task being handed out still might) and the thread keeps fewer than `SPARE`; it starts
    /// over, as [`Waiter::new`] makes it. (Under loom, where thread-locals are the model's, it is
    /// dropped.)
    pub(crate) fn put_back(mut waiter: Arc<Waiter>) {
        #[cfg(not(loom))]
        if let Some(w) = Arc::get_mut(&mut waiter) {
            *w.state.get_mut() = ARMED;
            let old = w.waker.get_mut().take();
            drop(old); // foreign code, which might make or drop sleeps itself: before the borrow
            let _ = SPARES.try_with(|s| {
                let mut s = s.borrow_mut();
                if s.len() < SPARE {
                    s.push(waiter);
                }
            });
            return;
        }
        #[cfg(loom)]
        let _ = &mut waiter;
        drop(waiter);
    }

    /// Armed, epoch 0.
    pub(crate) fn new() -> Self {
        Waiter {
            state: AtomicU64::new(ARMED),
            waker: Mutex::new(None),
        }
    }

    /// The deadline of arming `epoch` came: wakes the future (once).
    pub(crate) fn fire(&self, epoch: u64) {
        self.end(epoch, FIRED);
    }

    /// The timer shut down before arming `epoch` fired: wakes the future (once).
    pub(crate) fn shut_down(&self, epoch: u64) {
        self.end(epoch, SHUT_DOWN);
    }

    fn end(&self, epoch: u64, status: u64) {
        let armed = epoch << 2 | ARMED;
        if self
            .state
            .compare_exchange(armed, epoch << 2 | status, AcqRel, Acquire)
            .is_ok()
        {
            let waker = self.waker.lock().take();
            if let Some(w) = waker {
                w.wake();
            }
        }
    }

    /// Starts the next arming and returns its epoch. Only the future calls it.
    pub(crate) fn rearm(&self) -> u64 {
        let epoch = (self.state.load(Acquire) >> 2) + 1;
        self.state.store(epoch << 2 | ARMED, Release);
        epoch
    }

    /// How the current arming (the last `rearm`'s, or the first) ended, if it did. Only the
    /// future moves the epoch on, and the firing side changes the status of its own arming
    /// only, so the future needs no copy of the epoch to ask.
    pub(crate) fn outcome(&self) -> Option<Outcome> {
        match self.state.load(Acquire) & STATUS {
            FIRED => Some(Outcome::Fired),
            SHUT_DOWN => Some(Outcome::ShutDown),
            _ => None,
        }
    }

    /// Ready when the current arming ended; else keeps `cx`'s waker (replacing a different one).
    pub(crate) fn poll(&self, cx: &mut Context<'_>) -> Poll<Outcome> {
        let mut slot = self.waker.lock();
        if let Some(o) = self.outcome() {
            return Poll::Ready(o);
        }
        let replaced = match &mut *slot {
            Some(w) if w.will_wake(cx.waker()) => None,
            other => other.replace(cx.waker().clone()),
        };
        drop(slot);
        drop(replaced); // foreign code: dropped outside the lock
        Poll::Pending
    }
}
