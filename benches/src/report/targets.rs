//! The targets of `docs/workloads.md`, as one table: every target row
//! `wheelbench` reports is made from an entry here, so a target's words and its threshold live in
//! one place and cannot drift apart.

use crate::report;
use crate::scenario::Check;

/// One target: its key (used by the scenario that measures it), workload, words and, for a
/// "at least k times the baseline" target, k.
struct Target {
    key: &'static str,
    workload: &'static str,
    text: &'static str,
    at_least: Option<f64>,
}

const fn t(
    key: &'static str,
    workload: &'static str,
    text: &'static str,
    at_least: Option<f64>,
) -> Target {
    Target {
        key,
        workload,
        text,
        at_least,
    }
}

const TARGETS: &[Target] = &[
    t("W1.heap", "W1", ">= 3x heap", Some(3.0)),
    t("W1.flat", "W1", ">= 50x flat wheel", Some(50.0)),
    t(
        "W1.hhwt",
        "W1",
        ">= 2x hierarchical_hash_wheel_timer",
        Some(2.0),
    ),
    t("W1.ns", "W1", "<= 80 ns per timer (stepped)", None),
    t("W2.pq", "W2", "purgatory: >= 3x priority-queue", Some(3.0)),
    t(
        "W2.heap",
        "W2",
        "purgatory: >= 1x the compacting lazy heap at <= its peak memory",
        None,
    ),
    t("W2u.pq", "W2", "uniform: >= 3x priority-queue", Some(3.0)),
    t(
        "W2u.heap",
        "W2",
        "uniform: >= 1x the compacting lazy heap at <= its peak memory",
        None,
    ),
    t("W3.flat", "W3", ">= 0.8x flat wheel", Some(0.8)),
    t(
        "W3.hhwt",
        "W3",
        ">= 0.5x hierarchical_hash_wheel_timer",
        Some(0.5),
    ),
    t(
        "W3.hhwtc",
        "W3",
        ">= 1x hierarchical_hash_wheel_timer (cancellable)",
        Some(1.0),
    ),
    t("W4.growth", "W4", "ns/timer at 10M <= 2x at 10k", None),
    t("W5.bytes", "W5", "<= 48 B per timer", None),
    t(
        "W6.1",
        "W6",
        ">= 2x Mutex<BinaryHeap> + timer thread at 1 thread",
        Some(2.0),
    ),
    t(
        "W6.2",
        "W6",
        ">= 5x Mutex<BinaryHeap> + timer thread at 2 threads",
        Some(5.0),
    ),
    t(
        "W6.trend",
        "W6",
        "ratio does not fall from 1 to 2 threads",
        None,
    ),
    t("W7.wakeups", "W7", "0 wake-ups while nothing is due", None),
    t("W8.p99", "W8", "p99 lateness <= tick + 1 ms", None),
    t("W8.early", "W8", "zero early fires", None),
    t("W9.peer", "W9", ">= 3x the fastest peer", Some(3.0)),
    t("W9.ns", "W9", "<= 50 ns per operation", None),
    t(
        "W11.cpu",
        "W11",
        "timer cost per non-firing timeout <= 1/2 of tokio's",
        None,
    ),
    t(
        "W11.hot",
        "W11",
        "every hot-loop row: ours <= tokio's time",
        None,
    ),
    t(
        "W11.p99",
        "W11",
        "sleep lateness p99 <= tick + 1 ms, 0 early",
        None,
    ),
    t(
        "W12.p99",
        "W12",
        "isolation on: short tasks' p99 lateness <= tick + 2 ms",
        None,
    ),
    t(
        "W13.group",
        "W13",
        ">= 40,000 durable schedules/s from 1,000 concurrent callers (group commit)",
        None,
    ),
    t(
        "W13.batch",
        "W13",
        ">= 40,000 durable schedules/s by schedule_batch of 1,000 from 1 thread",
        None,
    ),
    t("W13.p99", "W13", "fire lateness p99 <= tick + 2 ms", None),
    t("W13.early", "W13", "zero early runs", None),
    t("W13.lost", "W13", "zero lost (or doubled) runs", None),
    t(
        "W13.idle",
        "W13",
        "0 store reads while nothing is due (jobs a day ahead)",
        None,
    ),
    t(
        "W13.first",
        "W13",
        "first overdue run <= 1 s after open (10M stored)",
        None,
    ),
    t(
        "W13.horizon",
        "W13",
        "horizon loaded <= 10 s after open (10M stored)",
        None,
    ),
    t(
        "W13.bytes",
        "W13",
        "<= 200 B on disk per job (64-byte payload)",
        None,
    ),
    t(
        "W14.p99",
        "W14",
        "3 nodes: fire lateness p99 <= tick + 5 ms",
        None,
    ),
    t(
        "W14.early",
        "W14",
        "zero early runs (1 node, 3 nodes, fail-over)",
        None,
    ),
    t(
        "W14.lost",
        "W14",
        "zero lost runs (1 node, 3 nodes, fail-over); none run twice but across a lease change",
        None,
    ),
    t(
        "W14.failover",
        "W14",
        "fail-over after a SIGKILL <= lease + 2 s (3 nodes)",
        None,
    ),
    t(
        "W14.idle",
        "W14",
        "0 statements beyond lease renewal while idle, per node (jobs a day ahead)",
        None,
    ),
];

fn lookup(key: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.key == key)
}

fn find(key: &str) -> &'static Target {
    lookup(key).unwrap_or_else(|| panic!("no target {key:?} in targets.rs"))
}

/// [`check`] for a key that comes from outside this program (W11's child process): `None` if
/// there is no such target, instead of a panic.
pub fn try_check(key: &str, measured: String, met: Option<bool>) -> Option<Check> {
    lookup(key).map(|_| check(key, measured, met))
}

/// The target `key` against what this run `measured`, and whether it is `met` (`None`: this run
/// could not tell).
pub fn check(key: &str, measured: String, met: Option<bool>) -> Check {
    let t = find(key);
    Check {
        workload: t.workload,
        target: t.text.to_owned(),
        measured,
        met,
    }
}

/// The k of an "at least k times the baseline" target.
pub fn at_least(key: &str) -> f64 {
    find(key)
        .at_least
        .unwrap_or_else(|| panic!("target {key:?} is not a ratio"))
}

/// An "at least k times the baseline" target against the measured `ratio` (baseline / ours).
pub fn ratio(key: &str, ratio: f64) -> Check {
    check(key, report::ratio(ratio), Some(ratio >= at_least(key)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_unique_and_ratios_judge_by_their_threshold() {
        for (i, a) in TARGETS.iter().enumerate() {
            assert!(TARGETS[i + 1..].iter().all(|b| b.key != a.key), "{}", a.key);
        }
        assert_eq!(ratio("W1.heap", 3.0).met, Some(true));
        assert_eq!(ratio("W1.heap", 2.9).met, Some(false));
        assert_eq!(check("W9.ns", "40".into(), Some(true)).workload, "W9");
        assert_eq!(
            try_check("W11.hot", "x".into(), None).unwrap().workload,
            "W11"
        );
        assert!(try_check("W99.nope", "x".into(), None).is_none());
    }
}
