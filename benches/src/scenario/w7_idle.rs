//! W7, idle: a timer holding many pending timers over an idle window; the measurement and its
//! report section.
//!
//! N tasks due an hour out through our `Timer` on the real clock; after they settle, the tick
//! thread's wake-ups (the timer's own count and its voluntary context switches in `/proc`) and the
//! CPU used over the window.

use std::thread;
use std::time::{Duration, Instant};

use tickwheel::{Stats, Task, Timer};

use super::{Config, Outcome, Scenario};
use crate::measure::procfs::{self, ThreadSample};
use crate::report::targets;
use crate::report::{self, Table};
use crate::service::TIMER_NAME;

/// W7's delay: "an hour out".
pub const W7_DELAY: Duration = Duration::from_secs(3600);

/// What W7 measured over its idle window.
#[derive(Clone, Debug, PartialEq)]
pub struct IdleResult {
    /// Timers pending through the window.
    pub timers: usize,
    /// Wall time to add them.
    pub add_time: Duration,
    /// Length of the idle window.
    pub window: Duration,
    /// `stats().tick_wakeups` at the end of the window minus at its start.
    pub wakeups: u64,
    /// The tick thread at the start and end of the window, if `/proc` could tell.
    pub tick_thread: Option<(ThreadSample, ThreadSample)>,
    /// CPU time of the whole process over the window (its CPU clock), if it could be read.
    pub process_cpu: Option<Duration>,
}

/// W7: adds `n` tasks due [`W7_DELAY`] out, lets the timer settle, then watches it for `window`.
///
/// # Panics
///
/// If an add is refused, anything fires, or shutdown does not hand back all `n` tasks.
pub fn idle(n: usize, window: Duration, settle: Duration) -> IdleResult {
    let timer = Timer::builder()
        .name("w7")
        .threads(2)
        .build()
        .unwrap_or_else(|e| panic!("W7 {TIMER_NAME}: build failed: {e}"));
    let start = Instant::now();
    for _ in 0..n {
        // The handle is dropped: fire-and-forget adds keep their task.
        let _ = timer
            .add_or_submit(Task::after(W7_DELAY, || {}))
            .unwrap_or_else(|e| panic!("W7 {TIMER_NAME}: add refused: {e}"));
    }
    let add_time = start.elapsed();
    thread::sleep(settle);
    let before = timer.stats();
    let (tick0, cpu0) = (procfs::thread_named("w7-tick"), procfs::process_cpu());
    thread::sleep(window);
    let (tick1, cpu1) = (procfs::thread_named("w7-tick"), procfs::process_cpu());
    let after = timer.stats();
    let check = |s: &Stats| {
        assert!(
            s.pending == n as u64 && s.fired == 0,
            "W7 {TIMER_NAME}: expected {n} pending and none fired; got {s:?}"
        );
    };
    check(&before);
    check(&after);
    let left = timer.shutdown().len();
    assert_eq!(
        left, n,
        "W7 {TIMER_NAME}: shutdown must hand back every pending task"
    );
    IdleResult {
        timers: n,
        add_time,
        window,
        wakeups: after.tick_wakeups - before.tick_wakeups,
        tick_thread: tick0.zip(tick1),
        process_cpu: cpu0.zip(cpu1).map(|(a, b)| b.saturating_sub(a)),
    }
}

/// W7: an idle timer holding many pending timers.
pub(super) struct Idle;

impl Scenario for Idle {
    fn id(&self) -> &'static str {
        "W7"
    }

    fn title(&self) -> &'static str {
        "idle: timers pending an hour out, tick-thread wake-ups and CPU over an idle window (real clock)"
    }

    fn run(&self, cfg: &Config, progress: &mut dyn FnMut(&str)) -> Outcome {
        let (n, window) = cfg.idle();
        // Longer than the young queue's 256 ticks: every task has been filed in the wheel (a
        // wake-up per tick of the add burst, 256 ms after it) before the window starts.
        let settle = Duration::from_millis(1000);
        progress(&format!(
            "W7 {TIMER_NAME}: {} timers 1 h out, idle for {}",
            report::count(n),
            report::secs(window)
        ));
        let r = idle(n, window, settle);
        let mut t = Table::new(
            format!(
                "W7 idle, {} timers pending an hour out, {} window",
                report::count(n),
                report::secs(window)
            ),
            &[
                "implementation",
                "tick wake-ups (stats)",
                "tick thread sleeps (/proc)",
                "tick thread CPU ms",
                "process CPU ms",
            ],
        );
        let na = || "n/a".to_owned();
        let (sleeps, tick_cpu) = match r.tick_thread {
            Some((a, b)) => (
                (b.voluntary_switches - a.voluntary_switches).to_string(),
                (b.cpu.saturating_sub(a.cpu).as_millis()).to_string(),
            ),
            None => (na(), na()),
        };
        t.row(vec![
            TIMER_NAME.to_owned(),
            r.wakeups.to_string(),
            sleeps,
            tick_cpu,
            r.process_cpu
                .map_or_else(na, |d| format!("{:.1}", d.as_secs_f64() * 1e3)),
        ]);
        let w = window.as_secs_f64();
        t.note(format!(
            "not measured, for contrast: Netty's HashedWheelTimer wakes every tick even when idle ({:.0} \
             wake-ups in {} at a 1 ms tick); Kafka's SystemTimer reaper polls with a 200 ms cap ({:.0})",
            w * 1000.0,
            report::secs(window),
            w / 0.2
        ));
        t.note(format!(
            "method: `Timer` on the real clock (tick 1 ms, 2 executor threads); {} one-shot tasks \
             `Task::after(1 h, || {{}})` added in {:.0} ms, handles dropped; after {} ms to settle (far tasks \
             leave the young queue for the wheel 256 ticks after they are stamped), sampled \
             `stats().tick_wakeups`, the tick thread's `/proc/self/task/<tid>/{{stat,status}}` and \
             the process CPU clock, slept the window on the main thread, sampled again",
            report::count(n),
            r.add_time.as_secs_f64() * 1e3,
            settle.as_millis()
        ));
        t.note(
            "tick thread sleeps = its voluntary context switches, an independent count of its wake-ups; the \
             tick thread's CPU time is utime + stime in 10 ms clock ticks; the process's is its CPU clock, to \
             the nanosecond (it includes this program's own threads)",
        );
        t.note("every run checks: all timers pending and none fired before and after the window; shutdown hands all back");
        let mut out = Outcome::default();
        out.checks.push(targets::check(
            "W7.wakeups",
            format!(
                "{} in {} ({} pending)",
                r.wakeups,
                report::secs(window),
                report::count(n)
            ),
            Some(r.wakeups == 0),
        ));
        out.tables.push(t);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_run_verifies() {
        let i = idle(1000, Duration::from_millis(100), Duration::from_millis(20));
        assert_eq!(i.timers, 1000);
    }
}
