//! A fired task's job, on the executor: claim the task, run it, and then end it, re-arm it, or
//! hand it back to a shutdown in progress.
//!
//! A periodic task that fell behind runs its missed runs here, back to back, in turns of at most
//! [`MisfirePolicy::BURST`] runs. Each run is claimed with a compare-and-swap that marks it `BUSY` and ended with
//! another, and a cancel that lands during a run waits for that run to end (unless it is called
//! from inside a task: see [`cancelled`]): so once `cancel` returned `true`, no run of the task
//! is in progress and none starts. A turn
//! that ends still behind goes back to the tick thread, which hands it out again after the other
//! due tasks.

use std::sync::Arc;
use std::time::Duration;

use tickwheel_executor::Executor;

use crate::loom::atomic::Ordering::*;
use crate::service::class::Class;
use crate::service::context::TaskContext;
use crate::service::core::{Core, ns_since};
use crate::service::core::{Rearm, Returned, Run, Shard};
use crate::service::panic;
use crate::service::registry;
use crate::service::route::{DEFAULT_ROUTE, Pool, SELF_CLASS, SELF_ISOLATED};
use crate::service::running::active;
use crate::service::work::{Cadence, Labels, MisfirePolicy, Repeat, Work, key_of};
use crate::shard::{Cancel, Fire, WAKE_HERE};
use crate::slots::word::{CANCELLED, DONE, RETURNED, STOP, VACANT, Word};

const BURST: u64 = MisfirePolicy::BURST;
const MAX_CATCH_UP: u64 = MisfirePolicy::MAX_CATCH_UP;

/// Hands the job of `fire` to `executor` (which is `pool`).
pub(crate) fn send(core: &Arc<Core>, fire: Fire, executor: &Arc<dyn Executor>, pool: Pool) {
    InFlight::new(core, 1).send(core, fire, executor, pool);
}

/// Hands `job`, which runs or hands on `tasks` tasks, to `executor`. They count in the
/// backlog (`max_pending`, `wait_idle`) until the job is dropped, whether it ran or the
/// executor discarded it, or until the job passes them on one by one with their tasks
/// ([`InFlight::split_one`]). An executor that panics loses nothing: the tasks the job would
/// have run stay due, and `shutdown` hands them back.
pub(crate) fn send_job(
    core: &Arc<Core>,
    executor: &Arc<dyn Executor>,
    tasks: u64,
    job: impl FnOnce(&mut InFlight) + Send + 'static,
) {
    InFlight::new(core, tasks).submit(core, executor, job);
}

/// A job on its way through the executor, and the tasks it still counts for in the backlog (see
/// [`Running::wait_idle`](crate::service::running::Running::wait_idle)).
pub(crate) struct InFlight(Arc<Core>, u64);

impl InFlight {
    pub(crate) fn new(core: &Arc<Core>, tasks: u64) -> Self {
        core.running.enqueue(tasks);
        InFlight(core.clone(), tasks)
    }

    pub(crate) fn core(&self) -> &Arc<Core> {
        &self.0
    }

    /// One of a chunk's tasks' share of the count, for the job the chunk's job hands that task
    /// on with: the count moves from one job to the other without being given back and taken
    /// again, so the task counts exactly once all along (and the shared counter is not touched).
    pub(crate) fn split_one(&mut self) -> InFlight {
        debug_assert!(self.1 > 0, "a chunk hands on no more tasks than it counts");
        self.1 = self.1.saturating_sub(1);
        InFlight(self.0.clone(), 1)
    }

    /// Hands the job of `fire` (counted by this) to `executor` (which is `pool`), for `core`
    /// (this job's timer).
    pub(crate) fn send(self, core: &Core, fire: Fire, executor: &Arc<dyn Executor>, pool: Pool) {
        let _span = crate::service::trace::handoff(fire.shard, fire.slot, pool);
        self.submit(core, executor, move |queued| run(queued.core(), fire, pool));
    }

