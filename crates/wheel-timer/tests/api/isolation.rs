//! Executors that protect each other (issue 13): slow classes move to the slow pool and come back,
//! punctual tasks never wait behind a blocked one, tasks may name their executor, and the backlog
//! handed to a stalled executor is bounded. Timing is on the manual clock: a "slow" run is one
//! that moves the timer's clock while it runs, so every figure is exact.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use crate::support::MS;
use tickwheel::{AddError, Executor, Isolation, Job, ManualClock, Task, TaskContext, Timer};

const THRESHOLD: Duration = Duration::from_millis(50);
const WINDOW: Duration = Duration::from_secs(1);

fn isolating(clock: &ManualClock) -> Timer {
    // One blocked run would stall a pool this small, unless it is isolated.
    isolating_on(clock, 1)
}

fn isolating_on(clock: &ManualClock, threads: usize) -> Timer {
    Timer::builder()
        .name("iso")
        .clock(clock.clone())
        .threads(threads)
        .isolation(
            Isolation::new()
                .threshold(THRESHOLD)
                .strikes(3)
                .window(WINDOW)
                .slow_threads(1),
        )
        .build()
        .unwrap()
}

/// The name of the thread running the current task.
fn thread_name() -> String {
    thread::current().name().unwrap_or("").to_owned()
}

/// Adds a `report` task due in 1 ms that takes `runtime` of the timer's clock, and runs it.
/// Returns the name of the thread it ran on.
fn slow_report(clock: &ManualClock, timer: &Timer, runtime: Duration) -> String {
    let (tx, rx) = mpsc::channel();
    let c = clock.clone();
    timer
        .add_or_submit(
            Task::after(MS, move || {
                c.advance(runtime); // the run "takes" this long on the timer's clock
                tx.send(thread_name()).unwrap();
            })
            .class("report"),
        )
        .unwrap();
    clock.advance(MS);
    let name = rx.recv_timeout(Duration::from_secs(60)).expect("ran");
    timer.wait_idle();
    name
}

/// Adds a `report` task due in 1 ms that blocks until the test sends on the returned channel;
/// returns that sender and where the task started.
fn blocking_report(
    clock: &ManualClock,
    timer: &Timer,
) -> (mpsc::Sender<()>, mpsc::Receiver<String>) {
    let (started_tx, started) = mpsc::channel();
    let (release, release_rx) = mpsc::channel::<()>();
    timer
        .add_or_submit(
            Task::after(MS, move || {
                started_tx.send(thread_name()).unwrap();
                release_rx.recv().unwrap();
            })
            .class("report"),
        )
        .unwrap();
    clock.advance(MS);
    (release, started)
}

/// Adds 100 punctual tasks due in each of the next `ms` ticks, moves the clock tick by tick and
/// waits (real time) for each tick's tasks before the next move, so none can wait behind a run
/// that blocks. Returns (tasks that ran, tasks that ran after their deadline).
fn punctual(clock: &ManualClock, timer: &Timer, ms: u64) -> (usize, usize) {
    let ran = Arc::new(AtomicUsize::new(0));
    let late = Arc::new(AtomicUsize::new(0));
    for i in 0..100 * ms {
        let (ran, late, c) = (ran.clone(), late.clone(), clock.clone());
        let due = clock.elapsed() + (i / 100 + 1) as u32 * MS;
        timer
            .add_or_submit(Task::after(due - clock.elapsed(), move || {
                // On time: the clock has not moved past its deadline.
                if c.elapsed() != due {
                    late.fetch_add(1, SeqCst);
                }
                ran.fetch_add(1, SeqCst);
            }))
            .unwrap();
    }
    for step in 1..=ms as usize {
        clock.advance(MS);
        eventually(&ran, 100 * step);
    }
    (ran.load(SeqCst), late.load(SeqCst))
}

/// Waits (real time, generously) until `count` reaches `n`.
fn eventually(count: &AtomicUsize, n: usize) {
    let give_up = Instant::now() + Duration::from_secs(60);
    while count.load(SeqCst) < n {
        assert!(
            Instant::now() < give_up,
            "stuck at {} of {n}",
            count.load(SeqCst)
        );
        thread::yield_now();
    }
}

