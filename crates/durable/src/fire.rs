//! A job's run: its timer task claims it in the window, reads it from the store, runs its handler
//! (a panic counts as a failure), and sends the outcome to the commit thread: delete it, retry it
//! after its backoff, or move it to the dead-letter set.

use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use crate::Jobs;
use crate::engine::Engine;
use crate::handler::{JobContext, Runner};
use crate::store::{Lease, Op};
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

impl Engine {
    /// The timer task of job `key` at `version` came due.
    pub(crate) fn fire(self: &Arc<Self>, key: &str, version: u64) {
        if self.closed.load(Relaxed) {
            return;
        }
        let now = self.now();
        let lease = {
            let mut w = self.window.lock();
            let Some(e) = w.entries.get(key) else {
                return; // cancelled, or moved out of the window
            };
            if e.version != version || !matches!(e.state, State::Armed(_)) {
                return; // replaced meanwhile: the new version has a task of its own
            }
            let shard = e.shard;
            let Some(epoch) = w.epoch(shard) else {
                return; // its shard is not held here any more
            };
            let lease = Lease { shard, epoch };
            if !self.store.holds(lease) {
                // The lease may pass to another node any moment: this node fires nothing more
                // of the shard (its loss is on its way as an event).
                return w.release(shard);
            }
            let e = w.entries.get_mut(key).expect("looked up under this lock");
            if now < e.deadline {
                // The wall clock reads earlier than the timer's mapping said (it was set back):
                // never run before the wall clock reads the deadline.
                let deadline = e.deadline;
                e.state = State::Armed(None);
                drop(w);
                return self.arm(vec![(key.to_owned(), version, deadline)]);
            }
            e.state = State::Running;
            lease
        };
        *self.running.lock() += 1;
        IN_HANDLER.with(|c| c.set(c.get() + 1));
        self.run(key, version, now, lease);
        IN_HANDLER.with(|c| c.set(c.get() - 1));
        let mut running = self.running.lock();
        *running -= 1;
        if *running == 0 {
            self.idle.notify_all();
        }
    }

    /// Runs the claimed job `key` at `version`, and sends its outcome.
    fn run(self: &Arc<Self>, key: &str, version: u64, now: u64, lease: Lease) {
        self.counters.reads.fetch_add(1, Relaxed);
        let stored = match self.store.get(key) {
            Ok(Some(s)) if s.version == version => s,
            // Changed or removed since it was armed: its newer write has its own entry.
            Ok(_) => return self.window.lock().forget(key, version),
            Err(_) => {
                // Could not read it: it stays armed, a second later.
                let deadline = now.saturating_add(READ_RETRY);
                if let Some(e) = self.window.lock().entries.get_mut(key)
                    && e.version == version
                {
                    e.state = State::Armed(None);
                    e.deadline = deadline;
                }
                return self.arm(vec![(key.to_owned(), version, deadline)]);
            }
        };
        let job = stored.job;
        let Some(handler) = self.handlers.get(&job.kind).cloned() else {
            // No handler (kept unrun at open): it stays stored.
            return self.window.lock().forget(key, version);
        };
        let Some(jobs) = Jobs::of(self) else {
            // Closing: it stays stored, for the next open.
            return self.window.lock().forget(key, version);
        };
        let late = now.saturating_sub(job.deadline);
        self.lateness.record(late);
        self.counters.fired.fetch_add(1, Relaxed);
        let cx = JobContext {
            job: &job,
            lateness: std::time::Duration::from_nanos(late),
            jobs: &jobs,
        };
        let outcome = catch_unwind(AssertUnwindSafe(|| match &handler {
            Runner::Plain(h) => h.run(&cx).map(|()| Ran::Succeeded),
            #[cfg(feature = "postgres")]
            Runner::InTransaction(h) => {
                let mut work = |tx: &mut postgres::Transaction<'_>| h.run(&cx, tx);
                match self.store.complete_in(key, version, lease, &mut work)? {
                    true => Ok(Ran::Completed),
                    false => Ok(Ran::Fenced),
                }
            }
        }));
        let ran = match outcome {
            Ok(Ok(ran)) => ran,
            Ok(Err(e)) => Ran::Failed(e.to_string()),
            Err(panic) => Ran::Failed(panic_text(panic.as_ref())),
        };
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
                // Committed with the handler's own writes, or (the lease lost, or the job
                // gone meanwhile) nothing committed and nothing more to do here.
                if matches!(ran, Ran::Completed) {
                    self.counters.succeeded.fetch_add(1, Relaxed);
                }
                self.window.lock().forget(key, version);
                return;
            }
            Ran::Failed(reason) => {
                let failed = job.attempts.saturating_add(1);
                match self.config.retry.delay_after(failed) {
                    Some(delay) => {
                        self.counters.retried.fetch_add(1, Relaxed);
                        let delay = u64::try_from(delay.as_nanos()).unwrap_or(u64::MAX);
                        Op::Retry {
                            key: key.to_owned(),
                            version,
                            deadline: end.saturating_add(delay),
                            lease,
                        }
                    }
                    None => {
                        self.counters.dead.fetch_add(1, Relaxed);
                        Op::Bury {
                            key: key.to_owned(),
                            version,
                            reason,
                            at: end,
                            failed: true,
                            lease,
                        }
                    }
                }
            }
        };
        // Sent before the entry goes: a cancel or reschedule asked from now on is committed
        // after this outcome.
        self.commit_later(op);
        self.window.lock().forget(key, version);
        drop(jobs);
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

/// The text of a panic's payload.
fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    let text = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a non-text payload".to_owned());
    format!("the handler panicked: {text}")
}
