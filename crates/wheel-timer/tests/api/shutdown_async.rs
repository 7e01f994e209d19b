//! Shutting down from async code and dropping with a limit (issue 46): `Timer::shutdown_async`
//! resolves once the running tasks have finished and never blocks the thread that polls it;
//! a dropped timer waits for running tasks at most `TimerBuilder::drop_wait`.

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::mpsc;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use tickwheel::{ManualClock, ShutdownOptions, Task, Timer};

use crate::support::{MS, SEC, counter, eventually, held, poll, pooled};

/// A timer on a manual clock with a pool of `threads`, running one task that blocks until the
/// returned sender sends (or is dropped); returns once the task has started.
fn blocked(threads: usize) -> (ManualClock, Timer, mpsc::Sender<()>) {
    let clock = ManualClock::new();
    let timer = pooled(&clock, threads);
    let (release, wait) = mpsc::channel::<()>();
    let (started, is_started) = mpsc::channel();
    timer
        .add_or_submit(Task::after(Duration::ZERO, move || {
            started.send(()).unwrap();
            let _ = wait.recv();
        }))
        .unwrap();
    is_started.recv().unwrap();
    (clock, timer, release)
}

#[test]
fn pending_while_a_task_runs_then_woken_and_ready_with_nothing_running() {
    let (_clock, timer, release) = blocked(2);
    timer
        .add_or_submit(Task::after(3600 * SEC, || {}).keyed("later"))
        .unwrap();
    let mut shutdown = timer.shutdown_async(ShutdownOptions::new());
    // Begun at the call: adds are refused before the future is polled.
    assert!(timer.add_or_submit(Task::after(MS, || {})).is_err());
    let (woken, waker) = counter();
    assert!(poll(&mut shutdown, &waker).is_pending());
    assert!(
        poll(&mut shutdown, &waker).is_pending(),
        "polling again waits too"
    );
    release.send(()).unwrap();
    // The end of the run wakes the future: no poll in a loop.
    assert!(eventually(|| woken.0.load(SeqCst) > 0));
    let report = match poll(&mut shutdown, &waker) {
        std::task::Poll::Ready(report) => report,
        std::task::Poll::Pending => panic!("woken, yet not ready"),
    };
    assert_eq!(report.still_running, 0);
    let keys: Vec<_> = report.tasks.iter().filter_map(|t| t.key()).collect();
    assert_eq!(keys, ["later"]);
    assert_eq!(timer.stats().returned, 1);
}