#[test]
fn a_slow_class_is_isolated_punctual_tasks_never_wait_behind_it_and_it_comes_back() {
    let clock = ManualClock::new();
    let timer = isolating(&clock);

    // Three slow runs within the window: the class is isolated after the third.
    for strike in 1..=3 {
        let ran_on = slow_report(&clock, &timer, 100 * MS);
        assert!(
            ran_on.starts_with("iso-exec-"),
            "strike {strike} ran on {ran_on}"
        );
        let isolated = timer.stats().isolated_classes;
        assert_eq!(
            isolated.is_empty(),
            strike < 3,
            "after strike {strike}: {isolated:?}"
        );
    }
    assert_eq!(timer.stats().isolations, 1);

    // A report run that blocks until the test lets it go runs on the slow pool ...
    let (release, started) = blocking_report(&clock, &timer);
    let blocked_on = started.recv_timeout(Duration::from_secs(60)).unwrap();
    assert!(blocked_on.starts_with("iso-slow-exec-"), "{blocked_on}");

    // ... while 10,000 punctual tasks due over the next 100 ms (100 per ms) all run on time.
    assert_eq!(punctual(&clock, &timer, 100), (10_000, 0));
    let stats = timer.stats();
    assert_eq!(
        (stats.handoff_max, stats.lateness_max),
        (Duration::ZERO, Duration::ZERO)
    );
    release.send(()).unwrap();
    timer.wait_idle();

    // A whole window without a slow run: the class returns to the timer's pool.
    clock.advance(WINDOW);
    let back_on = slow_report(&clock, &timer, MS);
    assert!(back_on.starts_with("iso-exec-"), "{back_on}");
    let stats = timer.stats();
    assert!(
        stats.isolated_classes.is_empty(),
        "{:?}",
        stats.isolated_classes
    );
    assert_eq!(stats.slow_run_time.runs, 1, "the blocked run");
    assert!(stats.run_time.runs >= 10_004);
    assert_eq!(
        stats.run_time.max,
        100 * MS,
        "the slow strikes, exact on the manual clock"
    );
}

#[test]
fn a_class_whose_run_overstays_skips_the_timers_pool_before_any_strike() {
    let clock = ManualClock::new();
    let timer = isolating(&clock);

    // A report run blocks the timer's only thread; at exactly the threshold it is not slow yet,
    // so the next report task still goes to the timer's pool (and waits there).
    let (release, started) = blocking_report(&clock, &timer);
    let first = started.recv_timeout(Duration::from_secs(60)).unwrap();
    assert!(first.starts_with("iso-exec-"), "{first}");
    clock.advance(THRESHOLD - MS);
    let (release_second, second) = blocking_report(&clock, &timer);
    release.send(()).unwrap();
    let second_on = second.recv_timeout(Duration::from_secs(60)).unwrap();
    assert!(second_on.starts_with("iso-exec-"), "{second_on}");

    // The second run goes on past the threshold: the third report task runs on the slow pool,
    // though no slow run has ended and the class is not isolated.
    clock.advance(THRESHOLD);
    let (release_third, third) = blocking_report(&clock, &timer);
    let third_on = third.recv_timeout(Duration::from_secs(60)).unwrap();
    assert!(third_on.starts_with("iso-slow-exec-"), "{third_on}");
    assert!(timer.stats().isolated_classes.is_empty());
    assert_eq!(timer.stats().isolations, 0);

    // Both end (one slow run, the second, struck): with nothing in progress the class is back
    // on the timer's pool.
    release_second.send(()).unwrap();
    release_third.send(()).unwrap();
    timer.wait_idle();
    let back_on = slow_report(&clock, &timer, MS);
    assert!(back_on.starts_with("iso-exec-"), "{back_on}");
    let stats = timer.stats();
    assert_eq!((stats.run_time.runs, stats.slow_run_time.runs), (3, 1));
    assert!(stats.isolated_classes.is_empty());
}

