//! Several threads add, cancel and reschedule at once while the clock moves and tasks fire on a
//! pool. Per-task counters prove each task ended exactly one way: ran once, cancelled (cancel
//! returned true), or handed back by shutdown; and `stats()` agrees with the counts.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::thread;
use std::time::{Duration, Instant};

use tickwheel::{ManualClock, RayonExecutor, Task, Timer};

use crate::support::Rng;

#[derive(Default)]
struct Slot {
    runs: AtomicUsize,
    returned: AtomicUsize,
    cancelled: AtomicUsize,
    /// Earliest deadline this task ever had, in clock nanoseconds.
    earliest: AtomicU64,
    early: AtomicBool,
}

/// Set once the timer is shut down: the returned tasks are run only to identify themselves.
static IDENTIFY: AtomicBool = AtomicBool::new(false);

#[test]
fn concurrent_adds_cancels_and_reschedules_lose_nothing_and_run_nothing_twice() {
    const THREADS: usize = 4;
    const PER_THREAD: usize = 10_000;
    let clock = ManualClock::new();
    let pool = Arc::new(RayonExecutor::new(2, "conc").unwrap());
    let timer = Arc::new(
        Timer::builder()
            .clock(clock.clone())
            .executor(pool.clone())
            .build()
            .unwrap(),
    );
    let slots: Arc<Vec<Slot>> =
        Arc::new((0..THREADS * PER_THREAD).map(|_| Slot::default()).collect());
    let done = Arc::new(AtomicUsize::new(0));

    let workers: Vec<_> = (0..THREADS)
        .map(|w| {
            let (timer, slots, clock, done) =
                (timer.clone(), slots.clone(), clock.clone(), done.clone());
            thread::spawn(move || {
                let mut rng = Rng::new(0x9E37_79B9_7F4A_7C15u64 ^ (w as u64 + 1));
                let mut rnd = move || rng.next();
                let mut handles = Vec::new();
                for k in 0..PER_THREAD {
                    let i = w * PER_THREAD + k;
                    let delay = Duration::from_millis(rnd() % 200);
                    let now = clock.elapsed();
                    slots[i]
                        .earliest
                        .store((now + delay).as_nanos() as u64, SeqCst);
                    let (s, c) = (slots.clone(), clock.clone());
                    let task = Task::after(delay, move || {
                        let slot = &s[i];
                        if IDENTIFY.load(SeqCst) {
                            slot.returned.fetch_add(1, SeqCst);
                        } else {
                            if (c.elapsed().as_nanos() as u64) < slot.earliest.load(SeqCst) {
                                slot.early.store(true, SeqCst);
                            }
                            slot.runs.fetch_add(1, SeqCst);
                        }
                    });
                    handles.push((i, timer.add_or_submit(task).unwrap()));
                    match rnd() % 4 {
                        0 => {
                            let (j, h) = &handles[(rnd() % handles.len() as u64) as usize];
                            if h.cancel() {
                                slots[*j].cancelled.fetch_add(1, SeqCst);
                            }
                        }
                        1 => {
                            let (j, h) = &handles[(rnd() % handles.len() as u64) as usize];
                            let delay = Duration::from_millis(rnd() % 200);
                            let at = (clock.elapsed() + delay).as_nanos() as u64;
                            slots[*j].earliest.fetch_min(at, SeqCst);
                            h.reschedule(delay);
                        }
                        _ => {}
                    }
                }
                done.fetch_add(1, SeqCst);
            })
        })
        .collect();

    // Meanwhile the clock moves in 1 ms steps, firing tasks on the pool.
    let started = Instant::now();
    while done.load(SeqCst) < THREADS && started.elapsed() < Duration::from_secs(60) {
        clock.advance(Duration::from_millis(1));
    }
    for w in workers {
        w.join().unwrap();
    }
    clock.advance(Duration::from_millis(100)); // about half the last adds are still pending
    pool.wait_idle();
    let back = timer.shutdown();
    IDENTIFY.store(true, SeqCst);
    let returned = back.len();
    for task in back {
        task.run();
    }

    let (mut runs, mut cancels) = (0, 0);
    for (i, s) in slots.iter().enumerate() {
        let (r, c, b) = (
            s.runs.load(SeqCst),
            s.cancelled.load(SeqCst),
            s.returned.load(SeqCst),
        );
        assert_eq!(
            r + c + b,
            1,
            "task {i}: ran {r}, cancelled {c}, returned {b}"
        );
        assert!(!s.early.load(SeqCst), "task {i} ran before its deadline");
        runs += r;
        cancels += c;
    }
    let stats = timer.stats();
    assert_eq!(stats.added as usize, slots.len());
    assert_eq!(stats.fired as usize, runs);
    assert_eq!(stats.cancelled as usize, cancels);
    assert_eq!(stats.returned as usize, returned);
    println!(
        "{} tasks from {THREADS} threads: {runs} ran, {cancels} cancelled, {returned} returned",
        slots.len()
    );
    assert!(
        runs > 0 && cancels > 0 && returned > 0,
        "runs {runs}, cancels {cancels}, returned {returned}"
    );
}
