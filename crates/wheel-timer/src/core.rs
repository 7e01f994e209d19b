//! The state a timer's threads share: configuration, clock, lifecycle, the tick thread, the
//! shards, the executor, and the counters of the fire path.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use tickwheel_executor::Executor;
use tickwheel_reaper::{Clock, Due, Reaper, duration_to_ns};

use crate::class::Isolation;
use crate::context::TaskContext;
use crate::lifecycle::Lifecycle;
use crate::loom::atomic::{AtomicU64, Ordering::*, fence};
use crate::loom::{Condvar, Mutex};
use crate::panic::Panics;
use crate::registry::{self, ShardRef};
use crate::route::{Pool, Routes};
use crate::shard::{Fire, Returned, Shard, WAKE_HERE};
use crate::slot::OwnerToken;
use crate::stats::Histogram;

/// Ids of timers, so a thread's cache can tell them apart (a plain `std` atomic: ids are not part
/// of any modelled protocol).
static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

pub(crate) struct Core {
    pub(crate) id: u64,
    pub(crate) clock: Arc<dyn Clock>,
    /// The instant clock time 0 stands for (maps `Task::at` instants).
    pub(crate) origin: Instant,
    pub(crate) tick_ns: u64,
    pub(crate) wheel_size: usize,
    /// Adds due sooner than this are stamped at once (a clock read and the shard lock); later
    /// ones in batches. 64 ticks: batching then adds at most 1/64 of the delay.
    pub(crate) short_ns: u64,
    /// Stamp every add at once: the clock only moves by hand, so a reading is exact and free.
    pub(crate) exact: bool,
    pub(crate) max_pending: Option<u64>,
    /// Read by every add: kept on a line nothing else shares.
    pub(crate) lifecycle: CachePadded<Lifecycle>,
    pub(crate) reaper: Reaper<Shard>,
    /// Ids of this timer's shards (see `registry.rs`).
    shards: Mutex<Vec<u32>>,
    /// Of those, the ones whose thread left, waiting for a new thread.
    spare: Mutex<Vec<u32>>,
    pub(crate) executor: Arc<dyn Executor>,
    pub(crate) panics: Panics,
    pub(crate) fired: CachePadded<AtomicU64>,
    pub(crate) skipped: CachePadded<AtomicU64>,
    pub(crate) returned: AtomicU64,
    /// Repeating tasks and intervals whose period was below the tick (run at the tick).
    pub(crate) rounded: AtomicU64,
    /// Lateness of runs, from the instant the user meant.
    pub(crate) lateness: Histogram,
    /// Lateness of the tick thread's hand-offs, from the deadline.
    pub(crate) handoff: Histogram,
    pub(crate) running: Running,
    /// Periodic tasks handed back by their jobs while shutdown runs; `None` once it collected.
    pub(crate) late: Mutex<Option<Vec<Returned>>>,
    /// Given the tasks that never ran when the `Timer` is dropped.
    pub(crate) on_drop: Mutex<Option<DropHook>>,
    /// Classes, their isolation, per-task executors, the slow pool.
    pub(crate) routes: Routes,
}

/// See [`TimerBuilder::on_drop`](crate::TimerBuilder::on_drop).
pub(crate) type DropHook = Box<dyn FnOnce(Vec<crate::Task>) + Send>;

/// What `TimerBuilder::build` settled.
pub(crate) struct Config {
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) origin: Instant,
    pub(crate) tick: Duration,
    pub(crate) wheel_size: usize,
    pub(crate) max_pending: Option<usize>,
    pub(crate) executor: Arc<dyn Executor>,
    pub(crate) panics: Panics,
    pub(crate) on_drop: Option<DropHook>,
    pub(crate) isolation: Option<Isolation>,
    /// Thread names' prefix (for the slow pool).
    pub(crate) name: String,
}

impl Core {
    pub(crate) fn new(config: Config) -> Arc<Core> {
        let tick_ns = duration_to_ns(config.tick).max(1);
        let routes = Routes::new(config.isolation, &config.name, config.executor.threads());
        Arc::new(Core {
            id: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            exact: !config.clock.follows_real_time(),
            reaper: Reaper::new(config.clock.clone(), tick_ns),
            clock: config.clock,
            origin: config.origin,
            tick_ns,
            wheel_size: config.wheel_size,
            short_ns: tick_ns.saturating_mul(64),
            max_pending: config.max_pending.map(|m| m as u64),
            lifecycle: CachePadded::new(Lifecycle::new()),
            shards: Mutex::new(Vec::new()),
            spare: Mutex::new(Vec::new()),
            executor: config.executor,
            panics: config.panics,
            fired: CachePadded::new(AtomicU64::new(0)),
            skipped: CachePadded::new(AtomicU64::new(0)),
            returned: AtomicU64::new(0),
            rounded: AtomicU64::new(0),
            lateness: Histogram::new(),
            handoff: Histogram::new(),
            running: Running::new(),
            late: Mutex::new(Some(Vec::new())),
            on_drop: Mutex::new(config.on_drop),
            routes,
        })
    }

    /// The instant of clock time `ns` (about 30 years ahead for times `Instant` cannot hold).
    pub(crate) fn instant_of(&self, ns: u64) -> Instant {
        self.origin
            .checked_add(Duration::from_nanos(ns))
            .unwrap_or_else(|| self.origin + Duration::from_secs(30 * 365 * 86_400))
    }

