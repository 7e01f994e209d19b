//! A job's run: its timer task reads it from the store, claims it in the window, runs its
//! handler (a panic counts as a failure), and sends the outcome to the commit thread: delete it,
//! retry it after its backoff, or move it to the dead-letter set.
//!
//! The claim comes after the read: a cancel that commits before the claim removes the entry, so
//! the claim fails and nothing runs (the cancel answered `true`); one that commits after it finds
//! the job running and answers `false`, and the handler runs. Either way the answer tells the
//! truth. After the run the entry stays, done, until its outcome commits: a late report of the
//! same version, or a read that still finds it stored, then knows it ran.

use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use crate::Jobs;
use crate::engine::Engine;
use crate::handler::{JobContext, Runner};
use crate::store::{Lease, Op, Stored};
use crate::window::State;

thread_local! {
    /// Handlers running on this thread (a handler may close the jobs: `close` must not wait for
    /// it).
    static IN_HANDLER: Cell<usize> = const { Cell::new(0) };
}

/// Handlers running on this thread.
pub(crate) fn in_handler() -> usize {
    IN_HANDLER.with(Cell::get)
}

/// How long a job whose record could not be read waits to try again (wall ns).
const READ_RETRY: u64 = 1_000_000_000;

/// How long a job waits for its shard's late lease renewal before it looks again (wall ns).
const HOLD_OFF: u64 = 100_000_000;

/// Counts a run as running, here and for `close`, until it drops (however the run ends).
struct Running<'a>(&'a Engine);

impl<'a> Running<'a> {
    fn enter(engine: &'a Engine) -> Running<'a> {
        *engine.running.lock() += 1;
        IN_HANDLER.with(|c| c.set(c.get() + 1));
        Running(engine)
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        IN_HANDLER.with(|c| c.set(c.get() - 1));
        let mut running = self.0.running.lock();
        *running -= 1;
        if *running == 0 {
            self.0.idle.notify_all();
        }
    }
}

/// How a run went.
enum Ran {
    /// The handler succeeded: the job's delete follows.
    Succeeded,
    /// The handler succeeded in the store's transaction, which deleted the job with its writes.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    Completed,
    /// In the store's transaction, the job was gone or the lease lost: nothing was committed.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    Fenced,
    /// The handler failed (an error, a panic), or its transaction did: why.
    Failed(String),
}

impl Engine {
    /// The timer task of job `key` at `version` came due.
    pub(crate) fn fire(self: &Arc<Self>, key: &str, version: u64) {
        if self.closed.load(Relaxed) {
            return;
        }
        let now = self.now();
        let Some(lease) = self.due_now(key, version, now) else {
            return;
        };
        self.counters.reads.fetch_add(1, Relaxed);
        let stored = match self.store.get(key) {
            Ok(Some(s)) if s.version == version => s,
            // Changed or removed since it was armed: its newer write has its own entry.
            Ok(_) => return self.window.lock().forget(key, version),
            Err(_) => return self.read_later(key, version, now),
        };
        // Counted as running before the claim: a close that sees no run running has closed
        // first, and this run sees that and does not start.
        let running = Running::enter(self);
        if self.closed.load(Relaxed) {
            return;
        }
        // The claim (see the module docs), under a lease that still holds after the read.
        {
            let mut w = self.window.lock();
            if !self.store.holds(lease) {
                drop(w);
                return self.hold_off(key, version, now);
            }
            match w.entries.get_mut(key) {
                Some(e) if e.version == version && matches!(e.state, State::Armed(_)) => {
                    e.state = State::Running;
                }
                _ => return, // cancelled or replaced since the read
            }
        }
        self.run(stored, lease, now);
        drop(running);
        if self.closed.load(Relaxed) {
            // A handler closed the jobs: the close finishes when the last run has sent its
            // outcome.
            self.finish_close();
        }
    }

    /// Whether the armed job `key` at `version` may run now: its lease, if so.
    fn due_now(&self, key: &str, version: u64, now: u64) -> Option<Lease> {
        let mut w = self.window.lock();
        let e = w.entries.get(key)?;
        if e.version != version || !matches!(e.state, State::Armed(_)) {
            return None; // replaced meanwhile: the new version has a task of its own
        }
        let (shard, deadline) = (e.shard, e.deadline);
        let epoch = w.epoch(shard)?; // its shard is not held here any more
        let lease = Lease { shard, epoch };
        if !self.store.holds(lease) {
            drop(w);
            self.hold_off(key, version, now);
            return None;
        }
        if now < deadline {
            // The wall clock reads earlier than the timer's mapping said (it was set back):
            // never run before the wall clock reads the deadline.
            w.entries.get_mut(key)?.state = State::Armed(None);
            drop(w);
            self.arm(vec![(key.to_owned(), version, deadline)]);
            return None;
        }
        Some(lease)
    }

