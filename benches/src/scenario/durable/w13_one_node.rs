//! W13, durable jobs on one node: `tickwheel-durable` measured alone and against a Redis sorted
//! set and a PostgreSQL `FOR UPDATE SKIP LOCKED` worker; the measurement and its report section.
//!
//! Five parts, each on a fresh store in a temporary directory of its own:
//!
//! 1. durable schedules per second (fsync per commit; concurrent calls share one commit): one
//!    thread calling `schedule`, 1,000 threads calling it, one thread calling `schedule_batch` of
//!    1,000 jobs; with each call's acknowledgement latency as its caller saw it;
//! 2. fire lateness on the real clock, ours against a Redis poller and a PostgreSQL poller at
//!    1 s and 100 ms, with each one's queries per second while nothing is due and the CPU time
//!    of this process over the run;
//! 3. our store reads while jobs wait a day ahead;
//! 4. recovery: reopening a store of many jobs, some overdue, some within the horizon;
//! 5. bytes on disk per job (and after `redb::Database::compact` on a copy).
//!
//! The baselines need their servers (PostgreSQL at 127.0.0.1:5432, Redis at 127.0.0.1:6379).
//! Where one is absent its rows say so and the run goes on. A run keeps its baseline data in a
//! PostgreSQL schema and under a Redis key prefix of its own (process id and start time), both
//! removed at its end. Nothing here panics on a failure: a part that fails reports its error in
//! its table, and its targets as not met.
//!
//! The parts are in `schedules.rs` (1), `lateness.rs` (2 and 3) and `recovery.rs` (4 and 5);
//! what W14 shares with them is in `common.rs` and `pollers.rs` of the parent folder.

mod lateness;
mod recovery;
mod schedules;

use std::fs;
use std::path::Path;
use std::time::Duration;

use tempfile::TempDir;
use tickwheel_durable::{HandlerError, JobContext, Jobs, JobsBuilder};

use self::lateness::lateness_section;
use self::recovery::recovery_section;
use self::schedules::schedules_section;
use super::common::{OURS, PG_ADDR, chain, sweep_temp_dirs, temp_dir};
use crate::scenario::{Config, Outcome, Scenario};

/// The one kind of job every part schedules.
const KIND: &str = "w13";

/// Where the Redis server is.
const REDIS_ADDR: &str = "127.0.0.1:6379";

/// Prefix of this workload's temporary directories.
const TEMP_PREFIX: &str = "wheelbench-w13-";

/// The sizes of a run.
#[derive(Clone, Copy, Debug)]
struct Params {
    /// Part 1: how long (a) one thread schedules, (b) the concurrent callers schedule, (c) one
    /// thread schedules batches.
    single_for: Duration,
    group_for: Duration,
    batch_for: Duration,
    callers: usize,
    batch: usize,
    /// Part 2: jobs, the window their deadlines are spread over, and how far ahead it starts.
    late_n: usize,
    late_window: Duration,
    lead: Duration,
    /// Part 2's idle window for the baselines, and part 3's (ours, whose idle figure in part 2
    /// comes from it).
    idle_baselines: Duration,
    idle_ours: Duration,
    /// Part 4: jobs stored, overdue at the reopen, due within the horizon.
    stored: usize,
    overdue: usize,
    horizon_jobs: usize,
}

impl Params {
    fn of(cfg: &Config) -> Params {
        let q = cfg.quick;
        let s = |quick: u64, full: u64| Duration::from_secs(if q { quick } else { full });
        Params {
            single_for: s(1, 3),
            group_for: s(2, 5),
            batch_for: s(1, 3),
            callers: 1000,
            batch: 1000,
            late_n: if q { 2000 } else { 20_000 },
            late_window: s(2, 10),
            lead: Duration::from_millis(200),
            idle_baselines: s(2, 5),
            idle_ours: s(2, 10),
            stored: if q { 200_000 } else { 10_000_000 },
            overdue: 1000,
            horizon_jobs: if q { 10_000 } else { 100_000 },
        }
    }
}

