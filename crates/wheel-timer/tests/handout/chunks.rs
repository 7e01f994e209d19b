//! The tick thread's hand-out in chunks: a round that finds many tasks due sends them to the
//! executor as a few jobs, each of which hands its tasks on as jobs of their own. Nothing about a
//! task's fate changes: it runs once, in deadline order, counts in the backlog `max_pending`
//! bounds from the moment it leaves the wheel, and comes back from shutdown if the executor drops
//! its job. On the manual clock, with an executor that keeps its jobs until the test runs them.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use tickwheel::{AddError, Executor, Job, ManualClock, MisfirePolicy, RayonExecutor, Task, Timer};

use crate::support::{Held, MS, SEC};

fn timer_on(held: &Arc<Held>, clock: &ManualClock, max_pending: Option<usize>) -> Timer {
    let builder = Timer::builder().clock(clock.clone()).executor(held.clone());
    match max_pending {
        Some(max) => builder.max_pending(max),
        None => builder,
    }
    .build()
    .unwrap()
}

#[test]
fn many_tasks_due_in_one_round_go_out_in_a_few_jobs_and_run_once_each_in_deadline_order() {
    let (clock, held) = (ManualClock::new(), Arc::new(Held::default()));
    let timer = timer_on(&held, &clock, None);
    let order = Arc::new(Mutex::new(Vec::new()));
    let n = 200;
    for k in (1..=n).rev() {
        let order = order.clone();
        timer
            .add_or_submit(Task::after(k * MS, move || order.lock().unwrap().push(k)))
            .unwrap();
    }
    clock.advance(n * MS); // one round finds all of them due
    let jobs = held.len();
    assert!(
        (1..=4).contains(&jobs),
        "{jobs} jobs for {n} tasks: chunks of up to 64"
    );
    assert_eq!(timer.pending(), 0);
    held.run_all();
    let order = order.lock().unwrap().clone();
    assert_eq!(order, (1..=n).collect::<Vec<_>>(), "once each, by deadline");
    assert_eq!(timer.stats().fired, n as u64);
}

#[test]
fn every_task_of_a_stalled_chunk_counts_against_max_pending() {
    let (clock, held) = (ManualClock::new(), Arc::new(Held::default()));
    let n = 100; // more than a chunk: fewer are sent one by one
    let timer = timer_on(&held, &clock, Some(n));
    let ran = Arc::new(AtomicUsize::new(0));
    for k in 1..=n as u32 {
        let ran = ran.clone();
        timer
            .add_or_submit(Task::after(k * MS, move || {
                ran.fetch_add(1, SeqCst);
            }))
            .unwrap();
    }
    clock.advance(n as u32 * MS);
    assert_eq!((timer.pending(), held.len()), (0, 2), "two chunks, stalled");
    let refused = timer.add_or_submit(Task::after(MS, || {}));
    assert!(matches!(refused, Err(AddError::Full(_))), "{refused:?}");
    held.run_all();
    assert_eq!(ran.load(SeqCst), n);
    timer.add_or_submit(Task::after(MS, || {})).unwrap(); // room again
}

#[test]
fn a_chunk_the_executor_drops_hands_every_task_back_from_shutdown() {
    struct Drops;
    impl Executor for Drops {
        fn execute(&self, _job: Job) {}
    }
    let clock = ManualClock::new();
    let timer = Timer::builder()
        .clock(clock.clone())
        .executor(Arc::new(Drops))
        .build()
        .unwrap();
    for k in 1..=100 {
        timer.add_or_submit(Task::after(k * MS, || {})).unwrap();
    }
    clock.advance(100 * MS);
    let back = timer.shutdown();
    assert_eq!(back.len(), 100);
    assert_eq!(timer.stats().fired, 0);
}

#[test]
fn a_small_round_sends_each_task_as_it_is() {
    let (clock, held) = (ManualClock::new(), Arc::new(Held::default()));
    let timer = timer_on(&held, &clock, None);
    for k in 1..=64 {
        timer.add_or_submit(Task::after(k * MS, || {})).unwrap();
    }
    clock.advance(64 * MS);
    assert_eq!(held.len(), 64, "one job per task: no second hop");
    held.run_all();
    assert_eq!(timer.stats().fired, 64);
}

/// Item 2: a `CatchUp` task that is always behind (its period, 1 ns, is below the tick and its
/// run is slow) must not starve other due tasks: it takes turns of at most `BURST` runs, and a
/// one-shot task due meanwhile runs within one turn.
#[test]
fn a_task_that_is_always_behind_takes_turns_with_other_due_tasks() {
    let clock = ManualClock::new();
    let pool = Arc::new(RayonExecutor::new(1, "behind").unwrap());
    let timer = Timer::builder()
        .clock(clock.clone())
        .executor(pool.clone())
        .build()
        .unwrap();
    let log = Arc::new(Mutex::new(Vec::<char>::new()));
    let l = log.clone();
    let c = clock.clone();
    let hog = timer
        .add_or_submit(
            Task::every(Duration::from_nanos(1), move || {
                l.lock().unwrap().push('p');
                // A run longer than the period: the clock moves a tick during it.
                let _ = &c;
            })
            .misfire(MisfirePolicy::CatchUp),
        )
        .unwrap();
    let l = log.clone();
    timer
        .add_or_submit(Task::after(20 * MS, move || l.lock().unwrap().push('o')))
        .unwrap();
    clock.advance(SEC);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !log.lock().unwrap().contains(&'o') && Instant::now() < deadline {
        thread::sleep(MS);
    }
    let log = log.lock().unwrap().clone();
    let at = log
        .iter()
        .position(|&c| c == 'o')
        .expect("the one-shot task ran");
    assert!(
        at <= 2 * MisfirePolicy::BURST as usize,
        "the one-shot ran after {at} runs of the task that is behind"
    );
    let runs = log.iter().filter(|&&c| c == 'p').count();
    assert!(
        runs as u64 <= MisfirePolicy::MAX_CATCH_UP + 1,
        "a 1 ns period runs at the tick, and owes at most {} runs: ran {runs}",
        MisfirePolicy::MAX_CATCH_UP
    );
    assert!(hog.cancel());
    pool.wait_idle();
}
