//! What shutdown and a timer's drop do with the tasks that never ran: handed back earliest first
//! with their keys and deadlines (a restart can add them again), run on the caller's thread with
//! `run_due`, waited for at most a limit, given to the drop hook or dropped. On the manual clock,
//! exact. (From the users' API issue, 12, and the adversarial review of 2026-11-22.)

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Barrier, Mutex, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use crate::support::{DropCount, Log, MS, SEC, manual, pooled, walk};
use tickwheel::{
    AddError, Executor, Job, ManualClock, MisfirePolicy, RayonExecutor, ShutdownOptions, Task,
    TaskContext, TaskState, Timer,
};

/// An executor that keeps jobs without running them: due tasks stay on their way.
#[derive(Default)]
struct Stalled(Mutex<Vec<Job>>);

impl Executor for Stalled {
    fn execute(&self, job: Job) {
        self.0.lock().unwrap().push(job);
    }
}

#[test]
fn keys_and_deadlines_survive_shutdown_and_a_restart() {
    let (clock, timer) = manual();
    clock.advance(100 * SEC);
    let orders = [("order-1", 900), ("order-2", 60), ("order-3", 3600)];
    for (key, secs) in orders {
        timer
            .add_or_submit(Task::after(secs * SEC, || {}).keyed(key))
            .unwrap();
    }
    clock.advance(30 * SEC);
    let back = timer.shutdown();
    let saved: Vec<(String, Duration, Instant)> = back
        .iter()
        .map(|t| {
            let key = t.key().unwrap().to_owned();
            (key, t.remaining().unwrap(), t.deadline().unwrap())
        })
        .collect();
    let remaining: Vec<_> = saved.iter().map(|(k, d, _)| (k.as_str(), *d)).collect();
    assert_eq!(
        remaining,
        [
            ("order-2", 30 * SEC),
            ("order-1", 870 * SEC),
            ("order-3", 3570 * SEC)
        ]
    );
    assert_eq!(saved[0].2, timer.now() + 30 * SEC);

    // The restart: a new timer, and each saved key re-added with its remaining time.
    let (clock2, timer2) = manual();
    let fired = Log::default();
    let names = Arc::new(Mutex::new(Vec::new()));
    for (key, remaining, _) in saved {
        let (log, c, n) = (fired.clone(), clock2.clone(), names.clone());
        timer2
            .add_or_submit(
                Task::after(remaining, move |cx: &mut TaskContext<'_>| {
                    log.push(c.elapsed());
                    n.lock().unwrap().push(cx.key().unwrap().to_owned());
                })
                .keyed(key),
            )
            .unwrap();
    }
    walk(&clock2, &timer2, SEC, 3570 * SEC);
    assert_eq!(fired.get(), [30, 870, 3570].map(Duration::from_secs));
    assert_eq!(*names.lock().unwrap(), ["order-2", "order-1", "order-3"]);
}

#[test]
fn shutdown_with_a_limit_returns_while_a_task_blocks() {
    let clock = ManualClock::new();
    let timer = pooled(&clock, 2);
    let (started_tx, started) = mpsc::channel();
    let (release, release_rx) = mpsc::channel::<()>();
    let h = timer
        .add_or_submit(Task::after(MS, move || {
            started_tx.send(()).unwrap();
            release_rx.recv().unwrap();
        }))
        .unwrap();
    let later = timer.add_or_submit(Task::after(SEC, || {})).unwrap();
    clock.advance(MS);
    started.recv().unwrap();
    let limit = 50 * MS;
    let begun = Instant::now();
    let report = timer.shutdown_with(ShutdownOptions::new().wait_at_most(limit));
    assert!(begun.elapsed() >= limit, "not before the limit");
    assert_eq!(report.still_running, 1);
    assert_eq!((report.tasks.len(), report.ran_due), (1, 0));
    assert_eq!(later.state(), TaskState::Returned);
    assert_eq!(h.state(), TaskState::Running);
    release.send(()).unwrap();
    timer.wait_idle();
    assert_eq!(h.state(), TaskState::Done);
}

