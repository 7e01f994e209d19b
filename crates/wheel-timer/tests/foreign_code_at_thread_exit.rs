//! Foreign code (an allocator, a clock) that adds to another timer in the middle of an add, while
//! the adding thread's locals are torn down: the thread must not give up the shard the outer add
//! is using, and neither add may be refused. (Found by an adversarial review on 2026-11-27: the
//! thread's cache of shards, half torn down, dropped the outer add's entry to make room for the
//! nested one, and the outer add went on in a shard it no longer owned, or was refused.)
#![allow(unsafe_code)] // a global allocator, to run code inside the timer's allocations

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tickwheel::{Clock, RealClock, Task, Timer, WeakTimer};

const LATER: Duration = Duration::from_secs(60);
const SOON: Duration = Duration::from_millis(5);

/// Where the foreign code adds to `c` from, inside the add to `a`.
#[derive(Clone, Copy, PartialEq)]
enum Nested {
    /// `a`'s clock, read by the add before it takes a slot.
    Clock,
    /// An allocation by the add (its shard makes its 65th slot).
    Allocation,
}

thread_local! {
    /// 0: nothing; 1: the next allocation on this thread adds to `a`; 2: inside that add.
    static STAGE: Cell<u8> = const { Cell::new(0) };
    static NESTED: Cell<Option<Nested>> = const { Cell::new(None) };
}

static A: Mutex<Option<WeakTimer>> = Mutex::new(None);
static C: Mutex<Option<WeakTimer>> = Mutex::new(None);
/// Each add's outcome: (which, accepted).
static ADDS: Mutex<Vec<(&'static str, Result<(), String>)>> = Mutex::new(Vec::new());

/// Adds a task due in `delay` to `timer`, recording the outcome.
fn add_to(timer: &Mutex<Option<WeakTimer>>, which: &'static str, delay: Duration) {
    let timer = timer.lock().unwrap().clone().expect("set by the test");
    let added = timer
        .add_or_submit(Task::after(delay, || {}))
        .map(drop)
        .map_err(|e| e.to_string());
    ADDS.lock().unwrap().push((which, added));
}

/// Adds to `c` if this thread is inside the add to `a` and `from` is where the case nests it.
fn nested_add(from: Nested) {
    if STAGE.with(Cell::get) == 2 && NESTED.with(Cell::get) == Some(from) {
        STAGE.with(|s| s.set(0));
        add_to(&C, "c, nested", LATER);
    }
}

struct Hook;

// SAFETY: every call is forwarded to `System` unchanged, after the hook.
unsafe impl GlobalAlloc for Hook {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if STAGE.with(Cell::get) == 1 {
            STAGE.with(|s| s.set(2));
            // Due soon: stamped at once, so the add reads `a`'s clock.
            add_to(&A, "a, outer", SOON);
            STAGE.with(|s| s.set(0));
        } else {
            nested_add(Nested::Allocation);
        }
        // SAFETY: the caller's contract for `alloc` is passed on as it is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Hook = Hook;

/// The real clock, with the nested add hooked in.
struct HookedClock(RealClock);

impl Clock for HookedClock {
    fn now(&self) -> u64 {
        nested_add(Nested::Clock);
        self.0.now()
    }

    fn instant_of(&self, t: u64) -> Option<Instant> {
        self.0.instant_of(t)
    }
}

/// A thread adds to `b`, then `first` tasks to `a` (so `a`'s entry is current and `b`'s is
/// aside). At its exit, its aside entries are torn down first; `b`'s gives its shard back to
/// `b`, an allocation, where the hook adds to `a` (through the current entry) and, from
/// `nested`, to `c` inside that add.
fn case(nested: Nested, first: usize) {
    ADDS.lock().unwrap().clear();
    let a = Timer::builder()
        .clock(HookedClock(RealClock::new()))
        .build()
        .unwrap();
    let b = Timer::new().unwrap();
    let c = Timer::new().unwrap();
    *A.lock().unwrap() = Some(a.downgrade());
    *C.lock().unwrap() = Some(c.downgrade());
    let (wa, wb) = (a.downgrade(), b.downgrade());
    std::thread::spawn(move || {
        wb.add_or_submit(Task::after(LATER, || {})).unwrap();
        for _ in 0..first {
            wa.add_or_submit(Task::after(LATER, || {})).unwrap();
        }
        NESTED.with(|n| n.set(Some(nested)));
        STAGE.with(|s| s.set(1));
    })
    .join()
    .unwrap();
    let adds = ADDS.lock().unwrap().clone();
    assert_eq!(
        adds.iter().map(|&(which, _)| which).collect::<Vec<_>>(),
        ["c, nested", "a, outer"],
        "the hooks ran as the case meant (else this test tests nothing)"
    );
    for (which, added) in &adds {
        assert_eq!(added, &Ok(()), "the add to {which} was refused");
    }
    let sa = a.stats();
    assert_eq!((sa.added, sa.rejected), (first as u64 + 1, 0), "{sa:?}");
    assert_eq!(c.pending(), 1);
}

#[test]
fn an_add_nested_in_another_during_thread_exit_leaves_the_outer_one_its_shard() {
    // One test, not two: the cases share the hooks' statics.
    case(Nested::Clock, 1);
    // 64 tasks fill the shard's first chunk of slots: the outer add's slot is a new chunk's.
    case(Nested::Allocation, 64);
}
