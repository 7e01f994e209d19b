//! W14, durable jobs on PostgreSQL: `tickwheel-durable` on a `PgStore`, one node and three nodes
//! sharing a schema, against a pool of plain `FOR UPDATE SKIP LOCKED` pollers; the measurement
//! and its report section.
//!
//! Every node is a process of its own, this program again with a hidden first argument
//! ([`NODE_ARG`]; `node.rs`), driven over its stdin and stdout (`nodes.rs`): it exits when its
//! stdin closes, so no node outlives its parent, however that ends. The nodes log every run to
//! one file they all append to (one line, one `write`). Each cluster runs with a 2 s lease (the
//! default is 10 s) on 64 shards (the default), in a schema of its own:
//!
//! 1. durable schedules per second (`synchronous_commit` on, the default durability): 100
//!    threads per node calling `schedule`, then one thread per node calling `schedule_batch` of
//!    1,000, deadlines uniform over the next 24 h; 1 node, then 3;
//! 2. fire lateness on the real clock: N jobs due uniformly over a window starting 1 s ahead,
//!    stored from every node, each run logging its lateness; early, lost and doubled runs;
//!    1 node, 3 nodes, and the baseline pools;
//! 3. fail-over: 3 nodes and jobs due all along; one node killed with SIGKILL; how long its
//!    shards went without a run, from the jobs' lateness and from `tw_leases`;
//! 4. statements per second while idle (jobs a day ahead), per node, from
//!    `PgStore::statements()`: all of them and the lease thread's; the baseline pools' queries
//!    over the same window;
//! 5. the baseline: pools of 1 and 3 workers polling a table of W13's shape at 1 s and 100 ms
//!    (`pollers.rs`), in parts 2 and 4.
//!
//! The baselines' tables live in a schema of this run (`w14_{pid}_{stamp}`), each cluster's in
//! `w14_{pid}_{stamp}_n1`, `_n3`, `_fo`; all are dropped at the end (those of a killed run, by a
//! later one). Without a server the tables say so and no target is judged.

mod node;
mod nodes;
mod parts;
mod tables;

use std::time::Duration;

pub use self::node::{NODE_ARG, node_main};
use self::nodes::Nodes;
use self::parts::{
    CONVERGE, ClusterLate, Failover, Idle, IdlePool, IdleQueries, Sched, Shape, baselines,
    failover, idle, idle_pools, lateness, sched,
};
use super::common::{LateRun, PG_ADDR, late_offsets, run_id, sweep_temp_dirs};
use super::pollers::PgSvc;
use crate::report;
use crate::scenario::{Config, Outcome, Scenario};

/// The one kind of job every node runs.
const KIND: &str = "w14";

/// Prefix of this workload's temporary directories (the run logs, the nodes' stderr).
const TEMP_PREFIX: &str = "wheelbench-w14-";

/// The sizes of a run.
#[derive(Clone, Copy, Debug)]
struct Params {
    /// Every cluster's lease.
    lease: Duration,
    /// Part 1: callers per node, the batch of the batch phase, how long each phase lasts.
    callers: usize,
    batch: usize,
    sched_for: Duration,
    /// Part 2: jobs, the window their deadlines are spread over, and how far ahead it starts
    /// (part 3's too).
    late_n: usize,
    late_window: Duration,
    lead: Duration,
    /// Part 4: jobs a day ahead, the time they are given to settle, the idle window.
    idle_n: usize,
    settle: Duration,
    idle_window: Duration,
    /// Part 3: jobs, their window, and when into it the node is killed.
    fo_n: usize,
    fo_window: Duration,
    fo_kill: Duration,
}

impl Params {
    fn of(cfg: &Config) -> Params {
        let q = cfg.quick;
        let s = |quick: u64, full: u64| Duration::from_secs(if q { quick } else { full });
        Params {
            lease: Duration::from_secs(2),
            callers: 100,
            batch: 1000,
            sched_for: s(2, 5),
            late_n: if q { 3000 } else { 20_000 },
            late_window: s(3, 10),
            lead: Duration::from_secs(1),
            idle_n: if q { 3000 } else { 20_000 },
            settle: Duration::from_millis(500),
            idle_window: s(3, 10),
            fo_n: if q { 3000 } else { 20_000 },
            fo_window: s(6, 20),
            fo_kill: s(2, 6),
        }
    }
}

