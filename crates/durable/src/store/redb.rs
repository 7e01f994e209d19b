//! [`RedbStore`]: the jobs in one redb file.
//!
//! | table | key | value |
//! |---|---|---|
//! | `meta` | `"format"`, `"version"` | the file's format (1); the last version given to a job |
//! | `jobs` | key | the job's record (`record.rs`) |
//! | `due` | (deadline, key) | nothing: the jobs in deadline order |
//! | `dead` | key | the dead job's record |
//! | `kinds` | kind | how many waiting jobs have it |
//!
//! Every commit saves redb's allocator state too (quick repair), so reopening after a crash does
//! not scan the whole file.

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

use parking_lot::{Mutex, RwLock};
use redb::{
    Database, DatabaseError, Durability, ReadableDatabase, ReadableTable, ReadableTableMetadata,
    Table, TableDefinition, TableHandle, WriteTransaction,
};

use super::record::{self, deadline_and_version};
use super::{Applied, Counts, Cursor, Due, Op, Store, Stored};
use crate::error::{OpenError, StoreError};
use crate::job::{DeadJob, Job};

const META: TableDefinition<'_, &str, u64> = TableDefinition::new("meta");
const JOBS: TableDefinition<'_, &str, &[u8]> = TableDefinition::new("jobs");
const DUE: TableDefinition<'_, (u64, &str), ()> = TableDefinition::new("due");
const DEAD: TableDefinition<'_, &str, &[u8]> = TableDefinition::new("dead");
const KINDS: TableDefinition<'_, &str, u64> = TableDefinition::new("kinds");

/// The format this version writes and reads.
const FORMAT: u64 = 1;

/// The jobs in one redb file: crash-safe commits (a torn write leaves the last commit), one
/// writer, readers that never wait for it.
pub struct RedbStore {
    /// `None` once closed.
    db: RwLock<Option<Database>>,
    /// The last version given to a job (the commit thread's alone; a lock for `Sync`).
    version: Mutex<u64>,
}

impl RedbStore {
    /// Opens the store in the file at `path`, making it if there is no such file (or it is
    /// empty). A file that is not a store of this crate, a damaged one, or one open elsewhere is
    /// refused with a typed error and left as it is.
    pub fn open(path: impl AsRef<Path>) -> Result<RedbStore, OpenError> {
        let path = path.as_ref();
        if path.metadata().is_ok_and(|m| m.len() > 0) {
            probe(path)?;
        }
        // redb trusts a file it wrote, and a debug build of it panics on some damage where a
        // release build returns `Corrupted`: both become `OpenError::Corrupt`.
        let db = guarded(|| Database::create(path))
            .map_err(|why| OpenError::Corrupt(why.to_string()))?
            .map_err(open_error)?;
        let version =
            guarded(|| prepare(&db)).map_err(|why| OpenError::Corrupt(why.to_string()))??;
        Ok(RedbStore {
            db: RwLock::new(Some(db)),
            version: Mutex::new(version),
        })
    }

    /// Runs `f` on the open database, a panic in it (redb's, on a damaged page) turned into
    /// [`StoreError::Corrupt`].
    fn with_db<T>(
        &self,
        f: impl FnOnce(&Database) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let db = self.db.read();
        let db = db.as_ref().ok_or(StoreError::Closed)?;
        guarded(|| f(db))?
    }
}

/// Reads an existing file without writing to it, and refuses it if it is not a store of this
/// crate: the writable open that follows would write redb's header even to another program's
/// database. (A file that needs a repair after a crash cannot be read so: the writable open
/// repairs it, and `prepare` then looks.)
fn probe(path: &Path) -> Result<(), OpenError> {
    let db = match guarded(|| redb::ReadOnlyDatabase::open(path)) {
        Err(why) => return Err(OpenError::Corrupt(why.to_string())),
        Ok(Err(e @ (DatabaseError::Storage(_) | DatabaseError::UpgradeRequired(_)))) => {
            return Err(open_error(e));
        }
        Ok(Err(DatabaseError::DatabaseAlreadyOpen)) => return Err(OpenError::Locked),
        Ok(Err(_)) => return Ok(()),
        Ok(Ok(db)) => db,
    };
    let tables = guarded(|| -> Result<Vec<String>, StoreError> {
        let tx = db.begin_read().map_err(fail)?;
        let names = tx.list_tables().map_err(fail)?;
        Ok(names.map(|t| t.name().to_owned()).collect())
    })
    .map_err(OpenError::from)?
    .map_err(OpenError::from)?;
    if !tables.is_empty() && !tables.iter().any(|t| t == META.name()) {
        return Err(foreign(&tables));
    }
    Ok(())
}

