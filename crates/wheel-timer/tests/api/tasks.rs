//! What users of a timer expect from its API (issue 12): fixed-delay repeats, a first run apart
//! from the period, tasks that know their context and stop themselves, handles that tell their
//! deadline and why they said no, `Timer::now` and `wait_idle` for exact tests on any executor,
//! and errors that go through `?`. Timing is on the manual clock, exact. (What shutdown hands
//! back is in `shutdown/handing_back.rs`.)

use std::error::Error;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Barrier, Mutex, mpsc};
use std::time::{Duration, Instant};

use crate::support::{DropCount, Log, MS, SEC, manual, pooled, walk};
use tickwheel::{
    AddError, BuildError, Clock, ConfigError, InlineExecutor, ManualClock, MisfirePolicy, OnceBody,
    Task, TaskContext, TaskState, Timer,
};

#[test]
fn fixed_delay_counts_from_the_end_of_a_slow_run() {
    let clock = ManualClock::new();
    let timer = pooled(&clock, 2);
    let starts = Log::default();
    let (log, c) = (starts.clone(), clock.clone());
    timer
        .add_or_submit(Task::with_fixed_delay(10 * SEC, move || {
            log.push(c.elapsed());
            c.advance(3 * SEC); // a run that takes 3 s of the timer's clock
        }))
        .unwrap();
    walk(&clock, &timer, SEC, 50 * SEC);
    assert_eq!(starts.get(), [10, 23, 36, 49].map(Duration::from_secs));
    assert_eq!(timer.stats().lateness_max, Duration::ZERO);
}

#[test]
fn fixed_rate_keeps_its_grid_under_the_same_slow_run() {
    let clock = ManualClock::new();
    let timer = pooled(&clock, 2);
    let starts = Log::default();
    let (log, c) = (starts.clone(), clock.clone());
    timer
        .add_or_submit(Task::every(10 * SEC, move || {
            log.push(c.elapsed());
            c.advance(3 * SEC);
        }))
        .unwrap();
    walk(&clock, &timer, SEC, 45 * SEC);
    assert_eq!(starts.get(), [10, 20, 30, 40].map(Duration::from_secs));
}

#[test]
fn the_first_run_can_differ_from_the_period() {
    let (clock, timer) = manual();
    let (after, at, delay) = (Log::default(), Log::default(), Log::default());
    type Make = fn(Duration, Box<dyn FnMut() + Send>) -> Task;
    let add = |log: &Log, task: Make, first: &dyn Fn(Task) -> Task| {
        let (log, c) = (log.clone(), clock.clone());
        let f: Box<dyn FnMut() + Send> = Box::new(move || log.push(c.elapsed()));
        timer.add_or_submit(first(task(10 * SEC, f))).unwrap()
    };
    add(&after, Task::every, &|t| t.starting_after(SEC));
    let start = timer.now() + 5 * SEC;
    add(&at, Task::every, &|t| t.starting_at(start));
    add(&delay, Task::with_fixed_delay, &|t| {
        t.starting_after(Duration::ZERO)
    });
    walk(&clock, &timer, SEC, 25 * SEC);
    assert_eq!(after.get(), [1, 11, 21].map(Duration::from_secs));
    assert_eq!(at.get(), [5, 15, 25].map(Duration::from_secs));
    assert_eq!(delay.get(), [0, 10, 20].map(Duration::from_secs));
}

#[test]
fn a_repeating_task_stops_itself_and_knows_its_context() {
    let (clock, timer) = manual();
    let origin = timer.now();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let h = timer
        .add_or_submit(
            Task::every(10 * SEC, move |cx: &mut TaskContext<'_>| {
                s.lock().unwrap().push((
                    cx.scheduled() - origin,
                    cx.lateness(),
                    cx.run_count(),
                    cx.key().map(str::to_owned),
                ));
                if cx.run_count() == 3 {
                    cx.stop();
                }
            })
            .keyed("lease-7"),
        )
        .unwrap();
    walk(&clock, &timer, SEC, 25 * SEC);
    clock.advance(100 * SEC); // one jump: the third run is 95 s late, then it stops
    let key = Some("lease-7".to_owned());
    assert_eq!(
        *seen.lock().unwrap(),
        [
            (10 * SEC, Duration::ZERO, 1, key.clone()),
            (20 * SEC, Duration::ZERO, 2, key.clone()),
            (30 * SEC, 95 * SEC, 3, key),
        ]
    );
    assert_eq!(h.state(), TaskState::Done);
    assert!(h.is_done() && !h.is_cancelled() && !h.cancel());
    assert_eq!((timer.pending(), timer.stats().fired), (0, 3));
}