    /// Hands `job` to `executor`, the count travelling with it (see [`send_job`]). An
    /// `execute` that panics is the user's code: counted and reported like a panicking task
    /// (`core` is this job's timer, passed in because the job has taken this count's handle).
    pub(crate) fn submit(
        mut self,
        core: &Core,
        executor: &Arc<dyn Executor>,
        job: impl FnOnce(&mut InFlight) + Send + 'static,
    ) {
        let sent = panic::catch(|| executor.execute(Box::new(move || job(&mut self))));
        if let Err(message) = sent {
            core.panics.report(message);
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.1 == 0 {
            return; // a chunk whose tasks all went on with their share
        }
        self.0.running.dequeue(self.1);
    }
}

/// Starts a run meant for clock time `meant`, or, if `label` holds a stale instant (one
/// before the clock began), for that instant, which this takes: counts the run with its
/// lateness to clock time `started`, and returns its context.
pub(crate) fn start_run<'a>(
    core: &'a Arc<Core>,
    meant: u64,
    started: u64,
    run: u64,
    label: &'a mut Labels,
) -> TaskContext<'a> {
    let stale = label.as_mut().and_then(|l| l.stale.take());
    let (scheduled, late) = match stale {
        None => (core.instant_of(meant), started.saturating_sub(meant)),
        // Late by the time from `at` to the clock's beginning, and on to the start.
        Some(at) => (at, ns_since(at, core.origin).saturating_add(started)),
    };
    core.count_run(late);
    let late = Duration::from_nanos(late);
    TaskContext::new(Some(core), scheduled, late, run, key_of(label))
}

/// What a handle's cancel answers, given what the shard's [`Shard::cancel`] did: true if it
/// stopped the task. A cancel that landed during a run of a periodic task waits for that run to
/// end, so that nothing of the task runs after `cancel` returns true. Not from inside a task,
/// though: that may be the run itself, or a task that the run is cancelling at the same moment
/// (each would wait for the other for ever).
#[inline(always)]
pub(crate) fn cancelled(shard: &Shard, i: u32, cancel: Cancel) -> bool {
    match cancel {
        Cancel::Refused => false,
        Cancel::Stopped => true,
        Cancel::StoppedRunning(generation) => {
            wait_cancelled_run(shard, i, generation);
            true
        }
    }
}

#[cold]
fn wait_cancelled_run(shard: &Shard, i: u32, generation: u32) {
    if active::inside_a_task() {
        return;
    }
    // The job holds the timer alive while it runs, so a run in progress means a live core.
    if let Some(core) = shard.timer() {
        core.running
            .wait_run_end(|| shard.run_in_progress(i, generation));
    }
}

/// The job of `fire`: runs its task if it still is due (not cancelled or handed back meanwhile).
pub(crate) fn run(core: &Arc<Core>, fire: Fire, pool: Pool) {
    let shard = registry::shard(fire.shard);
    let s = shard.slots.get(fire.slot);
    let isolating = core.routes.isolation.is_some();
    let route = if isolating {
        route_of(fire)
    } else {
        DEFAULT_ROUTE
    };
    if pool == Pool::Main && isolating && fire.route != WAKE_HERE {
        // Its class was isolated (or began to overstay) after the tick thread sent it here: it
        // goes to the slow pool unclaimed, instead of blocking this one. (Not a future's
        // wake-up: the tick thread does that itself, and it belongs to no class.)
        let (slow, to) = core.routes.pick(route, || core.clock.now(), &core.executor);
        if to == Pool::Slow {
            return send(core, fire, slow, to);
        }
    }
    let watched = core.routes.watched(route);
    // A named class takes a place of its share of this pool, or goes to the slow pool unclaimed
    // (see `route.rs`); the place is held until the run ends.
    let _place = match (pool, watched) {
        (Pool::Main, Some(r)) => match core.routes.enter_pool(r) {
            Ok(place) => Some(place),
            Err(slow) => return send(core, fire, slow, Pool::Slow),
        },
        _ => None,
    };
    // Counted as running before the claim, so a shutdown that sees the claim waits for the run.
    let _running = core.running.enter(core.id, &core.lifecycle);
    let Some((run, work)) = s.start(fire.generation) else {
        return; // cancelled on the way, or claimed by shutdown: nothing to run
    };
    let started = core.clock.now();
    let late = started.saturating_sub(fire.meant);
    if let Some(r) = watched {
        r.class.begin(started);
    }
    match work {
        Work::Once { f, mut label, .. } => {
            let mut cx = start_run(core, fire.meant, started, 1, &mut label);
            core.panics.run(|| f.into_inner()(&mut cx));
            if core.routes.isolation.is_some() {
                record_run(
                    core,
                    fire,
                    pool,
                    (started, core.clock.now()),
                    Some(late),
                    None,
                );
            }
            finish(&shard, fire, run, DONE);
        }
        Work::Wake(waker) => {
            core.count_run(late);
            // The claim above took the task with the waker a poll left in it (see
            // `slots/waker.rs`); a poll from now on sees the arming ended. A waker is foreign
            // code: a panicking one is counted like a panicking task.
            if let Some(w) = waker {
                core.panics.run(|| w.wake());
            }
            finish(&shard, fire, run, DONE);
        }
        Work::Every(repeat) => {
            // The grid runs from the stamped deadline (never early); the run was meant for
            // `fire.meant` (the user's instant; they differ only for a delay stamped late).
            let scheduled = s.deadline.load(Relaxed);
            Periodic {
                core,
                shard: &shard,
                fire,
                pool,
            }
            .run(run, repeat, scheduled, late);
        }
    }
    if let Some(r) = watched {
        r.class.end(started);
    }
}

