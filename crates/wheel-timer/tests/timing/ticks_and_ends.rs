//! Ticks of every accepted width, the end of time, and the tick thread's wake-ups: a coarse tick
//! neither overflows nor makes a task late, a `CatchUp` task at the end of time ends after a
//! bounded number of runs, a reschedule to zero runs at once, and cancelling the earliest timer
//! costs at most one wake-up. (From the adversarial reviews of 2026-11-22, issue 9: each test
//! failed on the code the review ran against.)

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::thread;
use std::time::Duration;

use tickwheel::{InlineExecutor, ManualClock, MisfirePolicy, Task, Timer};

use crate::support::{DAY, MS, SEC, manual};

/// Item 3: a jump to the end of time ends a `CatchUp` task after at most `MAX_CATCH_UP` owed runs
/// (the rest are skipped and counted), instead of running it for every missed period.
#[test]
fn a_jump_to_the_end_of_time_ends_a_catch_up_task_after_a_bounded_number_of_runs() {
    let (clock, timer) = manual();
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    let h = timer
        .add_or_submit(
            Task::every(DAY, move || {
                r.fetch_add(1, SeqCst);
            })
            .misfire(MisfirePolicy::CatchUp),
        )
        .unwrap();
    clock.advance(Duration::MAX);
    let runs = runs.load(SeqCst) as u64;
    assert!(
        (1..=MisfirePolicy::MAX_CATCH_UP + 1).contains(&runs),
        "{runs} runs after a jump to the end of time"
    );
    assert!(h.is_done(), "no next run fits in time: the task ended");
    assert!(
        timer.stats().skipped > 200_000,
        "the missed runs are counted"
    );
}

/// Item 8: `reschedule(Duration::ZERO)` runs the task at once, as `Task::after(ZERO)` does, even
/// at manual time 0.
#[test]
fn reschedule_to_zero_runs_at_once() {
    let (_clock, timer) = manual();
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    let h = timer
        .add_or_submit(Task::after(SEC, move || {
            r.fetch_add(1, SeqCst);
        }))
        .unwrap();
    assert!(h.reschedule(Duration::ZERO));
    assert_eq!(
        ran.load(SeqCst),
        1,
        "ran before reschedule returned (inline)"
    );
    assert!(h.is_done());
    assert_eq!(timer.pending(), 0);
}

/// Item 9: after the only pending timer is cancelled, the tick thread wakes at most once more
/// (for the bucket it was sleeping until), never more.
#[test]
fn cancelling_the_earliest_timer_costs_at_most_one_wake_up() {
    let timer = Timer::builder().threads(1).build().unwrap();
    let h = timer
        .add_or_submit(Task::after(SEC, || panic!("cancelled: must not run")))
        .unwrap();
    // Let the add's own wake-ups (a stamp within a tick, one more look a tick later) happen:
    // they take a few milliseconds; 300 ms leaves room for a loaded machine.
    thread::sleep(300 * MS);
    let before = timer.stats().tick_wakeups;
    assert!(h.cancel());
    thread::sleep(1500 * MS); // well past the old deadline
    let after = timer.stats().tick_wakeups;
    assert!(
        after - before <= 1,
        "{} wake-ups after the only timer was cancelled",
        after - before
    );
    assert_eq!(timer.stats().fired, 0);
}

/// A tick the builder accepts, however coarse, never makes a task late by more than a tick or
/// panics: with a tick of 2^55 ns (about 417 days), the young queue's threshold (512 ticks, 2^64
/// ns) overflowed. Debug builds panicked in the add; release builds wrapped it to 0, so every
/// task not yet due went to the young queue, to be filed at 2^63 ns: a 1 s task due at the
/// first tick ran about 292 years late.
#[test]
fn a_coarse_tick_neither_overflows_nor_makes_a_task_late() {
    let clock = ManualClock::new();
    let timer = Timer::builder()
        .tick(Duration::from_nanos(1 << 55))
        .clock(clock.clone())
        .executor(Arc::new(InlineExecutor::new()))
        .build()
        .expect("the builder accepts the tick");
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    let h = timer
        .add_or_submit(Task::after(SEC, move || {
            r.fetch_add(1, SeqCst);
        }))
        .expect("added");
    assert!(h.deadline().is_some());
    clock.advance(Duration::from_nanos(1 << 56));
    assert_eq!(
        ran.load(SeqCst),
        1,
        "a 1 s task did not run within two ticks"
    );
}

/// The same tick on the real clock, where adds go through the ring: the owner's drain (a short
/// add files at once) of a ring holding a cancelled record must not panic either.
#[test]
fn a_coarse_tick_on_the_real_clock_drains_without_a_panic() {
    let timer = Timer::builder()
        .tick(Duration::from_nanos(1 << 56))
        .build()
        .expect("the builder accepts the tick");
    let h = timer
        .add_or_submit(Task::after(Duration::MAX, || {}))
        .expect("added");
    assert!(h.cancel());
    drop(h);
    let h2 = timer.add_or_submit(Task::after(MS, || {})).expect("added");
    assert!(h2.deadline().is_some());
    assert!(h2.cancel());
    assert!(timer.shutdown().is_empty());
}

/// Every tick the builder accepts, up to `u64::MAX` ns, on the manual clock: a one-shot task
/// runs at the first tick, a repeating one runs, a sleep completes, a task at the end of time waits
/// (unless the first tick is the end of time, where everything left is due and a repeating task
/// ends), and nothing panics (debug builds check every overflow).
#[test]
fn every_accepted_tick_up_to_the_largest_works() {
    for shift in [40, 50, 55, 56, 60, 62, 63, 64] {
        let end_of_time = shift == 64;
        let tick = Duration::from_nanos(if end_of_time { u64::MAX } else { 1 << shift });
        let clock = ManualClock::new();
        let timer = Timer::builder()
            .tick(tick)
            .clock(clock.clone())
            .executor(Arc::new(InlineExecutor::new()))
            .build()
            .expect("the builder accepts the tick");
        let (once, every) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (o, e) = (once.clone(), every.clone());
        let one = timer
            .add_or_submit(Task::after(SEC, move || {
                o.fetch_add(1, SeqCst);
            }))
            .expect("added");
        let rep = timer
            .add_or_submit(Task::every(SEC, move || {
                e.fetch_add(1, SeqCst);
            }))
            .expect("added");
        let last = timer
            .add_or_submit(Task::after(Duration::MAX, || {}))
            .expect("added");
        let mut sleep = std::pin::pin!(timer.sleep(SEC));
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        assert!(sleep.as_mut().poll(&mut cx).is_pending(), "tick 2^{shift}");
        clock.advance(tick - Duration::from_nanos(1));
        assert_eq!(once.load(SeqCst), 0, "tick 2^{shift}: early");
        clock.advance(Duration::from_nanos(1));
        assert_eq!(once.load(SeqCst), 1, "tick 2^{shift}: the 1 s task");
        assert!(one.is_done());
        assert!(
            every.load(SeqCst) >= 1,
            "tick 2^{shift}: the repeating task"
        );
        assert!(sleep.as_mut().poll(&mut cx).is_ready(), "tick 2^{shift}");
        let state = rep.state();
        assert_eq!(rep.cancel(), !end_of_time, "tick 2^{shift}: {state:?}");
        assert_eq!(
            last.is_done(),
            end_of_time,
            "tick 2^{shift}: the end of time"
        );
        let left = usize::from(!end_of_time);
        assert_eq!(timer.shutdown().len(), left, "tick 2^{shift}");
    }
}
