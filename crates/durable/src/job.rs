//! [`Job`]: a delayed job as data (key, wall-clock deadline, kind, payload, attempts), the
//! limits a job must keep, and wall-clock time as the store keeps it.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::error::JobError;

/// The longest key, in bytes.
pub const MAX_KEY_LEN: usize = 512;

/// The longest kind name, in bytes.
pub const MAX_KIND_LEN: usize = 64;

/// The largest payload by default, in bytes (see
/// [`JobsBuilder::max_payload`](crate::JobsBuilder::max_payload)).
pub const DEFAULT_MAX_PAYLOAD: usize = 1 << 20;

/// A delayed job: which handler runs it (its kind), when (a wall-clock deadline), with what
/// (payload bytes), under a unique key.
///
/// The key is the job's identity and idempotency key: scheduling a second job under a key that is
/// waiting is refused ([`JobError::Duplicate`]) unless asked for as an
/// [`upsert`](crate::Jobs::upsert), and the handler can use it to make its side effects
/// idempotent (a job runs at least once across crashes).
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use tickwheel_durable::Job;
///
/// let job = Job::new("order-42", "cancel-unpaid", SystemTime::now() + Duration::from_secs(900))
///     .with_payload(b"{\"order\":42}".to_vec());
/// assert_eq!(job.key(), "order-42");
/// assert_eq!(job.attempts(), 0);
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Job {
    pub(crate) key: String,
    pub(crate) kind: String,
    /// Nanoseconds since the Unix epoch (see [`wall_ns`]).
    pub(crate) deadline: u64,
    pub(crate) payload: Vec<u8>,
    /// Failed attempts so far (0 for a new job).
    pub(crate) attempts: u32,
}

impl Job {
    /// A job of `kind` under `key`, due at `deadline` (a deadline that has passed is due at once).
    pub fn new(key: impl Into<String>, kind: impl Into<String>, deadline: SystemTime) -> Job {
        Job {
            key: key.into(),
            kind: kind.into(),
            deadline: wall_ns(deadline),
            payload: Vec::new(),
            attempts: 0,
        }
    }

    /// The job's payload: bytes the handler receives (an order id, a serialised command).
    pub fn with_payload(mut self, payload: impl Into<Vec<u8>>) -> Job {
        self.payload = payload.into();
        self
    }

    /// Its key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Its kind: the name of the handler that runs it.
    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// When it is due, on the wall clock (kept to the nanosecond, between the Unix epoch and
    /// about the year 2554; outside that range, the nearest end).
    pub fn deadline(&self) -> SystemTime {
        wall_time(self.deadline)
    }

    /// Its payload.
    pub fn payload(&self) -> &[u8] {
        &self.payload
    }

    /// Failed attempts recorded so far: 0 until a run of its handler fails.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// Checks the job against the limits: a typed error for an empty or oversized key or kind,
    /// or an oversized payload.
    pub(crate) fn check(&self, max_payload: usize) -> Result<(), JobError> {
        check_key(&self.key)?;
        if self.kind.is_empty() || self.kind.len() > MAX_KIND_LEN || self.kind.contains('\0') {
            return Err(JobError::BadKind {
                len: self.kind.len(),
                max: MAX_KIND_LEN,
            });
        }
        if self.payload.len() > max_payload {
            return Err(JobError::PayloadTooLarge {
                len: self.payload.len(),
                max: max_payload,
            });
        }
        Ok(())
    }
}

/// Checks a key: not empty, at most [`MAX_KEY_LEN`] bytes, no NUL (which PostgreSQL's `text`
/// cannot hold: one rule for every store).
pub(crate) fn check_key(key: &str) -> Result<(), JobError> {
    if key.is_empty() || key.len() > MAX_KEY_LEN || key.contains('\0') {
        return Err(JobError::BadKey {
            len: key.len(),
            max: MAX_KEY_LEN,
        });
    }
    Ok(())
}

impl fmt::Debug for Job {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Job")
            .field("key", &self.key)
            .field("kind", &self.kind)
            .field("deadline", &self.deadline())
            .field("payload_len", &self.payload.len())
            .field("attempts", &self.attempts)
            .finish()
    }
}

/// A job in the dead-letter set: it failed its last allowed attempt (or was skipped by the
/// misfire policy at open). List them with [`Jobs::dead_letters`](crate::Jobs::dead_letters),
/// then [`requeue`](crate::Jobs::requeue) or [`drop_dead`](crate::Jobs::drop_dead) them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeadJob {
    /// The job as it was when it died (its attempts included).
    pub job: Job,
    /// Why: the last error of its handler, or the misfire policy's reason.
    pub reason: String,
    /// When it died, on the wall clock.
    pub died: SystemTime,
}

/// Nanoseconds since the Unix epoch of `t`: 0 before it, `u64::MAX` past about 2554.
pub(crate) fn wall_ns(t: SystemTime) -> u64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => u64::try_from(d.as_nanos()).unwrap_or(u64::MAX),
        Err(_) => 0,
    }
}

/// The wall-clock time `ns` nanoseconds after the Unix epoch.
pub(crate) fn wall_time(ns: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_nanos(ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wall_time_round_trips_and_saturates() {
        // (time, its nanoseconds)
        let table = [
            (UNIX_EPOCH, 0),
            (UNIX_EPOCH + Duration::from_nanos(1), 1),
            (UNIX_EPOCH - Duration::from_secs(1), 0),
            (UNIX_EPOCH + Duration::from_nanos(u64::MAX), u64::MAX),
            (
                UNIX_EPOCH + Duration::from_nanos(u64::MAX) + Duration::from_secs(1),
                u64::MAX,
            ),
        ];
        for (t, ns) in table {
            assert_eq!(wall_ns(t), ns, "{t:?}");
        }
        let now = SystemTime::now();
        assert_eq!(wall_time(wall_ns(now)), now);
    }

    #[test]
    fn limits_give_typed_errors() {
        let at = SystemTime::now();
        let ok = Job::new("k", "kind", at);
        assert!(ok.check(8).is_ok());
        let long_key = "k".repeat(MAX_KEY_LEN + 1);
        // (job, the error it gets, as printed)
        let table = [
            (
                Job::new("", "kind", at),
                "a key must have 1 to 512 bytes and no NUL (this one has 0)",
            ),
            (
                Job::new(long_key, "kind", at),
                "a key must have 1 to 512 bytes and no NUL (this one has 513)",
            ),
            (
                Job::new("k", "", at),
                "a kind must have 1 to 64 bytes and no NUL (this one has 0)",
            ),
            (
                Job::new("k\0", "kind", at),
                "a key must have 1 to 512 bytes and no NUL (this one has 2)",
            ),
            (
                Job::new("k", "kind", at).with_payload(vec![0; 9]),
                "a payload may have at most 8 bytes (this one has 9)",
            ),
        ];
        for (job, err) in table {
            assert_eq!(job.check(8).unwrap_err().to_string(), err);
        }
    }
}
