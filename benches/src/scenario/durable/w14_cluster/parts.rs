//! W14's measurements, each on a running cluster of nodes (or, for the baselines, a pool of
//! pollers): idle statements, fire lateness, schedules per second, fail-over after a SIGKILL.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use super::super::common::{
    DAY_MS, HOUR_MS, LateRun, Slots, cpu_between, day_ahead_jobs, index_of, late_offsets, millis,
    now_ms, percentiles, wall_ns,
};
use super::super::pollers::{PgSvc, Pool, Queue, Server, baseline_lateness};
use super::Params;
use super::node::Msg;
use super::nodes::{Nodes, Run, Watched};
use crate::service::Lateness;

/// How long a command without timed work may take.
const ANSWER: Duration = Duration::from_secs(60);

/// How long the nodes may take to share the shards evenly.
pub(super) const CONVERGE: Duration = Duration::from_secs(30);

/// How long after the last deadline a lateness run waits for its last runs.
pub(super) const GIVE_UP: Duration = Duration::from_secs(10);

/// How long after the last run the log is read once more (for runs twice, and the runs'
/// deletes: within `OWN_FLUSH`, 200 ms).
const AFTERWARDS: Duration = Duration::from_millis(400);

/// A baseline pool: workers, poll interval.
pub(super) type Shape = (usize, Duration);

/// The baseline pools, in the tables' order.
pub(super) const SHAPES: [Shape; 4] = [
    (1, Duration::from_secs(1)),
    (1, Duration::from_millis(100)),
    (3, Duration::from_secs(1)),
    (3, Duration::from_millis(100)),
];

/// The `due` command for node `i` of `k`: its share (`i % k`) of `n` jobs keyed `{tag}{index}`,
/// due at wall-clock ms `base` + [`late_offsets`]`(n, window ms)`.
fn due(tag: char, base: i64, window: i64, n: usize, k: usize) -> impl Fn(usize) -> Msg {
    move |i| {
        Msg::new("due")
            .with("tag", tag)
            .with("base_ms", base)
            .with("window_ms", window)
            .with("n", n)
            .with("idx", i)
            .with("nodes", k)
    }
}

// ---------------------------------------------------------------------------------------------
// Idle
// ---------------------------------------------------------------------------------------------

/// One node over the idle window.
#[derive(Clone, Debug)]
pub(super) struct IdleNode {
    /// Statements over the window: all, and the lease thread's.
    pub(super) statements: u64,
    pub(super) lease: u64,
    /// At the window's end.
    pub(super) held: u64,
    pub(super) in_memory: u64,
    /// Store reads and runs over the window.
    pub(super) reads: u64,
    pub(super) fired: u64,
}

/// A cluster over the idle window.
#[derive(Clone, Debug)]
pub(super) struct Idle {
    pub(super) window: Duration,
    pub(super) nodes: Vec<IdleNode>,
}

/// The baseline pools' queries over the idle window, each or why not.
pub(super) type IdleQueries = Vec<(Shape, Result<u64, String>)>;

/// A baseline pool set up for the idle window: its tables hold the idle jobs.
pub(super) struct IdlePool {
    pub(super) shape: Shape,
    queues: Result<Vec<Box<dyn Queue>>, String>,
}

/// Sets up the baseline pools watched over the 3-node idle window: a table each, holding
/// `n` jobs a day ahead, and a connection per worker.
pub(super) fn idle_pools(svc: &PgSvc, n: usize) -> Vec<IdlePool> {
    SHAPES
        .iter()
        .map(|&shape| IdlePool {
            shape,
            queues: workers(svc, shape, "idle").and_then(|mut queues| {
                if let Some(q) = queues.first_mut() {
                    q.insert(&day_ahead_jobs(n), 'I')?;
                }
                Ok(queues)
            }),
        })
        .collect()
}

/// A new table for a pool of `shape`, and one queue (connection) per worker on it.
fn workers(svc: &PgSvc, (k, interval): Shape, what: &str) -> Result<Vec<Box<dyn Queue>>, String> {
    let tag = format!("{what}_{k}w_{}ms", interval.as_millis());
    svc.create_table(&tag)?;
    (0..k).map(|_| svc.open_queue(&tag)).collect()
}

