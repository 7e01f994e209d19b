//! Fail-over with real processes: three nodes share a PostgreSQL schema and schedule jobs from
//! all of them; one is killed with SIGKILL mid-run. Every acknowledged job fires at least once;
//! duplicates (only possible across a lease change) are counted and reported; how long the dead
//! node's jobs waited is measured. Real clock: bounds are generous (never a figure asserted; the
//! figures are W14's).
#![cfg(feature = "postgres")]

use std::collections::HashMap;
use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use tickwheel_durable::store::{PgOptions, PgStore};
use tickwheel_durable::{Job, JobContext, Jobs};

const NODE: &str = "DURABLE_FAILOVER_NODE";
const LEASE: Duration = Duration::from_secs(2);
const JOBS_PER_NODE: usize = 150;

fn conninfo() -> String {
    std::env::var("TICKWHEEL_PG")
        .unwrap_or_else(|_| "host=127.0.0.1 user=postgres dbname=test".to_owned())
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

/// One line per event, one `write` each, to a file all nodes append to.
fn log_line(path: &Path, line: &str) {
    let mut f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    f.write_all(format!("{line}\n").as_bytes()).unwrap();
}

/// A node: schedules its jobs (due over the next 8 s), fires what its shards hold, until it is
/// killed or told to stop (the stop file appears).
#[test]
fn failover_node() {
    let Ok(name) = std::env::var(NODE) else {
        return;
    };
    let schema = std::env::var("DURABLE_FAILOVER_SCHEMA").unwrap();
    let dir = PathBuf::from(std::env::var("DURABLE_FAILOVER_DIR").unwrap());
    let log = Arc::new(dir.join("log"));
    let l = log.clone();
    let me = name.clone();
    let options = PgOptions::new(conninfo())
        .schema(schema)
        .shards(16)
        .lease(LEASE)
        .node(name.clone());
    let jobs = Jobs::builder()
        .handler("mark", move |cx: &JobContext<'_>| {
            log_line(&l, &format!("F {} {me} {}", cx.key(), now_ns()));
            Ok(())
        })
        .open_store(PgStore::open(options).unwrap())
        .unwrap();
    // Let the nodes find each other before scheduling (not needed for correctness).
    std::thread::sleep(Duration::from_secs(2));
    let start = SystemTime::now();
    for i in 0..JOBS_PER_NODE {
        let due = start + Duration::from_millis(500 + (i as u64 * 8_000) / JOBS_PER_NODE as u64);
        let key = format!("{name}-{i}");
        if jobs.schedule(Job::new(key.as_str(), "mark", due)).is_ok() {
            let ns = due
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap()
                .as_nanos();
            log_line(&log, &format!("S {key} {ns}"));
        }
    }
    while !dir.join("stop").exists() {
        std::thread::sleep(Duration::from_millis(50));
    }
    jobs.close().unwrap();
}

struct Node(Child);

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_node_killed_mid_run_loses_no_job() {
    if std::env::var_os(NODE).is_some() {
        return;
    }
    let schema = format!("tw_failover_{}", std::process::id());
    let mut admin = match postgres::Client::connect(&conninfo(), postgres::NoTls) {
        Ok(c) => c,
        Err(e) => return eprintln!("SKIPPED: no PostgreSQL at {:?}: {e}", conninfo()),
    };
    let dir = tempfile::tempdir().unwrap();
    let spawn = |name: &str| {
        Node(
            Command::new(std::env::current_exe().unwrap())
                .args([
                    "--exact",
                    "failover_node",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(NODE, name)
                .env("DURABLE_FAILOVER_SCHEMA", &schema)
                .env("DURABLE_FAILOVER_DIR", dir.path())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        )
    };
    // The schema made once, before the nodes race for it.
    drop(PgStore::open(PgOptions::new(conninfo()).schema(schema.clone()).shards(16)).unwrap());
    let mut nodes = vec![spawn("n0"), spawn("n1"), spawn("n2")];
    // Mid-run: the jobs are being scheduled and fired.
    std::thread::sleep(Duration::from_secs(4));
    let killed_at = now_ns();
    let mut victim = nodes.remove(1);
    victim.0.kill().unwrap(); // SIGKILL
    victim.0.wait().unwrap();

    let read = || std::fs::read_to_string(dir.path().join("log")).unwrap_or_default();
    let give_up = Instant::now() + Duration::from_secs(90);
    let (scheduled, fires) = loop {
        let text = read();
        let mut scheduled: HashMap<String, u64> = HashMap::new();
        let mut fires: HashMap<String, Vec<(String, u64)>> = HashMap::new();
        for line in text.lines() {
            let parts: Vec<&str> = line.split(' ').collect();
            match parts.as_slice() {
                ["S", key, due] => {
                    scheduled.insert((*key).to_owned(), due.parse().unwrap());
                }
                ["F", key, node, at] => fires
                    .entry((*key).to_owned())
                    .or_default()
                    .push(((*node).to_owned(), at.parse().unwrap())),
                _ => panic!("a malformed log line: {line:?}"),
            }
        }
        if scheduled.keys().all(|k| fires.contains_key(k)) && scheduled.len() >= 2 * JOBS_PER_NODE {
            break (scheduled, fires);
        }
        let missing = scheduled.keys().filter(|k| !fires.contains_key(*k)).count();
        assert!(
            Instant::now() < give_up,
            "{missing} of {} acknowledged jobs never fired",
            scheduled.len()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    std::fs::write(dir.path().join("stop"), b"").unwrap();
    for mut n in nodes {
        let _ = n.0.wait();
    }
    let duplicates = fires.values().filter(|f| f.len() > 1).count();
    // How long the jobs due after the kill waited: the dead node's shards among them, until
    // another node took them over.
    let waited = (scheduled.iter())
        .filter(|&(_, &due)| due > killed_at)
        .map(|(k, &due)| {
            fires[k]
                .iter()
                .map(|&(_, at)| at)
                .min()
                .unwrap()
                .saturating_sub(due)
        })
        .max()
        .unwrap_or(0);
    println!(
        "{} jobs acknowledged, all fired; {duplicates} fired twice (across a lease change); \
         the longest wait of a job due after the kill: {:.2} s (lease {:?})",
        scheduled.len(),
        waited as f64 / 1e9,
        LEASE
    );
    assert!(
        Duration::from_nanos(waited) < Duration::from_secs(30),
        "the dead node's shards were not taken over"
    );
    let _ = admin.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"));
}
