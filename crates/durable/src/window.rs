//! The window: which stored jobs are in memory (armed in the timer, or running), and where the
//! in-memory part of the store ends.
//!
//! Invariant, under the window's lock: every stored job that the [`Cursor`] covers is in memory
//! (an entry here), or being handed on by the load that covered it, or running, or done and
//! about to be deleted. `next` is no later than the deadline of every stored job the cursor does
//! not cover (`None`: there is no such job). The store is read only to move the cursor: a range
//! read from the cursor on, taken under the lock, so a commit's report (which takes the lock
//! after the commit) either sees the moved cursor or was seen by the read.
//!
//! A job stored after the cursor and due within the horizon is covered at once, by moving the
//! cursor to it, when nothing stored lies between (`next` is later): in steady state, schedules
//! inside the horizon go straight into the timer and the store is not read at all.

use std::collections::HashMap;

use tickwheel::TimerHandle;

use crate::store::Cursor;

/// The in-memory window.
#[derive(Default)]
pub(crate) struct Window {
    /// Every stored job at or before it is in memory; `None`: none is yet.
    pub(crate) cursor: Option<Cursor>,
    /// No later than the deadline of every stored job past the cursor; `None`: there is none.
    pub(crate) next: Option<u64>,
    pub(crate) entries: HashMap<String, Entry>,
    /// The timer task of the next load, and the wall-clock time it runs at (ns).
    pub(crate) load: Option<(TimerHandle, u64)>,
}

/// A job in memory.
pub(crate) struct Entry {
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
}

/// Where a stored job goes.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Place {
    /// Into the timer: the caller arms it (outside the lock).
    Arm,
    /// It stays on disk; a load will bring it.
    Disk,
}

impl Window {
    /// True if the cursor covers a job at `deadline` with `key`.
    pub(crate) fn covers(&self, deadline: u64, key: &str) -> bool {
        self.cursor
            .as_ref()
            .is_some_and(|c| c.covers(deadline, key))
    }

    /// Job `key` was stored at `version`, due at `deadline` (wall ns); `horizon_end`: the end of
    /// the horizon now. Any older entry of the key is dropped (its timer task cancelled).
    pub(crate) fn stored(
        &mut self,
        key: &str,
        version: u64,
        deadline: u64,
        horizon_end: u64,
    ) -> Place {
        self.forget_any(key);
        if self.covers(deadline, key) || self.extend_to(deadline, key, horizon_end) {
            self.entries.insert(
                key.to_owned(),
                Entry {
                    version,
                    deadline,
                    state: State::Armed(None),
                },
            );
            Place::Arm
        } else {
            self.next = Some(self.next.map_or(deadline, |n| n.min(deadline)));
            Place::Disk
        }
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

    /// Drops the entry of `key` whatever its version, cancelling its timer task. Returns whether
    /// it was running.
    pub(crate) fn forget_any(&mut self, key: &str) -> bool {
        match self.entries.remove(key) {
            Some(Entry {
                state: State::Armed(Some(h)),
                ..
            }) => {
                h.cancel();
                false
            }
            Some(Entry {
                state: State::Running,
                ..
            }) => true,
            _ => false,
        }
    }

    /// Drops the entry of `key` if it still has `version`.
    pub(crate) fn forget(&mut self, key: &str, version: u64) {
        if self.entries.get(key).is_some_and(|e| e.version == version) {
            self.forget_any(key);
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_past_the_cursor_is_covered_only_with_nothing_stored_between() {
        let mut w = Window {
            cursor: Some(Cursor::Through(100)),
            ..Window::default()
        };
        // Nothing stored past the cursor: a job within the horizon moves it.
        assert_eq!(w.stored("a", 1, 150, 1000), Place::Arm);
        assert_eq!(w.cursor, Some(Cursor::At(150, "a".into())));
        // Past the horizon: stays on disk, and bounds `next`.
        assert_eq!(w.stored("b", 2, 5000, 1000), Place::Disk);
        assert_eq!(w.next, Some(5000));
        // Before `next`: covered.
        assert_eq!(w.stored("c", 3, 400, 1000), Place::Arm);
        // A job stored on disk lies before this one: it must wait for a load.
        w.next = Some(500);
        assert_eq!(w.stored("d", 4, 600, 1000), Place::Disk);
        assert_eq!(w.next, Some(500));
        // Covered already.
        assert_eq!(w.stored("e", 5, 50, 1000), Place::Arm);
        assert_eq!(w.entries.len(), 3);
    }

    #[test]
    fn the_cursor_only_moves_forward() {
        let mut w = Window::default();
        w.advance(Cursor::At(10, "b".into()));
        w.advance(Cursor::At(10, "a".into()));
        assert_eq!(w.cursor, Some(Cursor::At(10, "b".into())));
        w.advance(Cursor::Through(9));
        assert_eq!(w.cursor, Some(Cursor::At(10, "b".into())));
        w.advance(Cursor::Through(10));
        assert_eq!(w.cursor, Some(Cursor::Through(10)));
        w.advance(Cursor::At(10, "z".into()));
        assert_eq!(w.cursor, Some(Cursor::Through(10)));
        assert!(w.covers(10, "zzz") && !w.covers(11, ""));
    }
}
