//! The window: which stored jobs are in memory (armed in the timer, or running), and, for each
//! shard this node holds, where the in-memory part of the store ends.
//!
//! A store is cut into shards by key ([`Store::shard_of`](crate::Store::shard_of)); one node
//! fires the jobs of the shards it holds (the embedded store has one shard, always held). For
//! each held shard, under the window's lock:
//!
//! - every stored job of the shard at or before its [`Cursor`] is in memory (an entry here), or
//!   being handed on by the load that covered it, or running, or done and about to be deleted;
//! - `next` is no later than the deadline of every stored job of the shard past the cursor
//!   (`None`: there is no such job).
//!
//! The store is read only to move a cursor: a range read from it, taken under the lock, so a
//! commit's report (which takes the lock after the commit) either sees the moved cursor or was
//! seen by the read. A job stored after the cursor and due within the horizon is covered at once,
//! by moving the cursor to it, when nothing stored lies between (`next` is later): in steady
//! state, schedules inside the horizon go straight into the timer and the store is not read.

use std::collections::HashMap;

use tickwheel::TimerHandle;

use crate::store::Cursor;

/// The in-memory window.
#[derive(Default)]
pub(crate) struct Window {
    /// The shards this node holds.
    pub(crate) shards: HashMap<u32, Shard>,
    pub(crate) entries: HashMap<String, Entry>,
    /// The id of the last load set (see [`Load`]).
    pub(crate) loads: u64,
}

/// A held shard's part of the window.
#[derive(Default)]
pub(crate) struct Shard {
    /// The lease under which this node holds it (0 for a store with one node).
    pub(crate) epoch: u64,
    /// Every stored job at or before it is in memory; `None`: none is yet.
    pub(crate) cursor: Option<Cursor>,
    /// No later than the deadline of every stored job past the cursor; `None`: there is none.
    pub(crate) next: Option<u64>,
    /// The next load, if one is set.
    pub(crate) load: Option<Load>,
}

/// A load set for later: reserved here before its timer task is added, so that the task, which
/// may run before the add returns, finds itself by `id` and clears it (found by W13: a task
/// that ran before its handle was stored left a stale handle behind, which blocked every later
/// load of its shard).
pub(crate) struct Load {
    pub(crate) id: u64,
    /// Wall-clock ns.
    pub(crate) at: u64,
    /// Its timer task, once the add returned.
    pub(crate) task: Option<TimerHandle>,
}

impl Load {
    /// Cancels its task, if it has one that has not run.
    pub(crate) fn cancel(self) {
        if let Some(task) = self.task {
            task.cancel();
        }
    }
}

/// A job in memory.
pub(crate) struct Entry {
    pub(crate) shard: u32,
    pub(crate) version: u64,
    /// Wall-clock ns.
    pub(crate) deadline: u64,
    pub(crate) state: State,
}

pub(crate) enum State {
    /// Armed in the timer (the handle, once the arming returned).
    Armed(Option<TimerHandle>),
    /// Its handler runs.
    Running,
    /// It ran; its outcome (delete, retry, burial) is on its way to the store. Kept until that
    /// commits, so that a late report or a read of this version (still stored) does not arm it
    /// again.
    Done,
}

/// Where a stored job goes.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Place {
    /// Into the timer: the caller arms it (outside the lock).
    Arm,
    /// It stays on disk; a load will bring it.
    Disk,
    /// Its shard is not held here: another node fires it.
    Elsewhere,
    /// This version (or a newer one) is known here already: a late or repeated report.
    Known,
}

impl Shard {
    /// A shard just taken under `epoch`: nothing of it in memory yet, and nothing known of what
    /// is stored (`next` 0: a stored job may lie anywhere), until a load succeeds.
    pub(crate) fn new(epoch: u64) -> Shard {
        Shard {
            epoch,
            next: Some(0),
            ..Shard::default()
        }
    }

    /// True if the cursor covers a job at `deadline` with `key`.
    pub(crate) fn covers(&self, deadline: u64, key: &str) -> bool {
        self.cursor
            .as_ref()
            .is_some_and(|c| c.covers(deadline, key))
    }