/// W14: durable jobs on PostgreSQL, 1 and 3 nodes.
pub(in crate::scenario) struct DurableCluster;

impl Scenario for DurableCluster {
    fn id(&self) -> &'static str {
        "W14"
    }

    fn title(&self) -> &'static str {
        "durable jobs on PostgreSQL, 1 and 3 node processes: schedules, fire lateness, fail-over \
         after a SIGKILL, idle statements, against a pool of SKIP LOCKED pollers (real clock)"
    }

    fn run(&self, cfg: &Config, progress: &mut dyn FnMut(&str)) -> Outcome {
        run_on(&Params::of(cfg), PG_ADDR, progress)
    }
}

/// W14 against the PostgreSQL server at `addr`.
fn run_on(p: &Params, addr: (&str, u16), progress: &mut dyn FnMut(&str)) -> Outcome {
    let mut out = Outcome::default();
    let mut notes = sweep_temp_dirs(TEMP_PREFIX);
    progress("W14 connecting to PostgreSQL");
    let (pid, stamp) = run_id();
    let mut svc = match PgSvc::connect(addr, "w14", format!("w14_{pid}_{stamp}")) {
        Ok(svc) => svc,
        Err(e) => {
            let why = format!(
                "PostgreSQL not reachable at {}:{}: {e}; W14 skipped",
                addr.0, addr.1
            );
            tables::skipped(p, &why, &mut out);
            return out;
        }
    };
    notes.extend(svc.sweep());
    let offsets = late_offsets(p.late_n, p.late_window);
    let (one, _) = cluster(&svc, 1, p, &offsets, Vec::new(), progress);
    progress("W14.4 baseline pools: tables of jobs a day ahead, for the 3-node idle window");
    let pools = idle_pools(&svc, p.idle_n);
    let (three, idle_baselines) = cluster(&svc, 3, p, &offsets, pools, progress);
    let failover = failover_run(&svc, p, progress);
    let baselines = baselines(&svc, p, &offsets, progress);
    notes.push(match svc.drop_schema() {
        Ok(()) => format!(
            "PostgreSQL: dropped this run's schemas {0}, {0}_n1, {0}_n3, {0}_fo",
            svc.schema
        ),
        Err(e) => format!(
            "PostgreSQL: could not drop this run's schema {}: {e}",
            svc.schema
        ),
    });
    let results = Results {
        one,
        three,
        idle_baselines,
        failover,
        baselines,
        notes,
    };
    tables::report(p, &results, &mut out);
    out
}

/// What one cluster measured.
struct ClusterRun {
    /// Nodes.
    k: usize,
    /// Started and balanced, in this long.
    started: Result<Duration, String>,
    idle: Result<Idle, String>,
    late: Result<ClusterLate, String>,
    sched: Result<Sched, String>,
    batch: Result<Sched, String>,
    /// Its nodes closed and its schema dropped.
    closed: Result<(), String>,
}

/// Everything W14 measured.
struct Results {
    one: ClusterRun,
    three: ClusterRun,
    /// The baseline pools' queries over the 3-node idle window.
    idle_baselines: IdleQueries,
    failover: Result<Failover, String>,
    baselines: Vec<(Shape, Result<LateRun, String>)>,
    /// Leftovers removed, this run's schemas dropped.
    notes: Vec<String>,
}

