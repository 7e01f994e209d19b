//! [`JobsBuilder`]: handlers and settings, then `open`.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tickwheel::Timer;

use crate::Jobs;
use crate::clock::{SystemClock, WallClock};
use crate::commit::Durability;
use crate::engine::{Config, Engine, Misfire, Parts};
use crate::error::OpenError;
use crate::handler::{Handler, Runner};
use crate::job::{DEFAULT_MAX_PAYLOAD, MAX_KIND_LEN};
use crate::retry::RetryPolicy;
use crate::store::{RedbStore, Store};

/// Builds [`Jobs`]: register a handler for every kind of job first (a stored job of a kind with
/// no handler is reported at open), then open a store.
///
/// ```
/// use std::time::Duration;
/// use tickwheel_durable::{Durability, JobContext, Jobs, Misfire, RetryPolicy};
///
/// # let dir = tempfile::tempdir()?;
/// let jobs = Jobs::builder()
///     .handler("reminder", |cx: &JobContext<'_>| {
///         println!("remind {}", String::from_utf8_lossy(cx.payload()));
///         Ok(())
///     })
///     .horizon(Duration::from_secs(600))          // in memory: the next 10 minutes
///     .retry(RetryPolicy::new(3).backoff(Duration::from_secs(5), 2))
///     .misfire(Misfire::RunWithin(Duration::from_secs(3600)))
///     .durability(Durability::Immediate)          // the default: on disk before schedule returns
///     .open(dir.path().join("reminders.redb"))?;
/// # drop(jobs);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "a builder does nothing until `open`"]
pub struct JobsBuilder {
    handlers: HashMap<String, Runner>,
    timer: Option<Timer>,
    wall: Arc<dyn WallClock>,
    horizon: Duration,
    retry: RetryPolicy,
    misfire: Misfire,
    durability: Durability,
    max_payload: usize,
    keep_unknown_kinds: bool,
    batch: usize,
}

impl JobsBuilder {
    pub(crate) fn new() -> JobsBuilder {
        JobsBuilder {
            handlers: HashMap::new(),
            timer: None,
            wall: Arc::new(SystemClock),
            horizon: Duration::from_secs(3600),
            retry: RetryPolicy::default(),
            misfire: Misfire::default(),
            durability: Durability::default(),
            max_payload: DEFAULT_MAX_PAYLOAD,
            keep_unknown_kinds: false,
            batch: 4096,
        }
    }

    /// Runs jobs of `kind` with `handler` (on the timer's executor). A second handler for the
    /// same kind replaces the first.
    pub fn handler(mut self, kind: impl Into<String>, handler: impl Handler) -> JobsBuilder {
        self.handlers
            .insert(kind.into(), Runner::Plain(Arc::new(handler)));
        self
    }

    /// Runs jobs of `kind` with `handler` inside the store's transaction, with the delete that
    /// completes the job: its SQL and the delete commit together or not at all (exactly once
    /// for database side effects). Needs a [`PgStore`](crate::store::PgStore) (refused at open
    /// otherwise).
    ///
    /// ```no_run
    /// use tickwheel_durable::store::{PgOptions, PgStore};
    /// use tickwheel_durable::{JobContext, Jobs};
    ///
    /// let jobs = Jobs::builder()
    ///     .handler_in_transaction("cancel-unpaid", |cx: &JobContext<'_>, tx: &mut postgres::Transaction<'_>| {
    ///         tx.execute("UPDATE orders SET state = 'cancelled' WHERE id = $1 AND state = 'unpaid'", &[&cx.key()])?;
    ///         Ok(())
    ///     })
    ///     .open_store(PgStore::open(PgOptions::new("host=127.0.0.1 user=postgres dbname=app"))?)?;
    /// # Ok::<(), tickwheel_durable::OpenError>(())
    /// ```
    #[cfg(feature = "postgres")]
    pub fn handler_in_transaction(
        mut self,
        kind: impl Into<String>,
        handler: impl crate::handler::SqlHandler,
    ) -> JobsBuilder {
        self.handlers
            .insert(kind.into(), Runner::InTransaction(Arc::new(handler)));
        self
    }

    /// The timer the jobs run on (by default a `Timer::new()`: the real clock, the shared pool).
    /// Give one on a [`ManualClock`](tickwheel::ManualClock) in tests, with a
    /// [`ManualWall`](crate::ManualWall) on the same clock.
    pub fn timer(mut self, timer: Timer) -> JobsBuilder {
        self.timer = Some(timer);
        self
    }

    /// The wall clock deadlines are read on (by default the system's).
    pub fn wall_clock(mut self, wall: impl WallClock) -> JobsBuilder {
        self.wall = Arc::new(wall);
        self
    }

