//! The schema (created and migrated by the store itself, versioned) and every statement, written
//! once per schema name.
//!
//! | table | holds |
//! |---|---|
//! | `tw_meta` | `schema_version`, `shards` (fixed when the schema is made) |
//! | `tw_jobs` | the waiting jobs: key, shard, deadline (ns since 1970), version, attempts, kind, payload; indexed by (shard, deadline, key) |
//! | `tw_dead` | the dead-letter set |
//! | `tw_leases` | one row per shard: its owner (a node id), epoch, and when the lease expires (the server's clock) |
//! | `tw_nodes` | each live node's heartbeat: how many nodes share the shards |
//! | `tw_version` | the sequence of job versions |

use postgres::Transaction;

use super::conn::pg;
use crate::error::OpenError;

/// The newest schema version this code writes and reads.
pub(super) const SCHEMA_VERSION: i64 = 1;

/// The migrations, in order: `MIGRATIONS[v]` takes a schema from version `v` to `v + 1`. `{s}` is
/// the schema, `{n}` the number of shards.
const MIGRATIONS: &[&str] = &["
    CREATE TABLE {s}.tw_jobs (
        key text PRIMARY KEY,
        shard int NOT NULL,
        deadline bigint NOT NULL,
        version bigint NOT NULL,
        attempts int NOT NULL,
        kind text NOT NULL,
        payload bytea NOT NULL
    );
    CREATE INDEX tw_jobs_due ON {s}.tw_jobs (shard, deadline, key);
    CREATE INDEX tw_jobs_kind ON {s}.tw_jobs (kind);
    CREATE TABLE {s}.tw_dead (
        key text PRIMARY KEY,
        shard int NOT NULL,
        deadline bigint NOT NULL,
        version bigint NOT NULL,
        attempts int NOT NULL,
        kind text NOT NULL,
        payload bytea NOT NULL,
        reason text NOT NULL,
        died bigint NOT NULL
    );
    CREATE TABLE {s}.tw_leases (
        shard int PRIMARY KEY,
        owner text,
        epoch bigint NOT NULL DEFAULT 0,
        expires timestamptz NOT NULL DEFAULT 'epoch'
    );
    INSERT INTO {s}.tw_leases (shard) SELECT generate_series(0, {n} - 1);
    CREATE TABLE {s}.tw_nodes (id text PRIMARY KEY, heartbeat timestamptz NOT NULL);
    CREATE SEQUENCE {s}.tw_version;
    INSERT INTO {s}.tw_meta (key, value) VALUES ('shards', {n}), ('notify_within_ms', {w});
"];

/// What a schema fixes for every node when it is made.
pub(super) struct Fixed {
    pub(super) shards: u32,
    /// How far ahead jobs are announced, ms (see `PgOptions::notify_within`).
    pub(super) notify_within_ms: u64,
}

/// Makes or migrates the schema `name` (under an advisory lock, in one transaction), and returns
/// what it fixed when it was made (`new` is used only then).
pub(super) fn migrate(
    tx: &mut Transaction<'_>,
    name: &str,
    new: &Fixed,
) -> Result<Fixed, OpenError> {
    let fail = |e: postgres::Error| OpenError::from(pg(e));
    tx.execute("SELECT pg_advisory_xact_lock(hashtext($1))", &[&name])
        .map_err(fail)?;
    // Quoted: a name that is a keyword (`select`, `user`) is a name all the same.
    let s = &quoted(name);
    tx.batch_execute(&format!(
        "CREATE SCHEMA IF NOT EXISTS {s};
         CREATE TABLE IF NOT EXISTS {s}.tw_meta (key text PRIMARY KEY, value bigint NOT NULL);"
    ))
    .map_err(fail)?;
    let meta = |key: &str, tx: &mut Transaction<'_>| -> Result<Option<i64>, OpenError> {
        let row = tx
            .query_opt(
                &format!("SELECT value FROM {s}.tw_meta WHERE key = $1"),
                &[&key],
            )
            .map_err(fail)?;
        Ok(row.map(|r| r.get(0)))
    };
    let found = meta("schema_version", tx)?.unwrap_or(0);
    if found > SCHEMA_VERSION {
        return Err(OpenError::NewerFormat {
            found: found as u64,
            supported: SCHEMA_VERSION as u64,
        });
    }
    for migration in &MIGRATIONS[found as usize..] {
        let sql = migration
            .replace("{s}", s)
            .replace("{n}", &new.shards.to_string())
            .replace("{w}", &new.notify_within_ms.to_string());
        tx.batch_execute(&sql).map_err(fail)?;
    }
    tx.execute(
        &format!(
            "INSERT INTO {s}.tw_meta (key, value) VALUES ('schema_version', $1)
             ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value"
        ),
        &[&SCHEMA_VERSION],
    )
    .map_err(fail)?;
    let corrupt = |what: &str| OpenError::Corrupt(format!("schema {s} has no {what}"));
    let n = meta("shards", tx)?.ok_or_else(|| corrupt("shard count"))?;
    let w = meta("notify_within_ms", tx)?.ok_or_else(|| corrupt("notify_within_ms"))?;
    Ok(Fixed {
        shards: u32::try_from(n).map_err(|_| corrupt("valid shard count"))?,
        notify_within_ms: u64::try_from(w).map_err(|_| corrupt("valid notify_within_ms"))?,
    })
}

