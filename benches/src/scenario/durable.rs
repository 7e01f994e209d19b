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

use std::error::Error as StdError;
use std::fs;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, OnceLock, PoisonError, RwLock};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tempfile::TempDir;
use tickwheel::{ManualClock, Timer};
use tickwheel_durable::{HandlerError, Job, JobContext, Jobs, JobsBuilder, ManualWall};

use super::{Config, Outcome, Scenario};
use crate::alloc;
use crate::procfs;
use crate::report::{self, Table};
use crate::rng::Rng;
use crate::service::Lateness;
use crate::targets;
use crate::workloads::SEED;

/// Our implementation's name in the tables.
const OURS: &str = "tickwheel-durable";

/// The one kind of job every part schedules.
const KIND: &str = "w13";

/// Every job's payload: 64 bytes.
const PAYLOAD: [u8; 64] = [b'p'; 64];

/// The timer's tick (the default of `tickwheel::Timer::new`, which the jobs run on).
const TICK: Duration = Duration::from_millis(1);

/// Jobs a baseline claims per query (a full claim is followed by another at once).
const CLAIM: usize = 1000;

/// Stack of each of the 1,000 concurrent callers.
const CALLER_STACK: usize = 64 * 1024;

/// Where the baselines' servers are.
const REDIS_ADDR: &str = "127.0.0.1:6379";
const PG_ADDR: (&str, u16) = ("127.0.0.1", 5432);

/// A day and an hour, in milliseconds.
const DAY_MS: i64 = 86_400_000;
const HOUR_MS: i64 = 3_600_000;

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
pub(super) struct Durable;

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
        let swept = sweep_temp_dirs();
        schedules_section(&p, progress, &mut out);
        if let Some(t) = out.tables.first_mut() {
            t.notes.extend(swept);
        }
        lateness_section(&p, (REDIS_ADDR, PG_ADDR), progress, &mut out);
        recovery_section(&p, progress, &mut out);
        out
    }
}

// ---------------------------------------------------------------------------------------------
// Shared helpers
// ---------------------------------------------------------------------------------------------

/// An error and its sources, as one line (`postgres::Error` prints only its kind on its own).
fn chain(e: &dyn StdError) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let more = cause.to_string();
        if !s.contains(&more) {
            s.push_str(": ");
            s.push_str(&more);
        }
        source = cause.source();
    }
    s
}

/// Signed nanoseconds since the Unix epoch.
fn wall_ns(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_nanos()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_nanos()).unwrap_or(i64::MAX),
    }
}

/// Milliseconds since the Unix epoch now (rounded down: a job due at or before it is due).
fn now_ms() -> i64 {
    wall_ns(SystemTime::now()).div_euclid(1_000_000)
}

