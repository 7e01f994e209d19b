//! The owner's list of a shard's vacant slots: bounded lists of recent frees, and a sweep up the
//! slot array for the rest, so live tasks gather at the low end after a burst.

/// How many vacant slots the owner keeps listed on its stack, and takes from one chain of slots
/// vacated elsewhere: a slot freed beyond them is left on no list, for a sweep to find.
pub(crate) const LISTED: usize = 1024;

/// Most slot words a sweep reads for one allocation: past them the allocation takes a new slot,
/// and the sweep goes on from there at the next one (a sweep from slot 0 may first pass a long
/// run of long-lived tasks: read in one go, 400k of them took one add 27 ms in a debug build).
pub(crate) const SWEEP_STEP: u32 = 256;

/// The owner's vacant slots, in the order it takes them:
///
/// 1. a stack of its own frees (the most recent first: still in the cache), at most
///    [`LISTED`];
/// 2. a chain taken whole from the stack of slots vacated elsewhere, each slot's `link` naming
///    the next (index + 1, 0 at the end), at most [`LISTED`] of it;
/// 3. (in [`Slots::alloc`](crate::slots::Slots::alloc)) a sweep if enough slots are unlisted,
///    else the next chain, else a new slot.
///
/// The lists are bounded so that a burst does not decide where a timer's tasks live for the rest
/// of its life: freed by the million in a random order (a burst fired on the pool, cancelled by
/// request handlers, or left by a timer that is gone), the slots would be handed out in that
/// order, scattered over hundreds of MB, a cache and TLB miss on most adds and cancels. Past the
/// bounds they are only counted (`unlisted`), and once [`LISTED`] and a sixteenth of the shard's
/// slots are, the owner sweeps the array from slot 0 and takes the vacant slots it passes, so
/// live tasks gather at the low end again. A sweep reads each slot's word once, in order (the
/// prefetcher's best case): about 16 reads per slot it finds, at most [`SWEEP_STEP`] for one
/// allocation. Until a sweep starts the shard may grow by that many slots past those it has.
///
/// **No slot is on two lists.** A slot on the vacated stack or a chain is linked through its
/// own `link`, which its next task overwrites: handed out by a sweep while still linked, it
/// would derail the chain (a wheel id read as a slot index). So while a sweep is going on
/// nothing is linked: the vacated stack holds no chain when it starts (the sweep passes every
/// slot that was on it), and slots freed elsewhere meanwhile are only counted in its head word
/// (`Slots::release_elsewhere`). The owner's stack takes only slots the sweep has passed for
/// good (below it), so a sweep going on does not stop the owner from reusing a slot it has just
/// freed (the common case: W6's add + cancel). [`Mine::claim`](crate::slot::Mine::claim) still
/// checks that a slot is vacant before handing it out.
///
/// The chain is walked one slot per allocation, not all at once: the slot an allocation takes
/// is read anyway (its word), its `link` with it, and the next one is prefetched then. Walking
/// a chain of thousands at once (as refills did) was a pointer chase of one cache miss per
/// slot, serial: 1.6% of a W11 profile on its own.
#[derive(Debug)]
pub(crate) struct FreeList {
    stack: Vec<u32>,
    /// The chain's next slot + 1 (0: none), and how many more of it to take.
    chain: u64,
    chain_left: usize,
    /// The next slot a sweep reads, or [`NO_SWEEP`]. A sweep stays on after reading its last
    /// slot (`sweep == sweep_end`) until the owner's next refill ends it ([`end_sweep`]). The
    /// stack takes only slots below it, which the sweep has passed for good.
    ///
    /// [`end_sweep`]: Self::end_sweep
    sweep: u32,
    sweep_end: u32,
    /// Vacant slots on no list, as far as the owner knows (counted when they were left off; a
    /// sweep going on may find some).
    unlisted: usize,
}

/// `FreeList::sweep` when no sweep is going on (above every slot: the stack takes any).
const NO_SWEEP: u32 = u32::MAX;

impl Default for FreeList {
    fn default() -> Self {
        FreeList {
            stack: Vec::new(),
            chain: 0,
            chain_left: 0,
            sweep: NO_SWEEP,
            sweep_end: 0,
            unlisted: 0,
        }
    }
}