#[test]
fn a_class_never_takes_every_thread_of_the_timers_pool() {
    let clock = ManualClock::new();
    let timer = isolating_on(&clock, 3);

    // Three report runs, a tick apart, each blocking until the test lets it go: none has been
    // going long enough to count as slow, yet only two take the class's share of the 3-thread
    // pool; the third goes to the slow pool.
    let (mut releases, mut started) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        let (release, on) = blocking_report(&clock, &timer);
        releases.push(release);
        started.push(on.recv_timeout(Duration::from_secs(60)).unwrap());
    }
    started.sort();
    assert!(started[0].starts_with("iso-exec-"), "{started:?}");
    assert!(started[1].starts_with("iso-exec-"), "{started:?}");
    assert!(started[2].starts_with("iso-slow-exec-"), "{started:?}");

    // The third thread of the pool stays for everyone else: 1,000 punctual tasks due over the
    // next 10 ms all run on time while the three runs block.
    assert_eq!(punctual(&clock, &timer, 10), (1_000, 0));
    assert_eq!(timer.stats().isolations, 0, "no slow run has ended");

    // Once the runs end, the class has its share back.
    for release in releases {
        release.send(()).unwrap();
    }
    timer.wait_idle();
    let (release, on) = blocking_report(&clock, &timer);
    let back_on = on.recv_timeout(Duration::from_secs(60)).unwrap();
    assert!(back_on.starts_with("iso-exec-"), "{back_on}");
    release.send(()).unwrap();
    timer.wait_idle();
    let stats = timer.stats();
    assert_eq!((stats.run_time.runs, stats.slow_run_time.runs), (1_003, 1));
}

#[test]
fn slow_runs_spread_wider_than_the_window_do_not_isolate() {
    let clock = ManualClock::new();
    let timer = isolating(&clock);
    for _ in 0..5 {
        slow_report(&clock, &timer, 100 * MS);
        clock.advance(WINDOW); // two slow runs never fall within one window
    }
    let stats = timer.stats();
    assert!(stats.isolated_classes.is_empty());
    assert_eq!(stats.isolations, 0);
}

#[test]
fn a_repeating_task_is_a_class_of_its_own() {
    let clock = ManualClock::new();
    let timer = isolating(&clock);
    let threads = Arc::new(Mutex::new(Vec::new()));
    let (t, c) = (threads.clone(), clock.clone());
    let slow = timer
        .add_or_submit(Task::every(10 * MS, move |cx: &mut TaskContext<'_>| {
            t.lock().unwrap().push(thread_name());
            if cx.run_count() <= 3 {
                c.advance(60 * MS); // its first three runs are slow
            }
        }))
        .unwrap();
    // Unnamed one-shot tasks are another class: they stay on the timer's pool.
    let (tx, rx) = mpsc::channel();
    for _ in 0..8 {
        clock.advance(10 * MS);
        timer.wait_idle();
    }
    timer
        .add_or_submit(Task::after(MS, move || tx.send(thread_name()).unwrap()))
        .unwrap();
    clock.advance(MS);
    timer.wait_idle();
    assert!(rx.recv().unwrap().starts_with("iso-exec-"));
    let threads = threads.lock().unwrap().clone();
    assert!(threads.len() >= 4, "{threads:?}");
    assert!(
        threads[..3].iter().all(|n| n.starts_with("iso-exec-")),
        "{threads:?}"
    );
    assert!(threads[3].starts_with("iso-slow-exec-"), "{threads:?}");
    assert_eq!(timer.stats().isolations, 1);
    assert!(
        timer.stats().isolated_classes.is_empty(),
        "own classes are not listed"
    );
    assert!(slow.cancel());
}

#[test]
fn without_isolation_every_task_stays_on_the_timers_pool() {
    let clock = ManualClock::new();
    let timer = Timer::builder()
        .name("flat")
        .clock(clock.clone())
        .threads(2)
        .no_isolation()
        .build()
        .unwrap();
    for _ in 0..20 {
        assert!(slow_report(&clock, &timer, Duration::from_secs(1)).starts_with("flat-exec-"));
    }
    let stats = timer.stats();
    assert_eq!((stats.isolations, stats.run_time.runs), (0, 0));
}