    /// Moves the cursor to `(deadline, key)`, a job past it, if that is within the horizon and
    /// nothing stored lies before it past the cursor.
    fn extend_to(&mut self, deadline: u64, key: &str, horizon_end: u64) -> bool {
        let clear = self.next.is_none_or(|n| deadline < n);
        if deadline > horizon_end || !clear {
            return false;
        }
        self.cursor = Some(Cursor::At(deadline, key.to_owned()));
        true
    }

    /// Moves the cursor forward to `to` (never back).
    pub(crate) fn advance(&mut self, to: Cursor) {
        let later = match (&self.cursor, &to) {
            (None, _) => true,
            (Some(Cursor::At(d, k)), Cursor::At(d2, k2)) => (d2, k2) > (d, k),
            (Some(Cursor::At(d, _)), Cursor::Through(d2)) => d2 >= d,
            (Some(Cursor::Through(d)), Cursor::At(d2, _)) => d2 > d,
            (Some(Cursor::Through(d)), Cursor::Through(d2)) => d2 > d,
        };
        if later {
            self.cursor = Some(to);
        }
    }
}

impl Window {
    /// Job `key` of `shard` was stored at `version`, due at `deadline` (wall ns); `horizon_end`:
    /// the end of the horizon now. Any older entry of the key is dropped (its timer task
    /// cancelled).
    pub(crate) fn stored(
        &mut self,
        shard: u32,
        key: &str,
        version: u64,
        deadline: u64,
        horizon_end: u64,
    ) -> Place {
        if self.entries.get(key).is_some_and(|e| e.version >= version) {
            return Place::Known;
        }
        self.forget_any(key);
        let Some(s) = self.shards.get_mut(&shard) else {
            return Place::Elsewhere;
        };
        if s.covers(deadline, key) || s.extend_to(deadline, key, horizon_end) {
            let state = State::Armed(None);
            let entry = Entry {
                shard,
                version,
                deadline,
                state,
            };
            self.entries.insert(key.to_owned(), entry);
            Place::Arm
        } else {
            s.next = Some(s.next.map_or(deadline, |n| n.min(deadline)));
            Place::Disk
        }
    }

    /// Drops the entry of `key` whatever its version, cancelling its timer task. Returns whether
    /// its run had begun (running, or done).
    pub(crate) fn forget_any(&mut self, key: &str) -> bool {
        match self.entries.remove(key) {
            Some(Entry {
                state: State::Armed(h),
                ..
            }) => {
                if let Some(h) = h {
                    h.cancel();
                }
                false
            }
            Some(Entry {
                state: State::Running | State::Done,
                ..
            }) => true,
            None => false,
        }
    }

    /// The run of `key` at `version` ended: its outcome is on its way.
    pub(crate) fn ran(&mut self, key: &str, version: u64) {
        if let Some(e) = self.entries.get_mut(key)
            && e.version == version
        {
            e.state = State::Done;
        }
    }

    /// Drops the entry of `key` if it still has `version`.
    pub(crate) fn forget(&mut self, key: &str, version: u64) {
        if self.entries.get(key).is_some_and(|e| e.version == version) {
            self.forget_any(key);
        }
    }

    /// This node takes `shard` (again) under `epoch`: read from scratch. The shard's armed jobs
    /// go (a load arms them again under the new lease); those that ran or run stay, so the
    /// load does not run their version again here: their outcomes, fenced off by the lease
    /// change, end them, and the job is then read again (see `Engine::committed`).
    pub(crate) fn take(&mut self, shard: u32, epoch: u64) {
        if let Some(mut s) = self.shards.remove(&shard)
            && let Some(load) = s.load.take()
        {
            load.cancel();
        }
        let armed: Vec<String> = (self.entries.iter())
            .filter(|(_, e)| e.shard == shard && matches!(e.state, State::Armed(_)))
            .map(|(k, _)| k.clone())
            .collect();
        for key in armed {
            self.forget_any(&key);
        }
        self.shards.insert(shard, Shard::new(epoch));
    }

