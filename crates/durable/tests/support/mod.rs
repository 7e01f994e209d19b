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
