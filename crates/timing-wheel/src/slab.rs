//! The entry arena: fixed-size chunks with a free list and generational ids.
//!
//! Entries live in chunks of `CHUNK` entries that never move once allocated (only the first chunk
//! grows, up to `CHUNK`), so growing the arena copies nothing, touches no memory twice and leaves
//! at most one partly used chunk of slack, where a single `Vec` would double and copy.
//!
//! The one `unsafe` block of the crate is here: a prefetch hint (see `prefetch`), allowed in
//! this file only because it measurably speeds up bucket flushes (about 10% on the long-range
//! workload and 25% on the short-range one, 1M timers, A/B on this machine).
//!
//! ## Ground rules
//!
//! | field   | occupied entry                         | vacant entry                      |
//! |---------|----------------------------------------|-----------------------------------|
//! | `item`  | `Some(item)`                           | `None`                            |
//! | `key`   | the due tick of the entry              | index of the next vacant entry    |
//! | `generation` | generation handed out in its `TimerId` | generation the next occupant gets |
//! | `pos`   | index of the entry's live record in the list that holds it (set by the wheel) | unused |
//!
//! `generation` changes only when an entry is vacated, so a `TimerId` stays valid across
//! reschedules and goes stale for ever once its entry is gone (modulo `u32` wrap-around of one
//! slot's reuses). `pos` lets the wheel tell an entry's live record from stale ones its slot left
//! in buckets (a record is live only at the index `pos` names) and take a record out of the
//! overdue list in O(1).

#![allow(unsafe_code)]

/// Marks the end of the free list.
const NIL: u32 = u32::MAX;

/// log2 of the entries per chunk: 4096 entries, 128 KiB for a boxed closure.
const CHUNK_BITS: u32 = 12;
const CHUNK: usize = 1 << CHUNK_BITS;
const CHUNK_MASK: u32 = (1 << CHUNK_BITS) - 1;

/// One slot of the arena; 32 bytes for a `Box<dyn FnOnce() + Send>` item.
#[derive(Debug)]
pub(crate) struct Entry<T> {
    item: Option<T>,
    key: u64,
    generation: u32,
    pos: u32,
}

impl<T> Entry<T> {
    /// Due tick of an occupied entry.
    #[inline]
    pub(crate) fn due(&self) -> u64 {
        debug_assert!(self.item.is_some(), "due() of a vacant entry");
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
        self.item.as_ref()
    }

    /// The item of an occupied entry, mutably.
    #[inline]
    pub(crate) fn item_mut(&mut self) -> Option<&mut T> {
        self.item.as_mut()
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
            debug_assert!(e.item.is_none(), "free list points at an occupied entry");
            self.free = e.key as u32;
            e.item = Some(item);
            e.key = due;
            (slot, e.generation)
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
                item: Some(item),
                key: due,
                generation: 0,
                pos: 0,
            });
            self.len += 1;
            (slot, 0)
        }
    }

    /// The occupied entry at `slot` if `generation` matches: the lookup behind every `TimerId`.
    #[inline]
    pub(crate) fn get(&self, slot: u32, generation: u32) -> Option<&Entry<T>> {
        self.chunks
            .get((slot >> CHUNK_BITS) as usize)
            .and_then(|c| c.get((slot & CHUNK_MASK) as usize))
            .filter(|e| e.generation == generation && e.item.is_some())
    }

    /// As [`get`](Self::get), mutably.
    #[inline]
    pub(crate) fn get_mut(&mut self, slot: u32, generation: u32) -> Option<&mut Entry<T>> {
        self.chunks
            .get_mut((slot >> CHUNK_BITS) as usize)
            .and_then(|c| c.get_mut((slot & CHUNK_MASK) as usize))
            .filter(|e| e.generation == generation && e.item.is_some())
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
        debug_assert!(e.item.is_some(), "set_due on a vacant entry");
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
        if e.generation != generation {
            return None;
        }
        let item = e.item.take()?;
        let due = std::mem::replace(&mut e.key, u64::from(free));
        e.generation = e.generation.wrapping_add(1);
        self.free = slot;
        Some((item, due, e.pos))
    }

    /// Vacates an occupied `slot` and returns its item. Its id goes stale.
    #[inline]
    pub(crate) fn remove(&mut self, slot: u32) -> T {
        let free = self.free;
        let e = self.entry_mut(slot);
        let item = e.item.take().expect("remove of a vacant entry");
        e.key = u64::from(free);
        e.generation = e.generation.wrapping_add(1);
        self.free = slot;
        item
    }

    /// Slots of all occupied entries, in slot order.
    pub(crate) fn occupied(&self) -> impl Iterator<Item = u32> + '_ {
        self.chunks
            .iter()
            .flatten()
            .enumerate()
            .filter(|(_, e)| e.item.is_some())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_is_32_bytes_for_a_boxed_closure() {
        assert_eq!(std::mem::size_of::<Entry<Box<dyn FnOnce() + Send>>>(), 32);
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
