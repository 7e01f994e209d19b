//! The entry arena: fixed-size chunks with a free list and generational ids.
//!
//! Entries live in chunks of `CHUNK` entries that never move once allocated (only the first chunk
//! grows, up to `CHUNK`), so growing the arena copies nothing, touches no memory twice and leaves
//! at most one partly used chunk of slack, where a single `Vec` would double and copy.
//!
//! The crate's `unsafe` code is here, in two places: a prefetch hint (see `prefetch`), which
//! measurably speeds up bucket flushes (about 10% on the long-range workload and 25% on the
//! short-range one, 1M timers, A/B on this machine); and the item cell of an entry, which is
//! initialised exactly while the entry is occupied. An `Option<T>` there would cost a word per
//! entry for an item without a niche, such as the `u64` records of the timer service: 32 bytes
//! an entry instead of 24, a third more memory for every flush, cascade and cancel to walk
//! through (W1 stepped, 1M timers: about 10% of its time, measured with 4- and 8-byte items).
//!
//! ## Ground rules
//!
//! | field   | occupied entry                         | vacant entry                      |
//! |---------|----------------------------------------|-----------------------------------|
//! | `generation` | odd: the generation handed out in its `TimerId` | even: the next occupant gets one more |
//! | `item`  | initialised: the item                  | uninitialised (moved out or never written) |
//! | `key`   | the due tick of the entry              | index of the next vacant entry    |
//! | `pos`   | index of the entry's live record in the list that holds it (set by the wheel) | unused |
//!
//! `generation` changes exactly when an entry is filled or vacated (so its parity says which it
//! is): a `TimerId` stays valid across reschedules and goes stale once its entry is gone, for
//! ever modulo `u32` wrap-around (after 2^31 more reuses of its slot it could match again). `pos` lets the wheel
//! tell an entry's live record from stale ones its slot left in buckets (a record is live only at
//! the index `pos` names) and take a record out of the overdue list in O(1).

#![allow(unsafe_code)]

use std::fmt;
use std::mem::MaybeUninit;

/// Marks the end of the free list.
const NIL: u32 = u32::MAX;

/// log2 of the entries per chunk: 4096 entries, 128 KiB for a boxed closure.
const CHUNK_BITS: u32 = 12;
const CHUNK: usize = 1 << CHUNK_BITS;
const CHUNK_MASK: u32 = (1 << CHUNK_BITS) - 1;

/// One slot of the arena: 24 bytes for a `u64` item, 32 for a `Box<dyn FnOnce() + Send>`.
/// `repr(C)` keeps the fields every visit reads (key, generation, pos) together at the front,
/// with the item after them. (A 24-byte entry still straddles two cache lines one time in four,
/// and one time in eight that splits those three fields.)
#[repr(C)]
pub(crate) struct Entry<T> {
    key: u64,
    generation: u32,
    pos: u32,
    item: MaybeUninit<T>,
}

impl<T> Entry<T> {
    /// True while the entry holds an item (see the module's ground rules).
    #[inline]
    pub(crate) fn is_occupied(&self) -> bool {
        self.generation & 1 == 1
    }

    /// Due tick of an occupied entry.
    #[inline]
    pub(crate) fn due(&self) -> u64 {
        debug_assert!(self.is_occupied(), "due() of a vacant entry");
        self.key
    }

    /// Where the entry's record is in the list that holds it.
    #[inline]
    pub(crate) fn pos(&self) -> u32 {
        self.pos
    }

    /// The item of an occupied entry.
    #[inline]
    pub(crate) fn item(&self) -> Option<&T> {
        if !self.is_occupied() {
            return None;
        }
        // SAFETY: an occupied entry's item is initialised (the module's ground rules).
        Some(unsafe { self.item.assume_init_ref() })
    }

    /// The item of an occupied entry, mutably.
    #[inline]
    pub(crate) fn item_mut(&mut self) -> Option<&mut T> {
        if !self.is_occupied() {
            return None;
        }
        // SAFETY: an occupied entry's item is initialised (the module's ground rules).
        Some(unsafe { self.item.assume_init_mut() })
    }

    /// Vacates an occupied entry: the item moves out, the generation goes even and the key
    /// becomes the free list's link `next`. Returns the item and the entry's due tick.
    #[inline]
    fn vacate(&mut self, next: u32) -> (T, u64) {
        assert!(self.is_occupied(), "vacate of a vacant entry");
        self.generation = self.generation.wrapping_add(1);
        let due = std::mem::replace(&mut self.key, u64::from(next));
        // SAFETY: the entry was occupied until the line above, so its item is initialised; it is
        // vacant now, so nothing reads or drops that item again before `fill` writes a new one.
        (unsafe { self.item.assume_init_read() }, due)
    }

