//! W9, a steady-state server: the workload, its measurement and its report section.
//!
//! Each virtual millisecond, `rate` adds: 70% request timeouts of 30 s, 20% short timeouts
//! uniform in 1..=500 ms, 10% long timers log-uniform in 1 s..=24 h. 95% of the adds are
//! cancelled (the request completed) 1..=1000 ms after their insert, when that comes before their
//! deadline. The clock moves one tick (1 ms) at a time and everything due is handed out. 40 s of
//! warm-up, untimed; then a 20 s window is timed: ns per operation (add, cancel or fire).

use std::time::{Duration, Instant};

use tickwheel_wheel::TimingWheel;

use super::{Config, Outcome, Scenario, best_churn, ratio_of};
#[cfg(feature = "tokio-peers")]
use crate::impls::delay_queue::TokioDelayQueue;
use crate::impls::heap::LazyHeap;
use crate::impls::hhwt::HhwtCancel;
use crate::impls::pq::Pq;
use crate::measure::alloc;
use crate::report::targets;
use crate::report::{self, Table};
use crate::rng::Rng;
use crate::workloads::{ChurnResult, SEED, Timing};
use crate::{Cancel, TimerQueue};

/// The shape of W9.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SteadyParams {
    /// Adds per ms.
    pub rate_per_ms: u64,
    /// Untimed warm-up, ms.
    pub warmup_ms: u64,
    /// Timed window after it, ms.
    pub window_ms: u64,
}

impl SteadyParams {
    /// The shape docs/workloads.md defines (1,000 adds per ms, 40 s + 20 s); `quick` keeps the mix and the
    /// durations at a tenth of the rate.
    pub fn for_config(cfg: &Config) -> Self {
        SteadyParams {
            rate_per_ms: if cfg.quick { 100 } else { 1_000 },
            warmup_ms: 40_000,
            window_ms: 20_000,
        }
    }
}

/// Cancels are scheduled at most this far ahead (1..=1000 ms), in a ring of this many ms.
const RING: usize = 1024;

/// A timer's delay, ms, drawn from W9's mix.
fn delay(rng: &mut Rng) -> u64 {
    match rng.range(0, 99) {
        0..=69 => 30_000,
        70..=89 => rng.range(1, 500),
        // Log-uniform in 1 s ..= 24 h.
        _ => {
            let (lo, hi) = (1_000f64, 86_400_000f64);
            ((lo.ln() + rng.unit() * (hi.ln() - lo.ln())).exp() as u64).clamp(1_000, 86_400_000)
        }
    }
}

/// W9 over `Q`. Items are their own deadlines, so every fire is checked: never early, never more
/// than 1 ms late. Every cancel targets a timer whose deadline has not come (so it must succeed),
/// and the pending count must add up at the end.
pub fn steady_state<Q: Cancel<u64>>(p: &SteadyParams) -> ChurnResult {
    let mut rng = Rng::new(SEED ^ 0x5EAD_5747);
    // ring[t % RING]: the timers to cancel at ms t. Allocated before the memory measurement.
    let mut ring: Vec<Vec<Q::Id>> = (0..RING)
        .map(|_| Vec::with_capacity(p.rate_per_ms as usize * 2))
        .collect();
    let (mut inserted, mut cancelled, mut fired) = (0u64, 0u64, 0u64);
    let (mut early, mut too_late, mut failed_cancels, mut max_live) = (0u64, 0u64, 0u64, 0usize);
    let (mut ops_at_window, mut window_start) = (0u64, None);

    let base = alloc::current();
    alloc::reset_peak();
    let mut q = Q::new();
    for t in 1..=p.warmup_ms + p.window_ms {
        if t == p.warmup_ms + 1 {
            ops_at_window = inserted + cancelled + fired;
            window_start = Some(Instant::now());
        }
        q.advance(t, |due| {
            fired += 1;
            early += u64::from(due > t);
            too_late += u64::from(t > due + 1);
        });
        let slot = &mut ring[t as usize % RING];
        for id in slot.drain(..) {
            if q.cancel(id) {
                cancelled += 1;
            } else {
                failed_cancels += 1;
            }
        }
        for _ in 0..p.rate_per_ms {
            let deadline = t + delay(&mut rng);
            let id = q.insert(deadline, deadline);
            inserted += 1;
            if rng.range(0, 99) < 95 {
                let at = t + rng.range(1, 1_000);
                if at < deadline {
                    ring[at as usize % RING].push(id);
                }
            }
        }
        max_live = max_live.max(q.len());
    }
    let elapsed = window_start.map_or(Duration::ZERO, |s| s.elapsed());
    let peak_bytes = alloc::peak().saturating_sub(base);
    let name = Q::NAME;
    assert_eq!(early, 0, "W9 {name}: {early} timers fired early");
    assert_eq!(too_late, 0, "W9 {name}: {too_late} fired over 1 ms late");
    assert_eq!(
        failed_cancels, 0,
        "W9 {name}: {failed_cancels} cancels failed"
    );
    assert_eq!(
        q.len() as u64,
        inserted - cancelled - fired,
        "W9 {name}: pending count does not add up"
    );
    drop(q);
    // Cancels still scheduled past the end are simply not made.
    drop(ring);
    ChurnResult {
        timing: Timing {
            elapsed,
            ops: inserted + cancelled + fired - ops_at_window,
        },
        peak_bytes,
        max_live,
        inserted,
        cancelled,
        fired,
    }
}