#[test]
fn a_task_adds_a_follow_up_through_a_weak_timer_that_does_not_keep_it_alive() {
    let (clock, timer) = manual();
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    timer
        .add_or_submit(Task::after(SEC, move |cx: &mut TaskContext<'_>| {
            let r = r.clone();
            cx.timer()
                .add_or_submit(Task::after(SEC, move || {
                    r.fetch_add(1, SeqCst);
                }))
                .unwrap();
        }))
        .unwrap();
    clock.advance(SEC);
    assert_eq!(runs.load(SeqCst), 0);
    clock.advance(SEC);
    assert_eq!(runs.load(SeqCst), 1);
    let weak = timer.downgrade();
    assert_eq!(weak.now(), Some(timer.now()));
    drop(timer);
    assert!(weak.is_shutdown() && weak.now().is_none());
    let refused = weak.add_or_submit(Task::after(SEC, || {})).unwrap_err();
    assert!(matches!(refused, AddError::Shutdown(_)));
}

#[test]
fn a_task_run_by_hand_has_a_context_without_a_timer() {
    let seen = Arc::new(Mutex::new(None));
    let s = seen.clone();
    Task::after(SEC, move |cx: &mut TaskContext<'_>| {
        *s.lock().unwrap() = Some((cx.run_count(), cx.timer().is_shutdown()));
    })
    .run();
    assert_eq!(*seen.lock().unwrap(), Some((1, true)));
}

#[test]
fn a_period_below_the_tick_runs_at_the_tick_and_is_counted() {
    let (clock, timer) = manual();
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    timer
        .add_or_submit(Task::every(Duration::from_micros(100), move || {
            r.fetch_add(1, SeqCst);
        }))
        .unwrap();
    timer
        .add_or_submit(Task::with_fixed_delay(Duration::from_micros(1), || {}))
        .unwrap();
    let _every_ms = timer.interval(Duration::from_micros(10));
    walk(&clock, &timer, MS, SEC);
    assert_eq!(runs.load(SeqCst), 1000, "one run per 1 ms tick");
    assert_eq!(timer.stats().periods_rounded_up, 3);
}