/// The wall-clock time `ms` milliseconds after the Unix epoch.
fn at_ms(ms: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

fn nanos(d: Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Nanoseconds as milliseconds with three decimals.
fn ms(ns: i64) -> String {
    format!("{:.3}", ns as f64 / 1e6)
}

/// A duration as milliseconds with one decimal.
fn ms1(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e3)
}

/// An integer with thousands separators: `41,234`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Percentiles of `samples` (sorted here), or `None` if there are none.
fn percentiles(mut samples: Vec<i64>) -> Option<Lateness> {
    if samples.is_empty() {
        return None;
    }
    samples.sort_unstable();
    Some(Lateness::of_sorted(&samples))
}

/// A handler that does nothing.
fn noop(_: &JobContext<'_>) -> Result<(), HandlerError> {
    Ok(())
}

/// A random seed per thread or part, far from its neighbours'.
fn seed(k: u64) -> u64 {
    SEED ^ (k + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// A deadline uniform over the next 24 h from `now`.
fn day_ahead(rng: &mut Rng, now: SystemTime) -> SystemTime {
    now + Duration::from_millis(rng.range(1, DAY_MS as u64))
}

/// Open jobs in a temporary directory of their own (the jobs close before the directory goes).
struct Fresh {
    jobs: Jobs,
    dir: TempDir,
}

/// This run: its process id and its start (ns since the Unix epoch). Its temporary directories,
/// PostgreSQL schema and Redis keys are named by them.
fn run_id() -> (u32, u128) {
    static ID: OnceLock<(u32, u128)> = OnceLock::new();
    *ID.get_or_init(|| {
        let stamp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        (std::process::id(), stamp)
    })
}

/// How old the leftovers of a run whose process is gone must be before a later run removes them
/// (a run killed before its cleanup; no run lasts nearly as long, so a live one is never touched,
/// even one in another pid namespace).
const STALE: Duration = Duration::from_secs(3600);

/// True if `rest` (`{pid}{sep}{stamp}...`, a name without its prefix) names a run whose process
/// is gone, as `/proc` tells, and which started more than [`STALE`] ago.
fn stale(rest: &str, sep: char) -> bool {
    let mut parts = rest.split(sep);
    let pid = parts.next().and_then(|p| p.parse::<u32>().ok());
    let stamp = parts.next().and_then(|s| s.parse::<u128>().ok());
    let (Some(pid), Some(stamp)) = (pid, stamp) else {
        return false;
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let gone = Path::new("/proc/self").exists() && !Path::new(&format!("/proc/{pid}")).exists();
    gone && now.saturating_sub(stamp) > STALE.as_nanos()
}

/// Prefix of this workload's temporary directories.
const TEMP_PREFIX: &str = "wheelbench-w13-";

/// A temporary directory for one part's store.
fn temp_dir() -> Result<TempDir, String> {
    let (pid, stamp) = run_id();
    tempfile::Builder::new()
        .prefix(&format!("{TEMP_PREFIX}{pid}-{stamp}-"))
        .tempdir()
        .map_err(|e| format!("cannot make a temporary directory: {e}"))
}

/// Removes the temporary directories of killed runs (see [`STALE`]): what was done.
fn sweep_temp_dirs() -> Vec<String> {
    let Ok(entries) = fs::read_dir(std::env::temp_dir()) else {
        return Vec::new();
    };
    let mut notes = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name
            .strip_prefix(TEMP_PREFIX)
            .is_some_and(|r| stale(r, '-'))
        {
            let path = entry.path();
            notes.push(match fs::remove_dir_all(&path) {
                Ok(()) => format!("removed {}, left by a killed run", path.display()),
                Err(e) => format!(
                    "could not remove {}, left by a killed run: {e}",
                    path.display()
                ),
            });
        }
    }
    notes
}

/// Opens `builder` on a new store in a new temporary directory.
fn fresh(builder: JobsBuilder) -> Result<Fresh, String> {
    let dir = temp_dir()?;
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

// ---------------------------------------------------------------------------------------------
// Part 1: durable schedules per second
// ---------------------------------------------------------------------------------------------

/// What one way of scheduling achieved.
#[derive(Clone, Debug)]
struct Acks {
    /// Jobs stored.
    jobs: u64,
    /// Calls made (of `schedule` or `schedule_batch`).
    calls: u64,
    /// Wall time of the measured phase.
    wall: Duration,
    /// Each call's time as its caller saw it, ns.
    latency: Option<Lateness>,
    /// Commits the jobs made (`stats().commits`).
    commits: u64,
    /// CPU time of this process over the measured phase.
    cpu: Option<Duration>,
}

impl Acks {
    fn per_sec(&self) -> f64 {
        self.jobs as f64 / self.wall.as_secs_f64().max(1e-9)
    }

    /// Process CPU µs per job stored.
    fn cpu_per_job(&self) -> String {
        self.cpu.map_or("n/a".to_owned(), |c| {
            format!("{:.1}", c.as_secs_f64() * 1e6 / self.jobs.max(1) as f64)
        })
    }
}

/// CPU time of this process between two readings.
fn cpu_between(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    a.zip(b).map(|(a, b)| b.saturating_sub(a))
}

/// (a) One thread calling `schedule` in a loop for `p.single_for`.
fn single(p: &Params) -> Result<Acks, String> {
    let f = fresh(Jobs::builder().handler(KIND, noop))?;
    let now = SystemTime::now();
    let mut rng = Rng::new(seed(1));
    let mut latency = Vec::new();
    let cpu0 = procfs::process_cpu();
    let start = Instant::now();
    while start.elapsed() < p.single_for {
        let key = format!("a{}", latency.len());
        let job = Job::new(key, KIND, day_ahead(&mut rng, now)).with_payload(PAYLOAD);
        let t0 = Instant::now();
        f.jobs
            .schedule(job)
            .map_err(|e| format!("schedule: {}", chain(&e)))?;
        latency.push(nanos(t0.elapsed()));
    }
    let wall = start.elapsed();
    let cpu = cpu_between(cpu0, procfs::process_cpu());
    let commits = f.jobs.stats().commits;
    f.close()?;
    Ok(Acks {
        jobs: latency.len() as u64,
        calls: latency.len() as u64,
        wall,
        latency: percentiles(latency),
        commits,
        cpu,
    })
}

/// (b) `p.callers` OS threads, each calling `schedule` in a loop for `p.group_for`, started
/// together: the measured phase runs from their start to the return of the last call.
fn group(p: &Params) -> Result<Acks, String> {
    let f = fresh(Jobs::builder().handler(KIND, noop))?;
    let now = SystemTime::now();
    // The callers wait behind this lock until every one is spawned and waiting.
    let gate = Arc::new(RwLock::new(()));
    let ready = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let hold = gate.write().unwrap_or_else(PoisonError::into_inner);
    let mut threads = Vec::with_capacity(p.callers);
    let mut failed = None;
    for t in 0..p.callers {
        let (jobs, gate, ready, stop) = (f.jobs.clone(), gate.clone(), ready.clone(), stop.clone());
        let spawned = thread::Builder::new()
            .name("w13-caller".to_owned())
            .stack_size(CALLER_STACK)
            .spawn(move || caller(t, &jobs, &gate, &ready, &stop, now));
        match spawned {
            Ok(h) => threads.push(h),
            Err(e) => {
                failed = Some(format!("spawning caller {} of {}: {e}", t + 1, p.callers));
                break;
            }
        }
    }
    let waiting_since = Instant::now();
    while ready.load(Relaxed) < threads.len() && waiting_since.elapsed() < Duration::from_secs(30) {
        thread::sleep(Duration::from_millis(1));
    }
    if failed.is_some() {
        stop.store(true, Relaxed);
    }
    let cpu0 = procfs::process_cpu();
    let start = Instant::now();
    drop(hold);
    if failed.is_none() {
        thread::sleep(p.group_for);
        stop.store(true, Relaxed);
    }
    let mut latency = Vec::new();
    for h in threads {
        match h.join() {
            Ok((mine, error)) => {
                latency.extend(mine);
                failed = failed.or(error);
            }
            Err(_) => failed = failed.or_else(|| Some("a caller thread panicked".to_owned())),
        }
    }
    let wall = start.elapsed();
    let cpu = cpu_between(cpu0, procfs::process_cpu());
    let commits = f.jobs.stats().commits;
    f.close()?;
    if let Some(e) = failed {
        return Err(e);
    }
    Ok(Acks {
        jobs: latency.len() as u64,
        calls: latency.len() as u64,
        wall,
        latency: percentiles(latency),
        commits,
        cpu,
    })
}

/// One of (b)'s callers: schedules until told to stop; its calls' latencies, and its error.
fn caller(
    t: usize,
    jobs: &Jobs,
    gate: &RwLock<()>,
    ready: &AtomicUsize,
    stop: &AtomicBool,
    now: SystemTime,
) -> (Vec<i64>, Option<String>) {
    let mut rng = Rng::new(seed(1000 + t as u64));
    let mut latency = Vec::with_capacity(256);
    ready.fetch_add(1, Relaxed);
    drop(gate.read().unwrap_or_else(PoisonError::into_inner));
    while !stop.load(Relaxed) {
        let key = format!("b{t}-{}", latency.len());
        let job = Job::new(key, KIND, day_ahead(&mut rng, now)).with_payload(PAYLOAD);
        let t0 = Instant::now();
        if let Err(e) = jobs.schedule(job) {
            return (latency, Some(format!("schedule: {}", chain(&e))));
        }
        latency.push(nanos(t0.elapsed()));
    }
    (latency, None)
}

/// (c) One thread calling `schedule_batch` of `p.batch` jobs for `p.batch_for` (building each
/// batch is inside the measured phase, outside the call's latency).
fn batched(p: &Params) -> Result<Acks, String> {
    let f = fresh(Jobs::builder().handler(KIND, noop))?;
    let now = SystemTime::now();
    let mut rng = Rng::new(seed(2));
    let mut latency = Vec::new();
    let mut jobs = 0u64;
    let cpu0 = procfs::process_cpu();
    let start = Instant::now();
    while start.elapsed() < p.batch_for {
        let batch: Vec<Job> = (0..p.batch)
            .map(|_| {
                let key = format!("c{jobs}");
                jobs += 1;
                Job::new(key, KIND, day_ahead(&mut rng, now)).with_payload(PAYLOAD)
            })
            .collect();
        let t0 = Instant::now();
        f.jobs
            .schedule_batch(batch)
            .map_err(|e| format!("schedule_batch: {}", chain(&e)))?;
        latency.push(nanos(t0.elapsed()));
    }
    let wall = start.elapsed();
    let cpu = cpu_between(cpu0, procfs::process_cpu());
    let commits = f.jobs.stats().commits;
    f.close()?;
    Ok(Acks {
        jobs,
        calls: latency.len() as u64,
        wall,
        latency: percentiles(latency),
        commits,
        cpu,
    })
}

/// The smallest sample a throughput target is judged on: a shorter or smaller one is reported
/// but not judged.
const JUDGE_JOBS: u64 = 10_000;
const JUDGE_WALL: Duration = Duration::from_secs(1);

fn schedules_section(p: &Params, progress: &mut dyn FnMut(&str), out: &mut Outcome) {
    let mut t = Table::new(
        "W13.1 durable schedules, 64-byte payloads, fsync per commit (default durability, group \
         commit), deadlines uniform over the next 24 h, a fresh store each",
        &[
            "callers",
            "jobs",
            "calls",
            "s",
            "jobs/s",
            "ack p50 ms",
            "ack p99 ms",
            "commits",
            "jobs per commit",
            "CPU µs/job",
        ],
    );
    type Way = fn(&Params) -> Result<Acks, String>;
    let ways: [(&str, Duration, Way); 3] = [
        ("1 thread, schedule", p.single_for, single),
        ("1,000 threads, schedule each", p.group_for, group),
        ("1 thread, schedule_batch of 1,000", p.batch_for, batched),
    ];
    let mut results = Vec::new();
    for (label, d, way) in ways {
        progress(&format!("W13.1 {OURS}: {label}, for {}", report::secs(d)));
        let r = way(p);
        match &r {
            Ok(a) => t.row(vec![
                label.to_owned(),
                thousands(a.jobs),
                thousands(a.calls),
                format!("{:.2}", a.wall.as_secs_f64()),
                thousands(a.per_sec().round() as u64),
                a.latency.map_or_else(|| "-".to_owned(), |l| ms(l.p50)),
                a.latency.map_or_else(|| "-".to_owned(), |l| ms(l.p99)),
                thousands(a.commits),
                format!("{:.1}", a.jobs as f64 / a.commits.max(1) as f64),
                a.cpu_per_job(),
            ]),
            Err(e) => {
                let mut row = vec![label.to_owned(), "failed".to_owned()];
                row.extend(std::iter::repeat_n("-".to_owned(), 8));
                t.row(row);
                t.note(format!("{label}: failed: {e}"));
            }
        }
        results.push(r);
    }
    t.note(
        "method: each way schedules into a new store (a redb file in a temporary directory) for \
         the time shown; a job is a key, the kind, a deadline uniform over the next 24 h (most \
         stay on disk, beyond the 1 h horizon) and 64 payload bytes; `schedule` returns once its \
         commit is on disk (fsync), and calls that arrive while a commit is under way share the \
         next one",
    );
    t.note(format!(
        "ack = the time of one call as its caller saw it (of a whole batch for schedule_batch), \
         every call sampled, percentiles by nearest rank; jobs/s = jobs / wall time of the \
         measured phase; the 1,000 callers are OS threads with {} KiB stacks, started together \
         behind a lock once all were spawned, the phase ending when the last call returned after \
         the stop; CPU µs/job = this process's CPU clock over the phase (every thread: the \
         callers, the commit thread, the fsyncs' system time) / jobs",
        CALLER_STACK / 1024
    ));
    t.note(
        "one thread calling schedule waits for one fsync per call: its rate is the disk's fsync \
         rate, by design (use schedule_batch, many callers, or Durability::Within for more)",
    );
    let judge = |key: &str, r: &Result<Acks, String>| match r {
        Ok(a) => {
            let measured = format!(
                "{} jobs/s ({} jobs in {:.2} s)",
                thousands(a.per_sec().round() as u64),
                thousands(a.jobs),
                a.wall.as_secs_f64()
            );
            if a.jobs < JUDGE_JOBS || a.wall < JUDGE_WALL {
                targets::check(
                    key,
                    format!("{measured}; too small a sample to judge"),
                    None,
                )
            } else {
                targets::check(key, measured, Some(a.per_sec() >= 40_000.0))
            }
        }
        Err(e) => targets::check(key, format!("failed: {e}"), Some(false)),
    };
    out.checks.push(judge("W13.group", &results[1]));
    out.checks.push(judge("W13.batch", &results[2]));
    out.tables.push(t);
}

// ---------------------------------------------------------------------------------------------
// Part 2: fire lateness, against Redis and PostgreSQL pollers; part 3: idle reads
// ---------------------------------------------------------------------------------------------

/// Not run yet, in a lateness slot.
const NOT_RUN: i64 = i64::MIN;

/// Where the runs of one lateness measurement record themselves: one slot per job.
struct Slots {
    late: Vec<AtomicI64>,
    ran: AtomicUsize,
    doubles: AtomicUsize,
    strays: AtomicUsize,
}

impl Slots {
    fn new(n: usize) -> Arc<Slots> {
        Arc::new(Slots {
            late: (0..n).map(|_| AtomicI64::new(NOT_RUN)).collect(),
            ran: AtomicUsize::new(0),
            doubles: AtomicUsize::new(0),
            strays: AtomicUsize::new(0),
        })
    }

    /// Job `i` ran `late_ns` after its deadline (negative: early).
    fn record(&self, i: usize, late_ns: i64) {
        match self.late.get(i) {
            Some(slot) if slot.swap(late_ns, Relaxed) == NOT_RUN => {
                self.ran.fetch_add(1, Relaxed);
            }
            Some(_) => {
                self.doubles.fetch_add(1, Relaxed);
            }
            None => {
                self.strays.fetch_add(1, Relaxed);
            }
        }
    }

    fn ran(&self) -> usize {
        self.ran.load(Relaxed)
    }
}

/// The index of a job from its key or member: `L123` (a Redis member: `L123:` then the payload).
fn index_of(key: &[u8]) -> Option<usize> {
    let digits = key.get(1..)?;
    let end = digits
        .iter()
        .position(|&b| b == b':')
        .unwrap_or(digits.len());
    std::str::from_utf8(&digits[..end]).ok()?.parse().ok()
}

/// What one implementation's lateness run measured.
#[derive(Clone, Debug, Default)]
struct LateRun {
    /// Time to store the N jobs.
    insert: Duration,
    lateness: Option<Lateness>,
    early: usize,
    lost: usize,
    doubles: usize,
    /// CPU time of this process from the end of the insert to the last run (ours: and its
    /// delete on disk).
    cpu: Option<Duration>,
    /// Baselines: CPU time of the server's processes over the same span (to 10 ms).
    server_cpu: Option<Duration>,
    /// Queries the poller made over the run (baselines).
    queries: Option<u64>,
    /// Ours: the jobs' own lateness histogram (`stats()`).
    stats: Option<Lateness>,
    /// Ours: commits over the same span as `cpu` (the runs' deletes).
    commits: Option<u64>,
}

impl LateRun {
    fn of(slots: &Slots, n: usize) -> LateRun {
        let sorted: Vec<i64> = slots
            .late
            .iter()
            .map(|l| l.load(Relaxed))
            .filter(|&l| l != NOT_RUN)
            .collect();
        let early = sorted.iter().filter(|&&l| l < 0).count();
        LateRun {
            lost: n - sorted.len(),
            early,
            doubles: slots.doubles.load(Relaxed) + slots.strays.load(Relaxed),
            lateness: percentiles(sorted),
            ..LateRun::default()
        }
    }
}

/// Offsets (ms) of the lateness jobs' deadlines from the window's start: uniform over it.
fn late_offsets(n: usize, window: Duration) -> Vec<i64> {
    let mut rng = Rng::new(seed(3));
    let w = u64::try_from(millis(window)).unwrap_or(1).max(1);
    (0..n)
        .map(|_| i64::try_from(rng.range(0, w - 1)).unwrap_or(0))
        .collect()
}

/// Sleeps until the window's last deadline, then until every job ran or `give_up`.
fn wait_for_runs(slots: &Slots, n: usize, last_ms: i64, give_up: Instant) {
    let until_last = Duration::from_millis(u64::try_from(last_ms - now_ms()).unwrap_or(0));
    thread::sleep(until_last);
    while slots.ran() < n && Instant::now() < give_up {
        thread::sleep(Duration::from_millis(2));
    }
}

/// Ours: the N jobs through `schedule_batch` (one call), run by a handler that records its
/// lateness on the wall clock.
fn ours_lateness(p: &Params, offsets: &[i64]) -> Result<LateRun, String> {
    let n = offsets.len();
    let slots = Slots::new(n);
    let s = slots.clone();
    let f = fresh(Jobs::builder().handler(KIND, move |cx: &JobContext<'_>| {
        let late = wall_ns(SystemTime::now()) - wall_ns(cx.deadline());
        match index_of(cx.key().as_bytes()) {
            Some(i) => s.record(i, late),
            None => drop(s.strays.fetch_add(1, Relaxed)),
        }
        Ok(())
    }))?;
    let base = now_ms() + millis(p.lead);
    let jobs: Vec<Job> = offsets
        .iter()
        .enumerate()
        .map(|(i, &off)| Job::new(format!("L{i}"), KIND, at_ms(base + off)).with_payload(PAYLOAD))
        .collect();
    let t0 = Instant::now();
    f.jobs
        .schedule_batch(jobs)
        .map_err(|e| format!("schedule_batch: {}", chain(&e)))?;
    let insert = t0.elapsed();
    let cpu0 = procfs::process_cpu();
    let commits0 = f.jobs.stats().commits;
    let last = base + millis(p.late_window);
    let give_up = Instant::now()
        + Duration::from_millis(u64::try_from(last - now_ms()).unwrap_or(0))
        + Duration::from_secs(10);
    wait_for_runs(&slots, n, last, give_up);
    // The runs' deletes are part of the cost: wait for them to be on disk.
    let synced = f.jobs.sync().map_err(|e| format!("sync: {}", chain(&e)));
    let cpu1 = procfs::process_cpu();
    let st = f.jobs.stats();
    f.close()?;
    synced?;
    Ok(LateRun {
        insert,
        cpu: cpu_between(cpu0, cpu1),
        stats: Some(Lateness {
            p50: nanos(st.lateness_p50),
            p99: nanos(st.lateness_p99),
            max: nanos(st.lateness_max),
        }),
        commits: Some(st.commits - commits0),
        ..LateRun::of(&slots, n)
    })
}

/// A baseline's job queue: one Redis sorted set or one PostgreSQL table.
trait Queue: Send {
    /// Stores jobs `(index, deadline ms)`, keyed `{prefix}{index}`, each with the 64-byte
    /// payload.
    fn insert(&mut self, jobs: &[(usize, i64)], prefix: char) -> Result<(), String>;

    /// Claims (removes and returns, atomically) up to [`CLAIM`] jobs due at or before `now_ms`,
    /// earliest first: `(index, deadline ms)`. One query.
    fn claim(&mut self, now_ms: i64) -> Result<Vec<(usize, i64)>, String>;
}

/// Polls `queue` at a fixed rate of `interval` from `start` (sleeping until it), until `done()`
/// after a poll or until `end`; every claimed job is run by `run(index, deadline ms)`, and a claim
/// that fills its limit is followed by another at once. Returns the queries made.
fn poll(
    queue: &mut dyn Queue,
    interval: Duration,
    start: Instant,
    end: Instant,
    done: &dyn Fn() -> bool,
    run: &mut dyn FnMut(usize, i64),
) -> Result<u64, String> {
    thread::sleep(start.saturating_duration_since(Instant::now()));
    let mut queries = 0;
    let mut next = start;
    loop {
        loop {
            let claimed = queue.claim(now_ms())?;
            queries += 1;
            let full = claimed.len() >= CLAIM;
            for (i, deadline) in claimed {
                run(i, deadline);
            }
            if !full {
                break;
            }
        }
        if done() {
            return Ok(queries);
        }
        next += interval;
        if next >= end {
            return Ok(queries);
        }
        let now = Instant::now();
        // Fell behind (a long claim): the next poll at once, and the rate from there.
        next = next.max(now);
        thread::sleep(next - now);
    }
}

/// A baseline's lateness run: the N jobs inserted into `queue`, then a poller thread every
/// `interval` that runs each claimed job (records its lateness).
fn baseline_lateness(
    server: Server,
    queue: Box<dyn Queue>,
    interval: Duration,
    p: &Params,
    offsets: &[i64],
) -> Result<LateRun, String> {
    let mut queue = queue;
    let n = offsets.len();
    let slots = Slots::new(n);
    let base = now_ms() + millis(p.lead);
    let jobs: Vec<(usize, i64)> = offsets
        .iter()
        .enumerate()
        .map(|(i, &off)| (i, base + off))
        .collect();
    let t0 = Instant::now();
    queue.insert(&jobs, 'L')?;
    let insert = t0.elapsed();
    let (cpu0, server0) = (procfs::process_cpu(), server.cpu());
    let last = base + millis(p.late_window);
    let end = Instant::now()
        + Duration::from_millis(u64::try_from(last - now_ms()).unwrap_or(0))
        + Duration::from_secs(10);
    let s = slots.clone();
    let poller = thread::Builder::new()
        .name("w13-poller".to_owned())
        .spawn(move || {
            let done = || s.ran() >= n;
            let mut run = |i: usize, deadline: i64| {
                s.record(i, wall_ns(SystemTime::now()) - deadline * 1_000_000);
            };
            let queries = poll(&mut *queue, interval, Instant::now(), end, &done, &mut run);
            // The queue (its connection, its server process) goes after the CPU is read.
            (queries, queue)
        })
        .map_err(|e| format!("spawning the poller: {e}"))?;
    let (queries, queue) = poller
        .join()
        .map_err(|_| "the poller thread panicked".to_owned())?;
    let (cpu1, server1) = (procfs::process_cpu(), server.cpu());
    drop(queue);
    let queries = queries?;
    Ok(LateRun {
        insert,
        cpu: cpu_between(cpu0, cpu1),
        server_cpu: cpu_between(server0, server1),
        queries: Some(queries),
        ..LateRun::of(&slots, n)
    })
}

/// The Lua script of the Redis claim: the due members (with their scores), earliest first, at
/// most `ARGV[2]`, removed in the same atomic step.
const REDIS_CLAIM: &str = "\
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'WITHSCORES', 'LIMIT', 0, ARGV[2])
if #due > 0 then
  local members = {}
  for i = 1, #due, 2 do members[#members + 1] = due[i] end
  redis.call('ZREM', KEYS[1], unpack(members))
end
return due";

/// The Redis server of this run, and the key prefix its keys live under.
struct RedisSvc {
    client: redis::Client,
    prefix: String,
    cleaned: bool,
}

fn redis_err(e: redis::RedisError) -> String {
    chain(&e)
}

impl RedisSvc {
    /// Connects (and pings) the server at `addr`.
    fn connect(addr: &str, prefix: String) -> Result<RedisSvc, String> {
        let client = redis::Client::open(format!("redis://{addr}/")).map_err(redis_err)?;
        let svc = RedisSvc {
            client,
            prefix,
            cleaned: false,
        };
        let mut con = svc.connection()?;
        redis::cmd("PING")
            .query::<String>(&mut con)
            .map_err(redis_err)?;
        Ok(svc)
    }

    fn connection(&self) -> Result<redis::Connection, String> {
        let con = self
            .client
            .get_connection_with_timeout(Duration::from_secs(3))
            .map_err(redis_err)?;
        con.set_read_timeout(Some(Duration::from_secs(30)))
            .map_err(redis_err)?;
        con.set_write_timeout(Some(Duration::from_secs(30)))
            .map_err(redis_err)?;
        Ok(con)
    }

    /// A new sorted set under the prefix, with a connection and the claim script loaded.
    fn queue(&self, tag: &str) -> Result<Box<dyn Queue>, String> {
        let mut con = self.connection()?;
        let sha: String = redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(REDIS_CLAIM)
            .query(&mut con)
            .map_err(redis_err)?;
        Ok(Box::new(RedisQueue {
            con,
            key: format!("{}{tag}", self.prefix),
            sha,
        }))
    }

    /// Deletes every key under the prefix: how many.
    fn clean(&mut self) -> Result<usize, String> {
        self.cleaned = true;
        let prefix = self.prefix.clone();
        self.delete_where(&format!("{prefix}*"), |_| true)
    }

    /// Deletes the keys of killed runs (see [`STALE`]): what was done.
    fn sweep(&self) -> Vec<String> {
        match self.delete_where("w13:*", |k| {
            k.strip_prefix("w13:").is_some_and(|r| stale(r, ':'))
        }) {
            Ok(0) => Vec::new(),
            Ok(n) => vec![format!("Redis: deleted {n} key(s) left by killed runs")],
            Err(e) => vec![format!(
                "Redis: could not delete the keys of killed runs: {e}"
            )],
        }
    }

    /// Deletes the keys matching `pattern` that `pick` accepts: how many.
    fn delete_where(&self, pattern: &str, pick: impl Fn(&str) -> bool) -> Result<usize, String> {
        let mut con = self.connection()?;
        let mut cursor = 0u64;
        let mut deleted = 0;
        loop {
            let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(pattern)
                .arg("COUNT")
                .arg(1000)
                .query(&mut con)
                .map_err(redis_err)?;
            let keys: Vec<String> = keys.into_iter().filter(|k| pick(k)).collect();
            if !keys.is_empty() {
                deleted += redis::cmd("DEL")
                    .arg(&keys)
                    .query::<usize>(&mut con)
                    .map_err(redis_err)?;
            }
            if next == 0 {
                return Ok(deleted);
            }
            cursor = next;
        }
    }
}

impl Drop for RedisSvc {
    fn drop(&mut self) {
        if !self.cleaned {
            let _ = self.clean();
        }
    }
}

/// One Redis sorted set of jobs: member = key, `:`, payload; score = deadline in ms.
struct RedisQueue {
    con: redis::Connection,
    key: String,
    sha: String,
}

impl Queue for RedisQueue {
    fn insert(&mut self, jobs: &[(usize, i64)], prefix: char) -> Result<(), String> {
        let mut pipe = redis::pipe();
        for chunk in jobs.chunks(1000) {
            pipe.cmd("ZADD").arg(&self.key).ignore();
            for &(i, deadline) in chunk {
                let mut member = format!("{prefix}{i}:").into_bytes();
                member.extend_from_slice(&PAYLOAD);
                pipe.arg(deadline).arg(member);
            }
        }
        pipe.query::<()>(&mut self.con).map_err(redis_err)
    }

    fn claim(&mut self, now_ms: i64) -> Result<Vec<(usize, i64)>, String> {
        let flat: Vec<Vec<u8>> = redis::cmd("EVALSHA")
            .arg(&self.sha)
            .arg(1)
            .arg(&self.key)
            .arg(now_ms)
            .arg(CLAIM)
            .query(&mut self.con)
            .map_err(redis_err)?;
        flat.chunks(2)
            .map(|pair| {
                let bad = || format!("a malformed claim reply: {pair:?}");
                let [member, score] = pair else {
                    return Err(bad());
                };
                let i = index_of(member).ok_or_else(bad)?;
                let score: f64 = std::str::from_utf8(score)
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .ok_or_else(bad)?;
                Ok((i, score.round() as i64))
            })
            .collect()
    }
}

/// The PostgreSQL server of this run, and the schema its tables live in.
struct PgSvc {
    params: String,
    schema: String,
    dropped: bool,
}

impl PgSvc {
    /// Connects to the server at `addr` (database `test`, as `postgres` or else `root`) and
    /// makes the schema.
    fn connect(addr: (&str, u16), schema: String) -> Result<PgSvc, String> {
        let mut errors = Vec::new();
        for user in ["postgres", "root"] {
            let params = format!(
                "host={} port={} user={user} dbname=test connect_timeout=3 \
                 application_name=wheelbench-w13",
                addr.0, addr.1
            );
            match postgres::Client::connect(&params, postgres::NoTls) {
                Ok(mut client) => {
                    client
                        .batch_execute(&format!("CREATE SCHEMA {schema}"))
                        .map_err(|e| format!("CREATE SCHEMA {schema}: {}", chain(&e)))?;
                    return Ok(PgSvc {
                        params,
                        schema,
                        dropped: false,
                    });
                }
                Err(e) => errors.push(format!("as {user}: {}", chain(&e))),
            }
        }
        Err(errors.join("; "))
    }

    fn client(&self) -> Result<postgres::Client, String> {
        postgres::Client::connect(&self.params, postgres::NoTls).map_err(|e| chain(&e))
    }

    /// A new table in the schema, with a connection and the claim prepared.
    fn queue(&self, tag: &str) -> Result<Box<dyn Queue>, String> {
        let mut client = self.client()?;
        let table = format!("{}.jobs_{tag}", self.schema);
        client
            .batch_execute(&format!(
                "CREATE TABLE {table} (key text PRIMARY KEY, deadline bigint NOT NULL, \
                 payload bytea NOT NULL); CREATE INDEX ON {table} (deadline);"
            ))
            .map_err(|e| format!("CREATE TABLE {table}: {}", chain(&e)))?;
        let claim = client
            .prepare(&format!(
                "DELETE FROM {table} WHERE key IN (SELECT key FROM {table} WHERE deadline <= $1 \
                 ORDER BY deadline LIMIT {CLAIM} FOR UPDATE SKIP LOCKED) \
                 RETURNING key, deadline, payload"
            ))
            .map_err(|e| format!("prepare the claim: {}", chain(&e)))?;
        let insert = client
            .prepare(&format!(
                "INSERT INTO {table} (key, deadline, payload) \
                 SELECT * FROM unnest($1::text[], $2::bigint[], $3::bytea[])"
            ))
            .map_err(|e| format!("prepare the insert: {}", chain(&e)))?;
        Ok(Box::new(PgQueue {
            client,
            table,
            claim,
            insert,
        }))
    }

    /// Drops the schemas of killed runs (see [`STALE`]): what was done.
    fn sweep(&self) -> Vec<String> {
        let swept = (|| {
            let mut client = self.client()?;
            let rows = client
                .query(
                    "SELECT nspname::text FROM pg_namespace WHERE nspname LIKE 'w13\\_%'",
                    &[],
                )
                .map_err(|e| chain(&e))?;
            let mut dropped = Vec::new();
            for row in rows {
                let name: String = row.try_get(0).map_err(|e| chain(&e))?;
                if name.strip_prefix("w13_").is_some_and(|r| stale(r, '_')) {
                    client
                        .batch_execute(&format!("DROP SCHEMA IF EXISTS {name} CASCADE"))
                        .map_err(|e| chain(&e))?;
                    dropped.push(name);
                }
            }
            Ok::<Vec<String>, String>(dropped)
        })();
        match swept {
            Ok(d) if d.is_empty() => Vec::new(),
            Ok(d) => vec![format!(
                "PostgreSQL: dropped schemas left by killed runs: {}",
                d.join(", ")
            )],
            Err(e) => vec![format!(
                "PostgreSQL: could not drop the schemas of killed runs: {e}"
            )],
        }
    }

    /// Drops the schema and everything in it.
    fn drop_schema(&mut self) -> Result<(), String> {
        self.dropped = true;
        self.client()?
            .batch_execute(&format!("DROP SCHEMA IF EXISTS {} CASCADE", self.schema))
            .map_err(|e| chain(&e))
    }
}

impl Drop for PgSvc {
    fn drop(&mut self) {
        if !self.dropped {
            let _ = self.drop_schema();
        }
    }
}

/// One PostgreSQL table of jobs: key, deadline in ms (indexed), payload.
struct PgQueue {
    client: postgres::Client,
    table: String,
    claim: postgres::Statement,
    insert: postgres::Statement,
}

impl Queue for PgQueue {
    fn insert(&mut self, jobs: &[(usize, i64)], prefix: char) -> Result<(), String> {
        for chunk in jobs.chunks(10_000) {
            let keys: Vec<String> = chunk.iter().map(|(i, _)| format!("{prefix}{i}")).collect();
            let deadlines: Vec<i64> = chunk.iter().map(|&(_, d)| d).collect();
            let payloads: Vec<Vec<u8>> = chunk.iter().map(|_| PAYLOAD.to_vec()).collect();
            self.client
                .execute(&self.insert, &[&keys, &deadlines, &payloads])
                .map_err(|e| format!("insert: {}", chain(&e)))?;
        }
        // As autovacuum would, later: the planner's statistics of the new rows.
        self.client
            .batch_execute(&format!("ANALYZE {}", self.table))
            .map_err(|e| format!("ANALYZE: {}", chain(&e)))
    }

    fn claim(&mut self, now_ms: i64) -> Result<Vec<(usize, i64)>, String> {
        let rows = self
            .client
            .query(&self.claim, &[&now_ms])
            .map_err(|e| format!("claim: {}", chain(&e)))?;
        rows.iter()
            .map(|row| {
                let key: &str = row.try_get(0).map_err(|e| chain(&e))?;
                let deadline: i64 = row.try_get(1).map_err(|e| chain(&e))?;
                let payload: &[u8] = row.try_get(2).map_err(|e| chain(&e))?;
                std::hint::black_box(payload);
                let i = index_of(key.as_bytes()).ok_or_else(|| format!("a stray key {key:?}"))?;
                Ok((i, deadline))
            })
            .collect()
    }
}

/// A baseline: which server, and how often it is polled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Server {
    Redis,
    Postgres,
}

impl Server {
    fn name(self) -> &'static str {
        match self {
            Server::Redis => "Redis sorted set, Lua claim",
            Server::Postgres => "PostgreSQL, FOR UPDATE SKIP LOCKED",
        }
    }

    /// The name (`comm`) of the server's processes on this machine.
    fn process(self) -> &'static str {
        match self {
            Server::Redis => "redis-server",
            Server::Postgres => "postgres",
        }
    }

    /// CPU time of the server's processes on this machine so far, if they are local and `/proc`
    /// shows them.
    fn cpu(self) -> Option<Duration> {
        procfs::cpu_of_processes(self.process())
    }
}

