//! Timing behaviour on the manual clock: deadlines across every level, cancel, reschedule,
//! periodic tasks under each misfire policy, catch-up after a jump of days, backpressure and
//! panics. The inline executor makes "handed to the executor" mean "has run", so every
//! assertion is exact and nothing sleeps.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tickwheel::{AddError, InlineExecutor, ManualClock, MisfirePolicy, RayonExecutor, Task, Timer};

use crate::support::{DAY, MS, Rng, SEC, manual};

/// A log of (label, clock time at run).
type Log = Arc<Mutex<Vec<(usize, Duration)>>>;

fn logging(log: &Log, clock: &ManualClock, label: usize) -> impl FnMut() + Send + 'static {
    let (log, clock) = (log.clone(), clock.clone());
    move || log.lock().push((label, clock.elapsed()))
}

#[test]
fn tasks_fire_at_their_deadlines_and_not_before_across_all_levels() {
    let (clock, timer) = manual();
    let log: Log = Arc::default();
    let delays = [
        MS,
        5 * MS,
        63 * MS,
        64 * MS,
        SEC,
        Duration::from_millis(4_097),
        5 * 60 * SEC,
        3 * 3600 * SEC,
        2 * DAY,
        40 * DAY,
        200 * DAY,
        3 * 365 * DAY,
    ];
    for (i, &d) in delays.iter().enumerate() {
        let f = logging(&log, &clock, i);
        timer.add_or_submit(Task::after(d, f)).unwrap();
    }
    for (i, &d) in delays.iter().enumerate() {
        clock.set(d - MS / 2);
        assert_eq!(log.lock().len(), i, "task {i} ({d:?}) ran early");
        clock.set(d);
        assert_eq!(
            log.lock().last(),
            Some(&(i, d)),
            "task {i} ({d:?}) did not run at its deadline"
        );
    }
    assert_eq!(timer.pending(), 0);
    let stats = timer.stats();
    assert_eq!(stats.fired, delays.len() as u64);
    assert_eq!(
        stats.lateness_max,
        Duration::ZERO,
        "on the manual clock every run is exactly on time"
    );
}

#[test]
fn cancel_before_fire() {
    let (clock, timer) = manual();
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    let h = timer
        .add_or_submit(Task::after(SEC, move || {
            r.fetch_add(1, SeqCst);
        }))
        .unwrap();
    assert_eq!(timer.pending(), 1);
    assert!(h.cancel());
    assert_eq!(timer.pending(), 0, "the entry is freed at once");
    assert!(h.is_cancelled() && h.is_done());
    assert!(!h.cancel(), "cancel twice");
    clock.advance(2 * SEC);
    assert_eq!(ran.load(SeqCst), 0);
    assert_eq!(timer.stats().cancelled, 1);
}

#[test]
fn far_tasks_are_cancelled_alike_before_and_after_they_leave_the_young_queue() {
    // A task due 512 ticks out or more waits 256 ticks before it is filed in the wheel.
    let (clock, timer) = manual();
    let ran = Arc::new(AtomicUsize::new(0));
    let add = |delay| {
        let r = ran.clone();
        timer
            .add_or_submit(Task::after(delay, move || {
                r.fetch_add(1, SeqCst);
            }))
            .unwrap()
    };
    let (young, filed, kept) = (add(30 * SEC), add(30 * SEC), add(30 * SEC));
    assert!(young.cancel());
    clock.advance(300 * MS); // the other two are in the wheel now
    assert!(filed.cancel());
    assert_eq!(timer.pending(), 1);
    assert_eq!(kept.deadline(), Some(timer.now() + 30 * SEC - 300 * MS));
    clock.advance(30 * SEC - 300 * MS - MS);
    assert_eq!(ran.load(SeqCst), 0, "early");
    clock.advance(MS);
    assert_eq!(
        ran.load(SeqCst),
        1,
        "only the task not cancelled ran, at its deadline"
    );
    assert_eq!(timer.stats().cancelled, 2);
}

