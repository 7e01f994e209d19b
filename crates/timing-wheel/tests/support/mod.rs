//! Test support shared by this crate's integration tests: one seeded generator, so tests need no
//! dependency and replay exactly from their seed. (Each test file includes it with `mod support;`.)
#![allow(dead_code)]

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
