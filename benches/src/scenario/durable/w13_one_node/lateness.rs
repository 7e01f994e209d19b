//! W13's parts 2 and 3: fire lateness on the real clock against the Redis and PostgreSQL
//! pollers, with each one's queries while idle; our store reads while jobs wait a day ahead.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use tickwheel_durable::{Job, JobContext, Jobs};

use super::super::common::{
    CLAIM, LateRun, OURS, PAYLOAD, Slots, TICK, at_ms, chain, cpu_between, day_ahead_jobs,
    index_of, late_offsets, millis, ms, ms1, nanos, now_ms, run_id, thousands, wait_for_runs,
    wall_ns,
};
use super::super::pollers::{PgSvc, Pool, Queue, RedisSvc, Server, baseline_lateness};
use super::{Fresh, KIND, Params, fresh, noop};
use crate::measure::procfs;
use crate::report::targets;
use crate::report::{self, Table};
use crate::scenario::Outcome;
use crate::service::Lateness;

/// Ours: the N jobs through `schedule_batch` (one call), run by a handler that records its
/// lateness on the wall clock.
pub(super) fn ours_lateness(p: &Params, offsets: &[i64]) -> Result<LateRun, String> {
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
        let pg = PgSvc::connect(pg, "w13", format!("w13_{pid}_{stamp}")).map_err(|e| {
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
            Ok(queue) => {
                let end = start + p.idle_baselines;
                let never = Arc::new(|| false);
                let nothing = Arc::new(|_, _| {});
                match Pool::start(vec![queue], which.1, start, end, never, nothing) {
                    Ok(pool) => pollers.push((which, pool)),
                    Err(e) => baselines.push((which, Err(e))),
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
    for (which, pool) in pollers {
        baselines.push((which, pool.join().0));
    }
    Idle { ours, baselines }
}

pub(super) fn lateness_section(
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
                baseline_lateness(
                    server,
                    vec![queue],
                    interval,
                    (p.lead, p.late_window),
                    &offsets,
                )
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
