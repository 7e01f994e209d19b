//! [`Sleep`]: a future that completes at a deadline of the timer's clock.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker, ready};
use std::time::Instant;

use super::Outcome;
use crate::api::handle::TimerHandle;
use crate::api::task::Task;
use crate::service::core::{Core, instant_at, ns_since};
use crate::service::registry;
use crate::service::work::{When, Work};

/// A future that completes once the timer's clock reaches its deadline: never early, on the real
/// clock or a [`ManualClock`](crate::ManualClock). Made by [`Timer::sleep`](crate::Timer::sleep)
/// and [`Timer::sleep_until`](crate::Timer::sleep_until).
///
/// It is armed when made: it counts in [`Timer::pending`](crate::Timer::pending) until it fires
/// or is dropped, and dropping it cancels its timer at once (O(1), nothing retained). If the
/// timer shuts down (or is dropped) first, it completes at once and
/// [`is_shutdown`](Self::is_shutdown) says so. `Send + Sync + Unpin + 'static`: spawn it, store
/// it, poll it from any task.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use std::time::Duration;
/// use tickwheel::{InlineExecutor, ManualClock, Timer};
///
/// let clock = ManualClock::new();
/// let timer = Timer::builder().clock(clock.clone()).executor(Arc::new(InlineExecutor::new())).build()?;
/// let sleep = timer.sleep(Duration::from_secs(30));
/// assert_eq!(timer.pending(), 1);
/// clock.advance(Duration::from_secs(30));
/// assert!(sleep.is_elapsed()); // `.await` would complete now
/// # Ok(()) }
/// ```
#[must_use = "a sleep does nothing unless awaited"]
// The first three fields are what a cancel and a drop read: 32 bytes, 32-aligned, so one cache
// line whatever the sleep's place in its task. A sleep that wraps a request is cold by the time
// the request completes (thousands of other tasks ran meanwhile), and with these fields spread
// over two lines that cancel waited for two misses (W11's profile: a third of the timeout's own
// cost on one core).
#[repr(C, align(32))]
pub struct Sleep {
    /// The arming's task, while it may still end or its end was not yet seen: `None` once a poll
    /// saw it end (`ended` then says how), once it was cancelled, or if it was refused.
    handle: Option<TimerHandle>,
    /// Clock nanoseconds; `None` while a sleep made from a delay waits for its shard to stamp it
    /// (see [`Sleep::after`]).
    deadline: Option<u64>,
    /// How the current arming ended, once a poll saw it (or the timer refused it).
    ended: Option<Outcome>,
    /// True once a waker may have been left in the current arming's task: a sleep dropped
    /// without a `Pending` poll then takes none back out (when the waker had a cell of its
    /// own, its look-up and lock were a fifth of a sleep made and dropped).
    waker_left: bool,
    timer: TimerRef,
}

/// How a sleep finds its timer again without holding it. An `Arc` of the timer in every sleep
/// was a read-modify-write of one counter shared by every thread that makes or drops a
/// future, twice per sleep: about 25 ns of a make-and-drop pair with two threads at it. Only
/// a re-arming needs the timer (`reset` after the sleep completed), and it finds it through
/// the shard of the latest arming, which is never freed and knows which timer it serves.
#[derive(Clone, Copy, Debug)]
struct TimerRef {
    id: u64,
    /// `u32::MAX`: no arming was ever accepted (the timer had shut down).
    shard: u32,
    /// The instant clock time 0 stands for (see `Core::origin`).
    origin: Instant,
}

impl TimerRef {
    fn new(core: &Core) -> TimerRef {
        TimerRef {
            id: core.id,
            shard: u32::MAX,
            origin: core.origin,
        }
    }

    /// The timer, if it is still there.
    fn core(&self) -> Option<Arc<Core>> {
        if self.shard == u32::MAX {
            return None;
        }
        registry::shard(self.shard)
            .timer()
            .filter(|core| core.id == self.id)
    }
}

impl Sleep {
    /// A sleep until clock time `deadline`, armed.
    pub(crate) fn new(core: &Arc<Core>, deadline: u64) -> Sleep {
        // The handle is made first and the sleep built whole after: built first and armed in
        // place, its handle was written as two 8-byte stores and read back at once as one
        // 16-byte load to move the sleep out, a store-forwarding stall on AMD Zen that took
        // three quarters of this function's time in W11's profile.
        let handle = arm(core, When::Clock(deadline));
        Sleep::armed(core, handle, Some(deadline))
    }

    fn armed(core: &Core, handle: Option<TimerHandle>, deadline: Option<u64>) -> Sleep {
        let mut timer = TimerRef::new(core);
        if let Some(h) = &handle {
            timer.shard = h.shard_id();
        }
        Sleep {
            ended: refused(&handle),
            handle,
            deadline,
            waker_left: false,
            timer,
        }
    }

