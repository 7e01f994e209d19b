//! W13's parts 4 and 5: recovery (reopening a store of many jobs, some overdue, some within the
//! horizon), and bytes on disk per job.

use std::fs;
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use tickwheel::{ManualClock, Timer};
use tickwheel_durable::{Job, JobContext, Jobs, ManualWall};

use super::super::common::temp_dir;
use super::super::common::{DAY_MS, HOUR_MS, PAYLOAD, at_ms, chain, ms1, thousands, wall_ns};
use super::{KIND, Params, TEMP_PREFIX, file_size, noop};
use crate::measure::alloc;
use crate::measure::procfs;
use crate::report::targets;
use crate::report::{self, Table};
use crate::scenario::Outcome;

/// What part 4 measured (and part 5's file sizes).
#[derive(Clone, Debug)]
struct Recovery {
    stored: usize,
    build: Duration,
    /// The store's file after the build, and after the reopen (and its runs) closed.
    file_built: u64,
    file_reopened: Option<u64>,
    /// The size of a compacted copy, and the time the copy and `compact` took.
    compacted: Result<(u64, Duration), String>,
    /// `open` itself, the first overdue run, the horizon loaded (from the start of `open`).
    open: Duration,
    first_run: Option<Duration>,
    loaded: Option<Duration>,
    /// `stats()` when the horizon was found loaded (or at the give-up).
    fired: u64,
    in_memory: u64,
    store_reads: u64,
    /// VmRSS before the reopen and once the horizon was loaded.
    rss: Option<(u64, u64)>,
    /// Bytes allocated through the counting allocator, before and after (if it is installed).
    heap: Option<(usize, usize)>,
}

/// Deadline (ms) of job `i` of part 4's store, built at `t0` (ms): keys and deadlines in the same
/// order. The overdue ones an hour before `t0`; the horizon's 15 to 55 minutes after it (due
/// within the 1 h horizon at a reopen within 5 minutes, and none due before 15); the rest from
/// 2 h to a year after.
pub(super) fn recovery_deadline(i: usize, p: &Params, t0: i64) -> i64 {
    let (overdue, horizon) = (p.overdue, p.horizon_jobs);
    let rest = p.stored.saturating_sub(overdue + horizon).max(1) as i64;
    let i64_of = |x: usize| i64::try_from(x).unwrap_or(i64::MAX);
    if i < overdue {
        t0 - HOUR_MS + i64_of(i)
    } else if i < overdue + horizon {
        t0 + 15 * 60_000 + i64_of(i - overdue) * (40 * 60_000) / i64_of(horizon).max(1)
    } else {
        t0 + 2 * HOUR_MS + i64_of(i - overdue - horizon) * (365 * DAY_MS - 2 * HOUR_MS) / rest
    }
}

/// Jobs per `schedule_batch` of part 4's build.
const BUILD_BATCH: usize = 10_000;

/// Part 4's build: `p.stored` jobs (keys in deadline order) through `schedule_batch` of 10,000,
/// on jobs whose wall clock reads two days back (a manual one), so that none is in memory and
/// none runs while the store is built.
fn build_store(p: &Params, path: &Path, progress: &mut dyn FnMut(&str)) -> Result<(), String> {
    let now = SystemTime::now();
    let t0 = wall_ns(now).div_euclid(1_000_000);
    let clock = ManualClock::new();
    let timer = Timer::builder()
        .name("w13-build")
        .clock(clock.clone())
        .build()
        .map_err(|e| format!("the build's timer: {}", chain(&e)))?;
    let jobs = Jobs::builder()
        .handler(KIND, noop)
        .timer(timer)
        .wall_clock(ManualWall::new(
            clock,
            now - Duration::from_secs(2 * 86_400),
        ))
        .load_batch(1 << 20)
        .open(path)
        .map_err(|e| format!("open for the build: {}", chain(&e)))?;
    let step = (p.stored / 10).max(BUILD_BATCH);
    let mut next_report = step;
    let start = Instant::now();
    let mut i = 0;
    while i < p.stored {
        let end = (i + BUILD_BATCH).min(p.stored);
        let batch: Vec<Job> = (i..end)
            .map(|k| {
                Job::new(
                    format!("k{k:010}"),
                    KIND,
                    at_ms(recovery_deadline(k, p, t0)),
                )
                .with_payload(PAYLOAD)
            })
            .collect();
        jobs.schedule_batch(batch)
            .map_err(|e| format!("the build's schedule_batch at job {i}: {}", chain(&e)))?;
        i = end;
        if i >= next_report && i < p.stored {
            progress(&format!(
                "W13.4 build: {} of {} stored ({:.0} jobs/s)",
                report::count(i),
                report::count(p.stored),
                i as f64 / start.elapsed().as_secs_f64()
            ));
            next_report += step;
        }
    }
    let counts = jobs
        .counts()
        .map_err(|e| format!("counts: {}", chain(&e)))?;
    if counts.waiting != p.stored as u64 {
        return Err(format!(
            "the build stored {} jobs, not {}",
            counts.waiting, p.stored
        ));
    }
    jobs.close()
        .map_err(|e| format!("close after the build: {}", chain(&e)))
}

