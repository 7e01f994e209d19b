//! W1, long range: the workload's batch-drain variant and its report section.
//!
//! N timers with deadlines log-uniform in 1 ms ..= 24 h
//! ([`long_range_deadlines`](crate::workloads::long_range_deadlines)); insert all, then advance to
//! the last deadline as each implementation's timer thread would
//! ([`insert_then_fire`](crate::workloads::insert_then_fire)), over every contender of the
//! registry. The flat wheel runs at a smaller N only (it visits every 1 ms tick of the day), and
//! our wheel once more, advanced once to the end (the batch-drain row).

use std::hint::black_box;
use std::time::Instant;

use tickwheel_wheel::TimingWheel;

use super::{Config, Outcome, Scenario, measure, ratio_of};
use crate::TimerQueue;
use crate::impls;
use crate::impls::flat::FlatWheel;
use crate::impls::heap::LazyHeap;
use crate::impls::hhwt::Hhwt;
use crate::report::targets;
use crate::report::{self, Table};
use crate::workloads::{self, SEED, Timing};

/// W1's "batch drain" row: our wheel advanced ONCE to the last deadline, which no timer thread
/// does (it skips every cascade a stepped drive performs). Kept as a secondary figure, to show
/// what the cascades cost; the headline steps ([`TimerQueue::advance`] for the wheel).
pub fn insert_then_fire_one_advance(deadlines: &[u64]) -> Timing {
    let end = deadlines.iter().copied().max().unwrap_or(1);
    let expected_sum = deadlines.iter().fold(0u64, |s, &d| s.wrapping_add(d));
    let mut w = <TimingWheel<u64> as TimerQueue<u64>>::new();
    let start = Instant::now();
    for &d in deadlines {
        black_box(TimerQueue::insert(&mut w, d, d));
    }
    let (mut fired, mut sum) = (0usize, 0u64);
    TimingWheel::advance(&mut w, end, |d| {
        fired += 1;
        sum = sum.wrapping_add(d);
    });
    let elapsed = start.elapsed();
    assert_eq!(
        (fired, sum),
        (deadlines.len(), expected_sum),
        "tickwheel-wheel batch drain: fired a different set of timers"
    );
    Timing {
        elapsed,
        ops: deadlines.len() as u64,
    }
}

/// W1: long range.
pub(super) struct LongRange;

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
        for c in impls::contenders() {
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
                    || insert_then_fire_one_advance(&deadlines),
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