/// W13: durable jobs on one node.
pub(in crate::scenario) struct Durable;

impl Scenario for Durable {
    fn id(&self) -> &'static str {
        "W13"
    }

    fn title(&self) -> &'static str {
        "durable jobs, one node: group-commit schedules, fire lateness against Redis and PostgreSQL \
         pollers, idle store reads, recovery, bytes per job (real clock, real disk)"
    }

    fn run(&self, cfg: &Config, progress: &mut dyn FnMut(&str)) -> Outcome {
        let p = Params::of(cfg);
        let mut out = Outcome::default();
        let swept = sweep_temp_dirs(TEMP_PREFIX);
        schedules_section(&p, progress, &mut out);
        if let Some(t) = out.tables.first_mut() {
            t.notes.extend(swept);
        }
        lateness_section(&p, (REDIS_ADDR, PG_ADDR), progress, &mut out);
        recovery_section(&p, progress, &mut out);
        out
    }
}

/// A handler that does nothing.
fn noop(_: &JobContext<'_>) -> Result<(), HandlerError> {
    Ok(())
}

/// Open jobs in a temporary directory of their own (the jobs close before the directory goes).
struct Fresh {
    jobs: Jobs,
    dir: TempDir,
}

/// Opens `builder` on a new store in a new temporary directory.
fn fresh(builder: JobsBuilder) -> Result<Fresh, String> {
    let dir = temp_dir(TEMP_PREFIX)?;
    let jobs = builder
        .open(dir.path().join("jobs.redb"))
        .map_err(|e| format!("{OURS}: open failed: {}", chain(&e)))?;
    Ok(Fresh { jobs, dir })
}

impl Fresh {
    /// Closes the jobs (every change on disk), then removes the directory.
    fn close(self) -> Result<(), String> {
        let closed = self
            .jobs
            .close()
            .map_err(|e| format!("close: {}", chain(&e)));
        drop(self.jobs);
        drop(self.dir);
        closed
    }
}