    /// Fills a vacant entry with `item` due at `due`; returns its new (odd) generation.
    #[inline]
    fn fill(&mut self, due: u64, item: T) -> u32 {
        debug_assert!(!self.is_occupied(), "fill of an occupied entry");
        self.item.write(item);
        self.key = due;
        self.generation = self.generation.wrapping_add(1);
        self.generation
    }

    /// Drops the item of an occupied entry, vacating it first (so never twice).
    fn drop_item(&mut self) {
        if self.is_occupied() {
            self.generation = self.generation.wrapping_add(1);
            // SAFETY: the entry was occupied, so its item is initialised; it is vacant now, so
            // this is the item's only drop.
            unsafe { self.item.assume_init_drop() };
        }
    }
}

impl<T: fmt::Debug> fmt::Debug for Entry<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Entry")
            .field("key", &self.key)
            .field("generation", &self.generation)
            .field("pos", &self.pos)
            .field("item", &self.item())
            .finish()
    }
}

#[derive(Debug)]
pub(crate) struct Slab<T> {
    chunks: Vec<Vec<Entry<T>>>,
    /// Entries ever created: slots `0..len` exist.
    len: u32,
    free: u32,
}

impl<T> Slab<T> {
    pub(crate) fn new() -> Self {
        Slab {
            chunks: Vec::new(),
            len: 0,
            free: NIL,
        }
    }

    /// Stores `item` due at `due`; returns `(slot, generation)`. The caller records the entry in
    /// a list and sets its [`pos`](Self::set_pos).
    ///
    /// # Panics
    ///
    /// If more than `u32::MAX - 1` entries are live at once (over 128 GiB of entries), like `Vec`'s
    /// capacity overflow.
    #[inline]
    pub(crate) fn insert(&mut self, due: u64, item: T) -> (u32, u32) {
        if self.free != NIL {
            let slot = self.free;
            let e = &mut self.chunks[(slot >> CHUNK_BITS) as usize][(slot & CHUNK_MASK) as usize];
            self.free = e.key as u32;
            (slot, e.fill(due, item))
        } else {
            let slot = self.len;
            assert!(
                slot != NIL,
                "timing wheel capacity overflow: more than u32::MAX - 1 pending entries"
            );
            if self.chunks.last().is_none_or(|c| c.len() == CHUNK) {
                // The first chunk grows as a Vec does (small wheels stay small); later ones are
                // allocated whole and never move.
                let cap = if self.chunks.is_empty() { 0 } else { CHUNK };
                self.chunks.push(Vec::with_capacity(cap));
            }
            let chunk = self
                .chunks
                .last_mut()
                .expect("a chunk with room was just ensured");
            chunk.push(Entry {
                key: due,
                generation: 1,
                pos: 0,
                item: MaybeUninit::new(item),
            });
            self.len += 1;
            (slot, 1)
        }
    }

    /// The occupied entry at `slot` if `generation` matches: the lookup behind every `TimerId`.
    #[inline]
    pub(crate) fn get(&self, slot: u32, generation: u32) -> Option<&Entry<T>> {
        self.chunks
            .get((slot >> CHUNK_BITS) as usize)
            .and_then(|c| c.get((slot & CHUNK_MASK) as usize))
            .filter(|e| e.generation == generation && e.is_occupied())
    }

    /// As [`get`](Self::get), mutably.
    #[inline]
    pub(crate) fn get_mut(&mut self, slot: u32, generation: u32) -> Option<&mut Entry<T>> {
        self.chunks
            .get_mut((slot >> CHUNK_BITS) as usize)
            .and_then(|c| c.get_mut((slot & CHUNK_MASK) as usize))
            .filter(|e| e.generation == generation && e.is_occupied())
    }

    /// The entry at `slot`, occupied or not. Records name slots that exist.
    #[inline]
    pub(crate) fn at(&self, slot: u32) -> &Entry<T> {
        self.entry(slot)
    }

