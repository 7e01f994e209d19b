//! The state a timer's threads share: configuration, clock, lifecycle, the tick thread, the
//! shards, the executor, and the counters of the fire path.

use std::sync::Arc;
use std::task::Waker;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use tickwheel_executor::Executor;
use tickwheel_reaper::{Clock, Reaper, duration_to_ns};

use crate::loom::Mutex;
use crate::loom::atomic::{AtomicU64, Ordering::*};
use crate::service::class::{Isolation, IsolationHook};
use crate::service::histogram::Histogram;
use crate::service::lifecycle::Lifecycle;
use crate::service::panic::Panics;
use crate::service::registry::{self, ShardRef};
use crate::service::route::Routes;
use crate::service::running::Running;
use crate::service::work::Work;
use crate::slots::owner::OwnerToken;

/// Ids of timers, so a thread's cache can tell them apart (a plain `std` atomic: ids are not part
/// of any modelled protocol).
static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// The shard as the service uses it: its slots hold [`Work`], it belongs to a [`Core`].
pub(crate) struct Tasks;

impl crate::shard::Kind for Tasks {
    type Work = Work;
    type Timer = Core;

    #[inline]
    fn waker(work: &mut Work) -> Option<&mut Option<Waker>> {
        match work {
            Work::Wake(waker) => Some(waker),
            _ => None,
        }
    }
}

pub(crate) type Shard = crate::shard::Shard<Tasks>;
pub(crate) type Returned = crate::shard::Returned<Work>;
pub(crate) type Run<'a> = crate::shard::Run<'a, Tasks>;
pub(crate) type Rearm<'a> = crate::shard::Rearm<'a, Tasks>;

// A slot, its word and its task, is one cache line (loom's atomics are larger).
#[cfg(not(loom))]
const _: () = assert!(std::mem::size_of::<crate::slots::slot::Slot<Work>>() == 64);

pub(crate) struct Core {
    pub(crate) id: u64,
    pub(crate) clock: Arc<dyn Clock>,
    /// The instant clock time 0 stands for (maps `Task::at` instants).
    pub(crate) origin: Instant,
    pub(crate) tick_ns: u64,
    pub(crate) wheel_size: usize,
    /// Adds due sooner than this are stamped at once (a clock read and the shard lock); later
    /// ones in batches. 64 ticks: batching then adds at most 1/64 of the delay.
    pub(crate) short_ns: u64,
    /// Stamp every add at once: the clock only moves by hand, so a reading is exact and free.
    pub(crate) exact: bool,
    pub(crate) max_pending: Option<u64>,
    /// Read by every add: kept on a line nothing else shares.
    pub(crate) lifecycle: CachePadded<Lifecycle>,
    pub(crate) reaper: Reaper<Shard>,
    /// Ids of this timer's shards (see `registry.rs`).
    shards: Mutex<Vec<u32>>,
    /// Of those, the ones whose thread left, waiting for a new thread.
    spare: Mutex<Vec<u32>>,
    /// The timer's executor: yours, or a [`LazyPool`](crate::service::pool::LazyPool) started
    /// by the first task handed to it.
    pub(crate) executor: Arc<dyn Executor>,
    /// Shared with the lazy pool, which reports through it a failure to start.
    pub(crate) panics: Arc<Panics>,
    pub(crate) fired: CachePadded<AtomicU64>,
    pub(crate) skipped: CachePadded<AtomicU64>,
    pub(crate) returned: AtomicU64,
    /// Repeating tasks and intervals whose period was below the tick (run at the tick).
    pub(crate) rounded: AtomicU64,
    /// Lateness of runs, from the instant the user meant.
    pub(crate) lateness: Histogram,
    /// Lateness of the tick thread's hand-offs, from the deadline.
    pub(crate) handoff: Histogram,
    pub(crate) running: Running,
    /// Periodic tasks handed back by their jobs while shutdown runs; `None` once it collected.
    pub(crate) late: Mutex<Option<Vec<Returned>>>,
    /// Classes, their isolation, per-task executors, the slow pool.
    pub(crate) routes: Routes,
}

/// What `TimerBuilder::build` settled.
pub(crate) struct Config {
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) origin: Instant,
    pub(crate) tick: Duration,
    pub(crate) wheel_size: usize,
    pub(crate) max_pending: Option<usize>,
    pub(crate) executor: Arc<dyn Executor>,
    pub(crate) panics: Arc<Panics>,
    pub(crate) isolation: Option<Isolation>,
    /// See [`TimerBuilder::on_isolation`](crate::TimerBuilder::on_isolation).
    pub(crate) on_isolation: Option<IsolationHook>,
    /// Thread names' prefix (for the slow pool).
    pub(crate) name: String,
}

impl Core {
    pub(crate) fn new(config: Config) -> Arc<Core> {
        let tick_ns = duration_to_ns(config.tick).max(1);
        let routes = Routes::new(
            config.isolation,
            config.on_isolation,
            &config.name,
            config.executor.threads(),
        );
        Arc::new(Core {
            id: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            exact: !config.clock.follows_real_time(),
            reaper: Reaper::new(config.clock.clone(), tick_ns),
            clock: config.clock,
            origin: config.origin,
            tick_ns,
            wheel_size: config.wheel_size,
            short_ns: tick_ns.saturating_mul(64),
            max_pending: config.max_pending.map(|m| m as u64),
            lifecycle: CachePadded::new(Lifecycle::new()),
            shards: Mutex::new(Vec::new()),
            spare: Mutex::new(Vec::new()),
            executor: config.executor,
            panics: config.panics,
            fired: CachePadded::new(AtomicU64::new(0)),
            skipped: CachePadded::new(AtomicU64::new(0)),
            returned: AtomicU64::new(0),
            rounded: AtomicU64::new(0),
            lateness: Histogram::new(),
            handoff: Histogram::new(),
            running: Running::new(),
            late: Mutex::new(Some(Vec::new())),
            routes,
        })
    }

