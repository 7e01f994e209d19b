//! W3, short range: the workload's deadlines and its report section.
//!
//! N timers with deadlines uniform in 1 ..= 500 ms; insert all, then fire all
//! ([`insert_then_fire`](crate::workloads::insert_then_fire)), over every contender of the
//! registry, the flat wheel (second, after ours) and hierarchical_hash_wheel_timer's cancellable
//! wheel (after its plain one: what a user who needs to cancel would pick from that crate).

use super::{Config, Outcome, Scenario, measure, ratio_of};
use crate::TimerQueue;
use crate::impls::flat::FlatWheel;
use crate::impls::hhwt::{Hhwt, HhwtCancel};
use crate::impls::{self, Contender};
use crate::report::targets;
use crate::report::{self, Table};
use crate::rng::Rng;
use crate::workloads::SEED;

/// Upper end of W3's deadlines, in ms.
pub const SHORT_MS: u64 = 500;

/// `n` deadlines uniform in `1 ..= SHORT_MS` (ms), in random order.
pub fn short_range_deadlines(n: usize, seed: u64) -> Vec<u64> {
    let mut rng = Rng::new(seed);
    (0..n).map(|_| rng.range(1, SHORT_MS)).collect()
}

/// W3: short range.
pub(super) struct ShortRange;

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
        let deadlines = short_range_deadlines(n, SEED);
        let mut list = impls::contenders();
        list.insert(1, Contender::of::<FlatWheel<u64>>());
        let plain = list.iter().position(|c| c.name == Hhwt::<u64>::NAME);
        let at = plain.map_or(list.len(), |i| i + 1);
        list.insert(at, Contender::of::<HhwtCancel<u64>>());
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
            if c.name == HhwtCancel::<u64>::NAME {
                out.checks
                    .push(targets::ratio("W3.hhwtc", ratio_of(x, ours)));
            }
        }
        t.note("ratio = baseline ns / ours ns, same run; each implementation steps through its expirations up to 500 ms");
        t.note("every run checks: all N fired exactly once (count and checksum)");
        out.tables.push(t);
        out
    }
}
