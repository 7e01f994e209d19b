//! The two ends of the timer's clock (issue 43, from a hostile review of 2026-11-28): instants
//! before the clock began (the timer's build, or a manual clock's epoch) keep the instant asked
//! for, and the end of the clock (`u64::MAX` ns) ends an `Interval` as it ends a repeating task.
//! Each test failed on the code the review ran against, but for the two that pin a documented
//! rule (named so in their doc line).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tickwheel::{InlineExecutor, ManualClock, MisfirePolicy, Task, TaskContext, Timer};

use crate::support::{Held, MS, SEC, counter, manual, tick};

/// What the runs of a task saw: (scheduled, lateness).
type Seen = Arc<Mutex<Vec<(Instant, Duration)>>>;

fn seen() -> Seen {
    Arc::new(Mutex::new(Vec::new()))
}

fn note(log: &Seen) -> impl FnMut(&mut TaskContext<'_>) + Send + 'static {
    let log = log.clone();
    move |cx: &mut TaskContext<'_>| log.lock().unwrap().push((cx.scheduled(), cx.lateness()))
}

/// `at` before `base`, if this machine's monotonic clock reaches that far back.
fn before(base: Instant, by: Duration) -> Option<Instant> {
    base.checked_sub(by)
}

/// An `Interval` at the end of time used to complete at once for ever with the same instant
/// (a `loop { tick().await }` spun at full CPU). Now, under every policy and in fixed-delay mode,
/// it gives at most its last ticks, then never completes again, and holds no timer.
#[test]
fn an_interval_at_the_end_of_time_finishes_instead_of_spinning() {
    use MisfirePolicy::*;
    // (policy or fixed delay, ticks given after the jump to the end)
    let cases = [
        (Some(RunOnce), 1),
        (Some(Skip), 0),
        (
            Some(CatchUp),
            tickwheel::MisfirePolicy::MAX_CATCH_UP as usize + 1,
        ),
        (None, 1),
    ];
    for (policy, last_ticks) in cases {
        let (clock, timer) = manual();
        let (_, waker) = counter();
        let mut every = timer.interval(10 * SEC);
        match policy {
            Some(p) => every.set_misfire_policy(p),
            None => every.set_fixed_delay(true),
        }
        assert!(
            tick(&mut every, &waker).is_some(),
            "the first tick is at once"
        );
        clock.advance(Duration::MAX);
        let mut given = 0;
        while tick(&mut every, &waker).is_some() {
            given += 1;
            assert!(
                given <= last_ticks,
                "{policy:?}: more than {last_ticks} ticks"
            );
        }
        assert_eq!(given, last_ticks, "{policy:?}");
        assert!(every.is_finished(), "{policy:?}");
        for _ in 0..3 {
            assert_eq!(tick(&mut every, &waker), None, "{policy:?}: never again");
        }
        assert_eq!(timer.pending(), 0, "{policy:?}: nothing left armed");
    }
}

/// `Task::every` and `Interval` agree at the end of time: the repeating task runs its last run
/// and ends, as the finished interval does.
#[test]
fn a_repeating_task_and_an_interval_both_end_at_the_end_of_time() {
    let (clock, timer) = manual();
    let runs = seen();
    let task = timer
        .add_or_submit(Task::every(10 * SEC, note(&runs)))
        .unwrap();
    let mut every = timer.interval(10 * SEC);
    let (_, waker) = counter();
    tick(&mut every, &waker).unwrap();
    clock.advance(Duration::MAX);
    assert_eq!(runs.lock().unwrap().len(), 1, "one late run for all");
    assert!(task.is_done());
    assert!(tick(&mut every, &waker).is_some(), "one late tick for all");
    assert_eq!(tick(&mut every, &waker), None);
    assert!(every.is_finished());
}

/// A finished interval starts again from `reset_at`.
#[test]
fn a_finished_interval_starts_again_when_reset() {
    let (clock, timer) = manual();
    let (_, waker) = counter();
    let mut every = timer.interval(10 * SEC);
    tick(&mut every, &waker).unwrap();
    clock.advance(Duration::MAX);
    while tick(&mut every, &waker).is_some() {}
    assert!(every.is_finished());
    every.reset_at(timer.now());
    assert!(!every.is_finished());
    assert_eq!(tick(&mut every, &waker), Some(timer.now()));
}

/// `Task::at` an instant before the clock began (a manual clock moved 5 s, an instant an hour
/// before its epoch) used to report the epoch as scheduled and 5 s of lateness.
#[test]
fn a_task_at_an_instant_before_the_clock_began_keeps_that_instant() {
    let (clock, timer) = manual();
    clock.advance(5 * SEC);
    let Some(stale) = before(timer.now(), 3600 * SEC) else {
        return;
    };
    let runs = seen();
    let mut log = note(&runs);
    timer
        .add_or_submit(Task::at(stale, move |cx: &mut TaskContext<'_>| log(cx)))
        .unwrap();
    assert_eq!(*runs.lock().unwrap(), [(stale, 3600 * SEC)]);
    assert!(
        timer.stats().lateness_max >= 3599 * SEC,
        "the stats count it too"
    );
}

/// The same on the real clock: an instant 10 s before the timer was built (an anchor taken
/// before a rebuild) used to show ~0.3 ms of lateness and a `scheduled` 10 s off.
#[test]
fn a_task_at_an_instant_before_a_real_clock_began_keeps_that_instant() {
    let Some(stale) = before(Instant::now(), 10 * SEC) else {
        return;
    };
    let timer = Timer::builder()
        .executor(Arc::new(InlineExecutor::new()))
        .build()
        .unwrap();
    let runs = seen();
    let mut log = note(&runs);
    timer
        .add_or_submit(Task::at(stale, move |cx: &mut TaskContext<'_>| log(cx)))
        .unwrap();
    timer.wait_idle();
    let runs = runs.lock().unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].0, stale);
    assert!(runs[0].1 >= 10 * SEC, "lateness {:?}", runs[0].1);
}

/// A fixed-rate grid anchored 3 s before the clock began keeps its phase: runs at 7 s and 17 s,
/// not at 0 s, 10 s, 20 s. (The grid's points before the beginning are not run: the rule of
/// `interval_at`, now the rule of `starting_at` too.)
#[test]
fn a_fixed_rate_grid_started_before_the_clock_began_keeps_its_phase() {
    let (clock, timer) = manual();
    let t0 = timer.now();
    let Some(start) = before(t0, 3 * SEC) else {
        return;
    };
    let runs = seen();
    timer
        .add_or_submit(Task::every(10 * SEC, note(&runs)).starting_at(start))
        .unwrap();
    for _ in 0..20 {
        clock.advance(SEC);
    }
    let scheduled: Vec<_> = runs.lock().unwrap().iter().map(|r| r.0 - t0).collect();
    assert_eq!(scheduled, [7 * SEC, 17 * SEC]);
}

/// A fixed-delay task whose first run is before the clock began runs at once, meant for that
/// instant, and then counts its delay from the end of that run.
#[test]
fn a_fixed_delay_task_started_before_the_clock_began_runs_at_once_for_that_instant() {
    let (clock, timer) = manual();
    let t0 = timer.now();
    let Some(start) = before(t0, 3 * SEC) else {
        return;
    };
    let runs = seen();
    timer
        .add_or_submit(Task::with_fixed_delay(10 * SEC, note(&runs)).starting_at(start))
        .unwrap();
    clock.advance(10 * SEC);
    assert_eq!(
        *runs.lock().unwrap(),
        [(start, 3 * SEC), (t0 + 10 * SEC, Duration::ZERO)]
    );
}

/// `Interval::reset_at` an instant before the clock began keeps the grid's phase (it moved the
/// grid to the beginning); in fixed-delay mode the tick is due at once and says that instant.
#[test]
fn an_interval_reset_before_the_clock_began_keeps_its_phase() {
    let (clock, timer) = manual();
    let (_, waker) = counter();
    let t0 = timer.now();
    let Some(at) = before(t0, 3 * SEC) else {
        return;
    };
    let mut every = timer.interval(10 * SEC);
    tick(&mut every, &waker).unwrap();
    every.reset_at(at);
    assert_eq!(tick(&mut every, &waker), None);
    clock.advance(7 * SEC);
    assert_eq!(tick(&mut every, &waker), Some(t0 + 7 * SEC));
    clock.advance(10 * SEC);
    assert_eq!(tick(&mut every, &waker), Some(t0 + 17 * SEC));

    every.set_fixed_delay(true);
    every.reset_at(at);
    assert_eq!(tick(&mut every, &waker), Some(at), "at once, as asked");
    assert_eq!(tick(&mut every, &waker), None);
    clock.advance(10 * SEC);
    assert_eq!(tick(&mut every, &waker), Some(t0 + 27 * SEC));
}

/// A task due at once for an instant before the clock began, handed back by shutdown before it
/// ran, comes back with that instant (added to the next timer, it is as late as it is).
#[test]
fn shutdown_hands_back_a_stale_task_with_its_instant() {
    let clock = ManualClock::new();
    let held = Arc::new(Held::default());
    let timer = Timer::builder()
        .clock(clock)
        .executor(held.clone())
        .build()
        .unwrap();
    let Some(stale) = before(timer.now(), 60 * SEC) else {
        return;
    };
    timer
        .add_or_submit(Task::at(stale, || {}).keyed("order-7"))
        .unwrap();
    let back = timer.shutdown();
    assert_eq!(back.len(), 1);
    assert_eq!(back[0].deadline(), Some(stale));
    assert_eq!(back[0].key(), Some("order-7"));
}

/// Pins the documented rule for a caller exactly one period late (10 ms grid, the tick for
/// 10 ms taken at 20 ms): under `Skip` and `RunOnce` alike the point due right now counts among
/// the missed ones, so the tick after the late one is at 30 ms.
#[test]
fn a_grid_point_due_right_now_counts_as_missed() {
    for policy in [MisfirePolicy::Skip, MisfirePolicy::RunOnce] {
        let (clock, timer) = manual();
        let (_, waker) = counter();
        let t0 = timer.now();
        let mut every = timer.interval(10 * MS);
        every.set_misfire_policy(policy);
        assert_eq!(tick(&mut every, &waker), Some(t0));
        clock.advance(20 * MS);
        assert_eq!(tick(&mut every, &waker), Some(t0 + 10 * MS), "{policy:?}");
        assert_eq!(tick(&mut every, &waker), None, "{policy:?}");
        clock.advance(10 * MS);
        assert_eq!(tick(&mut every, &waker), Some(t0 + 30 * MS), "{policy:?}");
    }
}

/// The same rule for a repeating task.
#[test]
fn a_repeating_task_one_period_late_goes_on_after_now() {
    let (clock, timer) = manual();
    let t0 = timer.now();
    let runs = seen();
    timer
        .add_or_submit(
            Task::every(10 * MS, note(&runs))
                .starting_after(Duration::ZERO)
                .misfire(MisfirePolicy::Skip),
        )
        .unwrap();
    clock.advance(20 * MS);
    clock.advance(10 * MS);
    let scheduled: Vec<_> = runs.lock().unwrap().iter().map(|r| r.0 - t0).collect();
    // 0 on time, 10 late by a period (runs: not a period plus a tick), 30 on time.
    assert_eq!(scheduled, [Duration::ZERO, 10 * MS, 30 * MS]);
}

/// A timer whose executor holds every job: a due task stays due until shutdown.
fn held_timer(clock: &ManualClock) -> Timer {
    Timer::builder()
        .clock(clock.clone())
        .executor(Arc::new(Held::default()))
        .build()
        .unwrap()
}

/// Found by the review of the fix: a stale task handed back by shutdown kept its stale instant
/// inside, so given a new start (or added to a timer where the instant is not stale) its run
/// still said the old instant and counted its lateness from it.
#[test]
fn a_handed_back_stale_task_given_a_new_start_runs_for_it() {
    let clock = ManualClock::new();
    let t1 = held_timer(&clock);
    let Some(stale) = before(t1.now(), 3600 * SEC) else {
        return;
    };
    let runs = seen();
    let mut log = note(&runs);
    t1.add_or_submit(Task::at(stale, move |cx: &mut TaskContext<'_>| log(cx)))
        .unwrap();
    let task = t1.shutdown().pop().unwrap();
    assert_eq!(task.deadline(), Some(stale));
    drop(t1);
    let t2 = crate::support::inline(&clock);
    let t0 = t2.now();
    t2.add_or_submit(task.starting_after(10 * SEC)).unwrap();
    clock.advance(10 * SEC);
    assert_eq!(*runs.lock().unwrap(), [(t0 + 10 * SEC, Duration::ZERO)]);
}

/// The same review: added to a timer whose clock began before the instant, the task's lateness
/// counts from the instant (it counted from that timer's beginning).
#[test]
fn a_handed_back_stale_task_added_to_an_older_timer_is_late_from_its_instant() {
    let (clock_a, older) = manual();
    std::thread::sleep(20 * MS);
    let clock_b = ManualClock::new();
    let newer = held_timer(&clock_b);
    let x = newer.now() - 10 * MS; // before `newer` began, after `older` did
    let runs = seen();
    let mut log = note(&runs);
    newer
        .add_or_submit(Task::at(x, move |cx: &mut TaskContext<'_>| log(cx)))
        .unwrap();
    let task = newer.shutdown().pop().unwrap();
    clock_a.advance(100 * MS);
    let late = older.now() - x;
    older.add_or_submit(task).unwrap();
    assert_eq!(*runs.lock().unwrap(), [(x, late)]);
}

/// The same review: an interval reset before the clock began in fixed-delay mode, then put back
/// on a fixed rate, keeps the grid of the instant (it went on from the beginning). And a
/// shutdown completes that pending stale tick with its instant, as the docs say.
#[test]
fn a_stale_reset_in_fixed_delay_mode_keeps_its_grid_and_its_instant() {
    let (clock, timer) = manual();
    let (_, waker) = counter();
    let t0 = timer.now();
    let Some(at) = before(t0, 3 * SEC) else {
        return;
    };
    let mut every = timer.interval(10 * SEC);
    tick(&mut every, &waker).unwrap();
    every.set_fixed_delay(true);
    every.reset_at(at);
    every.set_fixed_delay(false);
    assert_eq!(tick(&mut every, &waker), Some(at));
    clock.advance(7 * SEC);
    assert_eq!(tick(&mut every, &waker), Some(t0 + 7 * SEC));

    let (_clock, timer) = manual();
    let mut every = timer.interval(10 * SEC);
    every.set_fixed_delay(true);
    tick(&mut every, &waker).unwrap();
    let Some(at) = before(timer.now(), 3 * SEC) else {
        return;
    };
    every.reset_at(at);
    assert!(timer.shutdown().is_empty());
    assert_eq!(tick(&mut every, &waker), Some(at));
}

/// Pins the documented rule: a finished interval stays finished when its timer shuts down.
#[test]
fn a_finished_interval_stays_finished_after_shutdown() {
    let (clock, timer) = manual();
    let (_, waker) = counter();
    let mut every = timer.interval(10 * SEC);
    tick(&mut every, &waker).unwrap();
    clock.advance(Duration::MAX);
    while tick(&mut every, &waker).is_some() {}
    assert!(timer.shutdown().is_empty());
    assert!(every.is_finished());
    assert_eq!(tick(&mut every, &waker), None);
}
