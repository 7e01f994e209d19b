//! Shutdown: refuse adds, stop the tick thread, claim every task that has not started, wait for
//! the running ones (for at most a limit, if given), run the due ones if asked, and collect the
//! rest earliest first (the API turns them back into `Task`s: `api/shutdown.rs`).
//!
//! Two halves around the wait, [`Core::begin_shutdown`] and [`Core::end_shutdown`], which never
//! wait for a task: the blocking shutdown waits between them on the condition variable of
//! `running.rs`; the asynchronous one ([`Closing`]) registers its waker there and is woken as
//! runs end, and runs the due tasks in one job on the timer's executor rather than on the thread
//! that polls it.

use std::mem;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use crate::loom::Mutex;
use crate::loom::atomic::Ordering::*;
use crate::service::core::Core;
use crate::service::core::Returned;
use crate::service::job::{next_run, skip, start_run};
use crate::service::panic;
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

/// A shutdown that has begun: adds refused, tasks that had not started claimed, futures woken.
pub(crate) struct Begun {
    /// The claimed tasks (futures excluded), in no order.
    back: Vec<Returned>,
    /// The shutdown's clock reading.
    now: u64,
    /// Jobs of this timer running on the thread that began it (a task calling shutdown): not
    /// waited for.
    own: u64,
}

