//! Where a due task runs: its executor, chosen by the tick thread from the task's class.
//!
//! A task belongs to a *class*: the one it names ([`Task::class`](crate::Task::class)), else a
//! repeating task is a class of its own and unnamed one-shot tasks share the default class. With
//! [`Isolation`] on (the default), a class whose runs took longer than the threshold `strikes`
//! times within `window` is *isolated*: its tasks go to a separate slow pool, so they cannot hold
//! up the punctual ones, until a whole window passes without a slow run. Run time is measured on
//! the timer's clock, so tests on a manual clock are exact. A task may also name its own executor
//! ([`Task::on`](crate::Task::on)), which wins over both pools.
//!
//! Each slot has a *route word* beside it (`Slots::route`): the id of the task's route in
//! [`Routes`] (a class name and/or an executor, interned, never freed), or [`SELF_CLASS`] for a
//! repeating task that is its own class, whose state lives in its `Repeat` and whose isolation is
//! the [`SELF_ISOLATED`] bit. The adder writes it before it publishes the slot; the tick thread
//! reads it to pick the executor (a stale read only sends a job to the other pool, where it finds
//! its task or nothing); the job reads it after claiming the task, to record the run.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tickwheel_executor::{Executor, RayonExecutor};
use tickwheel_reaper::duration_to_ns;

use crate::chunked::Chunked;
// Plain `std`/`parking_lot` even under loom: routing is not part of any task's fate (a stale read
// only sends a job to another pool, where it finds its task or nothing), and modelling these
// accesses would multiply every model's interleavings for nothing.
use crate::stats::Histogram;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::*};

/// The route of unnamed one-shot tasks: the default class, the timer's executor.
pub(crate) const DEFAULT_ROUTE: u32 = 0;
/// A repeating task without a class name: a class of its own.
pub(crate) const SELF_CLASS: u32 = 1 << 30;
/// With [`SELF_CLASS`]: that class is isolated.
pub(crate) const SELF_ISOLATED: u32 = 1 << 31;
const ID_MASK: u32 = SELF_CLASS - 1;

/// When a class of tasks is moved to the slow pool (see the module docs of `route.rs`):
/// runs longer than `threshold`, `strikes` times within `window`. The defaults are XXL-JOB's:
/// 500 ms, 10 strikes, one minute; the slow pool has 2 threads, started the first time a class
/// is isolated.
///
/// ```
/// use std::time::Duration;
/// use tickwheel::{Isolation, Timer};
///
/// let timer = Timer::builder()
///     .isolation(Isolation::new().threshold(Duration::from_millis(50)).strikes(3).window(Duration::from_secs(1)))
///     .build()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub struct Isolation {
    threshold: Duration,
    strikes: u32,
    window: Duration,
    slow_threads: usize,
}

impl Default for Isolation {
    fn default() -> Self {
        Isolation {
            threshold: Duration::from_millis(500),
            strikes: 10,
            window: Duration::from_secs(60),
            slow_threads: 2,
        }
    }
}

impl Isolation {
    /// The defaults (see the type's docs).
    pub fn new() -> Self {
        Self::default()
    }

    /// A run longer than this is slow. Default 500 ms.
    pub fn threshold(mut self, threshold: Duration) -> Self {
        self.threshold = threshold;
        self
    }

    /// Slow runs within a window that isolate a class (at least 1). Default 10.
    pub fn strikes(mut self, strikes: u32) -> Self {
        self.strikes = strikes.max(1);
        self
    }

    /// The window slow runs are counted in, and the time without a slow run after which an
    /// isolated class returns to the timer's pool. Default one minute.
    pub fn window(mut self, window: Duration) -> Self {
        self.window = window;
        self
    }

    /// Threads of the slow pool (at least 1). Default 2. They are started the first time a class
    /// is isolated, and are the timer's own (named `{name}-slow-exec-{i}`).
    pub fn slow_threads(mut self, threads: usize) -> Self {
        self.slow_threads = threads.max(1);
        self
    }
}

/// A class's record of slow runs.
pub(crate) struct Class {
    /// Clock times at which recent slow runs ended (at most `strikes` kept).
    slow: Mutex<VecDeque<u64>>,
    isolated: AtomicBool,
    /// Clock time the latest slow run ended.
    last_slow: AtomicU64,
}