/// Copies the store and compacts the copy: its size, and the time taken.
fn compacted_copy(path: &Path, dir: &Path) -> Result<(u64, Duration), String> {
    let copy = dir.join("compacted.redb");
    let start = Instant::now();
    fs::copy(path, &copy).map_err(|e| format!("copy: {e}"))?;
    let mut db =
        redb::Database::open(&copy).map_err(|e| format!("open the copy: {}", chain(&e)))?;
    while db
        .compact()
        .map_err(|e| format!("compact: {}", chain(&e)))?
    {}
    drop(db);
    let took = start.elapsed();
    let size = file_size(&copy)?;
    let _ = fs::remove_file(&copy);
    Ok((size, took))
}

/// Part 4 (and 5's sizes): build, reopen, measure.
fn recovery(p: &Params, progress: &mut dyn FnMut(&str)) -> Result<Recovery, String> {
    // Asked while this process is quiet: the probe's allocation must not meet another thread's
    // frees.
    let counting = alloc::is_active();
    let dir = temp_dir(TEMP_PREFIX)?;
    let path = dir.path().join("recovery.redb");
    progress(&format!(
        "W13.4 build: {} jobs ({} overdue, {} within the horizon), schedule_batch of {}",
        report::count(p.stored),
        report::count(p.overdue),
        report::count(p.horizon_jobs),
        report::count(BUILD_BATCH)
    ));
    let start = Instant::now();
    build_store(p, &path, progress)?;
    let build = start.elapsed();
    let file_built = file_size(&path)?;

    progress("W13.4 reopen");
    alloc::settle();
    let rss0 = procfs::resident_bytes();
    let heap0 = counting.then(alloc::current);
    let first: Arc<OnceLock<Instant>> = Arc::new(OnceLock::new());
    let f = first.clone();
    let t0 = Instant::now();
    let jobs = Jobs::builder()
        .handler(KIND, move |_: &JobContext<'_>| {
            f.get_or_init(Instant::now);
            Ok(())
        })
        .open(&path)
        .map_err(|e| format!("reopen: {}", chain(&e)))?;
    let open = t0.elapsed();
    let (overdue, horizon) = (p.overdue as u64, p.horizon_jobs as u64);
    let give_up = t0 + Duration::from_secs(120);
    let loaded = loop {
        let s = jobs.stats();
        if s.fired >= overdue && s.fired + s.in_memory >= overdue + horizon {
            break Some(t0.elapsed());
        }
        if Instant::now() >= give_up {
            break None;
        }
        thread::sleep(Duration::from_millis(10));
    };
    let s = jobs.stats();
    let rss1 = procfs::resident_bytes();
    let heap1 = counting.then(alloc::current);
    let first_run = first.get().map(|&t| t.saturating_duration_since(t0));
    let synced = jobs.sync().map_err(|e| format!("sync: {}", chain(&e)));
    let closed = jobs.close().map_err(|e| format!("close: {}", chain(&e)));
    drop(jobs);
    let file_reopened = synced.and(closed).and_then(|()| file_size(&path)).ok();

    progress("W13.5 compact a copy of the store");
    let compacted = compacted_copy(&path, dir.path());
    Ok(Recovery {
        stored: p.stored,
        build,
        file_built,
        file_reopened,
        compacted,
        open,
        first_run,
        loaded,
        fired: s.fired,
        in_memory: s.in_memory,
        store_reads: s.store_reads,
        rss: rss0.zip(rss1),
        heap: heap0.zip(heap1),
    })
}

/// Jobs stored at which the recovery targets are set.
const RECOVERY_AT: usize = 10_000_000;

