//! `Task`: what to run and when: once, at a fixed rate or with a fixed delay, with an optional key
//! that names it for persistence. (What a slot holds for it is `service/work.rs`; the context a
//! run sees, `service/context.rs`.)

use std::fmt;
use std::sync::Arc;
use std::task::Waker;
use std::time::{Duration, Instant, SystemTime};

use sync_wrapper::SyncWrapper;
use tickwheel_reaper::duration_to_ns;

use tickwheel_executor::Executor;

pub(crate) mod body;
pub(crate) mod context;

use crate::service::class::Class;
use crate::service::context::TaskContext;
use crate::service::route::RouteSpec;
use crate::service::work::{Cadence, MisfirePolicy, Repeat, When, Work, key_of};
pub use body::{OnceBody, RepeatBody};

/// A task for [`Timer::add_or_submit`](crate::Timer::add_or_submit): a closure and when to run it.
///
/// `Send + Sync`, so an [`AddError`](crate::AddError) holding one goes through `?` into
/// `Box<dyn Error + Send + Sync>`.
///
/// Names: the constructors say when ([`after`](Self::after), [`at`](Self::at),
/// [`every`](Self::every), [`with_fixed_delay`](Self::with_fixed_delay)); each method that takes
/// the task and returns it sets one thing and is named for it ([`starting_after`](Self::starting_after),
/// [`misfire`](Self::misfire), [`keyed`](Self::keyed), [`class`](Self::class), [`on`](Self::on));
/// the getters take `&self` ([`key`](Self::key), [`class_name`](Self::class_name),
/// [`deadline`](Self::deadline), ...).
///
/// ```
/// use std::time::Duration;
/// use tickwheel::{MisfirePolicy, Task, TaskContext};
///
/// let once = Task::after(Duration::from_secs(900), || println!("cancel the order"))
///     .keyed("order-1234");
/// let beat = Task::every(Duration::from_secs(30), || println!("heartbeat")).misfire(MisfirePolicy::Skip);
/// // A repeating task that stops itself after three runs, first run at once.
/// let three = Task::with_fixed_delay(Duration::from_secs(1), |cx: &mut TaskContext<'_>| {
///     if cx.run_count() == 3 {
///         cx.stop();
///     }
/// })
/// .starting_after(Duration::ZERO);
/// assert!(!once.is_periodic() && beat.is_periodic() && three.is_periodic());
/// assert_eq!(once.key(), Some("order-1234"));
/// ```
#[must_use = "a task does nothing until it is added to a timer"]
pub struct Task {
    pub(crate) when: When,
    pub(crate) work: Work,
    /// Its class and executor, if it names either.
    pub(crate) route: Option<Box<RouteSpec>>,
}

impl Task {
    /// Runs `f` once, `delay` after it is added. A huge delay saturates to the far future.
    pub fn after<A>(delay: Duration, f: impl OnceBody<A>) -> Task {
        Task::once(When::After(duration_to_ns(delay)), f)
    }

    /// Runs `f` once at `deadline`; a deadline already passed runs at once, its lateness counted
    /// from `deadline` (also for an instant before the timer's clock began: its
    /// [`TaskContext::scheduled`] is `deadline` all the same).
    ///
    /// The instant is read on the timer's clock: on a [`ManualClock`](crate::ManualClock), take it
    /// from [`Timer::now`](crate::Timer::now) (`timer.now() + delay`), not from `Instant::now()`,
    /// which keeps moving with real time while the manual clock does not.
    pub fn at<A>(deadline: Instant, f: impl OnceBody<A>) -> Task {
        Task::once(When::At(deadline), f)
    }

    fn once<A, F: OnceBody<A>>(when: When, f: F) -> Task {
        Task {
            when,
            work: Work::Once {
                f: SyncWrapper::new(f.into_once()),
                label: None,
                plain: F::PLAIN,
            },
            route: None,
        }
    }

    /// Runs `f` every `period` at a fixed rate: the first run one period after the add (or as
    /// [`starting_after`](Self::starting_after) / [`starting_at`](Self::starting_at) say), then on
    /// the grid `first + k * period`, until cancelled or stopped
    /// ([`TaskContext::stop`]). See [`misfire`](Self::misfire) for what happens when the timer
    /// falls behind.
    ///
    /// A period below the timer's tick, zero included, runs at the tick (the wheel cannot tell
    /// instants within a tick apart), as an [`Interval`](crate::Interval) ticks; such tasks are
    /// counted in [`Stats::periods_rounded_up`](crate::Stats::periods_rounded_up). A zero period
    /// therefore runs once at the add and then every tick: never faster, never a spin.
    pub fn every<A>(period: Duration, f: impl RepeatBody<A>) -> Task {
        Task::repeat(period, Cadence::Rate(MisfirePolicy::default()), f)
    }

