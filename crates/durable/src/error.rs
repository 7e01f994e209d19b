//! The errors: [`JobError`] for an operation on jobs, [`Refused`] for one that hands its input
//! back, [`OpenError`] for opening a store, [`StoreError`] for a store's failure.

use std::error::Error;
use std::fmt;
use std::io;

/// Why an operation on jobs failed. Whatever the error, the operation changed nothing: a job
/// acknowledged before it is still there.
#[derive(Debug)]
#[non_exhaustive]
pub enum JobError {
    /// A key must have 1 to [`MAX_KEY_LEN`](crate::MAX_KEY_LEN) bytes, none of them NUL.
    BadKey {
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A kind must have 1 to [`MAX_KIND_LEN`](crate::MAX_KIND_LEN) bytes, none of them NUL.
    BadKind {
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The payload is larger than [`JobsBuilder::max_payload`](crate::JobsBuilder::max_payload).
    PayloadTooLarge {
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// No handler is registered for this kind: the job would never run.
    UnknownKind(String),
    /// A job with this key is waiting (or in the dead-letter set, for a requeue): use
    /// [`Jobs::upsert`](crate::Jobs::upsert) to replace it.
    Duplicate(String),
    /// The store failed (a full disk, a failed fsync, a corrupt page): nothing was changed.
    Store(StoreError),
    /// The jobs were closed.
    Closed,
    /// Called from the jobs' own commit thread: a handler run inline by an
    /// [`InlineExecutor`](tickwheel::InlineExecutor) as its job was armed, calling back into
    /// the jobs, would wait for itself. Give the timer an executor with threads.
    Reentrant,
}

impl fmt::Display for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JobError::BadKey { len, max } => {
                write!(
                    f,
                    "a key must have 1 to {max} bytes and no NUL (this one has {len})"
                )
            }
            JobError::BadKind { len, max } => {
                write!(
                    f,
                    "a kind must have 1 to {max} bytes and no NUL (this one has {len})"
                )
            }
            JobError::PayloadTooLarge { len, max } => {
                write!(
                    f,
                    "a payload may have at most {max} bytes (this one has {len})"
                )
            }
            JobError::UnknownKind(kind) => write!(f, "no handler is registered for kind {kind:?}"),
            JobError::Duplicate(key) => write!(f, "a job with key {key:?} exists already"),
            JobError::Store(e) => write!(f, "the store failed, nothing was changed: {e}"),
            JobError::Closed => f.write_str("the jobs are closed"),
            JobError::Reentrant => f.write_str(
                "called from the jobs' commit thread (a handler run inline as its job was armed)",
            ),
        }
    }
}

impl Error for JobError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            JobError::Store(e) => Some(e),
            _ => None,
        }
    }
}

impl From<StoreError> for JobError {
    fn from(e: StoreError) -> Self {
        JobError::Store(e)
    }
}

/// An operation refused its input, and hands it back: the job (or jobs) it was given, and why.
pub struct Refused<T> {
    /// Why it was refused.
    pub error: JobError,
    value: T,
}

impl<T> Refused<T> {
    pub(crate) fn new(error: JobError, value: T) -> Self {
        Refused { error, value }
    }

    /// The input, back.
    pub fn into_inner(self) -> T {
        self.value
    }

    pub(crate) fn map<U>(self, f: impl FnOnce(T) -> U) -> Refused<U> {
        Refused {
            error: self.error,
            value: f(self.value),
        }
    }
}

impl<T> fmt::Debug for Refused<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Refused")
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}

impl<T> fmt::Display for Refused<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.error, f)
    }
}

impl<T> Error for Refused<T> {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Some(&self.error)
    }
}

/// Why a store could not be opened. Nothing was written to the file.
#[derive(Debug)]
#[non_exhaustive]
pub enum OpenError {
    /// Another process (or another `Jobs` of this one) has the store open.
    Locked,
    /// The file exists and is not a store of this crate (another program's file, or another
    /// program's redb database).
    Foreign(String),
    /// The file is damaged.
    Corrupt(String),
    /// The store was written by a newer version of this crate, in a format this one cannot read.
    NewerFormat {
        /// The store's format.
        found: u64,
        /// The newest this version reads.
        supported: u64,
    },
    /// Jobs of these kinds are stored, and no handler is registered for them (with how many of
    /// each): register them, or open with
    /// [`keep_unknown_kinds`](crate::JobsBuilder::keep_unknown_kinds) to leave them stored and
    /// unrun.
    UnknownKinds(Vec<(String, u64)>),
    /// A setting is out of range (named here).
    Config(&'static str),
    /// The timer could not be built.
    Timer(tickwheel::BuildError),
    /// The file could not be read or written.
    Io(io::Error),
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpenError::Locked => f.write_str("the store is open in another process or handle"),
            OpenError::Foreign(why) => write!(f, "not a tickwheel-durable store: {why}"),
            OpenError::Corrupt(why) => write!(f, "the store is damaged: {why}"),
            OpenError::NewerFormat { found, supported } => write!(
                f,
                "the store has format {found}; this version reads formats up to {supported}"
            ),
            OpenError::UnknownKinds(kinds) => {
                f.write_str("jobs of kinds with no handler are stored:")?;
                for (kind, n) in kinds {
                    write!(f, " {kind:?} ({n})")?;
                }
                Ok(())
            }
            OpenError::Config(what) => write!(f, "invalid setting: {what}"),
            OpenError::Timer(e) => write!(f, "the timer could not be built: {e}"),
            OpenError::Io(e) => write!(f, "the store could not be read or written: {e}"),
        }
    }
}

impl Error for OpenError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            OpenError::Timer(e) => Some(e),
            OpenError::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<tickwheel::BuildError> for OpenError {
    fn from(e: tickwheel::BuildError) -> Self {
        OpenError::Timer(e)
    }
}

impl From<StoreError> for OpenError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Io(e) => OpenError::Io(e),
            StoreError::Corrupt(why) => OpenError::Corrupt(why),
            other => OpenError::Io(io::Error::other(other)),
        }
    }
}

/// A store's failure.
#[derive(Debug)]
#[non_exhaustive]
pub enum StoreError {
    /// Reading or writing failed (a full disk, a failed fsync).
    Io(io::Error),
    /// The store found damage.
    Corrupt(String),
    /// The store is closed, or failed before and must be reopened.
    Closed,
    /// Another failure of the store's engine.
    Other(Box<dyn Error + Send + Sync>),
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Io(e) => write!(f, "i/o error: {e}"),
            StoreError::Corrupt(why) => write!(f, "damaged: {why}"),
            StoreError::Closed => f.write_str("closed, or failed earlier: reopen it"),
            StoreError::Other(e) => write!(f, "{e}"),
        }
    }
}

impl Error for StoreError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            StoreError::Io(e) => Some(e),
            StoreError::Other(e) => Some(e.as_ref()),
            _ => None,
        }
    }
}
