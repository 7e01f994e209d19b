//! The [`Store`] trait: what the jobs need from the place they are kept (the truth, on disk),
//! and the one store this crate brings, [`RedbStore`] (one file).
//!
//! A store is used from two sides: one commit thread applies batches of [`Op`]s, each batch in
//! one transaction that commits as a whole (so concurrent schedules share one fsync); any thread
//! reads (the window's ordered range reads, `get`, counts). Reads see every batch committed
//! before they began.

#[cfg(feature = "postgres")]
mod pg;
mod record;
mod redb;

use std::sync::Arc;

use crate::error::StoreError;
use crate::job::{DeadJob, Job};

#[cfg(feature = "postgres")]
pub use self::pg::{PgOptions, PgStore};
pub use self::redb::RedbStore;

/// A job as stored, with its version: a number the store gives each write of a job (schedule,
/// reschedule, retry), greater than every number given before. The jobs' in-memory window keeps
/// the version it armed, so a late fire of an older write does nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stored {
    /// The job.
    pub job: Job,
    /// Its version.
    pub version: u64,
}

/// A change, applied by [`Store::apply`] in a batch. Deadlines are nanoseconds since the Unix
/// epoch.
#[derive(Clone, Debug)]
pub enum Op {
    /// Stores `jobs`, all or none: if one's key is stored already (or repeats in `jobs`) and
    /// `upsert` is false, none is ([`Applied::Duplicate`]); with `upsert`, each replaces the job
    /// of its key.
    Insert {
        /// The jobs.
        jobs: Vec<Job>,
        /// Replace jobs of the same keys.
        upsert: bool,
    },
    /// Removes the waiting job `key`.
    Cancel {
        /// Its key.
        key: String,
    },
    /// Moves the waiting job `key` to `deadline`.
    Reschedule {
        /// Its key.
        key: String,
        /// Its new deadline.
        deadline: u64,
    },
    /// Removes job `key` if it still has `version`: its handler succeeded. (These last three
    /// carry the lease the run was under: a store for many nodes applies them only while that
    /// lease holds, so a node that lost a shard cannot undo what its new holder does.)
    Complete {
        /// Its key.
        key: String,
        /// The version that ran.
        version: u64,
        /// The lease it ran under.
        lease: Lease,
    },
    /// Counts a failed attempt of job `key` if it still has `version`, and moves it to
    /// `deadline`.
    Retry {
        /// Its key.
        key: String,
        /// The version that ran.
        version: u64,
        /// When it runs again.
        deadline: u64,
        /// The lease it ran under.
        lease: Lease,
    },
    /// Moves job `key`, if it still has `version`, to the dead-letter set, saying why;
    /// `failed`: its run that just failed counts as an attempt.
    Bury {
        /// Its key.
        key: String,
        /// The version that ran (or was skipped).
        version: u64,
        /// Why.
        reason: String,
        /// When it died.
        at: u64,
        /// Count its failed run as an attempt.
        failed: bool,
        /// The lease it ran (or was skipped) under.
        lease: Lease,
    },
    /// Moves dead job `key` back among the waiting ones, due at `deadline`, its attempts reset.
    Requeue {
        /// Its key.
        key: String,
        /// When it runs.
        deadline: u64,
    },
    /// Removes dead job `key` for good.
    DropDead {
        /// Its key.
        key: String,
    },
}

/// What an [`Op`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Applied {
    /// The jobs of an `Insert` are stored, with these versions (in order).
    Inserted(Vec<u64>),
    /// An `Insert` stored nothing: this key is stored already (or repeats in it).
    Duplicate(String),
    /// A `Cancel`, `Complete`, `Bury` or `DropDead` removed the job of this version (`None`: no
    /// such job, or not of that version).
    Removed(Option<u64>),
    /// A `Reschedule`, `Retry` or `Requeue` gave the job this version (`None`: no such job, or
    /// not of that version; a `Requeue` whose key is waiting already).
    Moved(Option<u64>),
}

/// Jobs read in deadline order by [`Store::due`].
#[derive(Clone, Debug, Default)]
pub struct Due {
    /// The jobs, earliest first (ties in key order).
    pub jobs: Vec<Stored>,
    /// When fewer than the limit were read: the deadline of the first job past the range's end,
    /// if there is one.
    pub next: Option<u64>,
}

/// A place in deadline order: every job at or before it (deadline, then key) is read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cursor {
    /// Every job before `(deadline, key)`, and it.
    At(u64, String),
    /// Every job due at or before this deadline.
    Through(u64),
}

impl Cursor {
    /// True if a job at `deadline` with `key` is at or before this cursor.
    pub fn covers(&self, deadline: u64, key: &str) -> bool {
        match self {
            Cursor::At(d, k) => (deadline, key) <= (*d, k.as_str()),
            Cursor::Through(d) => deadline <= *d,
        }
    }
}