fn foreign(tables: &[String]) -> OpenError {
    OpenError::Foreign(format!(
        "a redb database with other tables ({})",
        tables.join(", ")
    ))
}

/// Runs `f`, turning a panic into the error it carries.
fn guarded<T>(f: impl FnOnce() -> T) -> Result<T, StoreError> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|p| {
        let why = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "the store's engine panicked".to_owned());
        StoreError::Corrupt(why)
    })
}

fn open_error(e: DatabaseError) -> OpenError {
    match e {
        DatabaseError::DatabaseAlreadyOpen | DatabaseError::LockProtocolMismatch => {
            OpenError::Locked
        }
        DatabaseError::UpgradeRequired(v) => {
            OpenError::Foreign(format!("a redb file of an older format ({v})"))
        }
        DatabaseError::Storage(redb::StorageError::Io(e))
            if e.kind() == std::io::ErrorKind::InvalidData =>
        {
            OpenError::Foreign(e.to_string())
        }
        DatabaseError::Storage(e) => OpenError::from(storage(e)),
        other => OpenError::Corrupt(other.to_string()),
    }
}

/// Checks the file's format (making the tables of a new one) and reads the last version.
fn prepare(db: &Database) -> Result<u64, OpenError> {
    let tx = db.begin_write().map_err(|e| OpenError::from(fail(e)))?;
    let tables: Vec<String> = tx
        .list_tables()
        .map_err(|e| OpenError::from(fail(e)))?
        .map(|t| t.name().to_owned())
        .collect();
    let version = {
        let mut meta = tx.open_table(META).map_err(|e| OpenError::from(fail(e)))?;
        let format = meta.get("format").map_err(|e| OpenError::from(fail(e)))?;
        match format.map(|f| f.value()) {
            Some(FORMAT) => {}
            Some(found) => {
                return Err(OpenError::NewerFormat {
                    found,
                    supported: FORMAT,
                });
            }
            None if tables.is_empty() => {
                meta.insert("format", FORMAT)
                    .map_err(|e| OpenError::from(fail(e)))?;
                meta.insert("version", 0)
                    .map_err(|e| OpenError::from(fail(e)))?;
            }
            None => return Err(foreign(&tables)),
        }
        let version = meta.get("version").map_err(|e| OpenError::from(fail(e)))?;
        version.map_or(0, |v| v.value())
    };
    for table in [JOBS, DEAD] {
        tx.open_table(table).map_err(|e| OpenError::from(fail(e)))?;
    }
    tx.open_table(DUE).map_err(|e| OpenError::from(fail(e)))?;
    tx.open_table(KINDS).map_err(|e| OpenError::from(fail(e)))?;
    tx.commit().map_err(|e| OpenError::from(fail(e)))?;
    Ok(version)
}

/// A redb storage error as ours.
fn storage(e: redb::StorageError) -> StoreError {
    match e {
        redb::StorageError::Io(e) => StoreError::Io(e),
        redb::StorageError::Corrupted(why) => StoreError::Corrupt(why),
        redb::StorageError::PreviousIo | redb::StorageError::DatabaseClosed => StoreError::Closed,
        other => StoreError::Other(Box::new(other)),
    }
}

/// Any redb error as ours.
fn fail(e: impl Into<redb::Error>) -> StoreError {
    match e.into() {
        redb::Error::Io(e) => StoreError::Io(e),
        redb::Error::Corrupted(why) => StoreError::Corrupt(why),
        redb::Error::PreviousIo | redb::Error::DatabaseClosed => StoreError::Closed,
        other => StoreError::Other(Box::new(other)),
    }
}

