//! The commit thread: group commit. Every change to the store goes through one thread, which
//! takes all the requests waiting for it and applies them in one transaction, so concurrent
//! callers share one commit (and its fsync); then it tells the window what changed, and only then
//! answers the callers.
//!
//! | durability | a call returns | a crash loses |
//! |---|---|---|
//! | [`Durability::Immediate`] (default) | once its commit is on disk | nothing acknowledged |
//! | [`Durability::Within`]`(w)` | once its commit is in the store (visible to reads), not yet on disk | changes acknowledged in the last `w` at most |
//!
//! The jobs' own requests (the delete, retry or burial that ends a run) wait for nobody and need
//! no fsync of their own: a batch of only those is committed without one, and reaches the disk
//! with the next commit that has one, or within [`OWN_FLUSH`]. A crash before then runs the job
//! again (at least once: what a crash right after the run would do anyway), so a busy node does
//! not pay an fsync per run.
//!
//! A batch whose transaction fails is retried one request at a time, so one bad request cannot
//! fail the others with it. A failed request changed nothing: its caller gets the error. The
//! jobs' own requests are kept and tried again with the next batch.
//!
//! Callers and the thread meet at a queue under one lock with a condition variable (parked, not
//! spinning: with a thousand callers waiting, spinning and yielding took more CPU than the
//! commits); each caller waits for its answer the same way.

use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::error::StoreError;
use crate::stats::Histogram;
use crate::store::{Applied, Op, Store};

/// When a change is on disk (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Durability {
    /// Every call returns once its change is on disk: a crash loses nothing acknowledged.
    /// Concurrent calls share one fsync.
    #[default]
    Immediate,
    /// Calls return once their change is committed in memory (readable at once), and a commit
    /// that reaches the disk follows within this window: a crash loses at most the changes
    /// acknowledged in the last window. Many more changes per second from one thread.
    Within(Duration),
}

/// The longest the end of a run (its delete, retry or burial) waits to reach the disk.
pub const OWN_FLUSH: Duration = Duration::from_millis(200);

/// The most operations in one transaction.
const MAX_OPS: usize = 8192;

/// How long failed requests of the jobs' own wait before they are tried again.
const RETRY: Duration = Duration::from_millis(100);

/// An answer one thread waits for and another gives once.
pub(crate) struct Answer<T> {
    slot: Mutex<Option<T>>,
    given: Condvar,
}

impl<T> Answer<T> {
    pub(crate) fn new() -> Arc<Answer<T>> {
        Arc::new(Answer {
            slot: Mutex::new(None),
            given: Condvar::new(),
        })
    }

    fn give(&self, value: T) {
        *self.slot.lock() = Some(value);
        self.given.notify_one();
    }

    /// Waits for the answer.
    pub(crate) fn wait(&self) -> T {
        let mut slot = self.slot.lock();
        loop {
            if let Some(v) = slot.take() {
                return v;
            }
            self.given.wait(&mut slot);
        }
    }
}

/// What the commit thread is asked to do.
pub(crate) enum Request {
    /// Commit these ops.
    Ops(Pending),
    /// Make every earlier change durable, then answer.
    Sync(Arc<Answer<Result<(), StoreError>>>),
    /// Make every earlier change durable, answer, and stop.
    Stop(Arc<Answer<()>>),
}

/// Ops to commit; with a `reply`, the caller waits for the outcome (the jobs' own requests have
/// none). Dropped unanswered (the commit thread stopping, or unwinding), it answers that the
/// jobs are closed, with its ops: a caller never loses what it sent.
pub(crate) struct Pending {
    pub(crate) ops: Vec<Op>,
    pub(crate) reply: Option<Arc<Answer<Reply>>>,
    pub(crate) since: Instant,
    /// Failed commits so far (the jobs' own requests are tried again, up to [`OWN_TRIES`]).
    pub(crate) tries: u32,
}

/// How often the jobs' own request is tried before it is given up (about ten seconds of a
/// store that refuses it): the window then forgets the run and reads its shard again, so the
/// job, still stored, runs again (at least once) instead of holding memory for ever.
const OWN_TRIES: u32 = 100;