/// Every statement, for one schema.
pub(super) struct Sql {
    pub(super) insert: String,
    pub(super) upsert: String,
    pub(super) cancel: String,
    pub(super) reschedule: String,
    pub(super) complete: String,
    pub(super) retry: String,
    pub(super) bury: String,
    pub(super) waiting: String,
    pub(super) undo: String,
    pub(super) requeue: String,
    pub(super) drop_dead: String,
    pub(super) due_all: String,
    pub(super) due_at: String,
    pub(super) due_through: String,
    pub(super) next_past: String,
    pub(super) get: String,
    pub(super) dead: String,
    pub(super) counts: String,
    pub(super) kinds: String,
    pub(super) heartbeat: String,
    pub(super) renew: String,
    pub(super) live_nodes: String,
    pub(super) live_node: String,
    pub(super) release: String,
    pub(super) release_all: String,
    pub(super) acquire: String,
    pub(super) leave: String,
    pub(super) forget_nodes: String,
    pub(super) channel: String,
}

impl Sql {
    pub(super) fn new(name: &str) -> Sql {
        let s = &quoted(name);
        // A run's outcome applies only while the lease it ran under holds (fencing).
        let fence = format!(
            "EXISTS (SELECT 1 FROM {s}.tw_leases l WHERE l.shard = {s}.tw_jobs.shard
             AND l.owner = $3 AND l.epoch = $4 AND l.expires > now())"
        );
        let cols = "key, deadline, version, attempts, kind, payload";
        let insert_head = format!(
            "INSERT INTO {s}.tw_jobs (key, shard, deadline, version, attempts, kind, payload)
             SELECT k, sh, d, nextval('{s}.tw_version'), 0, kd, p
             FROM unnest($1::text[], $2::int[], $3::bigint[], $4::text[], $5::bytea[])
                  AS t(k, sh, d, kd, p)"
        );
        Sql {
            insert: format!("{insert_head} ON CONFLICT (key) DO NOTHING RETURNING key, version"),
            upsert: format!(
                "{insert_head} ON CONFLICT (key) DO UPDATE SET shard = EXCLUDED.shard,
                 deadline = EXCLUDED.deadline, version = EXCLUDED.version, attempts = 0,
                 kind = EXCLUDED.kind, payload = EXCLUDED.payload
                 RETURNING key, version"
            ),
            cancel: format!("DELETE FROM {s}.tw_jobs WHERE key = $1 RETURNING version"),
            reschedule: format!(
                "UPDATE {s}.tw_jobs SET deadline = $2, version = nextval('{s}.tw_version')
                 WHERE key = $1 RETURNING version, shard"
            ),
            complete: format!(
                "DELETE FROM {s}.tw_jobs WHERE key = $1 AND version = $2 AND {fence}
                 RETURNING version"
            ),
            retry: format!(
                "UPDATE {s}.tw_jobs SET deadline = $5, attempts = attempts + 1,
                 version = nextval('{s}.tw_version')
                 WHERE key = $1 AND version = $2 AND {fence} RETURNING version, shard"
            ),
            bury: format!(
                "WITH d AS (DELETE FROM {s}.tw_jobs WHERE key = $1 AND version = $2 AND {fence}
                            RETURNING *)
                 INSERT INTO {s}.tw_dead
                     (key, shard, deadline, version, attempts, kind, payload, reason, died)
                 SELECT key, shard, deadline, version, attempts + $5, kind, payload, $6, $7
                 FROM d
                 ON CONFLICT (key) DO UPDATE SET shard = EXCLUDED.shard,
                     deadline = EXCLUDED.deadline, version = EXCLUDED.version,
                     attempts = EXCLUDED.attempts, kind = EXCLUDED.kind,
                     payload = EXCLUDED.payload, reason = EXCLUDED.reason, died = EXCLUDED.died
                 RETURNING version"
            ),
            waiting: format!("SELECT 1 FROM {s}.tw_jobs WHERE key = $1"),
            undo: format!("DELETE FROM {s}.tw_jobs WHERE key = ANY($1)"),
            requeue: format!(
                "WITH d AS (DELETE FROM {s}.tw_dead WHERE key = $1 RETURNING *)
                 INSERT INTO {s}.tw_jobs (key, shard, deadline, version, attempts, kind, payload)
                 SELECT key, shard, $2, nextval('{s}.tw_version'), 0, kind, payload FROM d
                 RETURNING version, shard"
            ),
            drop_dead: format!("DELETE FROM {s}.tw_dead WHERE key = $1 RETURNING 0::bigint"),
            due_all: format!(
                "SELECT {cols} FROM {s}.tw_jobs WHERE shard = $1 AND deadline <= $2
                 ORDER BY deadline, key LIMIT $3"
            ),
            due_at: format!(
                "SELECT {cols} FROM {s}.tw_jobs WHERE shard = $1 AND deadline <= $2
                 AND (deadline, key) > ($4, $5) ORDER BY deadline, key LIMIT $3"
            ),
            due_through: format!(
                "SELECT {cols} FROM {s}.tw_jobs WHERE shard = $1 AND deadline <= $2
                 AND deadline > $4 ORDER BY deadline, key LIMIT $3"
            ),
            next_past: format!(
                "SELECT min(deadline) FROM {s}.tw_jobs WHERE shard = $1 AND deadline > $2"
            ),
            get: format!("SELECT {cols} FROM {s}.tw_jobs WHERE key = $1"),
            dead: format!(
                "SELECT {cols}, reason, died FROM {s}.tw_dead WHERE key > $1 ORDER BY key LIMIT $2"
            ),
            counts: format!(
                "SELECT (SELECT count(*) FROM {s}.tw_jobs), (SELECT count(*) FROM {s}.tw_dead)"
            ),
            kinds: format!("SELECT kind, count(*) FROM {s}.tw_jobs GROUP BY kind"),
            heartbeat: format!(
                "INSERT INTO {s}.tw_nodes (id, heartbeat) VALUES ($1, now())
                 ON CONFLICT (id) DO UPDATE SET heartbeat = now()"
            ),
            renew: format!(
                "UPDATE {s}.tw_leases SET expires = now() + $2::float8 * interval '1 millisecond'
                 WHERE owner = $1 AND expires > now() RETURNING shard, epoch"
            ),
            live_nodes: format!(
                "SELECT id FROM {s}.tw_nodes
                 WHERE heartbeat > now() - $1::float8 * interval '1 millisecond' ORDER BY id"
            ),
            live_node: format!(
                "SELECT 1 FROM {s}.tw_nodes
                 WHERE id = $1 AND heartbeat > now() - $2::float8 * interval '1 millisecond'"
            ),
            release: format!(
                "UPDATE {s}.tw_leases SET owner = NULL, expires = now()
                 WHERE owner = $1 AND shard = ANY($2)"
            ),
            release_all: format!(
                "UPDATE {s}.tw_leases SET owner = NULL, expires = now() WHERE owner = $1"
            ),
            acquire: format!(
                "UPDATE {s}.tw_leases SET owner = $1, epoch = epoch + 1,
                     expires = now() + $2::float8 * interval '1 millisecond'
                 WHERE shard IN (SELECT shard FROM {s}.tw_leases
                                 WHERE owner IS NULL OR expires < now()
                                 ORDER BY shard LIMIT $3 FOR UPDATE SKIP LOCKED)
                 RETURNING shard, epoch"
            ),
            leave: format!("DELETE FROM {s}.tw_nodes WHERE id = $1"),
            forget_nodes: format!(
                "DELETE FROM {s}.tw_nodes WHERE heartbeat < now() - $1::float8 * interval '1 millisecond'"
            ),
            channel: format!("tickwheel_{name}"),
        }
    }
}

/// The schema `name` (checked: a-z, 0-9, `_`) as a quoted identifier.
fn quoted(name: &str) -> String {
    format!("\"{name}\"")
}

/// A deadline (ns since 1970, `u64`) as PostgreSQL's `bigint`: past 2262 it saturates there.
pub(super) fn to_db(ns: u64) -> i64 {
    i64::try_from(ns).unwrap_or(i64::MAX)
}

/// A `bigint` deadline back.
pub(super) fn from_db(ns: i64) -> u64 {
    u64::try_from(ns).unwrap_or(0)
}
