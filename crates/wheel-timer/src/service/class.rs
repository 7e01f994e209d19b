//! A class of tasks and its isolation: the settings ([`Isolation`]) and each class's record of
//! slow runs and of runs in progress, which decide whether its tasks go to the slow pool (the
//! routing itself is in `route.rs`).
//!
//! A task belongs to a *class*: the one it names ([`Task::class`](crate::Task::class)), else a
//! repeating task is a class of its own and unnamed one-shot tasks share the default class. With
//! [`Isolation`] on (the default), a class whose runs took longer than the threshold `strikes`
//! times within `window` is *isolated* until a whole window passes without a slow run. Run time
//! is measured on the timer's clock, so tests on a manual clock are exact.
//!
//! Strikes are counted when slow runs end, so the first ones of a class that blocks would hold
//! the timer's threads for their whole length. To keep that from stalling the pool, a named class
//! also skips the timer's pool *while one of its runs has been going longer than the threshold*:
//! that run is holding a thread now, and the next one would hold another. This costs the class a
//! lock per run, so the default class (unnamed one-shot tasks, the hot path) is judged by its
//! ended runs only, and a repeating task's own class needs no such rule (its runs never overlap).
//! Nor can a named class hold every thread of the timer's pool at once (its share, `route.rs`):
//! two of its runs starting together would otherwise take a 2-thread pool for their whole length
//! before either is over the threshold.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::*};
use std::time::Duration;

// Plain `std`/`parking_lot` even under loom, like the route words: see `route.rs`.
use parking_lot::Mutex;
use tickwheel_reaper::duration_to_ns;

/// When a class of tasks is moved to the slow pool: runs longer than `threshold`, `strikes`
/// times within `window`; it comes back once a whole window passes without a slow run. The
/// defaults are XXL-JOB's: 500 ms, 10 strikes, one minute; the slow pool has 2 threads, started
/// the first time it is needed.
///
/// A class is a [`Task::class`](crate::Task::class) name, a repeating task without one, or the
/// default class of unnamed one-shot tasks. Strikes count when slow runs end; until then a named
/// class also skips the timer's pool while one of its runs has been going longer than
/// `threshold`, and never runs on more than `threads - 1` of its threads at once (when the pool
/// says how many it has, [`Executor::threads`](crate::Executor::threads), and has 2 or more), so
/// its first slow runs cannot take every thread of the pool.
///
/// ```
/// use std::time::Duration;
/// use tickwheel::{Isolation, Timer};
///
/// let timer = Timer::builder()
///     .isolation(Isolation::new().threshold(Duration::from_millis(50)).strikes(3).window(Duration::from_secs(1)))
///     .build()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub struct Isolation {
    threshold: Duration,
    strikes: u32,
    window: Duration,
    slow_threads: usize,
}

impl Default for Isolation {
    fn default() -> Self {
        Isolation {
            threshold: Duration::from_millis(500),
            strikes: 10,
            window: Duration::from_secs(60),
            slow_threads: 2,
        }
    }
}

impl Isolation {
    /// The defaults (see the type's docs).
    pub fn new() -> Self {
        Self::default()
    }

    /// A run longer than this is slow. Default 500 ms.
    pub fn threshold(mut self, threshold: Duration) -> Self {
        self.threshold = threshold;
        self
    }

    /// Slow runs within a window that isolate a class (at least 1). Default 10.
    pub fn strikes(mut self, strikes: u32) -> Self {
        self.strikes = strikes.max(1);
        self
    }

    /// The window slow runs are counted in, and the time without a slow run after which an
    /// isolated class returns to the timer's pool. Default one minute.
    pub fn window(mut self, window: Duration) -> Self {
        self.window = window;
        self
    }

    /// Threads of the slow pool (at least 1). Default 2. They are started the first time a class
    /// is isolated, and are the timer's own (named `{name}-slow-exec-{i}`).
    pub fn slow_threads(mut self, threads: usize) -> Self {
        self.slow_threads = threads.max(1);
        self
    }
}

/// Called with a class's name when it is isolated (`true`) or returns to the timer's pool
/// (`false`): see [`TimerBuilder::on_isolation`](crate::TimerBuilder::on_isolation).
pub(crate) type IsolationHook = Arc<dyn Fn(&str, bool) + Send + Sync>;