impl Drop for Pending {
    fn drop(&mut self) {
        if let Some(reply) = self.reply.take() {
            reply.give((std::mem::take(&mut self.ops), Err(StoreError::Closed)));
        }
    }
}

/// The answer to a request: its ops, back, and what they did.
pub(crate) type Reply = (Vec<Op>, Result<Vec<Applied>, StoreError>);

/// Where requests wait for the commit thread.
#[derive(Default)]
pub(crate) struct Queue {
    state: Mutex<QueueState>,
    work: Condvar,
}

#[derive(Default)]
struct QueueState {
    requests: Vec<Request>,
    /// No more requests are taken (the thread stopped, or is stopping).
    closed: bool,
    /// The thread waits for work (a push must wake it).
    idle: bool,
}

impl Queue {
    /// Queues `request`; it comes back if the queue is closed.
    pub(crate) fn push(&self, request: Request) -> Result<(), Request> {
        let mut q = self.state.lock();
        if q.closed {
            return Err(request);
        }
        let stop = matches!(request, Request::Stop(_));
        q.requests.push(request);
        q.closed |= stop;
        if q.idle {
            self.work.notify_one();
        }
        Ok(())
    }

    /// Every request waiting (at least one), waiting up to `limit` for one (`None`: no limit).
    /// Empty if the limit passed, or the queue is closed and drained.
    fn take(&self, limit: Option<Duration>) -> Vec<Request> {
        let mut q = self.state.lock();
        if q.requests.is_empty() && !q.closed {
            q.idle = true;
            match limit {
                Some(l) => {
                    let _ = self.work.wait_for(&mut q, l);
                }
                None => self.work.wait(&mut q),
            }
            q.idle = false;
        }
        std::mem::take(&mut q.requests)
    }

    /// Refuses further requests (the thread is gone).
    fn close(&self) {
        self.state.lock().closed = true;
    }
}

/// Told of every committed change, before its caller is answered (the window), which may
/// amend the answers (a cancel that came too late for a run that had begun).
pub(crate) trait Committed: Send + Sync {
    fn committed(&self, ops: &[Op], applied: &mut [Applied]);

    /// The jobs' own `ops` could not be committed and were given up.
    fn abandoned(&self, ops: &[Op]);
}

thread_local! {
    /// Set on the commit thread: a call into the jobs from there would wait for itself.
    static COMMIT_THREAD: Cell<bool> = const { Cell::new(false) };
}

/// True on the commit thread.
pub(crate) fn on_commit_thread() -> bool {
    COMMIT_THREAD.with(Cell::get)
}

/// The counters the commit thread keeps.
pub(crate) struct CommitStats {
    pub(crate) latency: Histogram,
    pub(crate) commits: AtomicU64,
    /// Commits that went to disk (fsync).
    pub(crate) durable: AtomicU64,
}

impl CommitStats {
    pub(crate) fn new() -> CommitStats {
        CommitStats {
            latency: Histogram::new(),
            commits: AtomicU64::new(0),
            durable: AtomicU64::new(0),
        }
    }
}

/// Starts the commit thread.
pub(crate) fn start(
    store: Arc<dyn Store>,
    durability: Durability,
    sink: Weak<dyn Committed>,
    stats: Arc<CommitStats>,
    queue: Arc<Queue>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("tickwheel-durable-commit".into())
        .spawn(move || {
            COMMIT_THREAD.with(|c| c.set(true));
            // If the loop ever ends by a panic, later callers get `Closed` instead of waiting
            // for it; the requests it held answer as they drop.
            let closing = CloseOnDrop(queue.clone());
            Committer {
                store,
                durability,
                sink,
                stats,
                dirty: None,
                again: Vec::new(),
            }
            .run(&queue);
            drop(closing);
        })
}

