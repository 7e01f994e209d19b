//! [`PgStore`]: the jobs in PostgreSQL, shared by many nodes (the `postgres` feature).
//!
//! Jobs hash by key into a fixed number of shards. Each node leases shards (`leases.rs`): it
//! loads and fires only the jobs of the shards it holds, renews its leases in the background,
//! and stops firing a shard before its lease can pass to another node; the delete (or retry)
//! that ends a run applies only while the lease it ran under holds, checked in the same statement
//! (fencing by epoch). A job stored for a shard held elsewhere, and due within
//! [`PgOptions::notify_within`], is announced with `NOTIFY` in the storing transaction, so its
//! holder arms it at once. PostgreSQL coordinates; there is no consensus of our own.

mod apply;
mod conn;
mod leases;
mod sql;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant, SystemTime};

use parking_lot::Mutex;
use postgres::{Row, Transaction};

use self::conn::{Conn, pg};
use self::sql::{Sql, from_db, to_db};
use super::{Applied, Counts, Cursor, Due, Events, Lease, Op, Store, Stored};
use crate::error::{OpenError, StoreError};
use crate::job::{DeadJob, Job, wall_time};

/// Where and how a [`PgStore`] keeps its jobs.
///
/// ```no_run
/// use std::time::Duration;
/// use tickwheel_durable::store::{PgOptions, PgStore};
///
/// let store = PgStore::open(
///     PgOptions::new("host=127.0.0.1 user=postgres dbname=app")
///         .schema("billing_jobs")            // tables of its own, made and migrated here
///         .lease(Duration::from_secs(10)),  // a dead node's shards move within about this
/// )?;
/// # Ok::<(), tickwheel_durable::OpenError>(())
/// ```
#[derive(Clone, Debug)]
pub struct PgOptions {
    conninfo: String,
    schema: String,
    shards: u32,
    lease: Duration,
    node: Option<String>,
    notify_within: Duration,
    readers: usize,
}

impl PgOptions {
    /// Connects with `conninfo` (libpq's `key=value` form, or a `postgresql://` URL).
    pub fn new(conninfo: impl Into<String>) -> PgOptions {
        PgOptions {
            conninfo: conninfo.into(),
            schema: "tickwheel".to_owned(),
            shards: 64,
            lease: Duration::from_secs(10),
            node: None,
            notify_within: Duration::from_secs(2 * 3600),
            readers: 2,
        }
    }

    /// The schema of the store's tables (made if missing; default `tickwheel`): lower-case
    /// letters, digits and `_`, 1 to 40 of them, not starting with a digit.
    pub fn schema(mut self, schema: impl Into<String>) -> PgOptions {
        self.schema = schema.into();
        self
    }

    /// Shards of a new schema (default 64; fixed once the schema is made): the unit nodes share.
    /// More shards than nodes, so that a node's share can move in small steps.
    pub fn shards(mut self, shards: u32) -> PgOptions {
        self.shards = shards;
        self
    }

    /// How long a lease lasts unrenewed (default 10 s; renewed every third of it). A node that
    /// stops renewing stops firing before it expires; another node takes its shards within
    /// about a third of a lease after it expired.
    pub fn lease(mut self, lease: Duration) -> PgOptions {
        self.lease = lease;
        self
    }

    /// This node's name in the lease table (default: host name, process id and start time): 1 to
    /// 64 bytes, no white space or control characters. Names must be unique among live nodes: a
    /// store opened under the name of a node that beat within the last lease is refused
    /// ([`OpenError::Locked`]; a node restarted under its old name waits out one lease).
    pub fn node(mut self, node: impl Into<String>) -> PgOptions {
        self.node = Some(node.into());
        self
    }

    /// Jobs stored due within this (by the wall clock, from now) are announced to the node that
    /// holds their shard, which arms them at once; later ones are read when its horizon reaches
    /// them. Fixed when the schema is made, like the shards, so every node announces alike; a
    /// node's horizon must not be longer (checked when its jobs open), with room for the nodes'
    /// clocks to disagree: the default is two hours, twice the default horizon.
    pub fn notify_within(mut self, within: Duration) -> PgOptions {
        self.notify_within = within;
        self
    }

