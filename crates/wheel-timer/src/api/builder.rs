//! `TimerBuilder`: every setting of a timer, validated by `build`.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tickwheel_executor::Executor;
use tickwheel_reaper::{Clock, RealClock, duration_to_ns};

#[cfg(doc)]
use tickwheel_reaper::ManualClock;
use tickwheel_wheel::TimingWheel;

use crate::api::error::BuildError;
use crate::api::timer::DropHook;
use crate::api::timer::Timer;
use crate::service::class::{Isolation, IsolationHook};
use crate::service::core::{Config, Core};
use crate::service::panic::{Hook, Panics};
use crate::service::pool::LazyPool;

/// Configures a [`Timer`]. Every value is validated by [`build`](Self::build).
///
/// ```
/// use std::time::Duration;
/// use tickwheel::{BuildError, ConfigError, Timer};
///
/// let timer = Timer::builder()
///     .tick(Duration::from_millis(5))   // precision: deadlines round up to 5 ms
///     .wheel_size(64)                   // buckets per level, a power of two
///     .threads(2)                       // a pool of its own (else the shared one)
///     .max_pending(100_000)             // beyond this, adds are refused and handed back
///     .name("sessions")                 // thread names: sessions-tick, ...
///     .build()?;
/// assert_eq!(timer.pending(), 0);
///
/// // Every value is checked: a typed error, with the reason in its message.
/// match Timer::builder().wheel_size(100).build() {
///     Err(BuildError::WheelSize(ConfigError::WheelSizeNotPowerOfTwo { size: 100 })) => {}
///     other => panic!("{other:?}"),
/// }
/// # Ok::<(), BuildError>(())
/// ```
#[must_use = "a builder does nothing until build() is called"]
pub struct TimerBuilder {
    tick: Duration,
    wheel_size: usize,
    threads: Option<usize>,
    max_pending: Option<usize>,
    name: String,
    clock: Option<Arc<dyn Clock>>,
    executor: Option<Arc<dyn Executor>>,
    on_panic: Option<Hook>,
    on_drop: Option<DropHook>,
    drop_wait: Duration,
    isolation: Option<Isolation>,
    on_isolation: Option<IsolationHook>,
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
            .field("drop_wait", &self.drop_wait)
            .finish()
    }
}

impl Default for TimerBuilder {
    fn default() -> Self {
        TimerBuilder {
            tick: Duration::from_millis(1),
            wheel_size: 256,
            threads: None,
            max_pending: None,
            name: "tickwheel".to_owned(),
            clock: None,
            executor: None,
            on_panic: None,
            on_drop: None,
            drop_wait: Self::DEFAULT_DROP_WAIT,
            isolation: Some(Isolation::default()),
            on_isolation: None,
        }
    }
}

impl TimerBuilder {
    /// The smallest tick a timer accepts. Sleeping threads wake with roughly this precision.
    pub const MIN_TICK: Duration = Duration::from_millis(1);

    /// How long a dropped timer waits for its running tasks by default (see
    /// [`drop_wait`](Self::drop_wait)).
    pub const DEFAULT_DROP_WAIT: Duration = Duration::from_secs(1);

    /// Width of a level-0 bucket: the timer's precision. Default 1 ms; at least
    /// [`MIN_TICK`](Self::MIN_TICK).
    pub fn tick(mut self, tick: Duration) -> Self {
        self.tick = tick;
        self
    }

    /// Buckets per level: a power of two from 2 to 65536. Default 256: with a 1 ms tick, level 0
    /// spans 256 ms and level 1 65 s, so a timeout under a minute cascades at most once (the
    /// stepped drives of W1 and W3 in `docs/benchmarks.md` ran 7-21% faster than with 64
    /// buckets, W9 about the same).
    pub fn wheel_size(mut self, size: usize) -> Self {
        self.wheel_size = size;
        self
    }

    /// Gives the timer a rayon pool of its own with this many threads. Default: the timer runs
    /// its tasks on a rayon pool shared by every timer of the process that does not ask for its
    /// own, as wide as the available parallelism (threads `tickwheel-shared-exec-{i}`), so a
    /// process may build many timers without a pool each. Ignored with
    /// [`executor`](Self::executor).
    ///
    /// Either pool is started by the first task handed to it, not by `build`: a timer used only
    /// for futures ([`Timer::sleep`] and the others, woken where they are handed out) starts no
    /// executor thread, only its tick thread. `threads(0)` is refused by `build`
    /// ([`BuildError::ZeroThreads`]). A pool whose threads cannot be started then loses no task
    /// and panics on nothing: the tasks run on the threads that hand them out (the tick thread,
    /// or yours for a task already due), as on an [`InlineExecutor`](crate::InlineExecutor), and
    /// the failure is reported once as a panic ([`Stats::panicked`](crate::Stats::panicked),
    /// [`on_panic`](Self::on_panic)). It is not retried for that timer.
    pub fn threads(mut self, threads: usize) -> Self {
        self.threads = Some(threads);
        self
    }

