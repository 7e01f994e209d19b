//! Test support shared by this crate's integration tests: one seeded generator and one way to
//! build a timer on a manual clock. (Each test binary includes it as `mod support` and uses
//! what it needs.)
#![allow(dead_code)]

use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex, Once};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use tickwheel::{Executor, InlineExecutor, Interval, Job, ManualClock, Timer};

pub(crate) const MS: Duration = Duration::from_millis(1);
pub(crate) const SEC: Duration = Duration::from_secs(1);
pub(crate) const DAY: Duration = Duration::from_secs(86_400);

/// A small deterministic generator (xorshift64), so tests need no dependency and replay exactly
/// from their seed.
#[derive(Clone, Debug)]
pub(crate) struct Rng(u64);

impl Rng {
    /// A generator for `seed` (any value; 0 is mapped to a fixed non-zero state).
    pub(crate) fn new(seed: u64) -> Self {
        Rng(if seed == 0 {
            0x9E37_79B9_7F4A_7C15
        } else {
            seed
        })
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Uniform in `0..n` (`n > 0`).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// Whole milliseconds, log-uniform in `[1 ms, max_ns]`, as nanoseconds.
    pub(crate) fn log_uniform_ms(&mut self, max_ns: u64) -> u64 {
        const MS: u64 = 1_000_000;
        let u = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        ((u * ((max_ns / MS) as f64).ln()).exp() as u64).max(1) * MS
    }
}

/// A timer on a fresh manual clock whose tasks run inline on the tick thread: "handed to the
/// executor" means "has run", so every assertion after a clock move is exact.
pub(crate) fn manual() -> (ManualClock, Timer) {
    let clock = ManualClock::new();
    let timer = inline(&clock);
    (clock, timer)
}

/// A timer on `clock` whose tasks run inline.
pub(crate) fn inline(clock: &ManualClock) -> Timer {
    Timer::builder()
        .clock(clock.clone())
        .executor(Arc::new(InlineExecutor::new()))
        .build()
        .expect("a valid configuration")
}

/// An executor that keeps every job until the test runs them ([`Held::run_all`]), oldest first.
#[derive(Default)]
pub(crate) struct Held(Mutex<Vec<Job>>);

impl Executor for Held {
    fn execute(&self, job: Job) {
        self.0.lock().unwrap().push(job);
    }
}

impl Held {
    /// Jobs held now.
    pub(crate) fn len(&self) -> usize {
        self.0.lock().unwrap().len()
    }

    /// Takes the jobs held now, oldest first, without running them.
    pub(crate) fn take(&self) -> Vec<Job> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }

    /// Runs the jobs held, oldest first, and the jobs those hand over, until none is left.
    pub(crate) fn run_all(&self) {
        loop {
            let jobs = self.take();
            if jobs.is_empty() {
                return;
            }
            jobs.into_iter().for_each(|job| job());
        }
    }
}

/// The payload of a test's deliberate panic.
pub(crate) struct Boom;

/// Keeps deliberate panics (payload [`Boom`]) out of the test output; other panics still print.
pub(crate) fn silence_boom() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !info.payload().is::<Boom>() {
                default(info);
            }
        }));
    });
}

/// A waker that counts its wake-ups.
#[derive(Default)]
pub(crate) struct Count(pub(crate) AtomicUsize);

impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, SeqCst);
    }
}

pub(crate) fn counter() -> (Arc<Count>, Waker) {
    let c = Arc::new(Count::default());
    (c.clone(), Waker::from(c))
}

pub(crate) fn poll<F: Future + Unpin>(f: &mut F, waker: &Waker) -> Poll<F::Output> {
    Pin::new(f).poll(&mut Context::from_waker(waker))
}

/// A hand-moved clock that says it follows real time, so the timer stamps long sleeps in
/// batches as it does on the real clock, while every reading stays known: a stamp from any
/// reading is the frozen time plus the delay. (Its instants are a year ahead, so the tick thread
/// never sleeps towards one; it waits for a move.)
#[derive(Clone)]
pub(crate) struct Batched {
    pub(crate) hand: ManualClock,
    pub(crate) origin: Instant,
}

impl tickwheel::Clock for Batched {
    fn now(&self) -> u64 {
        tickwheel::Clock::now(&self.hand)
    }

    fn instant_of(&self, t: u64) -> Option<Instant> {
        Some(self.origin + Duration::from_nanos(t))
    }

    fn attach(&self, driver: std::sync::Weak<dyn tickwheel::Driver>) {
        tickwheel::Clock::attach(&self.hand, driver);
    }
}

pub(crate) fn batched() -> (ManualClock, Timer) {
    let hand = ManualClock::new();
    hand.advance(5 * SEC); // so that a delay is never mistaken for a deadline
    let clock = Batched {
        hand: hand.clone(),
        origin: Instant::now() + Duration::from_secs(365 * 86_400),
    };
    let timer = Timer::builder()
        .clock(clock)
        .executor(Arc::new(InlineExecutor::new()))
        .build()
        .unwrap();
    (hand, timer)
}

/// One poll of `interval.tick()` (a fresh tick future each time: cancel-safety in action).
pub(crate) fn tick(interval: &mut Interval, waker: &Waker) -> Option<Instant> {
    match pin!(interval.tick()).poll(&mut Context::from_waker(waker)) {
        Poll::Ready(at) => Some(at),
        Poll::Pending => None,
    }
}

/// A timer on `clock` with a real rayon pool of `threads`.
pub(crate) fn pooled(clock: &ManualClock, threads: usize) -> Timer {
    Timer::builder()
        .clock(clock.clone())
        .threads(threads)
        .build()
        .unwrap()
}

/// A timer on a manual clock whose executor keeps every job until the test runs it.
pub(crate) fn held() -> (ManualClock, Arc<Held>, Timer) {
    let clock = ManualClock::new();
    let held = Arc::new(Held::default());
    let timer = Timer::builder()
        .clock(clock.clone())
        .executor(held.clone())
        .build()
        .unwrap();
    (clock, held, timer)
}

/// Readings of the manual clock at which something happened.
#[derive(Clone, Default)]
pub(crate) struct Log(Arc<Mutex<Vec<Duration>>>);

impl Log {
    pub(crate) fn push(&self, at: Duration) {
        self.0.lock().unwrap().push(at);
    }
    pub(crate) fn get(&self) -> Vec<Duration> {
        self.0.lock().unwrap().clone()
    }
}

/// Moves `clock` one step at a time up to `until`, letting every due task finish after each.
pub(crate) fn walk(clock: &ManualClock, timer: &Timer, step: Duration, until: Duration) {
    while clock.elapsed() < until {
        clock.advance(step);
        timer.wait_idle();
    }
}

/// Counts drops of what it is captured in.
pub(crate) struct DropCount(pub(crate) Arc<AtomicUsize>);

impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

/// True once `done()` is (polled every few milliseconds), false if 30 s pass first: for what
/// another thread does in its own time. Asserts "eventually", never how soon.
pub(crate) fn eventually(done: impl Fn() -> bool) -> bool {
    let until = Instant::now() + Duration::from_secs(30);
    while !done() {
        if Instant::now() > until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    true
}
