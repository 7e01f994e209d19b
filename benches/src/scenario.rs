//! Scenarios: the workloads run over every implementation, best of a few repetitions, as tables.
//!
//! A [`Scenario`] is one workload with an id (`W1`...), a title and a `run` that returns an
//! [`Outcome`]: tables, charts and target checks. The `wheelbench` program runs the ones
//! selected with `--only`. The threaded `Timer` scenarios (W6–W8, on the real clock) are in the
//! `service` submodule; W9, the steady-state server, in `steady`; W10, the demo through the
//! service, in `demo`; W11, the futures under tokio, in `futures`; W12, slow tasks among punctual
//! ones, in `slow`.

mod demo;
mod futures;
mod service;
mod slow;
mod steady;

pub use demo::{DemoResult, demo_heap, demo_timer};
pub use slow::{SlowResult, slow_heap, slow_timer};
pub use steady::{SteadyParams, steady_state};

use std::time::{Duration, Instant};

use tickwheel_wheel::TimingWheel;

use crate::alloc;
use crate::impls::delay_queue::TokioDelayQueue;
use crate::impls::flat::FlatWheel;
use crate::impls::heap::LazyHeap;
use crate::impls::hhwt::{Hhwt, HhwtCancel};
use crate::impls::pq::Pq;
use crate::report::{self, Table};
use crate::svg::{Chart, Series};
use crate::targets;
use crate::workloads::{
    self, ChurnParams, ChurnResult, Job, MemoryResult, SEED, Timing, UniformParams,
};
use crate::{Cancel, TimerQueue};

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

/// A target from the design brief, checked against this run's figures.
#[derive(Clone, Debug, PartialEq)]
pub struct Check {
    /// Workload id.
    pub workload: &'static str,
    /// The target, as the brief states it.
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
        Box::new(LongRange),
        Box::new(Churn),
        Box::new(ShortRange),
        Box::new(Growth),
        Box::new(Memory),
        Box::new(service::Threads),
        Box::new(service::Idle),
        Box::new(service::Accuracy),
        Box::new(steady::Steady),
        Box::new(demo::Demo),
        Box::new(futures::Futures),
        Box::new(slow::Slow),
    ]
}

/// An implementation in an insert-then-fire workload: its name and the workload instantiated for it.
#[derive(Clone, Copy)]
struct Contender {
    name: &'static str,
    run: fn(&[u64]) -> Timing,
}

fn contender<Q: TimerQueue<u64>>() -> Contender {
    Contender {
        name: Q::NAME,
        run: workloads::insert_then_fire::<Q>,
    }
}

