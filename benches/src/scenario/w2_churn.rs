//! W2, churn: both shapes' measurements and their report section.
//!
//! Kafka's purgatory shape: ~N live timers, each with a 30 s timeout, 99% cancelled uniform
//! 1..=1000 ms after their insert; the virtual clock advances in 1 ms steps, and a timed window
//! follows an untimed warm-up. The second shape: N live timers of one 30 s timeout, cancelled
//! uniformly at random among the live ones. Both over every cancelling contender of the registry
//! (the first also over the flat wheel); peak memory from the counting allocator.

use std::time::{Duration, Instant};

use super::{Check, Config, Outcome, Scenario, best_churn, ratio_of};
use crate::impls::flat::FlatWheel;
use crate::impls::heap::LazyHeap;
use crate::impls::pq::Pq;
use crate::impls::{self, Canceller};
use crate::measure::alloc;
use crate::report::targets;
use crate::report::{self, Table};
use crate::rng::Rng;
use crate::workloads::{ChurnResult, SEED, Timing};
use crate::{Cancel, TimerQueue};

/// W2's parameters: Kafka's purgatory shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChurnParams {
    /// Timers inserted per ms.
    pub rate_per_ms: u64,
    /// Every timer's timeout, ms.
    pub timeout_ms: u64,
    /// One timer in this many is left to time out; the others are cancelled.
    pub timeout_one_in: u64,
    /// A cancelled timer is cancelled this long after its insert: uniform in `1 ..= max`, ms.
    pub complete_max_ms: u64,
    /// Untimed warm-up, ms of virtual time (at least the timeout, to reach the steady state).
    pub warmup_ms: u64,
    /// Timed window after the warm-up, ms of virtual time.
    pub window_ms: u64,
}

impl ChurnParams {
    /// Parameters that keep about `live` timers pending in the steady state.
    pub fn for_live(live: usize, window_ms: u64) -> Self {
        let mut p = ChurnParams {
            rate_per_ms: 1,
            timeout_ms: 30_000,
            timeout_one_in: 100,
            complete_max_ms: 1000,
            warmup_ms: 31_000,
            window_ms,
        };
        p.rate_per_ms = ((live as f64 / p.mean_lifetime_ms()).round() as u64).max(1);
        p
    }

    /// Mean time a timer stays pending, ms.
    pub fn mean_lifetime_ms(&self) -> f64 {
        let timeout_share = 1.0 / self.timeout_one_in as f64;
        (1.0 - timeout_share) * (1 + self.complete_max_ms) as f64 / 2.0
            + timeout_share * self.timeout_ms as f64
    }

    /// Timers pending in the steady state, by Little's law.
    pub fn expected_live(&self) -> f64 {
        self.rate_per_ms as f64 * self.mean_lifetime_ms()
    }
}

/// W2: the churn loop. Each ms: advance to it (checking every fired timer is due, and late by no
/// more than 1 ms), cancel the timers completing now (each cancel must succeed: it comes long
/// before the timeout), insert `rate_per_ms` new ones.
pub fn churn<Q: Cancel<u64>>(p: &ChurnParams) -> ChurnResult {
    const RING: usize = 1024;
    assert!(p.complete_max_ms < RING as u64 && p.complete_max_ms < p.timeout_ms);
    let mut rng = Rng::new(SEED ^ 0xC0FFEE);
    // The cancel schedule, by ms modulo RING; allocated before the memory measurement starts.
    let mut ring: Vec<Vec<Q::Id>> = (0..RING)
        .map(|_| Vec::with_capacity(2 * p.rate_per_ms as usize + 64))
        .collect();
    let end = p.warmup_ms + p.window_ms;
    let (mut inserted, mut cancelled, mut fired) = (0u64, 0u64, 0u64);
    let (mut expect_cancelled, mut expect_fired) = (0u64, 0u64);
    let (mut early, mut too_late, mut failed_cancels) = (0u64, 0u64, 0u64);
    let (mut max_live, mut ops_at_window) = (0usize, 0u64);
    let mut window_start = None;

    let base = alloc::current();
    alloc::reset_peak();
    let mut q = Q::new();
    for t in 1..=end {
        if t == p.warmup_ms + 1 {
            ops_at_window = inserted + cancelled + fired;
            window_start = Some(Instant::now());
        }
        q.advance(t, |d| {
            fired += 1;
            early += u64::from(d > t);
            too_late += u64::from(t > d + 1);
        });
        for id in ring[(t % RING as u64) as usize].drain(..) {
            if q.cancel(id) {
                cancelled += 1;
            } else {
                failed_cancels += 1;
            }
        }
        for _ in 0..p.rate_per_ms {
            let deadline = t + p.timeout_ms;
            let id = q.insert(deadline, deadline);
            inserted += 1;
            if rng.range(1, p.timeout_one_in) == 1 {
                expect_fired += u64::from(deadline <= end);
            } else {
                let at = t + rng.range(1, p.complete_max_ms);
                expect_cancelled += u64::from(at <= end);
                ring[(at % RING as u64) as usize].push(id);
            }
        }
        max_live = max_live.max(q.len());
    }
    let elapsed = window_start.map_or(Duration::ZERO, |s| s.elapsed());
    let peak_bytes = alloc::peak().saturating_sub(base);
    let name = Q::NAME;
    assert_eq!(early, 0, "{name}: {early} timers fired early");
    assert_eq!(
        too_late, 0,
        "{name}: {too_late} timers fired more than 1 ms late"
    );
    assert_eq!(
        failed_cancels, 0,
        "{name}: {failed_cancels} cancels of pending timers failed"
    );
    assert_eq!(cancelled, expect_cancelled, "{name}: cancelled count");
    assert_eq!(fired, expect_fired, "{name}: fired count");
    assert_eq!(
        q.len() as u64,
        inserted - cancelled - fired,
        "{name}: pending count does not add up"
    );
    drop(q);
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

/// W2's second shape: `live` timers, all with the same timeout, cancelled uniformly at random
/// among the live ones (request timeouts that complete at any point of their life).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UniformParams {
    /// Timers pending once the warm-up is over.
    pub live: usize,
    /// Every timer's timeout, ms.
    pub timeout_ms: u64,
    /// Timed window after the warm-up, ms of virtual time.
    pub window_ms: u64,
}

