//! `TimerHandle`: names one task by (shard, slot, generation) and pins its slot while it lives.

use std::fmt;
use std::num::NonZeroU64;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use tickwheel_reaper::duration_to_ns;

use crate::loom::atomic::Ordering::*;
use crate::service::core::Tasks;
use crate::service::dispatch;
use crate::service::job;
use crate::service::registry::{self, ShardRef};
use crate::service::work::Work;
use crate::shard::Kind;
use crate::slots::waker::Outcome;
use crate::slots::word::{CANCELLED, DUE, QUEUED, RETURNED, RUNNING, STOP, WAITING, Word};

/// Where a task is, from [`TimerHandle::state`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TaskState {
    /// Waiting for its deadline: `cancel` and `reschedule` work.
    Waiting,
    /// Due and handed to the executor, not started yet: `cancel` still works, `reschedule` not.
    Due,
    /// Running now (a repeating task: running or between runs); a repeating task can still be
    /// cancelled.
    Running,
    /// Ran (a one-shot task, panicking or not), or ended (a repeating task that stopped itself
    /// or reached the end of time): it will not run again. (A repeating task that panics goes
    /// on.)
    Done,
    /// Stopped by a successful `cancel`.
    Cancelled,
    /// Handed back by [`Timer::shutdown`](crate::Timer::shutdown) (or, if it was due, dropped
    /// by the timer's drop).
    Returned,
}

/// A handle to one added task: cancel it, reschedule it, ask how it ended.
///
/// `Clone + Send + Sync`, and one `u64`: share it with whoever may cancel. No allocation and no
/// reference count: it names the task's slot in its shard (shards are never freed, see
/// `docs/architecture.md`) and keeps that slot from being reused while it lives, so its answers
/// stay exact however long it is kept. Cloning or dropping it touches only that slot, which
/// other threads write only for this task.
///
/// Dropping the last handle does nothing to the task (fire-and-forget adds may drop it at once).
/// A handle outliving its timer answers `false` to everything that would change the task.
pub struct TimerHandle {
    /// The shard id's complement (high half) and the slot (low half): the slot is pinned while
    /// the handle lives. Never zero, as no shard has id `u32::MAX` (see `registry::take`), so
    /// an `Option<TimerHandle>` is one word too (a [`Sleep`](crate::Sleep) keeps one in the
    /// 32 bytes a cancel reads).
    id: NonZeroU64,
}

impl TimerHandle {
    /// The handle of a slot just published with one handle counted in its word.
    #[inline(always)]
    pub(crate) fn new(shard: u32, slot: u32) -> Self {
        let id = (u64::from(!shard) << 32) | u64::from(slot);
        TimerHandle {
            id: NonZeroU64::new(id).expect("no shard has id u32::MAX"),
        }
    }

    #[inline(always)]
    fn shard(&self) -> ShardRef {
        registry::shard(self.shard_id())
    }

    /// The id of the shard its task is in.
    #[inline(always)]
    pub(crate) fn shard_id(&self) -> u32 {
        !((self.id.get() >> 32) as u32)
    }

    #[inline(always)]
    fn slot(&self) -> u32 {
        self.id.get() as u32
    }

    /// Starts bringing the task's slot into the cache (see `slots/prefetch.rs`).
    #[inline]
    pub(crate) fn prefetch(&self) {
        crate::slots::prefetch::line(self.shard().slots.get(self.slot()));
    }

    #[inline]
    pub(crate) fn word(&self) -> Word {
        self.shard().slots.get(self.slot()).word()
    }

    /// For a future's task: ready with how it ended, else leaves `cx`'s waker in the task for
    /// whoever ends it (see `slots/waker.rs`). `empty`: no poll left a waker there yet.
    #[inline]
    pub(crate) fn poll_wake(&self, cx: &mut Context<'_>, empty: bool) -> Poll<Outcome> {
        let shard = self.shard();
        let s = shard.slots.get(self.slot());
        s.poll_waker(s.word().generation(), cx, Tasks::waker, empty)
    }

    /// For a future's task: keeps `waker` in it for whoever ends it, as a poll would; if it
    /// ended already, hands `waker` back for the caller to wake.
    pub(crate) fn pass_waker(&self, waker: Waker) -> Option<Waker> {
        let shard = self.shard();
        let s = shard.slots.get(self.slot());
        match s.store_waker(s.word().generation(), waker, Tasks::waker) {
            Ok(replaced) => {
                drop(replaced); // none: the re-armed task is new
                None
            }
            Err((_, waker)) => Some(waker),
        }
    }