/// Closes the queue when the commit thread's loop ends, however it ends.
struct CloseOnDrop(Arc<Queue>);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        self.0.close();
        // What is still queued is answered: closed.
        let left = std::mem::take(&mut self.0.state.lock().requests);
        for r in left {
            match r {
                Request::Ops(p) => drop(p), // answers as it drops
                Request::Sync(reply) => reply.give(Err(StoreError::Closed)),
                Request::Stop(done) => done.give(()),
            }
        }
    }
}

struct Committer {
    store: Arc<dyn Store>,
    durability: Durability,
    sink: Weak<dyn Committed>,
    stats: Arc<CommitStats>,
    /// When the oldest commit not yet on disk was made.
    dirty: Option<Instant>,
    /// The jobs' own requests whose commit failed: tried again with the next batch.
    again: Vec<Request>,
}

impl Committer {
    fn run(mut self, queue: &Queue) {
        loop {
            let mut waiting = queue.take(self.limit());
            if waiting.is_empty() {
                // A deadline passed: put the last commits on disk, try failed requests again.
                if self
                    .dirty
                    .is_some_and(|since| since.elapsed() >= self.window())
                {
                    let _ = self.flush();
                }
                if !self.again.is_empty() {
                    self.commit(Vec::new(), false);
                }
                continue;
            }
            let stop = waiting.iter().position(|r| matches!(r, Request::Stop(_)));
            let stopping = stop.map(|i| waiting.split_off(i));
            // At most MAX_OPS per transaction: a flood is committed in several.
            let mut batch = Vec::new();
            let mut ops = 0;
            for r in waiting {
                ops += batch_ops(&r);
                batch.push(r);
                if ops >= MAX_OPS {
                    self.commit(std::mem::take(&mut batch), false);
                    ops = 0;
                }
            }
            if !batch.is_empty() || stopping.is_some() {
                self.commit(batch, stopping.is_some());
            }
            if let Some(rest) = stopping {
                let _ = self.flush();
                queue.close();
                for r in rest {
                    if let Request::Stop(done) = r {
                        done.give(());
                    }
                }
                return;
            }
        }
    }

    /// How long commits may stay off the disk.
    fn window(&self) -> Duration {
        match self.durability {
            Durability::Immediate => OWN_FLUSH,
            Durability::Within(w) => w,
        }
    }

    /// How long to wait for the next request: until the window closes (if a commit is not yet
    /// on disk), or until failed requests are tried again.
    fn limit(&self) -> Option<Duration> {
        let flush = (self.dirty).map(|since| self.window().saturating_sub(since.elapsed()));
        match (flush, self.again.is_empty()) {
            (l, true) => l,
            (l, false) => Some(l.map_or(RETRY, |l| l.min(RETRY))),
        }
    }

    /// Commits `batch` (and the requests to try again) in one transaction, or failing that one
    /// request at a time.
    fn commit(&mut self, mut batch: Vec<Request>, stopping: bool) {
        let mut requests = std::mem::take(&mut self.again);
        requests.append(&mut batch);
        let durable = self.durable_now(stopping, &requests);
        // The requests' ops, moved into one list, and how many each had.
        let mut counts = Vec::with_capacity(requests.len());
        let mut ops = Vec::new();
        for r in &mut requests {
            let mine = match r {
                Request::Ops(p) => std::mem::take(&mut p.ops),
                _ => Vec::new(),
            };
            counts.push(mine.len());
            ops.extend(mine);
        }
        let result = self.apply(&ops, durable);
        // Each request's ops, back.
        let mut ops = ops.into_iter();
        for (r, &n) in requests.iter_mut().zip(&counts) {
            if let Request::Ops(p) = r {
                p.ops.extend(ops.by_ref().take(n));
            }
        }
        match result {
            Ok(applied) => {
                let mut applied = applied.into_iter();
                for (r, n) in requests.into_iter().zip(counts) {
                    let mine = applied.by_ref().take(n).collect();
                    self.answer(r, Ok(mine));
                }
            }
            // One at a time: a failing request fails alone.
            Err(_) if requests.len() > 1 => {
                for r in requests {
                    let result = match &r {
                        Request::Ops(p) => self.apply(&p.ops, durable),
                        _ => self.apply(&[], true),
                    };
                    self.answer(r, result);
                }
            }
            Err(e) => {
                for r in requests {
                    self.answer(r, Err(copy(&e)));
                }
            }
        }
    }

