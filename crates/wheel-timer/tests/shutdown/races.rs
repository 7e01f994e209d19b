//! Exactly once and no deadlock around shutdown and re-arming: shutdown from inside tasks
//! (inline, one pool thread, nested), the last `Arc<Timer>` dropped by a job, a periodic task at
//! the end of time, a sub-tick period with `Skip`, and adds racing shutdown.
//! Deadlock tests wait on a channel with a generous bound, so a regression fails instead of
//! hanging CI.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::mpsc;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use parking_lot::Mutex;
use tickwheel::{ManualClock, MisfirePolicy, Task, Timer, TimerHandle};

use crate::support::{MS, SEC};

fn inline(clock: &ManualClock) -> Arc<Timer> {
    Arc::new(crate::support::inline(clock))
}

// shutdown() from a task must hand back the later tasks of the same batch.
#[test]
fn shutdown_from_a_task_returns_the_later_tasks_of_its_batch() {
    let clock = ManualClock::new();
    let timer = inline(&clock);
    let back = Arc::new(Mutex::new(None));
    let (t, b) = (timer.clone(), back.clone());
    timer
        .add_or_submit(Task::after(SEC, move || *b.lock() = Some(t.shutdown())))
        .unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    let h2 = timer
        .add_or_submit(Task::after(SEC + MS, move || {
            r.fetch_add(1, SeqCst);
        }))
        .unwrap();
    clock.advance(2 * SEC);
    let returned = back.lock().take().unwrap();
    let later = timer.shutdown();
    assert_eq!(
        ran.load(SeqCst) + returned.len() + later.len() + usize::from(h2.is_cancelled()),
        1,
        "task 2 neither ran, nor was cancelled, nor returned"
    );
}

// a periodic task that calls shutdown() must not count as returned when nobody gets it.
#[test]
fn a_periodic_task_that_shuts_its_timer_down_ends_and_is_counted_once() {
    let clock = ManualClock::new();
    let timer = inline(&clock);
    let back = Arc::new(Mutex::new(None));
    let (t, b) = (timer.clone(), back.clone());
    let h = timer
        .add_or_submit(Task::every(SEC, move || *b.lock() = Some(t.shutdown())))
        .unwrap();
    clock.advance(SEC);
    let returned = back.lock().take().unwrap();
    assert_eq!(timer.stats().returned as usize, returned.len());
    assert!(
        h.is_done(),
        "a periodic task that shut its own timer down has ended"
    );
}

// shutdown() from a task on a 1-thread pool must not wait for a job queued behind itself.
#[test]
fn shutdown_from_a_task_on_a_one_thread_pool_returns() {
    let clock = ManualClock::new();
    let timer = Arc::new(
        Timer::builder()
            .clock(clock.clone())
            .threads(1)
            .build()
            .unwrap(),
    );
    let (tx, rx) = mpsc::channel();
    let t = timer.clone();
    timer
        .add_or_submit(Task::after(SEC, move || {
            let _ = tx.send(t.shutdown().len());
        }))
        .unwrap();
    timer.add_or_submit(Task::after(SEC + MS, || {})).unwrap();
    clock.advance(2 * SEC);
    assert!(
        rx.recv_timeout(Duration::from_secs(60)).is_ok(),
        "shutdown() inside a task never returned"
    );
}

// a job that drops the last Arc<Timer> (outside the user's closure call) must not deadlock.
struct Probe(Option<Arc<Timer>>, mpsc::Sender<()>);
impl Drop for Probe {
    fn drop(&mut self) {
        drop(self.0.take()); // Timer::drop -> shutdown, on the pool thread
        let _ = self.1.send(());
    }
}

#[test]
fn dropping_the_last_timer_inside_a_job_returns() {
    let clock = ManualClock::new();
    let timer = Arc::new(
        Timer::builder()
            .clock(clock.clone())
            .threads(2)
            .build()
            .unwrap(),
    );
    let slot: Arc<OnceLock<TimerHandle>> = Arc::default();
    let (tx, rx) = mpsc::channel();
    let probe = Probe(Some(timer.clone()), tx);
    let s = slot.clone();
    let h = timer
        .add_or_submit(Task::every(SEC, move || {
            let _keep = &probe;
            s.get().unwrap().cancel(); // cancel ourselves while running
        }))
        .unwrap();
    slot.set(h).unwrap();
    drop(timer); // the task's closure holds the last Arc<Timer>
    clock.advance(SEC);
    assert!(
        rx.recv_timeout(Duration::from_secs(60)).is_ok(),
        "Timer::drop inside the job never returned"
    );
}

// a periodic task at the end of time runs once and ends, rather than spinning.
#[test]
fn a_periodic_task_ends_at_the_end_of_time() {
    let clock = ManualClock::new();
    let timer = inline(&clock);
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    let h = timer
        .add_or_submit(Task::every(SEC, move || {
            r.fetch_add(1, SeqCst);
        }))
        .unwrap();
    clock.advance(Duration::MAX); // returns once everything due ran (inline executor)
    assert_eq!(
        runs.load(SeqCst),
        1,
        "one run for the jump, then no next run fits in time"
    );
    assert!(h.is_done() && !h.cancel());
    assert!(timer.shutdown().is_empty());
}

// a period shorter than the tick with MisfirePolicy::Skip must still run (rounding to the
// tick is not a misfire).
#[test]
fn a_sub_tick_period_with_skip_still_runs() {
    let clock = ManualClock::new();
    let timer = inline(&clock);
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    timer
        .add_or_submit(
            Task::every(Duration::from_micros(100), move || {
                r.fetch_add(1, SeqCst);
            })
            .misfire(MisfirePolicy::Skip),
        )
        .unwrap();
    for _ in 0..10 {
        clock.advance(MS);
    }
    assert!(runs.load(SeqCst) > 0);
}