    /// For a future's task: [`cancel`](Self::cancel), then the drop of this handle, and the
    /// waker a poll left in the task (`waker_left`) taken back out for the caller, who drops it
    /// or passes it on. One compare-and-swap while the task waits unstamped in its shard's ring
    /// (the future holds its only handle, see `Shard::cancel_sole`): the waker comes out with
    /// the task.
    #[inline]
    pub(crate) fn cancel_and_drop(self, waker_left: bool) -> Option<Waker> {
        let shard = self.shard();
        let keep = |work: &mut Work| match waker_left {
            true => Tasks::waker(work).and_then(Option::take),
            false => None,
        };
        if let Some(waker) = shard.cancel_sole(self.slot(), keep) {
            // The slot is vacant: the count this handle held left with its generation.
            std::mem::forget(self);
            return waker;
        }
        // Taken before the cancel, while this handle still pins the slot: an arming that ends
        // in between finds no waker and wakes nobody, which is what a cancel wants.
        let waker = match waker_left {
            true => {
                let s = shard.slots.get(self.slot());
                s.take_waker(s.word().generation(), Tasks::waker)
            }
            false => None,
        };
        self.cancel();
        waker
    }

    /// Stops the task: `true` iff this call stopped it from running (again). A one-shot task
    /// that already started, ran or was cancelled gives `false`; a periodic task gives `true`
    /// once, and runs no more. A task already handed to the executor but not started never
    /// runs. O(1); one compare-and-swap unless the task already sits in its shard's wheel, which
    /// then takes that shard's lock.
    ///
    /// When it returns `true`, no run of the task is in progress and none will start: if a
    /// periodic task is running on another thread, this call **waits for that run to end**, the
    /// way Linux's `del_timer_sync` does, so whatever the closure uses may be released at once.
    /// Two exceptions, and the usual caution: called from inside a task of any timer it does not
    /// wait (the run may be the caller itself, or a task cancelling the caller at the same
    /// moment); and do not call it while holding a lock that the task's closure takes. The
    /// closure is dropped before this returns, except for a periodic task caught mid-run: its
    /// job drops it when that run ends. The drop comes after the cancel took effect and was
    /// counted, so if the closure's `Drop` panics, that panic reaches the caller (as a panic in
    /// any drop of its value would) and the timer is left as if the cancel had returned `true`;
    /// a drop by the job is caught and counted like a panicking run.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tickwheel::{Task, Timer};
    ///
    /// let timer = Timer::new()?;
    /// let beat = timer.add_or_submit(Task::every(Duration::from_secs(30), || println!("beat")))?;
    /// assert!(beat.cancel());
    /// assert!(!beat.cancel(), "only the first cancel stops it");
    /// assert!(beat.is_cancelled() && beat.is_done());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn cancel(&self) -> bool {
        let shard = self.shard();
        job::cancelled(&shard, self.slot(), shard.cancel(self.slot()))
    }

    /// Moves the task's next run to `delay` from now: `true` if it was waiting for its deadline
    /// and now has the new one (a zero delay sends it to the executor at once); `false` if it
    /// already started, ran, was cancelled, is on its way to the executor, or the timer is shut
    /// down or gone ([`state`](Self::state) says which). O(1).
    ///
    /// A repeating task is rescheduled the same way while it waits for a run (not while it
    /// runs): that run moves, and the later ones follow from it (a fixed-rate task's grid
    /// restarts at the new run; a fixed-delay task counts from the end of it).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use tickwheel::{InlineExecutor, ManualClock, Task, Timer};
    ///
    /// let clock = ManualClock::new();
    /// let timer = Timer::builder().clock(clock.clone()).executor(Arc::new(InlineExecutor::new())).build()?;
    /// let idle = timer.add_or_submit(Task::after(Duration::from_secs(60), || println!("idle: close")))?;
    /// clock.advance(Duration::from_secs(50));
    /// assert!(idle.reschedule(Duration::from_secs(60))); // traffic: push the deadline out
    /// clock.advance(Duration::from_secs(50));
    /// assert!(!idle.is_done());
    /// clock.advance(Duration::from_secs(10));
    /// assert!(idle.is_done());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reschedule(&self, delay: Duration) -> bool {
        let delay = duration_to_ns(delay);
        self.move_to(|_| delay)
    }

    /// Moves the task's next run to `deadline` (at once if it passed), as
    /// [`reschedule`](Self::reschedule) does. The instant is read on the timer's clock: take it
    /// from [`Timer::now`](crate::Timer::now) on a manual clock.
    pub fn reschedule_at(&self, deadline: Instant) -> bool {
        match self.shard().timer() {
            Some(core) => self.reschedule_at_ns(core.ns_of(deadline)),
            None => false,
        }
    }

    /// Moves the task's next run to clock time `deadline` (see `reschedule`).
    pub(crate) fn reschedule_at_ns(&self, deadline: u64) -> bool {
        self.move_to(|now| deadline.saturating_sub(now))
    }

    /// When the task's next run is due, on the timer's clock (see
    /// [`Timer::now`](crate::Timer::now)); `None` once it is running (a periodic task between
    /// runs included), done, cancelled or handed back. A task added with a long delay gets its
    /// deadline stamped within a tick of its add; asking for it stamps it at once (from a clock
    /// reading taken after the add, so it is never earlier than the delay asked for).
    pub fn deadline(&self) -> Option<Instant> {
        let core = self.shard().timer()?;
        self.deadline_ns().map(|d| core.instant_of(d))
    }

    /// [`deadline`](Self::deadline) in clock nanoseconds.
    pub(crate) fn deadline_ns(&self) -> Option<u64> {
        let shard = self.shard();
        let core = shard.timer()?;
        let mut due = Vec::new();
        let generation = self.word().generation();
        let (deadline, wake) =
            shard.deadline_of(self.slot(), generation, core.clock.as_ref(), &mut due);
        if wake != u64::MAX {
            core.reaper.wake_by(wake);
        }
        for d in due {
            dispatch::dispatch(&core, d);
        }
        deadline
    }

    /// The deadline the task was stamped with, read from its slot: only for a task known to be
    /// stamped, such as a future's whose arming ended (the thread that fired it or handed it
    /// back at shutdown stamped it before ending the arming, and the caller saw that end).
    pub(crate) fn stamped_deadline_ns(&self) -> u64 {
        self.shard().stamped_deadline(self.slot())
    }

    /// The deadline the task was stamped with, if it was (stamps nothing; see
    /// [`deadline`](Self::deadline) for the stamp on demand).
    pub(crate) fn deadline_if_stamped_ns(&self) -> Option<u64> {
        self.shard().deadline_if_stamped(self.slot())
    }

    /// Time left until [`deadline`](Self::deadline), on the timer's clock: zero if it is due.
    pub fn remaining(&self) -> Option<Duration> {
        let at = self.deadline()?;
        let core = self.shard().timer()?;
        Some(at.saturating_duration_since(core.instant_of(core.clock.now())))
    }

    /// Where the task is now: after `cancel` or `reschedule` said `false`, this says why.
    pub fn state(&self) -> TaskState {
        let w = self.word();
        match w.state() {
            QUEUED | WAITING => TaskState::Waiting,
            DUE => TaskState::Due,
            RUNNING if w.has(STOP) => TaskState::Cancelled,
            RUNNING => TaskState::Running,
            CANCELLED => TaskState::Cancelled,
            RETURNED => TaskState::Returned,
            _ => TaskState::Done,
        }
    }

    /// `reschedule` with the delay computed from the clock reading it uses.
    fn move_to(&self, delay_at: impl FnOnce(u64) -> u64) -> bool {
        let shard = self.shard();
        let Some(core) = shard.timer() else {
            return false;
        };
        if !core.lifecycle.is_open() {
            return false;
        }
        let now = core.clock.now();
        let mut due = Vec::new();
        let (moved, wake) = shard.reschedule(
            self.slot(),
            core.clock.as_ref(),
            now,
            delay_at(now),
            &mut due,
        );
        if wake != u64::MAX {
            core.reaper.wake_by(wake);
        }
        for d in due {
            dispatch::dispatch(&core, d);
        }
        moved
    }

    /// True once a [`cancel`](Self::cancel) succeeded.
    pub fn is_cancelled(&self) -> bool {
        let w = self.word();
        w.state() == CANCELLED || (w.state() == RUNNING && w.has(STOP))
    }

    /// True once the task will never run again: a one-shot task ran (or panicked), the task was
    /// cancelled or handed back by shutdown, or a periodic task ended.
    pub fn is_done(&self) -> bool {
        let w = self.word();
        w.is_final() || (w.state() == RUNNING && w.has(STOP))
    }
}

impl Clone for TimerHandle {
    fn clone(&self) -> Self {
        let shard = self.shard();
        let s = shard.slots.get(self.slot());
        s.transition(s.word().generation(), |_| true, Word::plus_handle)
            .expect("a handle pins its slot");
        TimerHandle { id: self.id }
    }
}

impl Drop for TimerHandle {
    #[inline(always)]
    fn drop(&mut self) {
        let shard = self.shard();
        let s = shard.slots.get(self.slot());
        let w = s.word();
        if w.handles() == 1 && w.is_final() {
            // The last handle of a finished task: nobody else writes this word any more (every
            // other party only acts on a task that is not final), so a plain store will do.
            s.word.store(w.vacated().0, Release);
            shard.slots.release(self.slot());
        } else {
            self.drop_slow(w);
        }
    }
}

impl TimerHandle {
    /// A handle dropped while its task lives on, or not the last one: one fewer in the count.
    #[inline(never)]
    fn drop_slow(&self, w: Word) {
        self.shard().let_go(self.slot(), w);
    }
}

impl fmt::Debug for TimerHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TimerHandle")
            .field("state", &self.state())
            .finish()
    }
}