/// A zero period follows the same rule for tasks and intervals (issue 45: tasks used to be
/// refused, intervals not): it is a period below the tick, so it runs at the tick, never faster.
#[test]
fn a_zero_period_runs_at_the_tick_for_tasks_and_intervals_alike() {
    let (clock, timer) = manual();
    let (every, delayed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (e, d) = (every.clone(), delayed.clone());
    timer
        .add_or_submit(Task::every(Duration::ZERO, move || {
            e.fetch_add(1, SeqCst);
        }))
        .unwrap();
    timer
        .add_or_submit(Task::with_fixed_delay(Duration::ZERO, move || {
            d.fetch_add(1, SeqCst);
        }))
        .unwrap();
    let mut interval = timer.interval(Duration::ZERO);
    assert_eq!(interval.period(), MS, "rounded up to the tick");
    let mut ticks = vec![futures::executor::block_on(interval.tick())];
    for _ in 0..10 {
        walk(&clock, &timer, MS, clock.elapsed() + MS);
        ticks.push(futures::executor::block_on(interval.tick()));
    }
    // Due at the add, then once per tick over ten ticks.
    assert_eq!(every.load(SeqCst), 11);
    assert_eq!(delayed.load(SeqCst), 11);
    assert_eq!(
        ticks.len(),
        11,
        "the interval's first tick, then one per tick: {ticks:?}"
    );
    assert!(ticks.windows(2).all(|w| w[1] - w[0] == MS), "{ticks:?}");
    assert_eq!(timer.stats().periods_rounded_up, 3);
}

#[test]
fn a_handle_tells_its_deadline_and_why_it_said_no() {
    let (clock, timer) = manual();
    let start = timer.now();
    let h = timer.add_or_submit(Task::after(60 * SEC, || {})).unwrap();
    assert_eq!(h.deadline(), Some(start + 60 * SEC));
    clock.advance(20 * SEC);
    assert_eq!(h.remaining(), Some(40 * SEC));
    assert_eq!(h.state(), TaskState::Waiting);
    assert!(h.reschedule_at(timer.now() + 5 * SEC));
    assert_eq!(h.deadline(), Some(start + 25 * SEC));
    clock.advance(5 * SEC);
    assert_eq!(
        (h.state(), h.deadline(), h.remaining()),
        (TaskState::Done, None, None)
    );
    assert!(!h.cancel() && !h.reschedule(SEC), "it ran");

    let c = timer.add_or_submit(Task::after(SEC, || {})).unwrap();
    assert!(c.cancel());
    assert!(!c.cancel() && !c.reschedule(SEC));
    assert_eq!(c.state(), TaskState::Cancelled);

    let r = timer.add_or_submit(Task::after(SEC, || {})).unwrap();
    assert_eq!(timer.shutdown().len(), 1);
    assert!(!r.cancel() && !r.reschedule(SEC));
    assert_eq!(r.state(), TaskState::Returned);
}

#[test]
fn a_long_delay_is_stamped_when_its_deadline_is_asked_for_and_is_never_early() {
    // The real clock: long delays are stamped in batches, so asking stamps on demand.
    let timer = Timer::new().unwrap();
    let before = timer.now();
    let h = timer.add_or_submit(Task::after(3600 * SEC, || {})).unwrap();
    let deadline = h.deadline().expect("waiting");
    assert!(deadline >= before + 3600 * SEC, "never earlier than asked");
    assert!(deadline <= timer.now() + 3600 * SEC);
    assert_eq!(h.deadline(), Some(deadline), "stamped once");
    assert!(h.remaining().unwrap() <= 3600 * SEC);
}

#[test]
fn a_repeating_task_rescheduled_moves_its_grid() {
    let (clock, timer) = manual();
    let starts = Log::default();
    let (log, c) = (starts.clone(), clock.clone());
    let h = timer
        .add_or_submit(Task::every(10 * SEC, move || log.push(c.elapsed())))
        .unwrap();
    walk(&clock, &timer, SEC, 12 * SEC);
    assert!(h.reschedule(3 * SEC)); // next run at 15 instead of 20
    walk(&clock, &timer, SEC, 32 * SEC);
    assert_eq!(starts.get(), [10, 15, 25].map(Duration::from_secs));
}

#[test]
fn task_at_an_instant_from_timer_now_is_exact_on_a_manual_clock() {
    let (clock, timer) = manual();
    std::thread::sleep(5 * MS); // real time passes; the manual clock does not move
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    timer
        .add_or_submit(Task::at(timer.now() + 15 * 60 * SEC, move || {
            r.fetch_add(1, SeqCst);
        }))
        .unwrap();
    clock.advance(15 * 60 * SEC - MS);
    assert_eq!(runs.load(SeqCst), 0);
    clock.advance(MS);
    assert_eq!(runs.load(SeqCst), 1);
}

#[test]
fn wait_idle_makes_asserts_after_advance_exact_on_the_rayon_pool() {
    let clock = ManualClock::new();
    let timer = Timer::builder().clock(clock.clone()).build().unwrap(); // the default pool
    let runs = Arc::new(AtomicUsize::new(0));
    for round in 1..=1000 {
        for _ in 0..4 {
            let r = runs.clone();
            timer
                .add_or_submit(Task::after(MS, move || {
                    r.fetch_add(1, SeqCst);
                }))
                .unwrap();
        }
        clock.advance(MS);
        timer.wait_idle();
        assert_eq!(runs.load(SeqCst), 4 * round, "round {round}");
    }
}

#[test]
fn wait_idle_inside_a_task_does_not_wait_for_itself() {
    let clock = ManualClock::new();
    let timer = Arc::new(pooled(&clock, 1));
    let (tx, rx) = mpsc::channel();
    let weak = Arc::downgrade(&timer);
    timer
        .add_or_submit(Task::after(MS, move || {
            if let Some(t) = weak.upgrade() {
                t.wait_idle();
            }
            tx.send(()).unwrap();
        }))
        .unwrap();
    clock.advance(MS);
    rx.recv_timeout(Duration::from_secs(60))
        .expect("no deadlock");
    timer.wait_idle();
}

/// A value of size zero with a destructor: a closure that captures only this is of size zero
/// too, and still has something to drop.
struct ZeroSizedGuard;

static ZERO_SIZED_DROPS: AtomicUsize = AtomicUsize::new(0);

impl Drop for ZeroSizedGuard {
    fn drop(&mut self) {
        ZERO_SIZED_DROPS.fetch_add(1, SeqCst);
    }
}

/// A cancel skips dropping a closure only when it has nothing to drop (`PLAIN` in `word.rs`):
/// one of size zero with a destructor is dropped, at once, as is any other. (On the real clock,
/// far out: the cancel of a task not yet stamped, the one that skips.)
#[test]
fn a_cancel_drops_a_zero_sized_closure_that_has_a_destructor() {
    const HOUR: Duration = Duration::from_secs(3600);
    let timer = Timer::new().unwrap();
    let guard = ZeroSizedGuard;
    let f = move || drop(guard);
    assert_eq!(std::mem::size_of_val(&f), 0);
    let plain = timer.add_or_submit(Task::after(HOUR, || {})).unwrap();
    let guarded = timer.add_or_submit(Task::after(HOUR, f)).unwrap();
    let keyed = timer
        .add_or_submit(Task::after(HOUR, || {}).keyed("k"))
        .unwrap();
    assert!(plain.cancel() && keyed.cancel());
    assert_eq!(ZERO_SIZED_DROPS.load(SeqCst), 0);
    assert!(guarded.cancel());
    assert_eq!(ZERO_SIZED_DROPS.load(SeqCst), 1, "dropped by the cancel");
    assert_eq!(timer.stats().cancelled, 3);
}

/// A zero-size type of the user's own that boxes a closure with something to drop: only the
/// library's impls of `OnceBody` may call their box plain.
struct ZeroSized;
struct ByLauncher;

static LAUNCHED_DROPS: std::sync::OnceLock<Arc<AtomicUsize>> = std::sync::OnceLock::new();

impl OnceBody<ByLauncher> for ZeroSized {
    fn into_once(self) -> Box<dyn FnOnce(&mut TaskContext<'_>) + Send> {
        let guard = DropCount(LAUNCHED_DROPS.get_or_init(Default::default).clone());
        Box::new(move |_: &mut TaskContext<'_>| drop(guard))
    }
}

#[test]
fn a_cancel_drops_what_a_zero_sized_body_of_the_users_own_boxed() {
    let timer = Timer::new().unwrap();
    let h = timer
        .add_or_submit(Task::after(Duration::from_secs(3600), ZeroSized))
        .unwrap();
    assert!(h.cancel());
    let drops = LAUNCHED_DROPS.get().expect("the body was boxed");
    assert_eq!(
        drops.load(SeqCst),
        1,
        "the boxed closure was dropped by the cancel"
    );
}

#[test]
fn errors_go_through_question_mark_and_print_each_message_once() {
    fn add(timer: &Timer) -> Result<(), Box<dyn Error + Send + Sync>> {
        timer.add_or_submit(Task::after(SEC, || {}))?;
        Ok(())
    }
    let timer = Timer::new().unwrap();
    timer.shutdown();
    assert_eq!(add(&timer).unwrap_err().to_string(), "timer is shut down");

    fn build() -> Result<Timer, Box<dyn Error + Send + Sync>> {
        Ok(Timer::builder().wheel_size(3).build()?)
    }
    let e = build().unwrap_err();
    let mut chain = vec![e.to_string()];
    let mut source = e.source();
    while let Some(s) = source {
        chain.push(s.to_string());
        source = s.source();
    }
    // The reason in the message itself (issue 48: it was in `source()` alone, and `{e}` said
    // only "invalid wheel configuration"), once.
    assert_eq!(
        chain,
        ["invalid wheel size 3: the wheel size must be a power of two"]
    );
    assert!(matches!(
        Timer::builder().wheel_size(3).build(),
        Err(BuildError::WheelSize(ConfigError::WheelSizeNotPowerOfTwo {
            size: 3
        }))
    ));
}

/// A clock of the user's own: the real clock, ten seconds ahead (any clock that never goes back).
struct Ahead(Instant);

impl Clock for Ahead {
    fn now(&self) -> u64 {
        (self.0.elapsed() + 10 * SEC).as_nanos() as u64
    }
    fn instant_of(&self, t: u64) -> Option<Instant> {
        (self.0 + Duration::from_nanos(t)).checked_sub(10 * SEC)
    }
}

#[test]
fn a_clock_of_the_users_own_drives_the_timer() {
    let timer = Timer::builder()
        .clock(Ahead(Instant::now()))
        .build()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let added = Instant::now();
    timer
        .add_or_submit(Task::after(20 * MS, move || {
            tx.send(Instant::now()).unwrap()
        }))
        .unwrap();
    let ran = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("eventually");
    assert!(ran >= added + 20 * MS, "never early");
    let now = timer.now();
    assert!(
        now >= added && now <= Instant::now(),
        "Timer::now is an instant of this process"
    );
}

/// The latest `Instant` this platform can hold, to within a second.
fn latest_instant() -> Instant {
    let now = Instant::now();
    let (mut fits, mut overflows) = (0u64, u64::MAX);
    while overflows - fits > 1 {
        let mid = fits + (overflows - fits) / 2;
        if now.checked_add(Duration::from_secs(mid)).is_some() {
            fits = mid;
        } else {
            overflows = mid;
        }
    }
    now + Duration::from_secs(fits)
}

/// A clock of the user's own whose time 0 is an hour before the end of what `Instant` can hold.
struct NearTheEnd(Instant);

impl Clock for NearTheEnd {
    fn now(&self) -> u64 {
        0
    }
    fn instant_of(&self, t: u64) -> Option<Instant> {
        self.0.checked_add(Duration::from_nanos(t))
    }
}

/// A deadline past the last instant `Instant` can hold is shown as that last instant, on any
/// clock, and nothing panics (review of 2026-11-27: the fallback for such deadlines was its
/// origin plus 30 years, unchecked, which panicked on a clock whose time 0 is near that end).
#[test]
fn a_deadline_past_the_last_instant_shows_the_last_instant() {
    let origin = latest_instant() - Duration::from_secs(3600);
    let timer = Timer::builder().clock(NearTheEnd(origin)).build().unwrap();
    let far = Duration::from_secs(400 * 365 * 86_400);
    let handle = timer.add_or_submit(Task::after(far, || {})).unwrap();
    let shown = handle.deadline().expect("a pending task has a deadline");
    assert!(
        shown >= origin + Duration::from_secs(3599),
        "not earlier than any instant there is"
    );
    let sleep = timer.sleep(far);
    assert_eq!(sleep.deadline(), shown);
    assert!(handle.cancel());
    drop(sleep);
    assert_eq!(timer.pending(), 0);
}

// Found by an adversarial review of the first version of this API (2026-11-22); each failed
// then. (`wait_idle` inside a task now returns at once instead of waiting for other jobs.)

#[test]
fn starting_at_in_the_past_keeps_the_grid_of_start() {
    let (clock, timer) = manual();
    let origin = timer.now();
    clock.advance(27 * SEC);
    let starts = Log::default();
    let (log, c) = (starts.clone(), clock.clone());
    // Grid: 5, 15, 25, 35, 45 ... The 25 s run is missed (RunOnce: run once now, then the next
    // grid point after now).
    timer
        .add_or_submit(
            Task::every(10 * SEC, move || log.push(c.elapsed())).starting_at(origin + 5 * SEC),
        )
        .unwrap();
    walk(&clock, &timer, SEC, 50 * SEC);
    assert_eq!(starts.get(), [27, 35, 45].map(Duration::from_secs));
}

#[test]
fn starting_at_in_the_past_catch_up_runs_the_missed_runs() {
    let (clock, timer) = manual();
    let origin = timer.now();
    clock.advance(30 * SEC);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    // CatchUp: "Run every missed run, back to back, until caught up." Grid 0,10,20,30: four
    // runs due at 30 s.
    timer
        .add_or_submit(
            Task::every(10 * SEC, move |cx: &mut TaskContext<'_>| {
                s.lock().unwrap().push(cx.scheduled() - origin);
            })
            .misfire(MisfirePolicy::CatchUp)
            .starting_at(origin),
        )
        .unwrap();
    timer.wait_idle();
    assert_eq!(
        *seen.lock().unwrap(),
        [0, 10, 20, 30].map(Duration::from_secs)
    );
}

#[test]
fn a_task_at_a_past_instant_reports_when_it_was_due_and_how_late() {
    let (clock, timer) = manual();
    let origin = timer.now();
    clock.advance(60 * SEC);
    let seen = Arc::new(Mutex::new(None));
    let s = seen.clone();
    let task = Task::at(origin + 20 * SEC, move |cx: &mut TaskContext<'_>| {
        *s.lock().unwrap() = Some((cx.scheduled() - origin, cx.lateness()));
    });
    assert_eq!(task.deadline(), Some(origin + 20 * SEC));
    timer.add_or_submit(task).unwrap();
    assert_eq!(*seen.lock().unwrap(), Some((20 * SEC, 40 * SEC)));
}

