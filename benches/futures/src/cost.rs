//! W11's cost and lateness tables: the timer's futures under a 2-worker tokio runtime, against
//! tokio's own timer (moved here from wheel-benches' `scenario/w11_futures.rs`, unchanged, so
//! that tokio is built without `test-util`; see this crate's Cargo.toml).
//!
//! Cost: N tasks on a 2-worker tokio runtime each await `work` (a tokio sleep of 1..=100 ms, the
//! same in every variant) inside a 5 s timeout, so every timeout is cancelled. The timer's own CPU
//! cost per timeout = (process CPU of the run with the timeout - CPU of the same run without one)
//! / N, for `Timer::timeout` and `tokio::time::timeout`, the variants alternating, summed over the
//! repetitions (the process CPU clock, to the nanosecond); each run's measurement ends
//! 500 ms after its tasks, so what a timer defers is charged to it, not to the next variant.
//! Memory: peak bytes above the run without a timeout, per timeout. Lateness: N sleeps uniform
//! over 1 s that do fire, each storing `now - deadline`; made ahead of their deadlines (the
//! timer's lateness, the target's figure), then made in the spawn burst (the timer's and the
//! runtime's queue's together).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

use tickwheel::Timer;
use tokio::runtime::Runtime;

use crate::Report;

use wheel_benches::measure::alloc;
use wheel_benches::measure::procfs;
use wheel_benches::report::{self, Table};
use wheel_benches::rng::Rng;
use wheel_benches::service::{Lateness, TIMER_NAME, signed_ns};
use wheel_benches::workloads::SEED;

/// Which timeout wraps the work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Variant {
    None,
    Ours,
    Tokio,
}

/// tokio's timer in the tables.
pub(crate) const TOKIO: &str = "tokio::time";

/// Idle time at the end of each timeout run, inside its CPU measurement: longer than any work a
/// timer defers after the tasks are done (ours: the young queue's filing, 320 ms at most).
const SETTLE: Duration = Duration::from_millis(500);

/// How far ahead of the spawning the sleeps of the "made ahead" lateness run start.
const AHEAD: Duration = Duration::from_secs(1);

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .expect("W11: a tokio runtime")
}

