//! The parent's side of W14's node processes: a cluster of them on one schema (this binary again,
//! with [`NODE_ARG`]), commands to all at once, the log of their runs, and the lease table as
//! the server has it.

use std::fs::File;
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

use tempfile::TempDir;
use tickwheel_durable::Store as _;
use tickwheel_durable::store::{PgOptions, PgStore};

use super::super::common::{chain, temp_dir};
use super::TEMP_PREFIX;
use super::node::{Msg, NODE_ARG, NodeStats};

/// How long a node may take to answer a command that does no timed work.
const ANSWER: Duration = Duration::from_secs(60);

/// One node process.
struct Node {
    name: String,
    child: Child,
    /// `None` once closed (the node exits when it reads the end).
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    /// Where its stderr goes.
    stderr: PathBuf,
    alive: bool,
}

impl Node {
    /// Starts `exe NODE_ARG args...`, its stderr to the file `stderr`.
    fn spawn(exe: &Path, args: Vec<String>, name: String, stderr: PathBuf) -> Result<Node, String> {
        let err = File::create(&stderr).map_err(|e| format!("{}: {e}", stderr.display()))?;
        let mut child = Command::new(exe)
            .arg(NODE_ARG)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(err)
            .spawn()
            .map_err(|e| format!("starting node {name} ({}): {e}", exe.display()))?;
        let (stdin, stdout) = (child.stdin.take(), child.stdout.take());
        let (tx, lines) = mpsc::channel();
        if let Some(stdout) = stdout {
            let reading = thread::Builder::new()
                .name("w14-node-out".to_owned())
                .spawn(move || {
                    for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                        if tx.send(line).is_err() {
                            return;
                        }
                    }
                });
            if let Err(e) = reading {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("spawning the reader of node {name}: {e}"));
            }
        }
        Ok(Node {
            name,
            child,
            stdin,
            lines,
            stderr,
            alive: true,
        })
    }

    fn send(&mut self, msg: &Msg) -> Result<(), String> {
        let stdin = (self.stdin.as_mut()).ok_or_else(|| format!("node {} is closed", self.name))?;
        writeln!(stdin, "{}", msg.line())
            .and_then(|()| stdin.flush())
            .map_err(|e| format!("node {}: {e}{}", self.name, self.last_words()))
    }

    /// Its answer to the last command: `ok ...` as a message, `err ...` as an error.
    fn answer(&mut self, timeout: Duration) -> Result<Msg, String> {
        let name = &self.name;
        match self.lines.recv_timeout(timeout) {
            Ok(line) => {
                let msg = Msg::parse(&line);
                match msg.head.as_str() {
                    "ok" => Ok(msg),
                    _ => Err(format!("node {name}: {line}")),
                }
            }
            Err(RecvTimeoutError::Timeout) => Err(format!(
                "node {name}: no answer within {} s",
                timeout.as_secs()
            )),
            Err(RecvTimeoutError::Disconnected) => {
                Err(format!("node {name} exited{}", self.last_words()))
            }
        }
    }

    /// The end of its stderr, if it wrote any.
    fn last_words(&self) -> String {
        let text = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(3).collect();
        match tail.is_empty() {
            true => String::new(),
            false => format!(
                " (its stderr: {})",
                tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
            ),
        }
    }

    /// SIGKILL, and reaped.
    fn kill(&mut self) -> Result<(), String> {
        self.alive = false;
        self.child
            .kill()
            .and_then(|()| self.child.wait().map(drop))
            .map_err(|e| format!("killing node {}: {e}", self.name))
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A job's run, as its node logged it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Run {
    pub(super) key: String,
    /// Index of the node that ran it.
    pub(super) node: usize,
    /// Wall clock at the handler's start minus the deadline, ns (negative: early).
    pub(super) late: i64,
    /// Wall clock at the handler's start, ns since the Unix epoch.
    pub(super) at: i64,
}

impl Run {
    /// A log line: `key node late_ns at_ns`.
    pub(super) fn parse(line: &str) -> Option<Run> {
        let mut w = line.split(' ');
        let run = Run {
            key: w.next()?.to_owned(),
            node: w.next()?.parse().ok()?,
            late: w.next()?.parse().ok()?,
            at: w.next()?.parse().ok()?,
        };
        w.next().is_none().then_some(run)
    }
}

