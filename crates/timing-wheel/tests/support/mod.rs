//! Test support shared by this crate's integration tests: one seeded generator, so tests need no
//! dependency and replay exactly from their seed, and what the model tests know of an item.
//! (Each test file includes it with `mod support;`.)
#![allow(dead_code)]

use std::sync::Once;

/// xorshift64: small, fast, and good enough to spread deadlines.
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

    /// Uniform in `0..n` (0 when `n` is 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }

    /// One of `xs`, uniformly.
    pub(crate) fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize]
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Log-uniform in `[1, max]`: as many 1-10 ms timers as 1-10 month ones.
    pub(crate) fn log_uniform(&mut self, max: u64) -> u64 {
        let u = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        ((u * (max as f64).ln()).exp() as u64).clamp(1, max)
    }
}

/// The payload of a callback's deliberate panic.
pub(crate) struct Boom;

/// Keeps the deliberate panics out of the test output (other panics still print).
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

/// What a model knows of one pending item.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pending {
    pub(crate) deadline: u64,
    /// Rescheduled to a deadline already passed: due at the next advance, whatever its rounding.
    pub(crate) forced: bool,
    /// Held back by a panicking callback: pending under a new id, so its own id is stale.
    pub(crate) stale_id: bool,
}

/// Deadline rounded up to a multiple of the tick, saturating at `u64::MAX`.
pub(crate) fn rounded(deadline: u64, tick: u64) -> u64 {
    deadline.div_ceil(tick).saturating_mul(tick)
}