/// The implementations that run W1, W3 and W4 at any size, ours first.
fn contenders() -> [Contender; 5] {
    [
        contender::<TimingWheel<u64>>(),
        contender::<LazyHeap<u64>>(),
        contender::<Pq<u64>>(),
        contender::<Hhwt<u64>>(),
        contender::<TokioDelayQueue<u64>>(),
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

/// W1: long range.
struct LongRange;

impl Scenario for LongRange {
    fn id(&self) -> &'static str {
        "W1"
    }

    fn title(&self) -> &'static str {
        "long range: deadlines log-uniform 1 ms ..= 24 h, insert all then fire all"
    }

    fn run(&self, cfg: &Config, progress: &mut dyn FnMut(&str)) -> Outcome {
        let n = cfg.n();
        let reps = cfg.reps();
        let deadlines = workloads::long_range_deadlines(n, SEED);
        let mut t = Table::new(
            format!("W1 long range, N = {}", report::count(n)),
            &["implementation", "N", "ns/timer", "baseline/ours"],
        );
        let mut out = Outcome::default();
        let mut ours = 0.0;
        let mut by_name = Vec::new();
        for c in contenders() {
            let tm = measure(progress, &format!("W1 {}", c.name), reps, || {
                (c.run)(&deadlines)
            });
            let x = tm.ns_per_op();
            if by_name.is_empty() {
                ours = x;
            }
            by_name.push((c.name, x));
            let r = if by_name.len() == 1 {
                "1.00x (ours)".to_owned()
            } else {
                report::ratio(ratio_of(x, ours))
            };
            t.row(vec![c.name.to_owned(), report::count(n), report::ns(x), r]);
            if by_name.len() == 1 {
                let batch = measure(
                    progress,
                    "W1 tickwheel-wheel, batch drain (one advance)",
                    reps,
                    || workloads::insert_then_fire_one_advance(&deadlines),
                );
                t.row(vec![
                    "tickwheel-wheel, batch drain: one advance (not how a timer thread drives it)"
                        .to_owned(),
                    report::count(n),
                    report::ns(batch.ns_per_op()),
                    "not compared".to_owned(),
                ]);
            }
        }
        let fn_ = n.min(cfg.flat_cap());
        let small = &deadlines[..fn_];
        let ours_small = measure(
            progress,
            &format!("W1 tickwheel-wheel at N = {fn_}"),
            reps,
            || workloads::insert_then_fire::<TimingWheel<u64>>(small),
        )
        .ns_per_op();
        let flat_reps = if cfg.quick { 1 } else { 2 };
        let flat = measure(
            progress,
            &format!("W1 flat wheel at N = {fn_}"),
            flat_reps,
            || workloads::insert_then_fire::<FlatWheel<u64>>(small),
        )
        .ns_per_op();
        t.row(vec![
            "tickwheel-wheel (same N as flat)".to_owned(),
            report::count(fn_),
            report::ns(ours_small),
            "1.00x (ours)".to_owned(),
        ]);
        t.row(vec![
            FlatWheel::<u64>::NAME.to_owned(),
            report::count(fn_),
            report::ns(flat),
            report::ratio(ratio_of(flat, ours_small)),
        ]);
        t.note("ratio = baseline ns / ours ns, same run; > 1 means ours is faster");
        t.note(format!(
            "the flat wheel runs at N = {} only: it visits every 1 ms tick of the day (86.4M) and walks \
             each slot's whole list per visit, so its cost per timer does not fall with N; its ratio is \
             against ours at the same N",
            report::count(fn_)
        ));
        t.note("every implementation is driven as its timer thread drives it: ours advances to each next_expiration() in turn (so buckets cascade), the peers step through their deadlines");
        t.note("every run checks: all N fired exactly once (count and checksum), none past the advance target");
        let get = |name: &str| by_name.iter().find(|(n, _)| *n == name).map(|&(_, x)| x);
        if let Some(h) = get(LazyHeap::<u64>::NAME) {
            out.checks
                .push(targets::ratio("W1.heap", ratio_of(h, ours)));
        }
        out.checks
            .push(targets::ratio("W1.flat", ratio_of(flat, ours_small)));
        if let Some(h) = get(Hhwt::<u64>::NAME) {
            out.checks
                .push(targets::ratio("W1.hhwt", ratio_of(h, ours)));
        }
        out.checks.push(targets::check(
            "W1.ns",
            format!("{} ns", report::ns(ours)),
            Some(ours <= 80.0),
        ));
        out.tables.push(t);
        out
    }
}

/// A W2 shape's target against the compacting heap: at least as fast, at no more of its peak
/// memory (unknown without the counting allocator).
fn heap_check(key: &str, ours: &ChurnResult, heap: &ChurnResult) -> Check {
    let r = ratio_of(heap.timing.ns_per_op(), ours.timing.ns_per_op());
    targets::check(
        key,
        format!(
            "{} at {:.2} of its peak memory",
            report::ratio(r),
            ours.peak_bytes as f64 / heap.peak_bytes.max(1) as f64
        ),
        alloc::is_active().then_some(r >= 1.0 && ours.peak_bytes <= heap.peak_bytes),
    )
}

/// W2: churn.
struct Churn;

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

fn churn_best<Q: Cancel<u64>>(
    p: &ChurnParams,
    reps: usize,
    progress: &mut dyn FnMut(&str),
) -> ChurnResult {
    progress(&format!("W2 {} (best of {reps})", Q::NAME));
    best_churn(reps, || workloads::churn::<Q>(p))
}