/// Ends a running task in `state` (`CANCELLED` instead if a cancel asked it to stop: that cancel
/// returned `true`), vacating the slot if no handle names it. Returns the word it replaced.
fn finish(shard: &Shard, fire: Fire, run: Run<'_>, state: u64) -> Word {
    let end = |w: Word| w.finished(if w.has(STOP) { CANCELLED } else { state });
    let old = run.finish(end);
    if end(old).state() == VACANT {
        shard.slots.release(fire.slot);
    }
    old
}

/// The route word of the task of `fire`, as read when it was found due: once the task is added,
/// only the job of a repeating task writes it (its `SELF_ISOLATED` bit, in `record_run`), and
/// that job has ended before the task can be found due again; within the job the slot's word is
/// the current one. (A future's wake-up is routed nowhere.)
fn route_of(fire: Fire) -> u32 {
    if fire.route == WAKE_HERE {
        DEFAULT_ROUTE
    } else {
        fire.route
    }
}

/// Records a run of the task of `fire` on `pool`, from clock time `started` to `end`, `late`
/// ns after the instant it was meant for: in the pool's run times, in its class's record of
/// slow runs (`own`: a repeating task's own class), which may isolate the class or let it
/// return (see `route.rs`), and in a named class's figures. `late` is `None` for a run its
/// misfire policy skipped: no run, so only the class's record of slow runs sees it (a run of
/// no length, which may let the class return).
fn record_run(
    core: &Core,
    fire: Fire,
    pool: Pool,
    (started, end): (u64, u64),
    late: Option<u64>,
    own: Option<&Class>,
) {
    let Some(iso) = core.routes.isolation else {
        return;
    };
    let ran = end.saturating_sub(started);
    if late.is_some() {
        core.routes.record(pool, ran);
    }
    if pool == Pool::Own {
        // A task that names its own executor always runs there: isolation, which moves a class
        // off the timer's pool, has nothing to move, and its runs say nothing of the class's
        // runs on that pool (review of 2026-11-27: they isolated the default class, or their
        // named one, in `Stats` while its tasks stayed on the timer's pool).
        return;
    }
    let notice = &core.routes.notice;
    let shard = registry::shard(fire.shard);
    let side = shard.slots.route(fire.slot);
    let word = route_of(fire);
    match own {
        Some(class) if word & SELF_CLASS != 0 => {
            let isolated = class.record("(a repeating task's own)", &iso, ran, end, notice);
            let now = if isolated {
                SELF_CLASS | SELF_ISOLATED
            } else {
                SELF_CLASS
            };
            // Compared with the slot's word, not `word`: that is the word the task was found due
            // with, and a catch-up turn's earlier runs may have changed it since (let the class
            // go, then isolate it again: the second change would look like no change at all).
            if now != side.load(Relaxed) {
                side.store(now, Relaxed); // the job owns the task: nobody else writes this
            }
        }
        _ => {
            if let Some(route) = core.routes.route(word) {
                route.class.record(route.name(), &iso, ran, end, notice);
                if let (Some(figures), Some(late)) = (&route.figures, late) {
                    figures.run_time.record(ran);
                    figures.lateness.record(late);
                }
            }
        }
    }
}

