//! The add path: what an adding thread does to its own shard, without a lock and without writing
//! a line another adding thread writes.
//!
//! 1. Decide when the task is due (`Plan`): already (straight to the executor); soon, or on a
//!    manual clock (stamped now, filed in the wheel at once under the shard lock); or later
//!    (unstamped: the delay goes in the ring and the deadline is stamped within one tick by
//!    whoever drains it, from a clock reading taken after the add).
//! 2. Take a vacant slot from the thread's own free list, fill it, publish its word (release),
//!    and record it in the ring.
//! 3. A fence, then read the lifecycle: if shutdown has begun, take the task back unless shutdown
//!    already claimed it. Shutdown moves the lifecycle, fences, and then scans the slots, so one
//!    of the two sees the other: no task is stranded.
//! 4. After the same fence, read `next_wake`: if the tick thread would not look at the shard
//!    within a tick of this thread's clock reading (an unstamped record), or by the deadline (a
//!    stamped one), lower it and wake the thread. The tick thread drains the ring, sets
//!    `next_wake`, fences, and then looks at the ring: one of the two sees the other, so no record
//!    waits longer than that. (Other drains only lower `next_wake`, and wake the tick thread by
//!    what they lowered it to.)
//!
//! The fence is asymmetric (`tickwheel_reaper::barrier`): on this side a compiler fence, on the
//! other two a process-wide `membarrier` (once per shutdown, once per tick-thread round), where
//! Linux has it; a `SeqCst` fence on both sides elsewhere.
//!
//! Clock reads: one per add due within 64 ticks (or on a manual clock), otherwise one per drain of
//! the ring (at most one per tick, or per 256 adds). Atomic read-modify-writes on the common
//! path: none on shared lines; the handle's count on the shard. No fence instruction where
//! `membarrier` exists.

use std::sync::Arc;

use crate::api::error::AddError;
use crate::api::handle::TimerHandle;
use crate::api::task::Task;
use crate::loom::atomic::{Ordering::*, fence};
use crate::service::core::Core;
use crate::service::core::Shard;
use crate::service::dispatch;
use crate::service::route::{DEFAULT_ROUTE, SELF_CLASS};
use crate::service::thread_cache;
use crate::service::work::{When, Work};
use crate::shard::ring;
use crate::slots::word::{DUE, PERIODIC, PLAIN, QUEUED, STAMPED, WAKE, Word};

/// `max_pending` is looked at again after this many adds of one thread: the bound is global, and
/// may be overshot by at most this many adds per other adding thread.
pub(crate) const BUDGET: u64 = 64;

/// When an add is due, decided before it takes a slot.
#[derive(Clone, Copy)]
enum Plan {
    /// Already: to the executor. `meant` is when it was due: the add's own clock reading for a
    /// delay, or the instant asked for, which has passed (lateness counts from it; a repeating
    /// task's grid starts there).
    Due { meant: u64 },
    /// A known deadline. `now`: file it in the wheel at once (soon, or a manual clock).
    Stamped { deadline: u64, now: bool },
    /// `delay` after a clock reading not yet taken; `born` is a reading no later than the add.
    Unstamped { delay: u64, born: u64 },
}

impl Plan {
    /// The deadline, if the add knows it (the ring's reader then only has to look by then).
    fn stamped(&self) -> Option<u64> {
        match *self {
            Plan::Stamped { deadline, .. } => Some(deadline),
            _ => None,
        }
    }
}