    /// A sleep of `delay` ns from now, armed. Like a task's delay, a long one is stamped by its
    /// shard in a batch, from a clock reading taken after the add (so never early): the add
    /// reads no clock, which was two thirds of a sleep's own cost (two readings, one here and
    /// one to file it). Its deadline is learned from the slot when asked for, or when it ends.
    pub(crate) fn after(core: &Arc<Core>, delay: u64) -> Sleep {
        if delay < core.short_ns || core.exact {
            // Filed at once anyway, which reads the clock: the deadline costs nothing more.
            return Sleep::new(core, core.clock.now().saturating_add(delay));
        }
        let handle = arm(core, When::After(delay));
        // Refused (the timer shut down): no slot will ever hold a stamp, so stamp it here.
        let deadline = match handle {
            Some(_) => None,
            None => Some(core.clock.now().saturating_add(delay)),
        };
        Sleep::armed(core, handle, deadline)
    }

    /// The instant it completes at (by the timer's clock; see
    /// [`TimerBuilder::clock`](crate::TimerBuilder::clock) for how a manual clock maps instants).
    /// For a sleep made from a delay, that is the delay after a clock reading taken no earlier
    /// than the sleep was made (within a tick of it); asking for it before the timer's thread
    /// stamped it stamps it now.
    pub fn deadline(&self) -> Instant {
        instant_at(self.timer.origin, self.deadline_ns())
    }

    /// True once the deadline came (the future is ready, or was).
    pub fn is_elapsed(&self) -> bool {
        self.outcome() == Some(Outcome::Fired)
    }

    /// True if it completed because the timer shut down (or was gone) before the deadline.
    pub fn is_shutdown(&self) -> bool {
        self.outcome() == Some(Outcome::Shutdown)
    }

    /// True while the sleep holds an arming: from an add the timer took until a poll sees it end
    /// or a drop lets it go. Right after a sleep is made, false only if the timer refused it.
    pub(crate) fn is_armed(&self) -> bool {
        self.handle.is_some()
    }

    /// How the current arming ended, if it did (seen by a poll, or read from its task's word).
    fn outcome(&self) -> Option<Outcome> {
        self.ended
            .or_else(|| Outcome::of(self.handle.as_ref()?.word()))
    }

    /// Moves the deadline to `deadline`, earlier or later, whether or not the sleep already
    /// completed: it completes again at the new deadline. O(1): the armed timer is moved if it is
    /// still waiting, else a new one is armed (a late wake-up of the old one is ignored).
    pub fn reset(self: Pin<&mut Self>, deadline: Instant) {
        let this = self.get_mut();
        let ns = ns_since(this.timer.origin, deadline);
        if !this.moved_to(ns) {
            let core = this.timer.core();
            this.rearm(core.as_ref(), ns);
        }
    }

    /// `reset` in clock nanoseconds, for a caller that holds the timer (`Interval`).
    pub(crate) fn reset_to(&mut self, core: &Arc<Core>, deadline: u64) {
        if !self.moved_to(deadline) {
            self.rearm(Some(core), deadline);
        }
    }

    /// Moves the armed timer to `deadline` if it is still waiting.
    fn moved_to(&mut self, deadline: u64) -> bool {
        self.deadline = Some(deadline);
        self.ended.is_none()
            && self
                .handle
                .as_ref()
                .is_some_and(|h| h.reschedule_at_ns(deadline))
    }

    /// Starts a new arming for `deadline` (`core`: the timer, `None` if it is gone: the arming
    /// then ends at once, shut down).
    ///
    /// A waker the old arming kept goes to the new one (a task may wait on this sleep while
    /// another resets it), or is woken if the new arming ended at once (refused, or due already
    /// and fired by its add): nobody waits for ever. A waker is foreign code: one that panics is
    /// counted like a panicking task (by the timer, if it is still there), not passed on to the
    /// caller.
    fn rearm(&mut self, core: Option<&Arc<Core>>, deadline: u64) {
        let waker = self.disarm();
        self.handle = core.and_then(|core| arm(core, When::Clock(deadline)));
        self.ended = refused(&self.handle);
        let ended = match (&self.handle, waker) {
            (Some(h), Some(w)) => {
                let back = h.pass_waker(w);
                self.waker_left = back.is_none();
                back
            }
            (_, w) => w,
        };
        if let Some(w) = ended {
            match core {
                Some(core) => {
                    core.panics.run(|| w.wake());
                }
                None => drop(crate::service::panic::catch(|| w.wake())),
            }
        }
        if let Some(h) = &self.handle {
            self.timer.shard = h.shard_id();
        }
    }

    /// Cancels the armed timer, if any: the future will not complete for this arming. A
    /// deadline not stamped yet is not looked up first: only a completed
    /// [`Timeout`](super::Timeout) calls this, which never asks for it again (its `Debug`
    /// shows `None` then).
    pub(crate) fn cancel(&mut self) {
        drop(self.disarm());
    }

