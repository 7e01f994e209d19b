//! The hand-out in chunks under hostile executors and racing calls, from an adversarial review
//! of it: executors that drop, run inline, panic, spawn or hold jobs; cancels and shutdowns of
//! tasks sitting in chunks; futures and periodic tasks in large rounds; order across shards; and
//! the three defects the review found (a repeating task's isolation lost within a catch-up turn,
//! a chunk's tasks counted twice against `max_pending`, a panicking prefetch hint in the wheel,
//! whose test is in the wheel's own unit tests).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::thread;
use std::time::Duration;

use tickwheel::{
    AddError, Executor, Isolation, Job, ManualClock, MisfirePolicy, RayonExecutor, Task,
    TaskContext, Timer, WeakTimer,
};

use crate::support::{Held, MS, SEC};

fn on(clock: &ManualClock, exec: Arc<dyn Executor>) -> Timer {
    Timer::builder()
        .clock(clock.clone())
        .executor(exec)
        .build()
        .unwrap()
}

// ---------------------------------------------------------------------------------------------
// Defects the review found (each failed before its fix)
// ---------------------------------------------------------------------------------------------

/// A repeating task's class let go and isolated again within one catch-up turn stays isolated.
/// `record_run` compared the new state with the route word the task was found due with, the
/// same for every run of the turn: the second change looked like none, `SELF_ISOLATED` stayed
/// cleared in the slot, and the next run went to the timer's pool while the class was isolated.
#[test]
fn a_repeating_task_isolated_again_within_one_burst_stays_off_the_main_pool() {
    let clock = ManualClock::new();
    let held = Arc::new(Held::default());
    let timer = Timer::builder()
        .clock(clock.clone())
        .executor(held.clone())
        .isolation(
            Isolation::new()
                .threshold(10 * MS)
                .strikes(1)
                .window(100 * MS),
        )
        .build()
        .unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let log = Arc::new(Mutex::new(Vec::new())); // (run, on the slow pool, clock)
    let (c, r, l) = (clock.clone(), runs.clone(), log.clone());
    timer
        .add_or_submit(
            Task::every(10 * MS, move || {
                let k = r.fetch_add(1, SeqCst);
                let slow = thread::current()
                    .name()
                    .is_some_and(|n| n.contains("-slow-exec-"));
                l.lock().unwrap().push((k, slow, c.elapsed()));
                if k == 0 || k == 4 {
                    c.advance(20 * MS); // a slow run (over the 10 ms threshold)
                }
            })
            .misfire(MisfirePolicy::CatchUp),
        )
        .unwrap();
    // t=10: run 0 is slow (ends at 30): isolated; runs 1, 2 catch up; re-armed for 40.
    clock.advance(10 * MS);
    held.run_all();
    assert_eq!(runs.load(SeqCst), 3);
    // t=140: a window after the slow run. Sent to the slow pool (still marked isolated); run 3
    // is fast and lets the class go, run 4 (same burst) is slow and isolates it again at 160.
    clock.advance(110 * MS);
    timer.wait_idle();
    assert_eq!(held.len(), 0, "the isolated task went to the slow pool");
    assert!(log.lock().unwrap()[3].1, "run 3 on the slow pool");
    // t=170: the class is isolated (last slow run ended at 160, window 100 ms).
    clock.advance(10 * MS);
    let on_main = held.len();
    held.run_all();
    timer.wait_idle();
    let last = *log.lock().unwrap().last().unwrap();
    assert_eq!(
        (on_main, last.1),
        (0, true),
        "run {} at {:?} went to the timer's pool while its class was isolated",
        last.0,
        last.2
    );
}