impl UniformParams {
    /// Inserts per ms: `live` timers over one timeout.
    pub fn rate_per_ms(&self) -> u64 {
        (self.live as u64 / self.timeout_ms).max(1)
    }
}

/// W2, uniform shape. Warm-up: `rate` inserts per ms for one timeout (no cancels), so `live`
/// timers are pending. Then each ms of the window: advance to it (checking each fired timer is
/// due and at most 1 ms late), cancel `rate / 2` timers picked uniformly among the live ones
/// (each must succeed), insert `rate`. The bookkeeping (which timers are live) is allocated before
/// the memory measurement starts.
pub fn churn_uniform<Q: Cancel<u64>>(p: &UniformParams) -> ChurnResult {
    let rate = p.rate_per_ms();
    let total = (rate * (p.timeout_ms + p.window_ms)) as usize;
    let mut rng = Rng::new(SEED ^ 0x0051_F0A1);
    // The live timers (id, item) in any order, and each item's index there.
    let mut live: Vec<(Q::Id, u64)> = Vec::with_capacity(total);
    let mut pos: Vec<u32> = vec![u32::MAX; total];
    let (mut inserted, mut cancelled, mut fired) = (0u64, 0u64, 0u64);
    let (mut early, mut too_late, mut failed_cancels, mut max_live) = (0u64, 0u64, 0u64, 0usize);
    let (mut ops_at_window, mut window_start) = (0u64, None);

    let base = alloc::current();
    alloc::reset_peak();
    let mut q = Q::new();
    let take = |live: &mut Vec<(Q::Id, u64)>, pos: &mut Vec<u32>, i: usize| {
        let (id, item) = live.swap_remove(i);
        if let Some(&(_, moved)) = live.get(i) {
            pos[moved as usize] = i as u32;
        }
        pos[item as usize] = u32::MAX;
        id
    };
    for t in 1..=p.timeout_ms + p.window_ms {
        if t == p.timeout_ms + 1 {
            ops_at_window = inserted + cancelled + fired;
            window_start = Some(Instant::now());
        }
        q.advance(t, |item| {
            fired += 1;
            // Item k was inserted at ms k / rate + 1, due a timeout later.
            let due = item / rate + 1 + p.timeout_ms;
            early += u64::from(due > t);
            too_late += u64::from(t > due + 1);
            let i = pos[item as usize] as usize;
            take(&mut live, &mut pos, i);
        });
        if t > p.timeout_ms {
            for _ in 0..rate / 2 {
                if live.is_empty() {
                    break;
                }
                let i = rng.range(0, live.len() as u64 - 1) as usize;
                let id = take(&mut live, &mut pos, i);
                if q.cancel(id) {
                    cancelled += 1;
                } else {
                    failed_cancels += 1;
                }
            }
        }
        for _ in 0..rate {
            let item = inserted;
            let id = q.insert(t + p.timeout_ms, item);
            pos[item as usize] = live.len() as u32;
            live.push((id, item));
            inserted += 1;
        }
        max_live = max_live.max(q.len());
    }
    let elapsed = window_start.map_or(Duration::ZERO, |s| s.elapsed());
    let peak_bytes = alloc::peak().saturating_sub(base);
    let name = Q::NAME;
    assert_eq!(early, 0, "{name}: {early} timers fired early");
    assert_eq!(
        too_late, 0,
        "{name}: {too_late} timers fired more than 1 ms late"
    );
    assert_eq!(
        failed_cancels, 0,
        "{name}: {failed_cancels} cancels of live timers failed"
    );
    assert_eq!(q.len(), live.len(), "{name}: pending count does not add up");
    drop(q);
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
pub(super) struct Churn;

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
        let mut list = impls::cancellers();
        list.push(Canceller::of::<FlatWheel<u64>>());
        let results: Vec<(&str, ChurnResult)> = list
            .iter()
            .map(|c| {
                progress(&format!("W2 {} (best of {reps})", c.name));
                (c.name, best_churn(reps, || (c.churn)(&p)))
            })
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
    let results: Vec<(&str, ChurnResult)> = impls::cancellers()
        .iter()
        .map(|c| {
            progress(&format!("W2 uniform {} (best of {reps})", c.name));
            (c.name, best_churn(reps, || (c.uniform)(&p)))
        })
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
