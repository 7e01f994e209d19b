//! The timer's own pool or the process-wide shared one, started by the first task that needs it:
//! a timer that only serves futures (whose wake-ups are done where they are handed out, never on
//! a pool) starts no executor thread.
//!
//! | state | `execute` | `threads()` |
//! |---|---|---|
//! | not started | starts the pool (once, whoever comes first; the others wait for it), then as below | the configured count, without starting it |
//! | started | hands the job to the pool | the pool's count |
//! | failed to start | runs the job on the calling thread (a timer's job catches its task's panic); the failure was reported once through the timer's panic path | the configured count |
//!
//! A pool that fails to start loses no task and panics on nothing: the timer's tasks run where
//! they are handed out (the tick thread, or an adding thread for a task already due), as on an
//! [`InlineExecutor`](tickwheel_executor::InlineExecutor), and the failure is counted in
//! `Stats::panicked` with its message (`Stats::last_panic`, the `on_panic` hook, the `tracing`
//! event). It is not retried: a thread spawn that failed once is likely to fail again, and each
//! try costs the hand-out that makes it. The shared pool keeps only a success, so a later timer
//! tries again.

use std::fmt;
use std::sync::{Arc, OnceLock};
use std::thread::available_parallelism;

use tickwheel_executor::{Executor, Job, PoolError, RayonExecutor};

use crate::service::panic::Panics;

/// What starts the pool.
type Start = Box<dyn Fn() -> Result<Arc<dyn Executor>, PoolError> + Send + Sync>;

/// A pool started on the first job handed to it (see the module docs).
pub(crate) struct LazyPool {
    threads: usize,
    start: Start,
    /// `None`: it failed to start, and jobs run on the calling thread.
    pool: OnceLock<Option<Arc<dyn Executor>>>,
    /// The timer's, to report a failure to start.
    panics: Arc<Panics>,
}

impl LazyPool {
    /// A pool of its own for one timer: `threads` threads named `{name}-exec-{i}`.
    pub(crate) fn own(threads: usize, name: &str, panics: Arc<Panics>) -> Self {
        let name = name.to_owned();
        let start: Start = Box::new(move || {
            RayonExecutor::new(threads, &name).map(|p| Arc::new(p) as Arc<dyn Executor>)
        });
        LazyPool::new(threads, start, panics)
    }

    /// The process-wide pool of every timer that does not ask for its own: as wide as the
    /// available parallelism, threads `tickwheel-shared-exec-{i}`, started by the first task of
    /// any such timer and kept for the life of the process.
    pub(crate) fn shared(panics: Arc<Panics>) -> Self {
        let threads = available_parallelism().map_or(2, |n| n.get());
        LazyPool::new(threads, Box::new(move || shared_pool(threads)), panics)
    }

    fn new(threads: usize, start: Start, panics: Arc<Panics>) -> Self {
        LazyPool {
            threads,
            start,
            pool: OnceLock::new(),
            panics,
        }
    }

    /// The pool, started if need be (`None` if it could not be).
    fn pool(&self) -> Option<&Arc<dyn Executor>> {
        let mut failed = None;
        let pool = self.pool.get_or_init(|| match (self.start)() {
            Ok(pool) => Some(pool),
            Err(e) => {
                failed = Some(e);
                None
            }
        });
        // Reported outside the cell's initialisation: the hook is the user's code, and may hand
        // the timer a task (which comes back here).
        if let Some(e) = failed {
            self.panics.report(format!(
                "{e}; the timer's tasks run on the threads that hand them out instead"
            ));
        }
        pool.as_ref()
    }

    /// True once the pool's threads run (for tests).
    #[cfg(all(test, not(loom)))]
    fn started(&self) -> bool {
        matches!(self.pool.get(), Some(Some(_)))
    }
}

impl Executor for LazyPool {
    fn execute(&self, job: Job) {
        match self.pool() {
            Some(pool) => pool.execute(job),
            None => job(),
        }
    }

    fn threads(&self) -> Option<usize> {
        match self.pool.get() {
            Some(Some(pool)) => pool.threads(),
            _ => Some(self.threads),
        }
    }
}

impl fmt::Debug for LazyPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LazyPool")
            .field("threads", &self.threads)
            .field("started", &self.pool.get().map(Option::is_some))
            .finish()
    }
}

/// The shared pool, started on first use. Two first uses racing: one pool wins, the other is
/// dropped (its threads end). A failure is not kept: a later use tries again.
fn shared_pool(threads: usize) -> Result<Arc<dyn Executor>, PoolError> {
    static SHARED: OnceLock<Arc<dyn Executor>> = OnceLock::new();
    if let Some(pool) = SHARED.get() {
        return Ok(pool.clone());
    }
    let pool: Arc<dyn Executor> = Arc::new(RayonExecutor::new(threads, "tickwheel-shared")?);
    Ok(SHARED.get_or_init(|| pool).clone())
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

    fn counting() -> (Arc<AtomicUsize>, Job) {
        let ran = Arc::new(AtomicUsize::new(0));
        let r = ran.clone();
        (
            ran,
            Box::new(move || {
                r.fetch_add(1, SeqCst);
            }),
        )
    }

    #[test]
    fn starts_on_the_first_job_and_says_its_width_before() {
        let pool = LazyPool::own(2, "lazy-unit", Arc::new(Panics::new(None)));
        assert!(!pool.started());
        assert_eq!(pool.threads(), Some(2));
        assert!(!pool.started(), "threads() starts nothing");
        let (ran, job) = counting();
        let (tx, rx) = std::sync::mpsc::channel();
        pool.execute(Box::new(move || {
            job();
            tx.send(std::thread::current().name().map(str::to_owned))
                .unwrap();
        }));
        let name = rx.recv().unwrap().unwrap_or_default();
        assert!(name.starts_with("lazy-unit-exec-"), "{name}");
        assert!(pool.started());
        assert_eq!(ran.load(SeqCst), 1);
        assert_eq!(pool.threads(), Some(2));
    }

    /// A pool whose threads cannot start (an injected spawn failure): every job runs on the
    /// calling thread, nothing panics, and the failure is reported once.
    #[test]
    fn a_pool_that_cannot_start_runs_jobs_where_they_are_handed_out() {
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let s = seen.clone();
        let panics = Arc::new(Panics::new(Some(Arc::new(move |m: &str| {
            s.lock().unwrap().push(m.to_owned())
        }))));
        let tries = Arc::new(AtomicUsize::new(0));
        let t = tries.clone();
        let start: Start = Box::new(move || {
            t.fetch_add(1, SeqCst);
            Err(PoolError::Spawn("injected: no more threads".to_owned()))
        });
        let pool = LazyPool::new(3, start, panics.clone());
        let here = std::thread::current().id();
        for _ in 0..3 {
            let (ran, job) = counting();
            let (tx, rx) = std::sync::mpsc::channel();
            pool.execute(Box::new(move || {
                job();
                tx.send(std::thread::current().id()).unwrap();
            }));
            assert_eq!(rx.try_recv().unwrap(), here, "ran on the calling thread");
            assert_eq!(ran.load(SeqCst), 1);
        }
        assert_eq!(tries.load(SeqCst), 1, "not retried");
        assert_eq!(panics.count(), 1);
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 1);
        assert!(seen[0].contains("injected: no more threads"), "{}", seen[0]);
        assert_eq!(pool.threads(), Some(3));
    }
}