    /// Hints the CPU to start loading the entry at `slot` (if it exists), so that a loop over
    /// records can overlap the cache misses of the entries it will visit next.
    #[inline]
    pub(crate) fn prefetch(&self, slot: u32) {
        #[cfg(target_arch = "x86_64")]
        if let Some(e) = self
            .chunks
            .get((slot >> CHUNK_BITS) as usize)
            .and_then(|c| c.get((slot & CHUNK_MASK) as usize))
        {
            use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
            // SAFETY: `_mm_prefetch` is unsafe only for its `sse` target feature, which every
            // x86_64 CPU has (it is in the x86_64 baseline). A prefetch never faults and has no
            // effect on memory, whatever the address; this one is a valid entry anyway.
            unsafe { _mm_prefetch::<_MM_HINT_T0>((e as *const Entry<T>).cast::<i8>()) };
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = slot;
    }

    /// Gives an occupied entry a new due tick.
    #[inline]
    pub(crate) fn set_due(&mut self, slot: u32, due: u64) {
        let e = self.entry_mut(slot);
        debug_assert!(e.is_occupied(), "set_due on a vacant entry");
        e.key = due;
    }

    /// Records where the entry's record now is in the list that holds it.
    #[inline]
    pub(crate) fn set_pos(&mut self, slot: u32, pos: u32) {
        self.entry_mut(slot).pos = pos;
    }

    /// Vacates the entry `(slot, generation)` names, if it is occupied, and returns its item, due
    /// tick and `pos`: a cancel's whole visit to the entry, one lookup. `None` (nothing changed)
    /// for a vacant entry or another generation.
    #[inline]
    pub(crate) fn take(&mut self, slot: u32, generation: u32) -> Option<(T, u64, u32)> {
        let free = self.free;
        let e = self
            .chunks
            .get_mut((slot >> CHUNK_BITS) as usize)?
            .get_mut((slot & CHUNK_MASK) as usize)?;
        if e.generation != generation || !e.is_occupied() {
            return None;
        }
        let (item, due) = e.vacate(free);
        self.free = slot;
        Some((item, due, e.pos))
    }

    /// Vacates an occupied `slot` and returns its item. Its id goes stale.
    #[inline]
    pub(crate) fn remove(&mut self, slot: u32) -> T {
        let free = self.free;
        let (item, _) = self.entry_mut(slot).vacate(free);
        self.free = slot;
        item
    }

    /// Slots of all occupied entries, in slot order.
    pub(crate) fn occupied(&self) -> impl Iterator<Item = u32> + '_ {
        self.chunks
            .iter()
            .flatten()
            .enumerate()
            .filter(|(_, e)| e.is_occupied())
            .map(|(i, _)| i as u32)
    }

    /// Bytes of memory the arena holds (capacity, not length).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.chunks
            .iter()
            .map(|c| c.capacity() * std::mem::size_of::<Entry<T>>())
            .sum::<usize>()
            + self.chunks.capacity() * std::mem::size_of::<Vec<Entry<T>>>()
    }

    #[inline]
    fn entry(&self, slot: u32) -> &Entry<T> {
        &self.chunks[(slot >> CHUNK_BITS) as usize][(slot & CHUNK_MASK) as usize]
    }

    #[inline]
    fn entry_mut(&mut self, slot: u32) -> &mut Entry<T> {
        &mut self.chunks[(slot >> CHUNK_BITS) as usize][(slot & CHUNK_MASK) as usize]
    }
}

/// Items still in the arena are dropped with it. Like `Vec`, the drop goes on past an item whose
/// destructor panics (a second panic aborts). Unlike `Vec`'s (which uses an attribute only
/// nightly Rust offers), this drop requires borrowed items to outlive the arena: a wheel of
/// `&str` must be dropped before the strings.
impl<T> Drop for Slab<T> {
    fn drop(&mut self) {
        if !std::mem::needs_drop::<T>() {
            return; // the timer service's `u64` records: nothing to walk
        }
        let mut rest = DropRest(self.chunks.iter_mut().flatten());
        for e in rest.0.by_ref() {
            e.drop_item();
        }
    }
}

/// The entries `Slab::drop` has not reached yet: dropped by this guard's own drop if an item's
/// destructor panics on the way (a no-op once the walk is over).
struct DropRest<'a, T>(std::iter::Flatten<std::slice::IterMut<'a, Vec<Entry<T>>>>);

