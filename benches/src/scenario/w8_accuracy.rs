//! W8, accuracy: lateness of real-clock timers; the measurement and its report section and chart.
//!
//! N tasks due uniformly over a window through our `Timer` (tick 1 ms, 2 executor threads); each
//! records `Instant::now() - deadline` when it runs, beside the timer's own lateness histogram.
//! Lost, doubled and early tasks fail the run.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering::Relaxed};
use std::thread;
use std::time::{Duration, Instant};

use tickwheel::{Task, Timer};

use super::{Config, Outcome, Scenario};
use crate::report::svg::{Chart, Series};
use crate::report::targets;
use crate::report::{self, Table};
use crate::rng::Rng;
use crate::service::{Lateness, TIMER_NAME, signed_ns};
use crate::workloads::SEED;

/// What W8 measured.
#[derive(Clone, Debug, PartialEq)]
pub struct AccuracyResult {
    /// Timers run.
    pub timers: usize,
    /// Wall time to add them (all before the first deadline).
    pub add_time: Duration,
    /// Lateness as the tasks measured it: `Instant::now()` at the start of the task minus its
    /// deadline.
    pub measured: Lateness,
    /// Earliest run relative to its deadline (negative: early).
    pub min: i64,
    /// Tasks that ran before their deadline (the run panics after reporting them).
    pub early: usize,
    /// The timer's own lateness histogram (`stats()`), p50/p99/max.
    pub stats: Lateness,
    /// The distribution measured by the tasks: (percentile, lateness ns) at a few percentiles.
    pub percentiles: Vec<(f64, i64)>,
}

/// Not run yet, in a lateness slot.
const NOT_RUN: i64 = i64::MIN;

/// Where W8's tasks record their lateness: one slot per task, preallocated.
struct Slots {
    lateness: Vec<AtomicI64>,
    ran: AtomicUsize,
    doubles: AtomicUsize,
}

/// W8: `n` real-clock tasks due uniformly over `spread`, starting `lead` from now, on a timer
/// with a 1 ms tick and 2 executor threads; each records its lateness.
///
/// # Panics
///
/// If an add is refused, a task is lost (not run 10 s after the last deadline) or runs twice,
/// the timer's counters disagree, or any task ran early (after building the result, so the
/// message carries the figures).
pub fn accuracy(n: usize, spread: Duration, lead: Duration, seed: u64) -> AccuracyResult {
    let timer = Timer::builder()
        .name("w8")
        .tick(Duration::from_millis(1))
        .threads(2)
        .build()
        .unwrap_or_else(|e| panic!("W8 {TIMER_NAME}: build failed: {e}"));
    let slots = Arc::new(Slots {
        lateness: (0..n).map(|_| AtomicI64::new(NOT_RUN)).collect(),
        ran: AtomicUsize::new(0),
        doubles: AtomicUsize::new(0),
    });
    let mut rng = Rng::new(seed);
    let spread_ns = u64::try_from(spread.as_nanos()).unwrap_or(u64::MAX).max(1);
    let offsets: Vec<u64> = (0..n).map(|_| rng.range(0, spread_ns - 1)).collect();
    let start = Instant::now();
    let base = start + lead;
    for (i, &off) in offsets.iter().enumerate() {
        let deadline = base + Duration::from_nanos(off);
        let slots = slots.clone();
        let task = Task::at(deadline, move || {
            let late = signed_ns(Instant::now(), deadline);
            if slots.lateness[i].swap(late, Relaxed) != NOT_RUN {
                slots.doubles.fetch_add(1, Relaxed);
            }
            slots.ran.fetch_add(1, Relaxed);
        });
        timer
            .add_or_submit(task)
            .unwrap_or_else(|e| panic!("W8 {TIMER_NAME}: add refused: {e}"));
    }
    let add_time = start.elapsed();
    let give_up = base + spread + Duration::from_secs(10);
    thread::sleep((base + spread).saturating_duration_since(Instant::now()));
    while slots.ran.load(Relaxed) < n && Instant::now() < give_up {
        thread::sleep(Duration::from_millis(10));
    }
    let ran = slots.ran.load(Relaxed);
    assert!(
        ran == n,
        "W8 {TIMER_NAME}: lost tasks: {} of {n} never ran (10 s after the last deadline)",
        n - ran
    );
    let s = timer.stats();
    let left = timer.shutdown();
    let doubles = slots.doubles.load(Relaxed);
    assert!(
        doubles == 0 && s.fired == n as u64 && s.pending == 0 && left.is_empty(),
        "W8 {TIMER_NAME}: {doubles} tasks ran twice; expected {n} fired, none pending or returned; \
         got {s:?}, {} returned",
        left.len()
    );
    let mut sorted: Vec<i64> = slots.lateness.iter().map(|l| l.load(Relaxed)).collect();
    sorted.sort_unstable();
    let early = sorted.iter().take_while(|&&l| l < 0).count();
    let ns = |d: Duration| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX);
    let result = AccuracyResult {
        timers: n,
        add_time,
        measured: Lateness::of_sorted(&sorted),
        min: sorted[0],
        early,
        percentiles: [1.0, 10.0, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.9, 100.0]
            .iter()
            .map(|&q| {
                let rank =
                    ((sorted.len() as f64 * q / 100.0).ceil() as usize).clamp(1, sorted.len());
                (q, sorted[rank - 1])
            })
            .collect(),
        stats: Lateness {
            p50: ns(s.lateness_p50),
            p99: ns(s.lateness_p99),
            max: ns(s.lateness_max),
        },
    };
    assert!(
        early == 0,
        "W8 {TIMER_NAME}: {early} of {n} tasks ran early (the earliest {} ns before its deadline): {result:?}",
        -result.min
    );
    result
}

