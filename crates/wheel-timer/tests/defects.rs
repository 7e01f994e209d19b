//! Regression tests for the adversarial reviews of 2026-11-22 (issue 9) and, at the end, of
//! 2026-11-25 (the owner's drains): each test is named after the promise it guards and failed on
//! the code the review ran against. (Item 7, the bare wheel's order after a panicking callback,
//! is tested in the `timing-wheel` crate.)

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use tickwheel::{
    BuildError, InlineExecutor, ManualClock, MisfirePolicy, RayonExecutor, Task, Timer,
};

mod support;
use support::{DAY, MS, SEC, manual};

/// Item 1: a `CatchUp` task running its missed runs back to back is cancelled from another
/// thread; no run may start after `cancel` returned true. (Also modelled exhaustively in
/// `tests/loom.rs::catch_up_runs_race_cancel`.)
#[test]
fn no_catch_up_run_starts_after_cancel_returned_true() {
    for attempt in 0..200 {
        let (clock, timer) = manual();
        let cancelled = Arc::new(AtomicBool::new(false));
        let late = Arc::new(AtomicUsize::new(0));
        let runs = Arc::new(AtomicUsize::new(0));
        let (c, l, r) = (cancelled.clone(), late.clone(), runs.clone());
        let handle = timer
            .add_or_submit(
                Task::every(MS, move || {
                    r.fetch_add(1, SeqCst);
                    if c.load(SeqCst) {
                        l.fetch_add(1, SeqCst);
                    }
                })
                .misfire(MisfirePolicy::CatchUp),
            )
            .unwrap();
        let c = cancelled.clone();
        let r = runs.clone();
        let canceller = thread::spawn(move || {
            // Cancel somewhere in the middle of the catching up.
            while r.load(SeqCst) < 1 + attempt % 40 {
                thread::yield_now();
            }
            assert!(handle.cancel(), "a periodic task is always cancellable");
            c.store(true, SeqCst);
        });
        clock.advance(SEC); // ~1000 runs owed: they run back to back, in turns
        canceller.join().unwrap();
        clock.advance(SEC);
        assert_eq!(
            late.load(SeqCst),
            0,
            "attempt {attempt}: a run started after cancel returned true"
        );
    }
}

/// Item 1, the guarantee behind it: a cancel that lands while a periodic task runs on another
/// thread returns only when that run has ended, so what the closure uses may be freed at once.
#[test]
fn cancel_waits_for_a_run_in_progress_on_another_thread() {
    let clock = ManualClock::new();
    let pool = Arc::new(RayonExecutor::new(1, "in-progress").unwrap());
    let timer = Timer::builder()
        .clock(clock.clone())
        .executor(pool.clone())
        .build()
        .unwrap();
    let started = Arc::new(Barrier::new(2));
    let (finished, runs) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicUsize::new(0)),
    );
    let (s, f, r) = (started.clone(), finished.clone(), runs.clone());
    let h = timer
        .add_or_submit(Task::every(MS, move || {
            if r.fetch_add(1, SeqCst) == 0 {
                s.wait();
                thread::sleep(50 * MS); // still running when the cancel lands
                f.store(true, SeqCst);
            }
        }))
        .unwrap();
    clock.advance(MS);
    started.wait();
    assert!(h.cancel());
    assert!(
        finished.load(SeqCst),
        "cancel returned before the run ended"
    );
    clock.advance(SEC);
    pool.wait_idle();
    assert_eq!(runs.load(SeqCst), 1, "no run after the cancel");
}

/// Two periodic tasks, running at once on two threads, cancel each other: neither cancel waits
/// (a cancel from inside a task never does), so neither blocks the other for ever.
#[test]
fn two_tasks_cancelling_each_other_do_not_deadlock() {
    let clock = ManualClock::new();
    let pool = Arc::new(RayonExecutor::new(2, "mutual").unwrap());
    let timer = Timer::builder()
        .clock(clock.clone())
        .executor(pool.clone())
        .build()
        .unwrap();
    let both = Arc::new(Barrier::new(2));
    let slots: Arc<[Mutex<Option<tickwheel::TimerHandle>>; 2]> = Arc::new(Default::default());
    let cancelled = Arc::new(AtomicUsize::new(0));
    for me in 0..2 {
        let (b, slots2, c) = (both.clone(), slots.clone(), cancelled.clone());
        let h = timer
            .add_or_submit(Task::every(MS, move || {
                b.wait(); // both runs in progress
                let other = slots2[1 - me].lock().unwrap().clone();
                if other.expect("both added before the clock moves").cancel() {
                    c.fetch_add(1, SeqCst);
                }
            }))
            .unwrap();
        *slots[me].lock().unwrap() = Some(h);
    }
    clock.advance(MS);
    pool.wait_idle();
    assert_eq!(
        cancelled.load(SeqCst),
        2,
        "each cancel stopped the other task"
    );
}

