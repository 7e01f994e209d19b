//! The tick thread of a timing wheel: it sleeps until the earliest bucket is due (or until an add
//! lands earlier), advances the wheel to the clock's now, and hands the due items to a sink
//! outside the lock. It never runs user code, and with nothing due it does not wake at all.
//!
//! ## Ground rules
//!
//! | state field       | who changes it                      | meaning |
//! |-------------------|-------------------------------------|---------|
//! | `wheel`           | anyone holding the lock             | the pending items |
//! | `sleeping_until`  | the tick thread (adders clear it when they wake it) | `Some(t)`: asleep until wheel time `t` (`u64::MAX`: until woken); `None`: awake, and will look at the wheel before sleeping again |
//! | `processed`       | the tick thread                     | every item due by this time has been handed to the sink |
//! | `closed`          | [`Reaper::close`]                   | the thread exits at its next look; no item is handed out after |
//! | `kicked`          | a manual clock move sets it, the tick thread clears it | the clock moved while the thread was awake: look again before sleeping |
//! | `alive`           | the tick thread, at the start and end of its loop | the thread may still hand items out |
//!
//! An adder that makes the wheel's next expiration earlier than `sleeping_until` notifies the
//! thread under the same lock, so no wake-up is lost; an adder that does not, does not disturb it.
//!
//! ```
//! use std::sync::Arc;
//! use std::sync::mpsc;
//! use std::time::Duration;
//! use reaper::{ManualClock, Reaper};
//! use timing_wheel::TimingWheel;
//!
//! let clock = ManualClock::new();
//! let (tx, rx) = mpsc::channel();
//! let wheel = TimingWheel::new(1_000_000, 64, 0).unwrap(); // ns, 1 ms tick
//! let reaper = Reaper::start(wheel, Arc::new(clock.clone()), "doc", move |batch: &mut Vec<&str>| {
//!     for item in batch.drain(..) {
//!         tx.send(item).unwrap();
//!     }
//! })
//! .unwrap();
//! reaper.lock().insert(5_000_000_000, "five seconds").unwrap();
//! clock.advance(Duration::from_secs(4));
//! assert!(rx.try_recv().is_err());
//! clock.advance(Duration::from_secs(1));
//! assert_eq!(rx.try_recv(), Ok("five seconds")); // handed out before advance returned
//! assert!(reaper.close().is_empty());
//! ```

mod clock;
pub mod sync;

use std::io;
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Weak};

use crate::sync::thread::{self, JoinHandle, ThreadId};
use crate::sync::{Condvar, Mutex, MutexGuard};
use timing_wheel::{TimerId, TimingWheel};

pub use clock::{Clock, Driver, ManualClock, RealClock, duration_to_ns};

/// The tick thread and the lock-protected wheel it drives.
pub struct Reaper<T> {
    shared: Arc<Shared<T>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

struct Shared<T> {
    state: Mutex<State<T>>,
    /// Wakes the tick thread: an earlier add, a manual clock move, or close.
    wake: Condvar,
    /// Signals a finished turn of the tick thread (for manual clock moves).
    turned: Condvar,
    clock: Arc<dyn Clock>,
}

/// The wheel and the tick thread's bookkeeping, behind one lock. See the crate's ground rules.
pub struct State<T> {
    wheel: TimingWheel<T>,
    closed: bool,
    sleeping_until: Option<u64>,
    processed: u64,
    wakeups: u64,
    /// Set by a manual clock move: look at the clock again before sleeping.
    kicked: bool,
    /// The tick thread is in its loop (it may be handing a batch out, even after `closed`).
    alive: bool,
    thread: Option<ThreadId>,
}

impl<T> State<T> {
    /// The wheel (read-only; changes go through the guard so the tick thread is woken).
    pub fn wheel(&self) -> &TimingWheel<T> {
        &self.wheel
    }

    /// True once [`Reaper::close`] has begun.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// How many times the tick thread woke from sleep (timeouts, adds landing earlier, clock
    /// moves). Zero while nothing is due and nothing earlier is added.
    pub fn wakeups(&self) -> u64 {
        self.wakeups
    }

    /// True when called on the tick thread itself (for example from a sink or an inline task).
    pub fn on_tick_thread(&self) -> bool {
        self.thread == Some(thread::current().id())
    }
}

/// The lock on the wheel. Inserting or rescheduling through it wakes the tick thread when the
/// wheel's next expiration moves earlier than the time it sleeps until.
pub struct Guard<'a, T> {
    state: MutexGuard<'a, State<T>>,
    shared: &'a Shared<T>,
}

impl<T> Guard<'_, T> {
    /// [`TimingWheel::insert`], waking the tick thread if needed.
    pub fn insert(&mut self, deadline: u64, item: T) -> Result<TimerId, T> {
        let id = self.state.wheel.insert(deadline, item)?;
        self.wake_if_earlier();
        Ok(id)
    }

    /// [`TimingWheel::get_mut`].
    pub fn get_mut(&mut self, id: TimerId) -> Option<&mut T> {
        self.state.wheel.get_mut(id)
    }

    /// [`TimingWheel::cancel`].
    pub fn cancel(&mut self, id: TimerId) -> Option<T> {
        self.state.wheel.cancel(id)
    }

    /// [`TimingWheel::reschedule`], waking the tick thread if needed.
    pub fn reschedule(&mut self, id: TimerId, deadline: u64) -> bool {
        let done = self.state.wheel.reschedule(id, deadline);
        if done {
            self.wake_if_earlier();
        }
        done
    }

    /// The clock's current reading (not the wheel's last advance).
    pub fn clock_now(&self) -> u64 {
        self.shared.clock.now()
    }

    fn wake_if_earlier(&mut self) {
        if let Some(until) = self.state.sleeping_until
            && self
                .state
                .wheel
                .next_expiration()
                .is_some_and(|t| t < until)
        {
            self.state.sleeping_until = None;
            self.shared.wake.notify_one();
        }
    }
}