    fn check(&self) -> Result<(), OpenError> {
        let s = self.schema.as_bytes();
        let ok = !s.is_empty()
            && s.len() <= 40
            && !s[0].is_ascii_digit()
            && s.iter()
                .all(|&b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        if !ok {
            return Err(OpenError::Config(
                "a schema name has 1 to 40 of a-z, 0-9 and _, not starting with a digit",
            ));
        }
        if self.shards == 0 || self.shards > 65_536 {
            return Err(OpenError::Config("shards must be 1 to 65536"));
        }
        if self.lease < Duration::from_millis(300) {
            return Err(OpenError::Config("a lease must last at least 300 ms"));
        }
        let good = |n: &str| {
            !n.is_empty()
                && n.len() <= 64
                && !n.chars().any(|c| c.is_whitespace() || c.is_control())
        };
        if !self.node.as_deref().is_none_or(good) {
            return Err(OpenError::Config(
                "a node name has 1 to 64 bytes, no white space or control characters",
            ));
        }
        Ok(())
    }
}

/// The jobs in PostgreSQL, shared by many nodes: each node opens its own `PgStore` on the same
/// schema. See the module docs for the protocol, and `docs/architecture.md` for its invariants.
///
/// Cheap to clone (every clone is the same store): keep one to read
/// [`held_shards`](Self::held_shards) and [`statements`](Self::statements) after handing another
/// to [`JobsBuilder::open_store`](crate::JobsBuilder::open_store).
#[derive(Clone)]
pub struct PgStore {
    shared: Arc<Shared>,
}

/// What the store's threads share.
struct Shared {
    sql: Sql,
    node: String,
    shards: u32,
    lease: Duration,
    /// How to connect (every connection of this node).
    config: postgres::Config,
    notify_within: u64,
    /// The commit thread's connection.
    writer: Mutex<Conn>,
    /// Connections for reads.
    readers: Vec<Mutex<Conn>>,
    /// Connections for handlers that run in a transaction (connected on first use).
    handlers: Vec<Mutex<Conn>>,
    /// The shards this node holds: epoch, and until when (this process's clock) it may fire
    /// them.
    held: Mutex<HashMap<u32, (u64, Instant)>>,
    lease_thread: Mutex<Option<leases::Handle>>,
    /// Statements sent to the server: all of them, and the lease thread's.
    statements: AtomicU64,
    lease_statements: AtomicU64,
}

impl PgStore {
    /// Connects, makes or migrates the schema, and registers this node. Nothing is leased until
    /// the jobs start ([`Store::watch`]).
    pub fn open(options: PgOptions) -> Result<PgStore, OpenError> {
        options.check()?;
        let s = options.schema.clone();
        let node = options.node.clone().unwrap_or_else(default_node);
        let config = conn::config(&options.conninfo, &node)?;
        let mut conn = Conn::new(&config);
        let client = conn.get().map_err(OpenError::from)?;
        let mut tx = client.transaction().map_err(|e| OpenError::from(pg(e)))?;
        let new = sql::Fixed {
            shards: options.shards,
            notify_within_ms: u64::try_from(options.notify_within.as_millis()).unwrap_or(u64::MAX),
        };
        let fixed = sql::migrate(&mut tx, &s, &new)?;
        let shards = fixed.shards;
        // Registered here, under the migration's lock: two nodes of one name would take each
        // other's announcements for their own.
        let q = Sql::new(&s);
        let lease_ms = options.lease.as_secs_f64() * 1000.0;
        let fail = |e: postgres::Error| OpenError::from(pg(e));
        if !(tx.query(&q.live_node, &[&node, &lease_ms]).map_err(fail)?).is_empty() {
            return Err(OpenError::Locked);
        }
        tx.execute(&q.heartbeat, &[&node]).map_err(fail)?;
        tx.commit().map_err(fail)?;
        let readers = (0..options.readers.max(1))
            .map(|_| Mutex::new(Conn::new(&config)))
            .collect();
        Ok(PgStore {
            shared: Arc::new(Shared {
                sql: q,
                node,
                shards,
                lease: options.lease,
                config: config.clone(),
                notify_within: fixed.notify_within_ms.saturating_mul(1_000_000),
                writer: Mutex::new(conn),
                readers,
                handlers: (0..4).map(|_| Mutex::new(Conn::new(&config))).collect(),
                held: Mutex::new(HashMap::new()),
                lease_thread: Mutex::new(None),
                statements: AtomicU64::new(0),
                lease_statements: AtomicU64::new(0),
            }),
        })
    }

    /// This node's name in the lease table.
    pub fn node(&self) -> &str {
        &self.shared.node
    }

