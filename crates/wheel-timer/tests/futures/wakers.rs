//! Hostile wakers and resets against where the futures keep their wakers (`slots/waker.rs`): a waker
//! whose `clone` shuts the timer down, moves the clock or takes the shard's lock, and a reset of
//! a sleep someone is waiting on while its task is being handed out. Found by an adversarial
//! review on 2026-11-27; each failed (a hang, or a lost wake-up) before the fix.
#![allow(unsafe_code)] // a hand-made waker whose clone is hostile: `Wake` cannot hook `clone`

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::task::{RawWaker, RawWakerVTable, Waker};
use std::time::Duration;

use tickwheel::Sleep;

use crate::support::{DAY, MS, SEC, counter, manual, poll};

/// A waker that counts wake-ups and runs `on_clone` each time it is cloned.
struct Hostile {
    wakes: AtomicUsize,
    on_clone: Box<dyn Fn() + Send + Sync>,
}

fn hostile(on_clone: impl Fn() + Send + Sync + 'static) -> (Arc<Hostile>, Waker) {
    // Every `RawWaker` here holds one strong count of an `Arc<Hostile>`, made by `into_raw` (or
    // counted up by `clone`), and gives it back exactly once (`wake` or `drop_it`).
    static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, wake, wake_by_ref, drop_it);
    unsafe fn clone(p: *const ()) -> RawWaker {
        // SAFETY: `p` came from `Arc::into_raw` and its count is at least the caller's.
        unsafe { Arc::increment_strong_count(p as *const Hostile) };
        // SAFETY: the count just taken keeps the `Hostile` alive.
        let h = unsafe { &*(p as *const Hostile) };
        (h.on_clone)();
        RawWaker::new(p, &VTABLE)
    }
    unsafe fn wake(p: *const ()) {
        // SAFETY: the waker owns one count: used, then given back.
        unsafe { wake_by_ref(p) };
        // SAFETY: as above.
        unsafe { drop_it(p) };
    }
    unsafe fn wake_by_ref(p: *const ()) {
        // SAFETY: the waker's count keeps the `Hostile` alive.
        unsafe { &*(p as *const Hostile) }
            .wakes
            .fetch_add(1, SeqCst);
    }
    unsafe fn drop_it(p: *const ()) {
        // SAFETY: gives back the count this waker owns.
        drop(unsafe { Arc::from_raw(p as *const Hostile) });
    }
    let h = Arc::new(Hostile {
        wakes: AtomicUsize::new(0),
        on_clone: Box::new(on_clone),
    });
    let raw = RawWaker::new(Arc::into_raw(h.clone()) as *const (), &VTABLE);
    // SAFETY: `raw` follows `VTABLE`'s contract (see above), and everything is `Send + Sync`.
    (h, unsafe { Waker::from_raw(raw) })
}

/// Runs `f` on a thread; fails if it does not finish within 10 s (a deadlock).
fn finishes(what: &str, f: impl FnOnce() + Send + 'static) {
    let (done, finished) = mpsc::channel();
    std::thread::spawn(move || {
        f();
        let _ = done.send(());
    });
    assert!(
        finished.recv_timeout(Duration::from_secs(10)).is_ok(),
        "deadlock: {what}"
    );
}

/// A polled sleep B is reset (by whoever else holds it) while its task is due, handed out but
/// not yet fired, or while it still waits: the reset cannot move a due task, so it re-arms, and
/// the waker B's last poll left must go to the new arming. B's waiter is woken by the new
/// deadline, once, without polling again. (It was dropped unwoken: nobody woke B.)
#[test]
fn a_reset_while_the_sleep_is_due_keeps_its_waiter() {
    for b_in_batch in [false, true] {
        let (clock, timer) = manual();
        let timer = Arc::new(timer);
        // B fires with A (same batch) or after it.
        let b_at = if b_in_batch { 2 * SEC } else { 5 * SEC };
        let b = Arc::new(Mutex::new(timer.sleep(b_at)));
        let (b_wakes, b_waker) = counter();
        assert!(poll(&mut *b.lock().unwrap(), &b_waker).is_pending());
        let mut a = timer.sleep(SEC);
        let b_was_elapsed = Arc::new(AtomicBool::new(true));
        // A's waker resets B (someone holding B behind a lock, e.g. an idle timer).
        let a_waker = Arc::new(Reset {
            b: b.clone(),
            timer: timer.clone(),
            seen: b_was_elapsed.clone(),
        });
        assert!(poll(&mut a, &Waker::from(a_waker)).is_pending());
        clock.advance(2 * SEC); // A fires; its waker resets B to now + 10 s
        assert!(
            !b_was_elapsed.load(SeqCst),
            "B had not fired when A's waker reset it"
        );
        clock.advance(10 * SEC);
        assert!(b.lock().unwrap().is_elapsed(), "B's new arming fired");
        assert_eq!(
            b_wakes.0.load(SeqCst),
            1,
            "B completed but its waker was never woken (B due at the reset: {b_in_batch})"
        );
    }

    struct Reset {
        b: Arc<Mutex<Sleep>>,
        timer: Arc<tickwheel::Timer>,
        seen: Arc<AtomicBool>,
    }
    impl std::task::Wake for Reset {
        fn wake(self: Arc<Self>) {
            let mut b = self.b.lock().unwrap();
            self.seen.store(b.is_elapsed(), SeqCst);
            Pin::new(&mut *b).reset(self.timer.now() + 10 * SEC);
        }
    }
}