/// The idle window: every node stores its share of `p.idle_n` jobs a day ahead (beyond the 1 h
/// horizon and the announcements' hour), then, after `p.settle`, the nodes' statements are read
/// before and after `p.idle_window`; the baseline `pools` poll over the same window.
pub(super) fn idle(
    nodes: &mut Nodes,
    p: &Params,
    pools: Vec<IdlePool>,
) -> (Result<Idle, String>, IdleQueries) {
    let k = nodes.alive();
    let base = now_ms() + DAY_MS;
    let stored = nodes.all(due('I', base, HOUR_MS, p.idle_n, k), ANSWER);
    thread::sleep(p.settle);
    let start = Instant::now() + Duration::from_millis(20);
    let end = start + p.idle_window;
    let mut running = Vec::new();
    let mut baselines = Vec::new();
    for pool in pools {
        let started = pool.queues.and_then(|queues| {
            let never = Arc::new(|| false);
            let nothing = Arc::new(|_, _| {});
            Pool::start(queues, pool.shape.1, start, end, never, nothing)
        });
        match started {
            Ok(running_pool) => running.push((pool.shape, running_pool)),
            Err(e) => baselines.push((pool.shape, Err(e))),
        }
    }
    let ours = stored.and_then(|_| {
        thread::sleep(start.saturating_duration_since(Instant::now()));
        let t0 = Instant::now();
        let s0 = nodes.stats()?;
        thread::sleep(end.saturating_duration_since(Instant::now()));
        let s1 = nodes.stats()?;
        let window = t0.elapsed();
        let nodes = s0
            .iter()
            .zip(&s1)
            .map(|(a, b)| IdleNode {
                statements: b.statements - a.statements,
                lease: b.lease_statements - a.lease_statements,
                held: b.held,
                in_memory: b.in_memory,
                reads: b.store_reads - a.store_reads,
                fired: b.fired - a.fired,
            })
            .collect();
        Ok(Idle { window, nodes })
    });
    for (shape, pool) in running {
        baselines.push((shape, pool.join().0));
    }
    baselines.sort_by_key(|(shape, _)| SHAPES.iter().position(|s| s == shape));
    (ours, baselines)
}

// ---------------------------------------------------------------------------------------------
// Fire lateness
// ---------------------------------------------------------------------------------------------

/// A cluster's lateness run.
#[derive(Clone, Debug)]
pub(super) struct ClusterLate {
    /// Lateness, early, lost, run twice; `insert`: the slowest node's `schedule_batch`; `cpu`:
    /// the nodes' CPU, summed; `server_cpu`: PostgreSQL's.
    pub(super) run: LateRun,
    /// Runs per node.
    pub(super) per_node: Vec<usize>,
    /// Statements other than the lease threads', all nodes, from before the insert to after
    /// the runs' deletes.
    pub(super) statements: u64,
    /// Each node's own lateness histogram (`stats()`), cumulative since it opened.
    pub(super) own: Vec<Lateness>,
    /// The lease table, watched over the run.
    pub(super) watched: Watched,
}

/// Reads the cluster's log into `slots` (the jobs keyed `{tag}{index}`) until all `n` ran
/// (and the last deadline, `last` ms, passed) or `give_up`; then once more after
/// [`AFTERWARDS`]. Runs per node, and every run of those jobs.
fn collect(
    nodes: &mut Nodes,
    tag: char,
    slots: &Slots,
    n: usize,
    last: i64,
    give_up: Instant,
) -> Result<(Vec<usize>, Vec<Run>), String> {
    let mut per_node = vec![0; nodes.count()];
    let mut all = Vec::new();
    let mut take = |runs: Vec<Run>| {
        for r in runs {
            if !r.key.starts_with(tag) {
                continue; // another part's job
            }
            match index_of(r.key.as_bytes()) {
                Some(i) => slots.record(i, r.late),
                None => drop(slots.strays.fetch_add(1, Relaxed)),
            }
            if let Some(c) = per_node.get_mut(r.node) {
                *c += 1;
            }
            all.push(r);
        }
    };
    loop {
        take(nodes.runs()?);
        let done = slots.ran() >= n && now_ms() > last;
        if done || Instant::now() >= give_up {
            break;
        }
        thread::sleep(Duration::from_millis(20));
    }
    thread::sleep(AFTERWARDS);
    take(nodes.runs()?);
    Ok((per_node, all))
}