    /// The shard's lease does not hold by this node's clock right now (a renewal is late): the
    /// job waits. If the renewal comes, under the same epoch, it runs then; if the lease is lost,
    /// the loss's event takes the job out of memory.
    fn hold_off(&self, key: &str, version: u64, now: u64) {
        if let Some(e) = self.window.lock().entries.get_mut(key)
            && e.version == version
        {
            e.state = State::Armed(None);
        }
        self.arm(vec![(
            key.to_owned(),
            version,
            now.saturating_add(HOLD_OFF),
        )]);
    }

    /// The job could not be read: it stays armed, a second later.
    fn read_later(&self, key: &str, version: u64, now: u64) {
        let deadline = now.saturating_add(READ_RETRY);
        if let Some(e) = self.window.lock().entries.get_mut(key)
            && e.version == version
        {
            e.state = State::Armed(None);
            e.deadline = deadline;
        }
        self.arm(vec![(key.to_owned(), version, deadline)]);
    }

    /// Runs the claimed `stored` job under `lease`, and sends its outcome.
    fn run(self: &Arc<Self>, stored: Stored, lease: Lease, now: u64) {
        let (job, version) = (stored.job, stored.version);
        let key = job.key.as_str();
        let Some(handler) = self.handlers.get(&job.kind).cloned() else {
            // No handler (kept unrun at open): it stays stored.
            return self.window.lock().forget(key, version);
        };
        let late = now.saturating_sub(job.deadline);
        self.lateness.record(late);
        self.counters.fired.fetch_add(1, Relaxed);
        let jobs = Jobs::for_handler(self.clone());
        let cx = JobContext {
            job: &job,
            lateness: std::time::Duration::from_nanos(late),
            jobs: &jobs,
        };
        // Everything the user's code does, its errors' `Display` included, inside the catch.
        let outcome = catch_unwind(AssertUnwindSafe(|| match &handler {
            Runner::Plain(h) => match h.run(&cx) {
                Ok(()) => Ran::Succeeded,
                Err(e) => Ran::Failed(e.to_string()),
            },
            #[cfg(feature = "postgres")]
            Runner::InTransaction(h) => {
                let mut work = |tx: &mut postgres::Transaction<'_>| h.run(&cx, tx);
                match self.store.complete_in(key, version, lease, &mut work) {
                    Ok(true) => Ran::Completed,
                    Ok(false) => Ran::Fenced,
                    Err(e) => Ran::Failed(e.to_string()),
                }
            }
        }));
        let ran = outcome.unwrap_or_else(|panic| Ran::Failed(panic_text(panic)));
        let end = self.now();
        let op = match ran {
            Ran::Succeeded => {
                self.counters.succeeded.fetch_add(1, Relaxed);
                Op::Complete {
                    key: key.to_owned(),
                    version,
                    lease,
                }
            }
            Ran::Completed | Ran::Fenced => {
                // Committed with the handler's own writes, or (the lease lost, or the job gone
                // meanwhile) nothing committed and nothing more to do here.
                if matches!(ran, Ran::Completed) {
                    self.counters.succeeded.fetch_add(1, Relaxed);
                }
                return self.window.lock().forget(key, version);
            }
            Ran::Failed(reason) => {
                let failed = job.attempts.saturating_add(1);
                match self.config.retry.delay_after(failed) {
                    Some(delay) => {
                        let delay = u64::try_from(delay.as_nanos()).unwrap_or(u64::MAX);
                        Op::Retry {
                            key: key.to_owned(),
                            version,
                            deadline: end.saturating_add(delay),
                            lease,
                        }
                    }
                    None => Op::Bury {
                        key: key.to_owned(),
                        version,
                        reason,
                        at: end,
                        failed: true,
                        lease,
                    },
                }
            }
        };
        // Done, before the outcome is sent: its commit's report ends the entry. A cancel or
        // reschedule asked from now on is committed after this outcome.
        self.window.lock().ran(key, version);
        self.commit_later(op);
    }
}

/// The text of a panic's payload; the payload dropped with a catch of its own (its `Drop` is
/// user code too).
fn panic_text(panic: Box<dyn std::any::Any + Send>) -> String {
    let text = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a non-text payload".to_owned());
    if let Err(again) = catch_unwind(AssertUnwindSafe(move || drop(panic))) {
        std::mem::forget(again); // a payload whose drop panicked: its own is leaked, not dropped
    }
    format!("the handler panicked: {text}")
}