    /// Statements this node sent to the server so far, and of those, the lease thread's (its
    /// heartbeats, renewals and rebalancing: about four every third of a lease, busy or idle).
    /// The rest are the jobs' own: commits, the window's reads, a run's read of its job.
    pub fn statements(&self) -> (u64, u64) {
        let s = &self.shared;
        (s.statements.load(Relaxed), s.lease_statements.load(Relaxed))
    }

    /// The shards this node holds now.
    pub fn held_shards(&self) -> Vec<u32> {
        let mut held: Vec<u32> = self.shared.held.lock().keys().copied().collect();
        held.sort_unstable();
        held
    }

    /// Runs `sql` on a read connection (reconnecting a broken one first; prepared on it the
    /// first time), its round trips counted.
    fn read(
        &self,
        sql: &str,
        params: &[&(dyn postgres::types::ToSql + Sync)],
    ) -> Result<Vec<Row>, StoreError> {
        let readers = &self.shared.readers;
        let mut conn = (readers.iter())
            .find_map(|c| c.try_lock())
            .unwrap_or_else(|| readers[0].lock());
        let mut trips = 0;
        conn.get()?;
        let result = match conn.query(sql, params, &mut trips) {
            // A read is safe to send again: once, on a new connection, if the old one broke.
            Err(e) if conn::lost(&e) => {
                conn.check(&e);
                conn.get()?;
                conn.query(sql, params, &mut trips)
            }
            other => other,
        };
        self.shared.count(trips);
        result.map_err(|e| {
            conn.check(&e);
            pg(e)
        })
    }
}

fn default_node() -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "node".to_owned());
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{host}-{}-{nanos:09}", std::process::id())
}

/// The shard of `key` among `shards`: FNV-1a over its bytes (a hash fixed here, so every node
/// and every version agrees).
pub(crate) fn shard_of(key: &str, shards: u32) -> u32 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    (h % u64::from(shards.max(1))) as u32
}

/// A row of `tw_jobs` (`key, deadline, version, attempts, kind, payload`) as a stored job.
fn stored(row: &Row) -> Stored {
    let job = Job {
        key: row.get(0),
        deadline: from_db(row.get(1)),
        attempts: u32::try_from(row.get::<_, i32>(3)).unwrap_or(0),
        kind: row.get(4),
        payload: row.get(5),
    };
    Stored {
        job,
        version: u64::try_from(row.get::<_, i64>(2)).unwrap_or(0),
    }
}

impl Store for PgStore {
    fn apply(&self, ops: &[Op], durable: bool) -> Result<Vec<Applied>, StoreError> {
        let shared = &self.shared;
        let mut conn = shared.writer.lock();
        let (client, prepared) = conn.parts()?;
        let mut trips = 0;
        let result = (|| {
            let mut tx = client.transaction()?;
            trips += 1; // the begin
            if !durable {
                // Visible at once, on disk with the next durable commit (the server's WAL
                // writer, or the commit thread's flush within its window).
                trips += 1;
                tx.batch_execute("SET LOCAL synchronous_commit = off")?;
            } else if ops.is_empty() {
                // A commit record to wait for: the flush of every earlier commit.
                trips += 1;
                tx.batch_execute("SELECT pg_current_xact_id()")?;
            }
            let mut batch = apply::Tx {
                tx: &mut tx,
                prepared,
                trips: 0,
            };
            let applied = shared.apply_all(&mut batch, ops);
            trips += batch.trips;
            let applied = applied?;
            trips += 1; // the commit
            tx.commit()?;
            Ok(applied)
        })();
        shared.count(trips);
        result.map_err(|e: postgres::Error| {
            conn.check(&e);
            pg(e)
        })
    }

    fn due(
        &self,
        shard: u32,
        after: Option<&Cursor>,
        until: u64,
        limit: usize,
    ) -> Result<Due, StoreError> {
        let q = &self.shared.sql;
        let (shard, until_db) = (shard as i32, to_db(until));
        let lim = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = match after {
            None => self.read(&q.due_all, &[&shard, &until_db, &lim])?,
            Some(Cursor::At(d, k)) => {
                self.read(&q.due_at, &[&shard, &until_db, &lim, &to_db(*d), k])?
            }
            Some(Cursor::Through(d)) => {
                self.read(&q.due_through, &[&shard, &until_db, &lim, &to_db(*d)])?
            }
        };
        let jobs: Vec<Stored> = rows.iter().map(stored).collect();
        let next = if jobs.len() < limit {
            let rows = self.read(&q.next_past, &[&shard, &until_db])?;
            (rows.first()).and_then(|r| r.get::<_, Option<i64>>(0).map(from_db))
        } else {
            None
        };
        Ok(Due { jobs, next })
    }