#[test]
fn far_tasks_cancelled_young_leave_no_memory_behind_while_the_clock_stands_still() {
    let (_clock, timer) = manual();
    let cycle = || {
        let handles: Vec<_> = (0..1_000)
            .map(|_| timer.add_or_submit(Task::after(30 * SEC, || {})).unwrap())
            .collect();
        for h in handles {
            assert!(h.cancel());
        }
    };
    cycle();
    let after_one = timer.heap_bytes();
    for _ in 0..100 {
        cycle();
    }
    assert_eq!(timer.pending(), 0);
    // Without the sweep of a full young queue, its 101,000 dead records would be kept until the
    // clock moves 256 ticks.
    assert_eq!(timer.heap_bytes(), after_one);
}

#[test]
fn reschedule_earlier_and_later() {
    let (clock, timer) = manual();
    let log: Log = Arc::default();
    let a = logging(&log, &clock, 0);
    let b = logging(&log, &clock, 1);
    let early = timer.add_or_submit(Task::after(10 * SEC, a)).unwrap();
    let late = timer.add_or_submit(Task::after(2 * SEC, b)).unwrap();
    assert!(early.reschedule(SEC));
    assert!(late.reschedule(60 * SEC));
    clock.advance(SEC);
    assert_eq!(*log.lock(), [(0, SEC)]);
    clock.advance(58 * SEC);
    assert_eq!(log.lock().len(), 1);
    clock.advance(SEC);
    assert_eq!(*log.lock(), [(0, SEC), (1, 60 * SEC)]);
    assert!(!late.reschedule(SEC), "reschedule after it ran");
}

fn periodic_runs(policy: MisfirePolicy) -> Vec<Duration> {
    let (clock, timer) = manual();
    let log: Log = Arc::default();
    let f = logging(&log, &clock, 0);
    let h = timer
        .add_or_submit(Task::every(10 * SEC, f).misfire(policy))
        .unwrap();
    clock.advance(10 * SEC); // on time
    clock.advance(35 * SEC); // stalled: runs due at 20, 30 and 40 were missed; now 45
    clock.advance(5 * SEC); // 50: the grid again
    assert!(h.cancel(), "cancel stops a periodic task");
    assert!(!h.cancel());
    clock.advance(100 * SEC);
    let runs = log.lock().iter().map(|&(_, t)| t).collect();
    assert_eq!(timer.pending(), 0);
    runs
}

#[test]
fn periodic_run_once_runs_once_for_the_missed_runs_and_keeps_the_grid() {
    assert_eq!(
        periodic_runs(MisfirePolicy::RunOnce),
        [10 * SEC, 45 * SEC, 50 * SEC]
    );
}

#[test]
fn periodic_skip_drops_late_runs() {
    assert_eq!(periodic_runs(MisfirePolicy::Skip), [10 * SEC, 50 * SEC]);
}

#[test]
fn periodic_catch_up_runs_every_missed_run() {
    assert_eq!(
        periodic_runs(MisfirePolicy::CatchUp),
        [10 * SEC, 45 * SEC, 45 * SEC, 45 * SEC, 50 * SEC]
    );
}

#[test]
fn a_jump_of_days_fires_everything_once_in_deadline_order() {
    let (clock, timer) = manual();
    let log: Log = Arc::default();
    let mut rng = Rng::new(0x1234_5678_9ABC_DEF1);
    let mut deadlines = Vec::new();
    for i in 0..5_000 {
        let d = Duration::from_millis(1 + rng.below(3 * 86_400_000));
        deadlines.push(d);
        let f = logging(&log, &clock, i);
        timer.add_or_submit(Task::after(d, f)).unwrap();
    }
    clock.advance(3 * DAY);
    let log = log.lock();
    assert_eq!(log.len(), deadlines.len(), "every task ran, once");
    let mut seen = vec![false; deadlines.len()];
    for w in log.windows(2) {
        assert!(
            deadlines[w[0].0] <= deadlines[w[1].0],
            "out of deadline order"
        );
    }
    for &(i, _) in log.iter() {
        assert!(!std::mem::replace(&mut seen[i], true), "task {i} ran twice");
    }
    let stats = timer.stats();
    assert!(
        stats.lateness_max > DAY,
        "the jump shows as lateness: {:?}",
        stats.lateness_max
    );
}

