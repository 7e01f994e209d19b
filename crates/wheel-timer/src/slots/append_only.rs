//! An append-only array whose elements never move: chunk `c` holds `FIRST << c` elements and is
//! allocated the first time an index in it is asked for (the first chunk at once), so a reference
//! to an element stays valid for the array's life while other threads grow it. Reads take no lock;
//! an index in the first chunk costs one comparison.

use std::sync::OnceLock;

/// Elements in the first chunk; each next chunk is twice as large.
#[cfg(not(loom))]
const FIRST: usize = 64;
/// Under loom, every element of a chunk that holds loom atomics is an object the model creates
/// and tracks on every execution it explores, and the models use a handful of slots: a small
/// first chunk keeps the models' cost in the interleavings, where it belongs.
#[cfg(loom)]
const FIRST: usize = 4;
/// Chunks: `FIRST * (2^CHUNKS - 1)` elements in all, beyond `u32::MAX`.
const CHUNKS: usize = 27 + (64 / FIRST).trailing_zeros() as usize;

/// The largest index a [`AppendOnly`] can hold.
pub(crate) const MAX_INDEX: usize = FIRST * ((1 << CHUNKS) - 1) - 1;

pub(crate) struct AppendOnly<T> {
    /// Chunk 0, allocated with the array.
    first: Box<[T]>,
    /// Chunks 1.. (index 0 unused).
    chunks: [OnceLock<Box<[T]>>; CHUNKS],
}

/// `(chunk, offset)` of index `i`.
#[inline]
fn locate(i: usize) -> (usize, usize) {
    let j = i / FIRST + 1;
    let chunk = (usize::BITS - 1 - j.leading_zeros()) as usize;
    (chunk, i - FIRST * ((1 << chunk) - 1))
}

impl<T: Default> AppendOnly<T> {
    pub(crate) fn new() -> Self {
        AppendOnly {
            first: (0..FIRST).map(|_| T::default()).collect(),
            chunks: std::array::from_fn(|_| OnceLock::new()),
        }
    }

    /// The element at `i`, if its chunk has been allocated.
    #[inline]
    pub(crate) fn get(&self, i: usize) -> Option<&T> {
        match self.first.get(i) {
            Some(t) => Some(t),
            None => self.get_later(i),
        }
    }

    #[inline]
    fn get_later(&self, i: usize) -> Option<&T> {
        let (chunk, offset) = locate(i);
        self.chunks.get(chunk)?.get().map(|c| &c[offset])
    }

    /// The element at `i`, allocating its chunk (of default elements) if needed. `None` beyond
    /// [`MAX_INDEX`].
    pub(crate) fn get_or_grow(&self, i: usize) -> Option<&T> {
        if let Some(t) = self.first.get(i) {
            return Some(t);
        }
        let (chunk, offset) = locate(i);
        let c = self
            .chunks
            .get(chunk)?
            .get_or_init(|| (0..FIRST << chunk).map(|_| T::default()).collect());
        Some(&c[offset])
    }

    /// Bytes of the chunks allocated so far.
    pub(crate) fn heap_bytes(&self) -> usize {
        std::mem::size_of_val::<[T]>(&self.first)
            + self
                .chunks
                .iter()
                .filter_map(OnceLock::get)
                .map(|c| std::mem::size_of_val::<[T]>(c))
                .sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_tile_the_indexes() {
        // (index, chunk, offset)
        let table = [
            (0, 0, 0),
            (63, 0, 63),
            (64, 1, 0),
            (191, 1, 127),
            (192, 2, 0),
            (MAX_INDEX, CHUNKS - 1, (FIRST << (CHUNKS - 1)) - 1),
        ];
        for (i, chunk, offset) in table {
            assert_eq!(locate(i), (chunk, offset), "index {i}");
        }
        assert!(MAX_INDEX >= u32::MAX as usize);
    }

    #[test]
    fn elements_stay_put_while_the_array_grows() {
        let a: AppendOnly<std::sync::atomic::AtomicUsize> = AppendOnly::new();
        assert!(
            a.get(5).is_some(),
            "the first chunk is there from the start"
        );
        assert!(a.get(FIRST).is_none(), "the others when asked for");
        let first = a.get_or_grow(5).unwrap() as *const _;
        for i in 0..10_000 {
            a.get_or_grow(i)
                .unwrap()
                .store(i, std::sync::atomic::Ordering::Relaxed);
        }
        assert_eq!(a.get(5).unwrap() as *const _, first);
        assert_eq!(
            a.get(9_999)
                .unwrap()
                .load(std::sync::atomic::Ordering::Relaxed),
            9_999
        );
        assert!(a.get_or_grow(MAX_INDEX + 1).is_none());
    }
}
