//! Slots vacated on threads other than their shard's owner, listed for the owner as bits:
//! lock-free on both sides, and nothing is written into a slot to list it, so a slot can be
//! handed out only after its listing is complete.
//!
//! Three levels, as in the owner's own set (`free_list.rs`) but atomic: a bit per slot, a bit per
//! word of the level below that may be non-zero. A thread listing a slot sets its bit and goes
//! up only while it turned a word from zero to non-zero, so most listings are one
//! read-modify-write. The owner takes the lowest group of listed slots at a time, swapping words
//! to zero from the top down.
//!
//! No bit is lost: for each non-zero word of a lower level, either the bit above it is set, or
//! the owner holds that bit (it swapped it out, and will swap the word or put the bit back), or
//! a lister has just made the word non-zero and is about to set the bit above it. A slot listed
//! in that last window is taken by a later refill. So a lister paused between levels hides the
//! slots listed meanwhile in its group, at most 4,096, until it runs again: the owner makes new
//! slots instead of waiting (memory, bounded per paused thread, not a wait).

use crate::loom::atomic::{AtomicU64, Ordering::*};
use crate::slots::append_only::AppendOnly;

/// Bits per word at each level.
const BITS: usize = 64;

/// See the module docs.
pub(crate) struct RemoteFree {
    /// `levels[0]`: a bit per slot; `levels[1]`, `levels[2]`: a bit per word of the level below.
    levels: [AppendOnly<AtomicU64>; 3],
}

impl RemoteFree {
    pub(crate) fn new() -> Self {
        RemoteFree {
            levels: std::array::from_fn(|_| AppendOnly::new()),
        }
    }

    /// Makes room for slot `i`; the owner calls it for each slot in turn, before the slot
    /// exists. `None` if the words cannot be made.
    pub(crate) fn grow(&self, i: u32) -> Option<()> {
        let mut at = i as usize;
        for level in &self.levels {
            at /= BITS;
            level.get_or_grow(at)?;
        }
        Some(())
    }

    /// Lists slot `i`, which this thread just vacated. Any thread but the owner.
    pub(crate) fn push(&self, i: u32) {
        let mut at = i as usize;
        for level in &self.levels {
            let (word, bit) = (at / BITS, at % BITS);
            let w = level.get(word).expect("grown before the slot existed");
            // Release: the owner's swap (acquire) then sees the slot's word vacated.
            if w.fetch_or(1 << bit, AcqRel) != 0 {
                return; // the bit above is set, or about to be (module docs)
            }
            at = word;
        }
    }

    /// Takes the listed slots of the lowest group of 4,096 that has any (the words of one
    /// `levels[1]` word), among the first `len`; for the owner only. `false` if none was found.
    ///
    /// One group, not everything: after a burst of millions freed elsewhere, an add that takes
    /// everything would spend tens of milliseconds on it (28 ms for 3M, measured). The groups'
    /// bits the owner swapped out and did not take are put back (a bit above a word that turns
    /// out empty is harmless: the next take finds nothing there and moves on).
    pub(crate) fn take_lowest(&self, len: u32, mut f: impl FnMut(u32)) -> bool {
        let tops = (len as usize).div_ceil(BITS * BITS * BITS);
        for k in 0..tops {
            let top = &self.levels[2].get(k).expect("grown with the slots");
            if top.load(Relaxed) == 0 {
                continue; // a load, not a swap: an add that grows the shard writes nothing here
            }
            let mut groups = top.swap(0, AcqRel);
            while groups != 0 {
                let j = k * BITS + groups.trailing_zeros() as usize;
                groups &= groups - 1;
                let mut found = false;
                for w in self.take_word(1, j) {
                    for bit in self.take_word(0, w) {
                        f(bit as u32);
                        found = true;
                    }
                }
                if found {
                    if groups != 0 {
                        top.fetch_or(groups, AcqRel);
                    }
                    return true;
                }
            }
        }
        false
    }

