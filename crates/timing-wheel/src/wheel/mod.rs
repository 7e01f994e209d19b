//! The hierarchical timing wheel: levels of buckets, one delay queue of buckets, a slab of entries.
//!
//! # The scheme
//!
//! This is scheme 7 of Varghese & Lauck, "Hashed and Hierarchical Timing Wheels: Data Structures
//! for the Efficient Implementation of a Timer Facility" (SOSP 1987; IEEE/ACM ToN 1997), in the
//! shape Kafka's `TimingWheel` gave it: overflow levels are created lazily, and a bucket that gets
//! its first entry of a round is offered to one delay queue shared by all levels above level 1,
//! keyed by the bucket and prioritised by the bucket's expiration. Levels 0 and 1, where a stepped
//! drive pops nearly all of its buckets, keep a bitmap of their non-empty buckets instead (as
//! tokio and Linux do for every level): level 0's buckets expire before level 1's, and those
//! before any queued one. Advancing pops due buckets from the bitmaps, then from the queue, so
//! the wheel touches only buckets that hold something, and never polls empty ones.
//!
//! Time is a `u64` in the caller's unit and is turned into ticks at the edge. Level 0 has
//! `wheel_size` buckets one tick wide; a level-`k+1` bucket is as wide as all of level `k`. For
//! `tick = 1` (say one millisecond) and `wheel_size = 64`:
//!
//! | level | bucket width  | level span    | span at 1 ms |
//! |------:|---------------|---------------|--------------|
//! | 0     | 1             | 2^6           | 64 ms        |
//! | 1     | 2^6           | 2^12          | 4.1 s        |
//! | 2     | 2^12          | 2^18          | 4.4 min      |
//! | 3     | 2^18          | 2^24          | 4.7 h        |
//! | 4     | 2^24          | 2^30          | 12.4 days    |
//! | 5     | 2^30          | 2^36          | 2.2 years    |
//! | 6     | 2^36          | 2^42          | 139 years    |
//! | 7..9  | 2^42 .. 2^54  | 2^48 .. 2^60  |              |
//! | 10    | 2^60          | 2^64 (16 used)| all of `u64` |
//!
//! Levels are aligned, as in tokio's driver: an entry lives on the level of the highest base-`2^bits`
//! digit in which its due tick differs from the clock (`time::level_for`). So every level below it
//! is in the clock's current bucket of the level above, no deadline ever needs a level past the
//! 64th bit, and no arithmetic can overflow, up to and including deadlines at `u64::MAX`.
//!
//! # Rounding: never early
//!
//! A deadline `d` is due at tick `ceil(d / tick)`, and that tick is reached when
//! `now >= ceil(d / tick) * tick` (saturating at `u64::MAX`). Kafka rounds a bucket's expiration
//! down and can hand a task out up to a tick early; this wheel rounds up, so an entry is handed out
//! by the first `advance` whose `now` reaches its deadline rounded up to the tick: never early, and
//! less than one tick late.
//!
//! # Advancing
//!
//! `advance(now)` pops due buckets in expiration order. A bucket's entries lie in its own range of
//! ticks, and no other bucket holds entries in that range (level `k`'s buckets all end before level
//! `k+1`'s begin). So the entries of a popped bucket that are due by `now` are handed out at once,
//! sorted by due tick; the others (only possible in the last bucket popped, the one `now` falls
//! inside) are re-inserted into finer levels. An entry therefore cascades at most once per level,
//! and a big jump of the clock does not walk level 0 one tick at a time.
//!
//! # Invariants
//!
//! | what | rule |
//! |------|------|
//! | location | an occupied entry's location is `locate(entry.due)` for the current clock `cur`: the overdue list if `due <= cur`, else bucket `level_for(cur, due)` |
//! | records | each occupied entry has exactly one live record, naming its slot, in its location at index `entry.pos`; the overdue list holds nothing else; a bucket may also hold stale records (any other: its slot's entry is vacant, located elsewhere, or at another index): `stale` of them, each marked in the bucket's bitmap (one bit per record, nothing marked past the last record), plus those of its unsettled cancels, with `stale < COMPACT_MIN` or `stale <= STALE_PER_LIVE * live` once settled |
//! | unsettled | at most `SETTLE_BATCH` cancels of bucketed entries wait for their bucket bookkeeping (`Unsettled`); every advance and reschedule settles them first |
//! | queue | a bucket above level 1 is in the queue iff it holds a record, keyed by its first tick; every bucket in the queue starts after `cur` and holds a live record, or a record of an unsettled cancel (a settled bucket left with only stale records is emptied) |
//! | occupancy | a level-0 or level-1 bucket's bit is set iff it holds a record; every such bucket starts after `cur`, within `cur`'s bucket of the level above (its digit is past the clock's) |
//! | order | outside `advance`, every level-`k` bucket expires before every level-`k+1` one |
//!
//! Those are checked by `TimingWheel::check` in the unit tests after every operation.

