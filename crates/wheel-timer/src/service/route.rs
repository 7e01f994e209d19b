//! Where a due task runs: its executor, chosen by the tick thread from the task's class.
//!
//! A task goes to the executor it names ([`Task::on`](crate::Task::on)), else to the slow pool
//! if its class is isolated or overstaying (see `class.rs`) or has its whole share of the
//! timer's pool, else to the timer's executor.
//!
//! **A class's share.** With isolation on, a named class runs at most `threads - 1` of its runs
//! at once on a timer's pool of `threads` (2 or more; an executor that does not say how many
//! threads it has, or has one, sets no share): whatever a class does, one thread stays for the
//! others. Its further runs go to the slow pool. This is what keeps the first runs of a class
//! that blocks from stalling everything while its strikes are still being counted (they are
//! counted when runs end). The tick thread reads the share to choose; the job takes a place
//! with a compare-and-swap as it starts, and goes on to the slow pool, unclaimed, if there is
//! none. The places are counted per timer: timers sharing one pool (the process-wide default)
//! each keep their own classes to the share, so the blocking classes of two timers could still
//! take every thread between them.
//!
//! Each slot has a *route word* beside it (`Slots::route`): the id of the task's route in
//! [`Routes`] (a class name and/or an executor, interned, never freed), or [`SELF_CLASS`] for a
//! repeating task that is its own class, whose state lives in its `Repeat` and whose isolation is
//! the [`SELF_ISOLATED`] bit. The adder writes it before it publishes the slot; the tick thread
//! reads it to pick the executor (a stale read only sends a job to the other pool, where it finds
//! its task or nothing); the job reads it after claiming the task, to record the run.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, OnceLock};

use tickwheel_executor::{Executor, RayonExecutor};

use crate::service::class::{Class, Isolation, IsolationHook, IsolationNs, Notice};
use crate::slots::append_only::AppendOnly;
// Plain `std`/`parking_lot` even under loom: routing is not part of any task's fate (a stale read
// only sends a job to another pool, where it finds its task or nothing), and modelling these
// accesses would multiply every model's interleavings for nothing.
use crate::service::histogram::Histogram;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::*};

/// The route of unnamed one-shot tasks: the default class, the timer's executor.
pub(crate) const DEFAULT_ROUTE: u32 = 0;
/// A repeating task without a class name: a class of its own.
pub(crate) const SELF_CLASS: u32 = 1 << 30;
/// With [`SELF_CLASS`]: that class is isolated.
pub(crate) const SELF_ISOLATED: u32 = 1 << 31;
const ID_MASK: u32 = SELF_CLASS - 1;

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

/// An interned [`RouteSpec`], its class's record, and its figures.
#[derive(Default)]
pub(crate) struct Route {
    spec: RouteSpec,
    pub(crate) class: Class,
    /// What `Stats::classes` reports of a named class, with isolation on (kept here, not in
    /// `Class`: a repeating task's own class is a `Class` too, one per task; and made only for a
    /// named class without an executor of its own: two histograms are about 8 KB).
    pub(crate) figures: Option<Box<Figures>>,
}

/// A named class's figures: run times, lateness, skipped runs (recorded with isolation on, which
/// is what times runs).
#[derive(Default)]
pub(crate) struct Figures {
    pub(crate) run_time: Histogram,
    pub(crate) lateness: Histogram,
    pub(crate) skipped: AtomicU64,
}

/// A named class as `Stats::classes` shows it.
pub(crate) struct ClassFigures<'a> {
    pub(crate) name: &'a str,
    pub(crate) figures: &'a Figures,
    pub(crate) isolated: bool,
    pub(crate) isolations: u64,
}

impl Route {
    /// Its class's name (`""`: the default class).
    pub(crate) fn name(&self) -> &str {
        self.spec.class.as_deref().unwrap_or("")
    }
}

/// A named class's place on the timer's pool, held while one of its runs goes on there.
pub(crate) struct PoolPlace<'a>(Option<&'a Route>);