#[test]
fn max_pending_refuses_and_hands_the_task_back() {
    let clock = ManualClock::new();
    let timer = Timer::builder()
        .clock(clock.clone())
        .executor(Arc::new(InlineExecutor::new()))
        .max_pending(3)
        .build()
        .unwrap();
    let hs: Vec<_> = (1..=3)
        .map(|i| timer.add_or_submit(Task::after(i * SEC, || {})).unwrap())
        .collect();
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    let refused = timer
        .add_or_submit(Task::after(SEC, move || {
            r.fetch_add(1, SeqCst);
        }))
        .unwrap_err();
    let AddError::Full(task) = refused else {
        panic!("expected Full, got {refused:?}")
    };
    task.run();
    assert_eq!(ran.load(SeqCst), 1, "the refused task came back intact");
    assert_eq!(timer.stats().rejected, 1);
    // A task already due is refused too: the bound covers what waits for the executor as well.
    assert!(matches!(
        timer.add_or_submit(Task::after(Duration::ZERO, || {})),
        Err(AddError::Full(_))
    ));
    clock.advance(SEC); // one fires
    assert!(timer.add_or_submit(Task::after(SEC, || {})).is_ok());
    assert!(timer.add_or_submit(Task::after(SEC, || {})).is_err());
    assert!(hs[2].cancel()); // one is cancelled
    assert!(timer.add_or_submit(Task::after(SEC, || {})).is_ok());
}

#[test]
fn a_panicking_task_is_counted_and_the_rest_run() {
    let clock = ManualClock::new();
    let messages: Arc<Mutex<Vec<String>>> = Arc::default();
    let m = messages.clone();
    let pool = Arc::new(RayonExecutor::new(2, "panics").unwrap());
    let timer = Timer::builder()
        .clock(clock.clone())
        .executor(pool.clone())
        .on_panic(move |msg| m.lock().push(msg.to_owned()))
        .build()
        .unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    for i in 0..100u32 {
        let ran = ran.clone();
        timer
            .add_or_submit(Task::after(SEC + i * MS, move || {
                if i % 10 == 3 {
                    panic!("task {i} broke");
                }
                ran.fetch_add(1, SeqCst);
            }))
            .unwrap();
    }
    clock.advance(2 * SEC);
    pool.wait_idle();
    assert!(
        timer.shutdown().is_empty(),
        "everything was due and has run"
    );
    assert_eq!(ran.load(SeqCst), 90);
    let stats = timer.stats();
    assert_eq!((stats.fired, stats.panicked), (100, 10));
    assert!(stats.last_panic.is_some_and(|m| m.ends_with("broke")));
    assert_eq!(messages.lock().len(), 10);
}

#[test]
fn shutdown_from_inside_a_task_does_not_deadlock() {
    for pool in [false, true] {
        let clock = ManualClock::new();
        let builder = Timer::builder().clock(clock.clone());
        let builder = if pool {
            builder.threads(2)
        } else {
            builder.executor(Arc::new(InlineExecutor::new()))
        };
        let timer = Arc::new(builder.build().unwrap());
        let t = timer.clone();
        let back = Arc::new(Mutex::new(None));
        let b = back.clone();
        timer
            .add_or_submit(Task::after(SEC, move || {
                *b.lock() = Some(t.shutdown().len())
            }))
            .unwrap();
        timer.add_or_submit(Task::after(DAY, || {})).unwrap();
        clock.advance(SEC);
        // With the pool the task runs on another thread: wait for it (bounded) without sleeping
        // on timing assumptions.
        let start = Instant::now();
        while back.lock().is_none() && start.elapsed() < Duration::from_secs(30) {
            std::thread::yield_now();
        }
        assert_eq!(
            *back.lock(),
            Some(1),
            "the day-long task came back (pool: {pool})"
        );
        assert!(matches!(
            timer.add_or_submit(Task::after(SEC, || {})),
            Err(AddError::Shutdown(_))
        ));
    }
}