    /// Refuse adds while this many tasks wait for their deadline ([`AddError::Full`]). Default:
    /// no limit. The bound is on the whole timer, not per thread: each adding thread looks at
    /// the total once every 64 adds, so the timer may hold up to 64 more tasks per other adding
    /// thread than this. Re-arming a periodic task is never refused, and neither is a future
    /// ([`Timer::sleep`] and the others), which counts as a task. Tasks handed to the executor
    /// and not finished count too (though not in [`Timer::pending`]): the bound covers
    /// everything the timer holds that has not run, so a stalled pool cannot pile up work. (So
    /// does one cancelled on its way there, until the executor runs or drops its job.) Not
    /// covered: a job the executor drops unrun, or refuses by panicking in `execute` (counted in
    /// `Stats::panicked`). Its tasks stay due in the timer, run by no one, until `shutdown`
    /// hands them back, and no longer count: an executor that keeps failing lets them pile up.
    ///
    /// [`AddError::Full`]: crate::AddError::Full
    pub fn max_pending(mut self, max: usize) -> Self {
        self.max_pending = Some(max);
        self
    }

    /// Prefix of the thread names (`{name}-tick`; `{name}-exec-{i}` for a pool of its own, see
    /// [`threads`](Self::threads); `{name}-slow-exec-{i}` for the slow pool). Default `"tickwheel"`.
    /// A name with a NUL byte is refused by `build` ([`BuildError::InvalidName`]).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Drive the timer from `clock` instead of the real one: usually a [`ManualClock`], the
    /// same tick thread and wheels with time moved by the test. On a clock that does not follow
    /// real time ([`Clock::follows_real_time`]) every deadline is stamped exactly at its add.
    /// Instants ([`Timer::now`], `Task::at`, a returned task's deadline) map to the clock's
    /// readings through [`Clock::instant_of`]`(0)` for a clock that follows real time; for one
    /// that does not, through [`Clock::epoch`]. A [`ManualClock`]'s is fixed when the first
    /// timer is built on it (or on a clone): the instant of that build stands for the clock's
    /// reading then, for that timer and every later one on the clock, so tasks handed back by
    /// one timer's shutdown are due at the same clock time when added to the next. For a clock
    /// without an epoch, each timer's build instant stands for the reading at its build. Take
    /// instants from [`Timer::now`], which moves with the clock.
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Some(Arc::new(clock));
        self
    }

    /// Run tasks on `executor` instead of a rayon pool (`threads` is then ignored).
    pub fn executor(mut self, executor: Arc<dyn Executor>) -> Self {
        self.executor = Some(executor);
        self
    }

    /// Called with the message of every task that panics, or whose closure panics when the timer
    /// drops it (after it is counted). A hook that panics is caught too.
    pub fn on_panic(mut self, f: impl Fn(&str) + Send + Sync + 'static) -> Self {
        self.on_panic = Some(Arc::new(f));
        self
    }

    /// When slow classes of tasks move to a slow pool (see [`Isolation`]; on by default, with its
    /// defaults).
    pub fn isolation(mut self, isolation: Isolation) -> Self {
        self.isolation = Some(isolation);
        self
    }

    /// Turns slow-task isolation off: every task runs on the timer's executor (or its own), and
    /// runs are not timed.
    pub fn no_isolation(mut self) -> Self {
        self.isolation = None;
        self
    }

    /// Called with a class's name when [isolation](Isolation) moves it to the slow pool (`true`)
    /// or back to the timer's pool (`false`): an alert or a metric without the `tracing`
    /// feature. `""` is the default class of unnamed one-shot tasks, and a repeating task that
    /// is a class of its own is named `"(a repeating task's own)"` (give it a
    /// [`class`](crate::Task::class) to tell it apart). [`Stats::classes`](crate::Stats::classes)
    /// has each named class's figures.
    ///
    /// It runs on the thread that made the decision: a pool thread as a slow run ends, the tick
    /// thread as it routes the class's next task, or a thread of yours whose `add_or_submit`,
    /// `reschedule` or `deadline` hands out a task that is already due. So, as an [`Executor`],
    /// it must be quick and must not block (count, log, or send on a channel), and it must not
    /// take a lock your threads hold while they call the timer. Its calls are made one at a time,
    /// outside every lock of the timer, in the order the changes happened; [`Timer::stats`] only
    /// reads (it decides nothing), so the hook may call it. A panic in it is caught.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use std::time::Duration;
    /// use tickwheel::{Isolation, ManualClock, Task, Timer};
    ///
    /// let clock = ManualClock::new();
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let log = seen.clone();
    /// let timer = Timer::builder()
    ///     .clock(clock.clone())
    ///     .threads(1)
    ///     .isolation(Isolation::new().threshold(Duration::from_millis(100)).strikes(1))
    ///     .on_isolation(move |class, isolated| log.lock().unwrap().push((class.to_owned(), isolated)))
    ///     .build()?;
    /// let c = clock.clone();
    /// // A run that takes 2 s on the timer's clock: slow once, and one strike isolates.
    /// timer.add_or_submit(Task::after(Duration::ZERO, move || c.advance(Duration::from_secs(2))).class("report"))?;
    /// timer.wait_idle();
    /// assert_eq!(*seen.lock().unwrap(), [("report".to_owned(), true)]);
    /// let report = &timer.stats().classes[0];
    /// assert_eq!((report.name.as_str(), report.run_time.max), ("report", Duration::from_secs(2)));
    /// assert_eq!((report.isolated, report.isolations), (true, 1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn on_isolation(mut self, f: impl Fn(&str, bool) + Send + Sync + 'static) -> Self {
        self.on_isolation = Some(Arc::new(f));
        self
    }

    /// Called, when the [`Timer`] is dropped, with every task that never ran (earliest first,
    /// as [`Timer::shutdown`] returns them), so a drop loses nothing silently: persist them, run
    /// them, or count them. If `shutdown` ran before the drop, it returned them: the hook then
    /// gets an empty list.
    /// Without it, a drop drops them.
    pub fn on_drop(mut self, f: impl FnOnce(Vec<crate::Task>) + Send + 'static) -> Self {
        self.on_drop = Some(Box::new(f));
        self
    }

    /// The longest a dropped [`Timer`] waits for the tasks running then. Default
    /// [`DEFAULT_DROP_WAIT`](Self::DEFAULT_DROP_WAIT), 1 s: a timer dropped in async code blocks
    /// the runtime's worker for that long at most. A task still running then keeps running on
    /// its pool (a thread cannot be stopped from outside), and its job drops its closure when it
    /// ends; a repeating one ends after its current run. `Duration::MAX` waits without a limit;
    /// `Duration::ZERO` does not wait. (Before the wait, the drop joins the tick thread, which
    /// runs no task, unless a pool that could not start left the tasks to it: see
    /// [`threads`](Self::threads).) The [`on_drop`](Self::on_drop) hook gets the tasks that never
    /// ran either way. To wait without blocking, await [`Timer::shutdown_async`] before the drop.
    pub fn drop_wait(mut self, limit: Duration) -> Self {
        self.drop_wait = limit;
        self
    }

    /// Builds the timer and starts its tick thread (its pool, if it has one of its own or uses
    /// the shared one, starts with the first task that needs it: see [`threads`](Self::threads)).
    pub fn build(self) -> Result<Timer, BuildError> {
        tickwheel_reaper::barrier::init();
        if self.tick < Self::MIN_TICK {
            return Err(BuildError::TickTooSmall {
                tick: self.tick,
                min: Self::MIN_TICK,
            });
        }
        TimingWheel::<()>::new(duration_to_ns(self.tick), self.wheel_size, 0)
            .map_err(BuildError::WheelSize)?;
        if self.max_pending == Some(0) {
            return Err(BuildError::ZeroMaxPending);
        }
        if self.name.contains('\0') {
            return Err(BuildError::InvalidName { name: self.name });
        }
        if self.executor.is_none() && self.threads == Some(0) {
            return Err(BuildError::ZeroThreads);
        }
        let panics = Arc::new(Panics::new(self.on_panic));
        // A pool is started by the first task handed to it (see `service/pool.rs`): a timer that
        // only serves futures starts none.
        let executor: Arc<dyn Executor> = match (self.executor, self.threads) {
            (Some(e), _) => e,
            (None, Some(threads)) => Arc::new(LazyPool::own(threads, &self.name, panics.clone())),
            (None, None) => Arc::new(LazyPool::shared(panics.clone())),
        };
        let (clock, origin): (Arc<dyn Clock>, Instant) = match self.clock {
            Some(clock) => {
                // Clock time t stands for the instant `origin + t`; the clock may have been
                // moved before the timer was built.
                let now = Instant::now();
                let origin = clock
                    .instant_of(0)
                    .or_else(|| clock.epoch())
                    .unwrap_or_else(|| {
                        now.checked_sub(Duration::from_nanos(clock.now()))
                            .unwrap_or(now)
                    });
                (clock, origin)
            }
            None => {
                let real = RealClock::new();
                (Arc::new(real), real.origin())
            }
        };
        let core = Core::new(Config {
            clock,
            origin,
            tick: self.tick,
            wheel_size: self.wheel_size,
            max_pending: self.max_pending,
            executor,
            panics,
            isolation: self.isolation,
            on_isolation: self.on_isolation,
            name: self.name.clone(),
        });
        Timer::start(core, &self.name, self.on_drop, self.drop_wait).map_err(BuildError::Spawn)
    }
}
