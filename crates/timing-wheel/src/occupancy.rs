//! Which buckets of a low level hold records, one bit per bucket (tokio and Linux keep such a
//! bitmap for every level). Levels 0 and 1 are where a stepped drive spends its advances: every
//! tick that has something due pops a level-0 bucket, and every `wheel_size` ticks a level-1 one.
//! Finding those by bit scan instead of through the delay queue saves a heap push and pop (and
//! their hashing) per bucket; the queue keeps ordering every bucket above level 1.
//!
//! Level `k` only ever holds ticks of the clock's current level-`k+1` bucket (the aligned levels'
//! rule), whose digit `k` is past the clock's, so its earliest bucket is the first set bit after
//! the clock's digit, with no wrap-around. A summary word per 64 words keeps that search short at
//! the largest wheel size (65,536 buckets: 1,024 words, 16 summary words).

/// The occupancy bits of one level.
#[derive(Debug)]
pub(crate) struct Occupancy {
    words: Box<[u64]>,
    /// Bit `w` is set iff `words[w] != 0`.
    summary: Box<[u64]>,
}

impl Occupancy {
    /// All clear, for `size` buckets.
    pub(crate) fn new(size: usize) -> Self {
        let words = size.div_ceil(64);
        Occupancy {
            words: vec![0; words].into_boxed_slice(),
            summary: vec![0; words.div_ceil(64)].into_boxed_slice(),
        }
    }

    #[inline]
    pub(crate) fn set(&mut self, slot: u32) {
        let w = slot as usize / 64;
        self.words[w] |= 1 << (slot % 64);
        self.summary[w / 64] |= 1 << (w % 64);
    }

    #[inline]
    pub(crate) fn clear(&mut self, slot: u32) {
        let w = slot as usize / 64;
        self.words[w] &= !(1 << (slot % 64));
        if self.words[w] == 0 {
            self.summary[w / 64] &= !(1 << (w % 64));
        }
    }

    #[cfg(test)]
    pub(crate) fn is_set(&self, slot: u32) -> bool {
        self.words[slot as usize / 64] & (1 << (slot % 64)) != 0
    }

    /// The first set slot at or after `from`, if any.
    #[inline]
    pub(crate) fn first_from(&self, from: u32) -> Option<u32> {
        let w = from as usize / 64;
        let here = *self.words.get(w)? & (u64::MAX << (from % 64));
        if here != 0 {
            return Some((w * 64) as u32 + here.trailing_zeros());
        }
        // The next non-empty word after `w`, through the summary.
        let next = w + 1;
        let mut s = next / 64;
        let mut bits = *self.summary.get(s)? & u64::MAX.checked_shl((next % 64) as u32)?;
        loop {
            if bits != 0 {
                let w = s * 64 + bits.trailing_zeros() as usize;
                return Some((w * 64) as u32 + self.words[w].trailing_zeros());
            }
            s += 1;
            bits = *self.summary.get(s)?;
        }
    }

    pub(crate) fn clear_all(&mut self) {
        self.words.fill(0);
        self.summary.fill(0);
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        (self.words.len() + self.summary.len()) * std::mem::size_of::<u64>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_first_set_slot_at_every_size() {
        for size in [2usize, 64, 128, 4096, 65_536] {
            let mut o = Occupancy::new(size);
            assert_eq!(o.first_from(0), None);
            let slots: Vec<u32> = [0, 1, 63, 64, 65, 4095, 4096, 40_000, 65_535]
                .into_iter()
                .filter(|&s| (s as usize) < size)
                .collect();
            for &s in &slots {
                o.set(s);
            }
            for from in 0..size as u32 {
                let want = slots.iter().copied().find(|&s| s >= from);
                assert_eq!(o.first_from(from), want, "size {size}, from {from}");
                if from > 70 && size > 4096 {
                    break; // the rest is covered by the sparse probes below
                }
            }
            for &s in &slots {
                assert_eq!(o.first_from(s), Some(s));
                assert!(o.is_set(s));
            }
            for &s in &slots {
                o.clear(s);
                assert!(!o.is_set(s));
            }
            assert_eq!(o.first_from(0), None);
            o.set(slots[slots.len() - 1]);
            assert_eq!(o.first_from(0), Some(slots[slots.len() - 1]));
            o.clear_all();
            assert_eq!(o.first_from(0), None);
        }
    }
}
