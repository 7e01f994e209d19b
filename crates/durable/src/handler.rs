//! Handlers: the code that runs a kind of job, and the [`JobContext`] a run sees.

use std::time::{Duration, SystemTime};

use crate::Jobs;
use crate::job::Job;

/// What a handler returns when it fails: any error. The job is retried under the
/// [`RetryPolicy`](crate::RetryPolicy), then moved to the dead-letter set with this error's
/// text.
pub type HandlerError = Box<dyn std::error::Error + Send + Sync>;

/// Runs the jobs of one kind, on the timer's executor. Implemented for every
/// `Fn(&JobContext<'_>) -> Result<(), HandlerError>` closure.
///
/// `Ok` deletes the job (in a batched commit); an error, or a panic, counts as a failed attempt.
/// A job runs at least once across crashes (a crash after the run and before its delete is on
/// disk runs it again, with the same attempt number): make the handler idempotent, keyed by
/// [`JobContext::key`].
pub trait Handler: Send + Sync + 'static {
    /// Runs one job.
    fn run(&self, cx: &JobContext<'_>) -> Result<(), HandlerError>;
}

impl<F> Handler for F
where
    F: Fn(&JobContext<'_>) -> Result<(), HandlerError> + Send + Sync + 'static,
{
    fn run(&self, cx: &JobContext<'_>) -> Result<(), HandlerError> {
        self(cx)
    }
}

/// Runs the jobs of one kind inside the store's transaction, with the delete that completes the
/// job (the `postgres` feature, on a [`PgStore`](crate::store::PgStore)): the handler's own SQL
/// and the delete commit together or not at all, so a job's database side effects happen
/// exactly once, across crashes and lease changes too. Registered with
/// [`JobsBuilder::handler_in_transaction`](crate::JobsBuilder::handler_in_transaction).
///
/// An error, a panic, or a commit that fails counts as a failed attempt (nothing of the
/// handler's is kept); a commit refused because the run's lease was lost meanwhile keeps
/// nothing either, and the shard's new holder runs the job.
#[cfg(feature = "postgres")]
pub trait SqlHandler: Send + Sync + 'static {
    /// Runs one job in `tx`.
    fn run(
        &self,
        cx: &JobContext<'_>,
        tx: &mut postgres::Transaction<'_>,
    ) -> Result<(), HandlerError>;
}

#[cfg(feature = "postgres")]
impl<F> SqlHandler for F
where
    F: Fn(&JobContext<'_>, &mut postgres::Transaction<'_>) -> Result<(), HandlerError>
        + Send
        + Sync
        + 'static,
{
    fn run(
        &self,
        cx: &JobContext<'_>,
        tx: &mut postgres::Transaction<'_>,
    ) -> Result<(), HandlerError> {
        self(cx, tx)
    }
}

/// How the jobs of a kind run.
#[derive(Clone)]
pub(crate) enum Runner {
    /// A handler; its outcome is committed after it.
    Plain(std::sync::Arc<dyn Handler>),
    /// A handler inside the store's transaction, with the job's delete.
    #[cfg(feature = "postgres")]
    InTransaction(std::sync::Arc<dyn SqlHandler>),
}

/// What a run of a handler sees: its job, its attempt, how late it started, and the jobs (to
/// schedule what follows).
pub struct JobContext<'a> {
    pub(crate) job: &'a Job,
    pub(crate) lateness: Duration,
    pub(crate) jobs: &'a Jobs,
}

impl JobContext<'_> {
    /// The job's key.
    pub fn key(&self) -> &str {
        &self.job.key
    }

    /// The job's kind.
    pub fn kind(&self) -> &str {
        &self.job.kind
    }

    /// The job's payload.
    pub fn payload(&self) -> &[u8] {
        &self.job.payload
    }

    /// The job's deadline.
    pub fn deadline(&self) -> SystemTime {
        self.job.deadline()
    }

    /// Which attempt this is: 1 for the first run, one more after each recorded failure. (A run
    /// cut short by a crash is not recorded: after a restart the same number comes again.)
    pub fn attempt(&self) -> u32 {
        self.job.attempts.saturating_add(1)
    }

    /// How late the run started, from the deadline on the wall clock.
    pub fn lateness(&self) -> Duration {
        self.lateness
    }

    /// The jobs this one belongs to: schedule, cancel or reschedule others from here. (This
    /// handle does not keep the jobs open: once the users' last handle goes, calls through it
    /// answer [`JobError::Closed`](crate::JobError::Closed).)
    pub fn jobs(&self) -> &Jobs {
        self.jobs
    }
}