/// A chunk's tasks count once in the backlog (`max_pending`) while its job hands them on. The
/// chunk's count was given back only when the whole chunk had been handed on, each task's own
/// job counting it again meanwhile: an add was refused with 100 tasks outstanding of 128.
#[test]
fn handing_a_chunk_on_does_not_count_its_tasks_twice_against_max_pending() {
    #[derive(Default)]
    struct Probe {
        jobs: Mutex<Vec<Job>>,
        calls: AtomicUsize,
        timer: OnceLock<WeakTimer>,
        refused: Mutex<Option<bool>>,
    }
    impl Executor for Probe {
        fn execute(&self, job: Job) {
            self.jobs.lock().unwrap().push(job);
            // Calls 1 and 2 are the two chunks (from the tick thread); the 32nd is the 30th
            // task the first chunk hands on.
            if self.calls.fetch_add(1, SeqCst) + 1 == 32 {
                let weak = self.timer.get().unwrap().clone();
                // A fresh thread: its shard reads the whole timer's count at its first add.
                let refused = thread::spawn(move || {
                    matches!(
                        weak.add_or_submit(Task::after(SEC, || {})),
                        Err(AddError::Full(_))
                    )
                })
                .join()
                .unwrap();
                *self.refused.lock().unwrap() = Some(refused);
            }
        }
    }
    let clock = ManualClock::new();
    let probe = Arc::new(Probe::default());
    let timer = Timer::builder()
        .clock(clock.clone())
        .executor(probe.clone())
        .max_pending(128)
        .build()
        .unwrap();
    let _ = probe.timer.set(timer.downgrade());
    for k in 1..=100u32 {
        timer.add_or_submit(Task::after(k * MS, || {})).unwrap();
    }
    clock.advance(100 * MS); // one round of 100: two chunks (64 + 36), 100 in the backlog
    assert_eq!(probe.jobs.lock().unwrap().len(), 2);
    let first = probe.jobs.lock().unwrap().remove(0);
    first(); // hands 64 tasks on; nothing has run: 100 tasks outstanding, max_pending 128
    assert_eq!(
        *probe.refused.lock().unwrap(),
        Some(false),
        "an add was refused as Full with 100 tasks outstanding and max_pending 128"
    );
}

// ---------------------------------------------------------------------------------------------
// Promises that held
// ---------------------------------------------------------------------------------------------

/// Exactly once and shutdown order under an executor that, job by job, drops, runs inline,
/// panics without running, runs on another thread, or holds the job; with cancels of tasks
/// sitting in chunks not yet started, periodic tasks in the chunks, and panicking tasks.
#[test]
fn chaos_executor_every_task_runs_once_is_cancelled_or_comes_back() {
    #[derive(Default)]
    struct Chaos {
        n: AtomicUsize,
        held: Mutex<Vec<Job>>,
    }
    impl Executor for Chaos {
        fn execute(&self, job: Job) {
            match self.n.fetch_add(1, SeqCst) % 5 {
                0 => drop(job),
                1 => job(),
                2 => panic!("executor panics on submit"),
                3 => {
                    thread::spawn(job);
                }
                _ => self.held.lock().unwrap().push(job),
            }
        }
    }
    let clock = ManualClock::new();
    let chaos = Arc::new(Chaos::default());
    let timer = on(&clock, chaos.clone());
    let ran: Arc<Mutex<Vec<usize>>> = Arc::default();
    let n = 400;
    let mut handles = Vec::new();
    for id in 0..n {
        let ran = ran.clone();
        let delay = (1 + id % 37) as u32 * MS;
        let task = if id % 50 == 7 {
            Task::every(delay, move |cx: &mut TaskContext<'_>| {
                ran.lock().unwrap().push(id);
                cx.stop();
            })
        } else {
            Task::after(delay, move || {
                ran.lock().unwrap().push(id);
                if id % 11 == 0 {
                    panic!("task {id} panics");
                }
            })
        };
        handles.push(timer.add_or_submit(task.keyed(id.to_string())).unwrap());
    }
    clock.advance(37 * MS); // one round of 400 tasks
    let mut cancelled = Vec::new();
    for (id, h) in handles.iter().enumerate() {
        if id % 7 == 3 && h.cancel() {
            cancelled.push(id);
        }
    }
    for _ in 0..3 {
        let jobs = std::mem::take(&mut *chaos.held.lock().unwrap());
        for job in jobs {
            job();
        }
    }
    timer.wait_idle();
    let report = timer.shutdown();
    let deadlines: Vec<_> = report.iter().map(|t| t.deadline().unwrap()).collect();
    assert!(deadlines.windows(2).all(|w| w[0] <= w[1]), "earliest first");
    // Jobs still held or on threads find their tasks gone.
    for job in std::mem::take(&mut *chaos.held.lock().unwrap()) {
        job();
    }
    thread::sleep(50 * MS);
    let mut fate: HashMap<usize, Vec<&str>> = HashMap::new();
    for &id in ran.lock().unwrap().iter() {
        fate.entry(id).or_default().push("ran");
    }
    for &id in &cancelled {
        fate.entry(id).or_default().push("cancelled");
    }
    for t in &report {
        let id: usize = t.key().unwrap().parse().unwrap();
        fate.entry(id).or_default().push("returned");
    }
    for id in 0..n {
        assert_eq!(
            fate.get(&id).map_or(0, Vec::len),
            1,
            "task {id}: {:?}",
            fate.get(&id)
        );
    }
    assert!(!cancelled.is_empty() && !report.is_empty() && !ran.lock().unwrap().is_empty());
}