/// Size of the file at `path`, in bytes.
fn file_size(path: &Path) -> Result<u64, String> {
    fs::metadata(path)
        .map(|m| m.len())
        .map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use std::time::{Instant, SystemTime, UNIX_EPOCH};

    use super::super::common::{
        CLAIM, HOUR_MS, LateRun, Slots, index_of, late_offsets, now_ms, stale, thousands, wall_ns,
    };
    use super::super::pollers::{Queue, poll};
    use super::lateness::{lateness_section, ours_lateness};
    use super::recovery::recovery_deadline;
    use super::*;

    /// A queue in memory, for the poller's logic.
    struct MemQueue {
        jobs: Vec<(usize, i64)>,
        queries: u64,
    }

    impl Queue for MemQueue {
        fn insert(&mut self, jobs: &[(usize, i64)], _: char) -> Result<(), String> {
            self.jobs.extend_from_slice(jobs);
            self.jobs.sort_by_key(|&(_, d)| d);
            Ok(())
        }

        fn claim(&mut self, now_ms: i64) -> Result<Vec<(usize, i64)>, String> {
            self.queries += 1;
            let due = self
                .jobs
                .iter()
                .take_while(|&&(_, d)| d <= now_ms)
                .take(CLAIM)
                .count();
            Ok(self.jobs.drain(..due).collect())
        }
    }

    #[test]
    fn helpers() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(12_345_678), "12,345,678");
        assert_eq!(index_of(b"L123"), Some(123));
        assert_eq!(index_of(b"L7:pppp"), Some(7));
        assert_eq!(index_of(b"L"), None);
        assert_eq!(index_of(b"Lx:"), None);
        if Path::new("/proc/self").exists() {
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_nanos();
            // Gone and old; gone but recent; alive (this process) and old; not a run's name.
            assert!(stale("999999999-0-abc", '-'));
            assert!(!stale(&format!("999999999_{now}"), '_'));
            assert!(!stale(&format!("{}:0:x", std::process::id()), ':'));
            assert!(!stale("x-0", '-'));
        }
        let p = Params::of(&Config {
            quick: true,
            n: None,
        });
        let t0 = 1_000_000_000_000;
        let d: Vec<i64> = (0..p.stored)
            .step_by(997)
            .map(|i| recovery_deadline(i, &p, t0))
            .collect();
        assert!(d.windows(2).all(|w| w[0] < w[1]), "deadlines follow keys");
        assert!(recovery_deadline(p.overdue - 1, &p, t0) < t0);
        let h = recovery_deadline(p.overdue + p.horizon_jobs - 1, &p, t0);
        assert!(h > t0 + 15 * 60_000 && h < t0 + HOUR_MS);
        assert!(recovery_deadline(p.overdue + p.horizon_jobs, &p, t0) >= t0 + 2 * HOUR_MS);
    }

    #[test]
    fn the_poller_claims_everything_and_runs_none_early() {
        let n = 2500;
        let slots = Slots::new(n);
        let base = now_ms() + 20;
        let jobs: Vec<(usize, i64)> = (0..n).map(|i| (i, base + (i % 50) as i64)).collect();
        let mut q = MemQueue {
            jobs: Vec::new(),
            queries: 0,
        };
        q.insert(&jobs, 'L').unwrap();
        let start = Instant::now();
        let queries = poll(
            &mut q,
            Duration::from_millis(10),
            start,
            start + Duration::from_secs(5),
            &|| slots.ran() >= n,
            &mut |i, d| slots.record(i, wall_ns(SystemTime::now()) - d * 1_000_000),
        )
        .unwrap();
        let r = LateRun::of(&slots, n);
        assert_eq!((r.lost, r.early, r.doubles), (0, 0, 0));
        assert_eq!(queries, q.queries);
        assert!(r.lateness.unwrap().max < 1_000_000_000);
    }

    #[test]
    fn absent_servers_are_reported_and_skipped() {
        let p = Params {
            late_n: 100,
            late_window: Duration::from_millis(100),
            lead: Duration::from_millis(100),
            idle_baselines: Duration::from_millis(100),
            idle_ours: Duration::from_millis(100),
            ..Params::of(&Config {
                quick: true,
                n: None,
            })
        };
        let mut out = Outcome::default();
        // Port 1: nothing listens there.
        lateness_section(&p, ("127.0.0.1:1", ("127.0.0.1", 1)), &mut |_| {}, &mut out);
        let t = &out.tables[0];
        assert_eq!(t.rows.len(), 5);
        assert!(t.rows[1..].iter().all(|r| r[2] == "-"), "{t:?}");
        let says = |what: &str| t.notes.iter().any(|n| n.starts_with(what));
        assert!(
            says("Redis not reachable at 127.0.0.1:1: "),
            "{:?}",
            t.notes
        );
        assert!(
            says("PostgreSQL not reachable at 127.0.0.1:1: "),
            "{:?}",
            t.notes
        );
        assert!(
            t.notes
                .iter()
                .all(|n| !n.contains("baseline skipped; baseline"))
        );
        let ours = out
            .checks
            .iter()
            .find(|c| c.target.contains("lateness"))
            .unwrap();
        assert!(ours.met.is_some());
    }

    #[test]
    fn our_lateness_small_run() {
        let p = Params {
            late_window: Duration::from_millis(200),
            lead: Duration::from_millis(100),
            ..Params::of(&Config {
                quick: true,
                n: None,
            })
        };
        let offsets = late_offsets(200, p.late_window);
        let r = ours_lateness(&p, &offsets).unwrap();
        assert_eq!((r.lost, r.early, r.doubles), (0, 0, 0));
    }
}
