//! The baselines W13 and W14 measure the durable jobs against: a job queue polled at a fixed
//! interval by a pool of workers, in a Redis sorted set (a Lua claim) or a PostgreSQL table
//! (`FOR UPDATE SKIP LOCKED`). Each server keeps a run's data under a name of its own (process id
//! and start time), removed at its end; a later run removes what a killed one left.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant, SystemTime};

use super::common::{
    CLAIM, LateRun, PAYLOAD, Slots, chain, cpu_between, index_of, millis, now_ms, stale, wall_ns,
};
use crate::measure::procfs;

/// A baseline's job queue: one Redis sorted set or one PostgreSQL table.
pub(super) trait Queue: Send {
    /// Stores jobs `(index, deadline ms)`, keyed `{prefix}{index}`, each with the 64-byte
    /// payload.
    fn insert(&mut self, jobs: &[(usize, i64)], prefix: char) -> Result<(), String>;

    /// Claims (removes and returns, atomically) up to [`CLAIM`] jobs due at or before `now_ms`,
    /// earliest first: `(index, deadline ms)`. One query.
    fn claim(&mut self, now_ms: i64) -> Result<Vec<(usize, i64)>, String>;
}

/// Polls `queue` at a fixed rate of `interval` from `start` (sleeping until it), until `done()`
/// after a poll or until `end`; every claimed job is run by `run(index, deadline ms)`, and a claim
/// that fills its limit is followed by another at once. Returns the queries made.
pub(super) fn poll(
    queue: &mut dyn Queue,
    interval: Duration,
    start: Instant,
    end: Instant,
    done: &dyn Fn() -> bool,
    run: &mut dyn FnMut(usize, i64),
) -> Result<u64, String> {
    thread::sleep(start.saturating_duration_since(Instant::now()));
    let mut queries = 0;
    let mut next = start;
    loop {
        loop {
            let claimed = queue.claim(now_ms())?;
            queries += 1;
            let full = claimed.len() >= CLAIM;
            for (i, deadline) in claimed {
                run(i, deadline);
            }
            if !full {
                break;
            }
        }
        if done() {
            return Ok(queries);
        }
        next += interval;
        if next >= end {
            return Ok(queries);
        }
        let now = Instant::now();
        // Fell behind (a long claim): the next poll at once, and the rate from there.
        next = next.max(now);
        thread::sleep(next - now);
    }
}

/// Whether a pool is done (checked after each poll).
pub(super) type Done = Arc<dyn Fn() -> bool + Send + Sync>;

/// What a pool does with a claimed job `(index, deadline ms)`.
pub(super) type Run = Arc<dyn Fn(usize, i64) + Send + Sync>;

/// What a worker of a [`Pool`] ends with: the queries it made (or why it stopped), and its
/// queue.
type Worked = (Result<u64, String>, Box<dyn Queue>);

/// A pool of workers, one thread and one queue (connection) each, all on the same jobs: each
/// [`poll`]s every `interval`, worker `j` of `k` first at `start + j * interval / k`, so that
/// together they poll `k` times per interval, evenly spread.
pub(super) struct Pool {
    workers: Vec<JoinHandle<Worked>>,
    stop: Arc<AtomicBool>,
}

impl Pool {
    /// Starts one worker per queue, polling until `done()` or `end`; each claimed job goes to
    /// `run`.
    pub(super) fn start(
        queues: Vec<Box<dyn Queue>>,
        interval: Duration,
        start: Instant,
        end: Instant,
        done: Done,
        run: Run,
    ) -> Result<Pool, String> {
        let k = u32::try_from(queues.len()).unwrap_or(u32::MAX).max(1);
        let stop = Arc::new(AtomicBool::new(false));
        let mut pool = Pool {
            workers: Vec::with_capacity(queues.len()),
            stop: stop.clone(),
        };
        for (j, mut queue) in queues.into_iter().enumerate() {
            let first = start + interval * u32::try_from(j).unwrap_or(0) / k;
            let (done, run, stop) = (done.clone(), run.clone(), stop.clone());
            let spawned = thread::Builder::new()
                .name("poller".to_owned())
                .spawn(move || {
                    let done = || stop.load(Relaxed) || done();
                    let queries = poll(&mut *queue, interval, first, end, &done, &mut |i, d| {
                        run(i, d);
                    });
                    // The queue (its connection, its server process) goes with the pool.
                    (queries, queue)
                });
            match spawned {
                Ok(h) => pool.workers.push(h),
                Err(e) => {
                    drop(pool.join());
                    return Err(format!("spawning the poller: {e}"));
                }
            }
        }
        Ok(pool)
    }

