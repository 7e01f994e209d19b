//! Jobs on their way to a run and jobs running: the backlog that `max_pending` bounds and
//! `wait_idle` waits out (a count that travels with each job, `job::InFlight`), and the runs that
//! `shutdown` and a cancel of a running periodic task wait for ([`Running`], [`active`]).

use std::task::Waker;
use std::time::Instant;

use crate::loom::atomic::{AtomicU64, Ordering::*, fence};
use crate::loom::{Condvar, Mutex};
use crate::service::lifecycle::Lifecycle;

/// Jobs that have claimed a task and not finished: `shutdown` waits for them. And jobs handed to
/// the executor and not yet dropped: `wait_idle` waits for them.
pub(crate) struct Running {
    count: AtomicU64,
    /// `std` atomics even under loom (like the route words): `wait_idle` is not modelled, and
    /// these are touched on every hand-off.
    queued: std::sync::atomic::AtomicU64,
    /// Threads in `wait_idle`: a job ending tells them only if there are any.
    idle_waiters: std::sync::atomic::AtomicU64,
    /// The condition variable's lock, and the wakers of asynchronous shutdowns waiting for the
    /// running jobs (`poll_others`): taken and woken, outside the lock, by every run that ends
    /// while the timer is not open. Held for no user code (a waker is cloned before, and woken
    /// after).
    lock: Mutex<Vec<Waker>>,
    idle: Condvar,
}

impl Running {
    pub(crate) fn new() -> Self {
        Running {
            count: AtomicU64::new(0),
            queued: std::sync::atomic::AtomicU64::new(0),
            idle_waiters: std::sync::atomic::AtomicU64::new(0),
            lock: Mutex::new(Vec::new()),
            idle: Condvar::new(),
        }
    }

    /// Counts a job as running until the guard drops, and marks this thread as running a job of
    /// the timer `id` (for a `shutdown` or `cancel` called from inside it). Taken before the job
    /// claims its task; `lifecycle` is that timer's (a shutdown waits for the guard's drop).
    pub(crate) fn enter<'a>(&'a self, id: u64, lifecycle: &'a Lifecycle) -> RunningGuard<'a> {
        self.count.fetch_add(1, SeqCst);
        active::enter(id);
        RunningGuard {
            running: self,
            lifecycle,
        }
    }

    /// Counts `tasks` handed to an executor (see [`InFlight`](crate::service::job::InFlight)).
    pub(crate) fn enqueue(&self, tasks: u64) {
        self.queued.fetch_add(tasks, SeqCst);
    }

    /// `tasks` handed to an executor are done, or dropped: wakes `wait_idle` if need be.
    pub(crate) fn dequeue(&self, tasks: u64) {
        self.queued.fetch_sub(tasks, SeqCst);
        // Dekker with `wait_idle`: it counts itself in, then reads `queued`; this counts the job
        // out, then reads the waiters. One of the two sees the other.
        if self.idle_waiters.load(SeqCst) > 0 {
            drop(self.lock.lock());
            self.idle.notify_all();
        }
    }

    /// A run that a cancel asked to stop has ended: wake the cancels waiting for it.
    pub(crate) fn run_ended(&self) {
        drop(self.lock.lock());
        self.idle.notify_all();
    }

    /// Waits until `busy()` is false; `run_ended` is called after it turns false.
    pub(crate) fn wait_run_end(&self, busy: impl Fn() -> bool) {
        let mut guard = self.lock.lock();
        while busy() {
            self.idle.wait(&mut guard);
        }
    }

    /// Tasks handed to an executor whose jobs are not yet done (the backlog `max_pending` also
    /// bounds).
    pub(crate) fn backlog(&self) -> u64 {
        self.queued.load(Relaxed)
    }

    /// Waits until every job handed to the executor is done (or was dropped). Not from inside a
    /// job (see `Timer::wait_idle`).
    pub(crate) fn wait_idle(&self) {
        self.idle_waiters.fetch_add(1, SeqCst);
        let mut guard = self.lock.lock();
        while self.queued.load(SeqCst) > 0 {
            self.idle.wait(&mut guard);
        }
        drop(guard);
        self.idle_waiters.fetch_sub(1, SeqCst);
    }

