//! What W13 and W14 share: formatting, wall-clock milliseconds, seeds, the run's id and the
//! removal of killed runs' leftovers, and the lateness slots every run records itself in.

use std::error::Error as StdError;
use std::fs;
use std::path::Path;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tempfile::TempDir;

use crate::rng::Rng;
use crate::service::Lateness;
use crate::workloads::SEED;

/// Our implementation's name in the tables.
pub(super) const OURS: &str = "tickwheel-durable";

/// Every job's payload: 64 bytes.
pub(super) const PAYLOAD: [u8; 64] = [b'p'; 64];

/// The timer's tick (the default of `tickwheel::Timer::new`, which the jobs run on).
pub(super) const TICK: Duration = Duration::from_millis(1);

/// Jobs a baseline claims per query (a full claim is followed by another at once).
pub(super) const CLAIM: usize = 1000;

/// Stack of each of the concurrent callers (W13's 1,000, W14's 100 per node).
pub(super) const CALLER_STACK: usize = 64 * 1024;

/// Where the PostgreSQL server is.
pub(super) const PG_ADDR: (&str, u16) = ("127.0.0.1", 5432);

/// A day and an hour, in milliseconds.
pub(super) const DAY_MS: i64 = 86_400_000;
pub(super) const HOUR_MS: i64 = 3_600_000;

/// An error and its sources, as one line (`postgres::Error` prints only its kind on its own).
pub(super) fn chain(e: &dyn StdError) -> String {
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
pub(super) fn wall_ns(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_nanos()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_nanos()).unwrap_or(i64::MAX),
    }
}

/// Milliseconds since the Unix epoch now (rounded down: a job due at or before it is due).
pub(super) fn now_ms() -> i64 {
    wall_ns(SystemTime::now()).div_euclid(1_000_000)
}