/// The log all nodes of a cluster append their runs to, read as it grows.
struct RunLog {
    file: File,
    /// Bytes read after the last full line.
    partial: Vec<u8>,
}

impl RunLog {
    /// The runs logged since the last read; malformed lines counted in `bad`.
    fn read(&mut self, bad: &mut usize) -> Result<Vec<Run>, String> {
        let mut bytes = std::mem::take(&mut self.partial);
        self.file
            .read_to_end(&mut bytes)
            .map_err(|e| format!("reading the run log: {e}"))?;
        let end = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        self.partial = bytes.split_off(end);
        let text = String::from_utf8_lossy(&bytes);
        let mut runs = Vec::new();
        for line in text.lines() {
            match Run::parse(line) {
                Some(r) => runs.push(r),
                None => *bad += 1,
            }
        }
        Ok(runs)
    }
}

/// A shard's row of `tw_leases`, as the server has it now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct LeaseRow {
    pub(super) shard: u32,
    pub(super) owner: Option<String>,
    pub(super) epoch: i64,
    /// Its lease has not expired (by the server's clock).
    pub(super) live: bool,
}

/// Node processes sharing one schema, and what the parent reads of it.
pub(super) struct Nodes {
    nodes: Vec<Node>,
    conninfo: String,
    /// The schema (its `tw_*` tables).
    pub(super) schema: String,
    admin: postgres::Client,
    /// A store on the schema that is never started (it leases nothing): its `shard_of`.
    store: PgStore,
    log: RunLog,
    /// Log lines that did not parse.
    pub(super) bad_lines: usize,
    /// Closed by [`close`](Self::close): else, when it goes, its nodes are killed and its
    /// schema dropped.
    closed: bool,
    /// The log and the nodes' stderr; removed when the cluster goes.
    _dir: TempDir,
}

impl Nodes {
    /// Makes the schema `schema` (a store opened and dropped), then starts `k` nodes on it,
    /// named `n0`, `n1`...: each opens its jobs with a `lease` and answers `ready`.
    pub(super) fn start(
        conninfo: &str,
        schema: &str,
        k: usize,
        lease: Duration,
    ) -> Result<Nodes, String> {
        let dir = temp_dir(TEMP_PREFIX)?;
        let store = PgStore::open(PgOptions::new(conninfo).schema(schema).lease(lease))
            .map_err(|e| format!("PgStore::open (schema {schema}): {}", chain(&e)))?;
        let admin = postgres::Client::connect(conninfo, postgres::NoTls).map_err(|e| chain(&e))?;
        let log_path = dir.path().join("runs.log");
        let file = File::create(&log_path)
            .and_then(|_| File::open(&log_path))
            .map_err(|e| format!("{}: {e}", log_path.display()))?;
        let exe = std::env::current_exe().map_err(|e| format!("this program's path: {e}"))?;
        let mut nodes = Vec::with_capacity(k);
        for i in 0..k {
            let name = format!("n{i}");
            let args = vec![
                format!("conninfo={conninfo}"),
                format!("schema={schema}"),
                format!("node={name}"),
                format!("index={i}"),
                format!("lease_ms={}", lease.as_millis()),
                format!("log={}", log_path.display()),
            ];
            let stderr = dir.path().join(format!("{name}.stderr"));
            nodes.push(Node::spawn(&exe, args, name, stderr)?);
        }
        let mut cluster = Nodes {
            nodes,
            conninfo: conninfo.to_owned(),
            schema: schema.to_owned(),
            admin,
            store,
            log: RunLog {
                file,
                partial: Vec::new(),
            },
            bad_lines: 0,
            closed: false,
            _dir: dir,
        };
        for node in &mut cluster.nodes {
            node.answer(ANSWER)?;
        }
        Ok(cluster)
    }

    /// Nodes started (the killed ones too).
    pub(super) fn count(&self) -> usize {
        self.nodes.len()
    }

    /// Nodes alive (not killed).
    pub(super) fn alive(&self) -> usize {
        self.nodes.iter().filter(|n| n.alive).count()
    }