/// The tables of one write transaction, and the changes to the kinds' counts it makes.
struct Writer<'t> {
    jobs: Table<'t, &'static str, &'static [u8]>,
    due: Table<'t, (u64, &'static str), ()>,
    dead: Table<'t, &'static str, &'static [u8]>,
    kinds: BTreeMap<String, i64>,
    version: u64,
}

impl Writer<'_> {
    /// Adds `delta` to the count of `kind` (written once per transaction).
    fn count_kind(&mut self, kind: &str, delta: i64) {
        match self.kinds.get_mut(kind) {
            Some(n) => *n += delta,
            None => {
                self.kinds.insert(kind.to_owned(), delta);
            }
        }
    }

    fn next_version(&mut self) -> u64 {
        self.version += 1;
        self.version
    }

    fn apply(&mut self, op: &Op) -> Result<Applied, StoreError> {
        Ok(match op {
            Op::Insert { jobs, upsert } => self.insert(jobs, *upsert)?,
            Op::Cancel { key } => Applied::Removed(self.remove(key, None)?.map(|(_, v, _)| v)),
            Op::Complete { key, version, .. } => {
                Applied::Removed(self.remove(key, Some(*version))?.map(|(_, v, _)| v))
            }
            Op::Reschedule { key, deadline } => Applied::Moved(self.mv(key, None, *deadline, 0)?),
            Op::Retry {
                key,
                version,
                deadline,
                ..
            } => Applied::Moved(self.mv(key, Some(*version), *deadline, 1)?),
            Op::Bury {
                key,
                version,
                reason,
                at,
                failed,
                ..
            } => match self.remove(key, Some(*version))? {
                None => Applied::Removed(None),
                Some((record, v, _)) => {
                    let (_, _, attempts) = record::header(&record);
                    let attempts = attempts.saturating_add(u32::from(*failed));
                    let record = record::restamp(&record, record::header(&record).0, v, attempts);
                    let dead = record::encode_dead(&record, reason, *at);
                    self.dead
                        .insert(key.as_str(), dead.as_slice())
                        .map_err(fail)?;
                    Applied::Removed(Some(v))
                }
            },
            Op::Requeue { key, deadline } => self.requeue(key, *deadline)?,
            Op::DropDead { key } => {
                Applied::Removed(self.dead.remove(key.as_str()).map_err(fail)?.map(|_| 0))
            }
        })
    }

    fn insert(&mut self, jobs: &[Job], upsert: bool) -> Result<Applied, StoreError> {
        if !upsert {
            // (A key twice in one batch: only batches of more than one job can have that.)
            let mut seen = std::collections::HashSet::with_capacity(jobs.len());
            let many = jobs.len() > 1;
            for job in jobs {
                if (many && !seen.insert(job.key.as_str()))
                    || self.jobs.get(job.key.as_str()).map_err(fail)?.is_some()
                {
                    return Ok(Applied::Duplicate(job.key.clone()));
                }
            }
        }
        let mut versions = Vec::with_capacity(jobs.len());
        for job in jobs {
            if upsert {
                self.remove(&job.key, None)?;
            }
            let version = self.next_version();
            let bytes = record::encode(job, version);
            self.jobs
                .insert(job.key.as_str(), bytes.as_slice())
                .map_err(fail)?;
            self.due
                .insert((job.deadline, job.key.as_str()), ())
                .map_err(fail)?;
            self.count_kind(&job.kind, 1);
            versions.push(version);
        }
        Ok(Applied::Inserted(versions))
    }

    /// The record of the waiting job `key`, copied out.
    fn record(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let record = self.jobs.get(key).map_err(fail)?;
        Ok(record.map(|r| r.value().to_vec()))
    }

    /// Removes the waiting job `key` (only if it has `version`, if given): its record, version
    /// and kind.
    fn remove(
        &mut self,
        key: &str,
        version: Option<u64>,
    ) -> Result<Option<(Vec<u8>, u64, String)>, StoreError> {
        let Some(record) = self.record(key)? else {
            return Ok(None);
        };
        let (job, v) = record::decode(key, &record)?;
        if version.is_some_and(|want| want != v) {
            return Ok(None);
        }
        self.jobs.remove(key).map_err(fail)?;
        self.due.remove((job.deadline, key)).map_err(fail)?;
        self.count_kind(&job.kind, -1);
        Ok(Some((record, v, job.kind)))
    }

    /// Moves the waiting job `key` (only if it has `version`, if given) to `deadline`, adding
    /// `failed` to its attempts: its new version.
    fn mv(
        &mut self,
        key: &str,
        version: Option<u64>,
        deadline: u64,
        failed: u32,
    ) -> Result<Option<u64>, StoreError> {
        let Some(record) = self.record(key)? else {
            return Ok(None);
        };
        let (old, v) = deadline_and_version(key, &record)?;
        if version.is_some_and(|want| want != v) {
            return Ok(None);
        }
        let attempts = record::header(&record).2.saturating_add(failed);
        let new = self.next_version();
        let record = record::restamp(&record, deadline, new, attempts);
        self.due.remove((old, key)).map_err(fail)?;
        self.due.insert((deadline, key), ()).map_err(fail)?;
        self.jobs.insert(key, record.as_slice()).map_err(fail)?;
        Ok(Some(new))
    }

    fn requeue(&mut self, key: &str, deadline: u64) -> Result<Applied, StoreError> {
        if self.jobs.get(key).map_err(fail)?.is_some() {
            return Ok(Applied::Duplicate(key.to_owned()));
        }
        let Some(dead) = self
            .dead
            .get(key)
            .map_err(fail)?
            .map(|r| r.value().to_vec())
        else {
            return Ok(Applied::Moved(None));
        };
        let (dead_job, job_record) = record::decode_dead(key, &dead)?;
        let version = self.next_version();
        let record = record::restamp(job_record, deadline, version, 0);
        self.dead.remove(key).map_err(fail)?;
        self.jobs.insert(key, record.as_slice()).map_err(fail)?;
        self.due.insert((deadline, key), ()).map_err(fail)?;
        self.count_kind(&dead_job.job.kind, 1);
        Ok(Applied::Moved(Some(version)))
    }
}