impl Default for Class {
    fn default() -> Self {
        Class {
            slow: Mutex::new(VecDeque::new()),
            isolated: AtomicBool::new(false),
            last_slow: AtomicU64::new(0),
        }
    }
}

impl Class {
    /// Records a run of `ran` ns that ended at clock time `end`; returns whether the class is
    /// isolated afterwards (and counts a new isolation in `isolations`).
    pub(crate) fn record(
        &self,
        name: &str,
        iso: &IsolationNs,
        ran: u64,
        end: u64,
        isolations: &AtomicU64,
    ) -> bool {
        if ran <= iso.threshold {
            return self.is_isolated(name, iso, end);
        }
        self.last_slow.fetch_max(end, Relaxed);
        let mut slow = self.slow.lock();
        slow.push_back(end);
        while slow.len() > iso.strikes as usize {
            slow.pop_front();
        }
        let first = slow.front().copied().unwrap_or(end);
        if slow.len() >= iso.strikes as usize
            && end.saturating_sub(first) <= iso.window
            && !self.isolated.swap(true, Relaxed)
        {
            isolations.fetch_add(1, Relaxed);
            crate::trace::isolation(name, true);
        }
        self.isolated.load(Relaxed)
    }

    /// Whether the class is isolated at clock time `now`: it returns to the timer's pool once a
    /// whole window passed without a slow run.
    pub(crate) fn is_isolated(&self, name: &str, iso: &IsolationNs, now: u64) -> bool {
        if !self.isolated.load(Relaxed) {
            return false;
        }
        if now.saturating_sub(self.last_slow.load(Relaxed)) < iso.window {
            return true;
        }
        self.slow.lock().clear();
        if self.isolated.swap(false, Relaxed) {
            crate::trace::isolation(name, false);
        }
        false
    }
}

/// [`Isolation`] in clock nanoseconds.
#[derive(Clone, Copy, Debug)]
pub(crate) struct IsolationNs {
    threshold: u64,
    strikes: u32,
    window: u64,
    slow_threads: usize,
}

/// What a task names about where it runs (from `Task::class` / `Task::on`).
#[derive(Clone, Default)]
pub(crate) struct RouteSpec {
    pub(crate) class: Option<Arc<str>>,
    pub(crate) executor: Option<Arc<dyn Executor>>,
}

impl fmt::Debug for RouteSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RouteSpec")
            .field("class", &self.class)
            .field("own_executor", &self.executor.is_some())
            .finish()
    }
}

/// What routes are interned by: the class name and the executor's address (kept alive by the
/// route, so the address is not reused).
type RouteKey = (Option<Arc<str>>, usize);

/// An interned [`RouteSpec`] and its class's record.
#[derive(Default)]
pub(crate) struct Route {
    spec: RouteSpec,
    pub(crate) class: Class,
}

impl Route {
    /// Its class's name (`""`: the default class).
    pub(crate) fn name(&self) -> &str {
        self.spec.class.as_deref().unwrap_or("")
    }
}

/// Which executor a job was sent to (for the run-time statistics).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pool {
    /// The timer's executor.
    Main,
    /// The slow pool of isolated classes.
    Slow,
    /// An executor the task named.
    Own,
}

/// A timer's routes, its slow pool, and the run-time statistics per pool.
pub(crate) struct Routes {
    pub(crate) isolation: Option<IsolationNs>,
    table: Chunked<OnceLock<Route>>,
    index: Mutex<HashMap<RouteKey, u32>>,
    len: AtomicU32,
    slow: OnceLock<Option<Arc<dyn Executor>>>,
    name: String,
    pub(crate) isolations: AtomicU64,
    pub(crate) main_runs: Histogram,
    pub(crate) slow_runs: Histogram,
}

impl Routes {
    pub(crate) fn new(isolation: Option<Isolation>, name: &str) -> Self {
        let routes = Routes {
            isolation: isolation.map(|i| IsolationNs {
                threshold: duration_to_ns(i.threshold),
                strikes: i.strikes,
                window: duration_to_ns(i.window),
                slow_threads: i.slow_threads,
            }),
            table: Chunked::new(),
            index: Mutex::new(HashMap::new()),
            len: AtomicU32::new(1),
            slow: OnceLock::new(),
            name: name.to_owned(),
            isolations: AtomicU64::new(0),
            main_runs: Histogram::new(),
            slow_runs: Histogram::new(),
        };
        let default = routes.table.get(0).expect("the first chunk exists");
        let _ = default.set(Route::default());
        routes
    }

