//! Shutdown: refuse adds, stop the tick thread, claim every task that has not started, wait for
//! the running ones, and hand everything back earliest first.

use std::sync::Arc;
use std::time::Duration;

use crate::core::{Core, active};
use crate::loom::atomic::{Ordering::*, fence};
use crate::shard::Returned;
use crate::task::{Task, When, Work};

impl Core {
    /// See [`Timer::shutdown`](crate::Timer::shutdown). Idempotent: only the first call does
    /// anything.
    pub(crate) fn shutdown(self: &Arc<Self>) -> Vec<Task> {
        if !self.lifecycle.begin_close() {
            return Vec::new();
        }
        // The other half of the add's handshake (`add.rs`): an add either sees the lifecycle
        // closing or its slot is seen by the scans below.
        fence(SeqCst);
        // Joined, unless this is the tick thread itself (a task on an inline executor): it then
        // exits after its current batch, whose tasks are `DUE` and claimed below.
        self.reaper.close();
        let now = self.clock.now();
        let mut back: Vec<Returned> = Vec::new();
        // Adds racing this see the lifecycle and take their task back, or their slot is seen
        // here (see `add.rs`); a shard registered meanwhile is counted before its first add.
        for shard in self.shards() {
            shard.drain(now, &mut back);
        }
        // Running jobs finish; periodic ones hand their task back into `late` as they do. The
        // jobs of this very thread (a task calling shutdown) are not waited for.
        self.running.wait_for_others(active::own(self.id));
        back.extend(self.late.lock().take().unwrap_or_default());
        self.lifecycle.finish_close();
        back.sort_by_key(|r| r.deadline);
        self.returned.fetch_add(back.len() as u64, Relaxed);
        // Futures are not handed back: they are told, and complete saying so.
        back.retain_mut(|r| match &r.work {
            Work::Wake(waiter, epoch) => {
                self.panics.run(|| waiter.shut_down(*epoch));
                false
            }
            _ => true,
        });
        back.into_iter()
            .map(|r| Task {
                when: self.when_of(r.deadline),
                work: r.work,
            })
            .collect()
    }

    /// A returned task's deadline as an instant (or "far future" beyond what `Instant` holds).
    fn when_of(&self, deadline: u64) -> When {
        match self.origin.checked_add(Duration::from_nanos(deadline)) {
            Some(at) => When::At(at),
            None => When::After(Duration::MAX),
        }
    }
}