use std::cmp::Reverse;
use std::hash::{BuildHasherDefault, Hasher};
use std::mem;

use priority_queue::PriorityQueue;

mod advance;
mod buckets;
#[cfg(test)]
mod check;
#[cfg(test)]
mod tests;

use crate::error::{AlreadyDue, ConfigError};
use crate::occupancy::Occupancy;
use crate::slab::Slab;
use crate::time::{due_tick, reached_tick, tick_to_time};

/// The largest `wheel_size` accepted by [`TimingWheel::new`].
pub const MAX_WHEEL_SIZE: usize = 1 << 16;

/// A bucket keeps at most this many record slots of capacity across rounds; larger buffers are
/// given back to the allocator when the bucket is flushed, and shrunk when cancels leave one past
/// four times its records, so a burst does not pin memory.
const RETAINED_CAPACITY: usize = 512;

/// How many records ahead a bucket flush asks the CPU to load slab entries: enough to cover a
/// memory latency with the work of the records in between.
const PREFETCH_AHEAD: usize = 16;

/// Location id of the overdue list; bucket ids are `level << bits | slot`, far below this.
const OVERDUE: u32 = u32::MAX;

/// Levels whose non-empty buckets are kept in bitmaps rather than in the delay queue: 0 and 1.
/// A stepped drive pops a level-1 bucket about once per `wheel_size` level-0 ones, and each
/// went through the queue's hashing and sifting, twice (push and pop); W1 (1M timers, 1 ms..24 h)
/// ran about 9% faster with level 1 here too (`cargo run --release -p wheel-benches --bin
/// wheelbench -- --only W1`, at 64 buckets per level).
const BITMAP_LEVELS: usize = 2;

/// Identifies one entry of a [`TimingWheel`]. Carries a generation, so an id whose entry fired or
/// was cancelled never reaches a later entry that reuses the same slot.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct TimerId {
    slot: u32,
    generation: u32,
}

impl TimerId {
    /// The id as one `u64`, for storing in an atomic.
    pub fn into_raw(self) -> u64 {
        (u64::from(self.generation) << 32) | u64::from(self.slot)
    }

    /// Rebuilds an id from [`into_raw`](Self::into_raw). Any `u64` is accepted: a value that was
    /// never an id of this wheel is simply stale (refused by `cancel` and `reschedule`).
    pub fn from_raw(raw: u64) -> TimerId {
        TimerId {
            slot: raw as u32,
            generation: (raw >> 32) as u32,
        }
    }
}

/// A bucket: the slots of the entries it holds, in no particular order, and records left by
/// entries that were cancelled or rescheduled out of it since (stale ones).
///
/// A cancel does not take its record out: that meant a store into the middle of a bucket that
/// may hold millions of records, and a second entry to fix up (the one moved into the hole), two
/// cache misses on top of the entry's own, 70% of a purgatory workload's time (W2). When it is
/// settled (see [`Unsettled`]) its record is marked stale in the bucket's bitmap and counted
/// instead; a bucket whose stale records are more than `STALE_PER_LIVE` times its live ones (and
/// at least `COMPACT_MIN`) is compacted in one sweep, and one whose live count falls to zero is
/// emptied. So a settled bucket holds at most `max(STALE_PER_LIVE * live, COMPACT_MIN - 1)` stale
/// records, and a stale record costs only memory until then.
///
/// The mark is what lets a sweep pass a stale record without reading its slot's entry: a
/// compaction, and the flush of a due bucket, visit the slab only for live records (a compaction
/// only for those it moves). Without it, telling a stale record from a live one took the entry's
/// line, a cache miss per record at a million timers: 30% of W2 purgatory's time went to
/// compactions that mostly read entries of records they then dropped.
///
/// The marks are bits beside the records rather than a value written over the record: a bucket
/// that takes a busy second of 30 s timeouts holds over a million records, and the records its
/// cancels hit lie anywhere in the last few megabytes of them, past the core's cache, while
/// their bits lie in a few hundred kilobytes that stay in it. Marking records in place (with a
/// sentinel slot) cost a cache miss per settled cancel. The bits, for one bit more per record,
/// took W2 purgatory's loop from a median of 40.95 to 39.3 ns per operation in six pairs of runs
/// and from 40.1 to 39.1 in five more (pinned probes, old and new binaries alternating, nothing
/// else running); W9's window ran 4% faster in one set of five pairs and no faster in another
/// of four (2026-11-27).
#[derive(Debug, Default)]
struct Bucket {
    recs: Vec<u32>,
    /// One bit per record, 64 records a word (`ceil(recs.len() / 64)` words), set for the
    /// settled stale records.
    marks: Vec<u64>,
    /// How many of `recs` are stale (marked).
    stale: u32,
}

