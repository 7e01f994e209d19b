//! What a handle, a sleep or shutdown asks a shard about one task: its deadline, stamped on
//! demand if the task still waits unstamped in the ring (so nothing ever shows a deadline the
//! task does not have), or read back once it is stamped.

use tickwheel_reaper::{Clock, Due};

use super::*;

impl<K: Kind> Shard<K> {
    /// The deadline of the waiting task in slot `i` of `generation`, stamping it (and the ring
    /// with it) first if it has none yet. `None` if the task is not waiting. Tasks found due on
    /// the way are appended to `due`. Also returns the time the tick thread must be woken by
    /// (`u64::MAX`: no need), see [`lower_after_drain`](Self::lower_after_drain).
    pub(crate) fn deadline_of(
        &self,
        i: u32,
        generation: u32,
        clock: &dyn Clock,
        due: &mut Vec<Due<Fire>>,
    ) -> (Option<u64>, u64) {
        let s = self.slots.get(i);
        let unstamped = |w: Word| w.is(generation, QUEUED) && !w.has(STAMPED);
        let mut wake = u64::MAX;
        if unstamped(s.word()) {
            let mut locked = self.locked.lock();
            if unstamped(s.word()) {
                let now = clock.now();
                let unstamped = self.drain_ring(&mut locked, clock, due, false);
                wake = self.lower_after_drain(&locked, now, unstamped);
            }
        }
        loop {
            let w = s.word();
            if w.generation() != generation || !matches!(w.state(), QUEUED | WAITING | DUE) {
                return (None, wake);
            }
            let deadline = s.deadline.load(Acquire);
            if s.word() == w {
                return (Some(deadline), wake);
            }
        }
    }

    /// The deadline slot `i` was stamped with, for a task known to be stamped: out of its wait
    /// (due, run, handed back), or waiting with its stamp. A task handed back by shutdown that
    /// was not stamped yet gets its stamp under the shard lock just after it was taken: then
    /// the lock is taken here too, so the stamp is seen.
    pub(crate) fn stamped_deadline(&self, i: u32) -> u64 {
        let s = self.slots.get(i);
        if s.word().state() == RETURNED {
            let _drained = self.locked.lock();
            return s.deadline.load(Relaxed);
        }
        s.deadline.load(Acquire)
    }

    /// The deadline slot `i` was stamped with, if it was: as `stamped_deadline`, without
    /// stamping anything (`None` while the task waits in the ring or the young queue unstamped).
    pub(crate) fn deadline_if_stamped(&self, i: u32) -> Option<u64> {
        let w = self.slots.get(i).word();
        (w.state() != QUEUED || w.has(STAMPED)).then(|| self.stamped_deadline(i))
    }
}
