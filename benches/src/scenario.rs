//! Scenarios: the workloads run over every implementation, best of a few repetitions, as tables.
//!
//! A [`Scenario`] is one workload with an id (`W1`...), a title and a `run` that returns an
//! [`Outcome`]: tables, charts and target checks. The `wheelbench` program runs the ones
//! selected with `--only`. Each workload is one file of this module, holding its measurement
//! and its report section:
//!
//! | id | file | workload |
//! |----|------|----------|
//! | W1 | `w1_long_range.rs` | deadlines log-uniform 1 ms ..= 24 h, insert all then fire all |
//! | W2 | `w2_churn.rs` | Kafka purgatory churn, and uniform cancels among N live timers |
//! | W3 | `w3_short_range.rs` | deadlines uniform 1 ..= 500 ms, insert all then fire all |
//! | W4 | `w4_growth.rs` | W1 at 10k, 100k, 1M, 10M timers |
//! | W5, W5b | `w5_memory.rs` | bytes per pending timer: bare, and through `Timer` |
//! | W6 | `w6_threads.rs` | add + cancel through the service from 1, 2, 4 threads; add latency |
//! | W7 | `w7_idle.rs` | tick-thread wake-ups and CPU with timers pending an hour out |
//! | W8 | `w8_accuracy.rs` | lateness of real-clock timers |
//! | W9 | `w9_steady.rs` | a steady-state server's request-timeout mix |
//! | W10 | `w10_six_million_tasks.rs` | six million tasks through the service |
//! | W11 | `w11_futures.rs`, measured in `benches/futures` | the timer's futures under tokio (built without `test-util`), against tokio's timer; hot loops |
//! | W12 | `w12_slow_tasks.rs` | slow tasks among punctual ones |
//! | W13 | `durable/w13_one_node.rs` | durable jobs (`tickwheel-durable`) on one node, against Redis and PostgreSQL pollers |
//! | W14 | `durable/w14_cluster.rs` | durable jobs on PostgreSQL, 1 and 3 node processes, fail-over, against `SKIP LOCKED` pollers |
//!
//! W1–W5 and W9 run in virtual time over the [`impls`](crate::impls), whose registry lists the
//! contenders; W6–W8 and W10–W12 run the threaded `tickwheel::Timer` on the real clock, W13 the
//! durable jobs of `tickwheel-durable` on it and on the disk, W14 the same jobs on PostgreSQL in
//! node processes of their own (this program again: [`NODE_ARG`], [`node_main`]). What
//! several share is here (the run's [`Config`], best-of helpers), in
//! [`workloads`](crate::workloads) (seed, W1's deadlines, [`Timing`], insert-then-fire) and in
//! [`service`](crate::service) (our timer's name in the tables, lateness).

mod durable;
mod w10_six_million_tasks;
mod w11_futures;
mod w12_slow_tasks;
mod w1_long_range;
mod w2_churn;
mod w3_short_range;
mod w4_growth;
mod w5_memory;
mod w6_threads;
mod w7_idle;
mod w8_accuracy;
mod w9_steady;

pub use durable::{NODE_ARG, node_main};
pub use w1_long_range::insert_then_fire_one_advance;
pub use w2_churn::{ChurnParams, UniformParams, churn, churn_uniform};
pub use w3_short_range::{SHORT_MS, short_range_deadlines};
pub use w5_memory::{
    Job, MemoryResult, memory_per_timer, timer_memory_per_task, wheel_heap_bytes_per_timer,
};
pub use w6_threads::{
    AddCancel, AddLatency, W6_DELAY, add_cancel_baseline, add_cancel_timer, add_latency,
};
pub use w7_idle::{IdleResult, W7_DELAY, idle};
pub use w8_accuracy::{AccuracyResult, accuracy};
pub use w9_steady::{SteadyParams, steady_state};
pub use w10_six_million_tasks::{DemoResult, demo_heap, demo_timer};
pub use w12_slow_tasks::{SlowResult, slow_heap, slow_timer};

use std::time::{Duration, Instant};

use crate::report::Table;
use crate::report::svg::Chart;
use crate::workloads::{ChurnResult, Timing};

/// Sizes and repetitions of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Smaller sizes and fewer repetitions, to finish in well under two minutes.
    pub quick: bool,
    /// Overrides N (timers for W1, W3, W5; live timers for W2).
    pub n: Option<usize>,
}

impl Config {
    /// N for W1, W3 and W5.
    pub fn n(&self) -> usize {
        self.n
            .unwrap_or(if self.quick { 200_000 } else { 1_000_000 })
    }

    /// Live timers in W2's steady state.
    pub fn churn_live(&self) -> usize {
        self.n
            .unwrap_or(if self.quick { 100_000 } else { 1_000_000 })
    }

