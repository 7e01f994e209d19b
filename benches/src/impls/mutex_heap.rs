//! W6's baseline service: one `Mutex<BinaryHeap>` and one timer thread (`ScheduledThreadPoolExecutor`).
//!
//! The design of Java's `ScheduledThreadPoolExecutor` with one thread, written as well as we
//! would write our own:
//!
//! - a `parking_lot::Mutex` around a `BinaryHeap` of compact `(deadline, slot, generation)`
//!   records; the jobs live in a [`GenSlab`] (free list, generations), so a handle is a plain
//!   `Copy` id;
//! - cancel frees the slot (the generation moves on) and leaves the record in the heap: a stale
//!   record is skipped when it reaches the top, and the heap is compacted once stale records
//!   outnumber live ones (amortised O(1) per cancel, bounded memory);
//! - the clock is read before taking the lock; the timer thread sleeps on a `Condvar` until the
//!   earliest deadline, and an add notifies it only when it lands earlier than that;
//! - due jobs are collected under the lock and run on the timer thread after it is released
//!   (`java.util.Timer` style; one thread, so a slow job delays the others).
//!
//! ## Ground rules
//!
//! | field            | who changes it, under the lock | meaning |
//! |------------------|--------------------------------|---------|
//! | `slab` slot `i`  | `schedule`, `cancel`, the timer thread | occupied: pending; vacant: no job |
//! | slot `i`'s generation | whoever fills or vacates the slot (`GenSlab::insert`, `GenSlab::take`) | records with another generation are stale |
//! | `sleeping_until` | the timer thread; an adder clears it when it notifies | `Some(t)`: asleep until `t` ns (`u64::MAX`: until notified) |
//! | `closed`         | [`MutexHeapTimer::shutdown`]   | the thread exits at its next look |

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, MutexGuard};

use crate::impls::slab::GenSlab;

/// A job the baseline runs: a boxed closure, as our `Timer` stores it.
pub type Job = Box<dyn FnOnce() + Send>;

/// Stale records tolerated before a compaction, besides "as many as live ones".
const COMPACT_SLACK: usize = 4096;

/// Handle of a scheduled job, for [`MutexHeapTimer::cancel`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HeapTimerId {
    slot: u32,
    generation: u32,
}

struct State {
    heap: BinaryHeap<Reverse<(u64, u32, u32)>>,
    /// The pending jobs; its length is the number of live jobs.
    slab: GenSlab<Job>,
    sleeping_until: Option<u64>,
    closed: bool,
    wakeups: u64,
    fired: u64,
}

impl State {
    /// Drops stale records once they outnumber live ones (and the slack).
    fn maybe_compact(&mut self) {
        if self.heap.len() > 2 * self.slab.len() + COMPACT_SLACK {
            let slab = &self.slab;
            self.heap
                .retain(|&Reverse((_, slot, generation))| slab.is_live(slot, generation));
        }
    }
}

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
    origin: Instant,
}

impl Shared {
    fn ns_of(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.origin).as_nanos()).unwrap_or(u64::MAX)
    }

    fn run(&self) {
        let mut batch: Vec<Job> = Vec::new();
        let mut st = self.state.lock();
        while !st.closed {
            let now = self.ns_of(Instant::now());
            while let Some(&Reverse((deadline, slot, generation))) = st.heap.peek() {
                if deadline > now {
                    break;
                }
                st.heap.pop();
                if let Some(job) = st.slab.take(slot, generation) {
                    batch.push(job);
                }
            }
            if !batch.is_empty() {
                st.fired += batch.len() as u64;
                MutexGuard::unlocked(&mut st, || {
                    for job in batch.drain(..) {
                        // A panicking job must not kill the only timer thread.
                        let _ = catch_unwind(AssertUnwindSafe(job));
                    }
                });
                continue;
            }
            let next = st.heap.peek().map(|&Reverse((d, _, _))| d);
            st.sleeping_until = Some(next.unwrap_or(u64::MAX));
            match next.and_then(|d| self.origin.checked_add(Duration::from_nanos(d))) {
                Some(at) => {
                    self.wake.wait_until(&mut st, at);
                }
                None => self.wake.wait(&mut st),
            }
            st.sleeping_until = None;
            st.wakeups += 1;
        }
    }
}

/// A timer service on a mutex-protected binary heap with one timer thread. See the module docs.
///
/// ```
/// use std::time::Duration;
/// use wheel_benches::impls::mutex_heap::MutexHeapTimer;
///
/// let timer = MutexHeapTimer::new();
/// let id = timer.schedule(Duration::from_secs(30), Box::new(|| {}));
/// assert!(timer.cancel(id));
/// assert!(!timer.cancel(id));
/// assert!(timer.shutdown().is_empty());
/// ```
pub struct MutexHeapTimer {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for MutexHeapTimer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MutexHeapTimer")
            .field("len", &self.len())
            .finish_non_exhaustive()
    }
}

impl Default for MutexHeapTimer {
    fn default() -> Self {
        Self::new()
    }
}

impl MutexHeapTimer {
    /// Name the table rows use.
    pub const NAME: &'static str = "Mutex<BinaryHeap> + timer thread";

