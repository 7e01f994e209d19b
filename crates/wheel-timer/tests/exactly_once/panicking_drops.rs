//! A task's closure whose `Drop` panics: the user's code, run wherever the closure is let go.
//! The timer's bookkeeping is done before the drop, so such a panic never leaves a cancelled task
//! counted as pending, a class marked as running, or a task lost at shutdown (review of
//! 2026-11-28: all three happened). Plus two boundaries that review found documented wrongly.

use std::panic::{AssertUnwindSafe, catch_unwind, panic_any};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tickwheel::{
    AddError, InlineExecutor, ManualClock, MisfirePolicy, ShutdownOptions, Task, TaskContext,
    TaskState, Timer, TimerHandle,
};

use crate::support::{Boom, Held, MS, SEC, silence_boom};

const HOUR: Duration = Duration::from_secs(3600);

/// Captured by a closure: counts its drop, then panics if armed.
struct Bomb {
    drops: Arc<AtomicUsize>,
    armed: bool,
}

impl Bomb {
    fn armed(drops: &Arc<AtomicUsize>) -> Bomb {
        Bomb {
            drops: drops.clone(),
            armed: true,
        }
    }

    fn quiet(drops: &Arc<AtomicUsize>) -> Bomb {
        Bomb {
            drops: drops.clone(),
            armed: false,
        }
    }
}

impl Drop for Bomb {
    fn drop(&mut self) {
        self.drops.fetch_add(1, SeqCst);
        if self.armed && !std::thread::panicking() {
            panic_any(Boom);
        }
    }
}

fn bounded(
    clock: &ManualClock,
    max_pending: usize,
    executor: Arc<dyn tickwheel::Executor>,
) -> Timer {
    Timer::builder()
        .clock(clock.clone())
        .executor(executor)
        .max_pending(max_pending)
        .build()
        .unwrap()
}

/// Wherever the task waits when it is cancelled (not yet stamped, an hour out; in the wheel;
/// handed to an executor that has not run it yet), the cancel is counted and frees its place
/// under `max_pending` before the closure is dropped, and the drop's panic reaches the caller.
#[test]
fn a_cancel_whose_closure_drop_panics_is_counted_and_frees_its_place() {
    silence_boom();
    for (case, delay, due_first) in [
        ("far: waiting to be stamped", HOUR, false),
        ("near: in the wheel", 100 * MS, false),
        ("due: handed to the executor", 100 * MS, true),
    ] {
        let clock = ManualClock::new();
        let held = Arc::new(Held::default());
        let timer = bounded(&clock, 1, held.clone());
        let drops = Arc::new(AtomicUsize::new(0));
        let bomb = Bomb::armed(&drops);
        let handle = timer
            .add_or_submit(Task::after(delay, move || {
                let _keep = &bomb;
            }))
            .unwrap();
        if due_first {
            clock.advance(delay);
            assert_eq!(held.len(), 1, "{case}");
        }
        let cancel = catch_unwind(AssertUnwindSafe(|| handle.cancel()));
        assert!(
            cancel.is_err(),
            "{case}: the drop's panic reaches cancel's caller"
        );
        assert_eq!(
            drops.load(SeqCst),
            1,
            "{case}: dropped once, before cancel returned"
        );
        assert_eq!(handle.state(), TaskState::Cancelled, "{case}");
        let stats = timer.stats();
        assert_eq!(
            (timer.pending(), stats.pending, stats.cancelled),
            (0, 0, 1),
            "{case}: (pending(), stats.pending, stats.cancelled)"
        );
        if due_first {
            // Its job still sits in the executor, and counts under `max_pending` until the
            // executor lets go of it (documented on `TimerBuilder::max_pending`).
            let refused = timer.add_or_submit(Task::after(SEC, || {}));
            assert!(matches!(refused, Err(AddError::Full(_))), "{case}");
        }
        held.run_all(); // the cancelled task's job finds nothing to run
        match timer.add_or_submit(Task::after(SEC, || {})) {
            Ok(_) => {}
            Err(AddError::Full(_)) => panic!("{case}: refused as full with nothing pending"),
            Err(e) => panic!("{case}: {e}"),
        }
        assert_eq!(timer.stats().fired, 0, "{case}");
    }
}

/// The job lets go of a repeating task that stopped itself, or that was cancelled during its
/// run, after the run's bookkeeping: a panicking drop is counted like a panicking run, and its
/// class is not left looking busy (it was: every later task of the class went to the slow pool).
#[test]
fn a_repeating_task_whose_closure_drop_panics_leaves_its_class_free() {
    silence_boom();
    for how in ["stops itself", "cancels itself"] {
        let clock = ManualClock::new();
        let timer = Timer::builder()
            .clock(clock.clone())
            .threads(2)
            .name("pd")
            .build()
            .unwrap();
        let drops = Arc::new(AtomicUsize::new(0));
        let bomb = Bomb::armed(&drops);
        let own: Arc<OnceLock<TimerHandle>> = Arc::default();
        let me = own.clone();
        let cancel = how == "cancels itself";
        let handle = timer
            .add_or_submit(
                Task::every(SEC, move |cx: &mut TaskContext<'_>| {
                    let _keep = &bomb;
                    if cancel {
                        assert!(me.get().expect("set before the run").cancel());
                    } else {
                        cx.stop();
                    }
                })
                .class("c"),
            )
            .unwrap();
        own.set(handle.clone()).unwrap();
        clock.advance(SEC);
        timer.wait_idle();
        assert_eq!(drops.load(SeqCst), 1, "{how}: the closure was dropped");
        assert!(handle.is_done(), "{how}");
        assert_eq!(
            timer.stats().panicked,
            1,
            "{how}: the drop's panic is counted"
        );

        // An hour later, a one-shot of the same class, with no run of the class in progress.
        clock.advance(HOUR);
        let ran_on = Arc::new(Mutex::new(String::new()));
        let r = ran_on.clone();
        timer
            .add_or_submit(
                Task::after(SEC, move || {
                    *r.lock().unwrap() = std::thread::current().name().unwrap_or("?").to_owned();
                })
                .class("c"),
            )
            .unwrap();
        clock.advance(SEC);
        timer.wait_idle();
        let stats = timer.stats();
        let ran_on = ran_on.lock().unwrap().clone();
        assert!(stats.isolated_classes.is_empty(), "{how}: {stats:?}");
        assert!(
            ran_on.starts_with("pd-exec"),
            "{how}: ran on {ran_on:?}, slow runs {}",
            stats.slow_run_time.runs
        );
    }
}

