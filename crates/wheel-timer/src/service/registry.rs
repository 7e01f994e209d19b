//! The process-wide registry of shards. A shard, once made, is never freed: when its timer is
//! gone it waits here, empty, for the next timer. So a [`TimerHandle`](crate::TimerHandle) is a
//! plain `(shard, slot)` number, with no reference count to keep its shard alive, and memory the
//! timers of a process use is their high-water mark, reused, not returned.
//!
//! A recycled shard is safe for old handles: a handle pins its slot (the slot is not reused while
//! a handle names it), and every task of a dead timer is final, so an old handle can only read its
//! answer or give its slot back.
//!
//! Under `cfg(loom)` the registry forgets a timer's shards when the timer is dropped instead
//! (loom's objects cannot outlive one model execution), and a lookup returns an `Arc`.

#[cfg(not(loom))]
mod imp {
    use std::sync::{Arc, Mutex, OnceLock};

    use crate::service::core::Shard;
    use crate::slots::append_only::AppendOnly;

    /// A shard as a lookup returns it: shards are never freed.
    #[derive(Clone, Copy)]
    pub(crate) struct ShardRef(&'static Shard);

    impl std::ops::Deref for ShardRef {
        type Target = Shard;
        #[inline(always)]
        fn deref(&self) -> &Shard {
            self.0
        }
    }

    /// The first shards: looked up with one load, no lazy initialisation to pass.
    const FIRST: usize = 1024;
    static FIRST_SHARDS: [OnceLock<Arc<Shard>>; FIRST] = [const { OnceLock::new() }; FIRST];

    struct Registry {
        /// Shards beyond the first `FIRST` (index `id - FIRST`).
        more: AppendOnly<OnceLock<Arc<Shard>>>,
        /// Shards made so far; ids below it are valid.
        len: Mutex<u32>,
        /// Shards of timers that are gone, waiting for a new timer.
        spare: Mutex<Vec<u32>>,
    }

    static REGISTRY: OnceLock<Registry> = OnceLock::new();

    fn registry() -> &'static Registry {
        REGISTRY.get_or_init(|| Registry {
            more: AppendOnly::new(),
            len: Mutex::new(0),
            spare: Mutex::new(Vec::new()),
        })
    }

    /// The shard with id `id`.
    #[inline(always)]
    pub(crate) fn shard(id: u32) -> ShardRef {
        let cell = match FIRST_SHARDS.get(id as usize) {
            Some(cell) => cell,
            None => more(id),
        };
        ShardRef(cell.get().expect("shard ids come from the registry"))
    }

    #[cold]
    fn more(id: u32) -> &'static OnceLock<Arc<Shard>> {
        registry()
            .more
            .get(id as usize - FIRST)
            .expect("shard ids come from the registry")
    }

    fn cell(id: u32) -> &'static OnceLock<Arc<Shard>> {
        match FIRST_SHARDS.get(id as usize) {
            Some(cell) => cell,
            None => registry()
                .more
                .get_or_grow(id as usize - FIRST)
                .expect("fewer than 2^32 shards"),
        }
    }

    /// Another reference to the same shard.
    pub(crate) fn share(shard: &ShardRef) -> ShardRef {
        *shard
    }

    /// A spare shard, or a new one made by `make(id)`; with its `Arc` (for the tick thread).
    pub(crate) fn take(make: impl FnOnce(u32) -> Shard) -> (u32, Arc<Shard>) {
        let r = registry();
        if let Some(id) = r.spare.lock().unwrap_or_else(|e| e.into_inner()).pop() {
            let shard = cell(id).get().expect("spare ids are registered");
            return (id, shard.clone());
        }
        let mut len = r.len.lock().unwrap_or_else(|e| e.into_inner());
        let id = *len;
        // `u32::MAX` is no shard: a handle's word and a sleep's "never armed" rely on it. (Four
        // billion shards, one per thread alive at once, is not a limit a process meets.)
        assert!(id < u32::MAX, "at most u32::MAX - 1 shards");
        let shard = Arc::new(make(id));
        cell(id)
            .set(shard.clone())
            .unwrap_or_else(|_| unreachable!("each id is set once"));
        *len += 1;
        (id, shard)
    }

    /// Shard `id`'s timer is gone and no thread owns it: it waits for the next timer.
    pub(crate) fn retire(id: u32) {
        registry()
            .spare
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(id);
    }
}

#[cfg(loom)]
mod imp {
    use std::sync::{Arc, Mutex};

    use crate::service::core::Shard;

    /// A shard as a lookup returns it: the model forgets shards with their timer.
    #[derive(Clone)]
    pub(crate) struct ShardRef(Arc<Shard>);

    impl std::ops::Deref for ShardRef {
        type Target = Shard;
        #[inline]
        fn deref(&self) -> &Shard {
            &self.0
        }
    }

    static REGISTRY: Mutex<Vec<Option<Arc<Shard>>>> = Mutex::new(Vec::new());

    pub(crate) fn shard(id: u32) -> ShardRef {
        ShardRef(
            REGISTRY.lock().unwrap()[id as usize]
                .clone()
                .expect("a live shard"),
        )
    }

    pub(crate) fn share(shard: &ShardRef) -> ShardRef {
        shard.clone()
    }

    pub(crate) fn take(make: impl FnOnce(u32) -> Shard) -> (u32, Arc<Shard>) {
        let mut all = REGISTRY.lock().unwrap();
        let id = all.len() as u32;
        let shard = Arc::new(make(id));
        all.push(Some(shard.clone()));
        (id, shard)
    }

    pub(crate) fn retire(id: u32) {
        REGISTRY.lock().unwrap()[id as usize] = None;
    }
}

pub(crate) use imp::{ShardRef, retire, shard, share, take};