    /// Swaps word `word` of level `level` to zero: the indexes, at the level below, of the bits
    /// it had.
    fn take_word(&self, level: usize, word: usize) -> impl Iterator<Item = usize> {
        let mut bits = self.levels[level]
            .get(word)
            .map_or(0, |w| w.swap(0, AcqRel));
        std::iter::from_fn(move || {
            let bit = bits.trailing_zeros() as usize;
            (bits != 0).then(|| {
                bits &= bits - 1;
                word * BITS + bit
            })
        })
    }

    /// Bytes of the bit levels.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.levels.iter().map(AppendOnly::heap_bytes).sum()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// Everything listed, lowest group first.
    fn taken(v: &RemoteFree, len: u32) -> Vec<u32> {
        let mut out = Vec::new();
        while v.take_lowest(len, |i| out.push(i)) {}
        out
    }

    #[test]
    fn listed_slots_are_taken_once_lowest_first_across_levels() {
        let v = RemoteFree::new();
        let slots = [0u32, 1, 63, 64, 4095, 4096, 262_143, 262_144, 300_000];
        (0..=300_000).for_each(|i| v.grow(i).unwrap()); // as the slots are made, in order
        for &i in slots.iter().rev() {
            v.push(i);
        }
        assert_eq!(taken(&v, 300_001), slots);
        assert!(taken(&v, 300_001).is_empty(), "taken once");
        v.push(4096);
        assert_eq!(taken(&v, 300_001), [4096], "listed again after a take");
    }

    #[test]
    fn a_lister_paused_between_levels_hides_its_group_until_it_runs_again_and_loses_nothing() {
        let v = RemoteFree::new();
        (0..8192).for_each(|i| v.grow(i).unwrap());
        // A push of slot 0 that set its bits in levels 0 and 1, then was descheduled.
        v.levels[0].get(0).unwrap().fetch_or(1, AcqRel);
        v.levels[1].get(0).unwrap().fetch_or(1, AcqRel);
        (1..4096).for_each(|i| v.push(i)); // the rest of its group, listed meanwhile
        v.push(5000); // another group
        assert_eq!(taken(&v, 8192), [5000], "the paused group is hidden");
        v.levels[2].get(0).unwrap().fetch_or(1, AcqRel); // it runs again
        assert_eq!(taken(&v, 8192), (0..4096).collect::<Vec<u32>>());
    }

    #[test]
    fn a_take_is_one_group_of_4096_the_lowest_listed() {
        let v = RemoteFree::new();
        (0..300_000).for_each(|i| v.grow(i).unwrap());
        for i in [299_999, 270_000, 4096 + 5, 4096 + 4095, 8192] {
            v.push(i);
        }
        let mut one = Vec::new();
        assert!(v.take_lowest(300_000, |i| one.push(i)));
        assert_eq!(one, [4096 + 5, 4096 + 4095]);
        one.clear();
        assert!(v.take_lowest(300_000, |i| one.push(i)));
        assert_eq!(one, [8192]);
        assert_eq!(
            taken(&v, 300_000),
            [270_000, 299_999],
            "the rest were put back"
        );
        assert!(!v.take_lowest(300_000, |_| ()));
    }

    #[test]
    fn listings_on_many_threads_racing_takes_lose_nothing() {
        let v = RemoteFree::new();
        const N: u32 = 1 << 16;
        (0..4 * N).for_each(|i| v.grow(i).unwrap());
        let mut got = Vec::new();
        std::thread::scope(|s| {
            for t in 0..4 {
                let v = &v;
                s.spawn(move || (t * N..(t + 1) * N).for_each(|i| v.push(i)));
            }
            for _ in 0..1000 {
                v.take_lowest(4 * N, |i| got.push(i));
            }
        });
        got.extend(taken(&v, 4 * N));
        got.sort_unstable();
        assert_eq!(got, (0..4 * N).collect::<Vec<_>>());
    }
}
