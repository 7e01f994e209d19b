//! [`Jobs`]: the handle users hold: schedule, cancel, reschedule, read, and the dead letters.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::SystemTime;

use tickwheel::Timer;

use crate::builder::JobsBuilder;
use crate::engine::Engine;
use crate::error::{JobError, Refused};
use crate::job::{DeadJob, Job, check_key, wall_ns};
use crate::stats::Stats;
use crate::store::{Applied, Op};

/// Durable delayed jobs: the store is the truth, the timer fires the near future.
///
/// Made by [`Jobs::builder`]; cheap to clone (every clone is the same jobs). Every method may be
/// called from any thread, a handler's included. The jobs close when [`close`](Self::close) is
/// called or the last clone is dropped (that drop waits for running handlers): no new runs
/// start, running handlers finish, every change is put on disk, and the file is let go (a
/// reopen right after works); the jobs stay stored for the next open.
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use tickwheel_durable::{Job, Jobs};
///
/// # let dir = tempfile::tempdir()?;
/// let jobs = Jobs::builder()
///     .handler("cancel-unpaid", |cx: &tickwheel_durable::JobContext<'_>| {
///         println!("order {} unpaid: cancelled", cx.key());
///         Ok(())
///     })
///     .open(dir.path().join("jobs.redb"))?;
/// let at = SystemTime::now() + Duration::from_secs(900);
/// jobs.schedule(Job::new("order-42", "cancel-unpaid", at))?; // on disk when this returns
/// assert!(jobs.cancel("order-42")?); // paid in time
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Jobs {
    engine: Arc<Engine>,
    /// Shared by the users' clones: the last one to go closes the jobs. (`None` for a
    /// handler's: a run in progress does not keep the jobs open.)
    _owner: Option<Arc<Owner>>,
}

/// Closes the jobs when the last [`Jobs`] goes (the engine itself may live on a moment in a
/// timer task that is finishing: the store is released here, not then).
pub(crate) struct Owner(Arc<Engine>);

impl Drop for Owner {
    fn drop(&mut self) {
        let _ = self.0.close();
    }
}

impl Jobs {
    /// Settings, handlers, then `open`.
    pub fn builder() -> JobsBuilder {
        JobsBuilder::new()
    }

    /// The first handle of a started engine.
    pub(crate) fn first(engine: Arc<Engine>) -> Jobs {
        let owner = Arc::new(Owner(engine.clone()));
        Jobs {
            engine,
            _owner: Some(owner),
        }
    }

    /// The handle a handler's context gives: it works while the jobs are open, and does not keep
    /// them open (the users' last handle going closes them, once the running handlers end).
    pub(crate) fn for_handler(engine: Arc<Engine>) -> Jobs {
        Jobs {
            engine,
            _owner: None,
        }
    }

    /// Stores `job`; returns once it is durable (see [`Durability`](crate::Durability)). A job
    /// due within the horizon is armed in the timer at once. Refused, with the job handed back:
    /// a key that is waiting already ([`JobError::Duplicate`]), a kind with no handler, a bad
    /// key, kind or payload, a failing store, closed jobs.
    pub fn schedule(&self, job: Job) -> Result<(), Refused<Job>> {
        self.insert(vec![job], false)
            .map_err(|r| r.map(|mut jobs| jobs.pop().expect("the job, back")))
    }

    /// Stores `job`, replacing the waiting job of the same key if there is one (its timer is
    /// moved, its attempts start again).
    pub fn upsert(&self, job: Job) -> Result<(), Refused<Job>> {
        self.insert(vec![job], true)
            .map_err(|r| r.map(|mut jobs| jobs.pop().expect("the job, back")))
    }

    /// Stores `jobs` in one commit, all or none: if one is refused (a duplicate key, in the
    /// store or twice in `jobs`, or a bad job), none is stored, and all come back.
    pub fn schedule_batch(&self, jobs: Vec<Job>) -> Result<(), Refused<Vec<Job>>> {
        self.insert(jobs, false)
    }

    fn insert(&self, jobs: Vec<Job>, upsert: bool) -> Result<(), Refused<Vec<Job>>> {
        let e = &self.engine;
        for job in &jobs {
            let checked = job.check(e.config.max_payload).and_then(|()| {
                match e.handlers.contains_key(&job.kind) {
                    true => Ok(()),
                    false => Err(JobError::UnknownKind(job.kind.clone())),
                }
            });
            if let Err(error) = checked {
                return Err(Refused::new(error, jobs));
            }
        }
        if jobs.is_empty() {
            return Ok(());
        }
        let (ops, result) = self.commit_op(Op::Insert { jobs, upsert });
        let error = match result {
            Ok(Applied::Inserted(versions)) => {
                e.counters
                    .scheduled
                    .fetch_add(versions.len() as u64, Relaxed);
                return Ok(());
            }
            Ok(Applied::Duplicate(key)) => JobError::Duplicate(key),
            Ok(other) => unreachable!("an insert reports {other:?}"),
            Err(error) => error,
        };
        let jobs = ops
            .into_iter()
            .flat_map(|op| match op {
                Op::Insert { jobs, .. } => jobs,
                _ => Vec::new(),
            })
            .collect();
        Err(Refused::new(error, jobs))
    }

