//! The thread-local cache through which an adding thread finds its own shard of a timer: no lock
//! and no write to a line another thread writes. A thread's first add to a timer attaches a shard
//! (a spare one left by an exited thread, or a new one); the thread's exit gives it back.

// loom's `thread_local!` has no `const { .. }` form, and this must build under both.
#![allow(clippy::missing_const_for_thread_local)]

use std::cell::RefCell;
use std::sync::{Arc, Weak};

use crate::service::core::Core;
use crate::service::core::Shard;
use crate::service::registry::{self, ShardRef};
use crate::slots::owner::OwnerToken;

crate::loom::thread_local! {
    /// The entry this thread used last (the fast path: a shared borrow and a comparison).
    static CURRENT: RefCell<Option<Attachment>> = RefCell::new(None);
    /// This thread's other entries, one per other timer it added to.
    static OTHERS: RefCell<Vec<Attachment>> = RefCell::new(Vec::new());
}

#[cfg(not(loom))]
std::thread_local! {
    /// `(timer id, shard)` of the entry in `CURRENT`, or `(0, None)`: the add path's lookup,
    /// one load and a comparison. `CURRENT` needs a destructor (it gives the shard back), and a
    /// thread-local with one costs a state check and a `RefCell` borrow on every access (11 of
    /// the 400 instructions of an add + cancel). Set when the entry in `CURRENT` is looked up or
    /// put there; cleared when it stops being current (it moves aside, or is dropped at the
    /// thread's end), so while it names a shard, `CURRENT` holds that shard's owner entry.
    static FAST: std::cell::Cell<(u64, Option<ShardRef>)> = const { std::cell::Cell::new((0, None)) };
}

/// What one thread keeps for one timer: its shard, and its ownership of it. Dropping it (the
/// thread exits, or the timer is gone) gives the shard back; its tasks stay where they are.
pub(crate) struct Attachment {
    core_id: u64,
    core: Weak<Core>,
    pub(crate) shard: ShardRef,
    token: Option<OwnerToken>,
}

impl Attachment {
    fn attach(core: &Arc<Core>) -> Attachment {
        let (shard, token) = core.attach_shard();
        Attachment {
            core_id: core.id,
            core: Arc::downgrade(core),
            shard,
            token: Some(token),
        }
    }
}