/// The baselines' servers, each connected or the reason it is not.
struct Servers {
    redis: Result<RedisSvc, String>,
    pg: Result<PgSvc, String>,
    /// What was removed of killed runs' data.
    swept: Vec<String>,
}

impl Servers {
    /// Connects to Redis at `redis` and PostgreSQL at `pg`.
    fn connect(redis: &str, pg: (&str, u16)) -> Servers {
        let (pid, stamp) = run_id();
        let redis = RedisSvc::connect(redis, format!("w13:{pid}:{stamp}:"))
            .map_err(|e| format!("Redis not reachable at {redis}: {e}; baseline skipped"));
        let pg = PgSvc::connect(pg, format!("w13_{pid}_{stamp}")).map_err(|e| {
            format!(
                "PostgreSQL not reachable at {}:{}: {e}; baseline skipped",
                pg.0, pg.1
            )
        });
        let mut swept = Vec::new();
        if let Ok(r) = &redis {
            swept.extend(r.sweep());
        }
        if let Ok(pg) = &pg {
            swept.extend(pg.sweep());
        }
        Servers { redis, pg, swept }
    }

    /// A new queue on `server`, or why there is none.
    fn queue(&self, server: Server, tag: &str) -> Result<Box<dyn Queue>, String> {
        match server {
            Server::Redis => self.redis.as_ref().map_err(Clone::clone)?.queue(tag),
            Server::Postgres => self.pg.as_ref().map_err(Clone::clone)?.queue(tag),
        }
    }

