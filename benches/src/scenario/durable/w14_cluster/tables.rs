//! W14's report section: its tables and its targets.

use std::time::Duration;

use super::super::common::{LateRun, OURS, TICK, ms, ms1, nanos, thousands};
use super::parts::{Failover, GIVE_UP, NodeSched, SHAPES, Sched, Shape, jobs_statements, per_job};
use super::{ClusterRun, Params, Results};
use crate::report::targets;
use crate::report::{self, Table};
use crate::scenario::{Check, Outcome};
use crate::service::Lateness;

/// The fewest runs a p99 is judged on.
const JUDGE_RUNS: usize = 1000;

/// The fewest jobs due after the kill in the killed node's shards a fail-over is judged on.
const JUDGE_AFTER: usize = 100;

/// The baseline's name in the tables.
const BASELINE: &str = "PostgreSQL, FOR UPDATE SKIP LOCKED";

/// Every target of W14, in the order they are reported.
const KEYS: [&str; 5] = [
    "W14.p99",
    "W14.early",
    "W14.lost",
    "W14.failover",
    "W14.idle",
];

/// Without a server: one table saying so, and no target judged.
pub(super) fn skipped(p: &Params, why: &str, out: &mut Outcome) {
    let mut t = Table::new(
        format!(
            "W14 durable jobs on PostgreSQL, 1 and 3 nodes (lease {}): not run",
            report::secs(p.lease)
        ),
        &["part", "result"],
    );
    for part in [
        "W14.1 schedules per second",
        "W14.2 fire lateness",
        "W14.3 fail-over",
        "W14.4 idle statements",
    ] {
        t.row(vec![part.to_owned(), "skipped".to_owned()]);
    }
    t.note(why.to_owned());
    out.tables.push(t);
    for key in KEYS {
        out.checks
            .push(targets::check(key, format!("not run: {why}"), None));
    }
}

/// "1 node", "3 nodes".
fn nodes(k: usize) -> String {
    if k == 1 {
        "1 node".to_owned()
    } else {
        format!("{k} nodes")
    }
}

/// "1 worker", "3 workers".
fn workers(k: usize) -> String {
    if k == 1 {
        "1 worker".to_owned()
    } else {
        format!("{k} workers")
    }
}

/// A pool's interval, and the spacing of its polls when it has more workers.
fn interval((k, i): Shape) -> String {
    if k == 1 {
        format!("{} ms", i.as_millis())
    } else {
        format!(
            "{} ms (a poll every {} ms)",
            i.as_millis(),
            (i / k as u32).as_millis()
        )
    }
}

/// A CPU time as milliseconds, no decimals.
fn cpu_ms(d: Option<Duration>) -> String {
    d.map_or("n/a".to_owned(), |d| {
        format!("{:.0}", d.as_secs_f64() * 1e3)
    })
}

/// p50 / p99 / max, ms.
fn three(l: Option<Lateness>) -> String {
    l.map_or("-".to_owned(), |l| {
        format!("{} / {} / {}", ms(l.p50), ms(l.p99), ms(l.max))
    })
}

/// Seconds after the kill, or that it did not happen.
fn after_kill(d: Option<Duration>) -> String {
    d.map_or("not within 30 s".to_owned(), |d| {
        format!("{:.3}", d.as_secs_f64())
    })
}

/// `cells`, then a dash in every column of `t` they leave empty.
fn padded(mut cells: Vec<String>, t: &Table) -> Vec<String> {
    cells.resize(t.header.len().max(cells.len()), "-".to_owned());
    cells
}

/// The report section.
pub(super) fn report(p: &Params, r: &Results, out: &mut Outcome) {
    out.tables.push(schedules(p, r));
    out.tables.push(lateness(p, r));
    out.tables.push(failover(p, &r.failover));
    let mut idle = idle(p, r);
    idle.notes.extend(r.notes.iter().cloned());
    out.tables.push(idle);
    out.checks.push(p99(p, r));
    let (early, lost) = early_and_lost(p, r);
    out.checks.push(early);
    out.checks.push(lost);
    out.checks.push(failover_check(p, &r.failover));
    out.checks.push(idle_check(p, r));
}