impl Core {
    /// See [`Timer::shutdown_with`](crate::Timer::shutdown_with): runs the due tasks if
    /// `run_due`, waits at most `limit` for running ones. Idempotent: only the first call does
    /// anything.
    pub(crate) fn shutdown(self: &Arc<Self>, run_due: bool, limit: Option<Duration>) -> Collected {
        let limit = limit.map(|l| Instant::now().checked_add(l));
        let Some(begun) = self.begin_shutdown() else {
            return Collected::default();
        };
        // Running jobs finish; periodic ones hand their task back into `late` as they do. The
        // jobs of this very thread (a task calling shutdown) are not waited for. (A limit too far
        // ahead for an `Instant` is no limit.)
        let still_running = self.running.wait_for_others(begun.own, limit.flatten());
        let (mut back, now) = self.end_shutdown(begun);
        let mut ran_due = 0;
        if run_due {
            let due = back.partition_point(|r| r.deadline <= now);
            let mut run = RunDue::new(self.clone(), back.drain(..due).collect(), None);
            run.run_all();
            let (ran, again) = run.take();
            ran_due = ran;
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

    /// The first half of a shutdown, which never waits (but for the tick thread's join, and that
    /// thread runs no task): refuse adds, stop the tick thread, claim every task that has not
    /// started, wake the futures. `None` if a shutdown already began.
    pub(crate) fn begin_shutdown(self: &Arc<Self>) -> Option<Begun> {
        if !self.lifecycle.begin_close() {
            return None;
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
        Some(Begun {
            back,
            now,
            own: active::own(self.id),
        })
    }

    /// The second half, once the running jobs ended (or no longer waited for): the periodic
    /// tasks they handed back join the others, the lifecycle is closed. Every task, earliest
    /// deadline first, and the shutdown's clock reading.
    pub(crate) fn end_shutdown(&self, begun: Begun) -> (Vec<Returned>, u64) {
        let Begun { mut back, now, .. } = begun;
        back.extend(self.late.lock().take().unwrap_or_default());
        self.lifecycle.finish_close();
        back.sort_by_key(|r| r.deadline);
        (back, now)
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

/// Due tasks a shutdown runs (`run_due`), earliest first: on the calling thread, or in one job on
/// the timer's executor for an asynchronous shutdown. With an `out`, what it did is published
/// there when it drops: a job the executor drops unrun hands its tasks back unrun.
pub(crate) struct RunDue {
    core: Arc<Core>,
    tasks: std::vec::IntoIter<Returned>,
    ran: u64,
    again: Vec<Returned>,
    out: Option<Arc<DueOut>>,
}

impl RunDue {
    fn new(core: Arc<Core>, tasks: Vec<Returned>, out: Option<Arc<DueOut>>) -> Self {
        RunDue {
            core,
            tasks: tasks.into_iter(),
            ran: 0,
            again: Vec::new(),
            out,
        }
    }

    fn run_all(&mut self) {
        for r in self.tasks.by_ref() {
            let (ran, next) = self.core.run_at_shutdown(r);
            self.ran += u64::from(ran);
            // Repeating tasks come back with their next deadline.
            self.again.extend(next);
        }
    }

    /// The runs made, and the tasks to hand back: the repeating ones that ran, and those not run.
    fn take(&mut self) -> (u64, Vec<Returned>) {
        let mut back = mem::take(&mut self.again);
        back.extend(self.tasks.by_ref());
        (mem::take(&mut self.ran), back)
    }
}

impl Drop for RunDue {
    fn drop(&mut self) {
        if let Some(out) = self.out.take() {
            let done = self.take();
            let waker = {
                let mut state = out.0.lock();
                state.0 = Some(done);
                state.1.take()
            };
            if let Some(w) = waker {
                self.core.panics.run(|| w.wake());
            }
        }
    }
}

/// Where the job of an asynchronous shutdown's due tasks leaves what it did, and the waker of
/// the shutdown waiting for it.
#[derive(Default)]
pub(crate) struct DueOut(Mutex<DueState>);

type DueState = (Option<(u64, Vec<Returned>)>, Option<Waker>);

impl DueOut {
    /// What the job did, if it is done; else `waker` is woken when it is.
    fn poll(&self, waker: Option<Waker>) -> Option<(u64, Vec<Returned>)> {
        let mut state = self.0.lock();
        let done = state.0.take();
        let old = match (&done, waker) {
            (None, Some(w)) => state.1.replace(w),
            (_, w) => w,
        };
        drop(state);
        drop(old); // the runtime's code: outside the lock
        done
    }
}

/// An asynchronous shutdown (`Timer::shutdown_async`): begun when made (adds refused, tasks
/// claimed, futures woken), it is polled until the running jobs have ended, then, for `run_due`,
/// until the job running the due tasks has, and never blocks the thread that polls it.
pub(crate) struct Closing {
    core: Arc<Core>,
    stage: Stage,
}

enum Stage {
    /// Another shutdown began first: nothing to report.
    Nothing,
    /// Waiting for the running jobs.
    Waiting { begun: Begun, run_due: bool },
    /// Waiting for the job that runs the `due` due tasks.
    RunningDue {
        back: Vec<Returned>,
        now: u64,
        out: Arc<DueOut>,
        due: u64,
    },
    /// Reported.
    Done,
}

impl Closing {
    /// Begins the shutdown of `core` (see [`Core::begin_shutdown`]).
    pub(crate) fn begin(core: &Arc<Core>, run_due: bool) -> Self {
        let stage = match core.begin_shutdown() {
            Some(begun) => Stage::Waiting { begun, run_due },
            None => Stage::Nothing,
        };
        Closing {
            core: core.clone(),
            stage,
        }
    }

    pub(crate) fn core(&self) -> &Arc<Core> {
        &self.core
    }

    /// Ready once the running jobs (besides those of the thread that began it) and the due
    /// tasks' job have ended. Panics if polled after it was ready.
    pub(crate) fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Collected> {
        loop {
            match mem::replace(&mut self.stage, Stage::Done) {
                Stage::Nothing => return Poll::Ready(Collected::default()),
                Stage::Waiting { begun, run_due } => {
                    let waker = cx.waker().clone();
                    if self.core.running.poll_others(begun.own, waker) > 0 {
                        self.stage = Stage::Waiting { begun, run_due };
                        return Poll::Pending;
                    }
                    let (mut back, now) = self.core.end_shutdown(begun);
                    let due = if run_due {
                        back.partition_point(|r| r.deadline <= now)
                    } else {
                        0
                    };
                    if due == 0 {
                        return Poll::Ready(self.finish(back, now, 0, 0));
                    }
                    let out = Arc::new(DueOut::default());
                    let tasks = back.drain(..due).collect();
                    let mut run = RunDue::new(self.core.clone(), tasks, Some(out.clone()));
                    // On the executor, not here: the polling thread is a runtime's worker. An
                    // `execute` that panics drops the job, which hands its tasks back unrun.
                    let sent = panic::catch(|| {
                        self.core.executor.execute(Box::new(move || run.run_all()))
                    });
                    if let Err(message) = sent {
                        self.core.panics.report(message);
                    }
                    self.stage = Stage::RunningDue {
                        back,
                        now,
                        out,
                        due: due as u64,
                    };
                }
                Stage::RunningDue {
                    back,
                    now,
                    out,
                    due,
                } => match out.poll(Some(cx.waker().clone())) {
                    Some(done) => return Poll::Ready(self.with_due(back, now, done, 0)),
                    None => {
                        self.stage = Stage::RunningDue {
                            back,
                            now,
                            out,
                            due,
                        };
                        return Poll::Pending;
                    }
                },
                Stage::Done => panic!("a shutdown future polled after it completed"),
            }
        }
    }

    /// What it has collected, now, without waiting: the jobs still running are counted, and so
    /// are the due tasks whose job has not ended (they are not handed back); due tasks not yet
    /// given to a job are handed back unrun.
    pub(crate) fn now(&mut self) -> Collected {
        match mem::replace(&mut self.stage, Stage::Done) {
            Stage::Nothing | Stage::Done => Collected::default(),
            Stage::Waiting { begun, .. } => {
                let still = self.core.running.others(begun.own);
                let (back, now) = self.core.end_shutdown(begun);
                self.finish(back, now, 0, still)
            }
            Stage::RunningDue {
                back,
                now,
                out,
                due,
            } => match out.poll(None) {
                Some(done) => self.with_due(back, now, done, 0),
                None => self.finish(back, now, 0, due),
            },
        }
    }

    fn with_due(
        &self,
        mut back: Vec<Returned>,
        now: u64,
        (ran, again): (u64, Vec<Returned>),
        still: u64,
    ) -> Collected {
        back.extend(again);
        back.sort_by_key(|r| r.deadline);
        self.finish(back, now, ran, still)
    }

    fn finish(&self, back: Vec<Returned>, now: u64, ran_due: u64, still_running: u64) -> Collected {
        self.core.returned.fetch_add(back.len() as u64, Relaxed);
        Collected {
            back,
            now,
            ran_due,
            still_running,
        }
    }
}

impl Drop for Closing {
    /// Dropped before it was ready: the shutdown ends without waiting (as [`Closing::now`]), and
    /// the tasks that never ran are dropped, each closure's `Drop` guarded as a task's run.
    fn drop(&mut self) {
        if matches!(self.stage, Stage::Nothing | Stage::Done) {
            return;
        }
        for r in self.now().back {
            self.core.panics.drop_task(r);
        }
    }
}