/// Counts the jobs it is given and runs them on a thread of its own.
#[derive(Default)]
struct Counting(AtomicUsize);

impl Executor for Counting {
    fn execute(&self, job: Job) {
        self.0.fetch_add(1, SeqCst);
        thread::Builder::new()
            .name("mine".to_owned())
            .spawn(job)
            .expect("a thread");
    }
}

#[test]
fn a_task_runs_on_the_executor_it_names() {
    let clock = ManualClock::new();
    let timer = isolating(&clock);
    let mine = Arc::new(Counting::default());
    let (tx, rx) = mpsc::channel();
    for i in 0..3 {
        let tx = tx.clone();
        let task = Task::after(MS, move || tx.send((i, thread_name())).unwrap());
        let task = if i == 1 { task } else { task.on(mine.clone()) };
        timer.add_or_submit(task).unwrap();
    }
    clock.advance(MS);
    timer.wait_idle();
    let mut ran: Vec<(i32, String)> = rx.try_iter().collect();
    ran.sort();
    assert_eq!(ran.len(), 3);
    assert_eq!(ran[0].1, "mine");
    assert!(ran[1].1.starts_with("iso-exec-"));
    assert_eq!(ran[2].1, "mine");
    assert_eq!(mine.0.load(SeqCst), 2);
}

#[test]
fn class_and_executor_come_back_with_a_returned_task() {
    let clock = ManualClock::new();
    let timer = isolating(&clock);
    let mine: Arc<dyn Executor> = Arc::new(Counting::default());
    timer
        .add_or_submit(Task::after(MS, || {}).class("report").on(mine))
        .unwrap();
    let back = timer.shutdown();
    assert_eq!(back[0].class_name(), Some("report"));
}

/// Keeps jobs without running them.
#[derive(Default)]
struct Stalled(Mutex<Vec<Job>>);

impl Executor for Stalled {
    fn execute(&self, job: Job) {
        self.0.lock().unwrap().push(job);
    }
}

#[test]
fn max_pending_bounds_the_backlog_of_a_stalled_executor() {
    let clock = ManualClock::new();
    let stalled = Arc::new(Stalled::default());
    let timer = Timer::builder()
        .clock(clock.clone())
        .executor(stalled.clone())
        .max_pending(10)
        .build()
        .unwrap();
    for _ in 0..10 {
        timer
            .add_or_submit(Task::after(Duration::ZERO, || {}))
            .unwrap();
    }
    assert_eq!((timer.pending(), stalled.0.lock().unwrap().len()), (0, 10));
    let refused = timer.add_or_submit(Task::after(Duration::ZERO, || {}));
    assert!(matches!(refused, Err(AddError::Full(_))), "{refused:?}");
    let refused = timer.add_or_submit(Task::after(Duration::from_secs(1), || {}));
    assert!(matches!(refused, Err(AddError::Full(_))), "{refused:?}");
    // The pool catches up: room again.
    for job in stalled.0.lock().unwrap().drain(..) {
        job();
    }
    timer
        .add_or_submit(Task::after(Duration::ZERO, || {}))
        .unwrap();
}

/// A timer whose main pool and a task's own executor hold their jobs until run, with isolation
/// at one strike of 10 ms.
fn held_timer() -> (
    ManualClock,
    Arc<crate::support::Held>,
    Arc<crate::support::Held>,
    Timer,
) {
    let clock = ManualClock::new();
    let (main, own) = (
        Arc::new(crate::support::Held::default()),
        Arc::new(crate::support::Held::default()),
    );
    let timer = Timer::builder()
        .clock(clock.clone())
        .executor(main.clone())
        .isolation(
            Isolation::new()
                .threshold(10 * MS)
                .strikes(1)
                .window(Duration::from_secs(60)),
        )
        .build()
        .unwrap();
    (clock, main, own, timer)
}

