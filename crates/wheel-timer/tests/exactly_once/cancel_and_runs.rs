//! Cancel against runs in progress: once `cancel` returned true no run starts (a `CatchUp` task
//! running its missed runs back to back included), a cancel from another thread waits for the
//! run in progress, and two tasks cancelling each other do not deadlock. (From the adversarial
//! review of 2026-11-22, issue 9, items 1 and 2: each test failed on the code it ran against. The
//! review's other items are tested with their promises: `timing/ticks_and_ends.rs`,
//! `handout/chunks.rs`, `shutdown/handing_back.rs`, `api/tasks.rs`, `panicking_drops.rs`; item 7,
//! the bare wheel's order after a panicking callback, in the `timing-wheel` crate.)

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;

use tickwheel::{ManualClock, MisfirePolicy, RayonExecutor, Task, Timer};

use crate::support::{MS, SEC, manual};

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

// From the adversarial review of 2026-11-25 (the owner's drains, issue 8).