    /// How far ahead jobs are kept in memory (armed in the timer); later ones stay on disk and
    /// are read, in deadline order, as they come within it. Memory is bounded by the jobs due
    /// within the horizon, not by the jobs stored. Default: one hour; at least 1 ms.
    pub fn horizon(mut self, horizon: Duration) -> JobsBuilder {
        self.horizon = horizon;
        self
    }

    /// How failed runs are retried (default: [`RetryPolicy::default`]).
    pub fn retry(mut self, retry: RetryPolicy) -> JobsBuilder {
        self.retry = retry;
        self
    }

    /// What happens to jobs that were overdue when the store was opened (default: all run).
    pub fn misfire(mut self, misfire: Misfire) -> JobsBuilder {
        self.misfire = misfire;
        self
    }

    /// When a change is on disk (default: before the call returns).
    pub fn durability(mut self, durability: Durability) -> JobsBuilder {
        self.durability = durability;
        self
    }

    /// The largest payload accepted, in bytes (default 1 MiB).
    pub fn max_payload(mut self, bytes: usize) -> JobsBuilder {
        self.max_payload = bytes;
        self
    }

    /// Opens a store holding jobs of kinds with no handler, instead of refusing it
    /// ([`OpenError::UnknownKinds`]): those jobs stay stored and never run (until a later open
    /// registers their kind).
    pub fn keep_unknown_kinds(mut self) -> JobsBuilder {
        self.keep_unknown_kinds = true;
        self
    }

    /// How many jobs the window reads from the store at a time (default 4096).
    pub fn load_batch(mut self, jobs: usize) -> JobsBuilder {
        self.batch = jobs;
        self
    }

    /// Opens (or makes) the store in the file at `path` ([`RedbStore`]) and starts: jobs that
    /// were overdue start at once (under the misfire policy), the horizon is loaded, and
    /// schedules are taken.
    pub fn open(self, path: impl AsRef<Path>) -> Result<Jobs, OpenError> {
        self.check()?;
        let store = RedbStore::open(path)?;
        self.open_store(store)
    }

    /// Starts on `store` (a store of your own, or one made with [`RedbStore::open`]).
    pub fn open_store(self, store: impl Store) -> Result<Jobs, OpenError> {
        self.check()?;
        let unknown: Vec<(String, u64)> = store
            .kinds()?
            .into_iter()
            .filter(|(kind, n)| *n > 0 && !self.handlers.contains_key(kind))
            .collect();
        if !unknown.is_empty() && !self.keep_unknown_kinds {
            return Err(OpenError::UnknownKinds(unknown));
        }
        if store.announces_within().is_some_and(|w| self.horizon > w) {
            return Err(OpenError::Config(
                "the horizon is longer than the store announces jobs ahead (notify_within)",
            ));
        }
        #[cfg(feature = "postgres")]
        if !store.runs_sql_handlers()
            && (self.handlers.values()).any(|r| matches!(r, Runner::InTransaction(_)))
        {
            return Err(OpenError::Config(
                "a handler in a transaction needs a store that runs them (PgStore)",
            ));
        }
        let timer = match self.timer {
            Some(t) => t,
            None => Timer::new().map_err(OpenError::Timer)?,
        };
        let engine = Engine::start(Parts {
            store: Arc::new(store),
            timer,
            wall: self.wall,
            handlers: self.handlers,
            config: Config {
                horizon: u64::try_from(self.horizon.as_nanos()).unwrap_or(u64::MAX),
                retry: self.retry,
                misfire: self.misfire,
                max_payload: self.max_payload,
                batch: self.batch,
            },
            durability: self.durability,
        })
        .map_err(OpenError::Io)?;
        let jobs = Jobs::first(engine.clone());
        engine.begin();
        Ok(jobs)
    }

    fn check(&self) -> Result<(), OpenError> {
        if self.horizon < Duration::from_millis(1) {
            return Err(OpenError::Config("the horizon must be at least 1 ms"));
        }
        if self.batch == 0 {
            return Err(OpenError::Config("the load batch must be at least 1 job"));
        }
        if self.durability == Durability::Within(Duration::ZERO) {
            return Err(OpenError::Config(
                "a durability window must be longer than zero (use Durability::Immediate)",
            ));
        }
        if self
            .handlers
            .keys()
            .any(|k| k.is_empty() || k.len() > MAX_KIND_LEN || k.contains('\0'))
        {
            return Err(OpenError::Config("a kind must have 1 to 64 bytes"));
        }
        Ok(())
    }
}

impl std::fmt::Debug for JobsBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut kinds: Vec<&String> = self.handlers.keys().collect();
        kinds.sort();
        f.debug_struct("JobsBuilder")
            .field("kinds", &kinds)
            .field("horizon", &self.horizon)
            .field("retry", &self.retry)
            .field("misfire", &self.misfire)
            .field("durability", &self.durability)
            .finish_non_exhaustive()
    }
}