    /// Repetitions of each measurement (the best one is reported).
    pub fn reps(&self) -> usize {
        3
    }

    /// Largest N the flat wheel runs W1 at: it walks every slot's list every tick, so an entry
    /// `r` ms out costs `r / 512` visits, and a day of ticks is 86.4 million slot visits.
    pub fn flat_cap(&self) -> usize {
        if self.quick { 10_000 } else { 100_000 }
    }

    /// W6: add + cancel pairs per thread.
    pub fn service_ops(&self) -> usize {
        if self.quick { 500_000 } else { 2_000_000 }
    }

    /// W6 latency: single adds timed one by one.
    pub fn latency_ops(&self) -> usize {
        if self.quick { 200_000 } else { 1_000_000 }
    }

    /// W7: pending timers, and the idle window they are watched over.
    pub fn idle(&self) -> (usize, Duration) {
        if self.quick {
            (100_000, Duration::from_secs(2))
        } else {
            (1_000_000, Duration::from_secs(5))
        }
    }

    /// W8: timers, and the window their deadlines are spread over.
    pub fn accuracy(&self) -> (usize, Duration) {
        if self.quick {
            (20_000, Duration::from_secs(1))
        } else {
            (100_000, Duration::from_secs(2))
        }
    }

    /// W4's sizes.
    pub fn growth_sizes(&self) -> Vec<usize> {
        if self.quick {
            vec![10_000, 100_000, 1_000_000]
        } else {
            vec![10_000, 100_000, 1_000_000, 10_000_000]
        }
    }
}

/// A target of `docs/workloads.md`, checked against this run's figures.
#[derive(Clone, Debug, PartialEq)]
pub struct Check {
    /// Workload id.
    pub workload: &'static str,
    /// The target, in the words of `docs/workloads.md`.
    pub target: String,
    /// What this run measured.
    pub measured: String,
    /// Whether the target is met; `None` when this run could not tell (a size not run).
    pub met: Option<bool>,
}

/// What a scenario produced.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    /// Result tables.
    pub tables: Vec<Table>,
    /// Charts drawn from this run (written next to the report).
    pub charts: Vec<Chart>,
    /// Targets checked.
    pub checks: Vec<Check>,
}

/// One workload over all implementations that can run it.
pub trait Scenario {
    /// Short id, as `--only` takes it: `W1`.
    fn id(&self) -> &'static str;
    /// One-line title.
    fn title(&self) -> &'static str;
    /// Runs it; `progress` gets one line per measurement.
    fn run(&self, cfg: &Config, progress: &mut dyn FnMut(&str)) -> Outcome;
}

/// Every scenario, in order.
pub fn all() -> Vec<Box<dyn Scenario>> {
    vec![
        Box::new(w1_long_range::LongRange),
        Box::new(w2_churn::Churn),
        Box::new(w3_short_range::ShortRange),
        Box::new(w4_growth::Growth),
        Box::new(w5_memory::Memory),
        Box::new(w6_threads::Threads),
        Box::new(w7_idle::Idle),
        Box::new(w8_accuracy::Accuracy),
        Box::new(w9_steady::Steady),
        Box::new(w10_six_million_tasks::Demo),
        Box::new(w11_futures::Futures),
        Box::new(w12_slow_tasks::Slow),
        Box::new(durable::Durable),
        Box::new(durable::DurableCluster),
    ]
}

/// Best of `reps` runs.
fn best(reps: usize, mut f: impl FnMut() -> Timing) -> Timing {
    (1..reps.max(1)).fold(f(), |b, _| b.min(f()))
}

fn measure(
    progress: &mut dyn FnMut(&str),
    what: &str,
    reps: usize,
    mut f: impl FnMut() -> Timing,
) -> Timing {
    progress(&format!("{what} (best of {reps})"));
    best(reps, &mut f)
}

fn ratio_of(base: f64, ours: f64) -> f64 {
    base / ours
}

/// The fastest of `reps` runs of a W2 shape (keeping the lowest peak memory seen).
fn best_churn(reps: usize, mut run: impl FnMut() -> ChurnResult) -> ChurnResult {
    let mut best = run();
    for _ in 1..reps {
        let r = run();
        if r.timing.elapsed < best.timing.elapsed {
            best = ChurnResult {
                peak_bytes: best.peak_bytes.min(r.peak_bytes),
                ..r
            };
        }
    }
    best
}

/// Runs `f` and returns its result and the seconds it took.
pub fn timed<R>(f: impl FnOnce() -> R) -> (R, f64) {
    let s = Instant::now();
    let r = f();
    (r, s.elapsed().as_secs_f64())
}
