//! W13's part 1: durable schedules per second, from one thread, from 1,000 threads, and by
//! `schedule_batch` from one thread.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, PoisonError, RwLock};
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use tickwheel_durable::{Job, Jobs};

use super::super::common::{
    CALLER_STACK, OURS, PAYLOAD, chain, cpu_between, day_ahead, ms, nanos, percentiles, seed,
    thousands,
};
use super::{KIND, Params, fresh, noop};
use crate::measure::procfs;
use crate::report::targets;
use crate::report::{self, Table};
use crate::rng::Rng;
use crate::scenario::Outcome;
use crate::service::Lateness;

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

pub(super) fn schedules_section(p: &Params, progress: &mut dyn FnMut(&str), out: &mut Outcome) {
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
