//! The tick thread of a sharded timing wheel: it sleeps until the earliest shard needs it (or
//! until a shard asks for an earlier look), collects what is due from every shard that is due,
//! merges it by deadline and hands it to a sink outside every lock. It never runs user code, and
//! while nothing is due it does not wake at all.
//!
//! A timer keeps one [`Shard`] per adding thread (each with its own wheel and lock, as Linux keeps
//! a timer base per CPU and Go a heap per P); this crate owns only the thread that drives them:
//! when to sleep, who may wake it, and in which order due items leave.
//!
//! ## Ground rules
//!
//! | field             | who writes it | meaning |
//! |-------------------|---------------|---------|
//! | `Shard::next_wake`| the shard (lowered by anyone with `fetch_min`; set, so possibly raised, in [`Shard::collect`], or by a shard's only producer while it holds the shard) | the clock time by which the tick thread must next collect this shard |
//! | `sleeping_until`  | the tick thread (0 while awake, else the time it sleeps until; `u64::MAX`: until woken); a waker sets 0 when it notifies | a shard that lowered its `next_wake` below this must wake the thread |
//! | `processed`       | the tick thread, under `state` | every item due by this time has been handed to the sink, and no shard has more due by it |
//! | `closed`          | [`Reaper::close`], under `state` | the thread exits at its next look; nothing is handed out after |
//! | `kicked`          | a manual clock move sets it, the tick thread clears it, under `state` | the clock moved: look again before sleeping |
//! | `alive`           | the tick thread, under `state` | the thread may still hand items out |
//!
//! **No lost wake-up.** A shard lowers `next_wake` and then, after a sequentially consistent
//! fence, reads `sleeping_until` ([`Reaper::wake_by`]); the tick thread stores `sleeping_until`
//! and then, after a fence, reads every shard's `next_wake` and the registry's version once more
//! before it waits. Of the two fences one comes first in their single total order, so one side
//! sees the other: either the tick thread sees the earlier time and does not sleep past it, or
//! the shard sees the thread asleep and notifies it under the state lock, which the thread holds
//! until it waits. (Fences, not sequentially consistent loads and stores, so that `loom` checks
//! the handshake: it models the fences exactly.)
//!
//! **Raising `next_wake`.** A collect may raise a shard's `next_wake` over a lowering it did not
//! see. After a round of collects the tick thread issues one [`barrier::heavy`] and calls
//! [`Shard::settle`] on each shard it collected, which looks for what arrived meanwhile; the
//! shard's add path pairs it with [`barrier::light`] (free where Linux's `membarrier` exists).
//!
//! ```
//! use std::sync::{Arc, Mutex, mpsc};
//! use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
//! use std::time::Duration;
//! use tickwheel_reaper::{Clock, Due, ManualClock, Reaper, Shard};
//! use tickwheel_wheel::TimingWheel;
//!
//! /// The smallest shard: one wheel behind a lock.
//! struct One {
//!     wheel: Mutex<TimingWheel<&'static str>>,
//!     next: AtomicU64,
//! }
//!
//! impl Shard for One {
//!     type Item = &'static str;
//!     fn next_wake(&self) -> u64 {
//!         self.next.load(SeqCst)
//!     }
//!     fn collect(&self, _clock: &dyn Clock, now: u64, due: &mut Vec<Due<&'static str>>) {
//!         let mut wheel = self.wheel.lock().unwrap();
//!         wheel.advance(now, |item| due.push(Due { deadline: now, item }));
//!         self.next.store(wheel.next_expiration().unwrap_or(u64::MAX), SeqCst);
//!     }
//! }
//!
//! let clock = ManualClock::new();
//! let reaper = Reaper::new(Arc::new(clock.clone()), 0);
//! let shard = Arc::new(One {
//!     wheel: Mutex::new(TimingWheel::new(1_000_000, 64, 0).unwrap()), // ns, 1 ms tick
//!     next: AtomicU64::new(u64::MAX),
//! });
//! reaper.register(shard.clone());
//! let (tx, rx) = mpsc::channel();
//! reaper
//!     .spawn("doc", move |batch: &mut Vec<Due<&str>>| {
//!         for due in batch.drain(..) {
//!             tx.send(due.item).unwrap();
//!         }
//!     })
//!     .unwrap();
//!
//! let t = {
//!     let mut wheel = shard.wheel.lock().unwrap();
//!     wheel.insert(5_000_000_000, "five seconds").unwrap();
//!     wheel.next_expiration().unwrap()
//! };
//! shard.next.fetch_min(t, SeqCst);
//! reaper.wake_by(t);
//! clock.advance(Duration::from_secs(4));
//! assert!(rx.try_recv().is_err());
//! clock.advance(Duration::from_secs(1));
//! assert_eq!(rx.try_recv(), Ok("five seconds")); // handed out before advance returned
//! reaper.close();
//! ```

pub mod barrier;
mod clock;
mod loom;
mod shard;

use std::io;
use std::sync::{Arc, Weak};

use crate::loom::atomic::{AtomicU64, AtomicUsize, Ordering::SeqCst, fence};
use crate::loom::thread::{self, JoinHandle, ThreadId};
use crate::loom::{Condvar, Mutex};