/// Where a change of a class's isolation is told: the count in `Stats::isolations`, the
/// `tracing` event, and the user's hook.
///
/// A change is queued under the lock of the class that changed (so one class's changes queue in
/// the order they happened), and the hook is called after, outside every lock, by one thread at
/// a time, in queue order: so its calls never overtake each other, and a hook that calls the
/// timer (which may change a class again) only queues that change for the loop already running.
pub(crate) struct Notice {
    pub(crate) isolations: AtomicU64,
    hook: Option<IsolationHook>,
    queue: Mutex<VecDeque<(String, bool)>>,
    delivering: AtomicBool,
}

impl Notice {
    pub(crate) fn new(hook: Option<IsolationHook>) -> Self {
        Notice {
            isolations: AtomicU64::new(0),
            hook,
            queue: Mutex::new(VecDeque::new()),
            delivering: AtomicBool::new(false),
        }
    }

    /// The class `name` was isolated (`true`) or came back (`false`): counted, traced, and
    /// queued for the hook. Called under the class's lock; [`deliver`](Self::deliver) after it.
    fn changed(&self, name: &str, isolated: bool) {
        if isolated {
            self.isolations.fetch_add(1, Relaxed);
        }
        crate::service::trace::isolation(name, isolated);
        if self.hook.is_some() {
            self.queue.lock().push_back((name.to_owned(), isolated));
        }
    }

    /// Calls the hook with the queued changes, in order, unless another thread (or this one,
    /// further up its stack) is doing so: that one delivers them. The hook is the user's code:
    /// a panic in it is caught (and reported through `tracing`), never unwound into the timer.
    fn deliver(&self) {
        let Some(hook) = &self.hook else { return };
        while !self.delivering.swap(true, Acquire) {
            loop {
                let next = self.queue.lock().pop_front();
                let Some((name, isolated)) = next else { break };
                if let Err(message) = crate::service::panic::catch(|| hook(&name, isolated)) {
                    crate::service::trace::hook_panicked("on_isolation", &message);
                }
            }
            self.delivering.store(false, Release);
            // A change queued after the last pop and before the store above found the flag
            // set and left: look again.
            if self.queue.lock().is_empty() {
                return;
            }
        }
    }
}

/// A class's record of slow runs, and of its runs in progress.
pub(crate) struct Class {
    /// Clock times at which recent slow runs ended (at most `strikes` kept).
    slow: Mutex<VecDeque<u64>>,
    isolated: AtomicBool,
    /// Clock time the latest slow run ended.
    last_slow: AtomicU64,
    /// Runs in progress (only counted for named classes: see the module docs), read without the
    /// lock to skip it when there are none.
    busy: AtomicU32,
    /// The start times of the runs in progress (a few: at most one per thread running the
    /// class).
    running: Mutex<Vec<u64>>,
    /// Runs in progress on the timer's pool (named classes only): at most the class's share of
    /// it (see `route.rs`).
    in_pool: AtomicU32,
    /// Times it was isolated.
    isolations: AtomicU64,
}

impl Default for Class {
    fn default() -> Self {
        Class {
            slow: Mutex::new(VecDeque::new()),
            isolated: AtomicBool::new(false),
            last_slow: AtomicU64::new(0),
            busy: AtomicU32::new(0),
            running: Mutex::new(Vec::new()),
            in_pool: AtomicU32::new(0),
            isolations: AtomicU64::new(0),
        }
    }
}

impl Class {
    /// Records a run of `ran` ns that ended at clock time `end`; returns whether the class is
    /// isolated afterwards (and tells `notice` of a change).
    pub(crate) fn record(
        &self,
        name: &str,
        iso: &IsolationNs,
        ran: u64,
        end: u64,
        notice: &Notice,
    ) -> bool {
        if ran <= iso.threshold {
            return self.is_isolated(name, iso, end, notice);
        }
        self.last_slow.fetch_max(end, Relaxed);
        let mut slow = self.slow.lock();
        slow.push_back(end);
        while slow.len() > iso.strikes as usize {
            slow.pop_front();
        }
        let first = slow.front().copied().unwrap_or(end);
        if slow.len() >= iso.strikes as usize
            && end.saturating_sub(first) <= iso.window
            && !self.isolated.swap(true, Relaxed)
        {
            notice.changed(name, true);
            self.isolations.fetch_add(1, Relaxed);
            drop(slow);
            notice.deliver();
        }
        self.isolated.load(Relaxed)
    }

