//! The futures at shutdown: pending futures are woken before shutdown waits for running tasks, a
//! task waiting on a future does not deadlock the timer's drop, a panicking waker woken by a
//! refused reset is counted, and a deadline passed before shutdown completes as elapsed. (From
//! the adversarial review of the futures against their spec, 2026-11-27: each failed on the code
//! it ran against. The same review's instants before the clock began are in `edges.rs`.)

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::task::{Poll, Wake, Waker};
use std::time::{Duration, Instant};

use tickwheel::{InlineExecutor, ManualClock, Task, TimeoutError, Timer};

use crate::support::{DAY, MS, SEC, counter, manual, poll};

/// A waker that notes when it was first woken and sends on a channel each time.
struct Signal {
    at: Mutex<Option<Instant>>,
    tx: Mutex<mpsc::Sender<()>>,
}

impl Wake for Signal {
    fn wake(self: Arc<Self>) {
        self.at.lock().unwrap().get_or_insert_with(Instant::now);
        let _ = self.tx.lock().unwrap().send(());
    }
}

fn signal() -> (Arc<Signal>, mpsc::Receiver<()>) {
    let (tx, rx) = mpsc::channel();
    let s = Arc::new(Signal {
        at: Mutex::new(None),
        tx: Mutex::new(tx),
    });
    (s, rx)
}

/// Item 1: shutdown wakes pending futures at once, not after the tasks still running (here one
/// of 2 s) have ended.
#[test]
fn shutdown_wakes_pending_futures_before_waiting_for_running_tasks() {
    let clock = ManualClock::new();
    let timer = Timer::builder().clock(clock).build().unwrap(); // a pool
    let (sig, _rx) = signal();
    let mut sleep = timer.sleep(3600 * SEC);
    assert!(poll(&mut sleep, &Waker::from(sig.clone())).is_pending());
    let (started_tx, started_rx) = mpsc::channel();
    timer
        .add_or_submit(Task::after(Duration::ZERO, move || {
            started_tx.send(()).unwrap();
            std::thread::sleep(Duration::from_secs(2));
        }))
        .unwrap();
    started_rx.recv_timeout(Duration::from_secs(30)).unwrap();
    let began = Instant::now();
    drop(timer.shutdown());
    assert!(sleep.is_shutdown());
    let woken = sig.at.lock().unwrap().expect("the sleep's waker was woken");
    // The task ran for 2 s after shutdown began; the waker must not have waited for it.
    assert!(
        woken.saturating_duration_since(began) < Duration::from_secs(1),
        "woken {:?} after shutdown began",
        woken - began
    );
}

/// Item 1, the consequence: a running task that waits for what an awaiting future does (here,
/// for the wake-up of a pending sleep) used to hold a drop of the timer until it gave up.
#[test]
fn a_task_waiting_on_a_future_does_not_deadlock_the_timers_drop() {
    let timer = Timer::builder().clock(ManualClock::new()).build().unwrap(); // a pool
    let (sig, woken_rx) = signal();
    let mut sleep = timer.sleep(3600 * SEC);
    assert!(poll(&mut sleep, &Waker::from(sig)).is_pending());
    let (started_tx, started_rx) = mpsc::channel();
    let (result_tx, result_rx) = mpsc::channel();
    timer
        .add_or_submit(Task::after(Duration::ZERO, move || {
            started_tx.send(()).unwrap();
            // Gives up after a minute so that a regression fails instead of hanging.
            let woken = woken_rx.recv_timeout(Duration::from_secs(60)).is_ok();
            result_tx.send(woken).unwrap();
        }))
        .unwrap();
    started_rx.recv_timeout(Duration::from_secs(30)).unwrap();
    drop(timer); // a drop shuts the timer down
    assert!(
        result_rx.recv().unwrap(),
        "the task was never told: the sleep's waker waited for the task"
    );
    assert!(sleep.is_shutdown());
}

struct Boomer(AtomicUsize);

impl Wake for Boomer {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, SeqCst);
        std::panic::panic_any(crate::support::Boom);
    }
}

/// Holds the tick thread in its `wake` until released.
struct Hold {
    entered: Mutex<mpsc::Sender<()>>,
    release: Mutex<mpsc::Receiver<()>>,
}

impl Wake for Hold {
    fn wake(self: Arc<Self>) {
        let _ = self.entered.lock().unwrap().send(());
        let _ = self
            .release
            .lock()
            .unwrap()
            .recv_timeout(Duration::from_secs(30));
    }
}

