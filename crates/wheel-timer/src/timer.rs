//! `Timer`, its builder and its handles: the path from `add_or_submit` to a task running.
//!
//! ## Ground rules
//!
//! Every task has a `Control` shared with its handle. Its `state` moves only along these edges:
//!
//! | from      | to        | who, holding what                                   |
//! |-----------|-----------|-----------------------------------------------------|
//! | (new)     | PENDING   | `add_or_submit`, wheel lock                         |
//! | PENDING   | RUNNING   | the job, as it starts (CAS; no lock)                |
//! | PENDING   | CANCELLED | `cancel`, wheel lock (CAS)                          |
//! | PENDING   | RETURNED  | `shutdown`, claiming it from the wheel or from transit (CAS) |
//! | RUNNING   | DONE      | the job of a one-shot task, after it ran; of a periodic task whose next run would pass `u64::MAX`, or that finds shutdown already returned |
//! | RUNNING   | PENDING   | the job of a periodic task, re-arming it, wheel lock (CAS) |
//! | RUNNING   | RETURNED  | the job of a periodic task during shutdown, flight lock (CAS) |
//! | RUNNING   | CANCELLED | `cancel` of a running periodic task, wheel lock (CAS): no further runs |
//!
//! PENDING covers "in the wheel" and "in transit": handed to the executor, job not started. A
//! task in transit sits in `Flight::transit` from before its job is submitted until the job (or
//! `shutdown`) takes it out, so shutdown reaches every task that has not started, whatever the
//! executor does with the job. A cancel that wins the CAS while the task is in transit stops it
//! all the same, because the job must win PENDING -> RUNNING before it runs anything. So a task
//! runs at most once per arming and never after `cancel` returned true, and each task ends in
//! exactly one of DONE, CANCELLED, RETURNED.
//!
//! `id` (the task's current `TimerId`) changes only under the wheel lock. `Flight::running` counts
//! jobs that took their task and have not finished; `shutdown` waits for it, less its own thread's.

use reaper::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering::*};
use std::fmt;
use std::sync::{Arc, Weak};
use std::thread::available_parallelism;
use std::time::{Duration, Instant};

use executor::{Executor, PanicHandler, RayonExecutor, isolate};
use reaper::sync::{Condvar, Mutex};
use reaper::{Clock, ManualClock, RealClock, Reaper, duration_to_ns};
use timing_wheel::{TimerId, TimingWheel};

use crate::error::{AddError, BuildError};
use crate::stats::{Counters, Histogram, Stats};
use crate::task::{MisfirePolicy, Task, When, Work};

/// The smallest tick a timer accepts. Sleeping threads wake with roughly this precision.
pub const MIN_TICK: Duration = Duration::from_millis(1);

const PENDING: u8 = 0;
const RUNNING: u8 = 1;
const DONE: u8 = 2;
const CANCELLED: u8 = 3;
const RETURNED: u8 = 4;

struct Control {
    state: AtomicU8,
    id: AtomicU64,
    periodic: bool,
}

impl Control {
    fn cas(&self, from: u8, to: u8) -> bool {
        self.state
            .compare_exchange(from, to, AcqRel, Acquire)
            .is_ok()
    }
}

/// What the wheel holds: the task with its deadline resolved (clock nanoseconds).
struct Entry {
    task: Task,
    deadline: u64,
    ctl: Arc<Control>,
}

/// Tasks between the wheel and a running job, so that `shutdown` can always reach them.
///
/// A due entry is put in `transit` *before* its job is handed to the executor (under the wheel
/// lock for an add, before any job of the batch runs for the tick thread). A job starts by taking
/// its entry out; `shutdown` takes out every entry still there. Whoever takes an entry owns it, so
/// a queued job whose entry was claimed does nothing, and a job the executor drops loses nothing.
struct Flight {
    transit: Vec<Option<Entry>>,
    free: Vec<usize>,
    /// Jobs that took their entry and have not finished.
    running: usize,
    /// Periodic tasks handed back by jobs while shutdown runs; `None` once shutdown collected.
    returned: Option<Vec<Task>>,
}