/// Item 2: a `CatchUp` task that is always behind (its period, 1 ns, is below the tick and its
/// run is slow) must not starve other due tasks: it takes turns of at most `BURST` runs, and a
/// one-shot task due meanwhile runs within one turn.
#[test]
fn a_task_that_is_always_behind_takes_turns_with_other_due_tasks() {
    let clock = ManualClock::new();
    let pool = Arc::new(RayonExecutor::new(1, "behind").unwrap());
    let timer = Timer::builder()
        .clock(clock.clone())
        .executor(pool.clone())
        .build()
        .unwrap();
    let log = Arc::new(Mutex::new(Vec::<char>::new()));
    let l = log.clone();
    let c = clock.clone();
    let hog = timer
        .add_or_submit(
            Task::every(Duration::from_nanos(1), move || {
                l.lock().unwrap().push('p');
                // A run longer than the period: the clock moves a tick during it.
                let _ = &c;
            })
            .misfire(MisfirePolicy::CatchUp),
        )
        .unwrap();
    let l = log.clone();
    timer
        .add_or_submit(Task::after(20 * MS, move || l.lock().unwrap().push('o')))
        .unwrap();
    clock.advance(SEC);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !log.lock().unwrap().contains(&'o') && Instant::now() < deadline {
        thread::sleep(MS);
    }
    let log = log.lock().unwrap().clone();
    let at = log
        .iter()
        .position(|&c| c == 'o')
        .expect("the one-shot task ran");
    assert!(
        at <= 2 * MisfirePolicy::BURST as usize,
        "the one-shot ran after {at} runs of the task that is behind"
    );
    let runs = log.iter().filter(|&&c| c == 'p').count();
    assert!(
        runs as u64 <= MisfirePolicy::MAX_CATCH_UP + 1,
        "a 1 ns period runs at the tick, and owes at most {} runs: ran {runs}",
        MisfirePolicy::MAX_CATCH_UP
    );
    assert!(hog.cancel());
    pool.wait_idle();
}

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

/// Item 4: `shutdown` returns tasks earliest first, including tasks already handed to the executor
/// (claimed back from its queue) and a periodic task caught mid-run (by its next run).
#[test]
fn shutdown_returns_every_task_earliest_first() {
    let clock = ManualClock::new();
    let pool = Arc::new(RayonExecutor::new(1, "order").unwrap());
    let timer = Arc::new(
        Timer::builder()
            .clock(clock.clone())
            .executor(pool.clone())
            .build()
            .unwrap(),
    );
    let order = Arc::new(Mutex::new(Vec::<u32>::new()));
    let (running, release) = (Arc::new(Barrier::new(2)), Arc::new(Barrier::new(2)));
    // A periodic task whose first run (at 10 ms) holds the only pool thread until shutdown has
    // claimed the rest: it is caught mid-run, and its next run would be at 20 ms.
    let (o, g, r) = (order.clone(), running.clone(), release.clone());
    let first = AtomicBool::new(true);
    timer
        .add_or_submit(Task::every(10 * MS, move || {
            if first.swap(false, SeqCst) {
                g.wait();
                r.wait();
            } else {
                o.lock().unwrap().push(20);
            }
        }))
        .unwrap();
    // Due at 12 and 15 ms: handed to the executor, queued behind the blocked run.
    for ms in [15u32, 12] {
        let o = order.clone();
        timer
            .add_or_submit(Task::after(ms * MS, move || o.lock().unwrap().push(ms)))
            .unwrap();
    }
    // An hour away: still waiting for its deadline (added last: shutdown scans it last).
    let o = order.clone();
    timer
        .add_or_submit(Task::after(3600 * SEC, move || {
            o.lock().unwrap().push(3_600_000)
        }))
        .unwrap();
    clock.advance(15 * MS);
    running.wait(); // the periodic run is in progress
    let t = timer.clone();
    let stopper = thread::spawn(move || t.shutdown());
    // Once nothing waits any more, shutdown's scan has claimed the queued tasks too.
    while timer.pending() > 0 {
        thread::yield_now();
    }
    release.wait();
    let back = stopper.join().unwrap();
    pool.wait_idle();
    assert!(order.lock().unwrap().is_empty(), "nothing else ran");
    assert_eq!(back.len(), 4);
    back.into_iter().for_each(Task::run);
    assert_eq!(
        *order.lock().unwrap(),
        [12, 15, 20, 3_600_000],
        "earliest first"
    );
}

/// Item 5: a thread name the operating system refuses is a typed error, not a panic, with the
/// built-in pool and with a user executor.
#[test]
fn a_thread_name_with_a_nul_byte_is_a_typed_error() {
    for custom in [false, true] {
        let mut b = Timer::builder().name("a\0b");
        if custom {
            b = b.executor(Arc::new(InlineExecutor::new()));
        }
        match b.build() {
            Err(BuildError::InvalidName { name }) => assert_eq!(name, "a\0b"),
            other => panic!("expected InvalidName, got {other:?}"),
        }
    }
}

/// Item 6: a panic payload whose own `Drop` panics is still a counted, reported panic; the
/// one-shot task ends as done and a periodic task goes on.
#[test]
fn a_panic_payload_that_panics_when_dropped_is_contained() {
    struct Grenade;
    impl Drop for Grenade {
        fn drop(&mut self) {
            panic!("the payload's drop panics too");
        }
    }
    let clock = ManualClock::new();
    let hooked = Arc::new(AtomicUsize::new(0));
    let h = hooked.clone();
    let timer = Timer::builder()
        .clock(clock.clone())
        .executor(Arc::new(InlineExecutor::new()))
        .on_panic(move |_| {
            h.fetch_add(1, SeqCst);
        })
        .build()
        .unwrap();
    let once = timer
        .add_or_submit(Task::after(MS, || std::panic::panic_any(Grenade)))
        .unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    let every = timer
        .add_or_submit(Task::every(MS, move || {
            r.fetch_add(1, SeqCst);
            std::panic::panic_any(Grenade)
        }))
        .unwrap();
    clock.advance(MS);
    clock.advance(MS);
    assert!(once.is_done());
    assert!(!every.is_done(), "the periodic task goes on");
    assert_eq!(runs.load(SeqCst), 2);
    let s = timer.stats();
    assert_eq!((s.panicked, hooked.load(SeqCst)), (3, 3));
    assert_eq!(s.last_panic.as_deref(), Some("<non-string panic payload>"));
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

// From the adversarial review of 2026-11-25 (the owner's drains, issue 8).

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