    /// Clock nanoseconds of `at` (0 for instants before the origin, saturating far ahead).
    pub(crate) fn ns_of(&self, at: Instant) -> u64 {
        duration_to_ns(at.saturating_duration_since(self.origin))
    }

    /// Every shard of this timer (a snapshot: a thread's first add may register another).
    pub(crate) fn shards(&self) -> Vec<ShardRef> {
        self.shards
            .lock()
            .iter()
            .map(|&id| registry::shard(id))
            .collect()
    }

    /// A shard for this thread (one whose thread left, a spare one of a timer that is gone, or a
    /// new one), and this thread's ownership of it.
    pub(crate) fn attach_shard(self: &Arc<Self>) -> (ShardRef, OwnerToken) {
        let own = self.spare.lock().pop();
        let id = match own {
            Some(id) => id,
            None => {
                let (id, shard) = registry::take(|id| {
                    Shard::new(id, Arc::downgrade(self), self.tick_ns, self.wheel_size)
                });
                shard.adopt(Arc::downgrade(self), self.tick_ns, self.wheel_size);
                self.shards.lock().push(id);
                self.reaper.register(shard);
                id
            }
        };
        let shard = registry::shard(id);
        let token = shard.attach().expect("a spare or new shard has no owner");
        (shard, token)
    }

    /// Keeps a shard whose thread left (its tasks stay where they are) for the next new thread.
    pub(crate) fn spare_shard(&self, shard: &Shard) {
        self.spare.lock().push(shard.id);
    }

    /// Tasks waiting for their deadline, summed over the shards (see `Timer::pending`).
    pub(crate) fn pending(&self) -> u64 {
        self.shards().iter().map(|s| s.pending()).sum()
    }

    /// Hands a due task's job to the executor. An executor that panics loses nothing: the task
    /// stays due and `shutdown` hands it back.
    pub(crate) fn dispatch(self: &Arc<Self>, due: Due<Fire>) {
        let fire = due.item;
        if fire.route == WAKE_HERE {
            // Waking a future is a few atomic operations: done here, without a hop through the
            // pool.
            return crate::job::run(self, fire, Pool::Main);
        }
        // The task's class and executor (see `route.rs`), as read when it was found due.
        let (executor, pool) = self
            .routes
            .pick(fire.route, || self.clock.now(), &self.executor);
        self.send(fire, executor, pool);
    }

    /// Hands the job of `fire` to `executor` (which is `pool`).
    pub(crate) fn send(self: &Arc<Self>, fire: Fire, executor: &Arc<dyn Executor>, pool: Pool) {
        let _span = crate::trace::handoff(fire.shard, fire.slot, pool);
        self.send_job(executor, 1, move |queued| {
            crate::job::run(queued.core(), fire, pool)
        });
    }

    /// Hands `job`, which runs or hands on `tasks` tasks, to `executor`. They count in the
    /// backlog (`max_pending`, `wait_idle`) until the job is dropped, whether it ran or the
    /// executor discarded it, or until the job gives them back one by one as it hands them on
    /// ([`Queued::hand_on_one`]). An executor that panics loses nothing: the tasks the job would
    /// have run stay due, and `shutdown` hands them back.
    pub(crate) fn send_job(
        self: &Arc<Self>,
        executor: &Arc<dyn Executor>,
        tasks: u64,
        job: impl FnOnce(&mut Queued) + Send + 'static,
    ) {
        let mut queued = Queued::new(self, tasks);
        let _ = crate::panic::catch(|| executor.execute(Box::new(move || job(&mut queued))));
    }

    /// The context of a run due at clock time `scheduled`, started `late` ns after it.
    pub(crate) fn context<'a>(
        self: &'a Arc<Self>,
        scheduled: u64,
        late: u64,
        run: u64,
        key: Option<&'a String>,
    ) -> TaskContext<'a> {
        let scheduled = self.instant_of(scheduled);
        TaskContext::new(Some(self), scheduled, Duration::from_nanos(late), run, key)
    }

    /// Records the start of a run `late` nanoseconds after the instant the user meant.
    pub(crate) fn count_run(&self, late: u64) {
        self.fired.fetch_add(1, Relaxed);
        self.lateness.record(late);
    }
}

impl Drop for Core {
    fn drop(&mut self) {
        // The tick thread is stopped (joined, unless this runs on it: it then touches no shard
        // again), so the shards no thread owns can go to the next timer. The others go when
        // their thread lets go of them (it sees this timer gone).
        self.reaper.close();
        for id in self.spare.lock().drain(..) {
            registry::retire(id);
        }
    }
}

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
pub(crate) struct Queued(Arc<Core>, u64);

impl Queued {
    fn new(core: &Arc<Core>, tasks: u64) -> Self {
        core.running.queued.fetch_add(tasks, SeqCst);
        Queued(core.clone(), tasks)
    }

    pub(crate) fn core(&self) -> &Arc<Core> {
        &self.0
    }

    /// A chunk's job handed one of its tasks on (its own job counts it now): one fewer here, so
    /// the backlog counts each task once, not twice, while the chunk is handed on.
    pub(crate) fn hand_on_one(&mut self) {
        debug_assert!(self.1 > 0, "a chunk hands on no more tasks than it counts");
        if self.1 > 0 {
            self.1 -= 1;
            self.0.running.queued.fetch_sub(1, SeqCst);
        }
    }
}

impl Drop for Queued {
    fn drop(&mut self) {
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
    fn new() -> Self {
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