    /// Runs `f` repeatedly, each run `delay` after the previous one ended (as the JDK's
    /// `scheduleWithFixedDelay`): a slow run pushes the later ones back instead of piling them
    /// up. The first run is `delay` after the add unless
    /// [`starting_after`](Self::starting_after) / [`starting_at`](Self::starting_at) say
    /// otherwise. A delay below the tick, zero included, is rounded up to the tick, as for
    /// [`every`](Self::every).
    pub fn with_fixed_delay<A>(delay: Duration, f: impl RepeatBody<A>) -> Task {
        Task::repeat(delay, Cadence::Delay, f)
    }

    fn repeat<A>(period: Duration, cadence: Cadence, f: impl RepeatBody<A>) -> Task {
        Task {
            when: When::After(duration_to_ns(period)),
            work: Work::Every(Box::new(Repeat {
                f: SyncWrapper::new(f.into_repeat()),
                period: duration_to_ns(period),
                cadence,
                runs: 0,
                label: None,
                class: Class::default(),
            })),
            route: None,
        }
    }

    /// The first run `delay` after the add (for a one-shot task: its only run).
    pub fn starting_after(mut self, delay: Duration) -> Task {
        self.when = When::After(duration_to_ns(delay));
        self
    }

    /// The first run at `start` (for a one-shot task: its only run). A fixed-rate task's grid
    /// starts there.
    ///
    /// A `start` that has passed is due at once, as for [`at`](Self::at), and so is one before
    /// the timer's clock began (the instant the timer was built, or a
    /// [`ManualClock`](crate::ManualClock)'s epoch): that run's
    /// [`TaskContext::scheduled`] is `start` all the same. A fixed-rate grid anchored before
    /// that beginning keeps its phase instead: its first run is the grid's first point at or
    /// after the beginning, as for [`Timer::interval_at`](crate::Timer::interval_at) (the
    /// points before it precede the timer and are not run).
    pub fn starting_at(mut self, start: Instant) -> Task {
        self.when = When::At(start);
        self
    }

    /// Sets the misfire policy of a fixed-rate task (no effect on other tasks).
    pub fn misfire(mut self, policy: MisfirePolicy) -> Task {
        if let Work::Every(r) = &mut self.work
            && let Cadence::Rate(p) = &mut r.cadence
        {
            *p = policy;
        }
        self
    }

    /// Names this task with the user's key (an order id, a lease name): it comes back with the
    /// task from [`Timer::shutdown`](crate::Timer::shutdown), with the task's deadline, so
    /// pending work can be persisted and added again after a restart. The timer never reads it.
    pub fn keyed(mut self, key: impl Into<String>) -> Task {
        if let Some(label) = self.work.label_mut() {
            label.get_or_insert_default().key = Some(key.into());
        }
        self
    }

    /// Puts the task in the class `name` (e.g. `"send-report"`): the unit the timer watches for
    /// slow runs (see [`Isolation`](crate::Isolation)). A class whose runs are slow too often runs
    /// on the slow pool until it behaves again, so it cannot hold up the punctual tasks. Without
    /// a name, a repeating task is a class of its own and one-shot tasks share a default class.
    /// (Not the [`key`](Self::keyed), which names one task.)
    ///
    /// Each distinct name is remembered by the timer for its life, with its record of slow runs:
    /// name kinds of work (a few dozen names), not individual tasks. A name made per task (an
    /// order id in it) grows the timer's memory with every new name.
    pub fn class(mut self, name: impl Into<Arc<str>>) -> Task {
        self.route.get_or_insert_default().class = Some(name.into());
        self
    }

    /// Runs the task on `executor` instead of the timer's (and never on the slow pool): its runs
    /// are not watched for slowness, and count toward no class's isolation. The
    /// executor must not block its caller, the timer's tick thread (see
    /// [`Executor`](crate::Executor)). Each distinct executor is remembered by the timer for its
    /// life: share one `Arc` among tasks rather than making one per task.
    pub fn on(mut self, executor: Arc<dyn Executor>) -> Task {
        self.route.get_or_insert_default().executor = Some(executor);
        self
    }

    /// The class named with [`class`](Self::class).
    pub fn class_name(&self) -> Option<&str> {
        self.route.as_ref()?.class.as_deref()
    }

    /// The key given with [`keyed`](Self::keyed).
    pub fn key(&self) -> Option<&str> {
        self.work.label()?.key.as_deref()
    }

    /// The instant the task is due, if it is fixed: a task made with [`at`](Self::at) or
    /// [`starting_at`](Self::starting_at), or handed back by
    /// [`Timer::shutdown`](crate::Timer::shutdown) (its next run). `None` for a delay not yet
    /// anchored by an add.
    pub fn deadline(&self) -> Option<Instant> {
        match self.when {
            When::At(at) => Some(at),
            When::Returned(ref r) => Some(r.0),
            When::After(_) | When::Clock(_) => None,
        }
    }

