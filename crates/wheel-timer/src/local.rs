//! The thread-local cache through which an adding thread finds its own shard of a timer: no lock
//! and no write to a line another thread writes. A thread's first add to a timer attaches a shard
//! (a spare one left by an exited thread, or a new one); the thread's exit gives it back.

// loom's `thread_local!` has no `const { .. }` form, and this must build under both.
#![allow(clippy::missing_const_for_thread_local)]

use std::cell::{Cell, RefCell};
use std::sync::{Arc, Weak};

use crate::core::Core;
use crate::registry::{self, ShardRef};
use crate::shard::Shard;
use crate::slot::OwnerToken;

/// Thread keys are never reused: a shard's owner key can be compared without a race against a
/// later thread that happens to reuse some address.
static NEXT_KEY: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

crate::loom::thread_local! {
    /// The entry this thread used last (the fast path: a shared borrow and a comparison).
    static CURRENT: RefCell<Option<Owner>> = RefCell::new(None);
    /// This thread's other entries, one per other timer it added to.
    static OTHERS: RefCell<Vec<Owner>> = RefCell::new(Vec::new());
}

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

/// What one thread keeps for one timer: its shard, and its ownership of it. Dropping it (the
/// thread exits, or the timer is gone) gives the shard back; its tasks stay where they are.
pub(crate) struct Owner {
    core_id: u64,
    core: Weak<Core>,
    pub(crate) shard: ShardRef,
    token: Option<OwnerToken>,
}

impl Owner {
    fn attach(core: &Arc<Core>) -> Owner {
        let (shard, token) = core.attach_shard();
        Owner {
            core_id: core.id,
            core: Arc::downgrade(core),
            shard,
            token: Some(token),
        }
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        if let Some(token) = self.token.take() {
            self.shard.detach(token);
        }
        match self.core.upgrade() {
            Some(core) => core.spare_shard(&self.shard),
            None => registry::retire(self.shard.id), // its timer is gone: to the next one
        }
    }
}

/// This thread's shard of a timer, for one add: the thread's own (attached on its first add),
/// or, while the thread-local cache is unavailable (the thread is being torn down, or a
/// re-entrant call holds it), a shard attached for this one add and given back when the lease
/// is dropped.
pub(crate) enum Lease {
    Cached(ShardRef),
    Temporary(Owner),
}

impl Lease {
    #[inline(always)]
    pub(crate) fn shard(&self) -> &Shard {
        match self {
            Lease::Cached(shard) => shard,
            Lease::Temporary(owner) => &owner.shard,
        }
    }
}

/// See [`Lease`].
#[inline(always)]
pub(crate) fn lease(core: &Arc<Core>) -> Lease {
    let cached = CURRENT.try_with(|current| {
        let current = current.try_borrow().ok()?;
        let owner = current.as_ref()?;
        (owner.core_id == core.id).then(|| registry::share(&owner.shard))
    });
    match cached {
        Ok(Some(shard)) => Lease::Cached(shard),
        _ => lease_slow(core),
    }
}

#[cold]
fn lease_slow(core: &Arc<Core>) -> Lease {
    let switched = CURRENT.try_with(|current| {
        let mut current = current.try_borrow_mut().ok()?;
        let owner = switch(core, current.take());
        let shard = registry::share(&owner.shard);
        *current = Some(owner);
        Some(shard)
    });
    match switched {
        Ok(Some(shard)) => Lease::Cached(shard),
        _ => Lease::Temporary(Owner::attach(core)),
    }
}

/// `core`'s entry (moving `other`, the previous current entry, aside), attaching a shard if this
/// thread has none for it yet.
fn switch(core: &Arc<Core>, other: Option<Owner>) -> Owner {
    let found = OTHERS
        .try_with(|others| {
            let mut others = others.try_borrow_mut().ok()?;
            // Entries of timers that are gone give their shards back now.
            others.retain(|o| o.core.strong_count() > 0);
            let found = others
                .iter()
                .position(|o| o.core_id == core.id)
                .map(|at| others.swap_remove(at));
            if let Some(other) = other.filter(|o| o.core.strong_count() > 0) {
                others.push(other);
            }
            found
        })
        .ok()
        .flatten();
    found.unwrap_or_else(|| Owner::attach(core))
}
