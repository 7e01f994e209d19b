//! W11: the timer's futures under tokio against tokio's own timer, measurement and report.
//!
//! Cost: N tasks on a 2-worker tokio runtime each await `work` (a tokio sleep of 1..=100 ms, the
//! same in every variant) inside a 5 s timeout, so every timeout is cancelled. The timer's own CPU
//! cost per timeout = (process CPU of the run with the timeout - CPU of the same run without one)
//! / N, for `Timer::timeout` and `tokio::time::timeout`, the variants alternating, summed over the
//! repetitions (process CPU time is read from `/proc` to 10 ms). Memory: peak bytes above the run
//! without a timeout, per timeout. Lateness: N sleeps uniform over 1 s that do fire, each storing
//! `now - deadline`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

use tickwheel::Timer;
use tokio::runtime::Runtime;

use super::{Config, Outcome, Scenario};
use crate::alloc;
use crate::procfs;
use crate::report::{self, Table};
use crate::rng::Rng;
use crate::service::{Lateness, TIMER_NAME};
use crate::targets;
use crate::workloads::SEED;

/// W11.
pub(super) struct Futures;

/// Which timeout wraps the work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Variant {
    None,
    Ours,
    Tokio,
}

const TOKIO: &str = "tokio::time";

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

/// Lateness (ns, signed) of `n` sleeps due uniformly over `spread`, all made at once.
fn lateness(rt: &Runtime, timer: &Arc<Timer>, ours: bool, delays: &[u64]) -> Vec<i64> {
    let mut late: Vec<i64> = rt.block_on(async {
        let tasks: Vec<_> = delays
            .iter()
            .map(|&ms| {
                let timer = timer.clone();
                let d = Duration::from_millis(ms);
                tokio::spawn(async move {
                    let deadline = if ours {
                        let sleep = timer.sleep(d);
                        let deadline = sleep.deadline();
                        sleep.await;
                        deadline
                    } else {
                        let sleep = tokio::time::sleep(d);
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
    late
}

fn signed_ns(now: Instant, deadline: Instant) -> i64 {
    match now.checked_duration_since(deadline) {
        Some(d) => d.as_nanos() as i64,
        None => -(deadline.duration_since(now).as_nanos() as i64),
    }
}

fn ms(ns: i64) -> String {
    format!("{:.3}", ns as f64 / 1e6)
}

impl Scenario for Futures {
    fn id(&self) -> &'static str {
        "W11"
    }

    fn title(&self) -> &'static str {
        "futures: timeout and sleep under a 2-worker tokio runtime, against tokio's own timer"
    }

    fn run(&self, cfg: &Config, progress: &mut dyn FnMut(&str)) -> Outcome {
        let (n, reps) = if cfg.quick { (20_000, 3) } else { (100_000, 5) };
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
        let mut cpu = [Duration::ZERO; 3];
        let mut peak = [0usize; 3];
        let variants = [Variant::None, Variant::Ours, Variant::Tokio];
        timeouts(&rt, &timer, Variant::None, &works); // warm-up: pools, runtime, shards
        for _ in 0..reps {
            for (i, &v) in variants.iter().enumerate() {
                let (c, p) = timeouts(&rt, &timer, v, &works);
                cpu[i] += c;
                peak[i] = peak[i].max(p);
            }
        }
        let ops = (n * reps) as f64;
        let cost = |i: usize| cpu[i].saturating_sub(cpu[0]).as_nanos() as f64 / ops;
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
                    format!("{:.0}", bytes(i))
                },
                match i {
                    1 => "1.00x (ours)".to_owned(),
                    2 => report::ratio(theirs / ours.max(1e-9)),
                    _ => "-".to_owned(),
                },
            ]);
        }
        t.note("work = tokio::time::sleep(1..=100 ms) in every variant, so every timeout is cancelled when the work completes; timer cost = (process CPU with the timeout - CPU without) / timeouts, summed over the runs, variants alternating; process CPU from /proc is good to 10 ms, so small differences are noise");
        t.note("peak B/timeout = (highest heap bytes during the run - the same without a timeout) / tasks, counting allocator");
        t.note("history matters: a timer's shards outlive it and are reused by the next one, slot arrays and free lists as they were, so in a full run this workload inherits the shards W10's millions of tasks grew, their free slots scattered over hundreds of MB, and pays a cache and TLB miss per slot touched; `--only W11` measures a process without that history");

        progress(&format!(
            "W11 lateness of {n} sleeps over 1 s: {TIMER_NAME}, {TOKIO}"
        ));
        let ours_late = lateness(&rt, &timer, true, &delays);
        let tokio_late = lateness(&rt, &timer, false, &delays);
        let mut l = Table::new(
            format!(
                "W11 lateness of {} sleeps due over 1 s that fire",
                report::count(n)
            ),
            &["sleep", "p50 ms", "p99 ms", "max ms", "early"],
        );
        for (name, late) in [(TIMER_NAME, &ours_late), (TOKIO, &tokio_late)] {
            let q = Lateness::of_sorted(late);
            l.row(vec![
                name.to_owned(),
                ms(q.p50),
                ms(q.p99),
                ms(q.max),
                late.iter().filter(|&&x| x < 0).count().to_string(),
            ]);
        }
        l.note("each task stores Instant::now() - the sleep's deadline after the await; both timers at 1 ms resolution; the runtime and our timer share this 2-core machine");

        let mut out = Outcome::default();
        out.checks.push(targets::check(
            "W11.cpu",
            format!("{} vs {} ns", report::ns(ours), report::ns(theirs)),
            Some(ours * 2.0 <= theirs),
        ));
        let q = Lateness::of_sorted(&ours_late);
        let early = ours_late.iter().filter(|&&x| x < 0).count();
        out.checks.push(targets::check(
            "W11.p99",
            format!("p99 {} ms, {early} early", ms(q.p99)),
            Some(q.p99 <= 2_000_000 && early == 0),
        ));
        out.tables.push(t);
        out.tables.push(l);
        out
    }
}
