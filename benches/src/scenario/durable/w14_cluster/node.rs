//! W14's node process: `wheelbench --w14-node key=value...` opens durable jobs on a `PgStore` and
//! takes commands on its stdin, one a line, answering each with one line on its stdout: `ok`
//! and `key=value` fields, or `err` and why. It exits after `close`, and at once when its stdin
//! closes before that (its parent is gone, whatever killed it).
//!
//! Every run of a job appends one line, `key node late_ns at_ns`, to the log file all nodes of a
//! cluster share, with one `write` (the file is opened for appending, so lines never interleave);
//! `late_ns` is the wall clock at the handler's start minus the job's deadline (signed: negative
//! is early), `at_ns` the wall clock then.
//!
//! | command | does | answers |
//! |---------|------|---------|
//! | `sched threads= batch= for_ms= start_ms= tag=` | `threads` threads, from wall-clock ms `start_ms`, call `schedule` (`batch=1`) or `schedule_batch` of `batch` jobs for `for_ms`, deadlines uniform over the next 24 h | jobs, calls, wall, ack percentiles, CPU, statements, commits |
//! | `due tag= base_ms= window_ms= n= idx= nodes=` | stores, in one `schedule_batch`, jobs `{tag}{i}` for the `i < n` with `i % nodes == idx`, due at `base_ms` + [`late_offsets`]`(n, window)[i]` | jobs, insert time |
//! | `stats` | | [`NodeStats`] |
//! | `close` | closes the jobs (leases given back), then exits | |

use std::fs::{File, OpenOptions};
use std::io::{BufRead as _, Write as _};
use std::path::PathBuf;
use std::process::ExitCode;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use tickwheel_durable::store::{PgOptions, PgStore};
use tickwheel_durable::{HandlerError, Job, JobContext, Jobs};

use super::super::common::{
    CALLER_STACK, PAYLOAD, at_ms, chain, day_ahead, late_offsets, nanos, percentiles, seed, wall_ns,
};
use super::KIND;
use crate::measure::procfs;
use crate::rng::Rng;

/// The hidden first argument that makes `wheelbench` a W14 node (not in its usage text).
pub const NODE_ARG: &str = "--w14-node";

/// A command or an answer: its first word, then `key=value` fields (values without spaces).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Msg {
    pub(super) head: String,
    fields: Vec<(String, String)>,
}

impl Msg {
    /// `head` and no fields yet.
    pub(super) fn new(head: &str) -> Msg {
        Msg {
            head: head.to_owned(),
            fields: Vec::new(),
        }
    }

    /// Adds the field `key=value`.
    pub(super) fn with(mut self, key: &str, value: impl ToString) -> Msg {
        self.fields.push((key.to_owned(), value.to_string()));
        self
    }

    /// A line: its first word, then `key=value` words.
    pub(super) fn parse(line: &str) -> Msg {
        let mut words = line.split_whitespace();
        let head = words.next().unwrap_or_default().to_owned();
        Msg {
            head,
            fields: words.filter_map(field).collect(),
        }
    }

    /// The value of field `key`, parsed.
    pub(super) fn get<T: FromStr>(&self, key: &str) -> Result<T, String> {
        let (_, v) = (self.fields.iter())
            .find(|(k, _)| k == key)
            .ok_or_else(|| format!("{}: no {key}", self.head))?;
        v.parse()
            .map_err(|_| format!("{}: {key}={v} is not what it should be", self.head))
    }

    /// As one line (without its newline).
    pub(super) fn line(&self) -> String {
        let mut s = self.head.clone();
        for (k, v) in &self.fields {
            s.push_str(&format!(" {k}={v}"));
        }
        s
    }
}

/// `key=value` as a pair.
fn field(word: &str) -> Option<(String, String)> {
    let (k, v) = word.split_once('=')?;
    Some((k.to_owned(), v.to_owned()))
}

/// What a node's `stats` answers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct NodeStats {
    /// `PgStore::statements()`: all of this node's, and its lease thread's.
    pub(super) statements: u64,
    pub(super) lease_statements: u64,
    /// `PgStore::held_shards().len()`.
    pub(super) held: u64,
    /// `Jobs::stats()`.
    pub(super) fired: u64,
    pub(super) in_memory: u64,
    pub(super) store_reads: u64,
    pub(super) commits: u64,
    /// The jobs' own lateness histogram (to within 1/16), ns.
    pub(super) p50: i64,
    pub(super) p99: i64,
    pub(super) max: i64,
    /// The node process's CPU time so far, ns.
    pub(super) cpu: i64,
}

impl NodeStats {
    /// From a `stats` answer.
    pub(super) fn of(m: &Msg) -> Result<NodeStats, String> {
        Ok(NodeStats {
            statements: m.get("statements")?,
            lease_statements: m.get("lease_statements")?,
            held: m.get("held")?,
            fired: m.get("fired")?,
            in_memory: m.get("in_memory")?,
            store_reads: m.get("store_reads")?,
            commits: m.get("commits")?,
            p50: m.get("p50")?,
            p99: m.get("p99")?,
            max: m.get("max")?,
            cpu: m.get("cpu")?,
        })
    }

