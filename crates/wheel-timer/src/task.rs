//! `Task`: what to run and when, one-shot or at a fixed rate, and the misfire policy.

use std::fmt;
use std::time::{Duration, Instant};

use tickwheel_reaper::duration_to_ns;

use crate::future::Waiter;
use std::sync::Arc;

/// What a periodic task does when the timer fell behind by a period or more (a stalled machine,
/// a saturated pool). Runs are on the grid `first + k * period` (fixed rate).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum MisfirePolicy {
    /// Run once now for all the missed runs, then continue at the next grid point after now.
    #[default]
    RunOnce,
    /// Do not run late: a run that is a period or more late is skipped, and the task continues
    /// at the next grid point after now.
    Skip,
    /// Run every missed run, back to back, until caught up.
    CatchUp,
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum When {
    After(Duration),
    At(Instant),
    /// At this reading of the timer's clock (the futures, which keep their deadline exactly).
    Clock(u64),
}

/// The closure of a task and how it repeats: what a slot's cell holds (32 bytes, so a slot stays
/// one cache line).
pub(crate) enum Work {
    Once(Box<dyn FnOnce() + Send>),
    Every {
        f: Box<dyn FnMut() + Send>,
        /// Nanoseconds, saturating; zero is refused by `add_or_submit`.
        period: u64,
        policy: MisfirePolicy,
    },
    /// Wakes a future's arming `epoch`: run where it is handed out, never on the executor, and
    /// never returned by `shutdown` (which wakes it instead).
    Wake(Arc<Waiter>, u64),
}

/// A task for [`Timer::add_or_submit`](crate::Timer::add_or_submit): a closure and when to run it.
///
/// ```
/// use std::time::Duration;
/// use tickwheel::{MisfirePolicy, Task};
///
/// let once = Task::after(Duration::from_secs(900), || println!("cancel the order"));
/// let beat = Task::every(Duration::from_secs(30), || println!("heartbeat")).misfire(MisfirePolicy::Skip);
/// assert!(!once.is_periodic() && beat.is_periodic());
/// ```
#[must_use = "a task does nothing until it is added to a timer"]
pub struct Task {
    pub(crate) when: When,
    pub(crate) work: Work,
}

impl Task {
    /// Runs `f` once, `delay` after it is added. A huge delay saturates to the far future.
    pub fn after(delay: Duration, f: impl FnOnce() + Send + 'static) -> Task {
        Task {
            when: When::After(delay),
            work: Work::Once(Box::new(f)),
        }
    }

    /// Runs `f` once at `deadline`; a deadline already passed runs at once.
    pub fn at(deadline: Instant, f: impl FnOnce() + Send + 'static) -> Task {
        Task {
            when: When::At(deadline),
            work: Work::Once(Box::new(f)),
        }
    }

    /// Runs `f` every `period` at a fixed rate, the first time one period after it is added,
    /// until cancelled. See [`misfire`](Self::misfire) for what happens when the timer falls
    /// behind.
    pub fn every(period: Duration, f: impl FnMut() + Send + 'static) -> Task {
        Task {
            when: When::After(period),
            work: Work::Every {
                f: Box::new(f),
                period: duration_to_ns(period),
                policy: MisfirePolicy::default(),
            },
        }
    }

    /// Sets the misfire policy of a periodic task (no effect on a one-shot task).
    pub fn misfire(mut self, policy: MisfirePolicy) -> Task {
        if let Work::Every { policy: p, .. } = &mut self.work {
            *p = policy;
        }
        self
    }

    /// True for tasks made with [`every`](Self::every).
    pub fn is_periodic(&self) -> bool {
        matches!(self.work, Work::Every { .. })
    }

    /// Runs the task's closure once on this thread, consuming the task: for a task handed back
    /// by [`Timer::shutdown`](crate::Timer::shutdown) or an [`AddError`](crate::AddError).
    pub fn run(self) {
        match self.work {
            Work::Once(f) => f(),
            Work::Every { mut f, .. } => f(),
            Work::Wake(waiter, epoch) => waiter.fire(epoch),
        }
    }
}

impl fmt::Debug for Task {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Task");
        match &self.work {
            Work::Once(_) => d.field("kind", &"once"),
            Work::Every { period, policy, .. } => d
                .field("every", &Duration::from_nanos(*period))
                .field("misfire", policy),
            Work::Wake(..) => d.field("kind", &"wakes a future"),
        };
        d.finish_non_exhaustive()
    }
}
