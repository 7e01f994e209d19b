//! A flat hashed wheel with round counters: Varghese–Lauck scheme 6, Netty's `HashedWheelTimer`.
//!
//! One ring of `2^bits` slots (512 by default), one tick (1 ms) each. An entry due at tick `d`
//! lives in slot `d & mask` with a count of the visits of that slot it must sit out first. Every
//! tick visits its slot and walks the whole list: entries with no rounds left are due now and are
//! handed out, the others have their count decremented. So the wheel cannot skip ticks (except
//! when it is completely empty), and an entry `r` ticks out is touched `r / 2^bits` times.
//!
//! ## Ground rules
//!
//! | field | occupied node | vacant node |
//! |-------|---------------|-------------|
//! | `item` | `Some(item)` | `None` |
//! | `due` | the tick it is due at, `> cur` | unused |
//! | `rounds` | visits of its slot before the one at `due`: `(due - cur - 1) >> bits` | unused |
//! | `prev` / `next` | neighbours in its slot's list (`NIL` at the ends) | `next`: next vacant node |
//! | `generation` | the one in its [`FlatId`] | bumped when vacated: old ids go stale |
//!
//! Lists are intrusive: threaded through the slab by index, so insert and cancel are O(1) and
//! allocate nothing once the slab has grown.

use crate::{Cancel, TimerQueue};

const NIL: u32 = u32::MAX;

/// Slots in the ring by default (Netty's default `ticksPerWheel`).
pub const DEFAULT_SLOTS: usize = 512;

/// Handle of a [`FlatWheel`] entry; stale once the entry fired or was cancelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FlatId {
    index: u32,
    generation: u32,
}

#[derive(Debug)]
struct Node<T> {
    item: Option<T>,
    due: u64,
    rounds: u64,
    prev: u32,
    next: u32,
    generation: u32,
}

/// The flat hashed wheel: a ring of slot lists threaded through one slab.
#[derive(Debug)]
pub struct FlatWheel<T> {
    /// First node of each slot's list, or `NIL`.
    heads: Box<[u32]>,
    mask: u64,
    bits: u32,
    /// The last tick visited (= the clock, in ticks of 1 ms).
    cur: u64,
    nodes: Vec<Node<T>>,
    free: u32,
    len: usize,
}

impl<T> FlatWheel<T> {
    /// An empty wheel of `slots` slots (a power of two), clock at 0.
    ///
    /// # Panics
    ///
    /// If `slots` is not a power of two.
    pub fn with_slots(slots: usize) -> Self {
        assert!(slots.is_power_of_two(), "slots must be a power of two");
        FlatWheel {
            heads: vec![NIL; slots].into_boxed_slice(),
            mask: slots as u64 - 1,
            bits: slots.trailing_zeros(),
            cur: 0,
            nodes: Vec::new(),
            free: NIL,
            len: 0,
        }
    }

    /// Adds `item` due at tick `due`; `None` (item handed back) if `due` is not after the clock.
    pub fn try_insert(&mut self, due: u64, item: T) -> Result<FlatId, T> {
        if due <= self.cur {
            return Err(item);
        }
        let slot = (due & self.mask) as usize;
        let rounds = (due - self.cur - 1) >> self.bits;
        let head = self.heads[slot];
        let index = if self.free != NIL {
            let index = self.free;
            let n = &mut self.nodes[index as usize];
            debug_assert!(n.item.is_none(), "free list names an occupied node");
            self.free = n.next;
            n.item = Some(item);
            n.due = due;
            n.rounds = rounds;
            n.prev = NIL;
            n.next = head;
            index
        } else {
            let index = u32::try_from(self.nodes.len())
                .ok()
                .filter(|&i| i != NIL)
                .expect("flat wheel capacity overflow");
            self.nodes.push(Node {
                item: Some(item),
                due,
                rounds,
                prev: NIL,
                next: head,
                generation: 0,
            });
            index
        };
        if head != NIL {
            self.nodes[head as usize].prev = index;
        }
        self.heads[slot] = index;
        self.len += 1;
        Ok(FlatId {
            index,
            generation: self.nodes[index as usize].generation,
        })
    }

    /// Removes a pending entry and returns its item; `None` if the id is stale.
    pub fn remove(&mut self, id: FlatId) -> Option<T> {
        let n = self.nodes.get(id.index as usize)?;
        if n.generation != id.generation || n.item.is_none() {
            return None;
        }
        Some(self.unlink_and_free(id.index))
    }

    /// Visits every tick up to `now`, handing out the due entries.
    pub fn advance_to(&mut self, now: u64, mut f: impl FnMut(T)) {
        while self.cur < now {
            if self.len == 0 {
                // Nothing pending: no slot can hold anything, so the ticks need no visit.
                self.cur = now;
                break;
            }
            self.cur += 1;
            self.visit(self.cur, &mut f);
        }
    }

    /// Walks the list of tick `t`'s slot: hands out entries with no rounds left, counts the rest down.
    fn visit(&mut self, t: u64, f: &mut impl FnMut(T)) {
        let mut i = self.heads[(t & self.mask) as usize];
        while i != NIL {
            let n = &mut self.nodes[i as usize];
            let next = n.next;
            if n.rounds == 0 {
                debug_assert_eq!(n.due, t, "an entry with no rounds left is due at this tick");
                let item = self.unlink_and_free(i);
                f(item);
            } else {
                n.rounds -= 1;
            }
            i = next;
        }
    }

    /// Unlinks occupied node `i` from its slot list, vacates it and returns its item.
    fn unlink_and_free(&mut self, i: u32) -> T {
        let n = &mut self.nodes[i as usize];
        let (prev, next, slot) = (n.prev, n.next, (n.due & self.mask) as usize);
        let item = n.item.take().expect("unlink of a vacant node");
        n.generation = n.generation.wrapping_add(1);
        n.next = self.free;
        self.free = i;
        if prev == NIL {
            self.heads[slot] = next;
        } else {
            self.nodes[prev as usize].next = next;
        }
        if next != NIL {
            self.nodes[next as usize].prev = prev;
        }
        self.len -= 1;
        item
    }
}

impl<T> TimerQueue<T> for FlatWheel<T> {
    type Id = FlatId;
    const NAME: &'static str = "flat wheel (512)";

    fn new() -> Self {
        FlatWheel::with_slots(DEFAULT_SLOTS)
    }

    #[inline]
    fn insert(&mut self, deadline: u64, item: T) -> FlatId {
        match self.try_insert(deadline, item) {
            Ok(id) => id,
            Err(_) => panic!("deadline {deadline} is not after now {}", self.cur),
        }
    }

    fn advance(&mut self, now: u64, f: impl FnMut(T)) {
        self.advance_to(now, f);
    }

    fn len(&self) -> usize {
        self.len
    }
}

impl<T> Cancel<T> for FlatWheel<T> {
    #[inline]
    fn cancel(&mut self, id: FlatId) -> bool {
        self.remove(id).is_some()
    }
}