/// Part 1's table.
fn schedules(p: &Params, r: &Results) -> Table {
    let mut t = Table::new(
        format!(
            "W14.1 durable schedules on PostgreSQL (PgStore, synchronous_commit on, one commit \
             thread per node), 64-byte payloads, deadlines uniform over the next 24 h, {} per way, \
             lease {}",
            report::secs(p.sched_for),
            report::secs(p.lease)
        ),
        &[
            "nodes x callers",
            "jobs",
            "calls",
            "s",
            "jobs/s",
            "per node jobs/s",
            "ack p50 ms",
            "ack p99 ms",
            "jobs per commit",
            "statements per job",
            "node CPU µs/job",
            "server CPU µs/job",
            "lease thread statements",
            "leases lapsed",
            "lease changes",
        ],
    );
    let ways: [(&ClusterRun, bool); 4] = [
        (&r.one, false),
        (&r.three, false),
        (&r.one, true),
        (&r.three, true),
    ];
    let mut lapsed = false;
    for (c, batch) in ways {
        let label = if batch {
            format!(
                "{} x 1 thread, schedule_batch of {}",
                nodes(c.k),
                thousands(p.batch as u64)
            )
        } else {
            format!("{} x {} threads, schedule", nodes(c.k), p.callers)
        };
        let s = if batch { &c.batch } else { &c.sched };
        match s {
            Ok(s) => {
                lapsed |= s.watched.lapsed_max > 0;
                t.row(sched_row(label, s));
            }
            Err(e) => {
                let row = padded(vec![label.clone(), "failed".to_owned()], &t);
                t.row(row);
                t.note(format!("{label}: {e}"));
            }
        }
    }
    t.note(format!(
        "method: every node (a process of its own) starts its callers at the same wall-clock \
         instant; each calls schedule (or schedule_batch) in a loop for {}; jobs/s = all nodes' \
         jobs / the longest node's phase (its first call to its last return); ack = one call's \
         time as its caller saw it, percentiles by nearest rank over the node's calls (of 3 \
         nodes: the slowest node's); a call returns once its commit is durable on the server \
         (synchronous_commit on), and the calls that arrive meanwhile share a node's next \
         commit",
        report::secs(p.sched_for)
    ));
    t.note(format!(
        "statements per job = statements sent by the nodes (PgStore::statements(), less the \
         lease threads') / jobs, as the store counts them: one per operation and three per \
         transaction (not the SAVEPOINT and RELEASE around each insert, nor the Parse round trip \
         of each statement, which the store does not keep prepared); lease thread statements = \
         each node's over the phase (about {} in rounds every third of a lease, when they run); \
         node CPU = the node processes' CPU clocks; server CPU = utime + stime of every postgres \
         process on this machine (10 ms ticks), both over the phase / jobs",
        4 * (3 * p.sched_for.as_millis() / p.lease.as_millis().max(1))
    ));
    t.note(format!(
        "leases lapsed = the most shards at once without an unexpired lease in tw_leases (read \
         every 50 ms over the phase), and for how long; lease changes = shards taken anew (the \
         sum of tw_leases.epoch) from the phase's start until the nodes shared the shards evenly \
         again after it{}",
        if lapsed {
            ": leases lapsed here although every node was alive: a node's lease thread renews \
             between waits for announcements (LISTEN), and a wait ends only once 200 ms (or the \
             time left to its next round) pass without one; jobs stored due within notify_within (1 h: about 1 in 24 here) are \
             announced with every commit, every few ms, so no renewal ran until the phase \
             ended, and no job of a lapsed shard could run meanwhile (a problem of \
             tickwheel-durable's lease thread, reported)"
        } else {
            ""
        }
    ));
    t
}

