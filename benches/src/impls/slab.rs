//! A generational slab with an intrusive free list: the item store behind the heap baselines.
//!
//! An item is known by `(slot, generation)`. Filling and vacating a slot each bump its
//! generation (odd while occupied), so an old pair goes stale and is refused even after the slot
//! is reused; vacant slots are chained through `next_free` and reused last-freed first. Slots are
//! `u32`, so a pair packs into the baselines' compact `(deadline, slot, generation)` heap records.
//!
//! Built the way our wheel's arena is (`tickwheel_wheel`'s `slab.rs`): the item cell is
//! initialised exactly while the generation is odd, instead of an `Option<T>` that costs a word
//! per slot for an item without a niche (16 bytes a slot for a `u64` item instead of 24). The
//! baselines get the same memory layout as our own code, not a fatter one.

#![allow(unsafe_code)]

use std::fmt;
use std::mem::MaybeUninit;

const NIL: u32 = u32::MAX;

struct Slot<T> {
    /// Odd: occupied, and the generation its id carries; even: vacant.
    generation: u32,
    /// Next vacant slot while this one is vacant (`NIL` at the end).
    next_free: u32,
    /// Initialised exactly while the slot is occupied.
    item: MaybeUninit<T>,
}

impl<T> Slot<T> {
    #[inline]
    fn is_occupied(&self) -> bool {
        self.generation & 1 == 1
    }

    /// Vacates an occupied slot and returns its item.
    #[inline]
    fn vacate(&mut self, next_free: u32) -> T {
        debug_assert!(self.is_occupied());
        self.generation = self.generation.wrapping_add(1);
        self.next_free = next_free;
        // SAFETY: the slot was occupied until the generation moved above, so its item is
        // initialised; it is vacant now, so nothing reads or drops that item again until
        // `insert` writes a new one.
        unsafe { self.item.assume_init_read() }
    }
}

impl<T: fmt::Debug> fmt::Debug for Slot<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // SAFETY: an occupied slot's item is initialised.
        let item = self
            .is_occupied()
            .then(|| unsafe { self.item.assume_init_ref() });
        f.debug_struct("Slot")
            .field("generation", &self.generation)
            .field("item", &item)
            .finish()
    }
}

/// Items by `(slot, generation)`; see the module docs.
///
/// ```
/// use wheel_benches::impls::slab::GenSlab;
///
/// let mut slab = GenSlab::new();
/// let (slot, generation) = slab.insert("a");
/// assert_eq!(slab.take(slot, generation), Some("a"));
/// assert_eq!(slab.take(slot, generation), None);
/// ```
#[derive(Debug)]
pub struct GenSlab<T> {
    slots: Vec<Slot<T>>,
    /// First vacant slot, or `NIL`.
    free: u32,
    /// Occupied slots.
    len: usize,
}

impl<T> Default for GenSlab<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> GenSlab<T> {
    /// An empty slab; allocates nothing until the first insert.
    pub const fn new() -> Self {
        GenSlab {
            slots: Vec::new(),
            free: NIL,
            len: 0,
        }
    }

    /// Stores `item` in a vacant slot (the last freed, else a new one) and returns
    /// `(slot, generation)`, its id.
    ///
    /// # Panics
    ///
    /// If the slab would need more than `u32::MAX` slots.
    #[inline]
    pub fn insert(&mut self, item: T) -> (u32, u32) {
        let slot = self.free;
        let id = if slot != NIL {
            let s = &mut self.slots[slot as usize];
            debug_assert!(!s.is_occupied(), "free list names an occupied slot");
            self.free = s.next_free;
            s.item.write(item);
            s.generation = s.generation.wrapping_add(1);
            (slot, s.generation)
        } else {
            let slot = u32::try_from(self.slots.len())
                .ok()
                .filter(|&i| i != NIL)
                .expect("slab capacity overflow");
            self.slots.push(Slot {
                generation: 1,
                next_free: NIL,
                item: MaybeUninit::new(item),
            });
            (slot, 1)
        };
        self.len += 1;
        id
    }

    /// The item at `(slot, generation)`, if that id is live.
    #[inline]
    pub fn get(&self, slot: u32, generation: u32) -> Option<&T> {
        let s = self.slots.get(slot as usize)?;
        if s.generation != generation || !s.is_occupied() {
            return None;
        }
        // SAFETY: an occupied slot's item is initialised (see `Slot`).
        Some(unsafe { s.item.assume_init_ref() })
    }

    /// True iff `(slot, generation)` names an occupied slot.
    #[inline]
    pub fn is_live(&self, slot: u32, generation: u32) -> bool {
        self.get(slot, generation).is_some()
    }

    /// Vacates the slot if `(slot, generation)` is live and returns its item; `None` for a stale
    /// or unknown id.
    #[inline]
    pub fn take(&mut self, slot: u32, generation: u32) -> Option<T> {
        let s = self.slots.get_mut(slot as usize)?;
        if s.generation != generation || !s.is_occupied() {
            return None;
        }
        let item = s.vacate(self.free);
        self.free = slot;
        self.len -= 1;
        Some(item)
    }

