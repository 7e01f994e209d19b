//! An add takes no lock, even when its thread's free slots have run out and it takes back the
//! slots vacated on other threads: a thread stalled in the middle of freeing a slot must not hold
//! it up. (A review of the first lowest-first free list found that it listed those slots
//! under a lock whose holder could stall in an allocation: the owner's add then waited 2 s.)
//!
//! The stall is made deterministic: this test's global allocator spins for 2 s in the next
//! allocation of a thread that asks for it, and the freeing thread asks just before it frees.
//! Freeing allocates nothing today, so the stall may not happen at all; either way the add must
//! not wait for it.

#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use tickwheel::{InlineExecutor, Task, Timer, TimerHandle};

struct Stalling;

thread_local! {
    static STALL_NEXT_ALLOC: Cell<bool> = const { Cell::new(false) };
}
static STALLED: AtomicBool = AtomicBool::new(false);
const STALL: Duration = Duration::from_secs(2);

// SAFETY: forwards every call to `System` unchanged, after an optional busy wait.
unsafe impl GlobalAlloc for Stalling {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let stall = STALL_NEXT_ALLOC
            .try_with(|s| s.replace(false))
            .unwrap_or(false);
        if stall {
            STALLED.store(true, SeqCst);
            // A busy wait (no allocation): the thread is "descheduled" here.
            let t = Instant::now();
            while t.elapsed() < STALL {
                std::hint::spin_loop();
            }
        }
        // SAFETY: the caller's contract for `alloc` is passed on as it is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` above with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Stalling = Stalling;

#[test]
fn an_add_that_takes_back_slots_freed_elsewhere_does_not_wait_for_a_stalled_freer() {
    // The real clock: a task a day out takes the add path without a lock.
    let timer = Arc::new(
        Timer::builder()
            .executor(Arc::new(InlineExecutor::new()))
            .build()
            .unwrap(),
    );
    let far = || Task::after(Duration::from_secs(86_400), || {});
    // This thread (the owner) fills its slots; none is free on its side.
    let hs: Vec<TimerHandle> = (0..100)
        .map(|_| timer.add_or_submit(far()).unwrap())
        .collect();
    let (tx, rx) = mpsc::channel::<()>();
    let remote = thread::spawn(move || {
        for h in &hs {
            assert!(h.cancel());
        }
        let mut hs = hs.into_iter();
        let first = hs.next().unwrap();
        tx.send(()).unwrap();
        STALL_NEXT_ALLOC.with(|s| s.set(true));
        drop(first); // the last handle: the slot is vacated and listed for the owner
        STALL_NEXT_ALLOC.with(|s| s.set(false));
        drop(hs);
    });
    rx.recv().unwrap();
    let w = Instant::now();
    while !STALLED.load(SeqCst) && w.elapsed() < Duration::from_millis(500) {
        std::hint::spin_loop();
    }
    // The owner's free set is empty: this add takes back what was listed so far.
    let t = Instant::now();
    let h = timer.add_or_submit(far()).unwrap();
    let took = t.elapsed();
    remote.join().unwrap();
    assert!(h.cancel());
    assert!(
        took < STALL * 3 / 4,
        "the add waited {took:?} for a thread that was freeing a slot (stalled: {})",
        STALLED.load(SeqCst)
    );
    assert_eq!(timer.pending(), 0);
}
