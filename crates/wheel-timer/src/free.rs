//! The owner's list of a shard's vacant slots: bounded lists of recent frees, and a sweep up the
//! slot array for the rest, so live tasks gather at the low end after a burst.

/// How many vacant slots the owner keeps listed on its stack, and takes from one chain of slots
/// vacated elsewhere: a slot freed beyond them is left on no list, for a sweep to find.
pub(crate) const LISTED: usize = 1024;

/// The owner's vacant slots, in the order it takes them:
///
/// 1. a stack of its own frees (the most recent first: still in the cache), at most
///    [`LISTED`];
/// 2. a sweep up the slot array, lowest first, when one is going on (see below);
/// 3. a chain taken whole from the stack of slots vacated elsewhere, each slot's `link` naming
///    the next (index + 1, 0 at the end), at most [`LISTED`] of it;
/// 4. (in [`Slots::alloc`](crate::slots::Slots::alloc)) the next chain, else a sweep if
///    enough slots are unlisted, else a new slot.
///
/// The lists are bounded so that a burst does not decide where a timer's tasks live for the rest
/// of its life: freed by the million in a random order (a burst fired on the pool, cancelled by
/// request handlers, or left by a timer that is gone), the slots would be handed out in that
/// order, scattered over hundreds of MB, a cache and TLB miss on most adds and cancels. Past the
/// bounds they are only counted (`unlisted`), and once at least a sixteenth of the slots (and
/// [`LISTED`]) are, the owner sweeps the array from slot 0 and takes the vacant ones it passes,
/// so live tasks gather at the low end again. A sweep reads each slot's word once, in order (the
/// prefetcher's best case), so about 16 at most per slot it finds, spread over the allocations
/// that take them; until one starts, the shard may grow past the slots it has by up to that
/// sixteenth.
///
/// The chain is walked one slot per allocation, not all at once: the slot an allocation takes
/// is read anyway (its word), its `link` with it, and the next one is prefetched then. Walking
/// a chain of thousands at once (as refills did) was a pointer chase of one cache miss per
/// slot, serial: 1.6% of a W11 profile on its own. The sweep, likewise, moves as allocations
/// need it.
///
/// A slot may be listed twice (on a list, and passed by a sweep): harmless, since
/// [`Mine::claim`](crate::slot::Mine::claim) hands a slot out only while it is vacant, and only
/// the owner claims.
#[derive(Debug, Default)]
pub(crate) struct FreeList {
    stack: Vec<u32>,
    /// The sweep's next slot, and where it ends (`sweep == sweep_end`: no sweep).
    sweep: u32,
    sweep_end: u32,
    /// The chain's next slot + 1 (0: none), and how many more of it to take.
    chain: u64,
    chain_left: usize,
    /// Vacant slots on no list, as far as the owner knows (counted when they were left off; a
    /// sweep started since may have found some).
    unlisted: usize,
}

impl FreeList {
    /// A list with nothing on it that sweeps slots `0..len` (a shard taken over from a timer
    /// that is gone: `Slots::repack`).
    #[cfg(not(loom))]
    pub(crate) fn sweeping(len: u32) -> FreeList {
        FreeList {
            sweep_end: len,
            ..FreeList::default()
        }
    }

    /// Keeps slot `i`, vacated on the owner thread.
    #[inline]
    pub(crate) fn push(&mut self, i: u32) {
        if self.stack.len() < LISTED {
            self.stack.push(i);
        } else {
            self.unlisted += 1;
        }
    }

    /// The slot the next [`pop`](Self::pop) takes from the stack, if any.
    #[inline(always)]
    pub(crate) fn next_stacked(&self) -> Option<u32> {
        self.stack.last().copied()
    }

    /// Takes a slot: from the stack, else the next vacant one of the sweep (`vacant(i)` says
    /// whether slot `i` is), else from the chain (`link(i)` is slot `i`'s `link`).
    #[inline(always)]
    pub(crate) fn pop(
        &mut self,
        vacant: impl Fn(u32) -> bool,
        link: impl FnOnce(u32) -> u64,
    ) -> Option<u32> {
        match self.stack.pop() {
            Some(i) => Some(i),
            None => self.pop_unstacked(vacant, link),
        }
    }

    #[cold]
    pub(crate) fn pop_unstacked(
        &mut self,
        vacant: impl Fn(u32) -> bool,
        link: impl FnOnce(u32) -> u64,
    ) -> Option<u32> {
        while self.sweep < self.sweep_end {
            self.sweep += 1;
            if vacant(self.sweep - 1) {
                return Some(self.sweep - 1);
            }
        }
        if self.chain_left == 0 {
            return None;
        }
        let i = self.chain.checked_sub(1)? as u32;
        self.chain = link(i);
        self.chain_left -= 1;
        Some(i)
    }

    /// Takes the rest of a chain of `depth` slots whose first one the caller took: `rest` is
    /// that one's `link`. At most [`LISTED`] of the chain are taken in all.
    pub(crate) fn take_chain(&mut self, rest: u64, depth: usize) {
        let kept = depth.min(LISTED);
        self.chain = rest;
        self.chain_left = kept.saturating_sub(1);
        self.unlisted += depth - kept;
    }

    /// Starts a sweep of slots `0..len` if enough of them are unlisted (or `anyway`, and any
    /// are); true if it did.
    pub(crate) fn start_sweep(&mut self, len: u32, anyway: bool) -> bool {
        let enough = self.unlisted >= LISTED.max(len as usize / 16);
        if !(enough || anyway && self.unlisted > 0) {
            return false;
        }
        // Every slot counted so far is below `len` and vacant: the sweep passes it.
        self.unlisted = 0;
        (self.sweep, self.sweep_end) = (0, len);
        true
    }
}