impl Flight {
    fn reserve(&mut self, entry: Entry) -> usize {
        match self.free.pop() {
            Some(key) => {
                self.transit[key] = Some(entry);
                key
            }
            None => {
                self.transit.push(Some(entry));
                self.transit.len() - 1
            }
        }
    }
}

// loom's `thread_local!` has no `const { .. }` form, and this must build under both.
#[allow(clippy::missing_const_for_thread_local)]
mod active {
    use std::cell::RefCell;

    reaper::sync::thread_local! {
        /// The timers whose jobs this thread is running, innermost last (addresses of `Inner`s). A
        /// `shutdown` from inside a job does not wait for the jobs of its own thread.
        pub(super) static ACTIVE: RefCell<Vec<usize>> = RefCell::new(Vec::new());
    }
}
use active::ACTIVE;

struct Inner {
    reaper: Reaper<Entry>,
    executor: Arc<dyn Executor>,
    clock: Arc<dyn Clock>,
    /// The instant clock time 0 stands for (maps `Task::at` deadlines).
    origin: Instant,
    max_pending: usize,
    shutting_down: AtomicBool,
    counters: Counters,
    lateness: Histogram,
    /// The tick thread's lateness at hand-off to the executor.
    handoff: Histogram,
    last_panic: Mutex<Option<String>>,
    on_panic: Option<PanicHandler>,
    /// Tick in clock nanoseconds: the rounding slack a misfire check allows.
    tick_ns: u64,
    /// Tasks handed to the executor, and the jobs running them. See `Flight`.
    flight: Mutex<Flight>,
    /// Signalled when a job ends, for `shutdown`.
    idle: Condvar,
}

/// A timer service on a hierarchical timing wheel.
///
/// Add tasks from any thread with [`add_or_submit`](Self::add_or_submit); a tick thread sleeps
/// until the earliest bucket is due and hands due tasks to a rayon pool (or your
/// [`Executor`]), so the tick thread never runs your code. `Timer` is `Send + Sync`; share it
/// with an `Arc` or by reference.
///
/// ```
/// use std::time::Duration;
/// use wheel_timer::{Task, Timer};
///
/// let timer = Timer::new()?;
/// let handle = timer.add_or_submit(Task::after(Duration::from_secs(900), || println!("too late")))?;
/// assert!(handle.cancel());
/// assert!(timer.shutdown().is_empty());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// Dropping the timer shuts it down (the tasks that never ran are dropped).
pub struct Timer {
    inner: Arc<Inner>,
}

/// Configures a [`Timer`]. Every value is validated by [`build`](Self::build).
#[must_use = "a builder does nothing until build() is called"]
pub struct TimerBuilder {
    tick: Duration,
    wheel_size: usize,
    threads: Option<usize>,
    max_pending: Option<usize>,
    name: String,
    clock: Option<ManualClock>,
    executor: Option<Arc<dyn Executor>>,
    on_panic: Option<PanicHandler>,
}

impl fmt::Debug for TimerBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TimerBuilder")
            .field("tick", &self.tick)
            .field("wheel_size", &self.wheel_size)
            .field("threads", &self.threads)
            .field("max_pending", &self.max_pending)
            .field("name", &self.name)
            .field("manual_clock", &self.clock.is_some())
            .field("custom_executor", &self.executor.is_some())
            .finish()
    }
}

impl TimerBuilder {
    /// Width of a level-0 bucket: the timer's precision. Default 1 ms; at least [`MIN_TICK`].
    pub fn tick(mut self, tick: Duration) -> Self {
        self.tick = tick;
        self
    }

    /// Buckets per level: a power of two from 2 to 65536. Default 64.
    pub fn wheel_size(mut self, size: usize) -> Self {
        self.wheel_size = size;
        self
    }

    /// Threads of the rayon pool that runs tasks. Default: the available parallelism. Ignored
    /// with [`executor`](Self::executor).
    pub fn threads(mut self, threads: usize) -> Self {
        self.threads = Some(threads);
        self
    }

