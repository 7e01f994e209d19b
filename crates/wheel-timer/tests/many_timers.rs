//! Many timers in one process share one pool: a timer that does not ask for a pool of its own
//! adds one thread (its tick thread), and the shared pool is started once. (Alone in its test
//! binary, so no other test's threads are counted.)

use std::time::Duration;

use tickwheel::{Task, Timer};

/// Threads of this process, from `/proc` (Linux).
fn threads() -> Option<usize> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("Threads:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[test]
fn a_hundred_timers_start_a_tick_thread_each_and_one_shared_pool() {
    let Some(before) = threads() else {
        return; // not Linux: nothing to count with
    };
    let timers: Vec<Timer> = (0..100).map(|_| Timer::new().unwrap()).collect();
    for t in &timers {
        t.add_or_submit(Task::after(Duration::from_secs(3600), || {}))
            .unwrap();
    }
    let after = threads().unwrap();
    let pool = std::thread::available_parallelism().map_or(2, |n| n.get());
    assert!(
        after - before <= 100 + pool,
        "{} threads for 100 timers (bound: 100 tick threads + a shared pool of {pool})",
        after - before
    );
    drop(timers);
}