impl Scenario for Churn {
    fn id(&self) -> &'static str {
        "W2"
    }

    fn title(&self) -> &'static str {
        "churn (Kafka purgatory): 30 s timeouts, 99% cancelled after 1..=1000 ms, 1 ms steps"
    }

    fn run(&self, cfg: &Config, progress: &mut dyn FnMut(&str)) -> Outcome {
        let live = cfg.churn_live();
        let window = if cfg.quick { 10_000 } else { 15_000 };
        let p = ChurnParams::for_live(live, window);
        let reps = 2;
        let counting = alloc::is_active();
        type Run = fn(&ChurnParams, usize, &mut dyn FnMut(&str)) -> ChurnResult;
        let runs: [(&str, Run); 6] = [
            (
                <TimingWheel<u64> as TimerQueue<u64>>::NAME,
                churn_best::<TimingWheel<u64>>,
            ),
            (LazyHeap::<u64>::NAME, churn_best::<LazyHeap<u64>>),
            (Pq::<u64>::NAME, churn_best::<Pq<u64>>),
            (
                TokioDelayQueue::<u64>::NAME,
                churn_best::<TokioDelayQueue<u64>>,
            ),
            (HhwtCancel::<u64>::NAME, churn_best::<HhwtCancel<u64>>),
            (FlatWheel::<u64>::NAME, churn_best::<FlatWheel<u64>>),
        ];
        let results: Vec<(&str, ChurnResult)> = runs
            .iter()
            .map(|&(name, run)| (name, run(&p, reps, progress)))
            .collect();
        let ours = results[0].1;
        let mut t = Table::new(
            format!("W2 churn, ~{} live timers", report::count(live)),
            &[
                "implementation",
                "ns/op",
                "Mops/s",
                "baseline/ours (time)",
                "peak MiB",
                "peak B/live",
                "baseline/ours (peak)",
            ],
        );
        for (i, (name, r)) in results.iter().enumerate() {
            let x = r.timing.ns_per_op();
            let (rt, rm) = if i == 0 {
                ("1.00x (ours)".to_owned(), "1.00x (ours)".to_owned())
            } else {
                (
                    report::ratio(ratio_of(x, ours.timing.ns_per_op())),
                    report::ratio(r.peak_bytes as f64 / ours.peak_bytes.max(1) as f64),
                )
            };
            t.row(vec![
                (*name).to_owned(),
                report::ns(x),
                format!("{:.1}", 1e3 / x),
                rt,
                report::mib(r.peak_bytes),
                format!("{:.0}", r.peak_bytes as f64 / r.max_live.max(1) as f64),
                rm,
            ]);
        }
        t.note(format!(
            "{} inserts per ms, each with a 30 s timeout; 1 in {} times out, the others are cancelled \
             uniform 1..={} ms after insert; expected steady state {:.0} live (Little's law), measured max {}",
            p.rate_per_ms, p.timeout_one_in, p.complete_max_ms, p.expected_live(), ours.max_live
        ));
        t.note(format!(
            "virtual clock advanced in 1 ms steps; {} s untimed warm-up (to reach the steady state), then a \
             {} s timed window; op = insert, cancel or fire ({} ops in the window); totals over the run: \
             {} inserted, {} cancelled, {} fired",
            p.warmup_ms / 1000,
            p.window_ms / 1000,
            ours.timing.ops,
            ours.inserted,
            ours.cancelled,
            ours.fired
        ));
        t.note("peak = highest heap bytes the implementation held at once over the whole run (counting allocator); peak B/live = peak / max live timers");
        t.note("every run checks: each cancel of a pending timer succeeds, cancel and fire counts match the plan exactly, no timer fires early or more than 1 ms late");
        if !counting {
            t.note("counting allocator not installed: memory columns are 0");
        }
        let mut out = Outcome::default();
        let get = |name: &str| results.iter().find(|(n, _)| *n == name).map(|&(_, r)| r);
        if let Some(pq) = get(Pq::<u64>::NAME) {
            out.checks.push(targets::ratio(
                "W2.pq",
                ratio_of(pq.timing.ns_per_op(), ours.timing.ns_per_op()),
            ));
        }
        if let Some(h) = get(LazyHeap::<u64>::NAME) {
            out.checks.push(heap_check("W2.heap", &ours, &h));
        }
        out.tables.push(t);
        out.tables
            .push(uniform_shape(cfg, reps, &mut out.checks, progress));
        out
    }
}

fn uniform_best<Q: Cancel<u64>>(
    p: &UniformParams,
    reps: usize,
    progress: &mut dyn FnMut(&str),
) -> ChurnResult {
    progress(&format!("W2 uniform {} (best of {reps})", Q::NAME));
    best_churn(reps, || workloads::churn_uniform::<Q>(p))
}