#[test]
fn shutdown_can_run_the_due_tasks_instead_of_handing_them_back() {
    let clock = ManualClock::new();
    let stalled = Arc::new(Stalled::default());
    let timer = Timer::builder()
        .clock(clock.clone())
        .executor(stalled.clone())
        .build()
        .unwrap();
    let ran = Log::default();
    let add = |task: fn(Duration, Box<dyn FnMut() + Send>) -> Task, d: Duration| {
        let (log, c) = (ran.clone(), clock.clone());
        timer
            .add_or_submit(task(d, Box::new(move || log.push(c.elapsed()))))
            .unwrap()
    };
    add(Task::after, SEC);
    add(Task::after, 2 * SEC);
    add(Task::every, 2 * SEC);
    add(Task::after, 60 * SEC);
    clock.advance(3 * SEC); // three tasks due, stuck on their way to the executor
    assert_eq!(
        stalled.0.lock().unwrap().len(),
        3,
        "a small round: a job per task"
    );
    let report = timer.shutdown_with(ShutdownOptions::new().run_due(true));
    assert_eq!(report.ran_due, 3);
    assert_eq!(ran.get(), [3, 3, 3].map(Duration::from_secs));
    let left: Vec<_> = report
        .tasks
        .iter()
        .map(|t| (t.is_periodic(), t.remaining()))
        .collect();
    // The periodic task comes back for its next run on its grid (4 s); the far one as it was.
    assert_eq!(left, [(true, Some(SEC)), (false, Some(57 * SEC))]);
    let stats = timer.stats();
    assert_eq!((stats.fired, stats.returned), (3, 2));
    // The stalled jobs find their tasks gone when (if ever) they run.
    let jobs = std::mem::take(&mut *stalled.0.lock().unwrap());
    jobs.into_iter().for_each(|job| job());
    assert_eq!(ran.get().len(), 3);
}

#[test]
fn dropping_a_timer_hands_due_and_waiting_tasks_to_the_drop_hook() {
    let clock = ManualClock::new();
    let got = Arc::new(Mutex::new(Vec::new()));
    let g = got.clone();
    let timer = Timer::builder()
        .clock(clock.clone())
        .executor(Arc::new(Stalled::default()))
        .on_drop(move |tasks| {
            let keys = tasks.iter().map(|t| t.key().unwrap().to_owned());
            g.lock().unwrap().extend(keys);
        })
        .build()
        .unwrap();
    for (key, d) in [("due", SEC), ("later", 60 * SEC)] {
        timer
            .add_or_submit(Task::after(d, || {}).keyed(key))
            .unwrap();
    }
    clock.advance(SEC);
    drop(timer);
    assert_eq!(*got.lock().unwrap(), ["due", "later"]);
}

#[test]
fn dropping_a_timer_without_a_hook_drops_what_never_ran() {
    let clock = ManualClock::new();
    let timer = Timer::builder()
        .clock(clock.clone())
        .executor(Arc::new(Stalled::default()))
        .build()
        .unwrap();
    let dropped = Arc::new(AtomicUsize::new(0));
    for d in [SEC, 60 * SEC] {
        let guard = DropCount(dropped.clone());
        timer
            .add_or_submit(Task::after(d, move || drop(guard)))
            .unwrap();
    }
    clock.advance(SEC);
    assert_eq!(dropped.load(SeqCst), 0);
    drop(timer);
    assert_eq!(
        dropped.load(SeqCst),
        2,
        "both closures dropped, neither run"
    );
}

#[test]
fn run_due_respects_skip() {
    let clock = ManualClock::new();
    let timer = Timer::builder()
        .clock(clock.clone())
        .executor(Arc::new(Stalled::default()))
        .build()
        .unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    timer
        .add_or_submit(
            Task::every(SEC, move || {
                r.fetch_add(1, SeqCst);
            })
            .misfire(MisfirePolicy::Skip),
        )
        .unwrap();
    clock.advance(SEC); // due, stuck on its way to the executor
    clock.advance(9 * SEC); // now 9 s (nine periods) late
    let report = timer.shutdown_with(ShutdownOptions::new().run_due(true));
    let stats = timer.stats();
    assert_eq!(
        (runs.load(SeqCst), report.ran_due, stats.skipped),
        (0, 0, 10),
        "a Skip task 9 periods late does not run; the ten missed grid points (1..=10 s) are skipped"
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

#[test]
fn shutdown_returns_exactly_the_unrun_tasks() {
    let (clock, timer) = manual();
    let ran: Arc<Mutex<Vec<usize>>> = Arc::default();
    let mut handles = Vec::new();
    for i in 0..10 {
        let ran = ran.clone();
        handles.push(
            timer
                .add_or_submit(Task::after((i as u32 + 1) * SEC, move || {
                    ran.lock().unwrap().push(i)
                }))
                .unwrap(),
        );
    }
    clock.advance(4 * SEC); // 0..=3 run
    assert!(handles[6].cancel());
    assert!(handles[8].cancel());
    let back = timer.shutdown();
    assert_eq!(back.len(), 4, "4, 5, 7, 9 never ran");
    assert!(timer.shutdown().is_empty(), "shutdown is idempotent");
    for t in back {
        t.run();
    }
    assert_eq!(*ran.lock().unwrap(), [0, 1, 2, 3, 4, 5, 7, 9]);
    assert!(handles[4].is_done() && !handles[4].cancel());
    let err = timer.add_or_submit(Task::after(SEC, || {})).unwrap_err();
    assert!(matches!(err, AddError::Shutdown(_)));
    let stats = timer.stats();
    assert_eq!(
        (stats.added, stats.fired, stats.cancelled, stats.returned),
        (10, 4, 2, 4)
    );
}