impl Drop for PoolPlace<'_> {
    fn drop(&mut self) {
        if let Some(route) = self.0 {
            route.class.leave_pool();
        }
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
    table: AppendOnly<OnceLock<Route>>,
    index: Mutex<HashMap<RouteKey, u32>>,
    len: AtomicU32,
    slow: OnceLock<Option<Arc<dyn Executor>>>,
    /// The places a named class may hold on the timer's pool at once (`u32::MAX`: no limit).
    share: u32,
    name: String,
    /// Told of each change of a class's isolation (counts them: `Stats::isolations`).
    pub(crate) notice: Notice,
    pub(crate) main_runs: Histogram,
    pub(crate) slow_runs: Histogram,
}

impl Routes {
    /// Routes of a timer whose own pool runs `pool_threads` jobs at once, if it says.
    pub(crate) fn new(
        isolation: Option<Isolation>,
        on_isolation: Option<IsolationHook>,
        name: &str,
        pool_threads: Option<usize>,
    ) -> Self {
        let share = match pool_threads {
            Some(n) if n >= 2 => u32::try_from(n - 1).unwrap_or(u32::MAX),
            _ => u32::MAX,
        };
        let routes = Routes {
            isolation: isolation.map(IsolationNs::from),
            table: AppendOnly::new(),
            index: Mutex::new(HashMap::new()),
            len: AtomicU32::new(1),
            slow: OnceLock::new(),
            share,
            name: name.to_owned(),
            notice: Notice::new(on_isolation),
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
        let named = spec.class.is_some() && spec.executor.is_none();
        let _ = cell.set(Route {
            spec: spec.clone(),
            class: Class::default(),
            figures: (named && self.isolation.is_some()).then(Box::default),
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

    /// The route whose runs in progress a job of route word `word` counts (see the module docs):
    /// a named class's, on the timer's pools.
    pub(crate) fn watched(&self, word: u32) -> Option<&Route> {
        if self.isolation.is_none() || word == DEFAULT_ROUTE {
            return None;
        }
        self.route(word)
            .filter(|r| r.spec.class.is_some() && r.spec.executor.is_none())
    }

    /// Where a due task of route word `word` runs, at clock time `now()` (read only if its class
    /// was isolated or has runs in progress).
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
                (r.spec.class.is_some() && r.class.pool_share_taken(self.share))
                    || r.class.goes_slow(r.name(), &iso, now, &self.notice)
            }
        };
        match isolated.then(|| self.slow_pool()).flatten() {
            Some(slow) => (slow, Pool::Slow),
            None => (main, Pool::Main),
        }
    }

    /// A place on the timer's pool for a run of `route` (a route `watched` returned) about to
    /// start there, given back when the place drops; or, if the class has its whole share, the
    /// slow pool to send the run to instead.
    pub(crate) fn enter_pool<'a>(
        &'a self,
        route: &'a Route,
    ) -> Result<PoolPlace<'a>, &'a Arc<dyn Executor>> {
        if self.share == u32::MAX {
            return Ok(PoolPlace(None)); // no share to keep
        }
        if route.class.enter_pool(self.share) {
            return Ok(PoolPlace(Some(route)));
        }
        match self.slow_pool() {
            Some(slow) => Err(slow),
            // Its threads could not start: the run stays here, uncounted.
            None => Ok(PoolPlace(None)),
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
            .filter(|r| r.class.isolated_at(&iso, now))
            .map(|r| r.name().to_owned())
            .collect()
    }

    /// The named classes (a task named them with `Task::class` and no executor of its own), in
    /// the order first named, with their figures and whether each is isolated at clock time `now`.
    pub(crate) fn classes(&self, now: u64) -> Vec<ClassFigures<'_>> {
        let Some(iso) = self.isolation else {
            return Vec::new();
        };
        (0..self.len.load(Acquire))
            .filter_map(|id| self.table.get(id as usize)?.get())
            .filter_map(|r| {
                Some(ClassFigures {
                    name: r.name(),
                    figures: r.figures.as_deref()?,
                    isolated: r.class.isolated_at(&iso, now),
                    isolations: r.class.isolations(),
                })
            })
            .collect()
    }
}