    /// The route word of a task that names `spec` (interned on first use), repeating or not.
    /// (A task that names nothing is [`DEFAULT_ROUTE`] or [`SELF_CLASS`], decided inline by the
    /// add.)
    #[cold]
    pub(crate) fn word_of(&self, spec: &RouteSpec, repeating: bool) -> u32 {
        match spec {
            RouteSpec {
                class: None,
                executor: None,
            } if repeating => SELF_CLASS,
            RouteSpec {
                class: None,
                executor: None,
            } => DEFAULT_ROUTE,
            spec => self.intern(spec),
        }
    }

    fn intern(&self, spec: &RouteSpec) -> u32 {
        let key = (
            spec.class.clone(),
            spec.executor
                .as_ref()
                .map_or(0, |e| Arc::as_ptr(e).cast::<()>() as usize),
        );
        let mut index = self.index.lock();
        if let Some(&id) = index.get(&key) {
            return id;
        }
        let id = self.len.load(Relaxed);
        let Some(cell) = self.table.get_or_grow(id as usize).filter(|_| id < ID_MASK) else {
            return DEFAULT_ROUTE; // a billion routes: the rest share the default one
        };
        let _ = cell.set(Route {
            spec: spec.clone(),
            class: Class::default(),
        });
        self.len.store(id + 1, Release);
        index.insert(key, id);
        id
    }

    /// The route of word `word`, unless it is a repeating task's own class.
    pub(crate) fn route(&self, word: u32) -> Option<&Route> {
        if word & SELF_CLASS != 0 {
            return None;
        }
        self.table.get((word & ID_MASK) as usize)?.get()
    }

    /// What a task of route word `word` names (for a task handed back by shutdown).
    pub(crate) fn spec_of(&self, word: u32) -> Option<Box<RouteSpec>> {
        let spec = &self.route(word)?.spec;
        (spec.class.is_some() || spec.executor.is_some()).then(|| Box::new(spec.clone()))
    }

    /// Where a due task of route word `word` runs, at clock time `now()` (read only if its class
    /// was isolated).
    pub(crate) fn pick<'a>(
        &'a self,
        word: u32,
        now: impl FnOnce() -> u64,
        main: &'a Arc<dyn Executor>,
    ) -> (&'a Arc<dyn Executor>, Pool) {
        let route = self.route(word);
        if let Some(own) = route.and_then(|r| r.spec.executor.as_ref()) {
            return (own, Pool::Own);
        }
        let isolated = match (self.isolation, route) {
            (None, _) => false,
            (Some(_), None) => word & SELF_ISOLATED != 0,
            (Some(iso), Some(r)) => {
                r.class.isolated.load(Relaxed) && r.class.is_isolated(r.name(), &iso, now())
            }
        };
        match isolated.then(|| self.slow_pool()).flatten() {
            Some(slow) => (slow, Pool::Slow),
            None => (main, Pool::Main),
        }
    }

    /// The slow pool, started on first use (`None` if its threads could not be started: the
    /// isolated class then stays on the timer's executor).
    fn slow_pool(&self) -> Option<&Arc<dyn Executor>> {
        let iso = self.isolation?;
        self.slow
            .get_or_init(|| {
                RayonExecutor::new(iso.slow_threads, &format!("{}-slow", self.name))
                    .ok()
                    .map(|p| Arc::new(p) as Arc<dyn Executor>)
            })
            .as_ref()
    }

    /// Records a run of `ran` ns on `pool`, ended at clock time `end`, for the class of a named
    /// route. (A repeating task's own class is recorded by its job.)
    pub(crate) fn record(&self, pool: Pool, ran: u64) {
        match pool {
            Pool::Slow => self.slow_runs.record(ran),
            Pool::Main | Pool::Own => self.main_runs.record(ran),
        }
    }

    /// Names of the classes isolated at clock time `now` ("" is the default class).
    pub(crate) fn isolated(&self, now: u64) -> Vec<String> {
        let Some(iso) = self.isolation else {
            return Vec::new();
        };
        (0..self.len.load(Acquire))
            .filter_map(|id| self.table.get(id as usize)?.get())
            .filter(|r| r.class.is_isolated(r.name(), &iso, now))
            .map(|r| r.name().to_owned())
            .collect()
    }
}