/// The time from now until wall-clock ms `at`, plus `more`, as an instant.
fn instant_at(at: i64, more: Duration) -> Instant {
    Instant::now() + Duration::from_millis(u64::try_from(at - now_ms()).unwrap_or(0)) + more
}

/// The N jobs (`offsets`, uniform over `p.late_window` from `p.lead` ahead) stored from every
/// node (`i % k` of them each, one `schedule_batch`), run wherever their shard is held.
pub(super) fn lateness(
    nodes: &mut Nodes,
    p: &Params,
    offsets: &[i64],
) -> Result<ClusterLate, String> {
    let (k, n) = (nodes.alive(), offsets.len());
    nodes.runs()?; // what earlier parts left in the log
    let watch = nodes.watch()?;
    let (s0, server0) = (nodes.stats()?, Server::Postgres.cpu());
    let base = now_ms() + millis(p.lead);
    let answers = nodes.all(due('L', base, millis(p.late_window), n, k), ANSWER)?;
    let mut insert = Duration::ZERO;
    for a in &answers {
        insert = insert.max(Duration::from_nanos(a.get("insert")?));
    }
    let slots = Slots::new(n);
    let last = base + millis(p.late_window);
    let (per_node, _) = collect(nodes, 'L', &slots, n, last, instant_at(last, GIVE_UP))?;
    let (s1, server1) = (nodes.stats()?, Server::Postgres.cpu());
    let watched = watch.stop()?;
    let cpu: i64 = s0.iter().zip(&s1).map(|(a, b)| b.cpu - a.cpu).sum();
    let statements = s0
        .iter()
        .zip(&s1)
        .map(|(a, b)| b.jobs_statements() - a.jobs_statements())
        .sum();
    Ok(ClusterLate {
        run: LateRun {
            insert,
            cpu: Some(Duration::from_nanos(u64::try_from(cpu).unwrap_or(0))),
            server_cpu: cpu_between(server0, server1),
            ..LateRun::of(&slots, n)
        },
        per_node,
        statements,
        own: s1
            .iter()
            .map(|s| Lateness {
                p50: s.p50,
                p99: s.p99,
                max: s.max,
            })
            .collect(),
        watched,
    })
}