    /// Sends `cmd(i)` to every live node `i` at once, then waits for all their answers (each
    /// within `timeout` of the last).
    pub(super) fn all(
        &mut self,
        cmd: impl Fn(usize) -> Msg,
        timeout: Duration,
    ) -> Result<Vec<Msg>, String> {
        for (i, node) in self.nodes.iter_mut().enumerate() {
            if node.alive {
                node.send(&cmd(i))?;
            }
        }
        let mut answers = Vec::with_capacity(self.nodes.len());
        let mut first_error = None;
        for node in self.nodes.iter_mut().filter(|n| n.alive) {
            match node.answer(timeout) {
                Ok(m) => answers.push(m),
                Err(e) => first_error = first_error.or(Some(e)),
            }
        }
        first_error.map_or(Ok(answers), Err)
    }

    /// Every live node's stats.
    pub(super) fn stats(&mut self) -> Result<Vec<NodeStats>, String> {
        let answers = self.all(|_| Msg::new("stats"), ANSWER)?;
        answers.iter().map(NodeStats::of).collect()
    }

    /// The lease table now.
    pub(super) fn leases(&mut self) -> Result<Vec<LeaseRow>, String> {
        let rows = self
            .admin
            .query(
                &format!(
                    "SELECT shard, owner, epoch, expires > now() FROM {}.tw_leases ORDER BY shard",
                    self.schema
                ),
                &[],
            )
            .map_err(|e| format!("reading tw_leases: {}", chain(&e)))?;
        rows.iter()
            .map(|r| {
                Ok(LeaseRow {
                    shard: u32::try_from(r.try_get::<_, i32>(0).map_err(|e| chain(&e))?)
                        .unwrap_or(0),
                    owner: r.try_get(1).map_err(|e| chain(&e))?,
                    epoch: r.try_get(2).map_err(|e| chain(&e))?,
                    live: r.try_get(3).map_err(|e| chain(&e))?,
                })
            })
            .collect()
    }

    /// The sum of the shards' epochs: it grows by one each time a shard is taken.
    pub(super) fn epochs(&mut self) -> Result<i64, String> {
        Ok(self.leases()?.iter().map(|l| l.epoch).sum())
    }

    /// The live nodes' names.
    fn names(&self) -> Vec<&str> {
        (self.nodes.iter().filter(|n| n.alive))
            .map(|n| n.name.as_str())
            .collect()
    }

    /// True if every shard is leased (unexpired) to a live node, and each live node holds a
    /// share, no more than its even one: the state the nodes' rebalancing settles in.
    pub(super) fn balanced(&mut self) -> Result<bool, String> {
        let leases = self.leases()?;
        let names = self.names();
        let even = leases.len().div_ceil(names.len().max(1));
        let held = |name: &str| {
            (leases.iter())
                .filter(|l| l.live && l.owner.as_deref() == Some(name))
                .count()
        };
        let all_held = leases
            .iter()
            .all(|l| l.live && l.owner.as_deref().is_some_and(|o| names.contains(&o)));
        Ok(all_held && names.iter().all(|n| (1..=even).contains(&held(n))))
    }

    /// Waits until [`balanced`](Self::balanced) (polled every 20 ms): how long it took.
    pub(super) fn converge(&mut self, timeout: Duration) -> Result<Duration, String> {
        let start = Instant::now();
        while !self.balanced()? {
            if start.elapsed() > timeout {
                return Err(format!(
                    "the nodes did not share the shards evenly within {} s",
                    timeout.as_secs()
                ));
            }
            thread::sleep(Duration::from_millis(20));
        }
        Ok(start.elapsed())
    }

    /// The shard of `key` (the store's own hash).
    pub(super) fn shard_of(&self, key: &str) -> u32 {
        self.store.shard_of(key)
    }

    /// The runs logged since the last call.
    pub(super) fn runs(&mut self) -> Result<Vec<Run>, String> {
        self.log.read(&mut self.bad_lines)
    }

    /// Node `i`'s name.
    pub(super) fn name(&self, i: usize) -> &str {
        self.nodes.get(i).map_or("?", |n| n.name.as_str())
    }

    /// Kills node `i` with SIGKILL (and reaps it).
    pub(super) fn kill(&mut self, i: usize) -> Result<(), String> {
        let node = (self.nodes.get_mut(i)).ok_or_else(|| format!("no node {i}"))?;
        node.kill()
    }

    /// Starts watching the lease table (a thread with a connection of its own).
    pub(super) fn watch(&self) -> Result<LeaseWatch, String> {
        LeaseWatch::start(&self.conninfo, &self.schema)
    }