/// Order across shards: tasks added from four threads, due at 200 different ticks, found in one
/// round: handed out (and, on a FIFO executor, run) earliest tick first.
#[test]
fn a_round_from_four_shards_is_handed_out_in_tick_order() {
    let clock = ManualClock::new();
    let held = Arc::new(Held::default());
    let timer = Arc::new(on(&clock, held.clone()));
    let order = Arc::new(Mutex::new(Vec::new()));
    let threads: Vec<_> = (0..4u32)
        .map(|t| {
            let (timer, order) = (timer.clone(), order.clone());
            thread::spawn(move || {
                for k in (0..50u32).rev() {
                    let d = 1 + 4 * k + t;
                    let order = order.clone();
                    timer
                        .add_or_submit(Task::after(d * MS, move || order.lock().unwrap().push(d)))
                        .unwrap();
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
    clock.advance(200 * MS);
    assert!(held.len() <= 4, "{} jobs", held.len());
    held.run_all();
    assert_eq!(*order.lock().unwrap(), (1..=200).collect::<Vec<_>>());
}

/// wait_idle on the real rayon pool after a round of 1000 (chunked) tasks: every one has run;
/// and none ran before its deadline.
#[test]
fn wait_idle_after_a_chunked_round_on_rayon_means_everything_ran_never_early() {
    let clock = ManualClock::new();
    let timer = on(&clock, Arc::new(RayonExecutor::new(2, "rv").unwrap()));
    let ran = Arc::new(AtomicUsize::new(0));
    let early = Arc::new(AtomicBool::new(false));
    for k in 0..1000u64 {
        let (ran, early, c) = (ran.clone(), early.clone(), clock.clone());
        let d = Duration::from_micros(1000 * (1 + k % 5));
        timer
            .add_or_submit(Task::after(d, move || {
                if c.elapsed() < d {
                    early.store(true, SeqCst);
                }
                thread::sleep(Duration::from_micros(50));
                ran.fetch_add(1, SeqCst);
            }))
            .unwrap();
    }
    for _ in 0..5 {
        clock.advance(MS); // rounds of 200
    }
    timer.wait_idle();
    assert_eq!(ran.load(SeqCst), 1000);
    assert!(!early.load(SeqCst));
}

/// shutdown from inside a task of a chunk, on a 1-thread rayon pool (the rest of the chunk
/// queued behind it on the same thread) and on the inline executor (the chunk's job on the tick
/// thread): no deadlock, and the tasks of the chunk that did not run come back.
#[test]
fn shutdown_from_inside_a_chunked_task_returns_the_rest_of_the_chunk() {
    for inline in [false, true] {
        let clock = ManualClock::new();
        let exec: Arc<dyn Executor> = if inline {
            Arc::new(tickwheel::InlineExecutor::new())
        } else {
            Arc::new(RayonExecutor::new(1, "rv1").unwrap())
        };
        let timer = Arc::new(on(&clock, exec));
        let (tx, rx) = mpsc::channel();
        let ran = Arc::new(AtomicUsize::new(0));
        let slot: Arc<OnceLock<Arc<Timer>>> = Arc::default();
        for k in 1..=100u32 {
            let (tx, ran, slot) = (tx.clone(), ran.clone(), slot.clone());
            timer
                .add_or_submit(Task::after(k * MS, move || {
                    ran.fetch_add(1, SeqCst);
                    if k == 10 {
                        let _ = tx.send(slot.get().unwrap().shutdown().len());
                    }
                }))
                .unwrap();
        }
        let _ = slot.set(timer.clone());
        let c = clock.clone();
        thread::spawn(move || c.advance(100 * MS));
        let back = rx
            .recv_timeout(10 * SEC)
            .expect("shutdown inside a task never returned");
        thread::sleep(100 * MS);
        assert_eq!(
            back + ran.load(SeqCst),
            100,
            "inline={inline}: {back} back, {} ran",
            ran.load(SeqCst)
        );
    }
}

/// Futures woken in a round of more than 64 tasks: woken when due, not before, and only once.
#[test]
fn sleeps_in_a_round_of_many_tasks_are_woken_when_due() {
    struct Count(AtomicUsize);
    impl futures::task::ArcWake for Count {
        fn wake_by_ref(me: &Arc<Self>) {
            me.0.fetch_add(1, SeqCst);
        }
    }
    let clock = ManualClock::new();
    let held = Arc::new(Held::default());
    let timer = on(&clock, held.clone());
    let mut sleeps = Vec::new();
    for k in 0..100u32 {
        if k % 10 == 5 {
            let wakes = Arc::new(Count(AtomicUsize::new(0)));
            let waker = futures::task::waker(wakes.clone());
            let mut s = Box::pin(timer.sleep(k * MS));
            assert!(
                s.as_mut()
                    .poll(&mut Context::from_waker(&waker))
                    .is_pending()
            );
            sleeps.push((k, s, wakes, waker));
        } else {
            timer.add_or_submit(Task::after(k * MS, || {})).unwrap();
        }
    }
    let late = timer.sleep(200 * MS);
    clock.advance(99 * MS); // one round: 90 tasks and 10 sleeps
    for (k, s, wakes, waker) in &mut sleeps {
        assert_eq!(wakes.0.load(SeqCst), 1, "sleep {k}");
        let s: &mut Pin<Box<_>> = s;
        assert!(matches!(
            s.as_mut().poll(&mut Context::from_waker(waker)),
            Poll::Ready(())
        ));
    }
    assert!(!late.is_elapsed());
    held.run_all();
    assert_eq!(timer.stats().fired, 100);
}

/// A stalled pool holding two chunks: tasks cancelled in them say so once, the rest come back
/// from shutdown earliest first (periodic ones among them), and the stalled jobs run nothing.
#[test]
fn stalled_chunks_cancel_and_shutdown() {
    let clock = ManualClock::new();
    let held = Arc::new(Held::default());
    let timer = on(&clock, held.clone());
    let ran = Arc::new(AtomicUsize::new(0));
    let mut handles = Vec::new();
    for k in (1..=100u32).rev() {
        let ran = ran.clone();
        let t = if k % 9 == 0 {
            Task::every(k * MS, move || {
                ran.fetch_add(1, SeqCst);
            })
        } else {
            Task::after(k * MS, move || {
                ran.fetch_add(1, SeqCst);
            })
        };
        handles.push(timer.add_or_submit(t).unwrap());
    }
    let _later = timer.add_or_submit(Task::after(SEC, || {})).unwrap();
    clock.advance(100 * MS);
    assert_eq!(held.len(), 2);
    let cancelled = handles.iter().step_by(3).filter(|h| h.cancel()).count();
    assert_eq!(cancelled, 34);
    assert_eq!(handles.iter().step_by(3).filter(|h| h.cancel()).count(), 0);
    let back = timer.shutdown();
    assert_eq!(back.len(), 100 - 34 + 1);
    let d: Vec<_> = back.iter().map(|t| t.deadline().unwrap()).collect();
    assert!(d.windows(2).all(|w| w[0] <= w[1]));
    held.run_all();
    assert_eq!(ran.load(SeqCst), 0);
}

/// An executor that panics on one task's hand-on inside a chunk (and runs the rest inline): the
/// other tasks of the chunk still run, the one whose job was lost comes back from shutdown.
#[test]
fn an_executor_panicking_inside_a_chunk_loses_no_other_task() {
    #[derive(Default)]
    struct PanicsOnce(AtomicUsize);
    impl Executor for PanicsOnce {
        fn execute(&self, job: Job) {
            // Call 1 is the chunk (100 tasks: chunks of 64 and 36); call 5 its 4th task.
            if self.0.fetch_add(1, SeqCst) + 1 == 5 {
                panic!("executor refuses a job");
            }
            job();
        }
    }
    let clock = ManualClock::new();
    let timer = on(&clock, Arc::new(PanicsOnce::default()));
    let ran = Arc::new(Mutex::new(Vec::new()));
    for k in 1..=100u32 {
        let ran = ran.clone();
        timer
            .add_or_submit(Task::after(k * MS, move || ran.lock().unwrap().push(k)))
            .unwrap();
    }
    clock.advance(100 * MS);
    timer.wait_idle();
    let ran = ran.lock().unwrap().clone();
    assert_eq!(ran.len(), 99, "{ran:?}");
    assert!(ran.windows(2).all(|w| w[0] < w[1]));
    let back = timer.shutdown();
    assert_eq!(back.len(), 1);
    assert!(!ran.contains(&4));
}

/// Periodic tasks inside chunks keep their grid and run once per period; a Timeout in the same
/// round of many tasks fires.
#[test]
fn periodic_tasks_and_a_timeout_inside_chunks() {
    let clock = ManualClock::new();
    let held = Arc::new(Held::default());
    let timer = on(&clock, held.clone());
    let runs = Arc::new(Mutex::new(HashMap::<u32, Vec<Duration>>::new()));
    for k in 0..150u32 {
        let (runs, c) = (runs.clone(), clock.clone());
        timer
            .add_or_submit(
                Task::every(10 * MS, move || {
                    runs.lock().unwrap().entry(k).or_default().push(c.elapsed())
                })
                .starting_after(MS * (1 + k % 3)),
            )
            .unwrap();
    }
    let mut t = Box::pin(timer.timeout(2 * MS, std::future::pending::<()>()));
    let waker = futures::task::noop_waker();
    assert!(
        t.as_mut()
            .poll(&mut Context::from_waker(&waker))
            .is_pending()
    );
    clock.advance(3 * MS); // one round: 150 tasks and the timeout
    assert!(t.as_mut().poll(&mut Context::from_waker(&waker)).is_ready());
    held.run_all();
    clock.advance(10 * MS); // t=13: the second run of each
    held.run_all();
    let runs = runs.lock().unwrap();
    assert_eq!(runs.len(), 150);
    for (k, r) in runs.iter() {
        let first = MS * (1 + k % 3);
        assert_eq!(r.len(), 2, "task {k}: {r:?}");
        assert!(r[0] >= first && r[1] >= first + 10 * MS, "task {k}: {r:?}");
    }
    assert_eq!(timer.pending(), 150);
}