#[test]
fn tasks_can_add_tasks() {
    let (clock, timer) = manual();
    let timer = Arc::new(timer);
    let log: Log = Arc::default();
    let (t, l, c) = (timer.clone(), log.clone(), clock.clone());
    timer
        .add_or_submit(Task::after(SEC, move || {
            l.lock().push((0, c.elapsed()));
            let (l2, c2) = (l.clone(), c.clone());
            t.add_or_submit(Task::after(SEC, move || l2.lock().push((1, c2.elapsed()))))
                .unwrap();
        }))
        .unwrap();
    clock.advance(SEC);
    clock.advance(SEC);
    assert_eq!(*log.lock(), [(0, SEC), (1, 2 * SEC)]);
}

#[test]
fn bad_input_gets_typed_errors_or_documented_answers() {
    use tickwheel::BuildError;
    assert!(matches!(
        Timer::builder().tick(Duration::ZERO).build(),
        Err(BuildError::TickTooSmall { .. })
    ));
    assert!(matches!(
        Timer::builder().tick(Duration::from_micros(10)).build(),
        Err(BuildError::TickTooSmall { .. })
    ));
    for size in [0, 1, 3, 100, 1 << 17] {
        assert!(
            matches!(
                Timer::builder().wheel_size(size).build(),
                Err(BuildError::WheelSize(_))
            ),
            "size {size}"
        );
    }
    assert!(matches!(
        Timer::builder().threads(0).build(),
        Err(BuildError::ZeroThreads)
    ));
    assert!(matches!(
        Timer::builder().max_pending(0).build(),
        Err(BuildError::ZeroMaxPending)
    ));
    assert!(
        Timer::builder()
            .tick(Duration::MAX)
            .wheel_size(2)
            .build()
            .is_ok(),
        "a huge tick is merely coarse"
    );

    let (clock, timer) = manual();
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    timer
        .add_or_submit(Task::after(Duration::ZERO, move || {
            r.fetch_add(1, SeqCst);
        }))
        .unwrap();
    assert_eq!(ran.load(SeqCst), 1, "Duration::ZERO runs at once");
    let r = ran.clone();
    timer
        .add_or_submit(Task::at(Instant::now() - SEC, move || {
            r.fetch_add(1, SeqCst);
        }))
        .unwrap();
    assert_eq!(ran.load(SeqCst), 2, "an Instant in the past runs at once");
    let forever = timer
        .add_or_submit(Task::after(Duration::MAX, || {}))
        .unwrap();
    assert_eq!(
        timer.pending(),
        1,
        "Duration::MAX saturates to the far future"
    );
    if let Some(far) = Instant::now().checked_add(Duration::from_secs(1 << 40)) {
        // 35,000 years: past the u64 range of clock nanoseconds, so it saturates too.
        let h = timer.add_or_submit(Task::at(far, || {})).unwrap();
        assert_eq!(timer.pending(), 2);
        assert!(h.cancel());
    }
    clock.advance(100 * 365 * DAY);
    assert!(!forever.is_done());
    assert!(forever.reschedule(Duration::MAX));
    assert!(forever.cancel());
    assert!(!forever.reschedule(SEC), "reschedule after cancel");

    let h = timer.add_or_submit(Task::after(SEC, || {})).unwrap();
    drop(timer);
    assert!(
        !h.cancel() && !h.reschedule(SEC),
        "a handle outliving its timer changes nothing"
    );
}

#[test]
fn a_saturated_pool_does_not_make_the_tick_thread_late_and_loses_nothing() {
    // One pool thread, blocked by a task until the test releases it: every other task queues.
    let clock = ManualClock::new();
    let pool = Arc::new(RayonExecutor::new(1, "saturated").unwrap());
    let timer = Timer::builder()
        .clock(clock.clone())
        .executor(pool.clone())
        .build()
        .unwrap();
    let (release, blocked) = std::sync::mpsc::channel::<()>();
    let blocked = Mutex::new(blocked);
    timer
        .add_or_submit(Task::after(MS, move || {
            let _ = blocked.lock().recv();
        }))
        .unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    for i in 0..1_000u32 {
        let r = ran.clone();
        timer
            .add_or_submit(Task::after(2 * MS + i * MS, move || {
                r.fetch_add(1, SeqCst);
            }))
            .unwrap();
    }
    for _ in 0..1_100 {
        clock.advance(MS); // each returns once the tick thread handed out what is due
    }
    let stats = timer.stats();
    assert_eq!(
        stats.handoff_max,
        Duration::ZERO,
        "the tick thread handed every task out on time"
    );
    assert_eq!(ran.load(SeqCst), 0, "the pool is still blocked");
    release.send(()).unwrap();
    pool.wait_idle();
    assert_eq!(ran.load(SeqCst), 1_000, "nothing was lost");
    assert!(
        timer.stats().lateness_max >= Duration::from_millis(1_000),
        "the runs were late, the hand-offs not"
    );
}