    /// Waits for every worker: the queries they made (or the first error), and their queues
    /// (connections still open, for the caller to close after reading the server's CPU).
    pub(super) fn join(self) -> (Result<u64, String>, Vec<Box<dyn Queue>>) {
        let mut total = Ok(0);
        let mut queues = Vec::with_capacity(self.workers.len());
        for h in self.workers {
            let queries = match h.join() {
                Ok((q, queue)) => {
                    queues.push(queue);
                    q
                }
                Err(_) => Err("the poller thread panicked".to_owned()),
            };
            total = match (total, queries) {
                (Ok(a), Ok(b)) => Ok(a + b),
                (Err(e), _) | (_, Err(e)) => {
                    // The others stop at their next poll.
                    self.stop.store(true, Relaxed);
                    Err(e)
                }
            };
        }
        (total, queues)
    }
}

/// A baseline's lateness run: the N jobs (`offsets`, ms from a window starting `lead` from now)
/// inserted through the first queue, then a [`Pool`] of one worker per queue polling every
/// `interval`, each running its claimed jobs (recording their lateness).
pub(super) fn baseline_lateness(
    server: Server,
    queues: Vec<Box<dyn Queue>>,
    interval: Duration,
    (lead, window): (Duration, Duration),
    offsets: &[i64],
) -> Result<LateRun, String> {
    let mut queues = queues;
    let n = offsets.len();
    let slots = Slots::new(n);
    let base = now_ms() + millis(lead);
    let jobs: Vec<(usize, i64)> = offsets
        .iter()
        .enumerate()
        .map(|(i, &off)| (i, base + off))
        .collect();
    let t0 = Instant::now();
    queues
        .first_mut()
        .ok_or_else(|| "no worker".to_owned())?
        .insert(&jobs, 'L')?;
    let insert = t0.elapsed();
    let (cpu0, server0) = (procfs::process_cpu(), server.cpu());
    let last = base + millis(window);
    let end = Instant::now()
        + Duration::from_millis(u64::try_from(last - now_ms()).unwrap_or(0))
        + Duration::from_secs(10);
    let (s, r) = (slots.clone(), slots.clone());
    let pool = Pool::start(
        queues,
        interval,
        Instant::now(),
        end,
        Arc::new(move || s.ran() >= n),
        Arc::new(move |i, deadline| {
            r.record(i, wall_ns(SystemTime::now()) - deadline * 1_000_000);
        }),
    )?;
    let (queries, queues) = pool.join();
    let (cpu1, server1) = (procfs::process_cpu(), server.cpu());
    drop(queues);
    let queries = queries?;
    Ok(LateRun {
        insert,
        cpu: cpu_between(cpu0, cpu1),
        server_cpu: cpu_between(server0, server1),
        queries: Some(queries),
        ..LateRun::of(&slots, n)
    })
}

/// The Lua script of the Redis claim: the due members (with their scores), earliest first, at
/// most `ARGV[2]`, removed in the same atomic step.
const REDIS_CLAIM: &str = "\
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'WITHSCORES', 'LIMIT', 0, ARGV[2])
if #due > 0 then
  local members = {}
  for i = 1, #due, 2 do members[#members + 1] = due[i] end
  redis.call('ZREM', KEYS[1], unpack(members))
end
return due";

/// The Redis server of this run, and the key prefix its keys live under.
pub(super) struct RedisSvc {
    client: redis::Client,
    pub(super) prefix: String,
    cleaned: bool,
}

fn redis_err(e: redis::RedisError) -> String {
    chain(&e)
}

impl RedisSvc {
    /// Connects (and pings) the server at `addr`.
    pub(super) fn connect(addr: &str, prefix: String) -> Result<RedisSvc, String> {
        let client = redis::Client::open(format!("redis://{addr}/")).map_err(redis_err)?;
        let svc = RedisSvc {
            client,
            prefix,
            cleaned: false,
        };
        let mut con = svc.connection()?;
        redis::cmd("PING")
            .query::<String>(&mut con)
            .map_err(redis_err)?;
        Ok(svc)
    }

    pub(super) fn connection(&self) -> Result<redis::Connection, String> {
        let con = self
            .client
            .get_connection_with_timeout(Duration::from_secs(3))
            .map_err(redis_err)?;
        con.set_read_timeout(Some(Duration::from_secs(30)))
            .map_err(redis_err)?;
        con.set_write_timeout(Some(Duration::from_secs(30)))
            .map_err(redis_err)?;
        Ok(con)
    }

