//! The crash test: a child process schedules, cancels and fires jobs under load on the real clock
//! until it is killed with SIGKILL at a random moment; a new child reopens the store and goes on.
//! After every round, and at the end, the log the children kept is checked against the store:
//!
//! - every acknowledged schedule that no cancel was asked for fires at least once (a cancel cut
//!   short by the kill may have taken effect or not);
//! - no job fires after a cancel of it returned `true`;
//! - duplicate fires (a job run again after a crash cut its delete short) are counted and
//!   reported, never hidden.
//!
//! Rounds: `DURABLE_CRASH_ROUNDS` (CI runs a few; `just crash` many). The child is this very test
//! binary, run again with `DURABLE_CRASH_CHILD` set.

use std::collections::{HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use tickwheel_durable::{Job, JobContext, Jobs};

const CHILD: &str = "DURABLE_CRASH_CHILD";

/// One line per event, each written whole with one `write` to a file opened for appending: what
/// reached the file before the kill is there afterwards (the kernel keeps it), in order.
struct Log(Mutex<File>);

impl Log {
    fn open(path: &Path) -> Log {
        let f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .expect("the log opens");
        Log(Mutex::new(f))
    }

    fn line(&self, what: char, key: &str) {
        let mut f = self.0.lock().unwrap();
        f.write_all(format!("{what} {key}\n").as_bytes())
            .expect("the log takes a line");
    }
}

fn open_jobs(dir: &Path, log: Arc<Log>) -> Jobs {
    Jobs::builder()
        .handler("work", move |cx: &JobContext<'_>| {
            log.line('F', cx.key());
            Ok(())
        })
        .horizon(Duration::from_secs(2))
        .open(dir.join("jobs.redb"))
        .expect("the store opens")
}

/// The child: load from four threads until killed. Each thread schedules jobs due in 0..400 ms
/// (a few of them later than the horizon), and cancels one job in five soon after.
#[test]
fn crash_child() {
    let Some(dir) = std::env::var_os(CHILD).map(PathBuf::from) else {
        return; // run by the parent only
    };
    let round: u64 = std::env::var("DURABLE_CRASH_ROUND")
        .unwrap()
        .parse()
        .unwrap();
    let log = Arc::new(Log::open(&dir.join("log")));
    let jobs = open_jobs(&dir, log.clone());
    let seq = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let (jobs, log, seq) = (jobs.clone(), log.clone(), seq.clone());
            std::thread::spawn(move || {
                let mut rng = 0x9e37_79b9_7f4a_7c15u64 ^ (round << 8) ^ t;
                loop {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    let n = seq.fetch_add(1, Relaxed);
                    let key = format!("r{round}-{n}");
                    let delay = match rng % 10 {
                        0 => Duration::from_millis(2500 + rng % 1000), // past the horizon
                        _ => Duration::from_millis(rng % 400),
                    };
                    let job = Job::new(key.as_str(), "work", SystemTime::now() + delay);
                    if jobs.schedule(job).is_ok() {
                        log.line('S', &key);
                    }
                    if rng.is_multiple_of(5) {
                        // The intent first: a kill between the cancel's commit and its 'C' line
                        // leaves a cancel in doubt, which may have taken effect.
                        log.line('c', &key);
                        if matches!(jobs.cancel(&key), Ok(true)) {
                            log.line('C', &key);
                        }
                    }
                }
            })
        })
        .collect();
    for t in threads {
        let _ = t.join();
    }
}

/// What the log says, checked: returns (acknowledged schedules, cancels, fires, duplicates).
fn check(
    log: &str,
    store_waiting: &HashSet<String>,
    finished: bool,
) -> (usize, usize, usize, usize) {
    let mut scheduled = HashSet::new();
    let mut cancelled = HashSet::new();
    let mut cancelling = HashSet::new();
    let mut fires: HashMap<&str, usize> = HashMap::new();
    for line in log.lines() {
        let Some((what, key)) = line.split_once(' ') else {
            continue; // a line cut by the kill cannot be: each is one write
        };
        match what {
            "S" => {
                scheduled.insert(key);
            }
            "c" => {
                cancelling.insert(key);
            }
            "C" => {
                cancelled.insert(key);
            }
            "F" => {
                assert!(
                    !cancelled.contains(key),
                    "job {key} fired after a cancel of it returned true"
                );
                *fires.entry(key).or_default() += 1;
            }
            other => panic!("a malformed log line: {other:?}"),
        }
    }
    for key in &scheduled {
        if cancelling.contains(key) || fires.contains_key(key) {
            continue; // cancelled (or maybe: a kill cut the answer short), or fired
        }
        // Not fired yet: it must still be stored, to fire later.
        assert!(
            !finished && store_waiting.contains(*key),
            "acknowledged job {key} neither fired nor is stored"
        );
    }
    let duplicates = fires.values().filter(|&&n| n > 1).count();
    let total: usize = fires.values().sum();
    (scheduled.len(), cancelled.len(), total, duplicates)
}

/// The keys the store holds (waiting), read after a round.
fn waiting_keys(dir: &Path) -> HashSet<String> {
    let store = tickwheel_durable::RedbStore::open(dir.join("jobs.redb")).expect("reopens");
    use tickwheel_durable::Store;
    store
        .due(0, None, u64::MAX, usize::MAX)
        .expect("reads")
        .jobs
        .into_iter()
        .map(|s| s.job.key().to_owned())
        .collect()
}

#[test]
fn kill_nine_at_random_moments_loses_nothing_acknowledged() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let rounds: u64 = std::env::var("DURABLE_CRASH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(4);
    let dir = tempfile::tempdir().unwrap();
    let me = std::env::current_exe().unwrap();
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    for round in 0..rounds {
        let mut child = Command::new(&me)
            .args(["--exact", "crash_child", "--nocapture", "--test-threads=1"])
            .env(CHILD, dir.path())
            .env("DURABLE_CRASH_ROUND", round.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the child starts");
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        // Killed between 0.3 s and 1.5 s into its run: during the open, the recovery of the last
        // round's overdue jobs, or the load.
        std::thread::sleep(Duration::from_millis(300 + rng % 1200));
        child.kill().expect("SIGKILL");
        child.wait().expect("reaped");
        let log = std::fs::read_to_string(dir.path().join("log")).unwrap_or_default();
        let (s, c, f, d) = check(&log, &waiting_keys(dir.path()), false);
        println!(
            "round {round}: {s} schedules acknowledged, {c} cancels, {f} fires, {d} duplicated"
        );
    }
    // The last reopen: everything acknowledged comes due within a few seconds and fires.
    let log = Arc::new(Log::open(&dir.path().join("log")));
    let jobs = open_jobs(dir.path(), log);
    let give_up = Instant::now() + Duration::from_secs(60);
    while jobs.counts().unwrap().waiting > 0 {
        assert!(
            Instant::now() < give_up,
            "jobs left waiting: {:?}",
            jobs.counts()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    jobs.timer().wait_idle();
    jobs.close().unwrap();
    let log = std::fs::read_to_string(dir.path().join("log")).unwrap();
    let (s, c, f, d) = check(&log, &HashSet::new(), true);
    println!(
        "after {rounds} kills: {s} schedules acknowledged, {c} cancels, {f} fires, \
         {d} jobs fired twice or more (each after a kill cut its delete short)"
    );
    assert!(
        s > 0,
        "the children scheduled nothing: the test tested nothing"
    );
}