fn sched_row(label: String, s: &Sched) -> Vec<String> {
    let jobs = s.jobs();
    let wall = s.wall().as_secs_f64().max(1e-9);
    let rate = |n: &NodeSched| n.jobs as f64 / n.wall.as_secs_f64().max(1e-9);
    let per_node: Vec<String> = (s.nodes.iter())
        .map(|n| thousands(rate(n).round() as u64))
        .collect();
    let worst = |f: fn(&NodeSched) -> i64| s.nodes.iter().map(f).max().unwrap_or(0);
    let commits: u64 = s.nodes.iter().map(|n| n.commits).sum();
    let cpu: i64 = s.nodes.iter().map(|n| n.cpu).sum();
    let us_per_job = |ns: f64| format!("{:.1}", ns / 1e3 / jobs.max(1) as f64);
    let lapsed = match s.watched.lapsed_max {
        0 => "0".to_owned(),
        n => format!("{n} shards, {:.1} s", s.watched.lapsed_for.as_secs_f64()),
    };
    vec![
        label,
        thousands(jobs),
        thousands(s.nodes.iter().map(|n| n.calls).sum()),
        format!("{wall:.2}"),
        thousands((jobs as f64 / wall).round() as u64),
        per_node.join(" / "),
        ms(worst(|n| n.p50)),
        ms(worst(|n| n.p99)),
        format!("{:.1}", jobs as f64 / commits.max(1) as f64),
        per_job(jobs_statements(&s.nodes), jobs),
        us_per_job(cpu as f64),
        s.server_cpu
            .map_or("n/a".to_owned(), |d| us_per_job(nanos(d) as f64)),
        (s.nodes.iter())
            .map(|n| n.lease_statements.to_string())
            .collect::<Vec<_>>()
            .join(" / "),
        lapsed,
        match &s.rebalanced {
            Ok(_) => s.lease_changes.to_string(),
            Err(_) => format!("{} (not rebalanced within 30 s)", s.lease_changes),
        },
    ]
}

/// Part 2's table (with the baselines), and its targets.
fn lateness(p: &Params, r: &Results) -> Table {
    let mut t = Table::new(
        format!(
            "W14.2 fire lateness on the real clock: {} jobs due uniformly over {} starting {} \
             ahead, stored from every node; against a pool of {BASELINE} pollers",
            report::count(p.late_n),
            report::secs(p.late_window),
            report::secs(p.lead)
        ),
        &[
            "implementation",
            "nodes / workers",
            "poll interval",
            "p50 ms",
            "p99 ms",
            "max ms",
            "early",
            "lost",
            "run twice",
            "statements per job",
            "client CPU ms",
            "server CPU ms",
            "insert ms",
        ],
    );
    let row = |name: &str, who: String, poll: String, l: &LateRun, statements: String| {
        let f = |g: fn(&Lateness) -> i64| l.lateness.as_ref().map_or("-".to_owned(), |x| ms(g(x)));
        vec![
            name.to_owned(),
            who,
            poll,
            f(|x| x.p50),
            f(|x| x.p99),
            f(|x| x.max),
            l.early.to_string(),
            l.lost.to_string(),
            l.doubles.to_string(),
            statements,
            cpu_ms(l.cpu),
            cpu_ms(l.server_cpu),
            ms1(l.insert),
        ]
    };
    let failed = |name: &str, who: String, poll: String, t: &mut Table, e: &str| {
        let cells = padded(vec![name.to_owned(), who.clone(), poll], t);
        t.row(cells);
        t.note(format!("{name}, {who}: {e}"));
    };
    let ours_poll = || "none (timer, tick 1 ms)".to_owned();
    let name = format!("{OURS} (PgStore)");
    for c in [&r.one, &r.three] {
        match &c.late {
            Ok(l) => {
                let statements = per_job(l.statements, p.late_n as u64);
                t.row(row(&name, nodes(c.k), ours_poll(), &l.run, statements));
            }
            Err(e) => failed(&name, nodes(c.k), ours_poll(), &mut t, e),
        }
    }
    for (shape, b) in &r.baselines {
        match b {
            Ok(l) => {
                let queries = l
                    .queries
                    .map_or("-".to_owned(), |q| per_job(q, p.late_n as u64));
                t.row(row(
                    BASELINE,
                    workers(shape.0),
                    interval(*shape),
                    l,
                    queries,
                ));
            }
            Err(e) => failed(BASELINE, workers(shape.0), interval(*shape), &mut t, e),
        }
    }
    t.note(format!(
        "method: the same {} deadlines (whole ms, uniform over {} from {} after the insert \
         began) for every run, one run after another; ours: each node stores its share (job i \
         on node i mod k) in one schedule_batch; a job in a shard held by another node is \
         announced to it (NOTIFY) in the same commit; each run appends `key node late at` to a \
         log all nodes share, one write a line, late = wall clock at the handler's start - \
         deadline (after the run's read of its job); early = ran before its deadline; lost = not \
         run {} after the last deadline; run twice = more than one run of a job",
        report::count(p.late_n),
        report::secs(p.late_window),
        report::secs(p.lead),
        report::secs(GIVE_UP)
    ));
    for c in [&r.one, &r.three] {
        if let Ok(l) = &c.late {
            let own: Vec<String> = (l.own.iter()).map(|&o| three(Some(o))).collect();
            let runs: Vec<String> = l.per_node[..c.k].iter().map(|n| n.to_string()).collect();
            t.note(format!(
                "{}: runs per node {}; each node's own stats() lateness p50 / p99 / max ms (to \
                 within 1/16, from the timer task's start, since the node opened) {}; leases \
                 lapsed during the run: {}",
                nodes(c.k),
                runs.join(" / "),
                own.join("; "),
                l.watched.lapsed_max
            ));
        }
    }
    t.note(
        "statements per job: ours = the nodes' statements (PgStore::statements(), less the lease \
         threads'), from before the insert to after the runs' deletes, / N (the insert, each \
         run's read of its job, the deletes); a baseline = its claims / N (the insert's \
         statements aside)",
    );
    t.note(format!(
        "the baseline (W13's PostgreSQL queue, pollers.rs): a table per run of W13's shape (key \
         text primary key, deadline bigint ms, indexed, payload bytea), filled by unnest() \
         arrays, then ANALYZE; every worker polls at a fixed rate on a connection of its own, \
         claiming with one prepared statement (a DELETE of up to 1,000 due keys chosen FOR \
         UPDATE SKIP LOCKED, RETURNING them; at once again while a claim comes back full); k \
         workers start interval / k apart, so a pool polls k times per interval, evenly spread; \
         client CPU = this process's CPU clock over the run (ours: the node processes'), server \
         CPU = the postgres processes' (10 ms ticks); tick {} ms",
        TICK.as_millis()
    ));
    t
}

