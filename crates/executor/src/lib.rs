//! Runs fired timer tasks off the tick thread: the [`Executor`] trait, a rayon pool
//! ([`RayonExecutor`]) and an inline executor for tests ([`InlineExecutor`]).
//!
//! This crate has one job: hand a job to threads without blocking the caller (the timer's tick
//! thread). Catching, counting and reporting a task's panic is the timer's business (it does so
//! inside every job it submits); a pool here only makes sure a panicking job cannot take one of
//! its workers down.
//!
//! ```
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicUsize, Ordering};
//! use tickwheel_executor::{Executor, RayonExecutor};
//!
//! let pool = RayonExecutor::new(2, "demo").unwrap();
//! let ran = Arc::new(AtomicUsize::new(0));
//! for _ in 0..10 {
//!     let r = ran.clone();
//!     pool.execute(Box::new(move || {
//!         r.fetch_add(1, Ordering::SeqCst);
//!     }));
//! }
//! pool.wait_idle();
//! assert_eq!(ran.load(Ordering::SeqCst), 10);
//! ```

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};

/// A unit of work handed to an executor.
pub type Job = Box<dyn FnOnce() + Send + 'static>;

/// Something that runs jobs, never blocking the caller of [`execute`](Executor::execute).
///
/// Implementations must not run the job on the calling thread unless they are meant for tests
/// (like [`InlineExecutor`]): the caller is a timer's tick thread. An executor may drop a job
/// without running it (a pool shutting down); a timer notices and hands the task back from its
/// `shutdown`.
///
/// `execute` is also called from inside the executor's own jobs: a timer that finds many tasks
/// due at once sends them as a few jobs, each of which hands its tasks on to the same executor.
/// So `execute` must not wait for a job of its own to finish (a bounded queue that blocks when
/// full would deadlock), and jobs should run in about the order they were given (FIFO), or a
/// round's tasks run latest first.
///
/// An executor of your own, here one that hands every job to a thread of its own (fine for a
/// few long jobs; a pool is better for many):
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use std::sync::Arc;
/// use tickwheel_executor::{Executor, Job};
///
/// struct ThreadPerJob;
///
/// impl Executor for ThreadPerJob {
///     fn execute(&self, job: Job) {
///         // Never blocks the caller (a timer's tick thread): the job runs elsewhere.
///         std::thread::spawn(job);
///     }
/// }
///
/// let ran = Arc::new(AtomicUsize::new(0));
/// let r = ran.clone();
/// let (tx, rx) = std::sync::mpsc::channel();
/// ThreadPerJob.execute(Box::new(move || {
///     r.fetch_add(1, Ordering::SeqCst);
///     tx.send(()).unwrap();
/// }));
/// rx.recv().unwrap();
/// assert_eq!(ran.load(Ordering::SeqCst), 1);
/// ```
pub trait Executor: Send + Sync + 'static {
    /// Runs `job` some time soon, on some thread.
    fn execute(&self, job: Job);

    /// How many jobs it runs at once, if it has a fixed number of threads. A timer uses it to
    /// keep one class of tasks from taking every thread (see the timer's isolation settings);
    /// `None` (the default) means "unknown", and no such share is enforced.
    fn threads(&self) -> Option<usize> {
        None
    }
}

impl<E: Executor + ?Sized> Executor for Arc<E> {
    fn execute(&self, job: Job) {
        (**self).execute(job)
    }

    fn threads(&self) -> Option<usize> {
        (**self).threads()
    }
}

/// Why a [`RayonExecutor`] could not be built.
#[derive(Debug)]
#[non_exhaustive]
pub enum PoolError {
    /// Zero threads were asked for.
    ZeroThreads,
    /// The thread name prefix holds a NUL byte, which no operating system accepts.
    InvalidName,
    /// The operating system refused to start the threads.
    Spawn(String),
}

impl fmt::Display for PoolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PoolError::ZeroThreads => {
                f.write_str("invalid thread count 0: a pool needs at least one thread")
            }
            PoolError::InvalidName => f.write_str("invalid thread name: it contains a NUL byte"),
            PoolError::Spawn(e) => write!(f, "could not start the executor's threads: {e}"),
        }
    }
}

impl std::error::Error for PoolError {}

/// Runs jobs on a rayon [`ThreadPool`](rayon::ThreadPool) of named threads.
///
/// A job that panics is caught by the pool (its worker goes on); nothing is counted here.
/// Dropping the executor lets queued jobs finish on the pool's threads and does not wait for them.
pub struct RayonExecutor {
    pool: rayon::ThreadPool,
    outstanding: Arc<Outstanding>,
}

/// Jobs submitted and not yet finished: one atomic per job, and a lock only for `wait_idle`.
#[derive(Default)]
struct Outstanding {
    count: AtomicU64,
    lock: Mutex<()>,
    idle: Condvar,
}

