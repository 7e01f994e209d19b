//! Long uptime through the whole service on the manual clock: ten simulated years with timers of
//! every length from a millisecond to three years, periodic tasks, and the clock moved in
//! irregular steps. No panic, no drift, everything on time.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::time::Duration;

use parking_lot::Mutex;
use tickwheel::{MisfirePolicy, Task};

const MS: u64 = 1_000_000; // ns
const HOUR: u64 = 3_600_000 * MS;
const DAY: u64 = 24 * HOUR;
const YEARS_10: u64 = 3_652 * DAY;

use crate::support::Rng;

#[test]
fn ten_years_through_the_service() {
    let (clock, timer) = crate::support::manual();
    let mut rng = Rng::new(0x0DD_BA11_2026_1122);

    // Clock time before the current advance: a task is on time if it runs at the first advance
    // that reaches its deadline, i.e. `before < deadline <= now`.
    let before = Arc::new(AtomicU64::new(0));
    let late_or_early: Arc<Mutex<Vec<String>>> = Arc::default();
    let ran = Arc::new(AtomicUsize::new(0));
    let mut added = 0usize;

    // No drift: an hourly catch-up task runs exactly once per hour of the ten years.
    let hourly = Arc::new(AtomicUsize::new(0));
    let h = hourly.clone();
    timer
        .add_or_submit(
            Task::every(Duration::from_nanos(HOUR), move || {
                h.fetch_add(1, SeqCst);
            })
            .misfire(MisfirePolicy::CatchUp),
        )
        .unwrap();

    while (clock.elapsed().as_nanos() as u64) < YEARS_10 {
        let now = clock.elapsed().as_nanos() as u64;
        for _ in 0..rng.next() % 4 {
            let delay = rng.log_uniform_ms(3 * 365 * DAY);
            let deadline = now + delay;
            let (b, bad, r, c) = (
                before.clone(),
                late_or_early.clone(),
                ran.clone(),
                clock.clone(),
            );
            timer
                .add_or_submit(Task::after(Duration::from_nanos(delay), move || {
                    let at = c.elapsed().as_nanos() as u64;
                    let prev = b.load(SeqCst);
                    if !(prev < deadline && deadline <= at) {
                        bad.lock().push(format!(
                            "deadline {deadline} ran at {at}, previous advance {prev}"
                        ));
                    }
                    r.fetch_add(1, SeqCst);
                }))
                .unwrap();
            added += 1;
        }
        let step = match rng.next() % 4 {
            0 => rng.log_uniform_ms(1_000 * MS),
            1 | 2 => rng.log_uniform_ms(DAY),
            _ => rng.log_uniform_ms(5 * DAY),
        };
        before.store(now, SeqCst);
        clock.advance(Duration::from_nanos(step));
    }
    let end = clock.elapsed().as_nanos() as u64;
    let pending = timer.pending();
    // Then let every remaining timer come due.
    before.store(end, SeqCst);
    let mut t = end;
    while timer.pending() > 1 {
        before.store(t, SeqCst);
        clock.advance(Duration::from_nanos(DAY));
        t += DAY;
    }
    let bad = late_or_early.lock();
    assert!(
        bad.is_empty(),
        "{} tasks off time, e.g. {}",
        bad.len(),
        bad[0]
    );
    assert_eq!(ran.load(SeqCst), added, "every timer ran exactly once");
    assert_eq!(
        hourly.load(SeqCst) as u64,
        t / HOUR,
        "the hourly task drifted"
    );
    assert!(
        added > 20_000 && pending > 500,
        "{added} timers, {pending} pending after ten years"
    );
    let stats = timer.stats();
    assert_eq!(stats.panicked, 0);
    println!(
        "ten years: {added} timers, {} hourly runs, {pending} still pending at the end",
        hourly.load(SeqCst)
    );
}