impl<T> Drop for DropRest<'_, T> {
    fn drop(&mut self) {
        for e in self.0.by_ref() {
            e.drop_item();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_is_32_bytes_for_a_boxed_closure_and_24_for_a_record() {
        assert_eq!(std::mem::size_of::<Entry<Box<dyn FnOnce() + Send>>>(), 32);
        assert_eq!(std::mem::size_of::<Entry<u64>>(), 24);
    }

    #[test]
    fn every_item_is_dropped_once_whether_taken_removed_or_left() {
        use std::rc::Rc;
        let counter = Rc::new(());
        let mut s = Slab::new();
        let ids: Vec<_> = (0..CHUNK as u64 + 10)
            .map(|i| s.insert(i, counter.clone()))
            .collect();
        let (slot, g) = ids[3];
        let (taken, due, _) = s.take(slot, g).expect("occupied");
        assert_eq!(due, 3);
        assert!(s.take(slot, g).is_none(), "a second take finds it vacant");
        drop(taken);
        drop(s.remove(ids[CHUNK].0));
        let refilled = s.insert(99, counter.clone());
        assert_eq!(
            refilled.0, ids[CHUNK].0,
            "the last slot vacated is reused first"
        );
        assert_eq!(Rc::strong_count(&counter), 1 + CHUNK + 10 - 2 + 1);
        assert_eq!(s.get(refilled.0, refilled.1).map(Entry::due), Some(99));
        assert!(
            s.get(ids[CHUNK].0, ids[CHUNK].1).is_none(),
            "the old id is stale"
        );
        drop(s);
        assert_eq!(
            Rc::strong_count(&counter),
            1,
            "the slab dropped what it still held"
        );
    }

    #[test]
    fn the_drop_goes_on_past_an_item_whose_destructor_panics() {
        use std::cell::Cell;
        use std::rc::Rc;
        struct Loud(Rc<Cell<usize>>, bool);
        impl Drop for Loud {
            fn drop(&mut self) {
                self.0.set(self.0.get() + 1);
                if self.1 {
                    panic!("a destructor panics");
                }
            }
        }
        let drops = Rc::new(Cell::new(0));
        let mut s = Slab::new();
        for i in 0..10 {
            s.insert(i, Loud(drops.clone(), i == 0));
        }
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(s)));
        assert!(caught.is_err(), "the panic comes out of the drop");
        assert_eq!(drops.get(), 10, "and every item was dropped, once");
    }

    #[test]
    fn generations_are_odd_while_occupied_and_never_match_a_vacant_entry() {
        let mut s = Slab::new();
        let (a, g) = s.insert(5, 'a');
        assert_eq!(g % 2, 1);
        assert_eq!(s.remove(a), 'a');
        assert!(!s.at(a).is_occupied());
        // An id made up with the vacant entry's (even) generation does not reach it.
        assert!(s.get(a, g + 1).is_none());
        assert!(s.take(a, g + 1).is_none());
        let (b, g2) = s.insert(6, 'b');
        assert_eq!((b, g2), (a, g + 2));
        assert_eq!(s.at(b).item(), Some(&'b'));
    }

    #[test]
    fn chunks_hold_their_entries_across_boundaries() {
        let mut s = Slab::new();
        let n = 3 * CHUNK + 17;
        let ids: Vec<_> = (0..n).map(|i| s.insert(i as u64, i)).collect();
        assert_eq!(s.chunks.len(), 4);
        assert!(
            s.chunks[1..].iter().all(|c| c.capacity() == CHUNK),
            "later chunks never grow"
        );
        for &(slot, g) in &ids {
            assert_eq!(s.get(slot, g).map(Entry::due), Some(u64::from(slot)));
        }
        assert_eq!(s.remove(CHUNK as u32), CHUNK);
        assert_eq!(s.occupied().count(), n - 1);
        assert_eq!(
            s.insert(7, 7).0,
            CHUNK as u32,
            "the freed slot is reused first"
        );
        assert!(
            s.get(n as u32, 0).is_none(),
            "slots past the end do not exist"
        );
    }

    #[test]
    fn reuse_bumps_the_generation() {
        let mut s = Slab::new();
        let (a, gen_a) = s.insert(5, "a");
        assert!(s.get(a, gen_a).is_some());
        assert_eq!(s.remove(a), "a");
        assert!(s.get(a, gen_a).is_none());
        let (b, gen_b) = s.insert(7, "b");
        assert_eq!(b, a, "the vacant slot is reused");
        assert_ne!(gen_b, gen_a);
        assert!(
            s.get(a, gen_a).is_none(),
            "a stale id never reaches the new occupant"
        );
        assert_eq!(s.at(b).due(), 7);
    }

    #[test]
    fn due_and_pos_change_in_place() {
        let mut s = Slab::new();
        let (a, g) = s.insert(5, ());
        s.set_due(a, 9);
        s.set_pos(a, 3);
        assert!(s.get(a, g).is_some(), "the id survives a reschedule");
        assert_eq!((s.at(a).due(), s.at(a).pos()), (9, 3));
    }
}