/// A shard held under an epoch: the token a run's outcome carries (see [`Op::Complete`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Lease {
    /// The shard.
    pub shard: u32,
    /// Which holding of it (a number that grows each time a node takes the shard).
    pub epoch: u64,
}

/// What a store tells the jobs of itself: which shards this node may fire, and changes another
/// node made to jobs of those shards.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// This node holds this lease from now on (until `Lost`): load the shard's jobs and fire
    /// them.
    Held(Lease),
    /// This node no longer holds `shard`: stop firing its jobs.
    Lost {
        /// The shard.
        shard: u32,
    },
    /// Another node stored job `key` of a shard this node holds, at `version`, due at
    /// `deadline` (wall ns), or removed it (`None`).
    Changed {
        /// Its shard.
        shard: u32,
        /// Its key.
        key: String,
        /// Its version.
        version: u64,
        /// Its deadline, or `None` if it was removed.
        deadline: Option<u64>,
    },
    /// Changes may have been missed (a lost connection): read every held shard again.
    Resync,
}

/// Where a store sends its [`Event`]s (from a thread of its own).
pub type Events = Arc<dyn Fn(Event) + Send + Sync>;

/// How many jobs a store holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Waiting for their deadline (or running).
    pub waiting: u64,
    /// In the dead-letter set.
    pub dead: u64,
}

/// Where the jobs are kept. Implemented by [`RedbStore`] (the default: one file); a store for
/// many nodes (PostgreSQL) implements it too.
///
/// Every method is total: a failure is a [`StoreError`], never a panic, and a failed `apply`
/// changed nothing.
pub trait Store: Send + Sync + 'static {
    /// Applies `ops` in one transaction and commits it, all or nothing; `durable`: the commit is
    /// on disk when this returns (else it is visible to reads at once, and on disk with the next
    /// durable commit). Returns what each op did, in order. With no ops and `durable`, it makes
    /// every earlier commit durable.
    fn apply(&self, ops: &[Op], durable: bool) -> Result<Vec<Applied>, StoreError>;

    /// The waiting jobs of `shard` after `after` (all of them if `None`), due at or before
    /// `until`, in deadline order, at most `limit` of them.
    fn due(
        &self,
        shard: u32,
        after: Option<&Cursor>,
        until: u64,
        limit: usize,
    ) -> Result<Due, StoreError>;

    /// The shard of job `key` (a store with one shard: 0).
    fn shard_of(&self, key: &str) -> u32 {
        let _ = key;
        0
    }

    /// Starts telling `events` which shards this node holds, and what other nodes change in
    /// them. A store for one node holds its one shard for ever: it says so once, here.
    fn watch(&self, events: Events) {
        events(Event::Held(Lease::default()));
    }

    /// Whether this node may still fire jobs under `lease` now, by its own clock, without a
    /// query: a node stops firing a shard before its lease can have passed to another node. A
    /// store for one node always may.
    fn holds(&self, lease: Lease) -> bool {
        let _ = lease;
        true
    }

    /// The waiting job `key`.
    fn get(&self, key: &str) -> Result<Option<Stored>, StoreError>;

    /// The dead jobs after key `after` (from the first if `None`), in key order, at most `limit`.
    fn dead(&self, after: Option<&str>, limit: usize) -> Result<Vec<DeadJob>, StoreError>;

    /// How many jobs are waiting, and how many dead.
    fn counts(&self) -> Result<Counts, StoreError>;

    /// The kinds of the waiting jobs, with how many of each.
    fn kinds(&self) -> Result<Vec<(String, u64)>, StoreError>;

    /// Whether [`complete_in`](Self::complete_in) runs handlers in transactions (a store that
    /// cannot is refused at open if such a handler is registered).
    #[cfg(feature = "postgres")]
    fn runs_sql_handlers(&self) -> bool {
        false
    }

    /// Runs `work` in a transaction that also completes job `key` at `version` under `lease` (as
    /// [`Op::Complete`] does), and commits both: `Ok(true)`. `Ok(false)`: the job was gone or the
    /// lease lost, nothing committed. `Err`: `work` failed, or the commit did (its text), nothing
    /// committed.
    #[cfg(feature = "postgres")]
    fn complete_in(
        &self,
        key: &str,
        version: u64,
        lease: Lease,
        work: &mut dyn FnMut(&mut postgres::Transaction<'_>) -> Result<(), crate::HandlerError>,
    ) -> Result<bool, crate::HandlerError> {
        let _ = (key, version, lease, work);
        Err("this store cannot run a handler in its transaction".into())
    }

    /// How far ahead jobs stored by other nodes are announced ([`Event::Changed`]), if this
    /// store has other nodes: the jobs' horizon must not be longer (checked at open), or a job
    /// stored elsewhere within this node's window would never reach it.
    fn announces_within(&self) -> Option<std::time::Duration> {
        None
    }

    /// Lets the store go (its file, its connections) once the jobs closed: every later call
    /// fails with [`StoreError::Closed`]. Waits for calls in progress.
    fn close(&self);
}