/// Counts `runs` runs of the task of `fire` skipped by its misfire policy (in its named class's
/// figures too); `word` is the task's route word.
pub(crate) fn skip(core: &Core, word: u32, runs: u64) {
    core.skipped.fetch_add(runs, Relaxed);
    crate::service::trace::skipped(runs);
    if let Some(figures) = core.routes.route(word).and_then(|r| r.figures.as_deref()) {
        figures.skipped.fetch_add(runs, Relaxed);
    }
}

struct Periodic<'a> {
    core: &'a Arc<Core>,
    shard: &'a Shard,
    fire: Fire,
    pool: Pool,
}

impl Periodic<'_> {
    /// Runs the due run (and, for `CatchUp`, up to a turn of missed ones), then re-arms, unless
    /// the task stopped itself.
    fn run(self, run: Run<'_>, mut repeat: Box<Repeat>, mut scheduled: u64, mut late: u64) {
        let core = self.core;
        // A period below the tick runs at the tick (the wheel cannot tell them apart).
        let period = repeat.period.max(core.tick_ns);
        let mut turn = 0;
        // The instant this run was meant for, which `late` counts from.
        let mut meant = self.fire.meant;
        let next = loop {
            let (mut stopped, mut ran) = (false, true);
            let started = meant.saturating_add(late);
            // Rounding to the tick makes every run up to a tick late: not a misfire.
            if repeat.cadence == Cadence::Rate(MisfirePolicy::Skip)
                && late >= period.saturating_add(core.tick_ns)
            {
                skip(core, route_of(self.fire), 1);
                ran = false;
            } else {
                repeat.runs += 1;
                let Repeat { f, runs, label, .. } = &mut *repeat;
                let mut cx = start_run(core, meant, started, *runs, label);
                core.panics.run(|| f.get_mut()(&mut cx));
                stopped = cx.is_stopped();
            }
            if run.end_run().has(STOP) {
                core.running.run_ended(); // a cancel on another thread waits for this
            }
            turn += 1;
            let now = core.clock.now();
            record_run(
                core,
                self.fire,
                self.pool,
                (started, now),
                ran.then_some(late),
                Some(&repeat.class),
            );
            if stopped {
                break None;
            }
            let (next, skipped) = match repeat.cadence {
                Cadence::Rate(policy) => next_run(scheduled, period, now, policy),
                Cadence::Delay => (now.checked_add(period), 0),
            };
            if skipped > 0 {
                skip(core, route_of(self.fire), skipped);
            }
            match next {
                Some(next)
                    if next <= now
                        && turn < BURST
                        && core.lifecycle.is_open()
                        && run.claim_next() =>
                {
                    scheduled = next;
                    meant = next;
                    late = now - next;
                }
                next => break next,
            }
        };
        match next {
            // Stopped by its closure, or the next run would fall past the end of time: the task
            // is finished.
            None => {
                finish(self.shard, self.fire, run, DONE);
                core.panics.drop_task(repeat);
            }
            Some(next) => self.rearm(run, next, Work::Every(repeat)),
        }
    }
    /// Puts the task back for its run at `next`, or ends it: cancelled (dropped), or shutting
    /// down (handed back to `shutdown`, or ended if that call already returned).
    fn rearm(self, run: Run<'_>, next: u64, work: Work) {
        let core = self.core;
        let open = || core.lifecycle.is_open();
        match self.shard.rearm(run, self.fire, next, work, open) {
            Ok(wake) => core.reaper.wake_by(wake),
            Err(Rearm::Stopped(run, work)) => {
                // Cancelled while it ran: no further runs. Dropped outside every lock.
                finish(self.shard, self.fire, run, CANCELLED);
                core.panics.drop_task(work);
            }
            Err(Rearm::Closing(run, work)) => self.hand_back(run, next, work),
        }
    }

    /// Shutdown has begun: the task goes back to its caller, unless a cancel won (then it is
    /// cancelled) or that call already returned (then it ends here, done).
    fn hand_back(self, run: Run<'_>, next: u64, work: Work) {
        let panics = &self.core.panics;
        let mut late = self.core.late.lock();
        let Some(list) = late.as_mut() else {
            drop(late);
            finish(self.shard, self.fire, run, DONE);
            return panics.drop_task(work);
        };
        // Read while the job still owns the task: `finish` frees the slot if no handle is left,
        // and the owner's next add may take it and write its own route there at once.
        let route = self.shard.slots.route(self.fire.slot).load(Relaxed);
        // Under the list's lock, so shutdown cannot take the list between the two steps.
        if finish(self.shard, self.fire, run, RETURNED).has(STOP) {
            drop(late);
            return panics.drop_task(work); // the cancel won: CANCELLED
        }
        list.push(Returned {
            deadline: next,
            work,
            elapsed: false,
            route,
        });
    }
}