/// A current-thread runtime: another task makes progress (it releases the blocked timer task)
/// while the shutdown future is pending on the same, only, worker.
#[test]
fn a_current_thread_runtime_keeps_running_while_the_shutdown_waits() {
    let (_clock, timer, release) = blocked(1);
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        let polled = Arc::new(AtomicBool::new(false));
        let p = polled.clone();
        let shutdown = timer.shutdown_async(ShutdownOptions::new());
        let waiting = tokio::spawn(async move {
            p.store(true, SeqCst);
            shutdown.await
        });
        tokio::task::yield_now().await;
        assert!(polled.load(SeqCst), "the shutdown task ran first");
        assert!(!waiting.is_finished());
        // Progress on the worker the shutdown waits on.
        release.send(()).unwrap();
        let report = waiting.await.unwrap();
        assert_eq!(report.still_running, 0);
        assert!(report.tasks.is_empty());
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_thread_runtime_awaits_it_in_a_spawned_task() {
    let (_clock, timer, release) = blocked(2);
    let waiting = tokio::spawn(timer.shutdown_async(ShutdownOptions::new()));
    tokio::task::yield_now().await;
    assert!(!waiting.is_finished());
    release.send(()).unwrap();
    assert_eq!(waiting.await.unwrap().still_running, 0);
}

#[test]
fn a_plain_block_on_and_a_second_call_that_reports_nothing() {
    let (_clock, timer, release) = blocked(1);
    timer.add_or_submit(Task::after(SEC, || {})).unwrap();
    let first = timer.shutdown_async(ShutdownOptions::new());
    let second = futures::executor::block_on(timer.shutdown_async(ShutdownOptions::new()));
    assert!(second.tasks.is_empty() && second.still_running == 0);
    drop(release);
    let report = futures::executor::block_on(first);
    assert_eq!((report.tasks.len(), report.still_running), (1, 0));
}

#[test]
fn into_report_counts_the_tasks_still_running() {
    let (_clock, timer, release) = blocked(1);
    timer.add_or_submit(Task::after(SEC, || {})).unwrap();
    let shutdown = timer.shutdown_async(ShutdownOptions::new());
    let report = shutdown.into_report();
    assert_eq!((report.tasks.len(), report.still_running), (1, 1));
    release.send(()).unwrap();
    timer.wait_idle();
}

/// `run_due`: the due tasks run in one job on the timer's executor, not on the polling thread,
/// and the future resolves after it.
#[test]
fn run_due_runs_the_due_tasks_on_the_executor_then_resolves() {
    let (_clock, held, timer) = held();
    let ran = Arc::new(AtomicBool::new(false));
    let r = ran.clone();
    timer
        .add_or_submit(Task::after(Duration::ZERO, move || r.store(true, SeqCst)))
        .unwrap();
    timer
        .add_or_submit(Task::after(SEC, || {}).keyed("not due"))
        .unwrap();
    assert_eq!(held.len(), 1, "handed to the executor, not started");
    drop(held.take()); // the executor drops that job: the task stays due, claimed by shutdown
    let mut shutdown = timer.shutdown_async(ShutdownOptions::new().run_due(true));
    let (woken, waker) = counter();
    assert!(poll(&mut shutdown, &waker).is_pending());
    assert!(!ran.load(SeqCst), "not run on the polling thread");
    assert_eq!(held.len(), 1, "one job for the due tasks");
    held.run_all();
    assert!(ran.load(SeqCst));
    assert!(woken.0.load(SeqCst) > 0);
    let std::task::Poll::Ready(report) = poll(&mut shutdown, &waker) else {
        panic!("the due tasks' job ended, yet not ready");
    };
    assert_eq!(report.ran_due, 1);
    let keys: Vec<_> = report.tasks.iter().filter_map(|t| t.key()).collect();
    assert_eq!(keys, ["not due"]);
}

/// The job of the due tasks dropped unrun by the executor: they are handed back, not lost.
#[test]
fn run_due_tasks_whose_job_is_dropped_come_back() {
    let (_clock, held, timer) = held();
    timer
        .add_or_submit(Task::after(Duration::ZERO, || {}).keyed("due"))
        .unwrap();
    drop(held.take());
    let mut shutdown = timer.shutdown_async(ShutdownOptions::new().run_due(true));
    let (_, waker) = counter();
    assert!(poll(&mut shutdown, &waker).is_pending());
    drop(held.take());
    let std::task::Poll::Ready(report) = poll(&mut shutdown, &waker) else {
        panic!("the due tasks' job was dropped, yet not ready");
    };
    assert_eq!(report.ran_due, 0);
    assert_eq!(report.tasks[0].key(), Some("due"));
}

#[test]
#[should_panic(expected = "no clock to wait by")]
fn wait_at_most_is_refused() {
    let timer = crate::support::manual().1;
    drop(timer.shutdown_async(ShutdownOptions::new().wait_at_most(SEC)));
}

/// Awaited from inside one of the timer's own tasks, it does not wait for that task.
#[test]
fn from_inside_a_task_it_does_not_wait_for_itself() {
    let clock = ManualClock::new();
    let timer = Arc::new(pooled(&clock, 1));
    let cell: Arc<OnceLock<Arc<Timer>>> = Arc::new(OnceLock::new());
    let _ = cell.set(timer.clone());
    let (tx, rx) = mpsc::channel();
    let c = cell.clone();
    timer
        .add_or_submit(Task::after(Duration::ZERO, move || {
            let timer = c.get().unwrap();
            let report = futures::executor::block_on(timer.shutdown_async(ShutdownOptions::new()));
            tx.send(report.still_running).unwrap();
        }))
        .unwrap();
    assert_eq!(rx.recv().unwrap(), 0);
    assert!(timer.add_or_submit(Task::after(MS, || {})).is_err());
}

#[test]
fn the_future_is_send_and_unpin() {
    fn check<T: Send + Unpin>(_: &T) {}
    let timer = crate::support::manual().1;
    let shutdown = timer.shutdown_async(ShutdownOptions::new());
    check(&shutdown);
    drop(shutdown);
}

/// A dropped timer waits for a blocked task at most `drop_wait`, then returns; the task goes on,
/// and the `on_drop` hook still gets the tasks that never ran.
#[test]
fn a_drop_waits_at_most_its_limit() {
    let clock = ManualClock::new();
    let (hook_tx, hook_rx) = mpsc::channel();
    let timer = Timer::builder()
        .clock(clock.clone())
        .threads(1)
        .drop_wait(50 * MS)
        .on_drop(move |tasks| hook_tx.send(tasks.len()).unwrap())
        .build()
        .unwrap();
    let (release, wait) = mpsc::channel::<()>();
    let (started, is_started) = mpsc::channel();
    let (ended, has_ended) = mpsc::channel();
    timer
        .add_or_submit(Task::after(Duration::ZERO, move || {
            started.send(()).unwrap();
            let _ = wait.recv();
            ended.send(()).unwrap();
        }))
        .unwrap();
    timer.add_or_submit(Task::after(SEC, || {})).unwrap();
    is_started.recv().unwrap();
    let before = Instant::now();
    drop(timer);
    assert!(before.elapsed() >= 50 * MS, "not before the limit");
    assert_eq!(hook_rx.recv().unwrap(), 1);
    assert!(has_ended.try_recv().is_err(), "the task still runs");
    release.send(()).unwrap();
    has_ended.recv().unwrap();
}