// a nested inline job calling shutdown must not wait for the jobs around it.
#[test]
fn shutdown_from_a_nested_inline_task_returns() {
    let clock = ManualClock::new();
    let timer = inline(&clock);
    let (tx, rx) = mpsc::channel();
    let t = timer.clone();
    let th = std::thread::spawn(move || {
        let t2 = t.clone();
        t.add_or_submit(Task::after(Duration::ZERO, move || {
            let t3 = t2.clone();
            t2.add_or_submit(Task::after(Duration::ZERO, move || {
                t3.shutdown();
            }))
            .unwrap();
        }))
        .unwrap();
        let _ = tx.send(());
    });
    let ok = rx.recv_timeout(Duration::from_secs(60)).is_ok();
    if ok {
        th.join().unwrap();
    }
    assert!(ok, "nested shutdown never returned");
}

// adds of due tasks racing shutdown: every accepted task runs or comes back.
#[test]
fn due_adds_racing_shutdown_run_or_come_back() {
    for round in 0..100 {
        let timer = Arc::new(Timer::builder().threads(1).build().unwrap());
        let ran = Arc::new(AtomicUsize::new(0));
        let (t, r) = (timer.clone(), ran.clone());
        let (started, go) = mpsc::channel();
        let adder = std::thread::spawn(move || {
            let mut ok = 0;
            loop {
                let r = r.clone();
                match t.add_or_submit(Task::after(Duration::ZERO, move || {
                    r.fetch_add(1, SeqCst);
                })) {
                    Ok(_) => ok += 1,
                    Err(_) => return ok,
                }
                if ok == 1 + round % 50 {
                    let _ = started.send(());
                }
            }
        });
        go.recv().unwrap();
        let back = timer.shutdown(); // waits for running jobs, claims queued ones
        let ok = adder.join().unwrap();
        let done = ran.load(SeqCst) + back.len();
        assert_eq!(
            done, ok,
            "round {round}: accepted {ok}, ran + returned {done}"
        );
    }
}

// An executor that loses jobs (say, a full queue that drops) cannot lose the tasks: they stay in
// transit and come back from shutdown.
#[test]
fn jobs_dropped_by_the_executor_come_back_from_shutdown() {
    struct Drops;
    impl tickwheel::Executor for Drops {
        fn execute(&self, _job: tickwheel::Job) {}
    }
    let clock = ManualClock::new();
    let timer = Timer::builder()
        .clock(clock.clone())
        .executor(Arc::new(Drops))
        .build()
        .unwrap();
    timer
        .add_or_submit(Task::after(Duration::ZERO, || {}))
        .unwrap();
    timer.add_or_submit(Task::after(SEC, || {})).unwrap();
    clock.advance(SEC);
    assert_eq!(timer.shutdown().len(), 2);
}

// `Task::at` reads instants against manual time zero, even for a clock moved before the build.
#[test]
fn task_at_on_a_manual_clock_moved_before_build() {
    let clock = ManualClock::new();
    clock.advance(10 * SEC);
    let timer = inline(&clock);
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    let at = std::time::Instant::now() + 5 * SEC;
    timer
        .add_or_submit(Task::at(at, move || {
            r.fetch_add(1, SeqCst);
        }))
        .unwrap();
    clock.advance(4 * SEC);
    assert_eq!(ran.load(SeqCst), 0);
    clock.advance(2 * SEC);
    assert_eq!(ran.load(SeqCst), 1);
}

// An executor whose `execute` panics must not end the tick thread (which would leave
// `ManualClock::advance` waiting for ever); the task it failed to take comes back from shutdown.
#[test]
fn an_executor_that_panics_does_not_stop_the_tick_thread() {
    struct PanicsOnce(std::sync::atomic::AtomicBool);
    impl tickwheel::Executor for PanicsOnce {
        fn execute(&self, job: tickwheel::Job) {
            if !self.0.swap(true, SeqCst) {
                panic!("executor refuses its first job");
            }
            job();
        }
    }
    let clock = ManualClock::new();
    let timer = Timer::builder()
        .clock(clock.clone())
        .executor(Arc::new(PanicsOnce(Default::default())))
        .build()
        .unwrap();
    let ran = Arc::new(Mutex::new(Vec::new()));
    for i in 1..=2u32 {
        let r = ran.clone();
        timer
            .add_or_submit(Task::after(i * SEC, move || r.lock().push(i)))
            .unwrap();
    }
    clock.advance(SEC); // the executor panics on task 1
    clock.advance(SEC); // the tick thread is still there: task 2 runs
    assert_eq!(*ran.lock(), [2]);
    let back = timer.shutdown();
    assert_eq!(
        back.len(),
        1,
        "task 1 was never taken by the executor: it comes back"
    );
    back.into_iter().for_each(Task::run);
    assert_eq!(*ran.lock(), [2, 1]);
}

// Shutdown hands tasks back earliest first: those already on their way to the executor before
// those still waiting in the wheel.
#[test]
fn shutdown_returns_tasks_earliest_first() {
    struct Drops;
    impl tickwheel::Executor for Drops {
        fn execute(&self, _job: tickwheel::Job) {}
    }
    let clock = ManualClock::new();
    let timer = Timer::builder()
        .clock(clock.clone())
        .executor(Arc::new(Drops))
        .build()
        .unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    for (label, delay) in [(3u32, 100 * SEC), (1, Duration::ZERO), (2, 50 * SEC)] {
        let o = order.clone();
        timer
            .add_or_submit(Task::after(delay, move || o.lock().push(label)))
            .unwrap();
    }
    timer.shutdown().into_iter().for_each(Task::run);
    assert_eq!(*order.lock(), [1, 2, 3]);
}