    /// A new sorted set under the prefix, with a connection and the claim script loaded.
    pub(super) fn queue(&self, tag: &str) -> Result<Box<dyn Queue>, String> {
        let mut con = self.connection()?;
        let sha: String = redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(REDIS_CLAIM)
            .query(&mut con)
            .map_err(redis_err)?;
        Ok(Box::new(RedisQueue {
            con,
            key: format!("{}{tag}", self.prefix),
            sha,
        }))
    }

    /// Deletes every key under the prefix: how many.
    pub(super) fn clean(&mut self) -> Result<usize, String> {
        self.cleaned = true;
        let prefix = self.prefix.clone();
        self.delete_where(&format!("{prefix}*"), |_| true)
    }

    /// Deletes the keys of killed runs (see [`STALE`](super::common::STALE)): what was done.
    pub(super) fn sweep(&self) -> Vec<String> {
        match self.delete_where("w13:*", |k| {
            k.strip_prefix("w13:").is_some_and(|r| stale(r, ':'))
        }) {
            Ok(0) => Vec::new(),
            Ok(n) => vec![format!("Redis: deleted {n} key(s) left by killed runs")],
            Err(e) => vec![format!(
                "Redis: could not delete the keys of killed runs: {e}"
            )],
        }
    }

    /// Deletes the keys matching `pattern` that `pick` accepts: how many.
    pub(super) fn delete_where(
        &self,
        pattern: &str,
        pick: impl Fn(&str) -> bool,
    ) -> Result<usize, String> {
        let mut con = self.connection()?;
        let mut cursor = 0u64;
        let mut deleted = 0;
        loop {
            let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(pattern)
                .arg("COUNT")
                .arg(1000)
                .query(&mut con)
                .map_err(redis_err)?;
            let keys: Vec<String> = keys.into_iter().filter(|k| pick(k)).collect();
            if !keys.is_empty() {
                deleted += redis::cmd("DEL")
                    .arg(&keys)
                    .query::<usize>(&mut con)
                    .map_err(redis_err)?;
            }
            if next == 0 {
                return Ok(deleted);
            }
            cursor = next;
        }
    }
}

impl Drop for RedisSvc {
    fn drop(&mut self) {
        if !self.cleaned {
            let _ = self.clean();
        }
    }
}

/// One Redis sorted set of jobs: member = key, `:`, payload; score = deadline in ms.
struct RedisQueue {
    con: redis::Connection,
    key: String,
    sha: String,
}

impl Queue for RedisQueue {
    fn insert(&mut self, jobs: &[(usize, i64)], prefix: char) -> Result<(), String> {
        let mut pipe = redis::pipe();
        for chunk in jobs.chunks(1000) {
            pipe.cmd("ZADD").arg(&self.key).ignore();
            for &(i, deadline) in chunk {
                let mut member = format!("{prefix}{i}:").into_bytes();
                member.extend_from_slice(&PAYLOAD);
                pipe.arg(deadline).arg(member);
            }
        }
        pipe.query::<()>(&mut self.con).map_err(redis_err)
    }

    fn claim(&mut self, now_ms: i64) -> Result<Vec<(usize, i64)>, String> {
        let flat: Vec<Vec<u8>> = redis::cmd("EVALSHA")
            .arg(&self.sha)
            .arg(1)
            .arg(&self.key)
            .arg(now_ms)
            .arg(CLAIM)
            .query(&mut self.con)
            .map_err(redis_err)?;
        flat.chunks(2)
            .map(|pair| {
                let bad = || format!("a malformed claim reply: {pair:?}");
                let [member, score] = pair else {
                    return Err(bad());
                };
                let i = index_of(member).ok_or_else(bad)?;
                let score: f64 = std::str::from_utf8(score)
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .ok_or_else(bad)?;
                Ok((i, score.round() as i64))
            })
            .collect()
    }
}

/// The PostgreSQL server of a run, and the schema its tables live in.
pub(super) struct PgSvc {
    /// How to connect (libpq's `key=value` form).
    pub(super) params: String,
    /// The run's schema: `{prefix}_{pid}_{stamp}`.
    pub(super) schema: String,
    /// The workload's prefix of its schemas (`w13`).
    prefix: &'static str,
    dropped: bool,
}

