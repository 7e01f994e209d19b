//! The timer's lifecycle, owned here and nowhere else: open, closing (shutdown has begun: adds
//! are refused, running periodic tasks go back to the caller of `shutdown`), closed (shutdown
//! has returned).

use crate::loom::atomic::{
    AtomicU8,
    Ordering::{Relaxed, SeqCst},
};

const OPEN: u8 = 0;
const CLOSING: u8 = 1;
const CLOSED: u8 = 2;

/// Read with sequentially consistent loads ([`is_open`](Self::is_open)) wherever the answer
/// matters: an add publishes its slot and then reads the lifecycle; shutdown moves the lifecycle
/// and then scans the slots, so one of them sees the other (see `add.rs`). Only an early
/// refusal, which such a read backs later, reads it unordered
/// ([`looks_open`](Self::looks_open)).
pub(crate) struct Lifecycle(AtomicU8);

impl Lifecycle {
    pub(crate) fn new() -> Self {
        Lifecycle(AtomicU8::new(OPEN))
    }

    #[inline]
    pub(crate) fn is_open(&self) -> bool {
        self.0.load(SeqCst) == OPEN
    }

    /// `is_open` without ordering, for an early refusal that an ordered look later backs (an
    /// add reads the lifecycle again after it published its slot).
    #[inline]
    pub(crate) fn looks_open(&self) -> bool {
        self.0.load(Relaxed) == OPEN
    }

    /// Moves open -> closing; true for the one caller that did it.
    pub(crate) fn begin_close(&self) -> bool {
        self.0
            .compare_exchange(OPEN, CLOSING, SeqCst, SeqCst)
            .is_ok()
    }

    /// Moves closing -> closed.
    pub(crate) fn finish_close(&self) {
        self.0.store(CLOSED, SeqCst);
    }
}
