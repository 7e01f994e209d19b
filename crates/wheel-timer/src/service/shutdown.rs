//! Shutdown: refuse adds, stop the tick thread, claim every task that has not started, wait for
//! the running ones (for at most a limit, if given), run the due ones if asked, and collect the
//! rest earliest first (the API turns them back into `Task`s: `api/shutdown.rs`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::loom::atomic::Ordering::*;
use crate::service::core::Core;
use crate::service::core::Returned;
use crate::service::job::{next_run, skip, start_run};
use crate::service::running::active;
use crate::service::work::{Cadence, MisfirePolicy, Repeat, Work};

/// What a shutdown collected, for the API to hand back (see `api/shutdown.rs`).
#[derive(Default)]
pub(crate) struct Collected {
    /// The tasks that never ran, earliest deadline first.
    pub(crate) back: Vec<Returned>,
    /// The shutdown's clock reading.
    pub(crate) now: u64,
    /// Due tasks run on the calling thread.
    pub(crate) ran_due: u64,
    /// Tasks still running when the wait limit passed.
    pub(crate) still_running: u64,
}

impl Core {
    /// See [`Timer::shutdown_with`](crate::Timer::shutdown_with): runs the due tasks if
    /// `run_due`, waits at most `limit` for running ones. Idempotent: only the first call does
    /// anything.
    pub(crate) fn shutdown(self: &Arc<Self>, run_due: bool, limit: Option<Duration>) -> Collected {
        let limit = limit.map(|l| Instant::now().checked_add(l));
        if !self.lifecycle.begin_close() {
            return Collected::default();
        }
        // The other half of the add's handshake (`add.rs`): an add either sees the lifecycle
        // closing or its slot is seen by the scans below.
        tickwheel_reaper::barrier::heavy();
        // Joined, unless this is the tick thread itself (a task on an inline executor): it then
        // exits after its current batch, whose tasks are `DUE` and claimed below.
        self.reaper.close();
        let now = self.clock.now();
        let mut back: Vec<Returned> = Vec::new();
        // Adds racing this see the lifecycle and take their task back, or their slot is seen
        // here (see `add.rs`); a shard registered meanwhile is counted before its first add.
        for shard in self.shards() {
            shard.drain(now, &mut back);
        }
        // Futures are not handed back: they are woken now (not after the running tasks, one of
        // which may wait for what an awaiting future does), and complete saying how they ended:
        // elapsed if this clock reading reached their deadline (the drain ended them so), else
        // shut down.
        back.retain_mut(|r| match &mut r.work {
            Work::Wake(waker) => {
                if r.elapsed {
                    self.count_run(now.saturating_sub(r.deadline));
                } else {
                    self.returned.fetch_add(1, Relaxed);
                }
                if let Some(w) = waker.take() {
                    self.panics.run(|| w.wake());
                }
                false
            }
            _ => true,
        });
        // Running jobs finish; periodic ones hand their task back into `late` as they do. The
        // jobs of this very thread (a task calling shutdown) are not waited for. (A limit too far
        // ahead for an `Instant` is no limit.)
        let still_running = self
            .running
            .wait_for_others(active::own(self.id), limit.flatten());
        back.extend(self.late.lock().take().unwrap_or_default());
        self.lifecycle.finish_close();
        back.sort_by_key(|r| r.deadline);
        let mut ran_due = 0;
        if run_due {
            let due = back.partition_point(|r| r.deadline <= now);
            let mut again = Vec::new();
            for r in back.drain(..due) {
                let (ran, next) = self.run_at_shutdown(r);
                ran_due += u64::from(ran);
                again.extend(next);
            }
            // Repeating tasks come back with their next deadline, in order.
            back.extend(again);
            back.sort_by_key(|r| r.deadline);
        }
        self.returned.fetch_add(back.len() as u64, Relaxed);
        Collected {
            back,
            now,
            ran_due,
            still_running,
        }
    }

    /// Runs a due task claimed by shutdown, on this thread (unless a `Skip` task is too late):
    /// whether it ran, and, for a repeating task, itself for its next run, unless it stopped
    /// itself or would run past the end of time.
    fn run_at_shutdown(self: &Arc<Self>, r: Returned) -> (bool, Option<Returned>) {
        let now = self.clock.now();
        let late = now.saturating_sub(r.deadline);
        match r.work {
            Work::Once { f, mut label, .. } => {
                let mut cx = start_run(self, r.deadline, now, 1, &mut label);
                self.panics.run(|| f.into_inner()(&mut cx));
                (true, None)
            }
            Work::Every(mut repeat) => {
                let period = repeat.period.max(self.tick_ns);
                // `Skip` does not run late here either (see `job.rs`).
                let skipping = repeat.cadence == Cadence::Rate(MisfirePolicy::Skip)
                    && late >= period.saturating_add(self.tick_ns);
                if skipping {
                    skip(self, r.route, 1);
                } else {
                    repeat.runs += 1;
                    let Repeat { f, runs, label, .. } = &mut *repeat;
                    let mut cx = start_run(self, r.deadline, now, *runs, label);
                    self.panics.run(|| f.get_mut()(&mut cx));
                    if cx.is_stopped() {
                        self.panics.drop_task(repeat);
                        return (true, None);
                    }
                }
                let now = self.clock.now();
                let (next, skipped) = match repeat.cadence {
                    Cadence::Rate(policy) => next_run(r.deadline, period, now, policy),
                    Cadence::Delay => (now.checked_add(period), 0),
                };
                if skipped > 0 {
                    skip(self, r.route, skipped);
                }
                let Some(deadline) = next else {
                    self.panics.drop_task(repeat); // past the end of time: it ends here
                    return (!skipping, None);
                };
                let again = Returned {
                    deadline,
                    work: Work::Every(repeat),
                    elapsed: false,
                    route: r.route,
                };
                (!skipping, Some(again))
            }
            Work::Wake(..) => unreachable!("futures are woken, not run, by shutdown"),
        }
    }
}
