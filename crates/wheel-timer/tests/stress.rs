//! Stress over the real `Timer` on the real clock: several threads add, cancel and reschedule
//! one-shot and periodic tasks for a bounded time while 1% of tasks panic and 0.1% are slow (1 ms).
//! Every task carries its own counters; at the end each one-shot task ran once, was cancelled, or
//! came back from shutdown (exactly one of them), no task ran before its deadline, and
//! `stats()` agrees with the counts.
//!
//! `WHEEL_STRESS_SECS` sets the duration (default 10 s, what `cargo test` and CI run);
//! `just stress` runs it for minutes.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::thread;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tickwheel::{MisfirePolicy, Task, Timer, TimerHandle};

struct Slot {
    periodic: bool,
    runs: AtomicUsize,
    panics: AtomicUsize,
    cancelled: AtomicUsize,
    returned: AtomicUsize,
    /// Earliest deadline this task ever had, in ns since the test's origin.
    earliest: AtomicU64,
    early: AtomicBool,
}

/// Adds pause while this many tasks wait in the wheel.
const MAX_PENDING: u64 = 20_000;

const EXPECTED_PANIC: &str = "stress: a task that panics on purpose";

/// Set once the timer is shut down: returned tasks are run only to identify themselves.
static IDENTIFY: AtomicBool = AtomicBool::new(false);

mod support;
use support::Rng;

fn ns_since(origin: Instant) -> u64 {
    origin.elapsed().as_nanos() as u64
}

#[test]
fn stress_exactly_once_under_concurrency_panics_and_slow_tasks() {
    let secs: u64 = std::env::var("WHEEL_STRESS_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    const THREADS: usize = 4;
    // Thousands of tasks panic on purpose: keep their reports out of the output (any other
    // panic is still reported by the default hook).
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if info.payload().downcast_ref::<&str>() != Some(&EXPECTED_PANIC) {
            default_hook(info);
        }
    }));
    let origin = Instant::now();
    let timer = Arc::new(Timer::builder().name("stress").threads(2).build().unwrap());
    let slots: Arc<Mutex<Vec<Arc<Slot>>>> = Arc::default();
    let ops = Arc::new(AtomicU64::new(0));
    let stop_at = origin + Duration::from_secs(secs);

    let workers: Vec<_> = (0..THREADS)
        .map(|w| {
            let (timer, slots, ops) = (timer.clone(), slots.clone(), ops.clone());
            thread::spawn(move || {
                let mut rng = Rng::new(0x5EED_0000_0000_0001 ^ ((w as u64 + 1) << 32));
                let mut mine: Vec<(Arc<Slot>, TimerHandle)> = Vec::new();
                while Instant::now() < stop_at {
                    ops.fetch_add(1, SeqCst);
                    match rng.below(100) {
                        // Adds keep the wheel around MAX_PENDING tasks, so a fast machine runs a
                        // steady load rather than an ever-growing backlog.
                        0..=59 if timer.pending() < MAX_PENDING => {
                            let periodic = rng.below(50) == 0;
                            let delay = Duration::from_micros(rng.below(200_000));
                            let slot = Arc::new(Slot {
                                periodic,
                                runs: AtomicUsize::new(0),
                                panics: AtomicUsize::new(0),
                                cancelled: AtomicUsize::new(0),
                                returned: AtomicUsize::new(0),
                                earliest: AtomicU64::new(
                                    ns_since(origin) + delay.as_nanos() as u64,
                                ),
                                early: AtomicBool::new(false),
                            });
                            let panics = rng.below(100) == 0;
                            let slow = rng.below(1_000) == 0;
                            let s = slot.clone();
                            let body = move || {
                                if IDENTIFY.load(SeqCst) {
                                    s.returned.fetch_add(1, SeqCst);
                                    return;
                                }
                                if ns_since(origin) < s.earliest.load(SeqCst) {
                                    s.early.store(true, SeqCst);
                                }
                                s.runs.fetch_add(1, SeqCst);
                                if slow {
                                    thread::sleep(Duration::from_millis(1));
                                }
                                if panics {
                                    s.panics.fetch_add(1, SeqCst);
                                    std::panic::panic_any(EXPECTED_PANIC);
                                }
                            };
                            let task = if periodic {
                                let period = Duration::from_millis(5 + rng.below(45));
                                let policy = [
                                    MisfirePolicy::RunOnce,
                                    MisfirePolicy::Skip,
                                    MisfirePolicy::CatchUp,
                                ][rng.below(3) as usize];
                                slot.earliest
                                    .store(ns_since(origin) + period.as_nanos() as u64, SeqCst);
                                Task::every(period, body).misfire(policy)
                            } else {
                                Task::after(delay, body)
                            };
                            let handle = timer
                                .add_or_submit(task)
                                .expect("no max_pending, not shut down");
                            slots.lock().push(slot.clone());
                            mine.push((slot, handle));
                        }
                        60..=84 if !mine.is_empty() => {
                            let (slot, h) = &mine[rng.below(mine.len() as u64) as usize];
                            if h.cancel() {
                                slot.cancelled.fetch_add(1, SeqCst);
                            }
                        }
                        85..=99 if !mine.is_empty() => {
                            let (slot, h) = &mine[rng.below(mine.len() as u64) as usize];
                            let delay = Duration::from_micros(rng.below(200_000));
                            slot.earliest
                                .fetch_min(ns_since(origin) + delay.as_nanos() as u64, SeqCst);
                            h.reschedule(delay);
                        }
                        _ => {}
                    }
                    if mine.len() > 5_000 {
                        mine.drain(..2_500);
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let back = timer.shutdown();
    IDENTIFY.store(true, SeqCst);
    let returned = back.len();
    for task in back {
        task.run();
    }

    let slots = slots.lock();
    let (mut runs, mut panics, mut cancels, mut mismatches) = (0, 0, 0, 0);
    for (i, s) in slots.iter().enumerate() {
        let (r, c, b) = (
            s.runs.load(SeqCst),
            s.cancelled.load(SeqCst),
            s.returned.load(SeqCst),
        );
        let ok = if s.periodic {
            c + b == 1
        } else {
            r + c + b == 1
        };
        if !ok || s.early.load(SeqCst) {
            mismatches += 1;
            eprintln!(
                "task {i} (periodic: {}): ran {r}, cancelled {c}, returned {b}, early {}",
                s.periodic,
                s.early.load(SeqCst)
            );
        }
        runs += r;
        panics += s.panics.load(SeqCst);
        cancels += c;
    }
    let stats = timer.stats();
    println!(
        "stress: {THREADS} threads, {} operations, {} tasks, {secs} s: {runs} runs ({panics} panicked), {cancels} cancelled, \
         {returned} returned; mismatches: {mismatches}; lateness p50 {:?} p99 {:?} max {:?}",
        ops.load(SeqCst),
        slots.len(),
        stats.lateness_p50,
        stats.lateness_p99,
        stats.lateness_max
    );
    assert_eq!(mismatches, 0);
    assert_eq!(stats.added as usize, slots.len());
    assert_eq!(stats.fired as usize, runs);
    assert_eq!(stats.panicked as usize, panics);
    assert_eq!(stats.cancelled as usize, cancels);
    assert_eq!(stats.returned as usize, returned);
    assert_eq!(stats.pending, 0);
}