impl PgSvc {
    /// Connects to the server at `addr` (database `test`, as `postgres` or else `root`) and
    /// makes the schema `schema` (named `{prefix}_...`).
    pub(super) fn connect(
        addr: (&str, u16),
        prefix: &'static str,
        schema: String,
    ) -> Result<PgSvc, String> {
        let mut errors = Vec::new();
        for user in ["postgres", "root"] {
            let params = format!(
                "host={} port={} user={user} dbname=test connect_timeout=3 \
                 application_name=wheelbench-{prefix}",
                addr.0, addr.1
            );
            match postgres::Client::connect(&params, postgres::NoTls) {
                Ok(mut client) => {
                    client
                        .batch_execute(&format!("CREATE SCHEMA {schema}"))
                        .map_err(|e| format!("CREATE SCHEMA {schema}: {}", chain(&e)))?;
                    return Ok(PgSvc {
                        params,
                        schema,
                        prefix,
                        dropped: false,
                    });
                }
                Err(e) => errors.push(format!("as {user}: {}", chain(&e))),
            }
        }
        Err(errors.join("; "))
    }

    /// A new connection.
    pub(super) fn client(&self) -> Result<postgres::Client, String> {
        postgres::Client::connect(&self.params, postgres::NoTls).map_err(|e| chain(&e))
    }

    /// A new table in the schema, with a connection and the claim prepared.
    pub(super) fn queue(&self, tag: &str) -> Result<Box<dyn Queue>, String> {
        self.create_table(tag)?;
        self.open_queue(tag)
    }

    /// Makes the table `jobs_{tag}` in the schema.
    pub(super) fn create_table(&self, tag: &str) -> Result<(), String> {
        let table = format!("{}.jobs_{tag}", self.schema);
        self.client()?
            .batch_execute(&format!(
                "CREATE TABLE {table} (key text PRIMARY KEY, deadline bigint NOT NULL, \
                 payload bytea NOT NULL); CREATE INDEX ON {table} (deadline);"
            ))
            .map_err(|e| format!("CREATE TABLE {table}: {}", chain(&e)))
    }

    /// The table `jobs_{tag}` (made already) on a connection of its own, with the claim
    /// prepared: one worker's queue.
    pub(super) fn open_queue(&self, tag: &str) -> Result<Box<dyn Queue>, String> {
        let mut client = self.client()?;
        let table = format!("{}.jobs_{tag}", self.schema);
        let claim = client
            .prepare(&format!(
                "DELETE FROM {table} WHERE key IN (SELECT key FROM {table} WHERE deadline <= $1 \
                 ORDER BY deadline LIMIT {CLAIM} FOR UPDATE SKIP LOCKED) \
                 RETURNING key, deadline, payload"
            ))
            .map_err(|e| format!("prepare the claim: {}", chain(&e)))?;
        let insert = client
            .prepare(&format!(
                "INSERT INTO {table} (key, deadline, payload) \
                 SELECT * FROM unnest($1::text[], $2::bigint[], $3::bytea[])"
            ))
            .map_err(|e| format!("prepare the insert: {}", chain(&e)))?;
        Ok(Box::new(PgQueue {
            client,
            table,
            claim,
            insert,
        }))
    }

    /// Drops the schemas (`{prefix}_...`) of killed runs (see [`STALE`](super::common::STALE)):
    /// what was done.
    pub(super) fn sweep(&self) -> Vec<String> {
        let prefix = self.prefix;
        let swept = (|| {
            let mut client = self.client()?;
            let rows = client
                .query(
                    &format!(
                        "SELECT nspname::text FROM pg_namespace WHERE nspname LIKE '{prefix}\\_%'"
                    ),
                    &[],
                )
                .map_err(|e| chain(&e))?;
            let mut dropped = Vec::new();
            for row in rows {
                let name: String = row.try_get(0).map_err(|e| chain(&e))?;
                let rest = name.strip_prefix(prefix).and_then(|r| r.strip_prefix('_'));
                if rest.is_some_and(|r| stale(r, '_')) {
                    client
                        .batch_execute(&format!("DROP SCHEMA IF EXISTS {name} CASCADE"))
                        .map_err(|e| chain(&e))?;
                    dropped.push(name);
                }
            }
            Ok::<Vec<String>, String>(dropped)
        })();
        match swept {
            Ok(d) if d.is_empty() => Vec::new(),
            Ok(d) => vec![format!(
                "PostgreSQL: dropped schemas left by killed runs: {}",
                d.join(", ")
            )],
            Err(e) => vec![format!(
                "PostgreSQL: could not drop the schemas of killed runs: {e}"
            )],
        }
    }

    /// Drops the schema and everything in it.
    pub(super) fn drop_schema(&mut self) -> Result<(), String> {
        self.dropped = true;
        self.client()?
            .batch_execute(&format!("DROP SCHEMA IF EXISTS {} CASCADE", self.schema))
            .map_err(|e| chain(&e))
    }
}

impl Drop for PgSvc {
    fn drop(&mut self) {
        if !self.dropped {
            let _ = self.drop_schema();
        }
    }
}