impl RedbStore {
    fn write(&self, db: &Database, ops: &[Op], durable: bool) -> Result<Vec<Applied>, StoreError> {
        let mut version = self.version.lock();
        let mut tx = db.begin_write().map_err(fail)?;
        let durability = if durable {
            Durability::Immediate
        } else {
            Durability::None
        };
        tx.set_durability(durability)
            .map_err(|e| StoreError::Other(Box::new(e)))?;
        tx.set_quick_repair(true);
        let (applied, last) = write_in(&tx, ops, *version)?;
        tx.commit().map_err(fail)?;
        *version = last;
        Ok(applied)
    }
}

/// Applies `ops` in `tx`, versions counting on from `version`: what each did, and the last
/// version given.
fn write_in(
    tx: &WriteTransaction,
    ops: &[Op],
    version: u64,
) -> Result<(Vec<Applied>, u64), StoreError> {
    let mut w = Writer {
        jobs: tx.open_table(JOBS).map_err(fail)?,
        due: tx.open_table(DUE).map_err(fail)?,
        dead: tx.open_table(DEAD).map_err(fail)?,
        kinds: BTreeMap::new(),
        version,
    };
    let applied = ops
        .iter()
        .map(|op| w.apply(op))
        .collect::<Result<Vec<_>, _>>()?;
    if w.version != version {
        tx.open_table(META)
            .map_err(fail)?
            .insert("version", w.version)
            .map_err(fail)?;
    }
    let mut kinds = tx.open_table(KINDS).map_err(fail)?;
    for (kind, delta) in std::mem::take(&mut w.kinds) {
        if delta == 0 {
            continue;
        }
        let now = kinds
            .get(kind.as_str())
            .map_err(fail)?
            .map_or(0, |n| n.value());
        let next = now.saturating_add_signed(delta);
        if next == 0 {
            kinds.remove(kind.as_str()).map_err(fail)?;
        } else {
            kinds.insert(kind.as_str(), next).map_err(fail)?;
        }
    }
    Ok((applied, w.version))
}

