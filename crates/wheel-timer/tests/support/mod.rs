//! Test support shared by this crate's integration tests: one seeded generator and one way to
//! build a timer on a manual clock. (Each test file includes it with `mod support;` and uses
//! what it needs.)
#![allow(dead_code)]

use std::sync::{Arc, Mutex, Once};
use std::time::Duration;

use tickwheel::{Executor, InlineExecutor, Job, ManualClock, Timer};

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