    /// Closes every live node (each gives its leases back and exits), then drops the schema.
    pub(super) fn close(mut self) -> Result<(), String> {
        self.closed = true;
        let closed = self.all(|_| Msg::new("close"), ANSWER).map(drop);
        for node in &mut self.nodes {
            node.stdin = None;
            let give_up = Instant::now() + Duration::from_secs(5);
            while matches!(node.child.try_wait(), Ok(None)) && Instant::now() < give_up {
                thread::sleep(Duration::from_millis(10));
            }
        }
        closed.and(self.drop_schema())
    }

    fn drop_schema(&mut self) -> Result<(), String> {
        self.admin
            .batch_execute(&format!("DROP SCHEMA IF EXISTS {} CASCADE", self.schema))
            .map_err(|e| format!("DROP SCHEMA {}: {}", self.schema, chain(&e)))
    }
}

impl Drop for Nodes {
    fn drop(&mut self) {
        if !self.closed {
            for node in &mut self.nodes {
                let _ = node.kill();
            }
            let _ = self.drop_schema();
        }
    }
}

/// What a [`LeaseWatch`] saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Watched {
    /// The most shards without a live lease (none, or expired) at one reading.
    pub(super) lapsed_max: usize,
    /// How long (summed over readings 50 ms apart) some shard had no live lease.
    pub(super) lapsed_for: Duration,
    /// Readings taken.
    pub(super) readings: u64,
}

/// A thread reading the lease table every 50 ms until stopped.
pub(super) struct LeaseWatch {
    stop: Arc<AtomicBool>,
    thread: thread::JoinHandle<Result<Watched, String>>,
}

/// How often a [`LeaseWatch`] reads.
const WATCH_EVERY: Duration = Duration::from_millis(50);

impl LeaseWatch {
    fn start(conninfo: &str, schema: &str) -> Result<LeaseWatch, String> {
        let mut client =
            postgres::Client::connect(conninfo, postgres::NoTls).map_err(|e| chain(&e))?;
        let query = format!(
            "SELECT count(*) FILTER (WHERE owner IS NULL OR expires <= now()) FROM {schema}.tw_leases"
        );
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = thread::Builder::new()
            .name("w14-lease-watch".to_owned())
            .spawn(move || {
                let mut w = Watched::default();
                while !s.load(Relaxed) {
                    let row = client.query_one(&query, &[]).map_err(|e| chain(&e))?;
                    let lapsed = usize::try_from(row.get::<_, i64>(0)).unwrap_or(0);
                    w.readings += 1;
                    w.lapsed_max = w.lapsed_max.max(lapsed);
                    if lapsed > 0 {
                        w.lapsed_for += WATCH_EVERY;
                    }
                    thread::sleep(WATCH_EVERY);
                }
                Ok(w)
            })
            .map_err(|e| format!("spawning the lease watch: {e}"))?;
        Ok(LeaseWatch { stop, thread })
    }

    /// Stops it: what it saw.
    pub(super) fn stop(self) -> Result<Watched, String> {
        self.stop.store(true, Relaxed);
        self.thread
            .join()
            .map_err(|_| "the lease watch panicked".to_owned())?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_lines_parse() {
        assert_eq!(
            Run::parse("L12 2 -15 1795867354048805036"),
            Some(Run {
                key: "L12".to_owned(),
                node: 2,
                late: -15,
                at: 1_795_867_354_048_805_036
            })
        );
        assert_eq!(Run::parse("L12 2 -15"), None);
        assert_eq!(Run::parse("L12 2 -15 7 8"), None);
        assert_eq!(Run::parse("L12 x -15 7"), None);
    }

    #[test]
    fn the_log_is_read_by_whole_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let mut w = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .unwrap();
        let mut log = RunLog {
            file: File::open(&path).unwrap(),
            partial: Vec::new(),
        };
        let mut bad = 0;
        w.write_all(b"A1 0 5 10\nA2 1 6").unwrap();
        let first = log.read(&mut bad).unwrap();
        assert_eq!(first.len(), 1);
        w.write_all(b" 11\nnonsense\n").unwrap();
        let second = log.read(&mut bad).unwrap();
        assert_eq!(second.len(), 1);
        assert_eq!(second[0].key, "A2");
        assert_eq!(second[0].at, 11);
        assert_eq!(bad, 1);
        assert!(log.read(&mut bad).unwrap().is_empty());
    }
}