    /// Refuse adds while this many tasks wait in the wheel ([`AddError::Full`]). Default: no
    /// limit. Re-arming a periodic task is never refused. Tasks already due and queued in a busy
    /// executor are not counted: this bounds what waits for a deadline, not the pool's backlog.
    pub fn max_pending(mut self, max: usize) -> Self {
        self.max_pending = Some(max);
        self
    }

    /// Prefix of the thread names (`{name}-tick`, `{name}-exec-{i}`). Default `"wheel-timer"`.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Drive the timer from a [`ManualClock`] instead of the real one: the same tick thread and
    /// wheel, with time moved by the test. `Task::at` instants are read against the instant the
    /// timer was built, which is manual time zero.
    pub fn clock(mut self, clock: ManualClock) -> Self {
        self.clock = Some(clock);
        self
    }

    /// Run tasks on `executor` instead of a rayon pool (`threads` is then ignored).
    pub fn executor(mut self, executor: Arc<dyn Executor>) -> Self {
        self.executor = Some(executor);
        self
    }

    /// Called with the message of every task that panics (after it is counted).
    pub fn on_panic(mut self, f: impl Fn(&str) + Send + Sync + 'static) -> Self {
        self.on_panic = Some(Arc::new(f));
        self
    }

    /// Builds the timer and starts its threads.
    pub fn build(self) -> Result<Timer, BuildError> {
        if self.tick < MIN_TICK {
            return Err(BuildError::TickTooSmall {
                tick: self.tick,
                min: MIN_TICK,
            });
        }
        let tick_ns = duration_to_ns(self.tick);
        let wheel = TimingWheel::new(tick_ns, self.wheel_size, 0).map_err(BuildError::WheelSize)?;
        if self.max_pending == Some(0) {
            return Err(BuildError::ZeroMaxPending);
        }
        let executor: Arc<dyn Executor> = match self.executor {
            Some(e) => e,
            None => {
                let threads = self
                    .threads
                    .unwrap_or_else(|| available_parallelism().map_or(2, |n| n.get()));
                if threads == 0 {
                    return Err(BuildError::ZeroThreads);
                }
                Arc::new(
                    RayonExecutor::new(threads, &self.name)
                        .map_err(|e| BuildError::Spawn(std::io::Error::other(e)))?,
                )
            }
        };
        let (clock, origin): (Arc<dyn Clock>, Instant) = match self.clock {
            Some(manual) => {
                // Manual time t stands for the instant `origin + t`, and the clock may have been
                // moved before the timer was built.
                let now = Instant::now();
                let origin = now.checked_sub(manual.elapsed()).unwrap_or(now);
                (Arc::new(manual), origin)
            }
            None => {
                let real = RealClock::new();
                (Arc::new(real), real.origin())
            }
        };
        let inner = Arc::new(Inner {
            reaper: Reaper::new(wheel, clock.clone()),
            executor,
            clock,
            origin,
            max_pending: self.max_pending.unwrap_or(usize::MAX),
            shutting_down: AtomicBool::new(false),
            counters: Counters::default(),
            lateness: Histogram::new(),
            handoff: Histogram::new(),
            last_panic: Mutex::new(None),
            on_panic: self.on_panic,
            tick_ns,
            flight: Mutex::new(Flight {
                transit: Vec::new(),
                free: Vec::new(),
                running: 0,
                returned: Some(Vec::new()),
            }),
            idle: Condvar::new(),
        });
        let weak = Arc::downgrade(&inner);
        inner
            .reaper
            .spawn(&self.name, move |batch: &mut Vec<Entry>| {
                let Some(inner) = weak.upgrade() else {
                    batch.clear();
                    return;
                };
                // Every entry of the batch is reachable by `shutdown` before any job runs: a job
                // may be inline and may shut the timer down.
                let now = inner.clock.now();
                let keys: Vec<usize> = {
                    let mut flight = inner.flight.lock();
                    batch
                        .drain(..)
                        .map(|e| {
                            inner.handoff.record(now.saturating_sub(e.deadline));
                            flight.reserve(e)
                        })
                        .collect()
                };
                for key in keys {
                    // A user executor that panics must not take the tick thread down; the
                    // entry stays in transit, so shutdown still returns the task.
                    let _ = isolate(|| inner.dispatch(key));
                }
            })
            .map_err(BuildError::Spawn)?;
        Ok(Timer { inner })
    }
}

