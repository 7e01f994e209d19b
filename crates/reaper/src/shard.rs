//! What the tick thread drives: the [`Shard`] trait a timer implements once per adding thread,
//! and the [`Due`] items shards hand out.

use crate::Clock;
#[cfg(doc)]
use crate::{Reaper, barrier};

/// One of the wheels a tick thread drives: a timer keeps one per adding thread.
pub trait Shard: Send + Sync + 'static {
    /// What the shard hands out when it is due.
    type Item: Send + 'static;

    /// The clock time by which the tick thread must next [`collect`](Self::collect) this shard
    /// (`u64::MAX`: never). A shard that lowers it must call [`Reaper::wake_by`] afterwards; both
    /// the lowering and this read must be sequentially consistent (see the crate's ground rules).
    fn next_wake(&self) -> u64;

    /// Takes out everything due by `now` (a reading of `clock`), each with its deadline,
    /// appending to `due`, and sets `next_wake` again. A shard that must stamp something with
    /// the time reads `clock` itself, after it has seen what it stamps. Called by the tick
    /// thread, never with a lock of this crate held.
    fn collect(&self, clock: &dyn Clock, now: u64, due: &mut Vec<Due<Self::Item>>);

    /// Called after a round in which [`collect`](Self::collect) ran on this shard, once the tick
    /// thread has issued one [`barrier::heavy`] for the whole round: the heavy half of a
    /// handshake whose light half ([`barrier::light`]) is on the shard's add path. A shard whose
    /// `collect` raised `next_wake` looks here for what was added meanwhile. Default: nothing.
    fn settle(&self, now: u64) {
        let _ = now;
    }
}

/// An item a shard found due, with the deadline the tick thread orders hand-offs by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Due<T> {
    /// The item's deadline, in clock nanoseconds.
    pub deadline: u64,
    /// The item.
    pub item: T,
}
