//! A batch of ops in one PostgreSQL transaction: each statement prepared once per connection,
//! every round trip counted, and a run of single-job schedules (concurrent callers' batch) sent
//! as one statement.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering::Relaxed;
use std::time::SystemTime;

use postgres::types::ToSql;
use postgres::{GenericClient, Row, Statement, Transaction};

use super::sql::to_db;
use super::{Shared, shard_of};
use crate::job::{Job, wall_ns};
use crate::store::{Applied, Op};

/// Statements prepared on one connection, by their text.
#[derive(Default)]
pub(super) struct Prepared(HashMap<String, Statement>);

impl Prepared {
    /// `sql` prepared on `client`'s connection (the first time only: a round trip).
    pub(super) fn get(
        &mut self,
        client: &mut impl GenericClient,
        sql: &str,
        trips: &mut u64,
    ) -> Result<Statement, postgres::Error> {
        if let Some(s) = self.0.get(sql) {
            return Ok(s.clone());
        }
        *trips += 1;
        let s = client.prepare(sql)?;
        self.0.insert(sql.to_owned(), s.clone());
        Ok(s)
    }
}

/// A transaction of the commit thread: statements prepared once, round trips counted.
pub(super) struct Tx<'a, 't> {
    pub(super) tx: &'a mut Transaction<'t>,
    pub(super) prepared: &'a mut Prepared,
    pub(super) trips: u64,
}

impl Tx<'_, '_> {
    fn query(
        &mut self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, postgres::Error> {
        let st = self.prepared.get(self.tx, sql, &mut self.trips)?;
        self.trips += 1;
        self.tx.query(&st, params)
    }
}

/// Jobs stored in a batch that another node may have to arm: (shard, key, version, deadline).
type Notes = Vec<(u32, String, u64, u64)>;

/// The version in the first of `rows` (`version, ...`).
fn version_of(rows: &[Row]) -> Option<u64> {
    rows.first().map(|r| r.get::<_, i64>(0) as u64)
}

/// A schedule of one job, not an upsert: the ops concurrent callers send.
fn single(op: &Op) -> Option<&Job> {
    match op {
        Op::Insert {
            jobs,
            upsert: false,
        } if jobs.len() == 1 => jobs.first(),
        _ => None,
    }
}

impl Shared {
    /// Applies `ops` in `tx`, in order, and announces the jobs they stored that are due soon.
    pub(super) fn apply_all(
        &self,
        tx: &mut Tx<'_, '_>,
        ops: &[Op],
    ) -> Result<Vec<Applied>, postgres::Error> {
        let mut notes = Vec::new();
        let mut out = Vec::with_capacity(ops.len());
        let mut i = 0;
        while i < ops.len() {
            let run = ops[i..]
                .iter()
                .take_while(|op| single(op).is_some())
                .count();
            if run > 1 {
                let jobs: Vec<&Job> = ops[i..i + run].iter().filter_map(single).collect();
                out.extend(self.insert_singles(tx, &jobs, &mut notes)?);
                i += run;
            } else {
                out.push(self.apply_one(tx, &ops[i], &mut notes)?);
                i += 1;
            }
        }
        self.notify(tx, notes)?;
        Ok(out)
    }

    /// The columns of an insert of `jobs`.
    fn insert_params(&self, jobs: &[&Job]) -> InsertParams {
        InsertParams {
            keys: jobs.iter().map(|j| j.key.clone()).collect(),
            shards: (jobs.iter())
                .map(|j| shard_of(&j.key, self.shards) as i32)
                .collect(),
            deadlines: jobs.iter().map(|j| to_db(j.deadline)).collect(),
            kinds: jobs.iter().map(|j| j.kind.clone()).collect(),
            payloads: jobs.iter().map(|j| j.payload.clone()).collect(),
        }
    }

    fn insert(
        &self,
        tx: &mut Tx<'_, '_>,
        sql: &str,
        jobs: &[&Job],
    ) -> Result<HashMap<String, u64>, postgres::Error> {
        let p = self.insert_params(jobs);
        let params: [&(dyn ToSql + Sync); 5] =
            [&p.keys, &p.shards, &p.deadlines, &p.kinds, &p.payloads];
        let rows = tx.query(sql, &params)?;
        Ok((rows.iter())
            .map(|r| (r.get::<_, String>(0), r.get::<_, i64>(1) as u64))
            .collect())
    }

    /// Single-job schedules, each its own op, in one statement: each stored or a duplicate (of a
    /// stored job, or of an earlier one of the run), as if applied one after the other.
    fn insert_singles(
        &self,
        tx: &mut Tx<'_, '_>,
        jobs: &[&Job],
        notes: &mut Notes,
    ) -> Result<Vec<Applied>, postgres::Error> {
        let mut versions = self.insert(tx, &self.sql.insert, jobs)?;
        Ok((jobs.iter())
            .map(|j| match versions.remove(&j.key) {
                Some(v) => {
                    notes.push((shard_of(&j.key, self.shards), j.key.clone(), v, j.deadline));
                    Applied::Inserted(vec![v])
                }
                None => Applied::Duplicate(j.key.clone()),
            })
            .collect())
    }

