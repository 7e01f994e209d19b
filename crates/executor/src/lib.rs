//! Runs fired timer tasks off the tick thread: a rayon pool with panic isolation, an inline
//! executor for tests, and the [`Executor`] trait to plug in your own.
//!
//! Submitting never blocks the caller: the tick thread hands a job over and goes back to the
//! wheel. A job that panics is caught, counted and reported with its message; the pool lives on.
//!
//! ```
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicUsize, Ordering};
//! use executor::{Executor, RayonExecutor};
//!
//! let pool = RayonExecutor::new(2, "demo").unwrap();
//! let ran = Arc::new(AtomicUsize::new(0));
//! let r = ran.clone();
//! pool.execute(Box::new(|| panic!("a broken task")));
//! pool.execute(Box::new(move || { r.fetch_add(1, Ordering::SeqCst); }));
//! pool.wait_idle();
//! assert_eq!(ran.load(Ordering::SeqCst), 1);
//! assert_eq!(pool.panics(), 1);
//! ```

use std::any::Any;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};

/// A unit of work handed to an executor.
pub type Job = Box<dyn FnOnce() + Send + 'static>;

/// Something that runs jobs, never blocking the caller of [`execute`](Executor::execute).
///
/// Implementations must not run the job on the calling thread unless they are meant for tests
/// (like [`InlineExecutor`]): the caller is the timer's tick thread.
pub trait Executor: Send + Sync + 'static {
    /// Runs `job` some time soon, on some thread.
    fn execute(&self, job: Job);
}

/// Runs `job`, catching a panic and returning its message.
pub fn isolate(job: impl FnOnce()) -> Result<(), String> {
    catch_unwind(AssertUnwindSafe(job)).map_err(|payload| panic_message(payload.as_ref()))
}

/// The message of a panic payload (`&str` or `String`), or a placeholder for other payloads.
pub fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "<non-string panic payload>".to_owned()
    }
}

/// Why a [`RayonExecutor`] could not be built.
#[derive(Debug)]
#[non_exhaustive]
pub enum PoolError {
    /// Zero threads were asked for.
    ZeroThreads,
    /// The operating system refused to start the threads.
    Spawn(String),
}

impl fmt::Display for PoolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PoolError::ZeroThreads => {
                f.write_str("invalid thread count 0: a pool needs at least one thread")
            }
            PoolError::Spawn(e) => write!(f, "could not start the executor's threads: {e}"),
        }
    }
}

impl std::error::Error for PoolError {}

/// Called with the message of every job that panicked.
pub type PanicHandler = Arc<dyn Fn(&str) + Send + Sync>;

/// Runs jobs on a rayon [`ThreadPool`](rayon::ThreadPool) of named threads.
///
/// Each job runs inside [`isolate`]: a panic is counted ([`panics`](Self::panics)), passed to the
/// panic handler, and the worker goes on. Dropping the executor lets queued jobs finish on the
/// pool's threads and does not wait for them.
pub struct RayonExecutor {
    pool: rayon::ThreadPool,
    shared: Arc<PoolShared>,
}

struct PoolShared {
    panics: AtomicU64,
    queued: Mutex<u64>,
    idle: Condvar,
    on_panic: Option<PanicHandler>,
}

impl RayonExecutor {
    /// A pool of `threads` threads named `{name}-exec-{i}`; panics are counted and otherwise
    /// silent.
    pub fn new(threads: usize, name: &str) -> Result<Self, PoolError> {
        Self::with_panic_handler(threads, name, None)
    }

    /// As [`new`](Self::new), calling `on_panic` with each panicking job's message.
    pub fn with_panic_handler(
        threads: usize,
        name: &str,
        on_panic: Option<PanicHandler>,
    ) -> Result<Self, PoolError> {
        if threads == 0 {
            return Err(PoolError::ZeroThreads);
        }
        let prefix = format!("{name}-exec");
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(move |i| format!("{prefix}-{i}"))
            .build()
            .map_err(|e| PoolError::Spawn(e.to_string()))?;
        let shared = Arc::new(PoolShared {
            panics: AtomicU64::new(0),
            queued: Mutex::new(0),
            idle: Condvar::new(),
            on_panic,
        });
        Ok(RayonExecutor { pool, shared })
    }