impl Timer {
    /// A timer with the defaults: tick 1 ms, 64 buckets per level, a rayon pool as wide as the
    /// machine, no `max_pending`.
    pub fn new() -> Result<Timer, BuildError> {
        Timer::builder().build()
    }

    /// A builder with the defaults of [`new`](Self::new).
    pub fn builder() -> TimerBuilder {
        TimerBuilder {
            tick: Duration::from_millis(1),
            wheel_size: 64,
            threads: None,
            max_pending: None,
            name: "wheel-timer".to_owned(),
            clock: None,
            executor: None,
            on_panic: None,
        }
    }

    /// Adds `task`; a task whose deadline has already come goes straight to the executor, never
    /// queued behind a tick. Returns a handle to cancel or reschedule it.
    ///
    /// Refused, with the task handed back, when `max_pending` tasks are waiting
    /// ([`AddError::Full`]), after [`shutdown`](Self::shutdown) ([`AddError::Shutdown`]), or for a
    /// periodic task with a zero period ([`AddError::ZeroPeriod`]).
    ///
    /// ```
    /// use std::time::Duration;
    /// use wheel_timer::{AddError, Task, Timer};
    ///
    /// let timer = Timer::builder().max_pending(1).build()?;
    /// let _first = timer.add_or_submit(Task::after(Duration::from_secs(60), || {}))?;
    /// match timer.add_or_submit(Task::after(Duration::from_secs(60), || println!("later"))) {
    ///     Err(AddError::Full(task)) => drop(task), // handed back: retry, run or drop it
    ///     other => panic!("expected Full, got {other:?}"),
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn add_or_submit(&self, task: Task) -> Result<TimerHandle, AddError> {
        if let Work::Every { period, .. } = &task.work
            && period.is_zero()
        {
            return Err(AddError::ZeroPeriod(task));
        }
        let inner = &self.inner;
        let ctl = Arc::new(Control {
            state: AtomicU8::new(PENDING),
            id: AtomicU64::new(u64::MAX),
            periodic: task.is_periodic(),
        });
        // Everything that needs no lock happens before it: the lock is the one point all
        // adding threads share, so its critical section is kept to the wheel operation itself.
        let now = inner.clock.now();
        let deadline = match task.when {
            When::After(d) => now.saturating_add(duration_to_ns(d)),
            When::At(at) => duration_to_ns(at.saturating_duration_since(inner.origin)),
        };
        let entry = Entry {
            task,
            deadline,
            ctl: ctl.clone(),
        };
        let mut wheel = inner.reaper.lock();
        if wheel.is_closed() || inner.shutting_down.load(Acquire) {
            return Err(AddError::Shutdown(entry.task));
        }
        if deadline > now {
            if wheel.wheel().len() >= inner.max_pending {
                drop(wheel);
                inner.counters.rejected.fetch_add(1, Relaxed);
                return Err(AddError::Full(entry.task));
            }
            match wheel.insert(deadline, entry) {
                Ok(id) => {
                    ctl.id.store(id.into_raw(), Relaxed);
                    drop(wheel);
                    inner.counters.added.fetch_add(1, Relaxed);
                    return Ok(TimerHandle {
                        inner: Arc::downgrade(inner),
                        ctl,
                    });
                }
                Err(entry) => {
                    // Due by the wheel's own clock: run it now.
                    let key = inner.flight.lock().reserve(entry);
                    drop(wheel);
                    inner.counters.added.fetch_add(1, Relaxed);
                    inner.dispatch(key);
                    return Ok(TimerHandle {
                        inner: Arc::downgrade(inner),
                        ctl,
                    });
                }
            }
        }
        // Due already. Lateness counts from now, not from an instant long past. In transit
        // before the wheel lock is released, so a shutdown cannot miss it.
        let entry = Entry {
            deadline: now,
            ..entry
        };
        let key = inner.flight.lock().reserve(entry);
        drop(wheel);
        inner.counters.added.fetch_add(1, Relaxed);
        inner.dispatch(key);
        Ok(TimerHandle {
            inner: Arc::downgrade(inner),
            ctl,
        })
    }

