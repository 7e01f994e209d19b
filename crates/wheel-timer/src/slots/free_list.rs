//! The owner's free slots, handed out lowest first.
//!
//! A shard's slots never move, so where its live tasks sit in the slot array decides how many
//! cache lines and pages its adds, cancels and fires touch. Free slots handed out in the order
//! they were freed (a stack) keep a burst's scatter for the life of the shard: after a burst
//! freed in random order, every later task lands somewhere in the burst's whole range. Handed
//! out lowest first, the live tasks pack at the low end again as they turn over.
//!
//! A set of slot numbers as bits in three levels (a bit per slot, a bit per non-empty word of
//! the level below), so the lowest is three `trailing_zeros` away. Touched only by the shard's
//! owner thread (inside `Ownership::with_free`): plain memory, no atomics.
//!
//! One slot bypasses the set: a slot the owner frees while none is kept aside, into an empty set
//! or below `floor` (a lower bound of the set: its lowest when last known, else below it), is
//! kept aside (`hot`) and handed out next, without a search. That is the common case of a thread
//! that adds and cancels its own timers (W6's pair: the slot it frees is the one it just took,
//! the lowest): it costs what a stack did, however many free slots a past burst left in the set.
//! (When only an empty set let a slot aside, 3M free slots left by a dropped timer made that
//! pair 27 ns instead of 18: a search per add.) Any other freed slot goes into the set, so the
//! order stays lowest first, bent by at most the one slot aside (below the whole set when it
//! went aside; a slot freed after it may be lower): a thread that cancels its tasks at random
//! still packs them at the low end as they turn over.

/// Bits per word at each level.
const BITS: usize = 64;

/// Slots vacated and listed, waiting for the owner's next allocation. Touched by the owner only.
#[derive(Debug, Default)]
pub(crate) struct FreeList {
    /// A slot freed while none was kept aside, below `floor` (so below every slot in `levels`
    /// then) or into an empty set: handed out first.
    hot: Option<u32>,
    /// `levels[0]`: a bit per slot; `levels[1]`: a bit per non-zero word of `levels[0]`;
    /// `levels[2]`: a bit per non-zero word of `levels[1]`.
    levels: [Vec<u64>; 3],
    /// No word of `levels[2]` below it is non-zero (where the search for the lowest starts).
    from: usize,
    /// No slot in `levels` is below it.
    floor: usize,
    /// Slots in `levels`.
    len: usize,
}