    fn get(&self, key: &str) -> Result<Option<Stored>, StoreError> {
        let rows = self.read(&self.shared.sql.get, &[&key])?;
        Ok(rows.first().map(stored))
    }

    fn dead(&self, after: Option<&str>, limit: usize) -> Result<Vec<DeadJob>, StoreError> {
        let lim = i64::try_from(limit).unwrap_or(i64::MAX);
        let after = after.unwrap_or("");
        let rows = self.read(&self.shared.sql.dead, &[&after, &lim])?;
        Ok(rows
            .iter()
            .map(|r| DeadJob {
                job: stored(r).job,
                reason: r.get(6),
                died: wall_time(from_db(r.get(7))),
            })
            .collect())
    }

    fn counts(&self) -> Result<Counts, StoreError> {
        let rows = self.read(&self.shared.sql.counts, &[])?;
        let row = rows.first().ok_or(StoreError::Other("no counts".into()))?;
        Ok(Counts {
            waiting: row.get::<_, i64>(0) as u64,
            dead: row.get::<_, i64>(1) as u64,
        })
    }

    fn kinds(&self) -> Result<Vec<(String, u64)>, StoreError> {
        let rows = self.read(&self.shared.sql.kinds, &[])?;
        Ok(rows
            .iter()
            .map(|r| (r.get(0), r.get::<_, i64>(1) as u64))
            .collect())
    }

    fn shard_of(&self, key: &str) -> u32 {
        shard_of(key, self.shared.shards)
    }

    fn watch(&self, events: Events) {
        let mut thread = self.shared.lease_thread.lock();
        if thread.is_none() {
            *thread = Some(leases::start(self.shared.clone(), events));
        }
    }

    fn holds(&self, lease: Lease) -> bool {
        (self.shared.held.lock().get(&lease.shard))
            .is_some_and(|&(epoch, until)| epoch == lease.epoch && Instant::now() < until)
    }

    fn runs_sql_handlers(&self) -> bool {
        true
    }

    fn announces_within(&self) -> Option<Duration> {
        Some(Duration::from_nanos(self.shared.notify_within))
    }

    fn complete_in(
        &self,
        key: &str,
        version: u64,
        lease: Lease,
        work: &mut dyn FnMut(&mut Transaction<'_>) -> Result<(), crate::HandlerError>,
    ) -> Result<bool, crate::HandlerError> {
        let shared = &self.shared;
        let txs = &shared.handlers;
        let mut conn = (txs.iter())
            .find_map(|c| c.try_lock())
            .unwrap_or_else(|| txs[0].lock());
        let client = conn.get()?;
        shared.statements.fetch_add(3, Relaxed); // begin, the delete, commit (the handler's own aside)
        let mut tx = client.transaction()?;
        // Dropped without a commit on every way out but the last: rolled back.
        work(&mut tx)?;
        let params: [&(dyn postgres::types::ToSql + Sync); 4] =
            [&key, &(version as i64), &shared.node, &(lease.epoch as i64)];
        let done = !tx.query(&shared.sql.complete, &params)?.is_empty();
        if done {
            tx.commit()?;
        }
        Ok(done)
    }

    fn close(&self) {
        let thread = self.shared.lease_thread.lock().take();
        if let Some(t) = thread {
            t.stop();
        }
    }
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("node", &self.shared.node)
            .field("shards", &self.shared.shards)
            .field("held", &self.held_shards().len())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_are_fixed_by_the_key_alone() {
        // FNV-1a, checked against an independent implementation (0xaf63dc4c8601ec8c for "a"):
        // the same on every node and in every version (these values must never change).
        let table = [("", 64, 37), ("order-42", 64, 20), ("a", 1, 0), ("a", 2, 0)];
        for (key, shards, shard) in table {
            assert_eq!(shard_of(key, shards), shard, "{key:?} of {shards}");
        }
        let mut counts = [0u32; 8];
        for i in 0..8000 {
            counts[shard_of(&format!("job-{i}"), 8) as usize] += 1;
        }
        assert!(
            counts.iter().all(|&n| (800..1200).contains(&n)),
            "{counts:?}"
        );
    }
}