    /// Whether this batch's commit goes to disk: when a caller waits for it (under `Immediate`),
    /// when asked to (a sync, a stop), or when the window of earlier commits is up.
    fn durable_now(&self, stopping: bool, requests: &[Request]) -> bool {
        let waited_for = |r: &Request| match r {
            Request::Ops(p) => p.reply.is_some() && self.durability == Durability::Immediate,
            Request::Sync(_) | Request::Stop(_) => true,
        };
        stopping
            || requests.iter().any(waited_for)
            || self
                .dirty
                .is_some_and(|since| since.elapsed() >= self.window())
    }

    fn apply(&mut self, ops: &[Op], durable: bool) -> Result<Vec<Applied>, StoreError> {
        // A store of the user's may break its contract and panic: that is its error, not the
        // end of the commit thread (which every caller waits on).
        let applied = catch_unwind(AssertUnwindSafe(|| self.store.apply(ops, durable)));
        let mut applied = applied
            .unwrap_or_else(|_| Err(StoreError::Other("the store panicked in apply".into())))?;
        self.stats.commits.fetch_add(1, Relaxed);
        if let Some(sink) = self.sink.upgrade() {
            let report = catch_unwind(AssertUnwindSafe(|| sink.committed(ops, &mut applied)));
            debug_assert!(report.is_ok(), "the window's report of a commit panicked");
        }
        if durable {
            self.stats.durable.fetch_add(1, Relaxed);
            self.dirty = None;
        } else {
            self.dirty.get_or_insert_with(Instant::now);
        }
        Ok(applied)
    }

    /// Puts every commit on disk, if one is not.
    fn flush(&mut self) -> Result<(), StoreError> {
        if self.dirty.is_some() {
            self.apply(&[], true)?;
        }
        Ok(())
    }

    fn answer(&mut self, request: Request, result: Result<Vec<Applied>, StoreError>) {
        match request {
            Request::Ops(mut p) => {
                let waited = p.since.elapsed().as_nanos();
                self.stats
                    .latency
                    .record(u64::try_from(waited).unwrap_or(u64::MAX));
                match (p.reply.take(), result) {
                    (Some(reply), result) => reply.give((std::mem::take(&mut p.ops), result)),
                    (None, Ok(_)) => {}
                    // The jobs' own request failed: keep it for the next batch, or give it up.
                    (None, Err(_)) => {
                        p.tries += 1;
                        if p.tries < OWN_TRIES {
                            self.again.push(Request::Ops(p));
                        } else if let Some(sink) = self.sink.upgrade() {
                            let _ = catch_unwind(AssertUnwindSafe(|| sink.abandoned(&p.ops)));
                        }
                    }
                }
            }
            Request::Sync(reply) => {
                // Every change made before, the runs' outcomes included: those still waiting
                // to be tried again are not committed yet.
                let result = result.and_then(|_| match self.again.len() {
                    0 => Ok(()),
                    n => Err(StoreError::Other(
                        format!("{n} outcomes of runs are not committed yet (retried)").into(),
                    )),
                });
                reply.give(result);
            }
            Request::Stop(done) => done.give(()),
        }
    }
}

fn batch_ops(r: &Request) -> usize {
    match r {
        Request::Ops(p) => p.ops.len(),
        _ => 0,
    }
}

/// A store error for one more caller (an I/O error's kind and text; the others as they are).
fn copy(e: &StoreError) -> StoreError {
    match e {
        StoreError::Io(io) => StoreError::Io(std::io::Error::new(io.kind(), io.to_string())),
        StoreError::Corrupt(why) => StoreError::Corrupt(why.clone()),
        StoreError::Closed => StoreError::Closed,
        StoreError::Other(o) => StoreError::Other(o.to_string().into()),
    }
}