fn steady_best<Q: Cancel<u64>>(
    p: &SteadyParams,
    reps: usize,
    progress: &mut dyn FnMut(&str),
) -> ChurnResult {
    progress(&format!("W9 {} (best of {reps})", Q::NAME));
    best_churn(reps, || steady_state::<Q>(p))
}

/// W9: a steady-state server.
pub(super) struct Steady;

impl Scenario for Steady {
    fn id(&self) -> &'static str {
        "W9"
    }

    fn title(&self) -> &'static str {
        "steady-state server: adds of a request-timeout mix, 95% cancelled within a second, 1 ms steps"
    }

    fn run(&self, cfg: &Config, progress: &mut dyn FnMut(&str)) -> Outcome {
        let p = SteadyParams::for_config(cfg);
        // Each run is a minute of virtual time: two repetitions in the full run, one in quick.
        let reps = if cfg.quick { 1 } else { 2 };
        type Run = fn(&SteadyParams, usize, &mut dyn FnMut(&str)) -> ChurnResult;
        let runs: Vec<(&str, Run)> = vec![
            (
                <TimingWheel<u64> as TimerQueue<u64>>::NAME,
                steady_best::<TimingWheel<u64>>,
            ),
            (LazyHeap::<u64>::NAME, steady_best::<LazyHeap<u64>>),
            (Pq::<u64>::NAME, steady_best::<Pq<u64>>),
            (HhwtCancel::<u64>::NAME, steady_best::<HhwtCancel<u64>>),
            #[cfg(feature = "tokio-peers")]
            (
                TokioDelayQueue::<u64>::NAME,
                steady_best::<TokioDelayQueue<u64>>,
            ),
        ];
        let results: Vec<(&str, ChurnResult)> = runs
            .iter()
            .map(|&(name, run)| (name, run(&p, reps, progress)))
            .collect();
        let ours = results[0].1;
        let per_live = |r: &ChurnResult| r.peak_bytes as f64 / r.max_live.max(1) as f64;
        let mut t = Table::new(
            format!(
                "W9 steady state, {} adds per ms, ~{} live at the end",
                p.rate_per_ms,
                report::count(ours.max_live)
            ),
            &[
                "implementation",
                "ns/op",
                "baseline/ours (time)",
                "peak B per live timer",
                "baseline/ours (memory)",
            ],
        );
        for (i, (name, r)) in results.iter().enumerate() {
            let x = r.timing.ns_per_op();
            let (rt, rm) = if i == 0 {
                ("1.00x (ours)".to_owned(), "1.00x (ours)".to_owned())
            } else {
                (
                    report::ratio(ratio_of(x, ours.timing.ns_per_op())),
                    report::ratio(per_live(r) / per_live(&ours).max(f64::MIN_POSITIVE)),
                )
            };
            t.row(vec![
                (*name).to_owned(),
                report::ns(x),
                rt,
                format!("{:.0}", per_live(r)),
                rm,
            ]);
        }
        t.note(format!(
            "{} s warm-up (untimed), then a {} s window; op = add, cancel or fire ({} in the window: {} adds, {} cancels, {} fires over the whole run); peak memory per timer at the most live ({})",
            p.warmup_ms / 1000,
            p.window_ms / 1000,
            ours.timing.ops,
            ours.inserted,
            ours.cancelled,
            ours.fired,
            report::count(ours.max_live),
        ));
        t.note("every run checks: each cancel (always before the deadline) succeeds, nothing fires early or more than 1 ms late, the pending count adds up; the workload's own bookkeeping (a ring of cancels) is inside the timed loop for every implementation alike");
        let (best_name, best) = results[1..]
            .iter()
            .min_by(|a, b| a.1.timing.ns_per_op().total_cmp(&b.1.timing.ns_per_op()))
            .map(|&(n, r)| (n, r))
            .expect("peers ran");
        let ratio = ratio_of(best.timing.ns_per_op(), ours.timing.ns_per_op());
        let checks = vec![
            targets::check(
                "W9.peer",
                format!("{} ({best_name})", report::ratio(ratio)),
                Some(ratio >= targets::at_least("W9.peer")),
            ),
            targets::check(
                "W9.ns",
                report::ns(ours.timing.ns_per_op()),
                Some(ours.timing.ns_per_op() <= 50.0),
            ),
        ];
        Outcome {
            tables: vec![t],
            charts: Vec::new(),
            checks,
        }
    }
}