impl Drop for Attachment {
    fn drop(&mut self) {
        forget_fast(self);
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
    Temporary(Attachment),
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

/// Makes `shard`, the shard of the entry for timer `core_id` just put in `CURRENT`, the fast
/// path's answer.
#[inline]
fn set_fast(core_id: u64, shard: &ShardRef) {
    #[cfg(not(loom))]
    FAST.set((core_id, Some(*shard)));
    #[cfg(loom)]
    let _ = (core_id, shard);
}

/// `owner` is no longer the current entry (it moves aside, or is dropped): the fast path must
/// not answer with its shard. (A temporary entry's drop finds another shard there, or none.)
#[inline]
fn forget_fast(owner: &Attachment) {
    #[cfg(not(loom))]
    if let (id, Some(shard)) = FAST.get()
        && id == owner.core_id
        && shard.id == owner.shard.id
    {
        FAST.set((0, None));
    }
    #[cfg(loom)]
    let _ = owner;
}

/// See [`Lease`].
#[inline(always)]
pub(crate) fn lease(core: &Arc<Core>) -> Lease {
    #[cfg(not(loom))]
    if let (id, Some(shard)) = FAST.get()
        && id == core.id
    {
        return Lease::Cached(shard);
    }
    lease_current(core)
}

/// The lookup through `CURRENT` (every lookup under loom, which has no `FAST`).
#[cfg_attr(not(loom), cold)]
fn lease_current(core: &Arc<Core>) -> Lease {
    let cached = CURRENT.try_with(|current| {
        let current = current.try_borrow().ok()?;
        let owner = current.as_ref()?;
        (owner.core_id == core.id).then(|| {
            let shard = registry::share(&owner.shard);
            set_fast(owner.core_id, &shard);
            shard
        })
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
        let previous = current.take();
        if let Some(previous) = &previous {
            forget_fast(previous);
        }
        match switch(core, previous) {
            Ok(owner) => {
                let shard = registry::share(&owner.shard);
                set_fast(owner.core_id, &shard);
                *current = Some(owner);
                Some(shard)
            }
            Err(previous) => {
                if let Some(p) = &previous {
                    set_fast(p.core_id, &p.shard);
                }
                *current = previous;
                None
            }
        }
    });
    match switched {
        Ok(Some(shard)) => Lease::Cached(shard),
        _ => Lease::Temporary(Attachment::attach(core)),
    }
}

/// `core`'s entry, attaching a shard if this thread has none for it yet, with `other` (the
/// previous current entry) moved aside among the thread's other entries. `Err(other)` if those
/// are out of reach (being torn down at the thread's exit, or borrowed further up this thread's
/// stack): then `other` must stay current, not be dropped. Dropped, it would give its shard up,
/// and an add to its timer may be in progress further up this thread's stack, for this lookup
/// can run inside one (a clock and an allocator are foreign code, and may add to another
/// timer): that add would go on in a shard it no longer owns, which another thread may attach.
fn switch(core: &Arc<Core>, other: Option<Attachment>) -> Result<Attachment, Option<Attachment>> {
    let mut other = other;
    let found = OTHERS.try_with(|others| {
        let mut others = others.try_borrow_mut().ok()?;
        // Entries of timers that are gone give their shards back now (nothing adds to them).
        others.retain(|o| o.core.strong_count() > 0);
        let found = others
            .iter()
            .position(|o| o.core_id == core.id)
            .map(|at| others.swap_remove(at));
        if let Some(o) = other.take().filter(|o| o.core.strong_count() > 0) {
            others.push(o);
        }
        Some(found)
    });
    match found {
        Ok(Some(found)) => Ok(found.unwrap_or_else(|| Attachment::attach(core))),
        _ => Err(other),
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::cell::RefCell;
    use std::sync::Mutex;
    use std::time::Duration;

    use crate::{Task, Timer, WeakTimer};

    /// The shard an add on this thread lands in (the task is cancelled at once).
    fn shard_of(timer: &Timer) -> u32 {
        let h = timer
            .add_or_submit(Task::after(Duration::from_secs(60), || {}))
            .expect("the timer is open and unbounded");
        assert!(h.cancel());
        h.shard_id()
    }

    #[test]
    fn a_thread_keeps_its_shard_of_each_timer_as_it_switches_between_them() {
        std::thread::spawn(|| {
            let a = Timer::new().unwrap();
            let b = Timer::new().unwrap();
            let (sa, sb) = (shard_of(&a), shard_of(&b));
            assert_ne!(sa, sb, "each timer has its own shards");
            for _ in 0..3 {
                assert_eq!(shard_of(&a), sa);
                assert_eq!(shard_of(&b), sb);
            }
            drop(a);
            let c = Timer::new().unwrap();
            let sc = shard_of(&c);
            assert_ne!(sc, sb);
            assert_eq!(shard_of(&b), sb);
            assert_eq!(shard_of(&c), sc);
            assert_eq!(b.stats().added, 5, "every add to b reached b");
            assert_eq!(c.stats().added, 2, "every add to c reached c");
        })
        .join()
        .unwrap();
    }

    /// What the add from a thread-local's destructor returned: `Ok(())`, or the error.
    static LATE_ADD: Mutex<Option<Result<(), String>>> = Mutex::new(None);

    /// Adds to its timer when the thread's locals are torn down.
    struct AddOnExit(Option<WeakTimer>);

    impl Drop for AddOnExit {
        fn drop(&mut self) {
            if let Some(timer) = self.0.take() {
                let added = timer
                    .add_or_submit(Task::after(Duration::from_secs(60), || {}))
                    .map(|_| ())
                    .map_err(|e| e.to_string());
                *LATE_ADD.lock().unwrap() = Some(added);
            }
        }
    }

    thread_local! {
        static ON_EXIT: RefCell<AddOnExit> = const { RefCell::new(AddOnExit(None)) };
    }

    #[test]
    fn an_add_from_a_thread_local_destructor_after_the_shard_cache_is_gone_succeeds() {
        let timer = Timer::new().unwrap();
        let weak = timer.downgrade();
        // A spawned thread, not a scoped one: its join waits for the thread's locals to be
        // torn down (a scoped thread counts as finished once its closure returned).
        std::thread::spawn(move || {
            // Registered before the thread's first add registers the shard cache, so (thread
            // locals are torn down in reverse order on the platforms CI runs) its destructor
            // runs after the cache gave the shard back, and finds no cache to use.
            ON_EXIT.with(|e| e.borrow_mut().0 = Some(weak.clone()));
            let h = weak
                .add_or_submit(Task::after(Duration::from_secs(60), || {}))
                .expect("the timer is open and unbounded");
            assert!(h.cancel());
        })
        .join()
        .unwrap();
        let late = LATE_ADD.lock().unwrap().take();
        assert_eq!(late, Some(Ok(())), "the late add was accepted");
        assert_eq!(timer.stats().added, 2);
        assert_eq!(timer.pending(), 1, "the late task waits in the timer");
    }
}