#[test]
fn a_clock_asked_to_go_backwards_is_ignored() {
    let (clock, timer) = manual();
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    timer
        .add_or_submit(Task::after(10 * SEC, move || {
            r.fetch_add(1, SeqCst);
        }))
        .unwrap();
    clock.advance(5 * SEC);
    clock.set(SEC); // backwards: ignored
    assert_eq!(clock.elapsed(), 5 * SEC);
    clock.set(9 * SEC);
    assert_eq!(ran.load(SeqCst), 0, "nothing early");
    clock.set(10 * SEC);
    assert_eq!(ran.load(SeqCst), 1);
}

// Found by the adversarial review of 2026-11-27: each timer on a manual clock mapped instants to
// readings from the moment it was built, so an instant one timer gave meant another clock time
// to the next (a returned task re-added ran early by the real time between the two builds, or
// late by the clock's moves). A `ManualClock` now has one epoch for all its timers.

#[test]
fn two_timers_on_one_manual_clock_agree_on_instants() {
    let clock = ManualClock::new();
    let t1 = crate::support::inline(&clock);
    clock.advance(7 * SEC);
    std::thread::sleep(Duration::from_millis(20)); // real time passes; the clock stands still
    let t2 = crate::support::inline(&clock);
    assert_eq!(t1.now(), t2.now());
    clock.advance(SEC);
    assert_eq!(t1.now(), t2.now());
}

#[test]
fn tasks_handed_back_keep_their_clock_times_in_the_next_timer_on_the_clock() {
    let clock = ManualClock::new();
    let log: Log = Arc::default();
    let first = crate::support::inline(&clock);
    clock.advance(100 * SEC);
    for (label, after) in [(1, 10 * SEC), (2, 20 * SEC)] {
        first
            .add_or_submit(Task::after(after, logging(&log, &clock, label)))
            .unwrap();
    }
    clock.advance(5 * SEC);
    std::thread::sleep(Duration::from_millis(20)); // the restart takes real time
    let back = first.shutdown();
    assert_eq!(back[0].remaining(), Some(5 * SEC));
    drop(first);
    let second = crate::support::inline(&clock);
    for task in back {
        let handle = second.add_or_submit(task).unwrap();
        assert!(handle.remaining() >= Some(5 * SEC));
    }
    clock.advance(5 * SEC - MS);
    assert!(log.lock().is_empty(), "never early");
    clock.advance(MS);
    clock.advance(10 * SEC);
    assert_eq!(*log.lock(), [(1, 110 * SEC), (2, 120 * SEC)]);
}

#[test]
fn a_task_handed_back_is_never_early_in_the_next_timer_however_long_the_restart() {
    let clock = ManualClock::new();
    let log: Log = Arc::default();
    let first = crate::support::inline(&clock);
    first
        .add_or_submit(Task::after(10 * SEC, logging(&log, &clock, 1)))
        .unwrap();
    let back = first.shutdown();
    drop(first);
    std::thread::sleep(Duration::from_millis(50)); // real time only: the clock stands still
    let second = crate::support::inline(&clock);
    second
        .add_or_submit(back.into_iter().next().unwrap())
        .unwrap();
    clock.advance(10 * SEC - MS);
    assert!(log.lock().is_empty(), "never early");
    clock.advance(MS);
    assert_eq!(*log.lock(), [(1, 10 * SEC)]);
}