    /// Statements sent other than the lease thread's.
    pub(super) fn jobs_statements(&self) -> u64 {
        self.statements - self.lease_statements
    }
}

/// Runs this process as a W14 node (`args`: what follows [`NODE_ARG`]); its exit code.
pub fn node_main(args: &[String]) -> ExitCode {
    match serve(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            answer(&format!("err {e}"));
            ExitCode::FAILURE
        }
    }
}

/// Writes one answer line (a line break in it made a space) and flushes it.
fn answer(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", line.replace(['\n', '\r'], " "));
    let _ = out.flush();
}

/// An open node.
struct Node {
    jobs: Jobs,
    store: PgStore,
    index: usize,
}

fn serve(args: &[String]) -> Result<(), String> {
    let a = Msg {
        head: NODE_ARG.to_owned(),
        fields: args.iter().filter_map(|w| field(w)).collect(),
    };
    let conninfo: String = a.get("conninfo")?;
    let schema: String = a.get("schema")?;
    let name: String = a.get("node")?;
    let index: usize = a.get("index")?;
    let lease = Duration::from_millis(a.get("lease_ms")?);
    let log: PathBuf = a.get("log")?;
    let log: Arc<File> = Arc::new(
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .map_err(|e| format!("{}: {e}", log.display()))?,
    );
    let options = PgOptions::new(conninfo)
        .schema(schema)
        .lease(lease)
        .node(name);
    let store = PgStore::open(options).map_err(|e| format!("PgStore::open: {}", chain(&e)))?;
    let handler = move |cx: &JobContext<'_>| -> Result<(), HandlerError> {
        let at = wall_ns(SystemTime::now());
        let late = at - wall_ns(cx.deadline());
        let line = format!("{} {index} {late} {at}\n", cx.key());
        (&*log).write_all(line.as_bytes())?;
        Ok(())
    };
    let jobs = Jobs::builder()
        .handler(KIND, handler)
        .open_store(store.clone())
        .map_err(|e| format!("open_store: {}", chain(&e)))?;
    let node = Node { jobs, store, index };
    // Commands come through a thread of their own, which ends the process when stdin closes
    // before a `close`: the parent is gone.
    let (tx, rx) = mpsc::channel::<String>();
    thread::Builder::new()
        .name("w14-stdin".to_owned())
        .spawn(move || {
            for line in std::io::stdin().lock().lines() {
                let Ok(line) = line else { break };
                let closing = Msg::parse(&line).head == "close";
                if tx.send(line).is_err() || closing {
                    return;
                }
            }
            std::process::exit(3);
        })
        .map_err(|e| format!("spawning the stdin thread: {e}"))?;
    answer("ok ready");
    for line in rx {
        let cmd = Msg::parse(&line);
        let result = match cmd.head.as_str() {
            "sched" => node.sched(&cmd),
            "due" => node.due(&cmd),
            "stats" => Ok(node.stats()),
            "close" => {
                let closed = node
                    .jobs
                    .close()
                    .map_err(|e| format!("close: {}", chain(&e)));
                answer(&closed.map_or_else(|e| format!("err {e}"), |()| "ok".to_owned()));
                return Ok(());
            }
            other => Err(format!("unknown command {other:?}")),
        };
        answer(&result.map_or_else(|e| format!("err {e}"), |m| m.line()));
    }
    Ok(())
}

/// What one caller thread of `sched` did.
struct Calls {
    began: Instant,
    ended: Instant,
    latency: Vec<i64>,
    jobs: u64,
    error: Option<String>,
}

impl Node {
    fn stats(&self) -> Msg {
        let s = self.jobs.stats();
        let (all, lease) = self.store.statements();
        let cpu = procfs::process_cpu().map_or(0, nanos);
        Msg::new("ok")
            .with("statements", all)
            .with("lease_statements", lease)
            .with("held", self.store.held_shards().len())
            .with("fired", s.fired)
            .with("in_memory", s.in_memory)
            .with("store_reads", s.store_reads)
            .with("commits", s.commits)
            .with("p50", nanos(s.lateness_p50))
            .with("p99", nanos(s.lateness_p99))
            .with("max", nanos(s.lateness_max))
            .with("cpu", cpu)
    }