    fn apply_one(
        &self,
        tx: &mut Tx<'_, '_>,
        op: &Op,
        notes: &mut Notes,
    ) -> Result<Applied, postgres::Error> {
        let q = &self.sql;
        let node = self.node.as_str();
        // A job moved to a new version and deadline (`version, shard` rows): announced.
        let mut moved = |rows: Vec<Row>, key: &str, deadline: u64| {
            let row = (rows.first()).map(|r| (r.get::<_, i64>(0) as u64, r.get::<_, i32>(1)));
            if let Some((version, shard)) = row {
                notes.push((shard as u32, key.to_owned(), version, deadline));
            }
            Applied::Moved(row.map(|(v, _)| v))
        };
        Ok(match op {
            Op::Insert { jobs, upsert } => return self.insert_many(tx, jobs, *upsert, notes),
            Op::Cancel { key } => Applied::Removed(version_of(&tx.query(&q.cancel, &[key])?)),
            Op::Reschedule { key, deadline } => {
                let rows = tx.query(&q.reschedule, &[key, &to_db(*deadline)])?;
                moved(rows, key, *deadline)
            }
            Op::Complete {
                key,
                version,
                lease,
            } => {
                let params: [&(dyn ToSql + Sync); 4] =
                    [key, &(*version as i64), &node, &(lease.epoch as i64)];
                Applied::Removed(version_of(&tx.query(&q.complete, &params)?))
            }
            Op::Retry {
                key,
                version,
                deadline,
                lease,
            } => {
                let (v, e, d) = (*version as i64, lease.epoch as i64, to_db(*deadline));
                let rows = tx.query(&q.retry, &[key, &v, &node, &e, &d])?;
                moved(rows, key, *deadline)
            }
            Op::Bury {
                key,
                version,
                reason,
                at,
                failed,
                lease,
            } => {
                let (v, e, f) = (*version as i64, lease.epoch as i64, i32::from(*failed));
                // `text` holds no NUL: an error's text may have one.
                let reason = reason.replace('\0', "\u{fffd}");
                let params: [&(dyn ToSql + Sync); 7] =
                    [key, &v, &node, &e, &f, &reason, &to_db(*at)];
                Applied::Removed(version_of(&tx.query(&q.bury, &params)?))
            }
            Op::Requeue { key, deadline } => {
                if !tx.query(&q.waiting, &[key])?.is_empty() {
                    return Ok(Applied::Duplicate(key.clone()));
                }
                let rows = tx.query(&q.requeue, &[key, &to_db(*deadline)])?;
                moved(rows, key, *deadline)
            }
            Op::DropDead { key } => Applied::Removed(version_of(&tx.query(&q.drop_dead, &[key])?)),
        })
    }

    /// A batch call's jobs, all or none (an upsert: each replaces its key's job, the last of a
    /// key in the batch standing). A plain insert that meets a duplicate deletes the rows it
    /// made, in the same transaction: nothing of it stays.
    fn insert_many(
        &self,
        tx: &mut Tx<'_, '_>,
        jobs: &[Job],
        upsert: bool,
        notes: &mut Notes,
    ) -> Result<Applied, postgres::Error> {
        let mut last: HashMap<&str, &Job> = HashMap::new();
        for j in jobs {
            last.insert(j.key.as_str(), j);
        }
        let chosen: Vec<&Job> = match upsert {
            true => (jobs.iter())
                .filter(|j| std::ptr::eq(last[j.key.as_str()], *j))
                .collect(),
            false => jobs.iter().collect(),
        };
        let sql = if upsert {
            &self.sql.upsert
        } else {
            &self.sql.insert
        };
        let versions = self.insert(tx, sql, &chosen)?;
        if !upsert {
            let mut seen = HashSet::new();
            let dup =
                (jobs.iter()).find(|j| !versions.contains_key(&j.key) || !seen.insert(&j.key));
            if let Some(dup) = dup {
                let made: Vec<&String> = versions.keys().collect();
                tx.query(&self.sql.undo, &[&made])?;
                return Ok(Applied::Duplicate(dup.key.clone()));
            }
        }
        let out: Vec<u64> = jobs.iter().map(|j| versions[&j.key]).collect();
        for (j, &v) in jobs.iter().zip(&out) {
            notes.push((shard_of(&j.key, self.shards), j.key.clone(), v, j.deadline));
        }
        Ok(Applied::Inserted(out))
    }

    /// Announces the jobs stored in this transaction that are due soon, to the node that holds
    /// their shard (delivered when the transaction commits, and only then).
    fn notify(&self, tx: &mut Tx<'_, '_>, notes: Notes) -> Result<(), postgres::Error> {
        let soon = wall_ns(SystemTime::now()).saturating_add(self.notify_within);
        let mut payload = format!("{}\n", self.node);
        let head = payload.len();
        let channel = &self.sql.channel;
        for (shard, key, version, deadline) in notes {
            if deadline > soon {
                continue;
            }
            let line = format!("{shard} {version} {deadline} {} {key}\n", key.len());
            if payload.len() + line.len() > 7_900 && payload.len() > head {
                tx.query("SELECT pg_notify($1, $2)", &[channel, &payload])?;
                payload.truncate(head);
            }
            payload.push_str(&line);
        }
        if payload.len() > head {
            tx.query("SELECT pg_notify($1, $2)", &[channel, &payload])?;
        }
        Ok(())
    }

    /// Counts `trips` round trips to the server.
    pub(super) fn count(&self, trips: u64) {
        self.statements.fetch_add(trips, Relaxed);
    }
}

/// The columns of an insert, as arrays (`unnest` makes rows of them).
struct InsertParams {
    keys: Vec<String>,
    shards: Vec<i32>,
    deadlines: Vec<i64>,
    kinds: Vec<String>,
    payloads: Vec<Vec<u8>>,
}
