//! The tick thread's hand-out: what a round found due goes to the executors in chunks.
//!
//! Handing each task to its executor from the tick thread cost that one thread, per task, a box
//! for the job, the executor's own bookkeeping (rayon: another box, a push on its global queue,
//! shared counters), and the counters `wait_idle` reads: atomics the pool threads write too, and
//! boxes they free, so every hand-off moved cache lines and malloc arenas between threads. With
//! millions of tasks pending (W10: 6M due over 10 s, added from two threads while the pool runs
//! them) the tick thread spent most of its time there and fell behind its own clock: tasks ran
//! more than a second late, all of them by about as much.
//!
//! So a round that finds more than [`CHUNK`] tasks due sends those for one executor in chunks of
//! up to [`CHUNK`]: one job per chunk, which on the executor's thread hands each task on as its
//! own job (so tasks still run side by side and a slow one holds up no other). The per-task work
//! moves to the pool's threads, several of them, off the one thread everything waits for. A
//! smaller round sends each task as it is: the second hop would only add to its lateness, and
//! the tick thread has time for it (W12's short tasks, about ten due per tick, had a p99 lateness of
//! 1.23 and 1.90 ms chunked against 1.17 and 1.18 ms sent one by one, in alternating runs). A chunk of one task is sent as it is too. A wake-up
//! of a future is done on the tick thread, as before, after the chunk before it was sent, so
//! tasks are still handed out earlier deadline first. A chunk's job that an executor drops
//! unrun loses nothing: its tasks stay due, and `shutdown` hands them back.

use std::sync::Arc;

use tickwheel_executor::Executor;
use tickwheel_reaper::Due;

use crate::service::core::Core;
use crate::service::job;
use crate::service::registry;
use crate::service::route::Pool;
use crate::shard::{Fire, WAKE_HERE};

/// Tasks handed to one executor in one job, at most; and the most a round sends one by one.
pub(crate) const CHUNK: usize = 64;

/// Tasks bound for one executor, not yet sent.
#[derive(Default)]
struct Chunk {
    to: Option<(Arc<dyn Executor>, Pool)>,
    fires: Vec<Fire>,
}

/// Hands a due task's job to the executor. An executor that panics loses nothing: the task
/// stays due and `shutdown` hands it back.
pub(crate) fn dispatch(core: &Arc<Core>, due: Due<Fire>) {
    let fire = due.item;
    if fire.route == WAKE_HERE {
        // Waking a future is a few atomic operations: done here, without a hop through the
        // pool.
        return job::run(core, fire, Pool::Main);
    }
    // The task's class and executor (see `route.rs`), as read when it was found due.
    let (executor, pool) = core
        .routes
        .pick(fire.route, || core.clock.now(), &core.executor);
    job::send(core, fire, executor, pool);
}

/// Hands out a round's due tasks in the order given (earlier deadlines first): futures woken
/// here, the others to their executors in chunks (see the module docs). Leaves `batch` empty.
pub(crate) fn hand_out(core: &Arc<Core>, batch: &mut Vec<Due<Fire>>) {
    let now = core.clock.now();
    let most = if batch.len() > CHUNK { CHUNK } else { 1 };
    let mut chunk = Chunk::default();
    for due in batch.drain(..) {
        core.handoff.record(now.saturating_sub(due.deadline));
        let fire = due.item;
        if fire.route == WAKE_HERE {
            flush(core, &mut chunk);
            job::run(core, fire, Pool::Main);
            continue;
        }
        let (executor, pool) = core
            .routes
            .pick(fire.route, || core.clock.now(), &core.executor);
        let same = matches!(&chunk.to, Some((e, p)) if *p == pool && Arc::ptr_eq(e, executor));
        if !same {
            flush(core, &mut chunk);
            chunk.to = Some((executor.clone(), pool));
        }
        chunk.fires.push(fire);
        if chunk.fires.len() == most {
            flush(core, &mut chunk);
        }
    }
    flush(core, &mut chunk);
}

/// Sends the tasks of `chunk`: one as it is, several in one job that hands each on.
fn flush(core: &Arc<Core>, chunk: &mut Chunk) {
    let Some((executor, pool)) = chunk.to.take() else {
        return;
    };
    if chunk.fires.len() <= 1 {
        if let Some(fire) = chunk.fires.pop() {
            job::send(core, fire, &executor, pool);
        }
        return;
    }
    let fires = std::mem::take(&mut chunk.fires);
    let to = executor.clone();
    // Each task counts in the backlog once from here: its share of the chunk's count goes
    // with it into its own job.
    job::send_job(core, &executor, fires.len() as u64, move |queued| {
        // The tasks' jobs will most likely run on this thread, which has not seen their
        // slots: fetch them while it hands the jobs on.
        for fire in &fires {
            crate::slots::prefetch::line(registry::shard(fire.shard).slots.get(fire.slot));
        }
        for fire in fires {
            queued.split_one().send(queued.core(), fire, &to, pool);
        }
    });
}