    fn sched(&self, cmd: &Msg) -> Result<Msg, String> {
        let threads: usize = cmd.get("threads")?;
        let batch: usize = cmd.get("batch")?;
        let for_ = Duration::from_millis(cmd.get("for_ms")?);
        let start = at_ms(cmd.get("start_ms")?);
        let tag: char = cmd.get("tag")?;
        let s0 = self.jobs.stats();
        let (all0, lease0) = self.store.statements();
        let cpu0 = procfs::process_cpu();
        let mut handles = Vec::with_capacity(threads);
        for t in 0..threads {
            let jobs = self.jobs.clone();
            let keys = format!("{tag}{}-{t}-", self.index);
            let seed = seed(10_000 * (self.index as u64 + 1) + t as u64);
            let spawned = thread::Builder::new()
                .name("w14-caller".to_owned())
                .stack_size(CALLER_STACK)
                .spawn(move || calls(&jobs, &keys, seed, batch, start, for_));
            handles.push(spawned.map_err(|e| format!("spawning caller {t}: {e}"))?);
        }
        let mut done = Vec::with_capacity(threads);
        for h in handles {
            done.push(h.join().map_err(|_| "a caller panicked".to_owned())?);
        }
        let cpu = procfs::process_cpu()
            .zip(cpu0)
            .map_or(0, |(b, a)| nanos(b - a));
        let (all1, lease1) = self.store.statements();
        let s1 = self.jobs.stats();
        if let Some(e) = done.iter().find_map(|c| c.error.clone()) {
            return Err(e);
        }
        let began = done.iter().map(|c| c.began).min();
        let ended = done.iter().map(|c| c.ended).max();
        let wall = began.zip(ended).map_or(Duration::ZERO, |(b, e)| e - b);
        let jobs: u64 = done.iter().map(|c| c.jobs).sum();
        let latency: Vec<i64> = done.into_iter().flat_map(|c| c.latency).collect();
        let calls = latency.len();
        let l = percentiles(latency).unwrap_or_default();
        Ok(Msg::new("ok")
            .with("jobs", jobs)
            .with("calls", calls)
            .with("wall", nanos(wall))
            .with("p50", l.p50)
            .with("p99", l.p99)
            .with("cpu", cpu)
            .with("statements", all1 - all0)
            .with("lease_statements", lease1 - lease0)
            .with("commits", s1.commits - s0.commits))
    }

    fn due(&self, cmd: &Msg) -> Result<Msg, String> {
        let tag: char = cmd.get("tag")?;
        let base: i64 = cmd.get("base_ms")?;
        let window = Duration::from_millis(cmd.get("window_ms")?);
        let n: usize = cmd.get("n")?;
        let idx: usize = cmd.get("idx")?;
        let nodes: usize = cmd.get("nodes")?;
        let offsets = late_offsets(n, window);
        let batch: Vec<Job> = (0..n)
            .filter(|i| i % nodes.max(1) == idx)
            .map(|i| {
                Job::new(format!("{tag}{i}"), KIND, at_ms(base + offsets[i])).with_payload(PAYLOAD)
            })
            .collect();
        let count = batch.len();
        let t0 = Instant::now();
        self.jobs
            .schedule_batch(batch)
            .map_err(|e| format!("schedule_batch: {}", chain(&e)))?;
        Ok(Msg::new("ok")
            .with("jobs", count)
            .with("insert", nanos(t0.elapsed())))
    }
}

/// One caller of `sched`: from `start` (wall clock) for `for_`, jobs keyed `{keys}{n}` due
/// uniformly over the next 24 h, one `schedule` each (`batch` 1) or `schedule_batch` of `batch`.
fn calls(
    jobs: &Jobs,
    keys: &str,
    seed: u64,
    batch: usize,
    start: SystemTime,
    for_: Duration,
) -> Calls {
    thread::sleep(start.duration_since(SystemTime::now()).unwrap_or_default());
    let began = Instant::now();
    let now = SystemTime::now();
    let mut rng = Rng::new(seed);
    let mut out = Calls {
        began,
        ended: began,
        latency: Vec::with_capacity(1024),
        jobs: 0,
        error: None,
    };
    let per_call = batch.max(1) as u64;
    while began.elapsed() < for_ {
        let first = out.jobs;
        let many: Vec<Job> = (first..first + per_call)
            .map(|n| {
                Job::new(format!("{keys}{n}"), KIND, day_ahead(&mut rng, now)).with_payload(PAYLOAD)
            })
            .collect();
        let t0 = Instant::now();
        let sent = send(jobs, many);
        out.latency.push(nanos(t0.elapsed()));
        if let Err(e) = sent {
            out.error = Some(e);
            break;
        }
        out.jobs += per_call;
    }
    out.ended = Instant::now();
    out
}

/// One job through `schedule`, more through `schedule_batch`.
fn send(jobs: &Jobs, mut many: Vec<Job>) -> Result<(), String> {
    if many.len() == 1
        && let Some(one) = many.pop()
    {
        return jobs
            .schedule(one)
            .map_err(|e| format!("schedule: {}", chain(&e)));
    }
    jobs.schedule_batch(many)
        .map_err(|e| format!("schedule_batch: {}", chain(&e)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip() {
        let m = Msg::new("due")
            .with("tag", 'L')
            .with("n", 3000)
            .with("base_ms", -5);
        assert_eq!(m.line(), "due tag=L n=3000 base_ms=-5");
        let back = Msg::parse(&m.line());
        assert_eq!(back, m);
        assert_eq!(back.get::<char>("tag"), Ok('L'));
        assert_eq!(back.get::<i64>("base_ms"), Ok(-5));
        assert!(back.get::<usize>("base_ms").is_err());
        assert!(back.get::<usize>("window_ms").is_err());
        assert_eq!(Msg::parse("  ok  ").head, "ok");
        assert_eq!(Msg::parse("").head, "");
    }
}
