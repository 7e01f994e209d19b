//! A counting global allocator: current and peak bytes, for the memory columns.
//!
//! The library only defines it; the `wheelbench` binary installs it with `#[global_allocator]`.
//! Counting costs two relaxed atomic operations per allocation, paid by every implementation alike.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

/// Wraps the system allocator and counts the bytes it holds out.
#[derive(Debug, Default)]
pub struct CountingAlloc;

impl CountingAlloc {
    #[inline]
    fn added(size: usize) {
        let now = CURRENT.fetch_add(size, Relaxed) + size;
        if now > PEAK.load(Relaxed) {
            PEAK.fetch_max(now, Relaxed);
        }
    }
}

// SAFETY: every method forwards to `System` with the caller's layout and pointer unchanged, so
// `System`'s guarantees carry over; the counters are only bookkeeping beside it.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as ours: `layout` has non-zero size, as the caller guarantees.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            Self::added(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as in `alloc`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            Self::added(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `System` (through us) with `layout`, as the caller guarantees.
        unsafe { System.dealloc(ptr, layout) };
        CURRENT.fetch_sub(layout.size(), Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr`/`layout` come from us, `new_size` is non-zero: the caller's guarantees.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            if new_size >= layout.size() {
                Self::added(new_size - layout.size());
            } else {
                CURRENT.fetch_sub(layout.size() - new_size, Relaxed);
            }
        }
        p
    }
}

/// Bytes currently allocated (0 if the counting allocator is not installed).
pub fn current() -> usize {
    CURRENT.load(Relaxed)
}

/// Highest `current()` since the last [`reset_peak`].
pub fn peak() -> usize {
    PEAK.load(Relaxed)
}

/// Starts a new peak measurement at the current level.
pub fn reset_peak() {
    PEAK.store(CURRENT.load(Relaxed), Relaxed);
}

/// True when the counting allocator is installed as the global allocator.
pub fn is_active() -> bool {
    let before = current();
    let probe = std::hint::black_box(vec![0u8; 4096]);
    let active = current() >= before + 4096;
    drop(probe);
    active
}

/// Bytes allocated and peak bytes (both above the level at the start) while running `f`.
pub fn measure<R>(f: impl FnOnce() -> R) -> (R, Usage) {
    let base = current();
    reset_peak();
    let r = f();
    let usage = Usage {
        retained: current().saturating_sub(base),
        peak: peak().saturating_sub(base),
    };
    (r, usage)
}

/// Memory used by one measured run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Bytes still allocated when the run returned (what its result holds).
    pub retained: usize,
    /// Highest number of bytes allocated at once during the run.
    pub peak: usize,
}

/// Settles the system allocator between workloads: on glibc, `malloc_trim(0)`, which merges the
/// small blocks freed so far and returns free memory to the system (elsewhere, nothing).
///
/// Without it a workload pays for the previous one's frees. glibc keeps freed small blocks in
/// "fast bins" and merges them all at once, holding the arena's lock, the first time a larger
/// request cannot be served from them; after W10's 6M task closures that took 0.6 s on
/// 2026-11-26, during W11's next run, and every thread that needed the allocator meanwhile
/// waited for it (a timer's tick thread included: W11's sleeps were late by up to 1.3 s; see
/// `docs/benchmarks.md`, W11). Merging them here, outside any measurement, makes each workload
/// start from the allocator state a fresh process would have, as far as the allocator goes.
pub fn settle() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` takes a byte count, touches only the allocator's own state under its
    // own locks, and may be called at any time from any thread.
    unsafe {
        libc::malloc_trim(0);
    }
}