/// The baselines' lateness runs: a pool of each shape on a table of its own, the same N jobs.
pub(super) fn baselines(
    svc: &PgSvc,
    p: &Params,
    offsets: &[i64],
    progress: &mut dyn FnMut(&str),
) -> Vec<(Shape, Result<LateRun, String>)> {
    SHAPES
        .iter()
        .map(|&shape| {
            progress(&format!(
                "W14.2 PostgreSQL, FOR UPDATE SKIP LOCKED: {} worker(s) polling every {} ms",
                shape.0,
                shape.1.as_millis()
            ));
            let r = workers(svc, shape, "late").and_then(|queues| {
                let timing = (p.lead, p.late_window);
                baseline_lateness(Server::Postgres, queues, shape.1, timing, offsets)
            });
            (shape, r)
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Schedules per second
// ---------------------------------------------------------------------------------------------

/// What one node's callers did.
#[derive(Clone, Copy, Debug)]
pub(super) struct NodeSched {
    pub(super) jobs: u64,
    pub(super) calls: u64,
    pub(super) wall: Duration,
    /// Each call's time as its caller saw it, ns.
    pub(super) p50: i64,
    pub(super) p99: i64,
    /// The node process's CPU, ns.
    pub(super) cpu: i64,
    /// Statements over the phase: all, and the lease thread's.
    pub(super) statements: u64,
    pub(super) lease_statements: u64,
    pub(super) commits: u64,
}

impl NodeSched {
    fn of(m: &Msg) -> Result<NodeSched, String> {
        Ok(NodeSched {
            jobs: m.get("jobs")?,
            calls: m.get("calls")?,
            wall: Duration::from_nanos(m.get("wall")?),
            p50: m.get("p50")?,
            p99: m.get("p99")?,
            cpu: m.get("cpu")?,
            statements: m.get("statements")?,
            lease_statements: m.get("lease_statements")?,
            commits: m.get("commits")?,
        })
    }
}

/// A schedules phase on a cluster.
#[derive(Clone, Debug)]
pub(super) struct Sched {
    pub(super) nodes: Vec<NodeSched>,
    /// PostgreSQL's CPU over the phase.
    pub(super) server_cpu: Option<Duration>,
    /// The lease table, watched over the phase.
    pub(super) watched: Watched,
    /// Shards taken anew from the phase's start until the nodes were balanced again after it
    /// (each a lease lost or given up, and taken).
    pub(super) lease_changes: i64,
    /// How long after the phase the nodes took to share the shards evenly again.
    pub(super) rebalanced: Result<Duration, String>,
}

impl Sched {
    /// All nodes' jobs.
    pub(super) fn jobs(&self) -> u64 {
        self.nodes.iter().map(|n| n.jobs).sum()
    }

    /// The longest node's measured phase.
    pub(super) fn wall(&self) -> Duration {
        self.nodes.iter().map(|n| n.wall).max().unwrap_or_default()
    }
}

/// Every node's `threads` callers schedule (`batch` 1) or schedule batches of `batch` jobs for
/// `p.sched_for`, starting together, deadlines uniform over the next 24 h.
pub(super) fn sched(
    nodes: &mut Nodes,
    p: &Params,
    threads: usize,
    batch: usize,
    tag: char,
) -> Result<Sched, String> {
    let epochs0 = nodes.epochs()?;
    let watch = nodes.watch()?;
    let server0 = Server::Postgres.cpu();
    let start = now_ms() + 300;
    let answers = nodes.all(
        |_| {
            Msg::new("sched")
                .with("threads", threads)
                .with("batch", batch)
                .with("for_ms", millis(p.sched_for))
                .with("start_ms", start)
                .with("tag", tag)
        },
        p.sched_for + ANSWER,
    )?;
    let server1 = Server::Postgres.cpu();
    let watched = watch.stop()?;
    let rebalanced = nodes.converge(CONVERGE);
    let lease_changes = nodes.epochs()? - epochs0;
    Ok(Sched {
        nodes: answers
            .iter()
            .map(NodeSched::of)
            .collect::<Result<_, _>>()?,
        server_cpu: cpu_between(server0, server1),
        watched,
        lease_changes,
        rebalanced,
    })
}

// ---------------------------------------------------------------------------------------------
// Fail-over
// ---------------------------------------------------------------------------------------------

/// What the fail-over run measured.
#[derive(Clone, Debug, Default)]
pub(super) struct Failover {
    pub(super) n: usize,
    /// The killed node, and the shards it held.
    pub(super) victim: String,
    pub(super) victim_shards: usize,
    /// Of the N jobs, those due after the kill: in its shards, in the others'.
    pub(super) after_victim: usize,
    pub(super) after_other: usize,
    /// From the kill until every shard was leased to a survivor again (`tw_leases`).
    pub(super) held_again: Option<Duration>,
    /// From the kill until the last of its shards ran a job again.
    pub(super) resumed: Option<Duration>,
    /// First-run lateness of the jobs due after the kill, in its shards and in the others'.
    pub(super) late_victim: Option<Lateness>,
    pub(super) late_other: Option<Lateness>,
    /// Of the jobs due before the kill.
    pub(super) late_before: Option<Lateness>,
    pub(super) early: usize,
    pub(super) lost: usize,
    /// Jobs run more than once; of those, run by the killed node and again by another.
    pub(super) doubles: usize,
    pub(super) doubles_across: usize,
}

impl Failover {
    /// The largest lateness of a job due after the kill, ns.
    pub(super) fn worst(&self) -> Option<i64> {
        let v = self.late_victim.map(|l| l.max);
        let o = self.late_other.map(|l| l.max);
        v.max(o)
    }
}

/// Three nodes; `p.fo_n` jobs due uniformly over `p.fo_window` from `p.lead` ahead, stored from
/// all three; `p.fo_kill` into the window, node `n1` is killed with SIGKILL.
pub(super) fn failover(nodes: &mut Nodes, p: &Params) -> Result<Failover, String> {
    const VICTIM: usize = 1;
    let (k, n) = (nodes.alive(), p.fo_n);
    let offsets = late_offsets(n, p.fo_window);
    nodes.runs()?;
    let base = now_ms() + millis(p.lead);
    nodes.all(due('F', base, millis(p.fo_window), n, k), ANSWER)?;
    let kill_at = instant_at(base + millis(p.fo_kill), Duration::ZERO);
    thread::sleep(kill_at.saturating_duration_since(Instant::now()));
    let victim = nodes.name(VICTIM).to_owned();
    let shards: Vec<u32> = (nodes.leases()?.into_iter())
        .filter(|l| l.live && l.owner.as_deref() == Some(victim.as_str()))
        .map(|l| l.shard)
        .collect();
    let killed = Instant::now();
    let killed_at = wall_ns(SystemTime::now());
    nodes.kill(VICTIM)?;
    let held_again = loop {
        let leases = nodes.leases()?;
        let taken = leases
            .iter()
            .all(|l| l.live && l.owner.as_deref().is_some_and(|o| o != victim.as_str()));
        if taken {
            break Some(killed.elapsed());
        }
        if killed.elapsed() > CONVERGE {
            break None;
        }
        thread::sleep(Duration::from_millis(10));
    };
    let slots = Slots::new(n);
    let last = base + millis(p.fo_window);
    let (_, runs) = collect(nodes, 'F', &slots, n, last, instant_at(last, GIVE_UP))?;
    let deadlines: Vec<i64> = offsets.iter().map(|o| (base + o) * 1_000_000).collect();
    let kill = Kill {
        deadlines: &deadlines,
        at: killed_at,
        victim: VICTIM,
        shards: &shards,
    };
    Ok(Failover {
        victim,
        held_again,
        ..analyse(&kill, &runs, &|key| nodes.shard_of(key))
    })
}

/// What the parent knew of a kill.
struct Kill<'a> {
    /// The jobs' deadlines (ns since the Unix epoch), by index.
    deadlines: &'a [i64],
    /// The wall clock at the kill, ns.
    at: i64,
    /// The killed node's index, and the shards it held.
    victim: usize,
    shards: &'a [u32],
}

/// The fail-over's figures from the runs of its jobs (keyed `F{index}`), but the killed node's
/// name and the lease table's.
fn analyse(kill: &Kill<'_>, runs: &[Run], shard_of: &dyn Fn(&str) -> u32) -> Failover {
    let n = kill.deadlines.len();
    let mut by_key: HashMap<usize, Vec<&Run>> = HashMap::new();
    for r in runs {
        if let Some(i) = index_of(r.key.as_bytes()).filter(|&i| i < n) {
            by_key.entry(i).or_default().push(r);
        }
    }
    let in_victim = |i: usize| kill.shards.contains(&shard_of(&format!("F{i}")));
    let first_late = |i: usize| {
        by_key
            .get(&i)
            .and_then(|rs| rs.iter().map(|r| r.late).min())
    };
    let (mut victim_late, mut other_late, mut before_late) = (Vec::new(), Vec::new(), Vec::new());
    let (mut after_victim, mut after_other) = (0, 0);
    for (i, &deadline) in kill.deadlines.iter().enumerate() {
        let late = first_late(i);
        match (deadline > kill.at, in_victim(i)) {
            (true, true) => {
                after_victim += 1;
                victim_late.extend(late);
            }
            (true, false) => {
                after_other += 1;
                other_late.extend(late);
            }
            (false, _) => before_late.extend(late),
        }
    }
    // Per shard of the killed node: the first run by another node after the kill.
    let mut resumed_at: HashMap<u32, i64> = HashMap::new();
    for r in runs
        .iter()
        .filter(|r| r.node != kill.victim && r.at > kill.at)
    {
        let shard = shard_of(&r.key);
        if kill.shards.contains(&shard) {
            let at = resumed_at.entry(shard).or_insert(r.at);
            *at = (*at).min(r.at);
        }
    }
    let resumed = (resumed_at.len() == kill.shards.len())
        .then(|| resumed_at.values().max().copied())
        .flatten()
        .map(|at| Duration::from_nanos(u64::try_from(at - kill.at).unwrap_or(0)));
    let twice: Vec<&Vec<&Run>> = by_key.values().filter(|rs| rs.len() > 1).collect();
    let by = |rs: &[&Run], victim: bool| rs.iter().any(|r| (r.node == kill.victim) == victim);
    Failover {
        n,
        victim: String::new(),
        victim_shards: kill.shards.len(),
        after_victim,
        after_other,
        held_again: None,
        resumed,
        late_victim: percentiles(victim_late),
        late_other: percentiles(other_late),
        late_before: percentiles(before_late),
        early: runs.iter().filter(|r| r.late < 0).count(),
        lost: n - by_key.len(),
        doubles: twice.len(),
        doubles_across: twice
            .iter()
            .filter(|rs| by(rs, true) && by(rs, false))
            .count(),
    }
}

/// Statements other than the lease threads' per job, from two readings of every node.
pub(super) fn per_job(statements: u64, jobs: u64) -> String {
    let x = statements as f64 / jobs.max(1) as f64;
    if x > 0.0 && x < 0.1 {
        format!("{x:.3}")
    } else {
        format!("{x:.2}")
    }
}

/// The nodes' statements other than their lease threads' over a phase.
pub(super) fn jobs_statements(nodes: &[NodeSched]) -> u64 {
    nodes
        .iter()
        .map(|n| n.statements - n.lease_statements)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(key: &str, node: usize, late: i64, at: i64) -> Run {
        Run {
            key: key.to_owned(),
            node,
            late,
            at,
        }
    }

    #[test]
    fn the_failover_is_read_from_the_runs() {
        // Four jobs: F0 due before the kill (at 100), F1..F3 after; shards by index parity,
        // the killed node (1) held shard 1 (F1, F3).
        let deadlines = [50, 150, 160, 170];
        let kill = Kill {
            deadlines: &deadlines,
            at: 100,
            victim: 1,
            shards: &[1],
        };
        let shard_of = |key: &str| index_of(key.as_bytes()).map_or(0, |i| (i % 2) as u32);
        let runs = [
            run("F0", 1, 2, 52),
            run("F2", 0, 1, 161),
            // F1 ran on the killed node just before it died, and again on its new holder.
            run("F1", 1, 0, 99),
            run("F1", 2, 900, 1050),
            run("X9", 0, 0, 10), // another part's job, or a stray: not counted
        ];
        let f = analyse(&kill, &runs, &shard_of);
        assert_eq!((f.n, f.after_victim, f.after_other), (4, 2, 1));
        assert_eq!(f.lost, 1, "F3 never ran");
        assert_eq!((f.doubles, f.doubles_across), (1, 1));
        assert_eq!(f.early, 0);
        assert_eq!(
            f.late_victim.map(|l| l.max),
            Some(0),
            "F1's first run counts"
        );
        assert_eq!(f.late_other.map(|l| l.p50), Some(1));
        assert_eq!(f.resumed, Some(Duration::from_nanos(950)));
        assert_eq!(f.worst(), Some(1));
        let early = [run("F0", 0, -1, 49)];
        assert_eq!(analyse(&kill, &early, &shard_of).early, 1);
        // No run of a killed node's shard after the kill: not resumed.
        assert_eq!(analyse(&kill, &runs[..2], &shard_of).resumed, None);
    }
}