pub use clock::{Clock, Driver, ManualClock, RealClock, duration_to_ns};
pub use shard::{Due, Shard};

/// The tick thread and the registry of shards it drives.
pub struct Reaper<S: Shard> {
    shared: Arc<Shared<S>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

struct Shared<S: Shard> {
    state: Mutex<State>,
    /// See the ground rules: 0 while awake, else the clock time the thread sleeps until.
    sleeping_until: AtomicU64,
    /// Wakes the tick thread: an earlier shard, a manual clock move, or close.
    wake: Condvar,
    /// Signals a finished turn of the tick thread (for manual clock moves and `spawn`).
    turned: Condvar,
    clock: Arc<dyn Clock>,
    /// A shard that needs the thread within this many clock ns is collected in the same turn.
    early: u64,
    shards: Mutex<Vec<Arc<S>>>,
    /// Bumped (sequentially consistent) after every registration.
    version: AtomicUsize,
}

/// The tick thread's bookkeeping, behind one lock. See the crate's ground rules.
struct State {
    closed: bool,
    processed: u64,
    wakeups: u64,
    kicked: bool,
    alive: bool,
    thread: Option<ThreadId>,
}

impl<S: Shard> Reaper<S> {
    /// A tick thread for `clock` (nanoseconds), not started: shards can be registered and
    /// filled, nothing is handed out until [`spawn`](Self::spawn).
    ///
    /// A shard whose `next_wake` is at most `early` away when the thread looks is collected in
    /// the same turn rather than after another sleep (collecting early never hands anything out
    /// early: shards hand out only what is due by the clock's reading). A timer passes its tick:
    /// one wake-up then serves everything within the tick.
    pub fn new(clock: Arc<dyn Clock>, early: u64) -> Self {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                closed: false,
                processed: 0,
                wakeups: 0,
                kicked: false,
                alive: false,
                thread: None,
            }),
            sleeping_until: AtomicU64::new(0),
            wake: Condvar::new(),
            turned: Condvar::new(),
            clock,
            early,
            shards: Mutex::new(Vec::new()),
            version: AtomicUsize::new(0),
        });
        let driver: Arc<dyn Driver> = shared.clone();
        shared
            .clock
            .attach(Arc::downgrade(&driver) as Weak<dyn Driver>);
        Reaper {
            shared,
            thread: Mutex::new(None),
        }
    }

    /// Adds a shard to those the tick thread drives (for as long as the reaper lives).
    pub fn register(&self, shard: Arc<S>) {
        self.shared.shards.lock().push(shard);
        self.shared.version.fetch_add(1, SeqCst);
    }

    /// Starts the tick thread, named `{name}-tick`. `sink` receives each batch of due items on
    /// the tick thread, outside every lock, in deadline order across all shards; it should drain
    /// the batch (what it leaves is dropped) and must not block (hand the items to an executor).
    /// A panic in `sink` ends the tick thread. A second call is refused.
    pub fn spawn(
        &self,
        name: &str,
        sink: impl FnMut(&mut Vec<Due<S::Item>>) + Send + 'static,
    ) -> io::Result<()> {
        let mut slot = self.thread.lock();
        if slot.is_some() || self.shared.state.lock().closed {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                "the tick thread was already started",
            ));
        }
        let runner = self.shared.clone();
        let handle = thread::Builder::new()
            .name(format!("{name}-tick"))
            .spawn(move || runner.run(sink))?;
        // The thread records its id before its first look; wait for that so `on_tick_thread`
        // is exact from the start.
        let mut st = self.shared.state.lock();
        while st.thread.is_none() {
            self.shared.turned.wait(&mut st);
        }
        drop(st);
        *slot = Some(handle);
        Ok(())
    }
}

impl<S: Shard> Reaper<S> {
    /// Called by a shard after it lowered its `next_wake` to `t`: wakes the tick thread if it
    /// sleeps past `t`. Costs one atomic load when it does not.
    pub fn wake_by(&self, t: u64) {
        fence(SeqCst);
        if t < self.shared.sleeping_until.load(SeqCst) {
            let _st = self.shared.state.lock();
            self.shared.sleeping_until.store(0, SeqCst);
            self.shared.wake.notify_one();
        }
    }

    /// The clock the tick thread reads.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.shared.clock
    }

    /// How many times the tick thread woke from sleep: a due shard, a shard asking for an
    /// earlier look, a clock move. Zero while nothing is due and nobody asks.
    pub fn wakeups(&self) -> u64 {
        self.shared.state.lock().wakeups
    }

    /// True when called on the tick thread itself (for example from the sink or an inline task).
    pub fn on_tick_thread(&self) -> bool {
        self.shared.state.lock().thread == Some(thread::current().id())
    }

    /// Stops the tick thread: it hands out nothing after its current turn. Joins it, unless
    /// called on the tick thread itself (from the sink), which then exits after its turn.
    /// Idempotent. What the shards still hold stays there, for their owner to drain.
    pub fn close(&self) {
        {
            let mut st = self.shared.state.lock();
            st.closed = true;
            self.shared.sleeping_until.store(0, SeqCst);
            self.shared.wake.notify_all();
            self.shared.turned.notify_all();
        }
        if let Some(handle) = self.thread.lock().take()
            && handle.thread().id() != thread::current().id()
        {
            // The thread only exits; a panic there was the sink's and has been reported by it.
            let _ = handle.join();
        }
    }
}