    /// Ends the current arming: cancels the task and lets its slot go (one compare-and-swap
    /// while it still waits in its shard's ring: the sleep holds its only handle), taking back
    /// the waker a poll may have left in it (see `slots/waker.rs`). Returns that waker, for the
    /// caller to drop (with nothing borrowed: foreign code, which may drop or make sleeps) or to
    /// pass on.
    #[must_use = "a waker is dropped by the caller, outside every borrow"]
    fn disarm(&mut self) -> Option<Waker> {
        let h = self.handle.take()?;
        h.cancel_and_drop(std::mem::take(&mut self.waker_left))
    }

    /// Starts bringing the line a cancel touches (the slot's) into the cache: a future that
    /// wraps another calls it before polling that one, which then hides the wait.
    /// Only once a poll left a waker: before that (the first poll, right after the add) the
    /// lines are in the cache already, and the look-ups would be all the prefetch costs.
    pub(crate) fn prefetch(&self) {
        if self.waker_left
            && let Some(h) = &self.handle
        {
            h.prefetch();
        }
    }

    /// The clock time it completes at, in nanoseconds.
    pub(crate) fn deadline_ns(&self) -> u64 {
        if let Some(d) = self.deadline {
            return d;
        }
        match &self.handle {
            // Waiting: stamped on demand. Else it ended (or is being handed out): stamped before.
            Some(h) => h.deadline_ns().unwrap_or_else(|| h.stamped_deadline_ns()),
            // Only a sleep that cancelled itself before its stamp has neither, which only a
            // completed `Timeout` does: it never asks again (its `Debug` shows `None`).
            None => u64::MAX,
        }
    }

    /// The deadline if it is known without stamping it (for `Debug`, which should not take
    /// the shard's lock and drain its ring, handing out due tasks on the caller's thread).
    fn known_deadline(&self) -> Option<Instant> {
        let ns = match self.deadline {
            Some(d) => Some(d),
            None => self.handle.as_ref()?.deadline_if_stamped_ns(),
        };
        ns.map(|d| instant_at(self.timer.origin, d))
    }

    /// Ready with how the current arming ended. (Pending for ever after `cancel`, which only a
    /// completed [`Timeout`](super::Timeout) calls: it polls no more.)
    pub(crate) fn poll_outcome(&mut self, cx: &mut Context<'_>) -> Poll<Outcome> {
        if let Some(o) = self.ended {
            return Poll::Ready(o);
        }
        let Some(h) = &self.handle else {
            return Poll::Pending;
        };
        let polled = h.poll_wake(cx, !self.waker_left);
        self.waker_left |= polled.is_pending();
        let o = ready!(polled);
        self.waker_left = false;
        // Nothing left to cancel, and no waker to take back: the ending side took the task with
        // it (a spurious wake-up of this task at worst). That side stamped
        // the slot before it moved the word (which this poll read, acquiring the stamp): keep
        // the deadline before the handle lets the slot go.
        self.deadline.get_or_insert_with(|| h.stamped_deadline_ns());
        self.ended = Some(o);
        self.handle = None;
        Poll::Ready(o)
    }
}

/// Adds the task of an arming: `None` if the timer refuses it (shut down). Inlined, so `when`
/// is built in place: passed by reference, it was written as two 8-byte stores and read back at
/// once as one 16-byte load, a failed store-to-load forward that took a quarter of a sleep's
/// make-and-drop (`perf annotate`).
#[inline(always)]
fn arm(core: &Arc<Core>, when: When) -> Option<TimerHandle> {
    let task = Task {
        when,
        work: Work::Wake(None),
        route: None,
    };
    crate::api::add::add(core, task).ok()
}

/// How an arming that got `handle` ended already: shut down if it was refused.
fn refused(handle: &Option<TimerHandle>) -> Option<Outcome> {
    handle.is_none().then_some(Outcome::Shutdown)
}

impl Future for Sleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.get_mut().poll_outcome(cx).map(drop)
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        drop(self.disarm());
    }
}

impl fmt::Debug for Sleep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sleep")
            .field("deadline", &self.known_deadline())
            .field("elapsed", &self.is_elapsed())
            .field("shutdown", &self.is_shutdown())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use std::mem::{align_of, offset_of, size_of};

    use super::*;

    #[test]
    fn what_a_cancel_reads_is_in_one_cache_line() {
        assert_eq!(align_of::<Sleep>(), 32);
        for (field, end) in [
            (
                "handle",
                offset_of!(Sleep, handle) + size_of::<Option<TimerHandle>>(),
            ),
            (
                "deadline",
                offset_of!(Sleep, deadline) + size_of::<Option<u64>>(),
            ),
            (
                "ended",
                offset_of!(Sleep, ended) + size_of::<Option<Outcome>>(),
            ),
        ] {
            assert!(end <= 32, "{field} ends at byte {end}");
        }
        assert_eq!(
            size_of::<Sleep>(),
            64,
            "the timer's half fills the second 32 bytes"
        );
    }
}