impl Bucket {
    /// Records of entries still in this bucket.
    #[inline]
    fn live(&self) -> usize {
        self.recs.len() - self.stale as usize
    }

    /// Appends a live record of `slot` (whose entry the caller points at index `recs.len()`).
    #[inline]
    fn push(&mut self, slot: u32) {
        if self.recs.len().is_multiple_of(64) {
            self.marks.push(0);
        }
        self.recs.push(slot);
    }

    /// True if the record at `i` is marked stale.
    #[inline]
    fn is_marked(&self, i: usize) -> bool {
        is_marked(&self.marks, i)
    }

    /// Lets go of the live record at `pos`: taken out if it is the last one, else marked.
    #[inline]
    fn let_go(&mut self, pos: usize) {
        if pos + 1 == self.recs.len() {
            self.recs.pop(); // a live record: its bit is clear already
            if pos.is_multiple_of(64) {
                self.marks.pop();
            }
        } else {
            self.marks[pos / 64] |= 1 << (pos % 64);
            self.stale += 1;
        }
    }

    /// Empties the bucket, keeping its buffers.
    #[inline]
    fn clear(&mut self) {
        self.recs.clear();
        self.marks.clear();
        self.stale = 0;
    }
}

/// True if bit `i` of `marks` (a [`Bucket`]'s) is set.
#[inline]
fn is_marked(marks: &[u64], i: usize) -> bool {
    marks.get(i / 64).is_some_and(|w| w & (1 << (i % 64)) != 0)
}

/// A cancel of an entry that was in a bucket, whose bookkeeping in that bucket (count its record
/// stale or take it out, empty or compact the bucket) waits for the next settle: at the next
/// advance or reschedule, or once `SETTLE_BATCH` of them wait. A cancel then only vacates its slab
/// entry and writes this down: at a million timers the entry is a cache miss, and the bucket
/// work that depended on the missed line made each cancel long enough that the CPU could not
/// overlap the misses of the cancels that follow (W2 purgatory, W9).
#[derive(Clone, Copy, Debug)]
struct Unsettled {
    /// The entry's due tick (its bucket is located from it, by the clock, which does not move
    /// before the settle).
    due: u64,
    /// The index of its record in that bucket.
    pos: u32,
}

/// Cancels waiting for their bucket bookkeeping, at most (see [`Unsettled`]).
const SETTLE_BATCH: usize = 64;

/// A bucket is compacted once it holds at least this many stale records, and more than
/// [`STALE_PER_LIVE`] times its live ones: small buckets are not swept for a handful of records.
const COMPACT_MIN: u32 = 16;

/// How many stale records per live one a bucket may hold before it is compacted. Each compaction
/// moves the live records and writes their entries' `pos`, a cache miss each at a million
/// timers, so a bucket that mostly loses its records to cancels (a purgatory's 30 s timeouts) is
/// swept less often the more it may keep: 2 rather than 1 took W2 purgatory from 39.5-41.0 to
/// 37.4-38.9 ns per operation, for 46.9 MiB of peak memory instead of 44.3 (the compacting heap:
/// 56.0); 3 was no faster. A compaction sweeps at most one and a half times as many records as
/// the cancels and reschedules that called for it.
const STALE_PER_LIVE: usize = 2;

/// A record of the overdue list, which also keeps the due tick it is ordered by (see `reschedule`).
#[derive(Clone, Copy, Debug)]
struct OverdueRec {
    due: u64,
    slot: u32,
}

/// An item found due during `advance`, already out of the slab, waiting to be handed out in
/// `due` order. Taking items out while the entry's cache line is loaded anyway saves a second
/// random access per item.
#[derive(Debug)]
struct Due<T> {
    due: u64,
    item: T,
}