#[test]
fn refused_adds_are_not_counted_as_rounded_up_periods() {
    let (_clock, timer) = manual();
    timer.shutdown();
    let refused = timer.add_or_submit(Task::every(Duration::from_micros(1), || {}));
    assert!(refused.is_err());
    assert_eq!(timer.stats().added, 0);
    assert_eq!(timer.stats().periods_rounded_up, 0, "nothing was added");
}

#[test]
fn a_full_timer_counts_each_retry() {
    let clock = ManualClock::new();
    let timer = Timer::builder()
        .clock(clock.clone())
        .executor(Arc::new(InlineExecutor::new()))
        .max_pending(1)
        .build()
        .unwrap();
    let _first = timer.add_or_submit(Task::after(SEC, || {})).unwrap();
    let mut task = Task::every(Duration::from_micros(1), || {});
    for _ in 0..3 {
        task = timer.add_or_submit(task).unwrap_err().into_task();
    }
    assert_eq!(
        timer.stats().periods_rounded_up,
        0,
        "three refusals, no add"
    );
}

#[test]
fn wait_idle_from_two_tasks_at_once_returns() {
    let clock = ManualClock::new();
    let timer = Arc::new(
        Timer::builder()
            .clock(clock.clone())
            .threads(2)
            .build()
            .unwrap(),
    );
    let both = Arc::new(Barrier::new(2));
    let (tx, rx) = mpsc::channel();
    for _ in 0..2 {
        let (weak, both, tx) = (Arc::downgrade(&timer), both.clone(), tx.clone());
        timer
            .add_or_submit(Task::after(MS, move || {
                both.wait(); // both tasks are running
                if let Some(t) = weak.upgrade() {
                    t.wait_idle();
                }
                tx.send(()).unwrap();
            }))
            .unwrap();
    }
    clock.advance(MS);
    for i in 0..2 {
        if rx.recv_timeout(Duration::from_secs(10)).is_err() {
            std::mem::forget(timer); // its drop would wait for the stuck tasks
            panic!("task {i}: wait_idle inside a task never returned");
        }
    }
}