/// W2's second shape: uniformly random cancels among N live timers of one 30 s timeout.
fn uniform_shape(
    cfg: &Config,
    reps: usize,
    checks: &mut Vec<Check>,
    progress: &mut dyn FnMut(&str),
) -> Table {
    let p = UniformParams {
        live: cfg.churn_live(),
        timeout_ms: 30_000,
        window_ms: if cfg.quick { 5_000 } else { 10_000 },
    };
    type Run = fn(&UniformParams, usize, &mut dyn FnMut(&str)) -> ChurnResult;
    let runs: [(&str, Run); 5] = [
        (
            <TimingWheel<u64> as TimerQueue<u64>>::NAME,
            uniform_best::<TimingWheel<u64>>,
        ),
        (LazyHeap::<u64>::NAME, uniform_best::<LazyHeap<u64>>),
        (Pq::<u64>::NAME, uniform_best::<Pq<u64>>),
        (
            TokioDelayQueue::<u64>::NAME,
            uniform_best::<TokioDelayQueue<u64>>,
        ),
        (HhwtCancel::<u64>::NAME, uniform_best::<HhwtCancel<u64>>),
    ];
    let results: Vec<(&str, ChurnResult)> = runs
        .iter()
        .map(|&(name, run)| (name, run(&p, reps, progress)))
        .collect();
    let ours = results[0].1;
    let mut t = Table::new(
        format!(
            "W2 uniform cancels, ~{} live timers of one 30 s timeout",
            report::count(p.live)
        ),
        &[
            "implementation",
            "ns/op",
            "baseline/ours (time)",
            "peak MiB",
            "baseline/ours (peak)",
        ],
    );
    for (i, (name, r)) in results.iter().enumerate() {
        let x = r.timing.ns_per_op();
        let (rt, rm) = if i == 0 {
            ("1.00x (ours)".to_owned(), "1.00x (ours)".to_owned())
        } else {
            (
                report::ratio(ratio_of(x, ours.timing.ns_per_op())),
                report::ratio(r.peak_bytes as f64 / ours.peak_bytes.max(1) as f64),
            )
        };
        t.row(vec![
            (*name).to_owned(),
            report::ns(x),
            rt,
            report::mib(r.peak_bytes),
            rm,
        ]);
    }
    t.note(format!(
        "{} inserts per ms for 30 s of warm-up (untimed), then a {} s window in which each ms also cancels {} timers picked uniformly among the live ones; 1 ms steps; op = insert, cancel or fire ({} in the window); max live {}",
        p.rate_per_ms(),
        p.window_ms / 1000,
        p.rate_per_ms() / 2,
        ours.timing.ops,
        ours.max_live
    ));
    t.note("every run checks: each cancel of a live timer succeeds, nothing fires early or more than 1 ms late, the pending count adds up");
    let get = |name: &str| results.iter().find(|(n, _)| *n == name).map(|&(_, r)| r);
    if let Some(h) = get(LazyHeap::<u64>::NAME) {
        checks.push(heap_check("W2u.heap", &ours, &h));
    }
    if let Some(pq) = get(Pq::<u64>::NAME) {
        checks.push(targets::ratio(
            "W2u.pq",
            ratio_of(pq.timing.ns_per_op(), ours.timing.ns_per_op()),
        ));
    }
    t
}

/// W3: short range.
struct ShortRange;

impl Scenario for ShortRange {
    fn id(&self) -> &'static str {
        "W3"
    }

    fn title(&self) -> &'static str {
        "short range: deadlines uniform 1..=500 ms, insert all then fire all"
    }

    fn run(&self, cfg: &Config, progress: &mut dyn FnMut(&str)) -> Outcome {
        let n = cfg.n();
        let reps = cfg.reps();
        let deadlines = workloads::short_range_deadlines(n, SEED);
        let mut list = contenders().to_vec();
        list.insert(1, contender::<FlatWheel<u64>>());
        let mut t = Table::new(
            format!("W3 short range, N = {}", report::count(n)),
            &["implementation", "ns/timer", "baseline/ours"],
        );
        let mut ours = 0.0;
        let mut out = Outcome::default();
        for (i, c) in list.iter().enumerate() {
            let x = measure(progress, &format!("W3 {}", c.name), reps, || {
                (c.run)(&deadlines)
            })
            .ns_per_op();
            if i == 0 {
                ours = x;
            }
            let r = if i == 0 {
                "1.00x (ours)".to_owned()
            } else {
                report::ratio(ratio_of(x, ours))
            };
            t.row(vec![c.name.to_owned(), report::ns(x), r]);
            if c.name == FlatWheel::<u64>::NAME {
                out.checks
                    .push(targets::ratio("W3.flat", ratio_of(x, ours)));
            }
            if c.name == Hhwt::<u64>::NAME {
                out.checks
                    .push(targets::ratio("W3.hhwt", ratio_of(x, ours)));
            }
        }
        t.note("ratio = baseline ns / ours ns, same run; each implementation steps through its expirations up to 500 ms");
        t.note("every run checks: all N fired exactly once (count and checksum)");
        out.tables.push(t);
        out
    }
}