/// Bucket ids are small dense integers: a multiplicative hash spreads them at no cost.
#[derive(Default)]
struct BucketIdHasher(u64);

impl Hasher for BucketIdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.0 = u64::from(n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

type BucketQueue = PriorityQueue<u32, Reverse<u64>, BuildHasherDefault<BucketIdHasher>>;

/// A hierarchical timing wheel holding items of type `T` until their deadlines.
///
/// A plain data structure: no threads, no clock reads, no locks. Time is a `u64` in whatever unit
/// the caller uses; the caller moves it forward with [`advance`](Self::advance).
///
/// Items still pending when the wheel is dropped are dropped with it, so items that borrow must
/// outlive the wheel (a wheel of `&str` is dropped before the strings it points into).
///
/// ```
/// use tickwheel_wheel::TimingWheel;
///
/// // One tick = 1 ms, 64 buckets per level, clock starts at 0.
/// let mut wheel = TimingWheel::new(1, 64, 0).unwrap();
/// let soon = wheel.insert(5, "soon").unwrap();
/// wheel.insert(3_600_000, "in an hour").unwrap();
/// wheel.insert(7, "later").unwrap();
/// assert_eq!(wheel.cancel(soon), Some("soon"));
///
/// let mut fired = Vec::new();
/// wheel.advance(10, |item| fired.push(item));
/// assert_eq!(fired, ["later"]);
/// // The hour-long entry sits in a coarse bucket: the wheel wakes at that bucket's start, never
/// // after the deadline, and then hands the entry out exactly on time.
/// let wake = wheel.next_expiration().unwrap();
/// assert!(10 < wake && wake <= 3_600_000);
/// wheel.advance(3_599_999, |item| fired.push(item));
/// assert_eq!(fired, ["later"]);
/// wheel.advance(3_600_000, |item| fired.push(item));
/// assert_eq!(fired, ["later", "in an hour"]);
/// ```
#[derive(Debug)]
pub struct TimingWheel<T> {
    /// Caller units per tick, >= 1.
    tick: u64,
    /// log2(wheel_size).
    bits: u32,
    /// The caller-unit time of the last `advance` (or `start`).
    now: u64,
    /// The tick `now` has reached (`reached_tick(now)`); every level's clock derives from it.
    cur: u64,
    /// Levels created so far; level `k` exists once some deadline needed it.
    levels: Vec<Box<[Bucket]>>,
    /// The one delay queue of non-empty buckets above level 1, earliest expiration (in ticks)
    /// first.
    queue: BucketQueue,
    /// The non-empty buckets of the lowest `BITMAP_LEVELS` levels (the queue holds the rest).
    bitmaps: [Occupancy; BITMAP_LEVELS],
    /// Entries rescheduled to a deadline that has already passed: handed out first at the next
    /// `advance`.
    overdue: Vec<OverdueRec>,
    slab: Slab<T>,
    len: usize,
    /// Scratch for `advance`, kept to reuse its allocation.
    due: Vec<Due<T>>,
    /// Cancels of bucketed entries whose bucket bookkeeping is not done yet (at most
    /// `SETTLE_BATCH`; see [`Unsettled`]).
    unsettled: Vec<Unsettled>,
}

impl<T> TimingWheel<T> {
    /// Creates an empty wheel whose clock reads `start`.
    ///
    /// `tick` is the width of a level-0 bucket in the caller's time unit (at least 1);
    /// `wheel_size` is the number of buckets per level, a power of two from 2 to
    /// [`MAX_WHEEL_SIZE`]. No level is allocated until an entry needs it.
    ///
    /// ```
    /// use tickwheel_wheel::{ConfigError, TimingWheel};
    ///
    /// assert!(TimingWheel::<()>::new(1, 64, 0).is_ok());
    /// assert_eq!(TimingWheel::<()>::new(0, 64, 0).unwrap_err(), ConfigError::ZeroTick);
    /// assert_eq!(
    ///     TimingWheel::<()>::new(1, 60, 0).unwrap_err(),
    ///     ConfigError::WheelSizeNotPowerOfTwo { size: 60 }
    /// );
    /// ```
    pub fn new(tick: u64, wheel_size: usize, start: u64) -> Result<Self, ConfigError> {
        if tick == 0 {
            return Err(ConfigError::ZeroTick);
        }
        if wheel_size < 2 {
            return Err(ConfigError::WheelSizeTooSmall { size: wheel_size });
        }
        if !wheel_size.is_power_of_two() {
            return Err(ConfigError::WheelSizeNotPowerOfTwo { size: wheel_size });
        }
        if wheel_size > MAX_WHEEL_SIZE {
            return Err(ConfigError::WheelSizeTooLarge {
                size: wheel_size,
                max: MAX_WHEEL_SIZE,
            });
        }
        Ok(TimingWheel {
            tick,
            bits: wheel_size.trailing_zeros(),
            now: start,
            cur: reached_tick(start, tick),
            levels: Vec::new(),
            queue: BucketQueue::default(),
            bitmaps: std::array::from_fn(|_| Occupancy::new(wheel_size)),
            overdue: Vec::new(),
            slab: Slab::new(),
            len: 0,
            due: Vec::new(),
            unsettled: Vec::new(),
        })
    }

    /// Adds `item`, due at `deadline`. O(1).
    ///
    /// Refuses the item when `deadline <= now()`: it is already due. The error hands it back
    /// ([`AlreadyDue::into_item`]), and the caller runs it at once (this is what the timer
    /// service does).
    ///
    /// Why [`reschedule`](Self::reschedule) into the past is taken instead: an entry being
    /// rescheduled has an id its owner keeps, and handing its item back would end the entry
    /// under that owner's feet; so it stays an entry, due, and the next `advance` hands it out
    /// (in deadline order with the others). A new item has no id yet, so the cheaper answer is to
    /// give it back at once, with no trip through the wheel. One rule underneath: nothing is
    /// ever handed out before its deadline, and nothing already due waits for a tick.
    ///
    /// # Panics
    ///
    /// Only if more than `u32::MAX - 1` entries are pending at once, which needs over 128 GiB.
    pub fn insert(&mut self, deadline: u64, item: T) -> Result<TimerId, AlreadyDue<T>> {
        if deadline <= self.now {
            return Err(AlreadyDue {
                item,
                deadline,
                now: self.now,
            });
        }
        let due = due_tick(deadline, self.tick);
        let (slot, generation) = self.slab.insert(due, item);
        self.place_in_bucket(slot, due);
        self.len += 1;
        Ok(TimerId { slot, generation })
    }

    /// Removes the entry and returns its item: `Some` if it was pending, `None` if it already
    /// fired, was cancelled, or the id is stale. O(1) amortized; the item is dropped or returned at
    /// once, not when its bucket comes round. The bucket's own bookkeeping (its record counted
    /// stale, the bucket emptied or compacted) is batched: done at the next advance or
    /// reschedule, or once 64 cancels wait for it.
    #[inline]
    pub fn cancel(&mut self, id: TimerId) -> Option<T> {
        let (item, due, pos) = self.slab.take(id.slot, id.generation)?;
        self.len -= 1;
        // After the removal: a compaction the bookkeeping starts must see the entry vacant.
        if due <= self.cur {
            self.forget(OVERDUE, pos);
        } else {
            self.unsettled.push(Unsettled { due, pos });
            if self.unsettled.len() >= SETTLE_BATCH {
                self.settle();
            }
        }
        Some(item)
    }

    /// Gives a pending entry a new deadline. O(1) amortized.
    ///
    /// Returns `true` if the entry was pending and now has the new deadline, `false` if it already
    /// fired or was cancelled (or the id is stale). A deadline `<= now()` makes the entry due: the
    /// next `advance`, even one that does not move the clock, hands it out (unlike
    /// [`insert`](Self::insert), which hands such an item back: see there why).
    pub fn reschedule(&mut self, id: TimerId, deadline: u64) -> bool {
        if self.slab.get(id.slot, id.generation).is_none() {
            return false;
        }
        // Its `forget` may compact a bucket an unsettled cancel points into.
        self.settle();
        let Some(entry) = self.slab.get(id.slot, id.generation) else {
            return false;
        };
        let (from, pos) = (self.locate(entry.due()), entry.pos());
        let due = due_tick(deadline, self.tick);
        if deadline <= self.now {
            // Already due. Its rounded deadline may still lie beyond `cur` (later in the current
            // tick), so the stored tick is clamped to `cur`, which keeps `locate` pointing at the
            // overdue list, and the true tick travels in the overdue record to keep the order.
            self.slab.set_due(id.slot, due.min(self.cur));
            self.push_overdue(id.slot, due);
            self.forget(from, pos);
            return true;
        }
        self.slab.set_due(id.slot, due);
        if self.locate(due) != from {
            // The new record first: the old one is stale from here on (the entry points away).
            self.place_in_bucket(id.slot, due);
            self.forget(from, pos);
        }
        true
    }

    /// The pending item of `id`, if it is pending.
    pub fn get(&self, id: TimerId) -> Option<&T> {
        self.slab.get(id.slot, id.generation).and_then(|e| e.item())
    }

    /// The pending item of `id`, mutably, if it is pending.
    pub fn get_mut(&mut self, id: TimerId) -> Option<&mut T> {
        self.slab
            .get_mut(id.slot, id.generation)
            .and_then(|e| e.item_mut())
    }

    /// `None` iff the wheel is empty; otherwise the earliest bucket expiration, in the caller's
    /// unit (or `now()` if an entry was rescheduled into the past). It is never after the earliest
    /// pending deadline rounded up to the tick, so a caller may sleep until then and miss nothing.
    ///
    /// It can be earlier: a bucket whose entries were all cancelled since the last advance (or
    /// reschedule) still counts until the next one, which hands nothing out of it and settles
    /// every such bucket. So cancels cost a timer thread at most one needless wake-up per
    /// advance, as Kafka's lazily cancelled buckets do; in exchange a cancel touches only its
    /// entry, not its bucket (see [`cancel`](Self::cancel)).
    pub fn next_expiration(&self) -> Option<u64> {
        if self.len == 0 {
            return None;
        }
        if !self.overdue.is_empty() {
            return Some(self.now);
        }
        let start = match self.first_in_bitmaps() {
            Some((_, start)) => start,
            None => self.queue.peek().map(|(_, &Reverse(start))| start)?,
        };
        Some(tick_to_time(start, self.tick))
    }

    /// The clock: the `start` given to [`new`](Self::new) or the latest `now` passed to
    /// [`advance`](Self::advance), whichever is later.
    pub fn now(&self) -> u64 {
        self.now
    }

    /// The tick, in the caller's unit.
    pub fn tick(&self) -> u64 {
        self.tick
    }

    /// Number of buckets per level.
    pub fn wheel_size(&self) -> usize {
        1 << self.bits
    }

    /// Number of pending items.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when no item is pending.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Removes and returns every pending item, earliest deadline first (for shutdown). Ids of the
    /// removed entries go stale; the clock stays where it is.
    pub fn drain(&mut self) -> Vec<T> {
        // An overdue entry's stored tick is clamped to the clock (see `reschedule` and `defer`):
        // its own tick is in its overdue record, and the overdue list holds every overdue entry.
        let cur = self.cur;
        let mut order: Vec<(u64, u32)> = self
            .slab
            .occupied()
            .map(|slot| (self.slab.at(slot).due(), slot))
            .filter(|&(due, _)| due > cur)
            .chain(self.overdue.iter().map(|r| (r.due, r.slot)))
            .collect();
        debug_assert_eq!(order.len(), self.len, "every pending entry, once");
        order.sort_unstable();
        let items = order
            .into_iter()
            .map(|(_, slot)| self.slab.remove(slot))
            .collect();
        for level in &mut self.levels {
            level.iter_mut().for_each(|b| *b = Bucket::default());
        }
        self.overdue = Vec::new();
        self.unsettled.clear();
        self.queue.clear();
        self.bitmaps.iter_mut().for_each(Occupancy::clear_all);
        self.len = 0;
        items
    }

    /// Bytes of heap memory the wheel holds: arena, buckets and queue (capacities, not lengths).
    /// Items' own heap allocations are not included.
    pub fn heap_bytes(&self) -> usize {
        let buckets: usize = self
            .levels
            .iter()
            .map(|l| {
                mem::size_of_val::<[Bucket]>(l)
                    + l.iter()
                        .map(|b| {
                            b.recs.capacity() * mem::size_of::<u32>()
                                + b.marks.capacity() * mem::size_of::<u64>()
                        })
                        .sum::<usize>()
            })
            .sum();
        self.slab.heap_bytes()
            + buckets
            + self.overdue.capacity() * mem::size_of::<OverdueRec>()
            + self.queue.capacity()
                * (mem::size_of::<(u32, Reverse<u64>)>() + 2 * mem::size_of::<usize>())
            + self
                .bitmaps
                .iter()
                .map(Occupancy::heap_bytes)
                .sum::<usize>()
            + self.due.capacity() * mem::size_of::<Due<T>>()
            + self.unsettled.capacity() * mem::size_of::<Unsettled>()
    }
}