#[test]
fn wait_idle_from_a_task_that_added_a_due_follow_up_on_one_thread() {
    let clock = ManualClock::new();
    let timer = Arc::new(
        Timer::builder()
            .clock(clock.clone())
            .threads(1)
            .build()
            .unwrap(),
    );
    let (tx, rx) = mpsc::channel();
    let ran = Arc::new(AtomicUsize::new(0));
    let (weak, r) = (Arc::downgrade(&timer), ran.clone());
    timer
        .add_or_submit(Task::after(MS, move |cx: &mut TaskContext<'_>| {
            let r = r.clone();
            cx.timer()
                .add_or_submit(Task::after(Duration::ZERO, move || {
                    r.fetch_add(1, SeqCst);
                }))
                .unwrap();
            if let Some(t) = weak.upgrade() {
                t.wait_idle();
            }
            tx.send(()).unwrap();
        }))
        .unwrap();
    clock.advance(MS);
    if rx.recv_timeout(Duration::from_secs(10)).is_err() {
        std::mem::forget(timer); // its drop would wait for the stuck task
        panic!("wait_idle inside a task never returned");
    }
}

#[test]
fn scheduled_plus_lateness_is_not_after_the_start_of_the_run() {
    let timer = Arc::new(
        Timer::builder()
            .executor(Arc::new(InlineExecutor::new()))
            .build()
            .unwrap(),
    );
    // A task on the tick thread (inline) that keeps it busy for a while.
    let (started_tx, started) = mpsc::channel();
    let (release, release_rx) = mpsc::channel::<()>();
    timer
        .add_or_submit(Task::after(5 * MS, move || {
            started_tx.send(()).unwrap();
            release_rx.recv().unwrap();
        }))
        .unwrap();
    started.recv().unwrap();
    let (tx, rx) = mpsc::channel();
    let h = timer
        .add_or_submit(Task::every(300 * MS, move |cx: &mut TaskContext<'_>| {
            let now = cx.timer().now().unwrap();
            let _ = tx.send((cx.scheduled(), cx.lateness(), now));
            cx.stop();
        }))
        .unwrap();
    std::thread::sleep(100 * MS);
    release.send(()).unwrap();
    let (scheduled, lateness, now) = rx.recv_timeout(Duration::from_secs(60)).expect("runs");
    let give_up = Instant::now() + Duration::from_secs(60);
    while !h.is_done() {
        assert!(Instant::now() < give_up, "stopped itself: eventually done");
        std::thread::yield_now();
    }
    assert!(
        scheduled + lateness <= now,
        "scheduled {:?} + lateness {lateness:?} is {:?} after the run's start",
        scheduled,
        (scheduled + lateness) - now
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