/// One PostgreSQL table of jobs: key, deadline in ms (indexed), payload.
struct PgQueue {
    client: postgres::Client,
    table: String,
    claim: postgres::Statement,
    insert: postgres::Statement,
}

impl Queue for PgQueue {
    fn insert(&mut self, jobs: &[(usize, i64)], prefix: char) -> Result<(), String> {
        for chunk in jobs.chunks(10_000) {
            let keys: Vec<String> = chunk.iter().map(|(i, _)| format!("{prefix}{i}")).collect();
            let deadlines: Vec<i64> = chunk.iter().map(|&(_, d)| d).collect();
            let payloads: Vec<Vec<u8>> = chunk.iter().map(|_| PAYLOAD.to_vec()).collect();
            self.client
                .execute(&self.insert, &[&keys, &deadlines, &payloads])
                .map_err(|e| format!("insert: {}", chain(&e)))?;
        }
        // As autovacuum would, later: the planner's statistics of the new rows.
        self.client
            .batch_execute(&format!("ANALYZE {}", self.table))
            .map_err(|e| format!("ANALYZE: {}", chain(&e)))
    }

    fn claim(&mut self, now_ms: i64) -> Result<Vec<(usize, i64)>, String> {
        let rows = self
            .client
            .query(&self.claim, &[&now_ms])
            .map_err(|e| format!("claim: {}", chain(&e)))?;
        rows.iter()
            .map(|row| {
                let key: &str = row.try_get(0).map_err(|e| chain(&e))?;
                let deadline: i64 = row.try_get(1).map_err(|e| chain(&e))?;
                let payload: &[u8] = row.try_get(2).map_err(|e| chain(&e))?;
                std::hint::black_box(payload);
                let i = index_of(key.as_bytes()).ok_or_else(|| format!("a stray key {key:?}"))?;
                Ok((i, deadline))
            })
            .collect()
    }
}

/// A baseline: which server, and how often it is polled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Server {
    Redis,
    Postgres,
}

impl Server {
    pub(super) fn name(self) -> &'static str {
        match self {
            Server::Redis => "Redis sorted set, Lua claim",
            Server::Postgres => "PostgreSQL, FOR UPDATE SKIP LOCKED",
        }
    }

    /// The name (`comm`) of the server's processes on this machine.
    pub(super) fn process(self) -> &'static str {
        match self {
            Server::Redis => "redis-server",
            Server::Postgres => "postgres",
        }
    }

    /// CPU time of the server's processes on this machine so far, if they are local and `/proc`
    /// shows them.
    pub(super) fn cpu(self) -> Option<Duration> {
        procfs::cpu_of_processes(self.process())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::scenario::durable::common::late_offsets;

    /// One queue in memory, shared by a pool's workers (each claim takes the lock: atomic).
    struct Shared(Arc<Mutex<Vec<(usize, i64)>>>);

    impl Queue for Shared {
        fn insert(&mut self, jobs: &[(usize, i64)], _: char) -> Result<(), String> {
            let mut q = self.0.lock().map_err(|e| e.to_string())?;
            q.extend_from_slice(jobs);
            q.sort_by_key(|&(_, d)| d);
            Ok(())
        }

        fn claim(&mut self, now_ms: i64) -> Result<Vec<(usize, i64)>, String> {
            let mut q = self.0.lock().map_err(|e| e.to_string())?;
            let due = q
                .iter()
                .take_while(|&&(_, d)| d <= now_ms)
                .take(CLAIM)
                .count();
            Ok(q.drain(..due).collect())
        }
    }

    #[test]
    fn a_pool_spreads_its_polls_and_runs_every_job_once_none_early() {
        let (n, window) = (600, Duration::from_millis(200));
        let jobs = Arc::new(Mutex::new(Vec::new()));
        let queues: Vec<Box<dyn Queue>> = (0..3)
            .map(|_| Box::new(Shared(jobs.clone())) as Box<dyn Queue>)
            .collect();
        let r = baseline_lateness(
            Server::Postgres,
            queues,
            Duration::from_millis(60),
            (Duration::from_millis(50), window),
            &late_offsets(n, window),
        )
        .unwrap();
        assert_eq!((r.lost, r.early, r.doubles), (0, 0, 0));
        // Three workers every 60 ms: about a poll every 20 ms over some 250 ms (one worker
        // alone would make 5 or so); generous bounds, for a loaded machine.
        let late = r.lateness.unwrap();
        assert!(late.max < 150_000_000, "{late:?}");
        let queries = r.queries.unwrap();
        assert!((10..=40).contains(&queries), "{queries}");
    }
}
