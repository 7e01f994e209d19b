//! A shard's owner side of its slots: which thread owns the shard, and that thread's free list.
//!
//! Only the owner thread allocates slots, and that is what lets an add fill a slot's cell without
//! a compare-and-swap (`Vacant::publish` in `slot.rs`). The proof of ownership is an
//! [`OwnedFree`], which only [`Ownership::with_free`] lends, after checking the owner; its `claim`,
//! which turns a vacant slot into a `Vacant`, lives in `slot.rs`, next to the cell it gives
//! access to.

#![allow(unsafe_code)]
// the free list's cell, touched only by the owner thread
// loom's `thread_local!` has no `const { .. }` form, and this must build under both.
#![allow(clippy::missing_const_for_thread_local)]

use std::cell::Cell;
use std::marker::PhantomData;

use crate::loom::UnsafeCell;
use crate::loom::atomic::{AtomicBool, AtomicU64, Ordering::*};
use crate::slots::free_list::FreeList;

/// Thread keys are never reused: a shard's owner key can be compared without a race against a
/// later thread that happens to reuse some address.
static NEXT_KEY: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

#[cfg(not(loom))]
std::thread_local! {
    // No destructor, so it is there until the thread's very end.
    static KEY: Cell<u64> = const { Cell::new(0) };
}

#[cfg(loom)]
loom::thread_local! {
    static KEY: Cell<u64> = Cell::new(0);
}

/// This thread's key: unique for the life of the process, never 0 (which marks a shard without
/// owner).
#[inline(always)]
pub(crate) fn thread_key() -> u64 {
    KEY.with(|k| match k.get() {
        0 => new_key(k),
        key => key,
    })
}

#[cold]
fn new_key(k: &Cell<u64>) -> u64 {
    k.set(NEXT_KEY.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    k.get()
}

/// Proof that this thread owns a shard's slots (from [`Ownership::attach`]). Not `Send`: only the
/// thread that attached can give the shard up.
pub(crate) struct OwnerToken {
    _not_send: PhantomData<*const ()>,
}

/// Clears `Ownership::busy` when dropped.
struct Busy<'a>(&'a AtomicBool);

impl Drop for Busy<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        self.0.store(false, Relaxed);
    }
}

/// A shard's owner side of its slots: which thread owns the shard, and that thread's free list.
/// Only the owner allocates, which is what makes [`Vacant::publish`](crate::slots::slot::Vacant::publish) sound.
pub(crate) struct Ownership {
    /// `thread_key()` of the thread that owns the shard; 0 while it has none.
    owner: AtomicU64,
    /// The owner is inside `with_free` (a guard against re-entry on its own thread).
    busy: AtomicBool,
    /// Vacant slots only the owner hands out.
    free: UnsafeCell<FreeList>,
}

// SAFETY: `free` is the only field that is not `Sync`; it is touched only inside `with_free`, on
// the one thread whose key is in `owner` (see the SAFETY comment there).
unsafe impl Sync for Ownership {}

impl Ownership {
    pub(crate) fn new() -> Self {
        Ownership {
            owner: AtomicU64::new(0),
            busy: AtomicBool::new(false),
            free: UnsafeCell::new(FreeList::default()),
        }
    }

    /// Makes this thread the owner, if there is none.
    pub(crate) fn attach(&self) -> Option<OwnerToken> {
        let key = thread_key();
        self.owner
            .compare_exchange(0, key, AcqRel, Acquire)
            .ok()
            .map(|_| OwnerToken {
                _not_send: PhantomData,
            })
    }

    /// Gives ownership up (the free list stays for the next owner).
    pub(crate) fn detach(&self, _token: OwnerToken) {
        self.owner.store(0, Release);
    }

    /// True on the owner thread.
    #[inline(always)]
    pub(crate) fn owned_here(&self) -> bool {
        self.owner.load(Acquire) == thread_key()
    }

    /// Runs `f` with the owner's free list, if this thread is the owner and is not already
    /// inside a call of this. (`f` only pushes and pops; if it panicked, the list would be left
    /// as it was then, still a list of slot numbers that `claim` checks.)
    #[inline(always)]
    pub(crate) fn with_free<R>(&self, f: impl FnOnce(&mut OwnedFree<'_>) -> R) -> Option<R> {
        if !self.owned_here() || self.busy.load(Relaxed) {
            return None;
        }
        self.busy.store(true, Relaxed);
        // Cleared however `f` ends: a panic (a bug) must not leave the shard refusing every add.
        let _busy = Busy(&self.busy);
        Some(self.free.with_mut(|free| {
            // SAFETY: this thread owns the shard (its key is the owner's: keys are unique and
            // only `attach` on this thread set it, only `detach` with this thread's non-`Send`
            // token clears it), so no other thread gets here; `busy` rules out a second borrow
            // on this thread. The acquire load of `owner` sees the previous owner's last writes.
            let free = unsafe { &mut *free };
            f(&mut OwnedFree { free })
        }))
    }
}

/// The owner's free list as [`Ownership::with_free`] lends it, and the proof that the caller is the
/// shard's owner thread (only `with_free` makes one, after checking): what [`claim`](Self::claim)
/// needs. One check of the owner per allocation, not two (12 of the 389 instructions of an add
/// + cancel).
pub(crate) struct OwnedFree<'f> {
    free: &'f mut FreeList,
}

impl std::ops::Deref for OwnedFree<'_> {
    type Target = FreeList;
    #[inline(always)]
    fn deref(&self) -> &FreeList {
        self.free
    }
}

impl std::ops::DerefMut for OwnedFree<'_> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut FreeList {
        self.free
    }
}