    /// Vacates every occupied slot (each id goes stale) and returns the items in slot order.
    pub fn take_all(&mut self) -> Vec<T> {
        let mut items = Vec::with_capacity(self.len);
        for (i, s) in self.slots.iter_mut().enumerate() {
            if s.is_occupied() {
                items.push(s.vacate(self.free));
                // `insert` never hands out `NIL`, so every index fits in a `u32`.
                self.free = i as u32;
            }
        }
        self.len = 0;
        items
    }

    /// Occupied slots.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when no slot is occupied.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Drops the items still held, going on past a destructor that panics (a second one aborts), as
/// `Vec` does.
impl<T> Drop for GenSlab<T> {
    fn drop(&mut self) {
        if !std::mem::needs_drop::<T>() {
            return;
        }
        let mut rest = DropRest(self.slots.iter_mut());
        for s in rest.0.by_ref() {
            if s.is_occupied() {
                drop(s.vacate(NIL));
            }
        }
    }
}

/// The slots `GenSlab::drop` has not reached: dropped by this guard if a destructor panics.
struct DropRest<'a, T>(std::slice::IterMut<'a, Slot<T>>);

impl<T> Drop for DropRest<'_, T> {
    fn drop(&mut self) {
        for s in self.0.by_ref() {
            if s.is_occupied() {
                drop(s.vacate(NIL));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reuse_bumps_generation_and_stale_ids_are_refused() {
        let mut slab = GenSlab::new();
        let (a, ga) = slab.insert('a');
        assert_eq!((a, ga), (0, 1));
        assert_eq!(slab.take(a, ga), Some('a'));
        assert!(!slab.is_live(a, ga));

        // The vacated slot is reused with a new generation.
        let (b, gb) = slab.insert('b');
        assert_eq!(b, a);
        assert_eq!(gb, ga + 2);

        // The old id names the reused slot but is stale.
        assert_eq!(slab.get(a, ga), None);
        assert_eq!(slab.take(a, ga), None);
        assert_eq!(slab.get(b, gb), Some(&'b'));
        assert_eq!(slab.len(), 1);
    }

    #[test]
    fn unknown_and_double_take_are_refused() {
        let mut slab = GenSlab::new();
        assert_eq!(slab.take(0, 0), None);
        let (s, g) = slab.insert(1);
        assert_eq!(slab.take(s + 1, g), None);
        assert_eq!(slab.take(s, g.wrapping_add(1)), None);
        assert_eq!(slab.take(s, g), Some(1));
        assert_eq!(slab.take(s, g), None);
        assert!(slab.is_empty());
    }

    #[test]
    fn free_list_is_last_freed_first() {
        let mut slab = GenSlab::new();
        let ids: Vec<_> = (0..4).map(|i| slab.insert(i)).collect();
        assert_eq!(slab.len(), 4);
        slab.take(ids[1].0, ids[1].1);
        slab.take(ids[3].0, ids[3].1);
        assert_eq!(slab.insert(10).0, ids[3].0);
        assert_eq!(slab.insert(11).0, ids[1].0);
        assert_eq!(slab.insert(12).0, 4);
        assert_eq!(slab.len(), 5);
    }

    #[test]
    fn a_slot_is_16_bytes_for_a_u64_and_every_item_is_dropped_once() {
        assert_eq!(std::mem::size_of::<Slot<u64>>(), 16);
        let counter = std::rc::Rc::new(());
        let mut slab = GenSlab::new();
        let ids: Vec<_> = (0..5).map(|_| slab.insert(counter.clone())).collect();
        drop(slab.take(ids[2].0, ids[2].1));
        assert_eq!(
            slab.take(ids[2].0, ids[2].1 + 1),
            None,
            "a vacant slot's even generation"
        );
        assert_eq!(std::rc::Rc::strong_count(&counter), 5);
        drop(slab);
        assert_eq!(std::rc::Rc::strong_count(&counter), 1);
    }

    #[test]
    fn the_drop_goes_on_past_a_destructor_that_panics() {
        struct Loud(std::rc::Rc<std::cell::Cell<usize>>, bool);
        impl Drop for Loud {
            fn drop(&mut self) {
                self.0.set(self.0.get() + 1);
                assert!(!self.1, "a destructor panics");
            }
        }
        let drops = std::rc::Rc::new(std::cell::Cell::new(0));
        let mut slab = GenSlab::new();
        for i in 0..6 {
            slab.insert(Loud(drops.clone(), i == 2));
        }
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(slab)));
        assert!(caught.is_err());
        assert_eq!(drops.get(), 6, "every item dropped once");
    }

    #[test]
    fn take_all_empties_and_stales_every_id() {
        let mut slab = GenSlab::new();
        let ids: Vec<_> = (0..3).map(|i| slab.insert(i)).collect();
        slab.take(ids[1].0, ids[1].1);
        assert_eq!(slab.take_all(), vec![0, 2]);
        assert!(slab.is_empty());
        assert!(ids.iter().all(|&(s, g)| !slab.is_live(s, g)));
        // Every slot is vacant and reusable.
        let reused: Vec<_> = (0..3).map(|i| slab.insert(i).0).collect();
        let mut sorted = reused.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, vec![0, 1, 2]);
        assert_eq!(slab.insert(9).0, 3);
    }
}