impl<S: Shard> Drop for Reaper<S> {
    fn drop(&mut self) {
        self.close();
    }
}

impl<S: Shard> Shared<S> {
    fn run(&self, mut sink: impl FnMut(&mut Vec<Due<S::Item>>)) {
        // Declared first, dropped last: if the sink panics, the thread still marks itself gone
        // and wakes whoever waits for it (a manual clock move, close).
        let _exit = Exit(self);
        let mut batch = Vec::new();
        let mut shards: Vec<Arc<S>> = Vec::new();
        let mut collected: Vec<usize> = Vec::new();
        let mut seen = usize::MAX;
        let mut st = self.state.lock();
        st.thread = Some(thread::current().id());
        st.alive = true;
        self.turned.notify_all();
        while !st.closed {
            st.kicked = false;
            self.sleeping_until.store(0, SeqCst);
            drop(st);
            let now = self.clock.now();
            self.refresh(&mut shards, &mut seen);
            collected.clear();
            for (i, shard) in shards.iter().enumerate() {
                if shard.next_wake() <= now.saturating_add(self.early) {
                    shard.collect(self.clock.as_ref(), now, &mut batch);
                    collected.push(i);
                }
            }
            if !collected.is_empty() {
                // One process-wide barrier for the round, however many shards it collected.
                barrier::heavy();
                for &i in &collected {
                    shards[i].settle(now);
                }
            }
            if !batch.is_empty() {
                // Merge the shards' hand-outs: earlier deadlines first (equal ones in no
                // promised order). Unstable, because it sorts in place: a stable sort allocates
                // half the batch as scratch on every call, and a tick thread that fell behind
                // sorts batches of hundreds of thousands, each scratch fresh pages from the
                // kernel (W10's profile: a fifth of the tick thread in page faults and malloc).
                batch.sort_unstable_by_key(|d| d.deadline);
                sink(&mut batch);
                batch.clear(); // anything the sink left is dropped here, outside every lock
            }
            st = self.state.lock();
            if st.closed {
                continue;
            }
            let next = earliest(&shards);
            if due_by(next, now) {
                continue; // more is due by `now` (a turn of catch-up runs handed back): not done
            }
            st.processed = st.processed.max(now);
            self.turned.notify_all();
            if st.kicked || due_by(next, self.clock.now()) {
                continue; // the clock moved, or something came due while the batch was out
            }
            self.sleeping_until.store(next, SeqCst);
            // The other half of the wake-up handshake: a shard that lowered its time before
            // seeing `next` above is seen here (registrations included).
            fence(SeqCst);
            self.refresh(&mut shards, &mut seen);
            if earliest(&shards) < next {
                continue;
            }
            match self.clock.instant_of(next).filter(|_| next != u64::MAX) {
                Some(at) => {
                    self.wake.wait_until(&mut st, at);
                }
                None => self.wake.wait(&mut st),
            }
            st.wakeups += 1;
        }
        st.alive = false;
        self.turned.notify_all();
    }

    /// Takes a new snapshot of the registry if a shard was registered since the last one.
    fn refresh(&self, shards: &mut Vec<Arc<S>>, seen: &mut usize) {
        let version = self.version.load(SeqCst);
        if version != *seen {
            *shards = self.shards.lock().clone();
            *seen = version;
        }
    }
}

/// True if a shard that needs the thread by `next` needs it by `t`. `u64::MAX` is "never", even
/// when the clock itself has saturated there (the end of time: everything due was collected).
fn due_by(next: u64, t: u64) -> bool {
    next != u64::MAX && next <= t
}

/// The earliest `next_wake` of `shards` (`u64::MAX` if none needs the thread).
fn earliest<S: Shard>(shards: &[Arc<S>]) -> u64 {
    shards
        .iter()
        .map(|s| s.next_wake())
        .min()
        .unwrap_or(u64::MAX)
}

/// Marks the tick thread as gone when `run` ends, by returning or by a panic in the sink.
struct Exit<'a, S: Shard>(&'a Shared<S>);

impl<S: Shard> Drop for Exit<'_, S> {
    fn drop(&mut self) {
        self.0.state.lock().alive = false;
        self.0.turned.notify_all();
    }
}

impl<S: Shard> Driver for Shared<S> {
    fn catch_up(&self, now: u64) {
        let mut st = self.state.lock();
        if st.thread == Some(thread::current().id()) {
            return; // a task on the tick thread moved the clock: the thread looks after it returns
        }
        st.kicked = true;
        self.sleeping_until.store(0, SeqCst);
        self.wake.notify_all();
        // Closing does not end the wait while the thread is still handing a batch out (a task in
        // it may be the one closing): the caller is promised everything due has been handed out.
        while st.alive && (st.processed < now || st.closed) {
            self.turned.wait(&mut st);
        }
    }
}
