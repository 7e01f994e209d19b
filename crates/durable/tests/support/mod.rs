//! What the durable jobs' tests share: a store in a temporary directory, jobs on a manual clock
//! (with a wall clock that moves with it), and a log of handler runs.
#![allow(dead_code, unreachable_pub)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tickwheel::{ManualClock, Timer};
use tickwheel_durable::{HandlerError, JobContext, Jobs, JobsBuilder, ManualWall};

pub const SEC: Duration = Duration::from_secs(1);
pub const MIN: Duration = Duration::from_secs(60);
pub const HOUR: Duration = Duration::from_secs(3600);

/// A run a handler saw: key, attempt, wall-clock time it started.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Run {
    pub key: String,
    pub attempt: u32,
    pub at: SystemTime,
    pub late: Duration,
}

/// A store path, a manual clock, a wall clock on it, and the runs seen.
pub struct Env {
    pub dir: tempfile::TempDir,
    pub clock: ManualClock,
    pub start: SystemTime,
    pub runs: Arc<Mutex<Vec<Run>>>,
}

impl Env {
    pub fn new() -> Env {
        Env {
            dir: tempfile::tempdir().expect("a temporary directory"),
            clock: ManualClock::new(),
            start: SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000),
            runs: Arc::new(Mutex::new(Vec::new())),
        }
    }

    pub fn path(&self) -> std::path::PathBuf {
        self.dir.path().join("jobs.redb")
    }

    /// The wall clock now.
    pub fn now(&self) -> SystemTime {
        self.start + self.clock.elapsed()
    }

    /// A builder on the manual clock (a two-thread pool), with handler `"ok"` (logs, succeeds),
    /// `"fail"` (logs, fails) and `"panic"` (logs, panics).
    pub fn builder(&self) -> JobsBuilder {
        let timer = Timer::builder()
            .clock(self.clock.clone())
            .threads(2)
            .build()
            .expect("a timer");
        let ok = self.logger(|_| Ok(()));
        let fail = self.logger(|_| Err("refused by the payment service".into()));
        let panics = self.logger(|_| panic!("the handler panicked on purpose"));
        Jobs::builder()
            .timer(timer)
            .wall_clock(ManualWall::new(self.clock.clone(), self.start))
            .handler("ok", ok)
            .handler("fail", fail)
            .handler("panic", panics)
    }

    /// A handler that logs its run, then answers as `then` says.
    pub fn logger(
        &self,
        then: impl Fn(&JobContext<'_>) -> Result<(), HandlerError> + Send + Sync + 'static,
    ) -> impl Fn(&JobContext<'_>) -> Result<(), HandlerError> + Send + Sync + 'static {
        let runs = self.runs.clone();
        let clock = self.clock.clone();
        let start = self.start;
        move |cx: &JobContext<'_>| {
            runs.lock().unwrap().push(Run {
                key: cx.key().to_owned(),
                attempt: cx.attempt(),
                at: start + clock.elapsed(),
                late: cx.lateness(),
            });
            then(cx)
        }
    }

    pub fn open(&self) -> Jobs {
        self.builder().open(self.path()).expect("the store opens")
    }

    /// The keys run so far, in order.
    pub fn ran(&self) -> Vec<String> {
        self.runs
            .lock()
            .unwrap()
            .iter()
            .map(|r| r.key.clone())
            .collect()
    }

    /// Moves the clock by `d`, then waits until every run is over and its outcome committed.
    pub fn advance(&self, jobs: &Jobs, d: Duration) {
        self.clock.advance(d);
        settle(jobs);
    }
}

/// Waits until the timer is idle and every change is committed (twice: a run's outcome may arm a
/// retry that is due at once).
pub fn settle(jobs: &Jobs) {
    for _ in 0..3 {
        jobs.timer().wait_idle();
        jobs.sync().expect("sync");
    }
}

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};

use tickwheel_durable::store::{Applied, Counts, Cursor, Due, Op, Stored};
use tickwheel_durable::{DeadJob, RedbStore, Store, StoreError};

/// A key whose `get` blocks once: it says so on the sender, and waits on the receiver.
pub type Gate = (
    String,
    std::sync::mpsc::Sender<()>,
    std::sync::mpsc::Receiver<()>,
);

/// How a [`Hooked`] store gets in the way, set by the test while the jobs use the store.
#[derive(Default)]
pub struct Knobs {
    /// Commits fail (a full disk) while set.
    pub fail_apply: AtomicBool,
    /// The next commit panics (a store breaking its contract).
    pub panic_apply: AtomicBool,
    /// The window's reads fail this many more times.
    pub fail_due: AtomicUsize,
    /// `get` of this key blocks once.
    pub gate: Mutex<Option<Gate>>,
    /// After committing an insert of this key, the commit returns 500 ms late (its report to
    /// the window comes late).
    pub slow_insert: Mutex<Option<String>>,
}

/// A redb store a test can get in the way of (see [`Knobs`]); everything else goes through.
pub struct Hooked {
    inner: RedbStore,
    knobs: Arc<Knobs>,
}

impl Hooked {
    /// The store, and its knobs for the test to keep.
    pub fn new(inner: RedbStore) -> (Hooked, Arc<Knobs>) {
        let knobs = Arc::new(Knobs::default());
        let store = Hooked {
            inner,
            knobs: knobs.clone(),
        };
        (store, knobs)
    }
}

impl Store for Hooked {
    fn apply(&self, ops: &[Op], durable: bool) -> Result<Vec<Applied>, StoreError> {
        let k = &self.knobs;
        if k.panic_apply.swap(false, SeqCst) {
            panic!("a store breaking its contract");
        }
        if k.fail_apply.load(SeqCst) {
            let e = std::io::Error::new(std::io::ErrorKind::StorageFull, "no space left");
            return Err(StoreError::Io(e));
        }
        let applied = self.inner.apply(ops, durable)?;
        let slow = k.slow_insert.lock().unwrap().clone();
        let inserts = |key: &str| {
            ops.iter().any(
                |op| matches!(op, Op::Insert { jobs, .. } if jobs.iter().any(|j| j.key() == key)),
            )
        };
        if slow.is_some_and(|key| inserts(&key)) {
            std::thread::sleep(Duration::from_millis(500));
        }
        Ok(applied)
    }

    fn due(&self, s: u32, a: Option<&Cursor>, u: u64, l: usize) -> Result<Due, StoreError> {
        let failing = (self.knobs.fail_due).fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1));
        if failing.is_ok() {
            return Err(StoreError::Io(std::io::Error::other(
                "transient read error",
            )));
        }
        self.inner.due(s, a, u, l)
    }

    fn get(&self, key: &str) -> Result<Option<Stored>, StoreError> {
        let gate = {
            let mut g = self.knobs.gate.lock().unwrap();
            match &*g {
                Some((k, _, _)) if k == key => g.take(),
                _ => None,
            }
        };
        if let Some((_, entered, release)) = gate {
            entered.send(()).unwrap();
            release.recv().unwrap();
        }
        self.inner.get(key)
    }

    fn dead(&self, after: Option<&str>, limit: usize) -> Result<Vec<DeadJob>, StoreError> {
        self.inner.dead(after, limit)
    }

    fn counts(&self) -> Result<Counts, StoreError> {
        self.inner.counts()
    }

    fn kinds(&self) -> Result<Vec<(String, u64)>, StoreError> {
        self.inner.kinds()
    }

    fn close(&self) {
        self.inner.close();
    }
}