    /// How long until the task is due: its delay, or for a task handed back by
    /// [`Timer::shutdown`](crate::Timer::shutdown), the time from the shutdown to its next run
    /// on the timer's clock (zero if it was due). Store this (as a wall-clock deadline:
    /// `SystemTime::now() + remaining`) to persist the task across a restart: an `Instant`
    /// means nothing in another process. `None` for a task made with [`at`](Self::at).
    ///
    /// A delay is kept in nanoseconds, as the timer's clock counts: one over `u64::MAX` ns
    /// (about 584 years) reads back as that, the far future the timer saturates it to anyway.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tickwheel::Task;
    ///
    /// assert_eq!(Task::after(Duration::from_millis(1500), || {}).remaining(), Some(Duration::from_millis(1500)));
    /// assert_eq!(Task::after(Duration::MAX, || {}).remaining(), Some(Duration::from_nanos(u64::MAX)));
    /// ```
    pub fn remaining(&self) -> Option<Duration> {
        match self.when {
            When::After(ns) => Some(Duration::from_nanos(ns)),
            When::Returned(ref r) => Some(r.1),
            When::At(_) | When::Clock(_) => None,
        }
    }

    /// The task's deadline on the system's wall clock, to store it across a restart (an
    /// `Instant` means nothing in another process): for a task handed back by
    /// [`Timer::shutdown`](crate::Timer::shutdown), the wall-clock time of the shutdown plus its
    /// [`remaining`](Self::remaining) time; for a task made with [`at`](Self::at), its instant
    /// read against the wall clock now. `None` for a delay not yet anchored by an add.
    ///
    /// For delays that must survive a crash, not only a shutdown, see the `tickwheel-durable`
    /// crate: jobs kept on disk, with wall-clock deadlines.
    ///
    /// ```
    /// use std::time::{Duration, SystemTime};
    /// use tickwheel::{Task, Timer};
    ///
    /// let timer = Timer::new()?;
    /// timer.add_or_submit(Task::after(Duration::from_secs(600), || {}).keyed("order-9"))?;
    /// let before = SystemTime::now();
    /// let task = timer.shutdown().pop().unwrap();
    /// let at = task.wall_deadline().unwrap();
    /// assert!(at >= before + Duration::from_secs(599) && at <= SystemTime::now() + Duration::from_secs(600));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn wall_deadline(&self) -> Option<SystemTime> {
        match self.when {
            When::Returned(ref r) => r.2.checked_add(r.1),
            When::At(at) => {
                let (now, wall) = (Instant::now(), SystemTime::now());
                match at.checked_duration_since(now) {
                    Some(ahead) => wall.checked_add(ahead),
                    None => wall.checked_sub(now.duration_since(at)),
                }
            }
            When::After(_) | When::Clock(_) => None,
        }
    }

    /// The period of a repeating task (as given to [`every`](Self::every) or
    /// [`with_fixed_delay`](Self::with_fixed_delay)), to store it with the task's key and
    /// deadline; `None` for a one-shot task.
    pub fn period(&self) -> Option<Duration> {
        match &self.work {
            Work::Every(r) => Some(Duration::from_nanos(r.period)),
            Work::Once { .. } | Work::Wake(..) => None,
        }
    }

    /// True for tasks made with [`every`](Self::every) or
    /// [`with_fixed_delay`](Self::with_fixed_delay).
    pub fn is_periodic(&self) -> bool {
        matches!(self.work, Work::Every(_))
    }

    /// Runs the task's closure once on this thread, consuming the task: for a task handed back
    /// by [`Timer::shutdown`](crate::Timer::shutdown) or an [`AddError`](crate::AddError). Its
    /// context has no timer, and is scheduled for now (or the deadline, if the task has one).
    pub fn run(self) {
        let scheduled = self.deadline().unwrap_or_else(Instant::now);
        let late = Instant::now().saturating_duration_since(scheduled);
        match self.work {
            Work::Once { f, label, .. } => {
                let mut cx = TaskContext::new(None, scheduled, late, 1, key_of(&label));
                f.into_inner()(&mut cx);
            }
            Work::Every(r) => {
                let Repeat { f, runs, label, .. } = *r;
                let mut cx = TaskContext::new(None, scheduled, late, runs + 1, key_of(&label));
                f.into_inner()(&mut cx);
            }
            Work::Wake(waker) => waker.into_iter().for_each(Waker::wake),
        }
    }
}

impl fmt::Debug for Task {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Task");
        match &self.work {
            Work::Once { .. } => d.field("kind", &"once"),
            Work::Every(r) => match r.cadence {
                Cadence::Rate(policy) => d
                    .field("every", &Duration::from_nanos(r.period))
                    .field("misfire", &policy),
                Cadence::Delay => d.field("fixed_delay", &Duration::from_nanos(r.period)),
            },
            Work::Wake(..) => d.field("kind", &"wakes a future"),
        };
        if let Some(key) = self.key() {
            d.field("key", &key);
        }
        if let Some(route) = &self.route {
            d.field("route", route);
        }
        d.field("deadline", &self.deadline())
            .field("remaining", &self.remaining())
            .finish_non_exhaustive()
    }
}
