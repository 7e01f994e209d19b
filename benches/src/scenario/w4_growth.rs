//! W4, growth: W1 at growing N, its report section and chart.
//!
//! W1's workload ([`insert_then_fire`](crate::workloads::insert_then_fire) of log-uniform
//! deadlines in 1 ms ..= 24 h) at 10k, 100k, 1M and 10M timers (10M not in `--quick`), over every
//! contender of the registry and the flat wheel (up to its cap): ns per timer by N, and how much
//! it grows from 10k to the largest N run.

use super::{Config, Outcome, Scenario, measure};
use crate::TimerQueue;
use crate::impls::flat::FlatWheel;
use crate::impls::{self, Contender};
use crate::report::svg::{Chart, Series};
use crate::report::targets;
use crate::report::{self, Table};
use crate::workloads::{self, SEED};

/// W4: growth.
pub(super) struct Growth;

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
        let mut list = impls::contenders();
        list.push(Contender::of::<FlatWheel<u64>>());
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