/// The next run of a fixed-rate task whose run for `scheduled` just ended at `now`, and how many
/// runs it skips to get there. `None` if it would fall past the end of time (`u64::MAX` ns).
pub(crate) fn next_run(
    scheduled: u64,
    period: u64,
    now: u64,
    policy: MisfirePolicy,
) -> (Option<u64>, u64) {
    let Some(next) = scheduled.checked_add(period) else {
        return (None, 0);
    };
    if next > now {
        return (Some(next), 0);
    }
    // Runs on the grid after `scheduled` that are due by now.
    let behind = (now - scheduled) / period;
    let skip = match policy {
        MisfirePolicy::CatchUp => behind.saturating_sub(MAX_CATCH_UP),
        // Fell behind by a period or more: the next grid point after now. A point due right now
        // is among the missed ones (see `MisfirePolicy`).
        MisfirePolicy::RunOnce | MisfirePolicy::Skip => behind,
    };
    let next = skip
        .checked_add(1)
        .and_then(|k| k.checked_mul(period))
        .and_then(|d| scheduled.checked_add(d));
    (next, skip)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn next_run_per_policy() {
        use MisfirePolicy::*;
        // (scheduled, period, now, policy, next, skipped)
        let table = [
            (100, 10, 105, RunOnce, Some(110), 0),
            (100, 10, 110, RunOnce, Some(120), 1),
            (100, 10, 135, RunOnce, Some(140), 3),
            (100, 10, 135, Skip, Some(140), 3),
            // Exactly on the grid: the point due now counts as missed (issue 43, documented).
            (10, 10, 20, RunOnce, Some(30), 1),
            (10, 10, 20, Skip, Some(30), 1),
            (100, 10, 135, CatchUp, Some(110), 0),
            // 5000 runs behind: CatchUp keeps the last MAX_CATCH_UP of them.
            (0, 10, 50_000, CatchUp, Some(40_010), 4_000),
            (u64::MAX - 5, 10, u64::MAX - 1, RunOnce, None, 0),
            (5, 10, u64::MAX, RunOnce, None, (u64::MAX - 5) / 10),
            // At the end of time CatchUp still owes its last MAX_CATCH_UP runs, then ends.
            (
                5,
                10,
                u64::MAX,
                CatchUp,
                Some(5 + ((u64::MAX - 5) / 10 - MAX_CATCH_UP + 1) * 10),
                (u64::MAX - 5) / 10 - MAX_CATCH_UP,
            ),
            (0, u64::MAX, 1, Skip, Some(u64::MAX), 0),
        ];
        for (s, p, now, policy, next, skipped) in table {
            assert_eq!(
                next_run(s, p, now, policy),
                (next, skipped),
                "next_run({s}, {p}, {now}, {policy:?})"
            );
        }
    }

    #[test]
    fn skipped_runs_and_the_remaining_backlog_add_up() {
        // After a jump, CatchUp runs exactly MAX_CATCH_UP + 1 runs including the due one.
        let (period, now) = (7, 1_000_000);
        let (mut scheduled, mut runs, mut skipped) = (0u64, 1u64, 0u64);
        loop {
            let (next, s) = next_run(scheduled, period, now, MisfirePolicy::CatchUp);
            skipped += s;
            match next {
                Some(n) if n <= now => {
                    scheduled = n;
                    runs += 1;
                }
                _ => break,
            }
        }
        assert_eq!(runs, MAX_CATCH_UP + 1);
        assert_eq!(
            runs + skipped,
            now / period + 1,
            "every grid point accounted for"
        );
    }
}
