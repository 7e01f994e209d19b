//! On the real clock, tests assert only what holds on any machine, however loaded: nothing runs
//! before its deadline, and everything runs eventually (within a generous bound).

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tickwheel::{Task, Timer};

#[test]
fn never_early_and_eventually_on_the_real_clock() {
    let timer = Timer::builder().threads(2).build().unwrap();
    let ran: Arc<Mutex<Vec<(Instant, Instant)>>> = Arc::default();
    for i in 0..300u64 {
        let delay = Duration::from_micros(i * 997 % 300_000);
        let deadline = Instant::now() + delay;
        let ran = ran.clone();
        timer
            .add_or_submit(Task::after(delay, move || {
                ran.lock().push((deadline, Instant::now()))
            }))
            .unwrap();
    }
    let start = Instant::now();
    while ran.lock().len() < 300 && start.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let ran = ran.lock();
    assert_eq!(ran.len(), 300, "every task ran within a minute");
    for (deadline, at) in ran.iter() {
        assert!(at >= deadline, "ran {:?} early", *deadline - *at);
    }
    assert!(timer.stats().lateness_max < Duration::from_secs(60));
}

#[test]
fn an_idle_timer_does_not_wake() {
    let timer = Timer::builder().threads(1).build().unwrap();
    timer
        .add_or_submit(Task::after(Duration::from_secs(3600), || {}))
        .unwrap();
    // The add wakes the thread (it slept "until woken" on an empty timer) to stamp the deadline
    // within a tick, it looks once more a tick later in case more adds came, and the task, far
    // out, is filed in the wheel when it leaves the young queue 256 ticks later; let those
    // wake-ups be counted before measuring.
    let start = Instant::now();
    while timer.stats().tick_wakeups < 3 && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(Duration::from_millis(20));
    let before = timer.stats().tick_wakeups;
    assert!(before <= 3, "{before} wake-ups for one add");
    std::thread::sleep(Duration::from_millis(300));
    // The only legitimate wake-up here would be a bucket of the hour-long timer coming due,
    // which is minutes away at the earliest.
    assert_eq!(
        timer.stats().tick_wakeups,
        before,
        "the tick thread woke with nothing due"
    );
}
