//! The `priority-queue` crate's `PriorityQueue` with real removal on cancel.
//!
//! Items live inside the queue's index map, keyed by a sequence number (hashed with a
//! multiplicative hash, as a production user of small integer keys would), so cancel removes the
//! entry and its heap position at once.

use std::borrow::Borrow;
use std::cmp::Reverse;
use std::hash::{BuildHasherDefault, Hash, Hasher};

use priority_queue::PriorityQueue;

use crate::{Cancel, TimerQueue};

/// A multiplicative hash for sequence-number keys (the only thing hashed here is a `u64`).
#[derive(Default, Clone, Copy, Debug)]
pub struct SeqHasher(u64);

impl Hasher for SeqHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// A queue entry: the item and the sequence number it is known by. Equality and hash use only
/// the sequence number, so the queue can be searched by it.
#[derive(Debug)]
struct Keyed<T> {
    seq: u64,
    item: T,
}

impl<T> PartialEq for Keyed<T> {
    fn eq(&self, other: &Self) -> bool {
        self.seq == other.seq
    }
}

impl<T> Eq for Keyed<T> {}

impl<T> Hash for Keyed<T> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.seq.hash(state);
    }
}

impl<T> Borrow<u64> for Keyed<T> {
    fn borrow(&self) -> &u64 {
        &self.seq
    }
}

/// `PriorityQueue` of items by earliest deadline.
#[derive(Debug)]
pub struct Pq<T> {
    queue: PriorityQueue<Keyed<T>, Reverse<u64>, BuildHasherDefault<SeqHasher>>,
    next_seq: u64,
    now: u64,
}

impl<T> TimerQueue<T> for Pq<T> {
    type Id = u64;
    const NAME: &'static str = "priority-queue";

    fn new() -> Self {
        Pq {
            queue: PriorityQueue::with_default_hasher(),
            next_seq: 0,
            now: 0,
        }
    }

    #[inline]
    fn insert(&mut self, deadline: u64, item: T) -> u64 {
        assert!(
            deadline > self.now,
            "deadline {deadline} is not after now {}",
            self.now
        );
        let seq = self.next_seq;
        self.next_seq += 1;
        self.queue.push(Keyed { seq, item }, Reverse(deadline));
        seq
    }

    fn advance(&mut self, now: u64, mut f: impl FnMut(T)) {
        self.now = self.now.max(now);
        while let Some((_, &Reverse(deadline))) = self.queue.peek() {
            if deadline > self.now {
                break;
            }
            let (k, _) = self.queue.pop().expect("peeked");
            f(k.item);
        }
    }

    fn len(&self) -> usize {
        self.queue.len()
    }
}

impl<T> Cancel<T> for Pq<T> {
    #[inline]
    fn cancel(&mut self, id: u64) -> bool {
        self.queue.remove(&id).is_some()
    }
}