    /// Starts the timer thread (`heap-timer`).
    ///
    /// # Panics
    ///
    /// If the operating system refuses to start the thread.
    pub fn new() -> Self {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                heap: BinaryHeap::new(),
                slab: GenSlab::new(),
                sleeping_until: None,
                closed: false,
                wakeups: 0,
                fired: 0,
            }),
            wake: Condvar::new(),
            origin: Instant::now(),
        });
        let runner = shared.clone();
        let thread = thread::Builder::new()
            .name("heap-timer".to_owned())
            .spawn(move || runner.run())
            .expect("could not start the heap timer thread");
        MutexHeapTimer {
            shared,
            thread: Some(thread),
        }
    }

    /// Runs `job` once, `delay` from now (a huge delay saturates to the far future).
    pub fn schedule(&self, delay: Duration, job: Job) -> HeapTimerId {
        let at = Instant::now().checked_add(delay);
        let deadline = at.map_or(u64::MAX, |at| self.shared.ns_of(at));
        self.insert(deadline, job)
    }

    /// Runs `job` once at `at` (at once if it has passed).
    pub fn schedule_at(&self, at: Instant, job: Job) -> HeapTimerId {
        self.insert(self.shared.ns_of(at), job)
    }

    fn insert(&self, deadline: u64, job: Job) -> HeapTimerId {
        let mut guard = self.shared.state.lock();
        let st = &mut *guard;
        let (slot, generation) = st.slab.insert(job);
        st.heap.push(Reverse((deadline, slot, generation)));
        if st.sleeping_until.is_some_and(|until| deadline < until) {
            st.sleeping_until = None;
            self.shared.wake.notify_one();
        }
        HeapTimerId { slot, generation }
    }

    /// Cancels a pending job: `true` iff it had not run and was not cancelled before. The job is
    /// dropped at once (after the lock is released); its heap record is dropped lazily.
    pub fn cancel(&self, id: HeapTimerId) -> bool {
        let mut st = self.shared.state.lock();
        let job = st.slab.take(id.slot, id.generation);
        if job.is_some() {
            st.maybe_compact();
        }
        drop(st);
        job.is_some()
    }

    /// Jobs waiting.
    pub fn len(&self) -> usize {
        self.shared.state.lock().slab.len()
    }

    /// True when no job is waiting.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Jobs handed out so far.
    pub fn fired(&self) -> u64 {
        self.shared.state.lock().fired
    }

    /// Times the timer thread woke from sleep.
    pub fn wakeups(&self) -> u64 {
        self.shared.state.lock().wakeups
    }

    /// Heap records held, stale ones included.
    pub fn records(&self) -> usize {
        self.shared.state.lock().heap.len()
    }

    /// Stops the timer thread (after the jobs it is running) and returns the jobs that never ran.
    pub fn shutdown(mut self) -> Vec<Job> {
        self.close()
    }

    fn close(&mut self) -> Vec<Job> {
        {
            let mut st = self.shared.state.lock();
            st.closed = true;
            self.shared.wake.notify_all();
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let mut st = self.shared.state.lock();
        st.heap.clear();
        st.slab.take_all()
    }
}

impl Drop for MutexHeapTimer {
    fn drop(&mut self) {
        if self.thread.is_some() {
            self.close();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

    #[test]
    fn fires_everything_never_early_and_cancel_works() {
        let timer = MutexHeapTimer::new();
        let ran = Arc::new(AtomicUsize::new(0));
        let early = Arc::new(AtomicUsize::new(0));
        let cancelled_ran = Arc::new(AtomicUsize::new(0));
        let start = Instant::now();
        let mut to_cancel = Vec::new();
        for i in 0..200u64 {
            let at = start + Duration::from_millis(i % 40);
            let keep = i % 2 == 0;
            let (ran, early, bad) = (ran.clone(), early.clone(), cancelled_ran.clone());
            let id = timer.schedule_at(
                at,
                Box::new(move || {
                    if Instant::now() < at {
                        early.fetch_add(1, SeqCst);
                    }
                    if keep {
                        ran.fetch_add(1, SeqCst);
                    } else {
                        bad.fetch_add(1, SeqCst);
                    }
                }),
            );
            if !keep {
                to_cancel.push(id);
            }
        }
        // Deadlines from 40 ms on, so the cancels come first.
        for i in 0..50u64 {
            let id = timer.schedule(Duration::from_millis(40 + i), Box::new(|| {}));
            assert!(timer.cancel(id));
            assert!(!timer.cancel(id), "a second cancel must fail");
        }
        let mut ok = 0;
        for id in to_cancel {
            ok += usize::from(timer.cancel(id));
        }
        // Jobs due at 0 ms may have run before their cancel: those cancels fail.
        let give_up = Instant::now() + Duration::from_secs(10);
        while ran.load(SeqCst) + cancelled_ran.load(SeqCst) + ok < 200 && Instant::now() < give_up {
            thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(ran.load(SeqCst), 100, "every kept job runs");
        assert_eq!(ok + cancelled_ran.load(SeqCst), 100, "cancelled xor ran");
        assert_eq!(early.load(SeqCst), 0, "no job runs early");
        assert!(timer.is_empty());
        assert_eq!(timer.fired() as usize, 100 + cancelled_ran.load(SeqCst));
        assert!(timer.shutdown().is_empty());
    }

    #[test]
    fn stale_records_are_compacted_and_shutdown_returns_pending() {
        let timer = MutexHeapTimer::new();
        for _ in 0..3 * COMPACT_SLACK {
            let id = timer.schedule(Duration::from_secs(30), Box::new(|| {}));
            assert!(timer.cancel(id));
        }
        assert!(timer.records() <= COMPACT_SLACK + 1, "{}", timer.records());
        timer.schedule(Duration::from_secs(3600), Box::new(|| {}));
        timer.schedule(Duration::MAX, Box::new(|| {}));
        assert_eq!(timer.len(), 2);
        assert_eq!(timer.shutdown().len(), 2);
    }
}