    /// Number of tasks waiting in the wheel.
    pub fn pending(&self) -> usize {
        self.inner.reaper.lock().wheel().len()
    }

    /// A snapshot of the counters and the lateness histogram.
    ///
    /// ```
    /// use std::time::Duration;
    /// use wheel_timer::{Task, Timer};
    ///
    /// let timer = Timer::new()?;
    /// let h = timer.add_or_submit(Task::after(Duration::from_secs(5), || {}))?;
    /// h.cancel();
    /// let stats = timer.stats();
    /// assert_eq!((stats.added, stats.cancelled, stats.pending), (1, 1, 0));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn stats(&self) -> Stats {
        let c = &self.inner.counters;
        let (p50, p99, max) = self.inner.lateness.summary();
        let (_, handoff_p99, handoff_max) = self.inner.handoff.summary();
        let (pending, wakeups) = {
            let st = self.inner.reaper.lock();
            (st.wheel().len(), st.wakeups())
        };
        Stats {
            pending,
            added: c.added.load(Relaxed),
            fired: c.fired.load(Relaxed),
            cancelled: c.cancelled.load(Relaxed),
            rejected: c.rejected.load(Relaxed),
            panicked: c.panicked.load(Relaxed),
            returned: c.returned.load(Relaxed),
            skipped: c.skipped.load(Relaxed),
            lateness_p50: Duration::from_nanos(p50),
            lateness_p99: Duration::from_nanos(p99),
            lateness_max: Duration::from_nanos(max),
            handoff_p99: Duration::from_nanos(handoff_p99),
            handoff_max: Duration::from_nanos(handoff_max),
            tick_wakeups: wakeups,
            last_panic: self.inner.last_panic.lock().clone(),
        }
    }

    /// Stops the timer: waits for tasks already running, and returns every task that never ran
    /// (waiting in the wheel, or handed to the executor but not started), earliest first.
    /// Afterwards every add is refused with [`AddError::Shutdown`]. Idempotent: later calls
    /// return nothing. Called from inside one of this timer's tasks, it does not wait for that
    /// task (and so does not deadlock).
    ///
    /// ```
    /// use std::time::Duration;
    /// use wheel_timer::{Task, Timer};
    ///
    /// let timer = Timer::new()?;
    /// let _h = timer.add_or_submit(Task::after(Duration::from_secs(3600), || println!("ran late")))?;
    /// let never_ran = timer.shutdown();
    /// assert_eq!(never_ran.len(), 1);
    /// for task in never_ran {
    ///     task.run(); // or persist it, or drop it
    /// }
    /// assert!(timer.add_or_submit(Task::after(Duration::ZERO, || {})).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn shutdown(&self) -> Vec<Task> {
        self.inner.shutdown()
    }

    /// The timer's clock reading: time since the timer was built on the real clock, or the
    /// manual clock's own elapsed time.
    pub fn elapsed(&self) -> Duration {
        Duration::from_nanos(self.inner.clock.now())
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        self.inner.shutdown();
    }
}

impl fmt::Debug for Timer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Timer")
            .field("pending", &self.pending())
            .finish_non_exhaustive()
    }
}

impl Inner {
    /// Hands the job of transit entry `key` to the executor.
    fn dispatch(self: &Arc<Self>, key: usize) {
        let inner = self.clone();
        self.executor.execute(Box::new(move || inner.run_job(key)));
    }