impl FreeList {
    /// Slots in the set.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn len(&self) -> usize {
        self.len + usize::from(self.hot.is_some())
    }

    /// Adds slot `i`, vacated and listed once. (Adding a slot already in the set changes
    /// nothing.)
    #[inline]
    pub(crate) fn insert(&mut self, i: u32) {
        match self.hot {
            // Below every slot in the set, so not in it, and handing it out first keeps the
            // order.
            None if self.len == 0 || (i as usize) < self.floor => self.hot = Some(i),
            Some(hot) if hot == i => {}
            _ => self.insert_bit(i as usize),
        }
    }

    /// True if a slot is kept aside.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn has_hot(&self) -> bool {
        self.hot.is_some()
    }

    /// Adds a slot vacated and listed elsewhere, to the ordered set (never kept aside).
    pub(crate) fn insert_ordered(&mut self, i: u32) {
        if self.hot != Some(i) {
            self.insert_bit(i as usize);
        }
    }

    fn insert_bit(&mut self, i: usize) {
        let mut at = i;
        for level in 0..3 {
            let (word, bit) = (at / BITS, at % BITS);
            let words = &mut self.levels[level];
            if words.len() <= word {
                words.resize(word + 1, 0);
            }
            let was = words[word];
            words[word] = was | 1 << bit;
            if level == 0 {
                if was & 1 << bit != 0 {
                    return; // already in
                }
                self.len += 1;
                // The first slot of an empty set is its lowest; a bound left from before
                // would only be lower than need be.
                self.floor = if self.len == 1 { i } else { self.floor.min(i) };
            }
            if was != 0 {
                return; // the levels above already mark this word
            }
            at = word;
        }
        self.from = self.from.min(at);
    }

    /// Takes the slot kept aside, if there is one.
    #[inline(always)]
    pub(crate) fn take_hot(&mut self) -> Option<u32> {
        self.hot.take()
    }

    /// Takes the slot to hand out next: the one kept aside, else the lowest.
    #[inline]
    pub(crate) fn pop(&mut self) -> Option<u32> {
        if self.hot.is_some() || self.len == 0 {
            return self.hot.take();
        }
        let i = self.lowest()?;
        self.remove_bit(i);
        self.floor = i + 1;
        Some(i as u32)
    }

    /// The slot [`pop`](Self::pop) would take next.
    #[inline]
    pub(crate) fn peek(&mut self) -> Option<u32> {
        if self.hot.is_some() || self.len == 0 {
            return self.hot;
        }
        self.lowest().map(|i| i as u32)
    }

    /// The lowest slot in `levels`, which is not empty.
    fn lowest(&mut self) -> Option<usize> {
        let top = &self.levels[2];
        let w2 = self.from + top[self.from..].iter().position(|&w| w != 0)?;
        self.from = w2;
        let w1 = w2 * BITS + top[w2].trailing_zeros() as usize;
        let w0 = w1 * BITS + self.levels[1][w1].trailing_zeros() as usize;
        Some(w0 * BITS + self.levels[0][w0].trailing_zeros() as usize)
    }

    fn remove_bit(&mut self, i: usize) {
        self.len -= 1;
        let mut at = i;
        for words in &mut self.levels {
            let (word, bit) = (at / BITS, at % BITS);
            words[word] &= !(1 << bit);
            if words[word] != 0 {
                return;
            }
            at = word;
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn drain(set: &mut FreeList) -> Vec<u32> {
        std::iter::from_fn(|| set.pop()).collect()
    }

    #[test]
    fn the_first_slot_freed_into_an_empty_set_comes_back_first() {
        let mut set = FreeList::default();
        set.insert(900);
        assert_eq!(set.peek(), Some(900));
        assert_eq!(set.pop(), Some(900));
        assert_eq!(set.pop(), None);
        assert_eq!(set.len(), 0);
    }

    #[test]
    fn the_rest_come_back_lowest_first_across_all_levels() {
        let mut set = FreeList::default();
        // Spread over several words of every level (64^2 = 4096, 64^3 = 262,144).
        let mut slots: Vec<u32> = vec![5, 0, 63, 64, 4095, 4096, 262_143, 262_144, 9_000_000, 1];
        for &i in &slots {
            set.insert(i);
        }
        set.insert(64); // twice: still once
        assert_eq!(set.len(), slots.len());
        let first = slots.remove(0); // kept aside: the set was empty when it came
        slots.sort_unstable();
        slots.insert(0, first);
        assert_eq!(drain(&mut set), slots);
        assert_eq!(set.len(), 0);
    }

    #[test]
    fn adding_the_slot_kept_aside_again_changes_nothing() {
        let mut set = FreeList::default();
        set.insert(7); // kept aside
        set.insert(7);
        set.insert_ordered(7);
        assert_eq!(set.len(), 1);
        assert_eq!((set.pop(), set.pop()), (Some(7), None));
    }

    #[test]
    fn a_slot_freed_while_none_is_aside_comes_back_next_however_full_the_set() {
        let mut set = FreeList::default();
        for i in 0..10_000 {
            set.insert(i); // 0 aside, the rest in the set
        }
        assert_eq!(set.pop(), Some(0));
        // An add and a cancel on the owner thread: the slot freed is the one taken next.
        let i = set.pop().unwrap();
        assert_eq!(i, 1);
        set.insert(i);
        assert!(set.has_hot());
        assert_eq!(set.pop(), Some(i));
        set.insert(i);
        assert_eq!(set.pop(), Some(i), "again and again");
        set.insert(20_000); // above the set's lowest: into the set
        assert!(!set.has_hot());
        assert_eq!(set.pop(), Some(2), "lowest first");
        set.insert(2); // the lowest again: aside
        assert!(set.has_hot());
        assert_eq!(set.len(), 9_999);
        let rest = drain(&mut set);
        assert_eq!(rest[0], 2);
        assert!(rest.windows(2).all(|w| w[0] < w[1]), "still lowest first");
        assert_eq!(rest.last(), Some(&20_000));
    }

    #[test]
    fn the_bound_starts_from_the_first_slot_of_an_empty_set() {
        let mut set = FreeList::default();
        set.insert(50); // aside
        set.insert(40); // into the set
        assert_eq!(set.pop(), Some(50));
        set.insert(30); // below the set's 40: aside, though no search has run
        assert!(set.has_hot());
        assert_eq!(drain(&mut set), [30, 40]);
    }

    #[test]
    fn a_slot_already_in_the_set_is_not_kept_aside_as_well() {
        let mut set = FreeList::default();
        set.insert(1); // aside
        set.insert(5);
        assert_eq!(set.pop(), Some(1));
        set.insert(5); // already in the set: not aside too
        assert!(!set.has_hot());
        assert_eq!(set.len(), 1);
        assert_eq!((set.pop(), set.pop()), (Some(5), None));
    }

    #[test]
    fn a_lower_slot_freed_later_is_found_below_the_search_start() {
        let mut set = FreeList::default();
        set.insert(1); // aside
        set.insert(10_000_000);
        set.insert(20_000_000);
        assert_eq!(set.pop(), Some(1));
        assert_eq!(set.pop(), Some(10_000_000)); // the search now starts up there
        set.insert(3);
        assert_eq!(set.pop(), Some(3));
        assert_eq!(set.pop(), Some(20_000_000));
        assert_eq!(set.pop(), None);
    }

    #[test]
    fn the_set_matches_a_sorted_model_under_random_use() {
        let mut set = FreeList::default();
        let mut model = std::collections::BTreeSet::new();
        let mut aside: Option<u32> = None;
        let mut aside_over_a_set = 0;
        let mut x = 0x9E37_79B9_7F4A_7C15_u64;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if x.is_multiple_of(3) {
                let got = set.pop();
                let want = aside.take().or_else(|| model.pop_first());
                assert_eq!(got, want);
            } else {
                // Each vacancy is listed once: only slots not in the set come in.
                let i = (x >> 20) as u32 % 300_000;
                if aside == Some(i) || model.contains(&i) {
                    continue;
                }
                let was_aside = aside.is_some();
                set.insert(i);
                // Kept aside only if none was and it is below the whole set (so pops stay
                // lowest first), and always if the set is empty.
                if set.has_hot() && !was_aside {
                    assert!(model.first().is_none_or(|&low| i < low));
                    aside_over_a_set += usize::from(!model.is_empty());
                    aside = Some(i);
                } else {
                    assert!(was_aside || !model.is_empty());
                    model.insert(i);
                }
            }
            assert_eq!(set.len(), model.len() + usize::from(aside.is_some()));
        }
        assert!(
            aside_over_a_set > 100,
            "{aside_over_a_set} slots kept aside over a set"
        );
    }

    /// Every operation against a model (a `BTreeSet` and the slot aside), over ranges from 2 to
    /// 300k slots: the same pops and peeks, the slot aside never also in the set, and `floor`
    /// never above the set's lowest. (From the review of 2026-11-28; setting `floor` one higher
    /// in `pop` makes it fail.)
    #[test]
    fn every_operation_matches_a_model() {
        use std::collections::BTreeSet;
        for (seed, range) in [(1u64, 8u64), (2, 70), (3, 5000), (4, 300_000), (5, 2)] {
            let mut set = FreeList::default();
            let mut model: BTreeSet<u32> = BTreeSet::new();
            let mut aside: Option<u32> = None;
            let mut x = 0x9E37_79B9_7F4A_7C15_u64 ^ seed;
            for step in 0..300_000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let i = ((x >> 8) % range) as u32;
                match x % 10 {
                    0..=3 => {
                        if aside == Some(i) || model.contains(&i) {
                            let before = set.len();
                            set.insert(i);
                            assert_eq!(set.len(), before, "a second insert counted at {step}");
                        } else {
                            let was_aside = aside.is_some();
                            set.insert(i);
                            if set.hot.is_some() && !was_aside {
                                assert!(model.first().is_none_or(|&low| i < low));
                                aside = Some(i);
                            } else {
                                model.insert(i);
                            }
                        }
                    }
                    4 => {
                        // A refill: only with nothing aside and the set empty.
                        if aside.is_none() && model.is_empty() {
                            for k in 0..(x >> 40) % 5 {
                                let j = ((x >> (k * 7)) % range) as u32;
                                set.insert_ordered(j);
                                model.insert(j);
                            }
                        } else if let Some(a) = aside {
                            set.insert_ordered(a); // the slot aside again: nothing changes
                        }
                    }
                    5 => assert_eq!(set.take_hot(), aside.take()),
                    6 => assert_eq!(
                        set.peek(),
                        aside.or_else(|| model.first().copied()),
                        "peek at {step}"
                    ),
                    _ => {
                        let want = aside.take().or_else(|| model.pop_first());
                        assert_eq!(set.pop(), want, "pop at {step}");
                    }
                }
                assert_eq!(set.hot, aside);
                assert_eq!(set.len, model.len());
                if let Some(a) = aside {
                    assert!(!model.contains(&a), "{a} aside and in the set");
                }
                if let Some(&low) = model.first() {
                    assert!(set.floor <= low as usize, "floor {} above {low}", set.floor);
                }
            }
        }
    }
}