/// The 3-node lateness target.
fn p99(p: &Params, r: &Results) -> Check {
    let three_p99 = r.three.late.as_ref().map(|l| l.run.lateness.map(|x| x.p99));
    let target = nanos(TICK + Duration::from_millis(5));
    match three_p99 {
        Ok(Some(_)) if p.late_n < JUDGE_RUNS => targets::check(
            "W14.p99",
            format!(
                "{} runs: too few to judge a p99 (at least {})",
                p.late_n, JUDGE_RUNS
            ),
            None,
        ),
        Ok(Some(v)) => targets::check(
            "W14.p99",
            format!("{} ms (3 nodes, {} runs)", ms(v), report::count(p.late_n)),
            Some(v <= target),
        ),
        Ok(None) => targets::check("W14.p99", "no run".to_owned(), Some(false)),
        Err(e) => targets::check("W14.p99", format!("failed: {e}"), Some(false)),
    }
}

/// Part 3's table.
fn failover(p: &Params, f: &Result<Failover, String>) -> Table {
    let mut t = Table::new(
        format!(
            "W14.3 fail-over: 3 nodes, lease {}, {} jobs due uniformly over {} from {} ahead, \
             stored from every node; node n1 killed with SIGKILL {} into the window",
            report::secs(p.lease),
            report::count(p.fo_n),
            report::secs(p.fo_window),
            report::secs(p.lead),
            report::secs(p.fo_kill)
        ),
        &["measure", "value"],
    );
    match f {
        Ok(f) => {
            let rows: Vec<(String, String)> = vec![
                (
                    "killed node: shards it held (of 64)".to_owned(),
                    format!("{}: {}", f.victim, f.victim_shards),
                ),
                (
                    "all shards leased to the survivors again (tw_leases, read every 10 ms), s \
                     after the kill"
                        .to_owned(),
                    after_kill(f.held_again),
                ),
                (
                    "its shards running jobs again: the last of them, s after the kill".to_owned(),
                    after_kill(f.resumed),
                ),
                (
                    format!(
                        "jobs due after the kill in its shards ({}): lateness p50 / p99 / max ms",
                        f.after_victim
                    ),
                    three(f.late_victim),
                ),
                (
                    format!(
                        "jobs due after the kill in the survivors' shards ({}): p50 / p99 / max ms",
                        f.after_other
                    ),
                    three(f.late_other),
                ),
                (
                    "jobs due before the kill: p50 / p99 / max ms".to_owned(),
                    three(f.late_before),
                ),
                (
                    "early / lost / run twice (of those, by the killed node and again by a \
                     survivor)"
                        .to_owned(),
                    format!(
                        "{} / {} / {} ({})",
                        f.early, f.lost, f.doubles, f.doubles_across
                    ),
                ),
            ];
            for (k, v) in rows {
                t.row(vec![k, v]);
            }
        }
        Err(e) => t.row(vec!["failed".to_owned(), e.clone()]),
    }
    t.note(format!(
        "method: 3 node processes, 64 shards, lease {} (renewed every third of it); every node \
         stores its share of the jobs; {} into their window the parent reads which shards n1 \
         holds, notes the wall clock and kills it (SIGKILL: no lease given back); the survivors \
         may take a shard once its lease expires on the server's clock, at their next round; \
         lateness = a job's first run - its deadline; its shards ran again = for each, the first \
         run by a survivor after the kill (jobs fall due in each shard every few ms)",
        report::secs(p.lease),
        report::secs(p.fo_kill)
    ));
    t.note(
        "a job runs twice only across a lease change: run by the killed node, its delete not \
         committed before the kill, and run again by the shard's new holder",
    );
    t
}