// Found by the adversarial review of 2026-11-27: slow runs on a task's own executor were
// counted against its class (the default one if unnamed), which `Stats` then listed as isolated
// while its tasks stayed on the timer's pool.

#[test]
fn slow_runs_on_a_tasks_own_executor_isolate_no_class() {
    for class in [None, Some("report")] {
        let (clock, main, own, timer) = held_timer();
        let c = clock.clone();
        let slow = Task::after(MS, move || c.advance(20 * MS)).on(own.clone());
        let slow = match class {
            Some(name) => slow.class(name),
            None => slow,
        };
        timer.add_or_submit(slow).unwrap();
        clock.advance(MS);
        assert_eq!(own.len(), 1);
        own.run_all(); // one run of 20 ms, over the 10 ms threshold
        timer.wait_idle();

        // A task of the same class without its own executor still goes to the timer's pool.
        let same = Task::after(MS, || {});
        let same = match class {
            Some(name) => same.class(name),
            None => same,
        };
        timer.add_or_submit(same).unwrap();
        clock.advance(MS);
        assert_eq!(main.len(), 1, "{class:?}: still on the timer's pool");
        main.run_all();
        timer.wait_idle();
        let stats = timer.stats();
        assert!(stats.isolated_classes.is_empty(), "{class:?}: {stats:?}");
        assert_eq!(stats.isolations, 0, "{class:?}");
    }
}

/// The same slow run on the timer's pool does isolate its class: the test above is not vacuous.
#[test]
fn the_same_slow_run_on_the_timers_pool_isolates_its_class() {
    let (clock, main, _own, timer) = held_timer();
    let c = clock.clone();
    timer
        .add_or_submit(Task::after(MS, move || c.advance(20 * MS)).class("report"))
        .unwrap();
    clock.advance(MS);
    assert_eq!(main.len(), 1);
    main.run_all();
    timer.wait_idle();
    let stats = timer.stats();
    assert_eq!(stats.isolated_classes, ["report"]);
    assert_eq!(stats.isolations, 1);
}

/// Records the name of each thread that wakes it.
#[derive(Default)]
struct WokenOn(Mutex<Vec<String>>);

impl std::task::Wake for WokenOn {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.lock().unwrap().push(thread_name());
    }
}

/// A future's wake-up is the tick thread's own work, of no class: it is not sent to the slow
/// pool when the default class is isolated (review of 2026-11-28: it was, behind the slow runs).
#[test]
fn a_future_is_woken_by_the_tick_thread_while_the_default_class_is_isolated() {
    use std::future::Future;
    let clock = ManualClock::new();
    let timer = Timer::builder()
        .name("wk")
        .clock(clock.clone())
        .threads(1)
        .isolation(Isolation::new().threshold(THRESHOLD).strikes(1))
        .build()
        .unwrap();
    let c = clock.clone();
    timer
        .add_or_submit(Task::after(MS, move || c.advance(Duration::from_secs(1))))
        .unwrap();
    clock.advance(MS);
    timer.wait_idle();
    assert!(
        !timer.stats().isolated_classes.is_empty(),
        "the default class is isolated"
    );

    let woken = Arc::new(WokenOn::default());
    let waker = std::task::Waker::from(woken.clone());
    let mut sleep = timer.sleep(MS);
    let mut cx = std::task::Context::from_waker(&waker);
    assert!(std::pin::Pin::new(&mut sleep).poll(&mut cx).is_pending());
    clock.advance(MS); // returns once the tick thread handed out (here: woke) what is due
    let woken = woken.0.lock().unwrap().clone();
    assert_eq!(
        woken.len(),
        1,
        "woken once, before advance returned: {woken:?}"
    );
    assert!(!woken[0].contains("slow"), "woken on {:?}", woken[0]);
    assert!(std::pin::Pin::new(&mut sleep).poll(&mut cx).is_ready());
}

/// Panics in every `execute`.
struct Refusing;