    /// Waits until no job of this timer runs except `own` on the calling thread, or until
    /// `limit` passes; returns the number of jobs still running then (besides `own`).
    pub(crate) fn wait_for_others(&self, own: u64, limit: Option<Instant>) -> u64 {
        let mut guard = self.lock.lock();
        loop {
            let others = self.count.load(SeqCst).saturating_sub(own);
            if others == 0 {
                return 0;
            }
            match limit {
                None => self.idle.wait(&mut guard),
                Some(at) => {
                    if self.idle.wait_until(&mut guard, at).timed_out() {
                        return self.count.load(SeqCst).saturating_sub(own);
                    }
                }
            }
        }
    }

    /// Jobs of this timer running besides `own`.
    pub(crate) fn others(&self, own: u64) -> u64 {
        self.count.load(SeqCst).saturating_sub(own)
    }

    /// Jobs of this timer running besides `own`; if there are any, `waker` (a clone made
    /// before the lock) is woken when one of them ends. Checked under the lock a run's end takes
    /// to wake the wakers, after registering: no end is missed. Called only once shutdown began
    /// (the ends of runs wake only then: see [`RunningGuard`]).
    pub(crate) fn poll_others(&self, own: u64, waker: Waker) -> u64 {
        let mut wakers = self.lock.lock();
        let others = self.count.load(SeqCst).saturating_sub(own);
        let drop_outside = if others > 0 && !wakers.iter().any(|w| w.will_wake(&waker)) {
            wakers.push(waker);
            None
        } else {
            Some(waker)
        };
        drop(wakers);
        drop(drop_outside); // the runtime's code: outside the lock
        others
    }
}

/// See [`Running::enter`].
pub(crate) struct RunningGuard<'a> {
    running: &'a Running,
    lifecycle: &'a Lifecycle,
}

impl Drop for RunningGuard<'_> {
    fn drop(&mut self) {
        active::leave();
        let running = self.running;
        running.count.fetch_sub(1, SeqCst);
        // Only a shutdown waits; it moves the lifecycle and fences before it reads the count.
        fence(SeqCst);
        if !self.lifecycle.is_open() {
            let wakers = std::mem::take(&mut *running.lock.lock());
            running.idle.notify_all();
            // Asynchronous shutdowns: each checks again and registers again if need be. A waker
            // is the runtime's code: one that panics must not unwind out of a job's end.
            for waker in wakers {
                let _ = crate::service::panic::catch(|| waker.wake());
            }
        }
    }
}

/// Which timers' jobs this thread is running, innermost last: a `shutdown` from inside a job
/// does not wait for the jobs of its own thread.
// loom's `thread_local!` has no `const { .. }` form, and this must build under both.
#[allow(clippy::missing_const_for_thread_local)]
pub(crate) mod active {
    use std::cell::RefCell;

    crate::loom::thread_local! {
        /// The timer ids of the jobs this thread is running, innermost last.
        static ACTIVE: RefCell<Vec<u64>> = RefCell::new(Vec::new());
    }

    pub(super) fn enter(id: u64) {
        let _ = ACTIVE.try_with(|a| a.borrow_mut().push(id));
    }

    pub(super) fn leave() {
        let _ = ACTIVE.try_with(|a| a.borrow_mut().pop());
    }

    /// Jobs of timer `id` running on this thread.
    pub(crate) fn own(id: u64) -> u64 {
        ACTIVE
            .try_with(|a| a.borrow().iter().filter(|&&t| t == id).count() as u64)
            .unwrap_or(0)
    }

    /// True if this thread is running a task of any timer.
    pub(crate) fn inside_a_task() -> bool {
        ACTIVE.try_with(|a| !a.borrow().is_empty()).unwrap_or(false)
    }
}