    fn run_job(self: Arc<Self>, key: usize) {
        let entry = {
            let mut flight = self.flight.lock();
            let Some(entry) = flight.transit.get_mut(key).and_then(Option::take) else {
                return; // claimed by shutdown: the task went back to the caller
            };
            flight.free.push(key);
            flight.running += 1;
            entry
        };
        // Declared first, dropped last: everything below, including dropping the user's closure
        // (which may own the last `Arc<Timer>`), happens while this job counts as running here.
        let _active = Active::enter(&self);
        let Entry {
            task,
            deadline,
            ctl,
        } = entry;
        if !ctl.cas(PENDING, RUNNING) {
            return; // cancelled while in transit: dropped, never run
        }
        let late = self.clock.now().saturating_sub(deadline);
        let Task { work, when } = task;
        match work {
            Work::Once(f) => {
                self.run_user(f, late);
                ctl.state.store(DONE, Release);
            }
            Work::Every {
                mut f,
                period,
                policy,
            } => {
                let period_ns = duration_to_ns(period);
                let (mut scheduled, mut late) = (deadline, late);
                // Catch-up runs go back to back here rather than through the executor again, so
                // a jump of the clock over many periods cannot recurse (an inline executor would).
                let next = loop {
                    // Rounding to the tick makes every run up to a tick late: not a misfire.
                    if policy == MisfirePolicy::Skip
                        && late >= period_ns.saturating_add(self.tick_ns)
                    {
                        self.counters.skipped.fetch_add(1, Relaxed);
                    } else {
                        self.run_user(&mut f, late);
                    }
                    let now = self.clock.now();
                    match next_run(scheduled, period_ns, now, policy) {
                        Some(next)
                            if next <= now
                                && ctl.state.load(Acquire) == RUNNING
                                && !self.shutting_down.load(Acquire) =>
                        {
                            scheduled = next;
                            late = now - next;
                        }
                        next => break next,
                    }
                };
                let task = Task {
                    work: Work::Every { f, period, policy },
                    when,
                };
                match next {
                    Some(next) => self.rearm(task, next, ctl),
                    None => {
                        // The next run would fall past the end of time: the task is finished.
                        ctl.cas(RUNNING, DONE);
                    }
                }
            }
        }
    }

    fn run_user(&self, f: impl FnOnce(), late: u64) {
        self.counters.fired.fetch_add(1, Relaxed);
        self.lateness.record(late);
        if let Err(message) = isolate(f) {
            self.counters.panicked.fetch_add(1, Relaxed);
            if let Some(hook) = &self.on_panic {
                let _ = isolate(|| hook(&message));
            }
            *self.last_panic.lock() = Some(message);
        }
    }

    /// Puts a periodic task back for its next run, unless it was cancelled or the timer is
    /// shutting down (then it goes back to the caller of `shutdown`, or, if that call already
    /// returned, it ends here as done).
    fn rearm(self: &Arc<Self>, task: Task, next: u64, ctl: Arc<Control>) {
        let mut wheel = self.reaper.lock();
        if self.shutting_down.load(Acquire) || wheel.is_closed() {
            drop(wheel);
            let mut flight = self.flight.lock();
            let leftover = match flight.returned.as_mut() {
                Some(list) if ctl.cas(RUNNING, RETURNED) => {
                    list.push(task);
                    None
                }
                Some(_) => Some(task), // cancelled while running
                None => {
                    ctl.cas(RUNNING, DONE);
                    Some(task)
                }
            };
            drop(flight);
            drop(leftover); // the user's closure is dropped outside every lock
            return;
        }
        if !ctl.cas(RUNNING, PENDING) {
            drop(wheel);
            return; // cancelled while running: no further runs (dropped after the lock)
        }
        let entry = Entry {
            task,
            deadline: next,
            ctl: ctl.clone(),
        };
        match wheel.insert(next, entry) {
            Ok(id) => ctl.id.store(id.into_raw(), Relaxed),
            Err(entry) => {
                // Due by the wheel's clock already (the clock jumped during the run).
                let key = self.flight.lock().reserve(entry);
                drop(wheel);
                self.dispatch(key);
            }
        }
    }