impl Executor for Refusing {
    fn execute(&self, _job: Job) {
        std::panic::panic_any(crate::support::Boom);
    }
}

/// An executor whose `execute` panics: each panic is counted and reported like a task's, and
/// the tasks stay due in the timer (run by no one, not counted by `pending`) until `shutdown`
/// hands them back.
#[test]
fn an_executor_that_panics_is_counted_and_loses_nothing() {
    crate::support::silence_boom();
    let clock = ManualClock::new();
    let reported = Arc::new(AtomicUsize::new(0));
    let r = reported.clone();
    let timer = Timer::builder()
        .clock(clock.clone())
        .executor(Arc::new(Refusing))
        .on_panic(move |_| {
            r.fetch_add(1, SeqCst);
        })
        .build()
        .unwrap();
    let handles: Vec<_> = (0..3)
        .map(|_| timer.add_or_submit(Task::after(MS, || {})).unwrap())
        .collect();
    clock.advance(MS);
    let stats = timer.stats();
    assert!(stats.panicked >= 1, "{stats:?}");
    assert_eq!(reported.load(SeqCst) as u64, stats.panicked);
    assert!(stats.last_panic.is_some());
    assert_eq!(timer.pending(), 0);
    assert!(handles.iter().all(|h| !h.is_done()));
    assert_eq!(timer.shutdown().len(), 3);
}

/// A timer like `isolating`'s, `strikes` slow runs to isolation, with `hook` for `on_isolation`.
fn isolating_with(
    clock: &ManualClock,
    strikes: u32,
    hook: impl Fn(&str, bool) + Send + Sync + 'static,
) -> Timer {
    Timer::builder()
        .name("iso")
        .clock(clock.clone())
        .threads(1)
        .isolation(
            Isolation::new()
                .threshold(THRESHOLD)
                .strikes(strikes)
                .window(WINDOW)
                .slow_threads(1),
        )
        .on_isolation(hook)
        .build()
        .unwrap()
}

/// A timer like `isolating`'s that tells `seen` of every change of a class's isolation.
fn isolating_heard(clock: &ManualClock, seen: &Arc<Mutex<Vec<(String, bool)>>>) -> Timer {
    let log = seen.clone();
    isolating_with(clock, 3, move |class, isolated| {
        log.lock().unwrap().push((class.to_owned(), isolated))
    })
}

/// Friction 4 of the first-hour review: an isolation decision was visible only through the
/// `tracing` feature or by polling `Stats::isolated_classes`, and no figure was kept per class.
#[test]
fn the_isolation_hook_hears_each_change_once_and_a_named_class_has_its_own_figures() {
    let clock = ManualClock::new();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let timer = isolating_heard(&clock, &seen);
    // Unnamed one-shot tasks: the default class, not listed among the named classes.
    assert_eq!(punctual(&clock, &timer, 1), (100, 0));
    for _ in 0..3 {
        slow_report(&clock, &timer, 100 * MS);
    }
    assert_eq!(*seen.lock().unwrap(), [("report".to_owned(), true)]);
    // Reading the stats while it is isolated tells nobody anything new.
    let stats = timer.stats();
    assert_eq!(stats.classes.len(), 1, "{:?}", stats.classes);
    let report = &stats.classes[0];
    assert_eq!(report.name, "report");
    assert_eq!((report.isolated, report.isolations), (true, 1));
    assert_eq!(report.run_time.runs, 3);
    assert_eq!(report.run_time.max, 100 * MS, "exact on the manual clock");
    assert_eq!(report.lateness_max, Duration::ZERO);
    assert_eq!(seen.lock().unwrap().len(), 1);

    // A whole window without a slow run: the class comes back, and the hook hears it once.
    clock.advance(WINDOW);
    slow_report(&clock, &timer, MS);
    let stats = timer.stats();
    assert_eq!(
        *seen.lock().unwrap(),
        [("report".to_owned(), true), ("report".to_owned(), false)]
    );
    let report = &stats.classes[0];
    assert_eq!((report.isolated, report.isolations), (false, 1));
    assert_eq!(report.run_time.runs, 4);
    assert_eq!(stats.isolations, 1);
}