impl Store for RedbStore {
    fn apply(&self, ops: &[Op], durable: bool) -> Result<Vec<Applied>, StoreError> {
        self.with_db(|db| self.write(db, ops, durable))
    }

    fn due(
        &self,
        _shard: u32,
        after: Option<&Cursor>,
        until: u64,
        limit: usize,
    ) -> Result<Due, StoreError> {
        self.with_db(|db| {
            let tx = db.begin_read().map_err(fail)?;
            let due = tx.open_table(DUE).map_err(fail)?;
            let jobs = tx.open_table(JOBS).map_err(fail)?;
            let range = match after {
                None => due.range::<(u64, &str)>(..),
                Some(Cursor::At(d, k)) => due.range::<(u64, &str)>((*d, k.as_str())..),
                Some(Cursor::Through(d)) => match d.checked_add(1) {
                    Some(next) => due.range::<(u64, &str)>((next, "")..),
                    None => return Ok(Due::default()),
                },
            }
            .map_err(fail)?;
            let mut out = Due::default();
            for entry in range {
                let (index, _) = entry.map_err(fail)?;
                let (deadline, key) = index.value();
                if matches!(after, Some(Cursor::At(d, k)) if (*d, k.as_str()) == (deadline, key)) {
                    continue; // the cursor's own job was read already
                }
                if deadline > until {
                    out.next = Some(deadline);
                    break;
                }
                if out.jobs.len() == limit {
                    break;
                }
                let record = jobs.get(key).map_err(fail)?.ok_or_else(|| {
                    StoreError::Corrupt(format!("job {key:?} is in the index only"))
                })?;
                let (job, version) = record::decode(key, record.value())?;
                out.jobs.push(Stored { job, version });
            }
            Ok(out)
        })
    }

    fn get(&self, key: &str) -> Result<Option<Stored>, StoreError> {
        self.with_db(|db| {
            let tx = db.begin_read().map_err(fail)?;
            let jobs = tx.open_table(JOBS).map_err(fail)?;
            let Some(record) = jobs.get(key).map_err(fail)? else {
                return Ok(None);
            };
            let (job, version) = record::decode(key, record.value())?;
            Ok(Some(Stored { job, version }))
        })
    }

    fn dead(&self, after: Option<&str>, limit: usize) -> Result<Vec<DeadJob>, StoreError> {
        self.with_db(|db| {
            let tx = db.begin_read().map_err(fail)?;
            let dead = tx.open_table(DEAD).map_err(fail)?;
            let range = match after {
                None => dead.range::<&str>(..),
                Some(k) => {
                    dead.range::<&str>((std::ops::Bound::Excluded(k), std::ops::Bound::Unbounded))
                }
            }
            .map_err(fail)?;
            let mut out = Vec::new();
            for entry in range.take(limit) {
                let (k, v) = entry.map_err(fail)?;
                out.push(record::decode_dead(k.value(), v.value())?.0);
            }
            Ok(out)
        })
    }

    fn counts(&self) -> Result<Counts, StoreError> {
        self.with_db(|db| {
            let tx = db.begin_read().map_err(fail)?;
            let waiting = tx.open_table(JOBS).map_err(fail)?.len().map_err(fail)?;
            let dead = tx.open_table(DEAD).map_err(fail)?.len().map_err(fail)?;
            Ok(Counts { waiting, dead })
        })
    }

    fn close(&self) {
        self.release();
    }

    fn kinds(&self) -> Result<Vec<(String, u64)>, StoreError> {
        self.with_db(|db| {
            let tx = db.begin_read().map_err(fail)?;
            let kinds = tx.open_table(KINDS).map_err(fail)?;
            let mut out = Vec::new();
            for entry in kinds.iter().map_err(fail)? {
                let (k, n) = entry.map_err(fail)?;
                out.push((k.value().to_owned(), n.value()));
            }
            Ok(out)
        })
    }
}

impl RedbStore {
    /// Lets the file go (see [`Store::close`]).
    fn release(&self) {
        if let Some(db) = self.db.write().take() {
            let _ = guarded(|| db.close());
        }
    }
}

impl std::fmt::Debug for RedbStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedbStore")
            .field("version", &*self.version.lock())
            .finish_non_exhaustive()
    }
}