/// W4: growth.
struct Growth;

impl Scenario for Growth {
    fn id(&self) -> &'static str {
        "W4"
    }

    fn title(&self) -> &'static str {
        "growth: W1 at 10k, 100k, 1M, 10M timers"
    }

    fn run(&self, cfg: &Config, progress: &mut dyn FnMut(&str)) -> Outcome {
        let sizes = cfg.growth_sizes();
        let all_sizes = [10_000usize, 100_000, 1_000_000, 10_000_000];
        let largest = *sizes.last().unwrap_or(&10_000);
        let deadlines = workloads::long_range_deadlines(largest, SEED);
        let mut header = vec!["implementation".to_owned()];
        header.extend(
            all_sizes
                .iter()
                .map(|&s| format!("N = {}", report::count(s))),
        );
        header.push(format!("{} / 10k", report::count(largest)));
        let mut t = Table {
            title: "W4 growth: ns per timer (insert + fire), W1 deadlines".to_owned(),
            header,
            rows: Vec::new(),
            notes: Vec::new(),
        };
        let mut out = Outcome::default();
        let mut list = contenders().to_vec();
        list.push(contender::<FlatWheel<u64>>());
        let mut flat_last = None;
        let mut series: Vec<Series> = Vec::new();
        for c in &list {
            let is_flat = c.name == FlatWheel::<u64>::NAME;
            let mut row = vec![c.name.to_owned()];
            let mut points = Vec::new();
            for &s in &all_sizes {
                if !sizes.contains(&s) {
                    row.push("not run".to_owned());
                    continue;
                }
                if is_flat && s > cfg.flat_cap() {
                    row.push("not run".to_owned());
                    continue;
                }
                let reps = if s >= 1_000_000 || is_flat {
                    1.max(cfg.reps() - 1)
                } else {
                    cfg.reps()
                };
                let x = measure(
                    progress,
                    &format!("W4 {} at N = {}", c.name, report::count(s)),
                    reps,
                    || (c.run)(&deadlines[..s]),
                )
                .ns_per_op();
                if is_flat {
                    flat_last = Some(x);
                }
                points.push((s as f64, x));
                row.push(report::ns(x));
            }
            let growth = match (points.first(), points.last()) {
                (Some(&(10_000.0, a)), Some(&(n, b))) if n as usize == largest => {
                    format!("{:.2}x", b / a)
                }
                _ => "-".to_owned(),
            };
            if let (true, Some(&(_, a)), Some(&(_, b))) =
                (series.is_empty(), points.first(), points.last())
            {
                out.checks.push(targets::check(
                    "W4.growth",
                    if largest == 10_000_000 {
                        format!("{:.2}x", b / a)
                    } else {
                        format!("10M not run; at {}: {:.2}x", report::count(largest), b / a)
                    },
                    (largest == 10_000_000).then_some(b <= 2.0 * a),
                ));
            }
            row.push(growth);
            t.rows.push(row);
            series.push(Series {
                name: c.name.to_owned(),
                points,
            });
        }
        out.charts.push(Chart {
            file: "w4-growth.svg",
            title: "W4: ns per timer (insert + fire, stepped) vs pending timers".to_owned(),
            x_label: "timers (N)".to_owned(),
            y_label: "ns per timer".to_owned(),
            log_x: true,
            log_y: true,
            series,
        });
        if sizes.len() < all_sizes.len() {
            t.note("10M: not run in --quick mode (run without --quick)");
        }
        t.note(format!(
            "flat wheel: run up to N = {} only; every 1 ms tick of the day is visited and each slot's whole list \
             is walked per visit (about 9,000 visits per timer for these deadlines, cache misses once the slab \
             outgrows the cache): at {} ns/timer, 1M timers would take {:.0} s per run",
            report::count(cfg.flat_cap()),
            flat_last.map_or("?".to_owned(), report::ns),
            flat_last.unwrap_or(0.0) * 1e6 / 1e9
        ));
        t.note("best of 3 repetitions below 1M, best of 2 from 1M and for the flat wheel");
        out.tables.push(t);
        out
    }
}