/// Adds `task` to this thread's shard (the steps in the module docs), or refuses it: a timer
/// shut down, or full.
///
/// The task is read in place and taken apart only as its work goes into the slot. Taken apart
/// at the start, its closure pointer, just written by the caller as two 8-byte stores, was
/// copied at once with 16-byte loads, a failed store-to-load forward: the load that took the
/// most samples of W6's add + cancel loop (`perf annotate`). By the time the slot is filled the
/// stores have reached the cache. (The loop's time did not move measurably: the stall mostly
/// overlapped other work.)
#[inline(always)]
pub(crate) fn add(core: &Arc<Core>, mut task: Task) -> Result<TimerHandle, AddError> {
    // A period below the tick (zero included) runs at the tick: counted here, rounded where
    // the next run is computed (`job.rs`).
    let rounded = matches!(&task.work, Work::Every(r) if r.period < core.tick_ns);
    // Refused early if shutdown is seen to have begun; the ordered look is step 3.
    if !core.lifecycle.looks_open() {
        crate::service::trace::refused("shut down");
        return Err(AddError::Shutdown(task));
    }
    let lease = thread_cache::lease(core);
    let shard = lease.shard();
    let plan = plan(shard, core, &task.when, &task.work);
    let waiting = !matches!(plan, Plan::Due { .. });
    let admitted = match core.max_pending {
        // A future cannot be handed back: it is never refused, but it counts as pending, so it
        // spends the thread's budget like a task (or a thread that makes futures could go on
        // adding tasks on a budget taken before them).
        Some(_) if matches!(task.work, Work::Wake(..)) => {
            shard.spend();
            true
        }
        // Tasks on their way to the executor count too, so a stalled pool cannot pile them up.
        Some(max) => shard.admit(max, BUDGET, || core.pending() + core.running.backlog()),
        None => true,
    };
    let vacant = if admitted { shard.slots.alloc() } else { None };
    let Some(vacant) = vacant else {
        shard.count_rejected();
        crate::service::trace::refused("full");
        return Err(AddError::Full(task));
    };
    if let Plan::Due { meant: 0 } = plan {
        // Due at the clock's beginning: it may be meant before it. (Marked once admitted: a
        // refused task goes back as it came.)
        mark_if_stale(core, &mut task);
    }
    let (s, i, generation) = (vacant.slot(), vacant.index(), vacant.generation());
    let (state, flags, deadline, meant) = match plan {
        Plan::Due { meant } => (DUE, 0, meant, meant),
        Plan::Stamped { deadline, .. } => (QUEUED, STAMPED, deadline, deadline),
        Plan::Unstamped { delay, born } => (QUEUED, 0, delay, born),
    };
    let flags = match task.work {
        Work::Every(_) => flags | PERIODIC,
        Work::Wake(..) => flags | WAKE,
        Work::Once {
            plain: true,
            label: None,
            ..
        } => flags | PLAIN,
        Work::Once { .. } => flags,
    };
    s.deadline.store(deadline, Relaxed);
    s.meant.store(meant, Relaxed);
    let route_word = match &task.route {
        None if matches!(task.work, Work::Every(_)) => SELF_CLASS,
        None => DEFAULT_ROUTE,
        Some(spec) => core
            .routes
            .word_of(spec, matches!(task.work, Work::Every(_))),
    };
    shard.slots.route(i).store(route_word, Relaxed);
    let Task { when, work, route } = task;
    let word = vacant.publish(state, flags, work);
    let in_ring = matches!(
        plan,
        Plan::Unstamped { .. } | Plan::Stamped { now: false, .. }
    );
    let pushed = in_ring && shard.push(i, generation);

    tickwheel_reaper::barrier::light(); // the heavy half: shutdown's, and the tick thread's drain (barrier.rs)
    // (If the take fails, shutdown claimed the task: it is returned, and the handle says so.)
    if !core.lifecycle.is_open()
        && let Some((_, mut work)) = s.take(generation, |w| w == word, Word::vacated)
    {
        work.take_stale(); // it goes back as it came
        shard.slots.release(i);
        crate::service::trace::refused("shut down");
        return Err(AddError::Shutdown(Task { when, work, route }));
    }
    shard.count_added(waiting);
    if rounded {
        core.rounded.fetch_add(1, Relaxed);
    }
    if pushed {
        if let Some(by) = shard.cover(plan.stamped()) {
            core.reaper.wake_by(by);
        }
    } else {
        file_now(shard, core, i, generation, plan);
    }
    // Dropped only where there is one: left to the end of scope, the drop of a `None` was an
    // out-of-line call on every add (14 of the 414 instructions of an add + cancel).
    if let Some(spec) = route {
        drop(spec);
    }
    // (A temporary lease gives its shard back as it drops here; the handle finds it by id.)
    Ok(TimerHandle::new(shard.id, i))
}