/// The fail-over target.
fn failover_check(p: &Params, f: &Result<Failover, String>) -> Check {
    let limit = p.lease + Duration::from_secs(2);
    match f {
        Ok(f) => {
            let worst = f.worst();
            if f.after_victim < JUDGE_AFTER {
                return targets::check(
                    "W14.failover",
                    format!(
                        "{} jobs due after the kill in its shards: too few to judge (at least {})",
                        f.after_victim, JUDGE_AFTER
                    ),
                    None,
                );
            }
            targets::check(
                "W14.failover",
                format!(
                    "the latest job due after the kill ran {} s late; all shards leased again \
                     after {} s; its last shard ran again after {} s (lease {})",
                    worst.map_or("-".to_owned(), |w| format!("{:.3}", w as f64 / 1e9)),
                    after_kill(f.held_again),
                    after_kill(f.resumed),
                    report::secs(p.lease)
                ),
                Some(worst.is_some_and(|w| w <= nanos(limit)) && f.lost == 0),
            )
        }
        Err(e) => targets::check("W14.failover", format!("failed: {e}"), Some(false)),
    }
}

/// Part 4's table (with the baselines' idle queries).
fn idle(p: &Params, r: &Results) -> Table {
    let mut t = Table::new(
        format!(
            "W14.4 idle: {} jobs stored a day ahead (from every node), statements over {}, lease \
             {}; against the baseline pools' queries over the same window",
            report::count(p.idle_n),
            report::secs(p.idle_window),
            report::secs(p.lease)
        ),
        &[
            "implementation",
            "node / workers",
            "shards held",
            "statements",
            "lease thread's",
            "others",
            "statements/s",
            "lease thread's/s",
            "others/s",
            "store reads",
            "runs",
            "jobs in memory",
        ],
    );
    for c in [&r.one, &r.three] {
        let name = format!("{OURS}, {}", nodes(c.k));
        match &c.idle {
            Ok(i) => {
                let w = i.window.as_secs_f64().max(1e-9);
                for (n, node) in i.nodes.iter().enumerate() {
                    let others = node.statements - node.lease;
                    t.row(vec![
                        name.clone(),
                        format!("n{n}"),
                        node.held.to_string(),
                        node.statements.to_string(),
                        node.lease.to_string(),
                        others.to_string(),
                        format!("{:.2}", node.statements as f64 / w),
                        format!("{:.2}", node.lease as f64 / w),
                        format!("{:.2}", others as f64 / w),
                        node.reads.to_string(),
                        node.fired.to_string(),
                        node.in_memory.to_string(),
                    ]);
                }
            }
            Err(e) => {
                let row = padded(vec![name.clone(), "failed".to_owned()], &t);
                t.row(row);
                t.note(format!("{name}: {e}"));
            }
        }
        if let Err(e) = &c.started {
            t.note(format!("{}: the nodes did not start: {e}", nodes(c.k)));
        }
        if let Err(e) = &c.closed {
            t.note(format!("{}: closing: {e}", nodes(c.k)));
        }
    }
    for &shape in &SHAPES {
        let q = r.idle_baselines.iter().find(|(s, _)| *s == shape);
        let who = format!("{}, every {} ms", workers(shape.0), shape.1.as_millis());
        match q.map(|(_, q)| q) {
            Some(Ok(q)) => {
                let rate = format!("{:.2}", *q as f64 / p.idle_window.as_secs_f64());
                let (q, dash) = (q.to_string(), "-".to_owned());
                let cells = vec![
                    BASELINE.to_owned(),
                    who,
                    dash.clone(),
                    q.clone(),
                    dash.clone(),
                ];
                let row = padded([cells, vec![q, rate.clone(), dash, rate]].concat(), &t);
                t.row(row);
            }
            Some(Err(e)) => {
                let row = padded(vec![BASELINE.to_owned(), who.clone()], &t);
                t.row(row);
                t.note(format!("{BASELINE}, {who}: {e}"));
            }
            None => {}
        }
    }
    t.note(format!(
        "method: the nodes store their shares of the jobs (deadlines a day ahead plus up to an \
         hour: beyond the 1 h horizon and notify_within, so none is in memory or announced), \
         wait {}, then every node's PgStore::statements() (all, and the lease thread's) and \
         stats() are read before and after the window; others = all - the lease thread's (the \
         jobs' own: commits, the window's reads, runs' reads); the lease thread beats, renews \
         and rebalances every third of a lease (4 or 5 statements a round); the baseline pools \
         poll tables holding the same number of jobs a day ahead over the 3-node window \
         (queries = their claims)",
        report::secs(p.settle)
    ));
    t
}