pub(super) fn recovery_section(p: &Params, progress: &mut dyn FnMut(&str), out: &mut Outcome) {
    let r = recovery(p, progress);
    let mut t4 = Table::new(
        format!(
            "W13.4 recovery: reopening a store of {} jobs (64-byte payloads): {} overdue, {} due \
             within the 1 h horizon, the rest over a year",
            report::count(p.stored),
            report::count(p.overdue),
            report::count(p.horizon_jobs)
        ),
        &["measure", "value"],
    );
    let mut t5 = Table::new(
        format!(
            "W13.5 bytes on disk per job, 64-byte payloads, {} jobs stored",
            report::count(p.stored)
        ),
        &["file", "bytes", "bytes per job"],
    );
    let judged = p.stored >= RECOVERY_AT;
    let at = format!("{} stored", report::count(p.stored));
    match &r {
        Ok(r) => {
            let opt = |d: Option<Duration>| d.map_or("not within 120 s".to_owned(), ms1);
            let mib = |b: u64| format!("{:.1} MiB", b as f64 / (1024.0 * 1024.0));
            let rows: Vec<(&str, String)> = vec![
                (
                    "build (schedule_batch of 10,000, fsync each)",
                    format!(
                        "{:.1} s, {} jobs/s",
                        r.build.as_secs_f64(),
                        thousands((r.stored as f64 / r.build.as_secs_f64()).round() as u64)
                    ),
                ),
                ("open() returned, ms", ms1(r.open)),
                ("first overdue run, ms after open() began", opt(r.first_run)),
                ("horizon loaded, ms after open() began", opt(r.loaded)),
                (
                    "jobs run / in memory when loaded",
                    format!("{} / {}", thousands(r.fired), thousands(r.in_memory)),
                ),
                ("store reads until loaded", thousands(r.store_reads)),
                (
                    "resident memory (VmRSS) before -> after, and the difference",
                    r.rss.map_or("n/a".to_owned(), |(a, b)| {
                        format!(
                            "{} -> {}: {:+.1} MiB",
                            mib(a),
                            mib(b),
                            (b as f64 - a as f64) / (1024.0 * 1024.0)
                        )
                    }),
                ),
                (
                    "heap allocated (counting allocator), difference",
                    r.heap.map_or("n/a (not installed)".to_owned(), |(a, b)| {
                        format!("{:+.1} MiB", (b as f64 - a as f64) / (1024.0 * 1024.0))
                    }),
                ),
            ];
            for (k, v) in rows {
                t4.row(vec![k.to_owned(), v]);
            }
            t4.note(
                "method: the store is built by jobs whose wall clock reads two days back (a \
                 ManualWall on a ManualClock), so nothing is in memory or runs during the build; \
                 keys in deadline order (sequential B-tree inserts); every batch one fsync'd \
                 commit; then closed",
            );
            t4.note(
                "the reopen, in this process, with the defaults (real clock, Timer::new(), load \
                 batch 4,096, misfire RunAll): the time from the start of open() to the first \
                 overdue handler run, and until stats() shows every overdue job run and run + in \
                 memory >= overdue + horizon jobs (polled every 10 ms)",
            );
            t4.note(
                "memory: VmRSS from /proc/self/status after malloc_trim, before open() and once \
                 the horizon was loaded; it includes redb's page cache (up to 1 GiB by default) \
                 and the pages read; heap = bytes held through the counting allocator",
            );
            let per = |b: u64| format!("{:.1}", b as f64 / r.stored as f64);
            t5.row(vec![
                "after the build".to_owned(),
                thousands(r.file_built),
                per(r.file_built),
            ]);
            match r.file_reopened {
                Some(b) => t5.row(vec![
                    "after the reopen (overdue jobs run and deleted)".to_owned(),
                    thousands(b),
                    per(b),
                ]),
                None => t5.row(vec![
                    "after the reopen".to_owned(),
                    "n/a".to_owned(),
                    "-".to_owned(),
                ]),
            }
            match &r.compacted {
                Ok((b, took)) => {
                    t5.row(vec![
                        "a copy, after redb::Database::compact (not what the jobs do)".to_owned(),
                        thousands(*b),
                        per(*b),
                    ]);
                    t5.note(format!(
                        "the copy and its compaction took {:.1} s",
                        took.as_secs_f64()
                    ));
                }
                Err(e) => {
                    t5.row(vec![
                        "a compacted copy".to_owned(),
                        "failed".to_owned(),
                        "-".to_owned(),
                    ]);
                    t5.note(format!("compacting a copy failed: {e}"));
                }
            }
            t5.note(
                "bytes per job = the file's size / jobs stored; a job is a 11-byte key, the kind \
                 (3 bytes), its deadline and 64 payload bytes in the jobs table, plus its \
                 (deadline, key) entry in the due index; redb's copy-on-write B-trees leave free \
                 pages in the file",
            );
            let per_job = r.file_built as f64 / r.stored as f64;
            out.checks.push(targets::check(
                "W13.bytes",
                format!("{per_job:.1} B per job after the build ({at})"),
                Some(per_job <= 200.0),
            ));
            let timing = |d: Option<Duration>, limit: Duration| -> (String, Option<bool>) {
                let shown = d.map_or("not within 120 s".to_owned(), |d| format!("{} ms", ms1(d)));
                if judged {
                    (
                        format!("{shown} ({at})"),
                        Some(d.is_some_and(|d| d <= limit)),
                    )
                } else {
                    (
                        format!(
                            "{shown} ({at}; the target is at {}: not judged)",
                            report::count(RECOVERY_AT)
                        ),
                        None,
                    )
                }
            };
            let (m, met) = timing(r.first_run, Duration::from_secs(1));
            out.checks.push(targets::check("W13.first", m, met));
            let (m, met) = timing(r.loaded, Duration::from_secs(10));
            out.checks.push(targets::check("W13.horizon", m, met));
        }
        Err(e) => {
            t4.row(vec!["failed".to_owned(), e.clone()]);
            t5.row(vec!["failed".to_owned(), "-".to_owned(), "-".to_owned()]);
            for key in ["W13.first", "W13.horizon", "W13.bytes"] {
                out.checks
                    .push(targets::check(key, format!("failed: {e}"), Some(false)));
            }
        }
    }
    out.tables.push(t4);
    out.tables.push(t5);
}
