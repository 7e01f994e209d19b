//! The main job until `wheelbench` replaces it: 6 million timers with delays spread log-uniformly
//! from 1 ms to 24 h go into one wheel (tick = 1 ms, 64 buckets per level); virtual time then runs
//! to the end, the way the reaper drives it (sleep until `next_expiration`, advance to it).
//!
//! `cargo run --release -p tickwheel-wheel --example demo [-- N]`

use std::time::Instant;

use tickwheel_wheel::TimingWheel;

const DAY_MS: u64 = 24 * 60 * 60 * 1000;

fn main() {
    let n: usize = match std::env::args().nth(1).map(|a| a.parse()) {
        None => 6_000_000,
        Some(Ok(n)) => n,
        Some(Err(e)) => {
            eprintln!("usage: demo [N]  (N: number of timers): {e}");
            std::process::exit(2);
        }
    };
    let deadlines = log_uniform_deadlines(n, 1, DAY_MS, 0x9E37_79B9_7F4A_7C15);

    let mut wheel = TimingWheel::new(1, 64, 0).expect("valid configuration");
    let started = Instant::now();
    for (i, &d) in deadlines.iter().enumerate() {
        // The payload is the timer's index, checked against its deadline when it fires.
        if wheel.insert(d, i as u32).is_err() {
            unreachable!("every deadline is at least 1 ms ahead");
        }
    }
    let inserted = started.elapsed();

    let mut fired = 0usize;
    let mut late = 0usize;
    let mut early = 0usize;
    let mut steps = 0usize;
    while let Some(t) = wheel.next_expiration() {
        steps += 1;
        wheel.advance(t, |i| {
            let d = deadlines[i as usize];
            fired += 1;
            early += usize::from(t < d);
            late += usize::from(t > d);
        });
    }
    let total = started.elapsed();

    let ns = |d: std::time::Duration| d.as_nanos() as f64 / n as f64;
    println!("timers:   {n} (delays log-uniform 1 ms .. 24 h, tick 1 ms, 64 buckets per level)");
    println!("fired:    {fired} in {steps} advances; early: {early}; late: {late}");
    println!(
        "insert:   {:>8.1} ms  {:>6.1} ns/timer",
        inserted.as_secs_f64() * 1e3,
        ns(inserted)
    );
    println!(
        "fire:     {:>8.1} ms  {:>6.1} ns/timer",
        (total - inserted).as_secs_f64() * 1e3,
        ns(total - inserted)
    );
    println!(
        "total:    {:>8.1} ms  {:>6.1} ns/timer",
        total.as_secs_f64() * 1e3,
        ns(total)
    );
    if fired != n || early != 0 || late != 0 {
        eprintln!("error: expected {n} on-time fires");
        std::process::exit(1);
    }
}

/// `n` deadlines log-uniform in `[lo, hi]`, from a fixed-seed xorshift generator.
fn log_uniform_deadlines(n: usize, lo: u64, hi: u64, mut seed: u64) -> Vec<u64> {
    let (ln_lo, ln_hi) = ((lo as f64).ln(), (hi as f64).ln());
    (0..n)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let u = (seed >> 11) as f64 / (1u64 << 53) as f64;
            ((ln_lo + u * (ln_hi - ln_lo)).exp() as u64).clamp(lo, hi)
        })
        .collect()
}