    /// Times the class was isolated.
    pub(crate) fn isolations(&self) -> u64 {
        self.isolations.load(Relaxed)
    }

    /// A run of the class starts at clock time `start`.
    pub(crate) fn begin(&self, start: u64) {
        let mut running = self.running.lock();
        running.push(start);
        self.busy.store(running.len() as u32, Relaxed);
    }

    /// The run that `begin(start)` counted has ended.
    pub(crate) fn end(&self, start: u64) {
        let mut running = self.running.lock();
        if let Some(i) = running.iter().position(|&s| s == start) {
            running.swap_remove(i);
        }
        self.busy.store(running.len() as u32, Relaxed);
    }

    /// Takes one of the class's `share` places on the timer's pool for a run about to start
    /// there; false if they are all taken (the run goes to the slow pool instead).
    pub(crate) fn enter_pool(&self, share: u32) -> bool {
        self.in_pool
            .fetch_update(Relaxed, Relaxed, |n| (n < share).then_some(n + 1))
            .is_ok()
    }

    /// Gives back the place `enter_pool` took.
    pub(crate) fn leave_pool(&self) {
        self.in_pool.fetch_sub(1, Relaxed);
    }

    /// True if all of the class's `share` places on the timer's pool are taken.
    pub(crate) fn pool_share_taken(&self, share: u32) -> bool {
        self.in_pool.load(Relaxed) >= share
    }

    /// Whether the class's next task goes to the slow pool at clock time `now()` (read only if
    /// the class is isolated or has runs in progress): it is isolated, or one of its runs has been
    /// going longer than the threshold.
    pub(crate) fn goes_slow(
        &self,
        name: &str,
        iso: &IsolationNs,
        now: impl FnOnce() -> u64,
        notice: &Notice,
    ) -> bool {
        if !self.isolated.load(Relaxed) && self.busy.load(Relaxed) == 0 {
            return false;
        }
        let now = now();
        self.is_isolated(name, iso, now, notice)
            || (self.running.lock().iter()).any(|&start| now.saturating_sub(start) > iso.threshold)
    }

    /// Whether the class is isolated at clock time `now`: it returns to the timer's pool once a
    /// whole window passed without a slow run (and `notice` is told).
    pub(crate) fn is_isolated(
        &self,
        name: &str,
        iso: &IsolationNs,
        now: u64,
        notice: &Notice,
    ) -> bool {
        if self.isolated_at(iso, now) || !self.isolated.load(Relaxed) {
            return self.isolated.load(Relaxed);
        }
        let mut slow = self.slow.lock();
        // Looked at again under the lock: a slow run that ended meanwhile keeps it isolated.
        if now.saturating_sub(self.last_slow.load(Relaxed)) < iso.window {
            return self.isolated.load(Relaxed);
        }
        slow.clear();
        if self.isolated.swap(false, Relaxed) {
            notice.changed(name, false);
            drop(slow);
            notice.deliver();
        }
        false
    }

    /// Whether the class is isolated at clock time `now`, changing nothing (for `Stats`: reading
    /// the figures tells the hook nothing; the change is made when the class's next task is
    /// routed).
    pub(crate) fn isolated_at(&self, iso: &IsolationNs, now: u64) -> bool {
        self.isolated.load(Relaxed) && now.saturating_sub(self.last_slow.load(Relaxed)) < iso.window
    }
}

/// [`Isolation`] in clock nanoseconds.
#[derive(Clone, Copy, Debug)]
pub(crate) struct IsolationNs {
    threshold: u64,
    strikes: u32,
    window: u64,
    pub(crate) slow_threads: usize,
}

impl From<Isolation> for IsolationNs {
    fn from(i: Isolation) -> Self {
        IsolationNs {
            threshold: duration_to_ns(i.threshold),
            strikes: i.strikes,
            window: duration_to_ns(i.window),
            slow_threads: i.slow_threads,
        }
    }
}
