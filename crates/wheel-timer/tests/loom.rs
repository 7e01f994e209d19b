//! Model checking of the concurrency protocol with `loom`: every interleaving (up to the
//! preemption bound) of the races that decide a task's fate. Built only with `--cfg loom`:
//!
//! ```sh
//! RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p wheel-timer --test loom
//! ```
//!
//! (`just loom`). Under `cfg(loom)` the reaper's and the timer's locks, condition variables,
//! atomics, thread-locals and threads are loom's (see `reaper::sync`), so this is the real code:
//! a real `Timer` with its tick thread, driven by a `ManualClock`, tasks run by the inline
//! executor on the tick thread.
#![cfg(loom)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::time::Duration;

use wheel_timer::{InlineExecutor, ManualClock, Task, Timer};

const MS: Duration = Duration::from_millis(1);

fn timer(clock: &ManualClock) -> Timer {
    Timer::builder()
        .clock(clock.clone())
        .executor(Arc::new(InlineExecutor::new()))
        .build()
        .unwrap()
}

fn counting(runs: &Arc<AtomicUsize>) -> impl FnMut() + Send + 'static {
    let runs = runs.clone();
    move || {
        runs.fetch_add(1, SeqCst);
    }
}

/// `cancel` on another thread races the tick thread firing the task: exactly one wins.
#[test]
fn cancel_races_fire() {
    loom::model(|| {
        let clock = ManualClock::new();
        let timer = timer(&clock);
        let runs = Arc::new(AtomicUsize::new(0));
        let handle = timer
            .add_or_submit(Task::after(MS, counting(&runs)))
            .unwrap();
        let canceller = loom::thread::spawn(move || handle.cancel());
        clock.advance(MS);
        let cancelled = canceller.join().unwrap();
        let returned = timer.shutdown().len();
        assert_eq!(runs.load(SeqCst) + usize::from(cancelled) + returned, 1);
        assert!(
            !cancelled || runs.load(SeqCst) == 0,
            "ran after cancel returned true"
        );
    });
}

/// `reschedule` races firing: either the task ran and reschedule said false, or it moved and
/// is still pending (and comes back from shutdown).
#[test]
fn reschedule_races_fire() {
    loom::model(|| {
        let clock = ManualClock::new();
        let timer = timer(&clock);
        let runs = Arc::new(AtomicUsize::new(0));
        let handle = timer
            .add_or_submit(Task::after(MS, counting(&runs)))
            .unwrap();
        let mover = loom::thread::spawn(move || handle.reschedule(Duration::from_secs(3600)));
        clock.advance(MS);
        let moved = mover.join().unwrap();
        let returned = timer.shutdown().len();
        assert_eq!(runs.load(SeqCst) + returned, 1);
        assert_eq!(
            moved,
            returned == 1,
            "reschedule said {moved} but the task ran: {}",
            runs.load(SeqCst)
        );
    });
}

/// An add (of a task already due and of a later one) races `shutdown`: every accepted task runs
/// or comes back; a refused one is handed back by the error.
#[test]
fn add_races_shutdown() {
    loom::model(|| {
        let clock = ManualClock::new();
        let timer = Arc::new(timer(&clock));
        let runs = Arc::new(AtomicUsize::new(0));
        let (t, r) = (timer.clone(), runs.clone());
        let adder = loom::thread::spawn(move || {
            let now = t
                .add_or_submit(Task::after(Duration::ZERO, counting(&r)))
                .is_ok();
            let later = t.add_or_submit(Task::after(MS, counting(&r))).is_ok();
            usize::from(now) + usize::from(later)
        });
        let returned = timer.shutdown().len();
        let accepted = adder.join().unwrap();
        assert_eq!(runs.load(SeqCst) + returned, accepted);
    });
}

/// A periodic task re-arming on the tick thread races `cancel`: after cancel returned true, at
/// most the run in progress finishes and nothing is left in the wheel.
#[test]
fn periodic_rearm_races_cancel() {
    loom::model(|| {
        let clock = ManualClock::new();
        let timer = timer(&clock);
        let runs = Arc::new(AtomicUsize::new(0));
        let handle = timer
            .add_or_submit(Task::every(MS, counting(&runs)))
            .unwrap();
        let r = runs.clone();
        let canceller = loom::thread::spawn(move || {
            let cancelled = handle.cancel();
            (cancelled, r.load(SeqCst))
        });
        clock.advance(MS);
        let (cancelled, runs_at_cancel) = canceller.join().unwrap();
        clock.advance(MS);
        assert!(cancelled, "a periodic task is always cancellable");
        assert!(
            runs.load(SeqCst) <= runs_at_cancel + 1,
            "ran again after cancel returned true"
        );
        assert_eq!(timer.pending(), 0);
        assert!(timer.shutdown().is_empty());
    });
}