/// The wall-clock time `ms` milliseconds after the Unix epoch.
pub(super) fn at_ms(ms: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

pub(super) fn nanos(d: Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

pub(super) fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Nanoseconds as milliseconds with three decimals.
pub(super) fn ms(ns: i64) -> String {
    format!("{:.3}", ns as f64 / 1e6)
}

/// A duration as milliseconds with one decimal.
pub(super) fn ms1(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e3)
}

/// An integer with thousands separators: `41,234`.
pub(super) fn thousands(n: u64) -> String {
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
pub(super) fn percentiles(mut samples: Vec<i64>) -> Option<Lateness> {
    if samples.is_empty() {
        return None;
    }
    samples.sort_unstable();
    Some(Lateness::of_sorted(&samples))
}

/// A random seed per thread or part, far from its neighbours'.
pub(super) fn seed(k: u64) -> u64 {
    SEED ^ (k + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// A deadline uniform over the next 24 h from `now`.
pub(super) fn day_ahead(rng: &mut Rng, now: SystemTime) -> SystemTime {
    now + Duration::from_millis(rng.range(1, DAY_MS as u64))
}

/// This run: its process id and its start (ns since the Unix epoch). Its temporary directories,
/// PostgreSQL schema and Redis keys are named by them.
pub(super) fn run_id() -> (u32, u128) {
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
pub(super) const STALE: Duration = Duration::from_secs(3600);

/// True if `rest` (`{pid}{sep}{stamp}...`, a name without its prefix) names a run whose process
/// is gone, as `/proc` tells, and which started more than [`STALE`] ago.
pub(super) fn stale(rest: &str, sep: char) -> bool {
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

/// A temporary directory of this run, named `{prefix}{pid}-{stamp}-...` (a workload's prefix:
/// `wheelbench-w13-`).
pub(super) fn temp_dir(prefix: &str) -> Result<TempDir, String> {
    let (pid, stamp) = run_id();
    tempfile::Builder::new()
        .prefix(&format!("{prefix}{pid}-{stamp}-"))
        .tempdir()
        .map_err(|e| format!("cannot make a temporary directory: {e}"))
}

/// Removes the temporary directories under `prefix` of killed runs (see [`STALE`]): what was
/// done.
pub(super) fn sweep_temp_dirs(prefix: &str) -> Vec<String> {
    let Ok(entries) = fs::read_dir(std::env::temp_dir()) else {
        return Vec::new();
    };
    let mut notes = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.strip_prefix(prefix).is_some_and(|r| stale(r, '-')) {
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

/// Not run yet, in a lateness slot.
pub(super) const NOT_RUN: i64 = i64::MIN;

/// Where the runs of one lateness measurement record themselves: one slot per job.
pub(super) struct Slots {
    pub(super) late: Vec<AtomicI64>,
    pub(super) ran: AtomicUsize,
    pub(super) doubles: AtomicUsize,
    pub(super) strays: AtomicUsize,
}

impl Slots {
    pub(super) fn new(n: usize) -> Arc<Slots> {
        Arc::new(Slots {
            late: (0..n).map(|_| AtomicI64::new(NOT_RUN)).collect(),
            ran: AtomicUsize::new(0),
            doubles: AtomicUsize::new(0),
            strays: AtomicUsize::new(0),
        })
    }

    /// Job `i` ran `late_ns` after its deadline (negative: early).
    pub(super) fn record(&self, i: usize, late_ns: i64) {
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

    pub(super) fn ran(&self) -> usize {
        self.ran.load(Relaxed)
    }
}

/// The index of a job from its key or member: `L123` (a Redis member: `L123:` then the payload).
pub(super) fn index_of(key: &[u8]) -> Option<usize> {
    let digits = key.get(1..)?;
    let end = digits
        .iter()
        .position(|&b| b == b':')
        .unwrap_or(digits.len());
    std::str::from_utf8(&digits[..end]).ok()?.parse().ok()
}

/// What one implementation's lateness run measured.
#[derive(Clone, Debug, Default)]
pub(super) struct LateRun {
    /// Time to store the N jobs.
    pub(super) insert: Duration,
    pub(super) lateness: Option<Lateness>,
    pub(super) early: usize,
    pub(super) lost: usize,
    pub(super) doubles: usize,
    /// CPU time of this process from the end of the insert to the last run (ours: and its
    /// delete on disk).
    pub(super) cpu: Option<Duration>,
    /// Baselines: CPU time of the server's processes over the same span (to 10 ms).
    pub(super) server_cpu: Option<Duration>,
    /// Queries the poller made over the run (baselines).
    pub(super) queries: Option<u64>,
    /// Ours: the jobs' own lateness histogram (`stats()`).
    pub(super) stats: Option<Lateness>,
    /// Ours: commits over the same span as `cpu` (the runs' deletes).
    pub(super) commits: Option<u64>,
}

impl LateRun {
    pub(super) fn of(slots: &Slots, n: usize) -> LateRun {
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
pub(super) fn late_offsets(n: usize, window: Duration) -> Vec<i64> {
    let mut rng = Rng::new(seed(3));
    let w = u64::try_from(millis(window)).unwrap_or(1).max(1);
    (0..n)
        .map(|_| i64::try_from(rng.range(0, w - 1)).unwrap_or(0))
        .collect()
}

/// Sleeps until the window's last deadline, then until every job ran or `give_up`.
pub(super) fn wait_for_runs(slots: &Slots, n: usize, last_ms: i64, give_up: Instant) {
    let until_last = Duration::from_millis(u64::try_from(last_ms - now_ms()).unwrap_or(0));
    thread::sleep(until_last);
    while slots.ran() < n && Instant::now() < give_up {
        thread::sleep(Duration::from_millis(2));
    }
}

/// Jobs `(index, deadline ms)` a day ahead (and up to an hour more).
pub(super) fn day_ahead_jobs(n: usize) -> Vec<(usize, i64)> {
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

/// CPU time of this process between two readings.
pub(super) fn cpu_between(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    a.zip(b).map(|(a, b)| b.saturating_sub(a))
}