/// Starts `k` nodes on a schema of their own and runs parts 4, 2 and 1 on them (the baseline
/// `pools` polling over the idle window), then closes them.
fn cluster(
    svc: &PgSvc,
    k: usize,
    p: &Params,
    offsets: &[i64],
    pools: Vec<IdlePool>,
    progress: &mut dyn FnMut(&str),
) -> (ClusterRun, IdleQueries) {
    let schema = format!("{}_n{k}", svc.schema);
    let nodes_word = if k == 1 { "node" } else { "nodes" };
    progress(&format!(
        "W14 {k} {nodes_word}: starting on schema {schema}, lease {}",
        report::secs(p.lease)
    ));
    let mut run = ClusterRun {
        k,
        started: Err("not started".to_owned()),
        idle: Err("not run".to_owned()),
        late: Err("not run".to_owned()),
        sched: Err("not run".to_owned()),
        batch: Err("not run".to_owned()),
        closed: Ok(()),
    };
    let started = Nodes::start(&svc.params, &schema, k, p.lease).and_then(|mut nodes| {
        let took = nodes.converge(CONVERGE)?;
        Ok((nodes, took))
    });
    let mut nodes = match started {
        Ok((nodes, took)) => {
            run.started = Ok(took);
            nodes
        }
        Err(e) => {
            run.started = Err(e);
            return (run, Vec::new());
        }
    };
    progress(&format!(
        "W14.4 {k} {nodes_word}: {} jobs a day ahead, idle for {}",
        report::count(p.idle_n),
        report::secs(p.idle_window)
    ));
    let (ours, baselines) = idle(&mut nodes, p, pools);
    run.idle = ours;
    progress(&format!(
        "W14.2 {k} {nodes_word}: {} jobs due over {}",
        report::count(p.late_n),
        report::secs(p.late_window)
    ));
    run.late = lateness(&mut nodes, p, offsets);
    progress(&format!(
        "W14.1 {k} {nodes_word}: {} threads each calling schedule for {}",
        p.callers,
        report::secs(p.sched_for)
    ));
    run.sched = sched(&mut nodes, p, p.callers, 1, 'S');
    progress(&format!(
        "W14.1 {k} {nodes_word}: one thread each calling schedule_batch of {} for {}",
        report::count(p.batch),
        report::secs(p.sched_for)
    ));
    run.batch = sched(&mut nodes, p, 1, p.batch, 'B');
    run.closed = nodes.close();
    (run, baselines)
}

/// Part 3 on three new nodes.
fn failover_run(
    svc: &PgSvc,
    p: &Params,
    progress: &mut dyn FnMut(&str),
) -> Result<Failover, String> {
    let schema = format!("{}_fo", svc.schema);
    progress(&format!(
        "W14.3 3 nodes: starting on schema {schema}, lease {}",
        report::secs(p.lease)
    ));
    let mut nodes = Nodes::start(&svc.params, &schema, 3, p.lease)?;
    nodes.converge(CONVERGE)?;
    progress(&format!(
        "W14.3 fail-over: {} jobs due over {}, node n1 killed (SIGKILL) {} in",
        report::count(p.fo_n),
        report::secs(p.fo_window),
        report::secs(p.fo_kill)
    ));
    let r = failover(&mut nodes, p)?;
    nodes.close()?;
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_server_the_tables_say_so_and_nothing_is_judged() {
        let p = Params::of(&Config {
            quick: true,
            n: None,
        });
        // Port 1: nothing listens there.
        let out = run_on(&p, ("127.0.0.1", 1), &mut |_| {});
        assert_eq!(out.tables.len(), 1);
        let t = &out.tables[0];
        assert!(t.rows.iter().all(|r| r[1] == "skipped"), "{t:?}");
        assert!(
            t.notes
                .iter()
                .any(|n| n.starts_with("PostgreSQL not reachable at 127.0.0.1:1: ")),
            "{:?}",
            t.notes
        );
        assert_eq!(out.checks.len(), 5);
        assert!(
            out.checks
                .iter()
                .all(|c| c.met.is_none() && c.workload == "W14")
        );
    }

    #[test]
    fn a_quick_run_fits_its_budget() {
        let p = Params::of(&Config {
            quick: true,
            n: None,
        });
        // Two clusters' idle windows, lateness runs (with their lead) and schedule phases, the
        // fail-over's window, four baseline runs: about a minute with the waits between.
        let timed = 2 * (p.settle + p.idle_window + p.lead + p.late_window + 2 * p.sched_for)
            + p.lead
            + p.fo_window
            + 4 * (p.lead + p.late_window);
        assert!(timed <= Duration::from_secs(50), "{timed:?}");
        // Jobs fall due for a while after the survivors take the dead node's shards over.
        assert!(p.fo_kill + p.lease + p.lease / 3 + Duration::from_secs(1) <= p.fo_window);
    }
}