#[test]
fn a_named_class_counts_the_runs_its_misfire_policy_skipped_and_how_late_its_runs_were() {
    let clock = ManualClock::new();
    let timer = isolating_heard(&clock, &Arc::new(Mutex::new(Vec::new())));
    let (tx, rx) = mpsc::channel();
    let beat = timer
        .add_or_submit(
            Task::every(10 * MS, move || tx.send(()).unwrap())
                .misfire(tickwheel::MisfirePolicy::Skip)
                .class("beat"),
        )
        .unwrap();
    clock.advance(10 * MS);
    rx.recv_timeout(Duration::from_secs(60))
        .expect("ran on time");
    timer.wait_idle();
    // The clock jumps 55 ms: the run for 20 ms is 45 ms late, past a period and a tick, so
    // `Skip` skips it; the grid points up to 65 ms were missed too.
    clock.advance(55 * MS);
    timer.wait_idle();
    let stats = timer.stats();
    let beat_stats = &stats.classes[0];
    assert_eq!(beat_stats.name, "beat");
    assert!(beat_stats.skipped >= 1, "{beat_stats:?}");
    assert_eq!(beat_stats.skipped, stats.skipped, "the only periodic task");
    // A skipped run is no run: neither its time nor its lateness counts.
    assert_eq!((beat_stats.run_time.runs, stats.run_time.runs), (1, 1));
    assert_eq!(beat_stats.lateness_max, Duration::ZERO);
    assert_eq!(stats.lateness_max, Duration::ZERO);
    // Skipped at shutdown too (`run_due`: a `Skip` run a period and a tick late is skipped).
    clock.advance(100 * MS);
    let report = timer.shutdown_with(tickwheel::ShutdownOptions::new().run_due(true));
    assert_eq!(report.ran_due, 0);
    let stats = timer.stats();
    assert!(stats.skipped > beat_stats.skipped, "{stats:?}");
    assert_eq!(stats.classes[0].skipped, stats.skipped);
    assert!(!beat.cancel(), "handed back by shutdown");
}

/// The hook may call the timer: `stats()` decides nothing, and a change its own call causes
/// is told after it returns, in order.
#[test]
fn an_isolation_hook_that_calls_the_timer_hears_changes_in_order() {
    let clock = ManualClock::new();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let me: Arc<std::sync::OnceLock<tickwheel::WeakTimer>> = Arc::default();
    let (log, timer_of_hook) = (seen.clone(), me.clone());
    let timer = isolating_with(&clock, 3, move |class, isolated| {
        log.lock().unwrap().push((class.to_owned(), isolated));
        if let Some(t) = timer_of_hook.get() {
            // A task due at once from inside the hook: handed out on this thread.
            t.add_or_submit(Task::after(Duration::ZERO, || {}).class("report"))
                .unwrap();
        }
    });
    me.set(timer.downgrade()).unwrap();
    for _ in 0..3 {
        slow_report(&clock, &timer, 100 * MS);
    }
    timer.wait_idle();
    clock.advance(WINDOW);
    slow_report(&clock, &timer, MS);
    timer.wait_idle();
    let _ = timer.stats();
    assert_eq!(
        *seen.lock().unwrap(),
        [("report".to_owned(), true), ("report".to_owned(), false)]
    );
}

#[test]
fn a_panicking_isolation_hook_changes_nothing_else() {
    crate::support::silence_boom();
    let clock = ManualClock::new();
    let timer = isolating_with(&clock, 1, |_, _| {
        std::panic::panic_any(crate::support::Boom)
    });
    slow_report(&clock, &timer, 100 * MS);
    let stats = timer.stats();
    assert_eq!(stats.isolated_classes, ["report"]);
    assert_eq!(
        (stats.isolations, stats.panicked),
        (1, 0),
        "not a task's panic"
    );
    // The timer goes on: the isolated class runs on the slow pool.
    assert!(slow_report(&clock, &timer, MS).starts_with("iso-slow-exec-"));
}