impl Outstanding {
    fn done(&self) {
        if self.count.fetch_sub(1, Ordering::SeqCst) == 1 {
            // Taking the lock orders this notification after a waiter's check of the count.
            drop(self.lock.lock().unwrap_or_else(|e| e.into_inner()));
            self.idle.notify_all();
        }
    }
}

/// Marks its job finished when dropped: after it ran, panicked, or was dropped unrun.
struct Finished(Arc<Outstanding>);

impl Drop for Finished {
    fn drop(&mut self) {
        self.0.done();
    }
}

impl RayonExecutor {
    /// A pool of `threads` threads named `{name}-exec-{i}`.
    pub fn new(threads: usize, name: &str) -> Result<Self, PoolError> {
        if threads == 0 {
            return Err(PoolError::ZeroThreads);
        }
        if name.contains('\0') {
            return Err(PoolError::InvalidName);
        }
        let prefix = format!("{name}-exec");
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(move |i| format!("{prefix}-{i}"))
            // Without a handler rayon aborts the process on a panicking job.
            .panic_handler(|_| {})
            .build()
            .map_err(|e| PoolError::Spawn(e.to_string()))?;
        Ok(RayonExecutor {
            pool,
            outstanding: Arc::default(),
        })
    }

    /// Number of threads in the pool.
    pub fn threads(&self) -> usize {
        self.pool.current_num_threads()
    }

    /// Blocks until every job submitted so far has finished. Must not be called from a job of
    /// this pool (it would wait for itself).
    pub fn wait_idle(&self) {
        let mut guard = self
            .outstanding
            .lock
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        while self.outstanding.count.load(Ordering::SeqCst) > 0 {
            guard = self
                .outstanding
                .idle
                .wait(guard)
                .unwrap_or_else(|e| e.into_inner());
        }
    }
}

impl Executor for RayonExecutor {
    fn execute(&self, job: Job) {
        self.outstanding.count.fetch_add(1, Ordering::SeqCst);
        let finished = Finished(self.outstanding.clone());
        // FIFO: a job handed over from one of the pool's own threads (a timer hands a chunk of
        // due tasks to one thread, which hands each on) goes on that thread's own queue, and
        // `spawn` would run the last one handed over first.
        self.pool.spawn_fifo(move || {
            let _finished = finished;
            job();
        });
    }

    fn threads(&self) -> Option<usize> {
        Some(self.pool.current_num_threads())
    }
}

impl fmt::Debug for RayonExecutor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RayonExecutor")
            .field("threads", &self.threads())
            .field(
                "outstanding",
                &self.outstanding.count.load(Ordering::Relaxed),
            )
            .finish()
    }
}

/// Runs each job at once on the calling thread. For tests: with it, "handed to the executor"
/// means "has run", which makes timing tests on a manual clock exact. A job's panic reaches the
/// caller (a timer's own jobs never panic: they catch their task's panic themselves).
#[derive(Debug, Default)]
pub struct InlineExecutor;

impl InlineExecutor {
    /// A new inline executor.
    pub fn new() -> Self {
        InlineExecutor
    }
}

impl Executor for InlineExecutor {
    fn execute(&self, job: Job) {
        job();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn a_panicking_job_does_not_take_a_worker_down() {
        let pool = RayonExecutor::new(1, "t").unwrap();
        let ran = Arc::new(AtomicUsize::new(0));
        for i in 0..100 {
            let ran = ran.clone();
            pool.execute(Box::new(move || {
                if i % 10 == 0 {
                    panic!("job {i} failed");
                }
                ran.fetch_add(1, Ordering::SeqCst);
            }));
        }
        pool.wait_idle();
        assert_eq!(ran.load(Ordering::SeqCst), 90);
    }

    #[test]
    fn threads_are_named_and_counted() {
        let pool = RayonExecutor::new(3, "orders").unwrap();
        assert_eq!(pool.threads(), 3);
        let name = Arc::new(Mutex::new(String::new()));
        let n = name.clone();
        pool.execute(Box::new(move || {
            *n.lock().unwrap() = std::thread::current().name().unwrap_or("").to_owned()
        }));
        pool.wait_idle();
        let name = name.lock().unwrap().clone();
        assert!(name.starts_with("orders-exec-"), "{name}");
    }

    #[test]
    fn bad_configurations_are_typed_errors() {
        assert!(matches!(
            RayonExecutor::new(0, "x"),
            Err(PoolError::ZeroThreads)
        ));
        assert!(matches!(
            RayonExecutor::new(1, "a\0b"),
            Err(PoolError::InvalidName)
        ));
    }

    #[test]
    fn inline_runs_before_execute_returns() {
        let ran = Arc::new(AtomicUsize::new(0));
        let r = ran.clone();
        InlineExecutor::new().execute(Box::new(move || {
            r.fetch_add(1, Ordering::SeqCst);
        }));
        assert_eq!(ran.load(Ordering::SeqCst), 1);
    }
}
