//! Jobs on their way to a run and jobs running: the backlog that `max_pending` bounds and
//! `wait_idle` waits out (a count that travels with each job, [`InFlight`]), and the runs that
//! `shutdown` and a cancel of a running periodic task wait for ([`Running`], [`active`]).

use std::sync::Arc;
use std::time::Instant;

use tickwheel_executor::Executor;

use crate::loom::atomic::{AtomicU64, Ordering::*, fence};
use crate::loom::{Condvar, Mutex};
use crate::service::core::Core;
use crate::service::route::Pool;
use crate::shard::Fire;

/// Jobs that have claimed a task and not finished: `shutdown` waits for them. And jobs handed to
/// the executor and not yet dropped: `wait_idle` waits for them.
pub(crate) struct Running {
    count: AtomicU64,
    /// `std` atomics even under loom (like the route words): `wait_idle` is not modelled, and
    /// these are touched on every hand-off.
    queued: std::sync::atomic::AtomicU64,
    /// Threads in `wait_idle`: a job ending tells them only if there are any.
    idle_waiters: std::sync::atomic::AtomicU64,
    lock: Mutex<()>,
    idle: Condvar,
}

/// A job on its way through the executor, and the tasks it still counts for in the backlog (see
/// [`Running::wait_idle`]).
pub(crate) struct InFlight(Arc<Core>, u64);

impl InFlight {
    pub(crate) fn new(core: &Arc<Core>, tasks: u64) -> Self {
        core.running.queued.fetch_add(tasks, SeqCst);
        InFlight(core.clone(), tasks)
    }

    pub(crate) fn core(&self) -> &Arc<Core> {
        &self.0
    }

    /// One of a chunk's tasks' share of the count, for the job the chunk's job hands that task
    /// on with: the count moves from one job to the other without being given back and taken
    /// again, so the task counts exactly once all along (and the shared counter is not touched).
    pub(crate) fn split_one(&mut self) -> InFlight {
        debug_assert!(self.1 > 0, "a chunk hands on no more tasks than it counts");
        self.1 = self.1.saturating_sub(1);
        InFlight(self.0.clone(), 1)
    }

    /// Hands the job of `fire` (counted by this) to `executor` (which is `pool`), for `core`
    /// (this job's timer).
    pub(crate) fn send(self, core: &Core, fire: Fire, executor: &Arc<dyn Executor>, pool: Pool) {
        let _span = crate::service::trace::handoff(fire.shard, fire.slot, pool);
        self.submit(core, executor, move |queued| {
            crate::service::job::run(queued.core(), fire, pool)
        });
    }

    /// Hands `job` to `executor`, the count travelling with it (see [`Core::send_job`]). An
    /// `execute` that panics is the user's code: counted and reported like a panicking task
    /// (`core` is this job's timer, passed in because the job has taken this count's handle).
    pub(crate) fn submit(
        mut self,
        core: &Core,
        executor: &Arc<dyn Executor>,
        job: impl FnOnce(&mut InFlight) + Send + 'static,
    ) {
        let sent =
            crate::service::panic::catch(|| executor.execute(Box::new(move || job(&mut self))));
        if let Err(message) = sent {
            core.panics.report(message);
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.1 == 0 {
            return; // a chunk whose tasks all went on with their share
        }
        let running = &self.0.running;
        running.queued.fetch_sub(self.1, SeqCst);
        // Dekker with `wait_idle`: it counts itself in, then reads `queued`; this counts the job
        // out, then reads the waiters. One of the two sees the other.
        if running.idle_waiters.load(SeqCst) > 0 {
            drop(running.lock.lock());
            running.idle.notify_all();
        }
    }
}

impl Running {
    pub(crate) fn new() -> Self {
        Running {
            count: AtomicU64::new(0),
            queued: std::sync::atomic::AtomicU64::new(0),
            idle_waiters: std::sync::atomic::AtomicU64::new(0),
            lock: Mutex::new(()),
            idle: Condvar::new(),
        }
    }

    /// Counts a job as running until the guard drops, and marks this thread as running a job of
    /// `core` (for a `shutdown` or `cancel` called from inside it). Taken before the job claims
    /// its task.
    pub(crate) fn enter<'a>(&'a self, core: &'a Core) -> RunningGuard<'a> {
        self.count.fetch_add(1, SeqCst);
        active::enter(core.id);
        RunningGuard { core }
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
}

/// See [`Running::enter`].
pub(crate) struct RunningGuard<'a> {
    core: &'a Core,
}

impl Drop for RunningGuard<'_> {
    fn drop(&mut self) {
        active::leave();
        let running = &self.core.running;
        running.count.fetch_sub(1, SeqCst);
        // Only a shutdown waits; it moves the lifecycle and fences before it reads the count.
        fence(SeqCst);
        if !self.core.lifecycle.is_open() {
            drop(running.lock.lock());
            running.idle.notify_all();
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