    fn reachable(&self, server: Server) -> Result<(), String> {
        match server {
            Server::Redis => self.redis.as_ref().map(drop).map_err(Clone::clone),
            Server::Postgres => self.pg.as_ref().map(drop).map_err(Clone::clone),
        }
    }

    /// Removes this run's data from both servers: what was done, for the notes.
    fn clean(&mut self) -> Vec<String> {
        let mut notes = std::mem::take(&mut self.swept);
        if let Ok(r) = &mut self.redis {
            notes.push(match r.clean() {
                Ok(n) => format!("Redis: deleted this run's {n} key(s) under {:?}", r.prefix),
                Err(e) => format!(
                    "Redis: could not delete this run's keys under {:?}: {e}",
                    r.prefix
                ),
            });
        }
        if let Ok(pg) = &mut self.pg {
            notes.push(match pg.drop_schema() {
                Ok(()) => format!("PostgreSQL: dropped this run's schema {}", pg.schema),
                Err(e) => format!(
                    "PostgreSQL: could not drop this run's schema {}: {e}",
                    pg.schema
                ),
            });
        }
        notes
    }
}

/// Our idle figures (part 3, and part 2's idle column).
#[derive(Clone, Debug)]
struct OursIdle {
    jobs: usize,
    window: Duration,
    reads: u64,
    /// Store reads over the baselines' (shorter or equal) idle window, from the same start.
    reads_short: u64,
    wakeups: u64,
    fired: u64,
    in_memory: u64,
}