/// A waker whose `clone` shuts the timer down: shutdown's drain takes the cell's lock, so the
/// clone must not run under it (it did: a hang on one thread).
#[test]
fn a_waker_clone_that_shuts_the_timer_down() {
    finishes("clone -> shutdown", || {
        let (_clock, timer) = manual();
        let timer = Arc::new(timer);
        let t = timer.clone();
        let (wakes, waker) = hostile(move || drop(t.shutdown()));
        let mut sleep = timer.sleep(SEC);
        let _ = poll(&mut sleep, &waker);
        assert!(sleep.is_shutdown());
        let _ = wakes;
    });
}

/// A waker whose `clone` moves the manual clock past the sleep's deadline: `advance` waits for
/// the tick thread, whose fire takes the cell's lock (it hung while the clone held it).
#[test]
fn a_waker_clone_that_moves_the_clock() {
    finishes("clone -> advance", || {
        let (clock, timer) = manual();
        let c = clock.clone();
        let (_wakes, waker) = hostile(move || c.advance(SEC));
        let mut sleep = timer.sleep(SEC);
        let _ = poll(&mut sleep, &waker);
        assert!(sleep.is_elapsed());
    });
}

/// Shutdown's drain takes a cell's lock under the shard lock. A poll on another thread whose
/// waker's clone cancels another sleep of the same shard (a cancel of a sleep in the wheel takes
/// the shard lock) must not hold the cell meanwhile: both threads hung, a lock-order inversion.
/// (Real time: it asserts only that both finish, within 15 s.)
#[test]
fn shutdown_and_a_poll_whose_clone_cancels_a_sleep_of_the_same_shard() {
    let (clock, timer) = manual();
    let timer = Arc::new(timer);
    let (in_clone, cloning) = mpsc::channel::<()>();
    let (sleeps_tx, sleeps_rx) = mpsc::channel::<()>();
    let other: Arc<Mutex<Vec<Sleep>>> = Arc::new(Mutex::new(Vec::new()));
    let (t, o, c) = (timer.clone(), other.clone(), clock.clone());
    let poller = move || {
        let mut sleep = t.sleep(10 * SEC);
        // Same shard (this thread's); not young, so in the wheel. Many, so that some have a
        // higher slot than `sleep` (drained after it) even in a shard reused from a dead timer.
        o.lock()
            .unwrap()
            .extend((0..256).map(|_| t.sleep(100 * MS)));
        c.advance(MS); // both filed in the wheel: WAITING
        sleeps_tx.send(()).unwrap();
        let first = AtomicBool::new(true);
        let (o2, t2) = (o.clone(), t.clone());
        let (_w, waker) = hostile(move || {
            if first.swap(false, SeqCst) {
                in_clone.send(()).unwrap();
                // Wait until shutdown has begun (a new sleep is refused), then give it time
                // to reach the drain, which takes this shard's lock and waits for our cell.
                while !t2.sleep(DAY).is_shutdown() {
                    std::thread::sleep(Duration::from_millis(10));
                }
                std::thread::sleep(Duration::from_secs(1));
                o2.lock().unwrap().clear(); // cancels of WAITING sleeps: the shard lock
            }
        });
        let _ = poll(&mut sleep, &waker);
    };
    let (done, finished) = mpsc::channel();
    let d = done.clone();
    std::thread::spawn(move || {
        poller();
        let _ = d.send("poller");
    });
    sleeps_rx.recv().unwrap();
    cloning.recv().unwrap();
    let t = timer.clone();
    std::thread::spawn(move || {
        drop(t.shutdown());
        let _ = done.send("shutdown");
    });
    for _ in 0..2 {
        let who = finished.recv_timeout(Duration::from_secs(15));
        assert!(who.is_ok(), "deadlock: poll's clone vs shutdown's drain");
    }
}

/// Control: the same poll/clone/cancel with no shutdown finishes.
#[test]
fn control_a_clone_that_cancels_a_sleep_of_the_same_shard() {
    finishes("control", || {
        let (clock, timer) = manual();
        let mut sleep = timer.sleep(10 * SEC);
        let other = Arc::new(Mutex::new(Some(timer.sleep(100 * MS))));
        clock.advance(MS);
        let o = other.clone();
        let (_w, waker) = hostile(move || drop(o.lock().unwrap().take()));
        assert!(poll(&mut sleep, &waker).is_pending());
        clock.advance(10 * SEC);
        assert!(poll(&mut sleep, &waker).is_ready());
    });
}