/// W5: memory per pending timer.
struct Memory;

fn mem_row<Q: TimerQueue<Job>>(
    deadlines: &[u64],
    progress: &mut dyn FnMut(&str),
) -> (String, MemoryResult) {
    progress(&format!("W5 {}", Q::NAME));
    (
        Q::NAME.to_owned(),
        workloads::memory_per_timer::<Q>(deadlines),
    )
}

impl Scenario for Memory {
    fn id(&self) -> &'static str {
        "W5"
    }

    fn title(&self) -> &'static str {
        "memory: bytes per pending timer holding a Box<dyn FnOnce() + Send> (no captures)"
    }

    fn run(&self, cfg: &Config, progress: &mut dyn FnMut(&str)) -> Outcome {
        let n = cfg.n();
        let deadlines = workloads::long_range_deadlines(n, SEED);
        let mut t = Table::new(
            format!("W5 memory per pending timer, N = {}", report::count(n)),
            &[
                "implementation",
                "bytes/timer",
                "peak bytes/timer while inserting",
            ],
        );
        let mut out = Outcome::default();
        if !alloc::is_active() {
            t.note("counting allocator not installed: nothing measured");
            out.tables.push(t);
            return out;
        }
        let rows = [
            mem_row::<TimingWheel<Job>>(&deadlines, progress),
            mem_row::<LazyHeap<Job>>(&deadlines, progress),
            mem_row::<Pq<Job>>(&deadlines, progress),
            mem_row::<FlatWheel<Job>>(&deadlines, progress),
            mem_row::<Hhwt<Job>>(&deadlines, progress),
            mem_row::<HhwtCancel<Job>>(&deadlines, progress),
            mem_row::<TokioDelayQueue<Job>>(&deadlines, progress),
        ];
        for (name, r) in &rows {
            t.row(vec![
                name.clone(),
                format!("{:.1}", r.retained_per_timer),
                format!("{:.1}", r.peak_per_timer),
            ]);
        }
        let own = workloads::wheel_heap_bytes_per_timer(&deadlines);
        t.note(format!(
            "heap bytes held after inserting N timers (W1 deadlines), divided by N, counting allocator; includes \
             growth slack of vectors (up to 2x); the closures capture nothing, so the boxes allocate nothing. \
             Cross-check: TimingWheel::heap_bytes() reports {own:.1} B/timer"
        ));
        t.note("every run checks the pending count after the inserts");
        out.checks.push(targets::check(
            "W5.bytes",
            format!("{:.1} B", rows[0].1.retained_per_timer),
            Some(rows[0].1.retained_per_timer <= 48.0),
        ));
        out.tables.push(t);
        progress("W5b tickwheel Timer");
        let (through_timer, reported) = workloads::timer_memory_per_task(&deadlines);
        let mut b = Table::new(
            format!(
                "W5b memory per pending task through Timer, N = {}",
                report::count(n)
            ),
            &["what", "bytes/task"],
        );
        b.row(vec![
            "Timer: everything it holds (slot, ring, shard wheel)".to_owned(),
            format!("{through_timer:.1}"),
        ]);
        b.row(vec![
            "of which Timer::heap_bytes() accounts for".to_owned(),
            format!("{reported:.1}"),
        ]);
        b.row(vec![
            "bare TimingWheel (W5, for comparison)".to_owned(),
            format!("{:.1}", rows[0].1.retained_per_timer),
        ]);
        b.note("`add_or_submit(Task::after(d, || {}))` with W1's deadlines on a manual clock, the handle dropped; heap bytes held after the adds (counting allocator, the timer built before the measurement starts), divided by N; the service keeps one 64-byte slot per task (a cache line: the task's state word, its closure, deadlines and wheel link) besides the shard wheel's own entry and record");
        out.tables.push(b);
        out
    }
}

/// Runs `f` and returns its result and the seconds it took.
pub fn timed<R>(f: impl FnOnce() -> R) -> (R, f64) {
    let s = Instant::now();
    let r = f();
    (r, s.elapsed().as_secs_f64())
}