/// What the idle phase measured: ours, and each baseline poller's queries over its window.
struct Idle {
    ours: Result<OursIdle, String>,
    /// `(server, interval)` → queries, or why not.
    baselines: Vec<((Server, Duration), Result<u64, String>)>,
}

/// Jobs `(index, deadline ms)` a day ahead (and up to an hour more).
fn day_ahead_jobs(n: usize) -> Vec<(usize, i64)> {
    let mut rng = Rng::new(seed(4));
    let base = now_ms() + DAY_MS;
    (0..n)
        .map(|i| {
            (
                i,
                base + i64::try_from(rng.range(0, HOUR_MS as u64)).unwrap_or(0),
            )
        })
        .collect()
}

/// Parts 2 (idle queries) and 3 at once: our jobs and the four baseline pollers each hold `n`
/// jobs a day ahead and are watched over the same idle window (ours over the longer part-3
/// window): counts only, so running them side by side changes nothing of what is counted.
fn idle_phase(p: &Params, n: usize, servers: &Servers, intervals: &[Duration]) -> Idle {
    let ours = (|| {
        let f = fresh(Jobs::builder().handler(KIND, noop))?;
        let jobs: Vec<Job> = day_ahead_jobs(n)
            .into_iter()
            .map(|(i, d)| Job::new(format!("I{i}"), KIND, at_ms(d)).with_payload(PAYLOAD))
            .collect();
        f.jobs
            .schedule_batch(jobs)
            .map_err(|e| format!("schedule_batch: {}", chain(&e)))?;
        Ok::<Fresh, String>(f)
    })();
    let mut pollers = Vec::new();
    let mut baselines = Vec::new();
    // Set up first, then start every poller at the same instant.
    let mut queues = Vec::new();
    for server in [Server::Redis, Server::Postgres] {
        for &interval in intervals {
            let tag = format!("idle_{}ms", interval.as_millis());
            let queue = servers.queue(server, &tag).and_then(|mut q| {
                q.insert(&day_ahead_jobs(n), 'I')?;
                Ok(q)
            });
            queues.push(((server, interval), queue));
        }
    }
    // Far-off jobs leave the timer's young queue for the wheel 256 ticks after they are stamped;
    // the window starts well after.
    let start = Instant::now() + Duration::from_millis(500);
    for (which, queue) in queues {
        match queue {
            Err(e) => baselines.push((which, Err(e))),
            Ok(mut queue) => {
                let end = start + p.idle_baselines;
                let spawned = thread::Builder::new()
                    .name("w13-idle-poller".to_owned())
                    .spawn(move || {
                        poll(&mut *queue, which.1, start, end, &|| false, &mut |_, _| {})
                    });
                match spawned {
                    Ok(h) => pollers.push((which, h)),
                    Err(e) => baselines.push((which, Err(format!("spawning the poller: {e}")))),
                }
            }
        }
    }
    let ours = ours.and_then(|f| {
        thread::sleep(start.saturating_duration_since(Instant::now()));
        let (s0, w0) = (f.jobs.stats(), f.jobs.timer().stats().tick_wakeups);
        let short = p.idle_baselines.min(p.idle_ours);
        thread::sleep(short);
        let mid = f.jobs.stats();
        thread::sleep(p.idle_ours - short);
        let (s1, w1) = (f.jobs.stats(), f.jobs.timer().stats().tick_wakeups);
        f.close()?;
        Ok(OursIdle {
            jobs: n,
            window: p.idle_ours,
            reads: s1.store_reads - s0.store_reads,
            reads_short: mid.store_reads - s0.store_reads,
            wakeups: w1 - w0,
            fired: s1.fired,
            in_memory: s1.in_memory,
        })
    });
    for (which, h) in pollers {
        let r = h
            .join()
            .unwrap_or_else(|_| Err("the poller thread panicked".to_owned()));
        baselines.push((which, r));
    }
    Idle { ours, baselines }
}