    /// This node no longer holds `shard`: its jobs leave memory (armed ones are disarmed; a
    /// running one finishes, its outcome fenced off by the lost lease).
    pub(crate) fn release(&mut self, shard: u32) {
        if let Some(mut s) = self.shards.remove(&shard)
            && let Some(load) = s.load.take()
        {
            load.cancel();
        }
        let keys: Vec<String> = (self.entries.iter())
            .filter(|(_, e)| e.shard == shard)
            .map(|(k, _)| k.clone())
            .collect();
        for key in keys {
            self.forget_any(&key);
        }
    }

    /// The epoch under which `shard` is held here, if it is.
    pub(crate) fn epoch(&self, shard: u32) -> Option<u64> {
        self.shards.get(&shard).map(|s| s.epoch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(cursor: Cursor) -> Window {
        let mut w = Window::default();
        let mut s = Shard::new(0);
        s.cursor = Some(cursor);
        s.next = None;
        w.shards.insert(0, s);
        w
    }

    #[test]
    fn a_job_past_the_cursor_is_covered_only_with_nothing_stored_between() {
        let mut w = held(Cursor::Through(100));
        // Nothing stored past the cursor: a job within the horizon moves it.
        assert_eq!(w.stored(0, "a", 1, 150, 1000), Place::Arm);
        assert_eq!(w.shards[&0].cursor, Some(Cursor::At(150, "a".into())));
        // Past the horizon: stays on disk, and bounds `next`.
        assert_eq!(w.stored(0, "b", 2, 5000, 1000), Place::Disk);
        assert_eq!(w.shards[&0].next, Some(5000));
        // Before `next`: covered.
        assert_eq!(w.stored(0, "c", 3, 400, 1000), Place::Arm);
        // A job stored on disk lies before this one: it must wait for a load.
        w.shards.get_mut(&0).unwrap().next = Some(500);
        assert_eq!(w.stored(0, "d", 4, 600, 1000), Place::Disk);
        assert_eq!(w.shards[&0].next, Some(500));
        // Covered already.
        assert_eq!(w.stored(0, "e", 5, 50, 1000), Place::Arm);
        // Another shard: not held here.
        assert_eq!(w.stored(7, "f", 6, 50, 1000), Place::Elsewhere);
        assert_eq!(w.entries.len(), 3);
        // A late report of a version known already: nothing to do.
        assert_eq!(w.stored(0, "e", 5, 50, 1000), Place::Known);
        assert_eq!(w.stored(0, "e", 4, 50, 1000), Place::Known);
        w.release(0);
        assert!(w.entries.is_empty() && w.epoch(0).is_none());
    }

    #[test]
    fn a_shard_never_read_takes_no_job_past_its_cursor() {
        // Found by the review of 2026-11-28: a first load that failed left `next` at `None`,
        // read as "nothing stored past the cursor", so the next schedule moved the cursor past
        // every stored job.
        let mut w = Window::default();
        w.shards.insert(0, Shard::new(0));
        assert_eq!(w.stored(0, "new", 1, 150, 1000), Place::Disk);
        assert_eq!(w.shards[&0].cursor, None);
    }

    #[test]
    fn the_cursor_only_moves_forward() {
        let mut s = Shard::new(0);
        s.advance(Cursor::At(10, "b".into()));
        s.advance(Cursor::At(10, "a".into()));
        assert_eq!(s.cursor, Some(Cursor::At(10, "b".into())));
        s.advance(Cursor::Through(9));
        assert_eq!(s.cursor, Some(Cursor::At(10, "b".into())));
        s.advance(Cursor::Through(10));
        assert_eq!(s.cursor, Some(Cursor::Through(10)));
        s.advance(Cursor::At(10, "z".into()));
        assert_eq!(s.cursor, Some(Cursor::Through(10)));
        assert!(s.covers(10, "zzz") && !s.covers(11, ""));
    }
}
