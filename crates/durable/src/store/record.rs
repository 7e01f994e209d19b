//! How a job and a dead job are laid out as bytes in the embedded store (little-endian, format 1).
//!
//! | record | layout |
//! |---|---|
//! | job | deadline `u64` · version `u64` · attempts `u32` · kind length `u8` · kind · payload |
//! | dead job | died `u64` · reason length `u32` · reason · job record |
//!
//! The key is not in the record: it is the table's key.

use crate::error::StoreError;
use crate::job::{DeadJob, Job, wall_time};

/// Bytes before the kind in a job record.
const HEAD: usize = 8 + 8 + 4 + 1;

/// A job's record, at `version`.
pub(crate) fn encode(job: &Job, version: u64) -> Vec<u8> {
    let kind = job.kind.as_bytes();
    let mut out = Vec::with_capacity(HEAD + kind.len() + job.payload.len());
    out.extend_from_slice(&job.deadline.to_le_bytes());
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&job.attempts.to_le_bytes());
    // Kinds are checked to at most 64 bytes before they reach the store.
    out.push(u8::try_from(kind.len()).unwrap_or(u8::MAX));
    out.extend_from_slice(kind);
    out.extend_from_slice(&job.payload);
    out
}

/// The job `key` and its version, from its record.
pub(crate) fn decode(key: &str, bytes: &[u8]) -> Result<(Job, u64), StoreError> {
    let bad = || StoreError::Corrupt(format!("the record of job {key:?} is malformed"));
    if bytes.len() < HEAD {
        return Err(bad());
    }
    let (deadline, version, attempts) = header(bytes);
    let kind_len = usize::from(bytes[20]);
    let kind = bytes.get(HEAD..HEAD + kind_len).ok_or_else(bad)?;
    let kind = std::str::from_utf8(kind).map_err(|_| bad())?;
    let job = Job {
        key: key.to_owned(),
        kind: kind.to_owned(),
        deadline,
        payload: bytes[HEAD + kind_len..].to_vec(),
        attempts,
    };
    Ok((job, version))
}

/// Deadline, version and attempts of a record at least `HEAD` bytes long.
pub(crate) fn header(bytes: &[u8]) -> (u64, u64, u32) {
    let u64_at = |i: usize| u64::from_le_bytes(bytes[i..i + 8].try_into().expect("8 bytes"));
    let attempts = u32::from_le_bytes(bytes[16..20].try_into().expect("4 bytes"));
    (u64_at(0), u64_at(8), attempts)
}

/// Deadline and version of a record, checked.
pub(crate) fn deadline_and_version(key: &str, bytes: &[u8]) -> Result<(u64, u64), StoreError> {
    if bytes.len() < HEAD {
        return Err(StoreError::Corrupt(format!(
            "the record of job {key:?} is malformed"
        )));
    }
    let (deadline, version, _) = header(bytes);
    Ok((deadline, version))
}

/// A dead job's record: the job's own record, after when and why it died.
pub(crate) fn encode_dead(job_record: &[u8], reason: &str, died: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(12 + reason.len() + job_record.len());
    out.extend_from_slice(&died.to_le_bytes());
    out.extend_from_slice(
        &u32::try_from(reason.len())
            .unwrap_or(u32::MAX)
            .to_le_bytes(),
    );
    out.extend_from_slice(reason.as_bytes());
    out.extend_from_slice(job_record);
    out
}

/// The dead job `key`, and its job record (to requeue it).
pub(crate) fn decode_dead<'a>(
    key: &str,
    bytes: &'a [u8],
) -> Result<(DeadJob, &'a [u8]), StoreError> {
    let bad = || StoreError::Corrupt(format!("the dead record of job {key:?} is malformed"));
    if bytes.len() < 12 {
        return Err(bad());
    }
    let died = u64::from_le_bytes(bytes[0..8].try_into().expect("8 bytes"));
    let len = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes")) as usize;
    let reason = bytes.get(12..12 + len).ok_or_else(bad)?;
    let reason = String::from_utf8_lossy(reason).into_owned();
    let record = &bytes[12 + len..];
    let (job, _) = decode(key, record)?;
    let dead = DeadJob {
        job,
        reason,
        died: wall_time(died),
    };
    Ok((dead, record))
}

/// `record` with its deadline, version and attempts replaced.
pub(crate) fn restamp(record: &[u8], deadline: u64, version: u64, attempts: u32) -> Vec<u8> {
    let mut out = record.to_vec();
    out[0..8].copy_from_slice(&deadline.to_le_bytes());
    out[8..16].copy_from_slice(&version.to_le_bytes());
    out[16..20].copy_from_slice(&attempts.to_le_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn records_round_trip() {
        let job = Job::new("k-1", "mail", UNIX_EPOCH + Duration::from_nanos(123))
            .with_payload(vec![1, 2, 3]);
        let bytes = encode(&job, 7);
        assert_eq!(bytes.len(), HEAD + 4 + 3);
        assert_eq!(decode("k-1", &bytes).unwrap(), (job.clone(), 7));
        let moved = restamp(&bytes, 999, 8, 2);
        let (again, version) = decode("k-1", &moved).unwrap();
        assert_eq!((again.deadline, version, again.attempts), (999, 8, 2));
        let dead = encode_dead(&moved, "boom", 5);
        let (d, record) = decode_dead("k-1", &dead).unwrap();
        assert_eq!(
            (d.reason.as_str(), d.job.attempts, record),
            ("boom", 2, &moved[..])
        );
    }

    #[test]
    fn malformed_records_are_corrupt_not_panics() {
        let job = encode(&Job::new("k", "kind", UNIX_EPOCH), 1);
        for cut in 0..job.len() - 1 {
            let r = decode("k", &job[..cut]);
            // Cut inside the payload a record still decodes (the payload is the rest).
            assert!(cut >= HEAD + 4 || r.is_err(), "cut at {cut}");
        }
        assert!(decode_dead("k", &[0; 11]).is_err());
        assert!(decode_dead("k", &[0, 0, 0, 0, 0, 0, 0, 0, 255, 255, 255, 255]).is_err());
    }
}