/// Item 3: a reset that cannot move its arming (shutdown has begun) and whose new arming is
/// refused wakes the waker it kept; a panicking one is counted, not unwound out of `reset`.
/// The window is held open by the tick thread, busy in another sleep's waker, which shutdown
/// joins before it drains the shards.
#[test]
fn a_panicking_waker_woken_by_a_refused_reset_is_counted_not_unwound() {
    crate::support::silence_boom();
    let (clock, timer) = manual();
    let timer = Arc::new(timer);
    let boomer = Arc::new(Boomer(AtomicUsize::new(0)));
    let mut victim = Box::pin(timer.sleep(10 * SEC));
    assert!(poll(&mut victim, &Waker::from(boomer.clone())).is_pending());
    let (entered_tx, entered_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel();
    let hold = Arc::new(Hold {
        entered: Mutex::new(entered_tx),
        release: Mutex::new(release_rx),
    });
    let mut held = timer.sleep(SEC);
    assert!(poll(&mut held, &Waker::from(hold)).is_pending());
    let c = clock.clone();
    let mover = std::thread::spawn(move || c.advance(SEC));
    entered_rx.recv_timeout(Duration::from_secs(30)).unwrap(); // the tick thread is held
    let t = timer.clone();
    let shut = std::thread::spawn(move || drop(t.shutdown()));
    while !timer.sleep(DAY).is_shutdown() {
        std::thread::sleep(MS); // until shutdown has begun: a new sleep is refused
    }
    let reset = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        victim.as_mut().reset(timer.now() + 20 * SEC)
    }));
    release_tx.send(()).unwrap();
    shut.join().unwrap();
    mover.join().unwrap();
    assert!(reset.is_ok(), "a waker's panic unwound out of Sleep::reset");
    assert!(victim.is_shutdown());
    assert_eq!(boomer.0.load(SeqCst), 1, "woken once");
    assert_eq!(timer.stats().panicked, 1, "its panic counted");
}

/// Item 4: a future whose deadline the timer's clock passed before shutdown began, not yet
/// handed out (the tick thread was busy in a task on the inline executor), is elapsed, not
/// shut down; it counts as fired.
#[test]
fn a_deadline_passed_before_shutdown_completes_as_elapsed() {
    let timer = Arc::new(
        Timer::builder()
            .executor(Arc::new(InlineExecutor::new()))
            .build()
            .unwrap(),
    );
    let t0 = timer.now();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let (in_tx, in_rx) = mpsc::channel::<()>();
    timer
        .add_or_submit(Task::after(10 * MS, move || {
            in_tx.send(()).unwrap();
            let _ = release_rx.recv_timeout(Duration::from_secs(30));
        }))
        .unwrap();
    let (_, waker) = counter();
    let mut sleep = timer.sleep_until(t0 + 30 * MS);
    let mut timeout = Box::pin(timer.timeout_at(t0 + 30 * MS, std::future::pending::<()>()));
    let mut later = timer.sleep_until(t0 + DAY);
    assert!(poll(&mut sleep, &waker).is_pending());
    assert!(poll(&mut timeout, &waker).is_pending());
    assert!(poll(&mut later, &waker).is_pending());
    in_rx.recv_timeout(Duration::from_secs(30)).unwrap(); // the tick thread is in the task
    while timer.now() < t0 + 30 * MS {
        std::thread::sleep(MS);
    }
    let t = timer.clone();
    let shut = std::thread::spawn(move || drop(t.shutdown()));
    // Released once shutdown has begun, so that the tick thread cannot hand them out first.
    while !timer.sleep(DAY).is_shutdown() {
        std::thread::sleep(MS);
    }
    release_tx.send(()).unwrap();
    shut.join().unwrap();
    assert!(poll(&mut sleep, &waker).is_ready());
    assert_eq!((sleep.is_elapsed(), sleep.is_shutdown()), (true, false));
    assert_eq!(
        poll(&mut timeout, &waker),
        Poll::Ready(Err(TimeoutError::Elapsed))
    );
    assert!(poll(&mut later, &waker).is_ready());
    assert_eq!((later.is_elapsed(), later.is_shutdown()), (false, true));
    let s = timer.stats();
    // The task, the sleep and the timeout fired; the far sleep was returned.
    assert_eq!((s.fired, s.returned, s.pending), (3, 1, 0), "{s:?}");
}