impl FreeList {
    /// Keeps slot `i`, vacated on the owner thread: on the stack if it has room and a sweep going
    /// on has passed `i`, else only counted.
    #[inline]
    pub(crate) fn push(&mut self, i: u32) {
        if self.stack.len() < LISTED && i < self.sweep {
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

    /// Takes a slot: from the stack, else the next vacant one of a sweep (`vacant(i)` says
    /// whether slot `i` is; at most [`SWEEP_STEP`] read), else from the chain (`link(i)` is
    /// slot `i`'s `link` if `i` is vacant and its link names a slot, `None` if not).
    #[inline(always)]
    pub(crate) fn pop(
        &mut self,
        vacant: impl Fn(u32) -> bool,
        link: impl FnOnce(u32) -> Option<u64>,
    ) -> Option<u32> {
        match self.stack.pop() {
            Some(i) => Some(i),
            None => self.pop_unstacked(vacant, link),
        }
    }

    #[cold]
    fn pop_unstacked(
        &mut self,
        vacant: impl Fn(u32) -> bool,
        link: impl FnOnce(u32) -> Option<u64>,
    ) -> Option<u32> {
        if self.is_sweeping() {
            return self.swept(vacant, SWEEP_STEP);
        }
        if self.chain_left == 0 {
            return None;
        }
        let i = self.chain.checked_sub(1)? as u32;
        self.chain_left -= 1;
        match link(i) {
            Some(next) => self.chain = next,
            None => {
                // A broken chain (a bug elsewhere): what is left of it waits for a sweep.
                self.unlisted += self.chain_left;
                (self.chain, self.chain_left) = (0, 0);
            }
        }
        Some(i)
    }

    /// The next vacant slot of the sweep, reading at most `step` slot words.
    fn swept(&mut self, vacant: impl Fn(u32) -> bool, step: u32) -> Option<u32> {
        let stop = self.sweep_end.min(self.sweep.saturating_add(step));
        while self.sweep < stop {
            self.sweep += 1;
            if vacant(self.sweep - 1) {
                return Some(self.sweep - 1);
            }
        }
        None
    }

    /// Takes the rest of a chain of `depth` slots whose first one the caller took: `rest` is
    /// that one's `link` (`None`: a broken chain, whose rest waits for a sweep). At most
    /// [`LISTED`] of the chain are taken in all.
    pub(crate) fn take_chain(&mut self, rest: Option<u64>, depth: usize) {
        let kept = match rest {
            Some(rest) => {
                self.chain = rest;
                depth.clamp(1, LISTED)
            }
            None => 1,
        };
        self.chain_left = kept - 1;
        self.unlisted += depth.saturating_sub(kept);
    }

    /// True while a sweep is going on (see [`sweep_over`](Self::sweep_over)).
    pub(crate) fn is_sweeping(&self) -> bool {
        self.sweep != NO_SWEEP
    }

    /// The next slot a sweep going on reads.
    #[cfg(test)]
    pub(crate) fn sweep_at(&self) -> Option<u32> {
        self.is_sweeping().then_some(self.sweep)
    }

    /// True once a sweep going on has read its last slot.
    pub(crate) fn sweep_over(&self) -> bool {
        self.is_sweeping() && self.sweep >= self.sweep_end
    }

    /// True if enough slots are unlisted for a sweep of a shard of `len` slots to be worth it
    /// (or, `full`: the shard cannot grow, any are).
    pub(crate) fn wants_sweep(&self, len: u32, full: bool) -> bool {
        if full {
            self.unlisted > 0
        } else {
            self.unlisted >= LISTED.max(len as usize / 16)
        }
    }

    /// Starts a sweep of slots `0..len` (none may be listed: see the type's docs) and takes its
    /// first vacant slot, reading at most [`SWEEP_STEP`] (`full`: as many as it takes).
    pub(crate) fn start_sweep(
        &mut self,
        len: u32,
        full: bool,
        vacant: impl Fn(u32) -> bool,
    ) -> Option<u32> {
        debug_assert!(self.stack.is_empty() && self.chain_left == 0 && !self.is_sweeping());
        // Every slot counted so far is below `len` and vacant: the sweep passes it. What a
        // broken chain left is abandoned with it.
        *self = FreeList {
            stack: std::mem::take(&mut self.stack),
            ..FreeList::sweeping(len)
        };
        self.swept(vacant, if full { len } else { SWEEP_STEP })
    }

    /// A list with nothing on it that sweeps slots `0..len` (also a shard taken over from a
    /// timer that is gone: `Slots::repack`).
    pub(crate) fn sweeping(len: u32) -> FreeList {
        FreeList {
            sweep: 0,
            sweep_end: len,
            ..FreeList::default()
        }
    }

    /// Ends a sweep that has read its last slot; `freed_elsewhere` slots were vacated on other
    /// threads meanwhile (counted, not linked), so they are unlisted now.
    pub(crate) fn end_sweep(&mut self, freed_elsewhere: usize) {
        debug_assert!(self.sweep_over());
        self.sweep = NO_SWEEP;
        self.unlisted += freed_elsewhere;
    }
}