/// `shutdown_with(run_due)` runs a due repeating task that stops itself and whose drop panics:
/// the panic is counted, and every other task still comes back (it unwound out of the shutdown,
/// and the tasks not yet handed back were dropped with it).
#[test]
fn a_panicking_drop_at_shutdown_loses_no_other_task() {
    silence_boom();
    let clock = ManualClock::new();
    let held = Arc::new(Held::default());
    let timer = bounded(&clock, 100, held.clone());
    let drops = Arc::new(AtomicUsize::new(0));
    let bomb = Bomb::armed(&drops);
    timer
        .add_or_submit(Task::every(SEC, move |cx: &mut TaskContext<'_>| {
            let _keep = &bomb;
            cx.stop();
        }))
        .unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    timer
        .add_or_submit(Task::after(SEC, move || {
            r.fetch_add(1, SeqCst);
        }))
        .unwrap();
    let later: Vec<_> = (1..=3)
        .map(|k| {
            let q = Bomb::quiet(&drops);
            timer
                .add_or_submit(Task::after(k * HOUR, move || {
                    let _keep = &q;
                }))
                .unwrap()
        })
        .collect();
    clock.advance(SEC);
    assert_eq!(held.len(), 2, "both due tasks wait for the executor");
    let report = timer.shutdown_with(ShutdownOptions::new().run_due(true));
    assert_eq!(report.ran_due, 2);
    assert_eq!(ran.load(SeqCst), 1);
    assert_eq!(
        drops.load(SeqCst),
        1,
        "only the stopped task's closure was dropped"
    );
    assert_eq!(report.tasks.len(), 3, "the three later tasks come back");
    assert!(later.iter().all(|h| h.state() == TaskState::Returned));
    assert_eq!(timer.stats().panicked, 1);
    drop(report);
    assert_eq!(drops.load(SeqCst), 4);
}

/// Dropping the timer drops every task that never ran, even when some of their closures panic
/// in `Drop` (the first such panic unwound out of the timer's `drop`, and a second one, during
/// that unwinding, aborted the process).
#[test]
fn dropping_the_timer_drops_every_unrun_closure_even_if_some_panic() {
    silence_boom();
    let clock = ManualClock::new();
    let timer = bounded(&clock, 100, Arc::new(InlineExecutor::new()));
    let drops = Arc::new(AtomicUsize::new(0));
    for k in 1..=4u32 {
        let bomb = if k % 2 == 0 {
            Bomb::armed(&drops)
        } else {
            Bomb::quiet(&drops)
        };
        timer
            .add_or_submit(Task::after(k * HOUR, move || {
                let _keep = &bomb;
            }))
            .unwrap();
    }
    drop(timer);
    assert_eq!(drops.load(SeqCst), 4);
}

/// `ShutdownOptions::run_due` holds a `Skip` task to the same line as its runs on the executor
/// (`MisfirePolicy::Skip`): it runs up to a period plus a tick late, not from a period on.
#[test]
fn run_due_runs_a_skip_task_until_a_period_and_a_tick_late() {
    for (late, runs) in [(10 * MS, 1), (11 * MS, 0)] {
        let clock = ManualClock::new();
        let held = Arc::new(Held::default());
        let timer = bounded(&clock, 100, held.clone()); // tick 1 ms
        let ran = Arc::new(AtomicUsize::new(0));
        let r = ran.clone();
        timer
            .add_or_submit(
                Task::every(10 * MS, move || {
                    r.fetch_add(1, SeqCst);
                })
                .misfire(MisfirePolicy::Skip),
            )
            .unwrap();
        clock.advance(10 * MS); // due, and held on its way to the executor
        clock.advance(late);
        let report = timer.shutdown_with(ShutdownOptions::new().run_due(true));
        assert_eq!(
            (ran.load(SeqCst) as u64, report.ran_due),
            (runs, runs),
            "{late:?} late: (runs, ran_due)"
        );
        if runs == 0 {
            assert!(
                timer.stats().skipped > 0,
                "{late:?} late: counted as skipped"
            );
        }
    }
}

/// A task added for an instant already past runs at once, and is as late as that instant is old
/// (lateness counts from the instant asked for, for every task).
#[test]
fn a_task_at_a_past_instant_is_late_by_its_age() {
    let (clock, timer) = crate::support::manual();
    clock.advance(HOUR);
    let seen = Arc::new(Mutex::new(None));
    let s = seen.clone();
    let past = timer.now() - 30 * 60 * SEC;
    timer
        .add_or_submit(Task::at(past, move |cx: &mut TaskContext<'_>| {
            *s.lock().unwrap() = Some(cx.lateness());
        }))
        .unwrap();
    let lateness = seen.lock().unwrap().expect("ran at once");
    assert_eq!(lateness, 30 * 60 * SEC);
    assert_eq!(timer.stats().lateness_max, 30 * 60 * SEC);
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