fn lateness_section(
    p: &Params,
    servers: (&str, (&str, u16)),
    progress: &mut dyn FnMut(&str),
    out: &mut Outcome,
) {
    let n = p.late_n;
    let offsets = late_offsets(n, p.late_window);
    let intervals = [Duration::from_secs(1), Duration::from_millis(100)];
    progress("W13.2 connecting to Redis and PostgreSQL");
    let mut servers = Servers::connect(servers.0, servers.1);
    progress(&format!(
        "W13.2 {OURS}: {} jobs due over {}",
        report::count(n),
        report::secs(p.late_window)
    ));
    let ours = ours_lateness(p, &offsets);
    let mut runs: Vec<((Server, Duration), Result<LateRun, String>)> = Vec::new();
    for server in [Server::Redis, Server::Postgres] {
        for interval in intervals {
            let r = servers.reachable(server).and_then(|()| {
                progress(&format!(
                    "W13.2 {}, poll every {} ms: {} jobs due over {}",
                    server.name(),
                    interval.as_millis(),
                    report::count(n),
                    report::secs(p.late_window)
                ));
                let queue = servers.queue(server, &format!("late_{}ms", interval.as_millis()))?;
                baseline_lateness(server, queue, interval, p, &offsets)
            });
            runs.push(((server, interval), r));
        }
    }
    progress(&format!(
        "W13.2/3 idle: {} jobs a day ahead in each; ours watched {}, the pollers {}",
        report::count(n),
        report::secs(p.idle_ours),
        report::secs(p.idle_baselines)
    ));
    let idle = idle_phase(p, n, &servers, &intervals);
    let cleaned = servers.clean();

    let mut t = Table::new(
        format!(
            "W13.2 fire lateness on the real clock: {} jobs due uniformly over {} starting {} ms \
             ahead; idle queries with {} jobs a day ahead",
            report::count(n),
            report::secs(p.late_window),
            p.lead.as_millis(),
            report::count(n)
        ),
        &[
            "implementation",
            "poll interval",
            "p50 ms",
            "p99 ms",
            "max ms",
            "early",
            "lost",
            "process CPU ms",
            "server CPU ms",
            "idle queries/s",
            "insert ms",
        ],
    );
    let skipped = |name: &str, interval: &str, t: &mut Table| {
        let mut row = vec![name.to_owned(), interval.to_owned()];
        row.extend(std::iter::repeat_n("-".to_owned(), 9));
        t.row(row);
    };
    let late_row = |name: &str, interval: &str, r: &LateRun, idle: String| {
        let l = |f: fn(&Lateness) -> i64| r.lateness.as_ref().map_or("-".to_owned(), |x| ms(f(x)));
        vec![
            name.to_owned(),
            interval.to_owned(),
            l(|x| x.p50),
            l(|x| x.p99),
            l(|x| x.max),
            r.early.to_string(),
            r.lost.to_string(),
            r.cpu.map_or("n/a".to_owned(), ms1),
            r.server_cpu.map_or("n/a".to_owned(), |d| {
                format!("{:.0}", d.as_secs_f64() * 1e3)
            }),
            idle,
            ms1(r.insert),
        ]
    };
    let ours_idle_rate = match &idle.ours {
        Ok(i) => format!(
            "{:.2}",
            i.reads_short as f64 / p.idle_baselines.min(p.idle_ours).as_secs_f64()
        ),
        Err(_) => "-".to_owned(),
    };
    let ours_interval = "none (timer, tick 1 ms)";
    match &ours {
        Ok(r) => t.row(late_row(OURS, ours_interval, r, ours_idle_rate)),
        Err(e) => {
            skipped(OURS, ours_interval, &mut t);
            t.note(format!("{OURS}: failed: {e}"));
        }
    }
    let mut noted = Vec::new();
    for ((server, interval), r) in &runs {
        let label = format!("{} ms", interval.as_millis());
        let idle_rate = idle
            .baselines
            .iter()
            .find(|(w, _)| *w == (*server, *interval))
            .map_or("-".to_owned(), |(_, q)| match q {
                Ok(q) => format!("{:.2}", *q as f64 / p.idle_baselines.as_secs_f64()),
                Err(_) => "-".to_owned(),
            });
        match r {
            Ok(r) => t.row(late_row(server.name(), &label, r, idle_rate)),
            Err(e) => {
                skipped(server.name(), &label, &mut t);
                // An unreachable server is said once, as it was found.
                if !noted.contains(e) {
                    t.note(e.clone());
                    noted.push(e.clone());
                }
            }
        }
    }
    for ((server, interval), q) in &idle.baselines {
        if let Err(e) = q
            && !noted.contains(e)
        {
            t.note(format!(
                "{} every {} ms, idle: failed: {e}",
                server.name(),
                interval.as_millis()
            ));
            noted.push(e.clone());
        }
    }
    t.note(format!(
        "method: the same {} deadlines (whole milliseconds, uniform over {} from {} ms after the \
         insert began) for every implementation, run one after another; each run records wall \
         clock now - deadline (signed) into the job's own slot; percentiles by nearest rank; \
         early = ran before its deadline; lost = not run 10 s after the last deadline",
        report::count(n),
        report::secs(p.late_window),
        p.lead.as_millis()
    ));
    t.note(format!(
        "{OURS}: default settings (timer tick 1 ms, fsync per commit, 1 h horizon), all N in one \
         schedule_batch; the handler records its lateness{}",
        match &ours {
            Ok(LateRun {
                stats: Some(s),
                commits,
                ..
            }) => format!(
                "; its own stats() histogram (to within 1/16): p50 {} ms, p99 {} ms, max {} ms; \
                 its runs' deletes took {} fsync'd commits (the process CPU column is mostly \
                 those)",
                ms(s.p50),
                ms(s.p99),
                ms(s.max),
                commits.map_or("?".to_owned(), thousands)
            ),
            _ => String::new(),
        }
    ));
    t.note(format!(
        "Redis: one sorted set per run, member = key + payload, score = deadline ms, inserted by \
         pipelined ZADDs of 1,000; one poller thread claims with one EVALSHA of a Lua script \
         (ZRANGEBYSCORE key -inf now WITHSCORES LIMIT 0 {CLAIM}, then ZREM of those, atomically) \
         every interval, again at once while a claim comes back full, and runs each job"
    ));
    t.note(format!(
        "PostgreSQL: one table per run (key text primary key, deadline bigint ms, indexed, payload \
         bytea), inserted by unnest() arrays of 10,000 rows, then ANALYZE; one poller thread runs \
         a prepared DELETE ... WHERE key IN (SELECT key ... WHERE deadline <= $now ORDER BY \
         deadline LIMIT {CLAIM} FOR UPDATE SKIP LOCKED) RETURNING key, deadline, payload (one \
         transaction) every interval, again at once while a claim comes back full"
    ));
    t.note(
        "pollers run at a fixed rate from their first poll; a job waits on average half an \
         interval for the next poll: the baselines' lateness is set by their interval, ours by \
         the timer's tick",
    );
    t.note(
        "process CPU = this process's CPU clock from the end of the insert to the last run (ours: \
         until the runs' deletes were on disk): ours holds its store in the process, the \
         baselines' CPU here is only their client side; the Redis and PostgreSQL servers' own CPU \
         is outside this process and not in it: server CPU = utime + stime (with reaped \
         children) of every redis-server / postgres process on this machine over the same span, \
         from /proc in 10 ms ticks (n/a: in-process, or not visible; any other client of those \
         servers would count too)",
    );
    t.note(format!(
        "idle queries/s, over the same {} window for all five, each holding {} jobs a day ahead \
         and watched at the same time (counts only): ours = store reads (`stats().store_reads`, \
         the first {} of W13.3's window) / the window's length; a baseline = its poller's claims \
         / the window's length",
        report::secs(p.idle_baselines),
        report::count(n),
        report::secs(p.idle_baselines)
    ));
    let lead_missed: Vec<String> = std::iter::once((OURS, 0u128, ours.as_ref().ok()))
        .chain(
            runs.iter()
                .map(|((s, i), r)| (s.name(), i.as_millis(), r.as_ref().ok())),
        )
        .filter_map(|(name, i, r)| {
            let r = r?;
            (r.insert > p.lead).then(|| format!("{name} {i}: {} ms", ms1(r.insert)))
        })
        .collect();
    if !lead_missed.is_empty() {
        t.note(format!(
            "the insert took longer than the {} ms lead for: {} (the earliest jobs were stored \
             after their deadline: their lateness includes it)",
            p.lead.as_millis(),
            lead_missed.join(", ")
        ));
    }
    let queries: Vec<String> = runs
        .iter()
        .filter_map(|((s, i), r)| {
            let q = r.as_ref().ok()?.queries?;
            Some(format!("{} every {} ms: {q}", s.name(), i.as_millis()))
        })
        .collect();
    if !queries.is_empty() {
        t.note(format!(
            "queries the pollers made over the lateness run: {}",
            queries.join("; ")
        ));
    }
    for c in cleaned {
        t.note(c);
    }
    out.tables.push(t);

    // Targets of part 2.
    let target = nanos(TICK + Duration::from_millis(2));
    match &ours {
        Ok(r) => {
            let p99 = r.lateness.map(|l| l.p99);
            out.checks.push(targets::check(
                "W13.p99",
                p99.map_or("no run".to_owned(), |v| format!("{} ms", ms(v))),
                Some(p99.is_some_and(|v| v <= target)),
            ));
            out.checks.push(targets::check(
                "W13.early",
                format!("{} of {}", r.early, report::count(n)),
                Some(r.early == 0),
            ));
            out.checks.push(targets::check(
                "W13.lost",
                format!(
                    "{} of {} lost, {} run twice",
                    r.lost,
                    report::count(n),
                    r.doubles
                ),
                Some(r.lost == 0 && r.doubles == 0),
            ));
        }
        Err(e) => {
            for key in ["W13.p99", "W13.early", "W13.lost"] {
                out.checks
                    .push(targets::check(key, format!("failed: {e}"), Some(false)));
            }
        }
    }

    // Part 3.
    let mut t3 = Table::new(
        format!(
            "W13.3 idle: {} jobs stored a day ahead, {} idle window, {OURS}",
            report::count(n),
            report::secs(p.idle_ours)
        ),
        &[
            "implementation",
            "store reads",
            "timer tick wake-ups",
            "jobs run",
            "jobs in memory",
        ],
    );
    match &idle.ours {
        Ok(i) => {
            t3.row(vec![
                OURS.to_owned(),
                i.reads.to_string(),
                i.wakeups.to_string(),
                i.fired.to_string(),
                i.in_memory.to_string(),
            ]);
            out.checks.push(targets::check(
                "W13.idle",
                format!(
                    "{} in {} ({} jobs a day ahead)",
                    i.reads,
                    report::secs(i.window),
                    report::count(i.jobs)
                ),
                Some(i.reads == 0),
            ));
        }
        Err(e) => {
            t3.row(vec![
                OURS.to_owned(),
                "failed".to_owned(),
                "-".to_owned(),
                "-".to_owned(),
                "-".to_owned(),
            ]);
            t3.note(format!("failed: {e}"));
            out.checks.push(targets::check(
                "W13.idle",
                format!("failed: {e}"),
                Some(false),
            ));
        }
    }
    t3.note(
        "method: a new store, the jobs stored by one schedule_batch (deadlines a day ahead plus up \
         to an hour: beyond the 1 h horizon, so none is in memory), 0.5 s to settle, then \
         `stats().store_reads` and the timer's `stats().tick_wakeups` read before and after the \
         window; store reads = the window's range reads plus one read per job run",
    );
    out.tables.push(t3);
}

// ---------------------------------------------------------------------------------------------
// Parts 4 and 5: recovery, bytes per job
// ---------------------------------------------------------------------------------------------

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
fn recovery_deadline(i: usize, p: &Params, t0: i64) -> i64 {
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
    let dir = temp_dir()?;
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

fn recovery_section(p: &Params, progress: &mut dyn FnMut(&str), out: &mut Outcome) {
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

#[cfg(test)]
mod tests {
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