    /// Number of jobs that panicked so far.
    pub fn panics(&self) -> u64 {
        self.shared.panics.load(Ordering::Relaxed)
    }

    /// Number of threads in the pool.
    pub fn threads(&self) -> usize {
        self.pool.current_num_threads()
    }

    /// Blocks until every job submitted so far has finished. Must not be called from a job.
    pub fn wait_idle(&self) {
        let mut queued = self.shared.queued.lock().unwrap_or_else(|e| e.into_inner());
        while *queued > 0 {
            queued = self
                .shared
                .idle
                .wait(queued)
                .unwrap_or_else(|e| e.into_inner());
        }
    }
}

impl Executor for RayonExecutor {
    fn execute(&self, job: Job) {
        *self.shared.queued.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        let shared = self.shared.clone();
        self.pool.spawn(move || {
            if let Err(message) = isolate(job) {
                shared.panics.fetch_add(1, Ordering::Relaxed);
                if let Some(handler) = &shared.on_panic {
                    // A panicking handler must not take the worker down either.
                    let _ = isolate(|| handler(&message));
                }
            }
            let mut queued = shared.queued.lock().unwrap_or_else(|e| e.into_inner());
            *queued -= 1;
            if *queued == 0 {
                shared.idle.notify_all();
            }
        });
    }
}

impl fmt::Debug for RayonExecutor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RayonExecutor")
            .field("threads", &self.threads())
            .field("panics", &self.panics())
            .finish()
    }
}

/// Runs each job at once on the calling thread, catching panics. For tests: with it, "handed to
/// the executor" means "has run", which makes timing tests on a manual clock deterministic.
#[derive(Debug, Default)]
pub struct InlineExecutor {
    panics: AtomicU64,
}

impl InlineExecutor {
    /// A new inline executor.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of jobs that panicked so far.
    pub fn panics(&self) -> u64 {
        self.panics.load(Ordering::Relaxed)
    }
}

impl Executor for InlineExecutor {
    fn execute(&self, job: Job) {
        if isolate(job).is_err() {
            self.panics.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl<E: Executor + ?Sized> Executor for Arc<E> {
    fn execute(&self, job: Job) {
        (**self).execute(job)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn a_panicking_job_is_counted_reported_and_the_pool_lives_on() {
        let seen = Arc::new(Mutex::new(Vec::<String>::new()));
        let s = seen.clone();
        let handler: PanicHandler = Arc::new(move |m: &str| s.lock().unwrap().push(m.to_owned()));
        let pool = RayonExecutor::with_panic_handler(2, "t", Some(handler)).unwrap();
        let ran = Arc::new(AtomicUsize::new(0));
        for i in 0..100 {
            let ran = ran.clone();
            pool.execute(Box::new(move || {
                if i % 10 == 0 {
                    panic!("task {i} failed");
                }
                ran.fetch_add(1, Ordering::SeqCst);
            }));
        }
        pool.wait_idle();
        assert_eq!(ran.load(Ordering::SeqCst), 90);
        assert_eq!(pool.panics(), 10);
        let mut msgs = seen.lock().unwrap().clone();
        msgs.sort();
        assert_eq!(msgs.len(), 10);
        assert!(msgs.contains(&"task 0 failed".to_owned()), "{msgs:?}");
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
        assert!(
            name.lock().unwrap().starts_with("orders-exec-"),
            "{}",
            name.lock().unwrap()
        );
    }

    #[test]
    fn zero_threads_is_a_typed_error() {
        assert!(matches!(
            RayonExecutor::new(0, "x"),
            Err(PoolError::ZeroThreads)
        ));
    }

    #[test]
    fn inline_runs_at_once_and_catches_panics() {
        let ex = InlineExecutor::new();
        let ran = Arc::new(AtomicUsize::new(0));
        let r = ran.clone();
        ex.execute(Box::new(move || {
            r.fetch_add(1, Ordering::SeqCst);
        }));
        assert_eq!(ran.load(Ordering::SeqCst), 1, "ran before execute returned");
        ex.execute(Box::new(|| panic!("inline")));
        assert_eq!(ex.panics(), 1);
        assert_eq!(
            isolate(|| std::panic::panic_any(7u8)).unwrap_err(),
            "<non-string panic payload>"
        );
    }
}