/// One run of `n` tasks: CPU time and peak bytes above the start. Panics if a timeout fires.
fn timeouts(
    rt: &Runtime,
    timer: &Arc<Timer>,
    variant: Variant,
    works: &[u64],
) -> (Duration, usize) {
    alloc::settle(); // the last run's frees are not this run's cost (see `alloc::settle`)
    let base = alloc::current();
    alloc::reset_peak();
    let cpu = procfs::process_cpu().unwrap_or_default();
    let elapsed = Arc::new(AtomicUsize::new(0));
    rt.block_on(async {
        let tasks: Vec<_> = works
            .iter()
            .map(|&ms| {
                let (timer, elapsed) = (timer.clone(), elapsed.clone());
                tokio::spawn(async move {
                    let work = tokio::time::sleep(Duration::from_millis(ms));
                    let limit = Duration::from_secs(5);
                    let ok = match variant {
                        Variant::None => {
                            work.await;
                            true
                        }
                        Variant::Ours => timer.timeout(limit, work).await.is_ok(),
                        Variant::Tokio => tokio::time::timeout(limit, work).await.is_ok(),
                    };
                    if !ok {
                        elapsed.fetch_add(1, Relaxed);
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.expect("W11: a task panicked");
        }
    });
    // What a timer defers (our young queue files its cancelled records up to 320 ticks after
    // the add) happens during this run's measurement, not the next variant's.
    std::thread::sleep(SETTLE);
    let cpu = procfs::process_cpu()
        .unwrap_or_default()
        .saturating_sub(cpu);
    let peak = alloc::peak().saturating_sub(base);
    assert_eq!(
        elapsed.load(Relaxed),
        0,
        "W11 {variant:?}: a 5 s timeout fired early"
    );
    (cpu, peak)
}

/// When the sleeps of a lateness run are made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Start {
    /// Each task makes `sleep(delay)` at its first poll, in the burst of `n` spawns: the wake-ups
    /// due during the burst also measure the runtime's queue behind it.
    Burst,
    /// Each task makes `sleep_until(start + delay)`, `start` far enough ahead that every task
    /// has made its sleep before the first deadline: the wake-ups find an idle runtime.
    Ahead(Instant),
}

/// Lateness (ns, signed, sorted) of sleeps of `delays` ms, all spawned at once, and how many
/// were made after `start` (0 for [`Start::Burst`]).
fn lateness(
    rt: &Runtime,
    timer: &Arc<Timer>,
    ours: bool,
    delays: &[u64],
    start: Start,
) -> (Vec<i64>, usize) {
    alloc::settle(); // or a run's wake-ups may wait for the allocator (see `alloc::settle`)
    let made_late = Arc::new(AtomicUsize::new(0));
    let mut late: Vec<i64> = rt.block_on(async {
        let tasks: Vec<_> = delays
            .iter()
            .map(|&ms| {
                let (timer, made_late) = (timer.clone(), made_late.clone());
                let d = Duration::from_millis(ms);
                tokio::spawn(async move {
                    let due = match start {
                        Start::Burst => None,
                        Start::Ahead(at) => {
                            if Instant::now() > at {
                                made_late.fetch_add(1, Relaxed);
                            }
                            Some(at + d)
                        }
                    };
                    let deadline = if ours {
                        let sleep = match due {
                            None => timer.sleep(d),
                            Some(at) => timer.sleep_until(at),
                        };
                        let deadline = sleep.deadline();
                        sleep.await;
                        deadline
                    } else {
                        let sleep = match due {
                            None => tokio::time::sleep(d),
                            Some(at) => tokio::time::sleep_until(at.into()),
                        };
                        let deadline = sleep.deadline().into_std();
                        sleep.await;
                        deadline
                    };
                    signed_ns(Instant::now(), deadline)
                })
            })
            .collect();
        let mut out = Vec::with_capacity(tasks.len());
        for t in tasks {
            out.push(t.await.expect("W11: a task panicked"));
        }
        out
    });
    late.sort_unstable();
    (late, made_late.load(Relaxed))
}

/// Nanoseconds per timeout that the runs `with` a timeout cost beyond the runs `without` it of
/// the same rounds (`with[r]` against `without[r]`, `n` timeouts each), one per round, sorted
/// (negative differences, noise, are kept as they are).
fn paired_costs(with: &[Duration], without: &[Duration], n: usize) -> Vec<f64> {
    let mut d: Vec<f64> = with
        .iter()
        .zip(without)
        .map(|(w, o)| (w.as_nanos() as f64 - o.as_nanos() as f64) / n as f64)
        .collect();
    d.sort_by(f64::total_cmp);
    d
}

/// The median of sorted paired costs (see `paired_costs`), at least 0.
fn median_cost(d: &[f64]) -> f64 {
    let median = match d.len() {
        0 => 0.0,
        len if len % 2 == 1 => d[len / 2],
        len => (d[len / 2 - 1] + d[len / 2]) / 2.0,
    };
    median.max(0.0)
}

/// What the rounds of sorted paired costs spread over: `lowest..highest` ns.
fn spread(d: &[f64]) -> String {
    match (d.first(), d.last()) {
        (Some(lo), Some(hi)) => format!("{lo:.0}..{hi:.0}"),
        _ => "-".to_owned(),
    }
}

fn ms(ns: i64) -> String {
    format!("{:.3}", ns as f64 / 1e6)
}

/// The cost and lateness tables, and the W11.cpu and W11.p99 checks.
pub(crate) fn run(quick: bool, progress: &mut dyn FnMut(&str)) -> Report {
    let (n, reps) = if quick { (20_000, 5) } else { (100_000, 9) };
    let mut rng = Rng::new(SEED ^ 0x11);
    let works: Vec<u64> = (0..n).map(|_| rng.range(1, 100)).collect();
    let delays: Vec<u64> = (0..n).map(|_| rng.range(1, 1000)).collect();
    let rt = runtime();
    let timer = Arc::new(
        Timer::builder()
            .threads(1)
            .name("w11")
            .build()
            .expect("W11: a timer"),
    );
    progress(&format!(
        "W11 {n} timeouts x {reps}: none, {TIMER_NAME}, {TOKIO}, alternating"
    ));
    let mut runs: [Vec<Duration>; 3] = Default::default();
    let mut peak = [0usize; 3];
    let variants = [Variant::None, Variant::Ours, Variant::Tokio];
    timeouts(&rt, &timer, Variant::None, &works); // warm-up: pools, runtime, shards
    for _ in 0..reps {
        for (i, &v) in variants.iter().enumerate() {
            let (c, p) = timeouts(&rt, &timer, v, &works);
            runs[i].push(c);
            peak[i] = peak[i].max(p);
        }
    }
    let cpu = runs.each_ref().map(|r| r.iter().sum::<Duration>());
    let costs = |i: usize| paired_costs(&runs[i], &runs[0], n);
    let cost = |i: usize| median_cost(&costs(i));
    let bytes = |i: usize| peak[i].saturating_sub(peak[0]) as f64 / n as f64;
    let (ours, theirs) = (cost(1), cost(2));
    let mut t = Table::new(
        format!(
            "W11 timeout(5 s, work of 1..=100 ms), {} tasks x {reps} runs",
            report::count(n)
        ),
        &[
            "timeout",
            "CPU ms (all runs)",
            "timer ns/timeout",
            "rounds' range ns",
            "peak B/timeout",
            "tokio/ours (CPU)",
        ],
    );
    for (i, name) in ["none (the work alone)", TIMER_NAME, TOKIO]
        .iter()
        .enumerate()
    {
        t.row(vec![
            (*name).to_owned(),
            format!("{}", cpu[i].as_millis()),
            if i == 0 {
                "-".to_owned()
            } else {
                report::ns(cost(i))
            },
            if i == 0 {
                "-".to_owned()
            } else {
                spread(&costs(i))
            },
            if i == 0 {
                "-".to_owned()
            } else {
                format!("{:.0}", bytes(i))
            },
            match i {
                1 => "1.00x (ours)".to_owned(),
                2 => report::ratio(theirs / ours.max(1e-9)),
                _ => "-".to_owned(),
            },
        ]);
    }
    t.note("work = tokio::time::sleep(1..=100 ms) in every variant, so every timeout is cancelled when the work completes; timer cost = (process CPU of a run with the timeout - CPU of the run without it in the same round) / timeouts, the median over the rounds (variants alternating within each round; the range column gives the lowest and highest round, so the noise is in sight of the median), each run measured until 500 ms after its tasks ended (so work a timer defers, like our young queue filing its cancelled records, is charged to that run); the process CPU clock is read to the nanosecond, but the work alone varies by several ms between runs, so differences below about 50 ns per timeout are noise (a median of paired rounds, not a difference of sums: on a busy host one slow run moved a sum by hundreds of ns per timeout)");
    t.note("peak B/timeout = (highest heap bytes during the run - the same without a timeout) / tasks, counting allocator");
    t.note("a process of its own (benches/futures, tokio built without test-util), so no workload runs before this one in it: until 2026-11-28 W11 ran inside wheelbench, after W10's 6M tasks in a full run, and the next timer reused W10's shards with their slot arrays (`--only W10,W11` on 2026-11-26: 929 and 1542 ns per timeout; `--only W11`, fresh: 750)");
    t.note("each run (here and in the lateness table) starts from a settled allocator (glibc's `malloc_trim`, outside the measurement): glibc merges the small blocks freed so far all at once, holding its arena's lock, at the first larger request; after W10's 6M closures, when W11 still ran in wheelbench's process, that took 0.6 s inside one of this workload's runs, and every thread that needed the allocator meanwhile waited, our tick thread included (before the settle, 4 of 10 `--only W10,W11` runs on 2026-11-26 had sleeps late by 0.3-1.3 s; 0 of 5 after)");

    progress(&format!(
        "W11 lateness of {n} sleeps over 1 s: {TIMER_NAME}, {TOKIO}; made ahead, then in the spawn burst"
    ));
    // Every task makes its sleep well before the first deadline (the spawn burst takes about
    // 100 ms here; the table shows how many were late anyway).
    let ahead = |ours: bool| {
        let start = Start::Ahead(Instant::now() + AHEAD);
        lateness(&rt, &timer, ours, &delays, start)
    };
    let (ours_late, ours_made_late) = ahead(true);
    let (tokio_late, tokio_made_late) = ahead(false);
    let (ours_burst, _) = lateness(&rt, &timer, true, &delays, Start::Burst);
    let (tokio_burst, _) = lateness(&rt, &timer, false, &delays, Start::Burst);
    let mut l = Table::new(
        format!(
            "W11 lateness of {} sleeps due over 1 s that fire",
            report::count(n)
        ),
        &[
            "sleep",
            "made",
            "p50 ms",
            "p99 ms",
            "max ms",
            "early",
            "made after start",
        ],
    );
    let rows = [
        (TIMER_NAME, "ahead", &ours_late, ours_made_late.to_string()),
        (TOKIO, "ahead", &tokio_late, tokio_made_late.to_string()),
        (TIMER_NAME, "in the burst", &ours_burst, "-".to_owned()),
        (TOKIO, "in the burst", &tokio_burst, "-".to_owned()),
    ];
    for (name, made, late, made_late) in rows {
        let q = Lateness::of_sorted(late);
        l.row(vec![
            name.to_owned(),
            made.to_owned(),
            ms(q.p50),
            ms(q.p99),
            ms(q.max),
            late.iter().filter(|&&x| x < 0).count().to_string(),
            made_late,
        ]);
    }
    l.note("each task stores Instant::now() - the sleep's deadline after the await; both timers at 1 ms resolution; the runtime and our timer share this 2-core machine");
    l.note(format!("made ahead: all tasks spawned at once, each makes sleep_until(start + 1..=1000 ms) at its first poll, start {} ms after the spawning began, so the deadlines find the runtime idle and the figure is the timer's (the target is checked on these rows)", AHEAD.as_millis()));
    l.note("in the burst: each task makes sleep(1..=1000 ms) at its first poll, while the 2 workers still work through the spawn burst (about 100 ms): our tick thread wakes a task from outside the runtime, which puts it in tokio's global queue behind the spawned tasks not yet polled, while tokio's own timer, run by a worker, puts it in that worker's local queue first; so the sleeps due in the first 100 ms wait for the burst with our timer, not with tokio's");
    let mut out = Report::default();
    // A cost is a difference of two CPU clocks, and noise can take it to zero or below: a
    // figure that small is below what the method can tell, and judges nothing.
    let resolved = ours > 0.0 && theirs > 0.0;
    out.checks.push((
        "W11.cpu",
        match resolved {
            true => format!(
                "{} vs {} ns (rounds {} vs {})",
                report::ns(ours),
                report::ns(theirs),
                spread(&costs(1)),
                spread(&costs(2))
            ),
            false => format!(
                "{} vs {} ns: below the method's resolution",
                report::ns(ours),
                report::ns(theirs)
            ),
        },
        resolved.then_some(ours * 2.0 <= theirs),
    ));
    let q = Lateness::of_sorted(&ours_late);
    let early = ours_late.iter().filter(|&&x| x < 0).count();
    out.checks.push((
        "W11.p99",
        format!("p99 {} ms, {early} early (made ahead)", ms(q.p99)),
        Some(q.p99 <= 2_000_000 && early == 0 && ours_made_late == 0),
    ));
    out.tables.push(t);
    out.tables.push(l);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_timer_cost_is_the_median_of_paired_rounds() {
        let ms = |v: &[u64]| {
            v.iter()
                .map(|&m| Duration::from_millis(m))
                .collect::<Vec<_>>()
        };
        let cost = |with: &[u64], without: &[u64]| {
            median_cost(&paired_costs(&ms(with), &ms(without), 1_000))
        };
        // Rounds of 1,000 timeouts: 1, 2 and 30 ms more than the work alone (one slow round).
        assert_eq!(
            cost(&[101, 202, 330], &[100, 200, 300]),
            2_000.0,
            "the median, not the mean (11 us)"
        );
        assert_eq!(cost(&[101, 202], &[100, 200]), 1_500.0);
        assert_eq!(
            cost(&[99, 98, 101], &[100, 100, 100]),
            0.0,
            "noise below zero is no cost"
        );
        assert_eq!(cost(&[], &[]), 0.0);
    }

    #[test]
    fn the_range_shows_the_lowest_and_highest_round() {
        let ms = |v: &[u64]| {
            v.iter()
                .map(|&m| Duration::from_millis(m))
                .collect::<Vec<_>>()
        };
        let d = paired_costs(&ms(&[101, 330, 98]), &ms(&[100, 300, 100]), 1_000);
        assert_eq!(
            spread(&d),
            "-2000..30000",
            "noise below zero is shown as it is"
        );
        assert_eq!(spread(&[]), "-");
    }
}