    /// The instant of clock time `ns` (see [`instant_at`]).
    pub(crate) fn instant_of(&self, ns: u64) -> Instant {
        instant_at(self.origin, ns)
    }

    /// Clock nanoseconds of `at` (see [`ns_since`]).
    pub(crate) fn ns_of(&self, at: Instant) -> u64 {
        ns_since(self.origin, at)
    }

    /// Clock nanoseconds a task (or a tick) asked for at `at` is due at. An instant before the
    /// clock began is due at that beginning (at once), or, for a fixed-rate grid anchored at `at`
    /// (`grid`: its period, ns), at the grid's first point at or after the beginning: the points
    /// before it precede the timer and are not run.
    #[inline]
    pub(crate) fn ns_at(&self, at: Instant, grid: impl FnOnce() -> Option<u64>) -> u64 {
        match at.checked_duration_since(self.origin) {
            Some(since) => duration_to_ns(since),
            None => match grid() {
                None => 0,
                Some(period) => first_on_grid(self.origin - at, period.max(self.tick_ns)),
            },
        }
    }

    /// Every shard of this timer (a snapshot: a thread's first add may register another).
    pub(crate) fn shards(&self) -> Vec<ShardRef> {
        self.shards
            .lock()
            .iter()
            .map(|&id| registry::shard(id))
            .collect()
    }

    /// A shard for this thread (one whose thread left, a spare one of a timer that is gone, or a
    /// new one), and this thread's ownership of it.
    pub(crate) fn attach_shard(self: &Arc<Self>) -> (ShardRef, OwnerToken) {
        let own = self.spare.lock().pop();
        let id = match own {
            Some(id) => id,
            None => {
                let (id, shard) = registry::take(|id| {
                    Shard::new(id, Arc::downgrade(self), self.tick_ns, self.wheel_size)
                });
                shard.adopt(Arc::downgrade(self), self.tick_ns, self.wheel_size);
                self.shards.lock().push(id);
                self.reaper.register(shard);
                id
            }
        };
        let shard = registry::shard(id);
        let token = shard.attach().expect("a spare or new shard has no owner");
        (shard, token)
    }

    /// Keeps a shard whose thread left (its tasks stay where they are) for the next new thread.
    pub(crate) fn spare_shard(&self, shard: &Shard) {
        self.spare.lock().push(shard.id);
    }

    /// Tasks waiting for their deadline, summed over the shards (see `Timer::pending`).
    pub(crate) fn pending(&self) -> u64 {
        self.shards().iter().map(|s| s.pending()).sum()
    }

    /// Records the start of a run `late` nanoseconds after the instant the user meant.
    pub(crate) fn count_run(&self, late: u64) {
        self.fired.fetch_add(1, Relaxed);
        self.lateness.record(late);
    }
}

impl Drop for Core {
    fn drop(&mut self) {
        // The tick thread is stopped (joined, unless this runs on it: it then touches no shard
        // again), so the shards no thread owns can go to the next timer. The others go when
        // their thread lets go of them (it sees this timer gone).
        self.reaper.close();
        for id in self.spare.lock().drain(..) {
            registry::retire(id);
        }
    }
}

/// The instant of clock time `ns` on a clock whose time 0 is `origin`, or for a time `Instant`
/// cannot hold, the latest one it can (to within a nanosecond): never earlier than any instant
/// there is, and no panic whatever the clock's origin.
pub(crate) fn instant_at(origin: Instant, ns: u64) -> Instant {
    let mut d = Duration::from_nanos(ns);
    if let Some(at) = origin.checked_add(d) {
        return at;
    }
    // Past the end: bisect the longest step from `origin` that fits (64 steps at most).
    let (mut fits, mut past) = (Duration::ZERO, d);
    while past - fits > Duration::from_nanos(1) {
        d = fits + (past - fits) / 2;
        if origin.checked_add(d).is_some() {
            fits = d;
        } else {
            past = d;
        }
    }
    origin + fits
}

/// The first point at or after clock time 0 of a grid of `period` ns anchored `before` ahead of
/// clock time 0: less than a period in, or for a grid with no point within the clock's range
/// (which a period of `u64::MAX`, a saturated one of about 584 years or more, is taken to have),
/// `u64::MAX`: the end of the clock, where everything past it is due, as a huge delay saturates
/// there. In u128 from the exact durations: no overflow, no rounding.
pub(crate) fn first_on_grid(before: Duration, period: u64) -> u64 {
    if period == u64::MAX {
        return u64::MAX;
    }
    let (before, period) = (before.as_nanos(), u128::from(period.max(1)));
    let first = before.div_ceil(period) * period - before;
    u64::try_from(first).unwrap_or(u64::MAX)
}

/// Clock nanoseconds of `at` on a clock whose time 0 is `origin` (0 for instants before it,
/// saturating far ahead).
pub(crate) fn ns_since(origin: Instant, at: Instant) -> u64 {
    duration_to_ns(at.saturating_duration_since(origin))
}