/// The idle target: no statement beyond the lease threads', on any node.
fn idle_check(p: &Params, r: &Results) -> Check {
    let mut beyond = Vec::new();
    let mut failures = Vec::new();
    for c in [&r.one, &r.three] {
        match &c.idle {
            Ok(i) => beyond.extend(i.nodes.iter().map(|n| n.statements - n.lease)),
            Err(e) => failures.push(format!("{}: {e}", nodes(c.k))),
        }
    }
    if !failures.is_empty() {
        return targets::check(
            "W14.idle",
            format!("failed: {}", failures.join("; ")),
            Some(false),
        );
    }
    let each: Vec<String> = beyond.iter().map(u64::to_string).collect();
    targets::check(
        "W14.idle",
        format!(
            "statements beyond the lease threads' per node: {} (1 node; then 3 nodes) in {} ({} \
             jobs a day ahead)",
            each.join(", "),
            report::secs(p.idle_window),
            report::count(p.idle_n)
        ),
        Some(!beyond.is_empty() && beyond.iter().all(|&b| b == 0)),
    )
}

/// The early and lost targets, over parts 2 and 3.
fn early_and_lost(p: &Params, r: &Results) -> (Check, Check) {
    let n = report::count(p.late_n);
    let mut early = Vec::new();
    let mut lost = Vec::new();
    let mut ok_early = true;
    let mut ok_lost = true;
    for c in [&r.one, &r.three] {
        match &c.late {
            Ok(l) => {
                early.push(format!("{} of {n} ({})", l.run.early, nodes(c.k)));
                lost.push(format!(
                    "{} lost, {} run twice of {n} ({})",
                    l.run.lost,
                    l.run.doubles,
                    nodes(c.k)
                ));
                ok_early &= l.run.early == 0;
                ok_lost &= l.run.lost == 0 && l.run.doubles == 0;
            }
            Err(_) => {
                early.push(format!("failed ({})", nodes(c.k)));
                lost.push(format!("failed ({})", nodes(c.k)));
                ok_early = false;
                ok_lost = false;
            }
        }
    }
    match &r.failover {
        Ok(f) => {
            early.push(format!("{} of {} (fail-over)", f.early, report::count(f.n)));
            lost.push(format!(
                "{} lost of {} (fail-over; {} run twice across the lease change)",
                f.lost,
                report::count(f.n),
                f.doubles
            ));
            ok_early &= f.early == 0;
            ok_lost &= f.lost == 0 && f.doubles == f.doubles_across;
        }
        Err(_) => {
            early.push("failed (fail-over)".to_owned());
            lost.push("failed (fail-over)".to_owned());
            ok_early = false;
            ok_lost = false;
        }
    }
    (
        targets::check("W14.early", early.join("; "), Some(ok_early)),
        targets::check("W14.lost", lost.join("; "), Some(ok_lost)),
    )
}