/// W8: lateness on the real clock.
pub(super) struct Accuracy;

fn ms(ns: i64) -> String {
    format!("{:.3}", ns as f64 / 1e6)
}

impl Scenario for Accuracy {
    fn id(&self) -> &'static str {
        "W8"
    }

    fn title(&self) -> &'static str {
        "accuracy: lateness of real-clock timers spread over a window, tick 1 ms"
    }

    fn run(&self, cfg: &Config, progress: &mut dyn FnMut(&str)) -> Outcome {
        let (n, spread) = cfg.accuracy();
        let tick = Duration::from_millis(1);
        let lead = Duration::from_millis(250);
        progress(&format!(
            "W8 {TIMER_NAME}: {} timers over {}",
            report::count(n),
            report::secs(spread)
        ));
        let r = accuracy(n, spread, lead, SEED);
        let chart = Chart {
            file: "w8-lateness.svg",
            title: format!(
                "W8: lateness of {} real-clock timers by percentile (tick 1 ms)",
                report::count(n)
            ),
            x_label: "percentile".to_owned(),
            y_label: "lateness ms".to_owned(),
            log_x: false,
            log_y: true,
            series: vec![Series {
                name: TIMER_NAME.to_owned(),
                points: r
                    .percentiles
                    .iter()
                    .map(|&(q, ns)| (q, (ns as f64 / 1e6).max(1e-3)))
                    .collect(),
            }],
        };
        let mut t = Table::new(
            format!(
                "W8 accuracy, {} timers due uniformly over {}, tick 1 ms",
                report::count(n),
                report::secs(spread)
            ),
            &[
                "lateness source",
                "p50 ms",
                "p99 ms",
                "max ms",
                "early fires",
            ],
        );
        let row = |name: &str, l: Lateness, early: String| {
            vec![name.to_owned(), ms(l.p50), ms(l.p99), ms(l.max), early]
        };
        t.row(row(
            "tasks: Instant::now() - deadline",
            r.measured,
            r.early.to_string(),
        ));
        t.row(row(
            "Timer::stats() (to within 1/8)",
            r.stats,
            "-".to_owned(),
        ));
        t.note(format!(
            "method: `Timer` on the real clock, tick 1 ms, 2 executor threads; {} tasks `Task::at(deadline, ..)` \
             with deadlines uniform over {} starting {} ms after the first add (all added in {:.0} ms, in \
             random order); each task stores `Instant::now() - deadline` (signed) into its own preallocated \
             slot; percentiles by nearest rank; early = ran before its deadline (earliest run here: {} ms \
             after its deadline)",
            report::count(n),
            report::secs(spread),
            lead.as_millis(),
            r.add_time.as_secs_f64() * 1e3,
            ms(r.min)
        ));
        t.note(
            "the machine may be shared and busy: these are the figures this run measured; the run fails only \
             on an early fire, a lost task (not run 10 s after the last deadline), a double run or a miscount",
        );
        let mut out = Outcome::default();
        let target = tick + Duration::from_millis(1);
        out.checks.push(targets::check(
            "W8.p99",
            format!("{} ms", ms(r.measured.p99)),
            Some(r.measured.p99 <= i64::try_from(target.as_nanos()).unwrap_or(i64::MAX)),
        ));
        out.checks.push(targets::check(
            "W8.early",
            format!("{} of {}", r.early, report::count(n)),
            Some(r.early == 0),
        ));
        out.tables.push(t);
        out.charts.push(chart);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_run_verifies() {
        let r = accuracy(
            500,
            Duration::from_millis(100),
            Duration::from_millis(50),
            1,
        );
        assert_eq!((r.timers, r.early), (500, 0));
    }
}