/// Hands a due task to the executor, or files a record the ring cannot take (full) or should not
/// (due soon) under the shard lock, draining the ring with it. Tasks found due on the way go to
/// the executor (from here, outside every lock and cache: an inline executor runs them now).
#[cold]
fn file_now(shard: &Shard, core: &Arc<Core>, i: u32, generation: u32, plan: Plan) {
    let mut due = Vec::new();
    let due = &mut due;
    let clock = core.clock.as_ref();
    let next = match plan {
        Plan::Due { meant } => {
            dispatch::dispatch(core, shard.fire(i, generation, meant, meant));
            return;
        }
        Plan::Stamped { now: true, .. } => {
            shard.flush_now(clock, Some(ring::record(i, generation)), due)
        }
        _ => {
            // The ring was full: drain it, then record this one. The tick thread must look by
            // the drain's `next_wake` (what it filed) and by what this record asks for.
            shard.read(clock);
            let filed = shard.flush_now(clock, None, due);
            let pushed = shard.push(i, generation);
            debug_assert!(pushed, "a drained ring has room");
            fence(SeqCst);
            filed.min(shard.cover(plan.stamped()).unwrap_or(u64::MAX))
        }
    };
    core.reaper.wake_by(next);
    for d in due.drain(..) {
        dispatch::dispatch(core, d);
    }
}

/// When the task of `when` is due, reading the clock only if it must (see the module docs).
#[inline(always)]
fn plan(shard: &Shard, core: &Core, when: &When, work: &Work) -> Plan {
    match *when {
        When::After(delay) => {
            if delay >= core.short_ns && !core.exact {
                Plan::Unstamped {
                    delay,
                    born: shard.reading(|| read_clock(core)),
                }
            } else {
                let now = shard.read(core.clock.as_ref());
                match now.saturating_add(delay) {
                    // A zero delay, or the end of time (where every deadline saturates to now).
                    deadline if deadline <= now => Plan::Due { meant: now },
                    deadline => Plan::Stamped {
                        deadline,
                        now: true,
                    },
                }
            }
        }
        When::At(at) => stamped(shard, core, core.ns_at(at, || work.grid())),
        When::Returned(ref r) => stamped(shard, core, core.ns_at(r.0, || work.grid())),
        When::Clock(deadline) => stamped(shard, core, deadline),
    }
}

/// Marks a task due at once for an instant before the clock began as meant for that instant
/// (see [`Label::stale`](crate::service::work::Label::stale)); a fixed-rate task's grid instead starts at
/// its first point at or after the beginning (see [`Core::ns_at`]).
#[cold]
fn mark_if_stale(core: &Core, task: &mut Task) {
    let at = match task.when {
        When::At(at) => at,
        When::Returned(ref r) => r.0,
        When::After(_) | When::Clock(_) => return,
    };
    if at < core.origin && task.work.grid().is_none() {
        task.work.mark_stale(at);
    }
}

/// A fresh reading of `core`'s clock, out of line: reaching the clock through its `Arc<dyn
/// Clock>` is two dependent loads, which the compiler hoisted onto every add when the reading
/// was inline, though most unstamped adds reuse the shard's last reading.
#[cold]
#[inline(never)]
fn read_clock(core: &Core) -> u64 {
    core.clock.now()
}

/// The plan for a task due at clock time `deadline`: due already, or stamped with it (filed at
/// once if it is soon or the clock is manual). The reading is the owner's latest from here on:
/// a record the ring cannot take is filed with it (`flush_now`).
#[inline(always)]
fn stamped(shard: &Shard, core: &Core, deadline: u64) -> Plan {
    let now = shard.read(core.clock.as_ref());
    if deadline <= now {
        Plan::Due { meant: deadline }
    } else {
        Plan::Stamped {
            deadline,
            now: core.exact || deadline - now < core.short_ns,
        }
    }
}
