//! The entry arena: one contiguous `Vec` with a free list and generational ids.
//!
//! ## Ground rules
//!
//! | field   | occupied entry                         | vacant entry                      |
//! |---------|----------------------------------------|-----------------------------------|
//! | `item`  | `Some(item)`                           | `None`                            |
//! | `key`   | the due tick of the entry              | index of the next vacant entry    |
//! | `generation` | generation handed out in its `TimerId` | generation the next occupant gets |
//! | `stamp` | stamp of the one record that is live   | bumped at vacate: no record lives |
//!
//! `generation` changes only when an entry is vacated, so a `TimerId` stays valid across reschedules and
//! goes stale for ever once its entry is gone (modulo `u32` wrap-around of one slot's reuses).
//! `stamp` changes whenever the entry gets a new record (insert, reschedule to another bucket) or is
//! vacated, so every older record of the slot reads as dead without anyone touching it.

/// Marks the end of the free list.
const NIL: u32 = u32::MAX;

/// One slot of the arena; 32 bytes for a `Box<dyn FnOnce() + Send>` item.
#[derive(Debug)]
pub(crate) struct Entry<T> {
    item: Option<T>,
    key: u64,
    generation: u32,
    stamp: u32,
}

impl<T> Entry<T> {
    /// Due tick of an occupied entry.
    #[inline]
    pub(crate) fn due(&self) -> u64 {
        debug_assert!(self.item.is_some(), "due() of a vacant entry");
        self.key
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

    /// Stamp of the entry's live record.
    #[inline]
    pub(crate) fn stamp(&self) -> u32 {
        self.stamp
    }
}

#[derive(Debug)]
pub(crate) struct Slab<T> {
    entries: Vec<Entry<T>>,
    free: u32,
}

impl<T> Slab<T> {
    pub(crate) fn new() -> Self {
        Slab {
            entries: Vec::new(),
            free: NIL,
        }
    }

    /// Stores `item` due at `due`; returns `(slot, generation, stamp)`.
    ///
    /// # Panics
    ///
    /// If more than `u32::MAX - 1` entries are live at once (over 128 GiB of entries), like `Vec`'s
    /// capacity overflow.
    #[inline]
    pub(crate) fn insert(&mut self, due: u64, item: T) -> (u32, u32, u32) {
        if self.free != NIL {
            let slot = self.free;
            let e = &mut self.entries[slot as usize];
            debug_assert!(e.item.is_none(), "free list points at an occupied entry");
            self.free = e.key as u32;
            e.item = Some(item);
            e.key = due;
            e.stamp = e.stamp.wrapping_add(1);
            (slot, e.generation, e.stamp)
        } else {
            let slot = u32::try_from(self.entries.len())
                .ok()
                .filter(|&s| s != NIL)
                .expect("timing wheel capacity overflow: more than u32::MAX - 1 pending entries");
            self.entries.push(Entry {
                item: Some(item),
                key: due,
                generation: 0,
                stamp: 0,
            });
            (slot, 0, 0)
        }
    }

    /// The occupied entry at `slot` if `generation` matches: the lookup behind every `TimerId`.
    #[inline]
    pub(crate) fn get(&self, slot: u32, generation: u32) -> Option<&Entry<T>> {
        self.entries
            .get(slot as usize)
            .filter(|e| e.generation == generation && e.item.is_some())
    }

    /// As [`get`](Self::get), mutably.
    #[inline]
    pub(crate) fn get_mut(&mut self, slot: u32, generation: u32) -> Option<&mut Entry<T>> {
        self.entries
            .get_mut(slot as usize)
            .filter(|e| e.generation == generation && e.item.is_some())
    }

    /// The entry at `slot`, occupied or not. Records name slots that exist.
    #[inline]
    pub(crate) fn at(&self, slot: u32) -> &Entry<T> {
        &self.entries[slot as usize]
    }

    /// True when `stamp` is the stamp of the live record of an occupied `slot`.
    #[inline]
    pub(crate) fn is_live(&self, slot: u32, stamp: u32) -> bool {
        let e = &self.entries[slot as usize];
        e.stamp == stamp && e.item.is_some()
    }

    /// Due tick of `slot` if `stamp` is the stamp of its live record.
    #[inline]
    pub(crate) fn live_due(&self, slot: u32, stamp: u32) -> Option<u64> {
        let e = &self.entries[slot as usize];
        (e.stamp == stamp && e.item.is_some()).then_some(e.key)
    }

    /// Gives an occupied entry a new due tick; with `restamp`, also a new record stamp (returned),
    /// which kills the record it had.
    #[inline]
    pub(crate) fn set_due(&mut self, slot: u32, due: u64, restamp: bool) -> u32 {
        let e = &mut self.entries[slot as usize];
        debug_assert!(e.item.is_some(), "set_due on a vacant entry");
        e.key = due;
        if restamp {
            e.stamp = e.stamp.wrapping_add(1);
        }
        e.stamp
    }

    /// Vacates an occupied `slot` and returns its item. Its id and its record go stale.
    #[inline]
    pub(crate) fn remove(&mut self, slot: u32) -> T {
        let e = &mut self.entries[slot as usize];
        let item = e.item.take().expect("remove of a vacant entry");
        e.key = u64::from(self.free);
        e.generation = e.generation.wrapping_add(1);
        e.stamp = e.stamp.wrapping_add(1);
        self.free = slot;
        item
    }

    /// Slots of all occupied entries, in slot order.
    pub(crate) fn occupied(&self) -> impl Iterator<Item = u32> + '_ {
        self.entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.item.is_some())
            .map(|(i, _)| i as u32)
    }

    /// Bytes of memory the arena holds (capacity, not length).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.entries.capacity() * std::mem::size_of::<Entry<T>>()
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
    fn reuse_bumps_gen_and_stamp() {
        let mut s = Slab::new();
        let (a, gen_a, sa) = s.insert(5, "a");
        assert!(s.get(a, gen_a).is_some());
        assert!(s.is_live(a, sa));
        assert_eq!(s.remove(a), "a");
        assert!(s.get(a, gen_a).is_none());
        assert!(!s.is_live(a, sa));
        let (b, gen_b, sb) = s.insert(7, "b");
        assert_eq!(b, a, "the vacant slot is reused");
        assert_ne!(gen_b, gen_a);
        assert_ne!(sb, sa);
        assert!(
            s.get(a, gen_a).is_none(),
            "a stale id never reaches the new occupant"
        );
        assert_eq!(s.at(b).due(), 7);
    }

    #[test]
    fn restamp_kills_the_old_record_only() {
        let mut s = Slab::new();
        let (a, g, st) = s.insert(5, ());
        let same = s.set_due(a, 6, false);
        assert_eq!(same, st);
        let new = s.set_due(a, 9, true);
        assert!(!s.is_live(a, st));
        assert!(s.is_live(a, new));
        assert!(s.get(a, g).is_some(), "the id survives a reschedule");
        assert_eq!(s.at(a).due(), 9);
    }
}