    fn shutdown(self: &Arc<Self>) -> Vec<Task> {
        if self.shutting_down.swap(true, AcqRel) {
            return Vec::new();
        }
        // Stops the tick thread (joined unless this is it: its current batch is in transit by
        // then) and drains the wheel. No add can enter transit after this: adds check the flag
        // under the wheel lock, which `close` took.
        let mut from_wheel: Vec<Task> = Vec::new();
        let mut dropped: Vec<Task> = Vec::new();
        for entry in self.reaper.close() {
            if entry.ctl.cas(PENDING, RETURNED) {
                from_wheel.push(entry.task)
            } else {
                dropped.push(entry.task)
            }
        }
        // Claim every task handed to the executor whose job has not started (all due before
        // anything left in the wheel, so they come first), then wait for the running jobs, except
        // this thread's own (a task calling shutdown).
        let me = Arc::as_ptr(self) as usize;
        let own = ACTIVE
            .try_with(|a| a.borrow().iter().filter(|&&p| p == me).count())
            .unwrap_or(0);
        let mut flight = self.flight.lock();
        // Claimed keys are not freed: nothing enters transit after shutdown, and the queued jobs
        // of claimed keys find them empty.
        let claimed: Vec<Entry> = flight.transit.iter_mut().filter_map(Option::take).collect();
        let mut tasks: Vec<Task> = Vec::new();
        for entry in claimed {
            if entry.ctl.cas(PENDING, RETURNED) {
                tasks.push(entry.task)
            } else {
                dropped.push(entry.task)
            }
        }
        tasks.append(&mut from_wheel);
        while flight.running > own {
            self.idle.wait(&mut flight);
        }
        tasks.extend(flight.returned.take().unwrap_or_default());
        drop(flight);
        drop(dropped); // cancelled tasks' closures, outside every lock
        self.counters
            .returned
            .fetch_add(tasks.len() as u64, Relaxed);
        tasks
    }
}

/// Marks this thread as running a job of one timer, and counts the job as running, until dropped.
struct Active<'a>(&'a Inner);

impl<'a> Active<'a> {
    fn enter(inner: &'a Inner) -> Self {
        let _ = ACTIVE.try_with(|a| a.borrow_mut().push(inner as *const Inner as usize));
        Active(inner)
    }
}

impl Drop for Active<'_> {
    fn drop(&mut self) {
        let _ = ACTIVE.try_with(|a| a.borrow_mut().pop());
        let mut flight = self.0.flight.lock();
        flight.running -= 1;
        drop(flight);
        self.0.idle.notify_all();
    }
}

/// The next run of a fixed-rate task whose run for `scheduled` just ended at `now`, or `None` if
/// it would fall past the end of time (`u64::MAX` nanoseconds).
fn next_run(scheduled: u64, period: u64, now: u64, policy: MisfirePolicy) -> Option<u64> {
    let next = scheduled.checked_add(period)?;
    if next > now || policy == MisfirePolicy::CatchUp {
        return Some(next);
    }
    // Fell behind by a period or more: the next grid point after now.
    let behind = (now - scheduled) / period + 1;
    scheduled.checked_add(behind.checked_mul(period)?)
}

/// A handle to one added task: cancel it, reschedule it, ask how it ended.
///
/// Dropping the handle does nothing to the task (fire-and-forget adds may drop it). A handle outliving its timer answers `false`
/// to everything that would change the task.
pub struct TimerHandle {
    inner: Weak<Inner>,
    ctl: Arc<Control>,
}

