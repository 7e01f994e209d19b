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
//! A batch whose transaction fails is retried one request at a time, so one bad request cannot
//! fail the others with it. A failed request changed nothing: its caller gets the error. The
//! jobs' own requests (a completed or failed run) are kept and tried again with the next batch.

use std::cell::Cell;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

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

/// The most operations in one transaction.
const MAX_OPS: usize = 8192;

/// What the commit thread is asked to do.
pub(crate) enum Request {
    /// Commit these ops.
    Ops(Pending),
    /// Make every earlier change durable, then answer.
    Sync(Sender<Result<(), StoreError>>),
    /// Make every earlier change durable, answer, and stop.
    Stop(Sender<()>),
}

/// Ops to commit; with a `reply`, the caller waits for the outcome (the jobs' own requests have
/// none). Dropped unanswered (the commit thread stopping, or unwinding), it answers that the
/// jobs are closed, with its ops: a caller never loses what it sent.
pub(crate) struct Pending {
    pub(crate) ops: Vec<Op>,
    pub(crate) reply: Option<Sender<Reply>>,
    pub(crate) since: Instant,
}

impl Drop for Pending {
    fn drop(&mut self) {
        if let Some(reply) = self.reply.take() {
            let _ = reply.send((std::mem::take(&mut self.ops), Err(StoreError::Closed)));
        }
    }
}

/// The answer to a request: its ops, back, and what they did.
pub(crate) type Reply = (Vec<Op>, Result<Vec<Applied>, StoreError>);

/// Told of every committed change, before its caller is answered (the window), which may
/// amend the answers (a cancel that came too late for a run that had begun).
pub(crate) trait Committed: Send + Sync {
    fn committed(&self, ops: &[Op], applied: &mut [Applied]);
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
    pub(crate) commits: std::sync::atomic::AtomicU64,
}

impl CommitStats {
    pub(crate) fn new() -> CommitStats {
        CommitStats {
            latency: Histogram::new(),
            commits: std::sync::atomic::AtomicU64::new(0),
        }
    }
}

/// Starts the commit thread.
pub(crate) fn start(
    store: Arc<dyn Store>,
    durability: Durability,
    sink: Weak<dyn Committed>,
    stats: Arc<CommitStats>,
    rx: Receiver<Request>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("tickwheel-durable-commit".into())
        .spawn(move || {
            COMMIT_THREAD.with(|c| c.set(true));
            Committer {
                store,
                durability,
                sink,
                stats,
                dirty: None,
                again: Vec::new(),
            }
            .run(rx);
        })
}

struct Committer {
    store: Arc<dyn Store>,
    durability: Durability,
    sink: Weak<dyn Committed>,
    stats: Arc<CommitStats>,
    /// When the oldest commit not yet on disk was made (`Within` only).
    dirty: Option<Instant>,
    /// The jobs' own requests whose commit failed: tried again with the next batch.
    again: Vec<Request>,
}

impl Committer {
    fn run(mut self, rx: Receiver<Request>) {
        loop {
            let first = match self.wait(&rx) {
                Ok(r) => r,
                Err(RecvTimeoutError::Timeout) => {
                    // The window is up: put the last commits on disk.
                    let _ = self.flush();
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let _ = self.flush();
                    return;
                }
            };
            let mut batch = vec![first];
            let mut ops = batch_ops(&batch[0]);
            while ops < MAX_OPS && !matches!(batch.last(), Some(Request::Stop(_))) {
                match rx.try_recv() {
                    Ok(r) => {
                        ops += batch_ops(&r);
                        batch.push(r);
                    }
                    Err(_) => break,
                }
            }
            let stop = match batch.last() {
                Some(Request::Stop(_)) => batch.pop(),
                _ => None,
            };
            self.commit(batch, stop.is_some());
            if let Some(Request::Stop(done)) = stop {
                let _ = self.flush();
                let _ = done.send(());
                return;
            }
        }
    }

    /// The next request, waiting at most until the window's deadline (if a commit is not yet on
    /// disk), or for a retry of failed requests.
    fn wait(&self, rx: &Receiver<Request>) -> Result<Request, RecvTimeoutError> {
        let limit = match (self.durability, self.dirty) {
            (Durability::Within(w), Some(since)) => Some(w.saturating_sub(since.elapsed())),
            _ => None,
        };
        let limit = match (limit, self.again.is_empty()) {
            (l, true) => l,
            (l, false) => Some(l.map_or(RETRY, |l| l.min(RETRY))),
        };
        match limit {
            Some(l) => rx.recv_timeout(l),
            None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
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

    /// Whether this batch's commit goes to disk: always under `Immediate`; under `Within`, when
    /// asked to (a sync, a stop) or when the window is up.
    fn durable_now(&self, stopping: bool, requests: &[Request]) -> bool {
        match self.durability {
            Durability::Immediate => true,
            Durability::Within(w) => {
                stopping
                    || requests.iter().any(|r| matches!(r, Request::Sync(_)))
                    || self.dirty.is_some_and(|since| since.elapsed() >= w)
            }
        }
    }

    fn apply(&mut self, ops: &[Op], durable: bool) -> Result<Vec<Applied>, StoreError> {
        let mut applied = self.store.apply(ops, durable)?;
        self.stats
            .commits
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if let Some(sink) = self.sink.upgrade() {
            sink.committed(ops, &mut applied);
        }
        if durable {
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
                    (Some(reply), result) => drop(reply.send((std::mem::take(&mut p.ops), result))),
                    (None, Ok(_)) => {}
                    // The jobs' own request failed: keep it for the next batch.
                    (None, Err(_)) => self.again.push(Request::Ops(p)),
                }
            }
            Request::Sync(reply) => drop(reply.send(result.map(drop))),
            Request::Stop(done) => drop(done.send(())),
        }
    }
}

/// How long failed requests of the jobs' own wait before they are tried again.
const RETRY: Duration = Duration::from_millis(100);

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