    /// Commits `op`: it comes back, with what it did.
    fn commit_op(&self, op: Op) -> (Vec<Op>, Result<Applied, JobError>) {
        if self.engine.closed.load(Relaxed) {
            return (vec![op], Err(JobError::Closed));
        }
        let (ops, result) = self.engine.commit(vec![op]);
        let one = result.map(|mut applied| applied.pop().expect("one op, one answer"));
        (ops, one)
    }

    fn commit_one(&self, op: Op) -> Result<Applied, JobError> {
        self.commit_op(op).1
    }

    /// Removes the waiting job `key`: `true` if it was waiting and will not run; `false` if
    /// there is no such job, or its handler had started (it runs to its end; a failure of it is
    /// not retried, the job being gone). Durable when this returns.
    pub fn cancel(&self, key: &str) -> Result<bool, JobError> {
        check_key(key)?;
        let op = Op::Cancel {
            key: key.to_owned(),
        };
        // A job whose run had begun when the cancel reached the window reports `None` (see
        // `Engine::committed`): the run goes on, and is not retried.
        let removed = matches!(self.commit_one(op)?, Applied::Removed(Some(_)));
        if removed {
            self.engine.counters.cancelled.fetch_add(1, Relaxed);
        }
        Ok(removed)
    }

    /// Moves the waiting job `key` to `deadline` (its attempts kept): `true` if it was waiting
    /// (a job whose handler runs now is moved too, and runs again at `deadline`).
    pub fn reschedule(&self, key: &str, deadline: SystemTime) -> Result<bool, JobError> {
        check_key(key)?;
        let op = Op::Reschedule {
            key: key.to_owned(),
            deadline: wall_ns(deadline),
        };
        Ok(matches!(self.commit_one(op)?, Applied::Moved(Some(_))))
    }

    /// The waiting job `key`, as stored now.
    pub fn get(&self, key: &str) -> Result<Option<Job>, JobError> {
        check_key(key)?;
        Ok(self.engine.store.get(key)?.map(|s| s.job))
    }

    /// How many jobs are waiting and how many are dead, in the store.
    pub fn counts(&self) -> Result<crate::Counts, JobError> {
        Ok(self.engine.store.counts()?)
    }

    /// Up to `limit` dead jobs, in key order, after key `after` (from the first if `None`).
    pub fn dead_letters(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<DeadJob>, JobError> {
        Ok(self.engine.store.dead(after, limit)?)
    }

    /// Moves dead job `key` back among the waiting ones, due at `deadline`, its attempts reset:
    /// `true` if there was such a dead job. A waiting job of the same key refuses it
    /// ([`JobError::Duplicate`]).
    pub fn requeue(&self, key: &str, deadline: SystemTime) -> Result<bool, JobError> {
        check_key(key)?;
        let op = Op::Requeue {
            key: key.to_owned(),
            deadline: wall_ns(deadline),
        };
        match self.commit_one(op)? {
            Applied::Moved(Some(_)) => {
                self.engine.counters.scheduled.fetch_add(1, Relaxed);
                Ok(true)
            }
            Applied::Duplicate(key) => Err(JobError::Duplicate(key)),
            _ => Ok(false),
        }
    }

    /// Removes dead job `key` for good: `true` if there was one.
    pub fn drop_dead(&self, key: &str) -> Result<bool, JobError> {
        check_key(key)?;
        let op = Op::DropDead {
            key: key.to_owned(),
        };
        Ok(matches!(self.commit_one(op)?, Applied::Removed(Some(_))))
    }

    /// Waits until every change made before (the outcomes of finished runs included) is
    /// committed and on disk. With the default durability a schedule is on disk when it returns
    /// already; this is for the batched deletes of finished runs, and for
    /// [`Durability::Within`](crate::Durability::Within).
    pub fn sync(&self) -> Result<(), JobError> {
        self.engine.sync()
    }

    /// What the jobs did since the store was opened.
    pub fn stats(&self) -> Stats {
        self.engine.stats()
    }

    /// The timer the jobs run on (for its stats, its `wait_idle` in tests, or tasks of your
    /// own).
    pub fn timer(&self) -> &Timer {
        &self.engine.timer
    }

    /// Closes the jobs (every clone): no new run starts; running handlers finish; every change
    /// is put on disk, the file let go. Later calls get [`JobError::Closed`]. Idempotent. Called
    /// from a handler, it returns at once, and the close ends as that handler returns (its own
    /// outcome committed with the rest).
    pub fn close(&self) -> Result<(), JobError> {
        self.engine.close()
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

impl fmt::Debug for Jobs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Jobs")
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}
