//! Long uptime: ten simulated years at a 1 ms tick, far timers (months, years) mixed with near
//! ones, the clock moved in irregular steps. Everything fires exactly once, at the first advance
//! that reaches its deadline: never early, never late.

use tickwheel_wheel::TimingWheel;

const MS_PER_DAY: u64 = 86_400_000;
const YEARS_10: u64 = 3_652 * MS_PER_DAY;

mod support;
use support::Rng;

#[test]
fn ten_years_of_timers_fire_exactly_once_on_time() {
    let mut rng = Rng::new(0xD1CE_5EED_2026_0001);
    // Start the clock somewhere unaligned, as a process that has been up a while.
    let start = 123_456_789_012;
    let mut wheel = TimingWheel::new(1, 64, start).unwrap();
    let mut deadlines: Vec<u64> = Vec::new();
    let mut fired_at: Vec<Option<u64>> = Vec::new();
    let mut cancelled = 0usize;
    let mut ids = Vec::new();
    let end = start + YEARS_10;

    while wheel.now() < end {
        let now = wheel.now();
        // A handful of new timers, from milliseconds to three years out.
        for _ in 0..rng.next() % 4 {
            let d = now + rng.log_uniform(3 * 365 * MS_PER_DAY);
            let id = wheel.insert(d, deadlines.len()).unwrap();
            ids.push(id);
            deadlines.push(d);
            fired_at.push(None);
        }
        if rng.next().is_multiple_of(16) && !ids.is_empty() {
            let id = ids[(rng.next() % ids.len() as u64) as usize];
            if let Some(i) = wheel.cancel(id) {
                fired_at[i] = Some(u64::MAX); // cancelled: must never fire
                cancelled += 1;
            }
        }
        // Irregular steps: the tick thread's pattern (to the next expiration), short hops, and
        // long stalls of up to a few days (a suspended machine).
        let to = match rng.next() % 8 {
            0..=3 => wheel.next_expiration().unwrap_or(now + 1),
            4..=5 => now + rng.log_uniform(1_000),
            6 => now + rng.log_uniform(MS_PER_DAY),
            _ => now + rng.log_uniform(4 * MS_PER_DAY),
        };
        let mut last = 0;
        wheel.advance(to, |i| {
            assert!(
                fired_at[i].is_none(),
                "timer {i} fired twice (or after cancel)"
            );
            assert!(
                deadlines[i] <= to,
                "timer {i} early: deadline {} at {to}",
                deadlines[i]
            );
            assert!(
                deadlines[i] > now,
                "timer {i} late: deadline {} was reached at {now}",
                deadlines[i]
            );
            assert!(deadlines[i] >= last, "out of order");
            last = deadlines[i];
            fired_at[i] = Some(to);
        });
    }
    // Let every remaining timer come due.
    let pending = wheel.len();
    while let Some(t) = wheel.next_expiration() {
        let before = wheel.now();
        wheel.advance(t, |i| {
            assert!(fired_at[i].is_none() && deadlines[i] <= t && deadlines[i] > before);
            fired_at[i] = Some(t);
        });
    }
    assert!(wheel.is_empty());
    println!(
        "{} timers over ten years: {cancelled} cancelled, {pending} still pending at the end",
        deadlines.len()
    );
    let fired = fired_at
        .iter()
        .filter(|f| matches!(f, Some(t) if *t != u64::MAX))
        .count();
    assert_eq!(
        fired + cancelled,
        deadlines.len(),
        "every timer fired or was cancelled"
    );
    assert!(
        deadlines.len() > 100_000,
        "the run covered {} timers",
        deadlines.len()
    );
    assert!(
        pending > 1_000,
        "far timers were still pending after ten years: {pending}"
    );
}