impl TimerHandle {
    /// Stops the task: `true` iff this call stopped it from running (again). A one-shot task
    /// that already started, ran or was cancelled gives `false`; a periodic task gives `true`
    /// once, and runs no more (a run in progress finishes). A task waiting in the wheel is
    /// dropped at once, not when its bucket comes round; one already on its way to the executor
    /// is dropped when its job comes up in the pool (it never runs).
    ///
    /// ```
    /// use std::time::Duration;
    /// use wheel_timer::{Task, Timer};
    ///
    /// let timer = Timer::new()?;
    /// let beat = timer.add_or_submit(Task::every(Duration::from_secs(30), || println!("beat")))?;
    /// assert!(beat.cancel());
    /// assert!(!beat.cancel(), "only the first cancel stops it");
    /// assert!(beat.is_cancelled() && beat.is_done());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cancel(&self) -> bool {
        let Some(inner) = self.inner.upgrade() else {
            return false;
        };
        let mut wheel = inner.reaper.lock();
        let stopped = self.ctl.cas(PENDING, CANCELLED)
            || (self.ctl.periodic && self.ctl.cas(RUNNING, CANCELLED));
        if !stopped {
            return false;
        }
        let removed = wheel.cancel(TimerId::from_raw(self.ctl.id.load(Relaxed)));
        drop(wheel);
        drop(removed); // the user's closure is dropped outside the lock
        inner.counters.cancelled.fetch_add(1, Relaxed);
        true
    }

    /// Moves the task's next run to `delay` from now: `true` if it was waiting in the wheel and
    /// now has the new deadline; `false` if it already started, ran, was cancelled, is on its way
    /// to the executor, or the timer is gone. O(1).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use wheel_timer::{InlineExecutor, ManualClock, Task, Timer};
    ///
    /// let clock = ManualClock::new();
    /// let timer = Timer::builder().clock(clock.clone()).executor(Arc::new(InlineExecutor::new())).build()?;
    /// let idle = timer.add_or_submit(Task::after(Duration::from_secs(60), || println!("idle: close")))?;
    /// clock.advance(Duration::from_secs(50));
    /// assert!(idle.reschedule(Duration::from_secs(60))); // traffic: push the deadline out
    /// clock.advance(Duration::from_secs(50));
    /// assert!(!idle.is_done());
    /// clock.advance(Duration::from_secs(10));
    /// assert!(idle.is_done());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reschedule(&self, delay: Duration) -> bool {
        let Some(inner) = self.inner.upgrade() else {
            return false;
        };
        let deadline = inner
            .clock
            .now()
            .saturating_add(duration_to_ns(delay))
            .max(1);
        let mut wheel = inner.reaper.lock();
        if self.ctl.state.load(Acquire) != PENDING || wheel.is_closed() {
            return false;
        }
        let id = TimerId::from_raw(self.ctl.id.load(Relaxed));
        if !wheel.reschedule(id, deadline) {
            return false;
        }
        if let Some(entry) = wheel.get_mut(id) {
            entry.deadline = deadline;
        }
        true
    }

    /// True once a [`cancel`](Self::cancel) succeeded.
    pub fn is_cancelled(&self) -> bool {
        self.ctl.state.load(Acquire) == CANCELLED
    }

    /// True once the task will never run again: a one-shot task ran (or panicked), the task was
    /// cancelled or handed back by shutdown, or a periodic task ended with its timer.
    pub fn is_done(&self) -> bool {
        matches!(self.ctl.state.load(Acquire), DONE | CANCELLED | RETURNED)
    }
}

impl fmt::Debug for TimerHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TimerHandle")
            .field("cancelled", &self.is_cancelled())
            .field("done", &self.is_done())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_run_per_policy() {
        // (scheduled, period, now, policy, next)
        let table = [
            (100, 10, 105, MisfirePolicy::RunOnce, Some(110)),
            (100, 10, 110, MisfirePolicy::RunOnce, Some(120)),
            (100, 10, 135, MisfirePolicy::RunOnce, Some(140)),
            (100, 10, 135, MisfirePolicy::Skip, Some(140)),
            (100, 10, 135, MisfirePolicy::CatchUp, Some(110)),
            (u64::MAX - 5, 10, u64::MAX - 1, MisfirePolicy::RunOnce, None),
            (5, 10, u64::MAX, MisfirePolicy::RunOnce, None),
            (5, 10, u64::MAX, MisfirePolicy::CatchUp, Some(15)),
            (0, u64::MAX, 1, MisfirePolicy::Skip, Some(u64::MAX)),
        ];
        for (s, p, now, policy, want) in table {
            assert_eq!(
                next_run(s, p, now, policy),
                want,
                "next_run({s}, {p}, {now}, {policy:?})"
            );
        }
    }
}