impl<T> Deref for Guard<'_, T> {
    type Target = State<T>;
    fn deref(&self) -> &State<T> {
        &self.state
    }
}

impl<T> DerefMut for Guard<'_, T> {
    fn deref_mut(&mut self) -> &mut State<T> {
        &mut self.state
    }
}

impl<T: Send + 'static> Reaper<T> {
    /// Wraps `wheel`, whose time unit must be the clock's (nanoseconds). No thread runs until
    /// [`spawn`](Self::spawn); until then items can be inserted but nothing is handed out.
    pub fn new(wheel: TimingWheel<T>, clock: Arc<dyn Clock>) -> Self {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                wheel,
                closed: false,
                sleeping_until: None,
                processed: 0,
                wakeups: 0,
                kicked: false,
                alive: false,
                thread: None,
            }),
            wake: Condvar::new(),
            turned: Condvar::new(),
            clock,
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

    /// Starts the tick thread, named `{name}-tick`. `sink` receives each batch of due items, on
    /// the tick thread, outside the lock, in deadline order; it should drain the batch (what it
    /// leaves is dropped) and must not block (hand the items to an executor), nor panic: a panic
    /// ends the tick thread. A second call is refused.
    pub fn spawn(
        &self,
        name: &str,
        sink: impl FnMut(&mut Vec<T>) + Send + 'static,
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

    /// [`new`](Self::new) and [`spawn`](Self::spawn) in one.
    pub fn start(
        wheel: TimingWheel<T>,
        clock: Arc<dyn Clock>,
        name: &str,
        sink: impl FnMut(&mut Vec<T>) + Send + 'static,
    ) -> io::Result<Self> {
        let reaper = Self::new(wheel, clock);
        reaper.spawn(name, sink)?;
        Ok(reaper)
    }
}

impl<T> Reaper<T> {
    /// Locks the wheel.
    pub fn lock(&self) -> Guard<'_, T> {
        Guard {
            state: self.shared.state.lock(),
            shared: &self.shared,
        }
    }

    /// The clock the tick thread reads.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.shared.clock
    }

    /// Stops the tick thread and returns every item still in the wheel, earliest first.
    /// Idempotent: later calls return nothing. Safe to call from the sink's thread (the tick
    /// thread), which then is not joined but exits after its current turn.
    pub fn close(&self) -> Vec<T> {
        let items = {
            let mut st = self.shared.state.lock();
            st.closed = true;
            st.sleeping_until = None;
            self.shared.wake.notify_all();
            self.shared.turned.notify_all();
            st.wheel.drain()
        };
        if let Some(handle) = self.thread.lock().take()
            && handle.thread().id() != thread::current().id()
        {
            // The thread only exits; a panic there would be a bug in this crate, not user code.
            let _ = handle.join();
        }
        items
    }
}

impl<T> Drop for Reaper<T> {
    fn drop(&mut self) {
        self.close();
    }
}

impl<T> Shared<T> {
    fn run(&self, mut sink: impl FnMut(&mut Vec<T>)) {
        // Declared before the state guard, so dropped after it: if the sink panics, the thread
        // still marks itself gone and wakes whoever waits for it (a manual clock move, close).
        let _exit = Exit(self);
        let mut batch = Vec::new();
        let mut st = self.state.lock();
        st.thread = Some(thread::current().id());
        st.alive = true;
        self.turned.notify_all();
        while !st.closed {
            let now = self.clock.now();
            st.wheel.advance(now, |item| batch.push(item));
            if !batch.is_empty() {
                sync::unlocked(&mut st, || {
                    sink(&mut batch);
                    batch.clear(); // anything the sink left is dropped here, outside the lock
                });
                if st.closed {
                    break;
                }
            }
            st.processed = st.processed.max(now);
            self.turned.notify_all();
            let next = st.wheel.next_expiration();
            if st.kicked || next.is_some_and(|t| t <= self.clock.now()) {
                // The clock was moved by hand, or something came due while the batch was out.
                st.kicked = false;
                continue;
            }
            st.sleeping_until = Some(next.unwrap_or(u64::MAX));
            match next.and_then(|t| self.clock.instant_of(t)) {
                Some(at) => {
                    self.wake.wait_until(&mut st, at);
                }
                None => self.wake.wait(&mut st),
            }
            st.sleeping_until = None;
            st.wakeups += 1;
        }
        st.alive = false;
        self.turned.notify_all();
    }
}

/// Marks the tick thread as gone when `run` ends, by returning or by a panic in the sink.
struct Exit<'a, T>(&'a Shared<T>);

impl<T> Drop for Exit<'_, T> {
    fn drop(&mut self) {
        self.0.state.lock().alive = false;
        self.0.turned.notify_all();
    }
}

impl<T: Send> Driver for Shared<T> {
    fn catch_up(&self, now: u64) {
        let mut st = self.state.lock();
        if st.thread == Some(thread::current().id()) {
            return; // a task on the tick thread moved the clock: the thread looks after it returns
        }
        st.sleeping_until = None;
        st.kicked = true;
        self.wake.notify_all();
        // Closing does not end the wait while the thread is still handing a batch out (a task in
        // it may be the one closing): the caller is promised everything due has been handed out.
        while st.alive && (st.processed < now || st.closed) {
            self.turned.wait(&mut st);
        }
    }
}
