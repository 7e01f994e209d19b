//! What a slot holds for a task: its closure and how it repeats ([`Work`]), when it is due
//! ([`When`]), and what it carries besides ([`Label`]). Built by the API's `Task`, run by the
//! jobs (`job.rs`). [`MisfirePolicy`], public, is here because the jobs apply it.

use std::task::Waker;
use std::time::{Duration, Instant, SystemTime};

use sync_wrapper::SyncWrapper;

use crate::service::class::Class;
use crate::service::context::TaskContext;

/// What a fixed-rate task does when the timer fell behind by a period or more (a stalled machine,
/// a saturated pool). Runs are on the grid `first + k * period`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum MisfirePolicy {
    /// Run once now for all the missed runs, then continue at the next grid point after now.
    #[default]
    RunOnce,
    /// Do not run late: a run that is a period plus a tick or more late is skipped, and the task
    /// continues at the next grid point after now. (The tick: rounding deadlines up to the tick
    /// makes runs up to a tick late, which is not a misfire. So on a 10 ms grid and a 1 ms tick,
    /// a run 10 ms late still runs, and one 11 ms late does not.)
    ///
    /// Under `Skip` and `RunOnce` alike, "after now" is strict: a grid point due at the very
    /// instant the late run ends counts among the missed ones. On a 10 ms grid, a run for 10 ms
    /// that starts at 20 ms is followed by the run for 30 ms; the point at 20 ms is not run
    /// (exactly so on a [`ManualClock`](crate::ManualClock) moved 20 ms at once; on the real
    /// clock, any point passed by the time the run ends).
    Skip,
    /// Run every missed run, back to back, until caught up.
    CatchUp,
}

impl MisfirePolicy {
    /// A [`CatchUp`](Self::CatchUp) task never owes more than this many runs: further behind,
    /// the oldest missed runs are skipped (and counted in
    /// [`Stats::skipped`](crate::Stats::skipped)).
    pub const MAX_CATCH_UP: u64 = 1000;

    /// A task behind by several runs runs at most this many back to back per hand-off, then
    /// goes back to the tick thread behind the other due tasks.
    pub const BURST: u64 = 16;
}

/// When a task is due.
#[derive(Clone, Debug)]
pub(crate) enum When {
    /// This many nanoseconds after the add (saturated: the timer's clock ends there anyway). In
    /// nanoseconds, not a `Duration`: the add path moves a `Task` by value, and a `Duration`'s
    /// 4-byte `nanos`, stored when the task is made and read back 8 bytes at a time by that move,
    /// stalled the load for about 12% of an add (a failed store-to-load forward, W6).
    After(u64),
    At(Instant),
    /// At this reading of the timer's clock (the futures, which keep their deadline exactly).
    Clock(u64),
    /// Handed back by `shutdown`: due at `.0`, which was `.1` after the shutdown's clock
    /// reading, taken at `.2` on the system's wall clock. Added again, it is due at `.0`. (Boxed:
    /// a `Task` moves by value on the add path, and this keeps it small.)
    Returned(Box<(Instant, Duration, SystemTime)>),
}

/// How a repeating task's next run is found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cadence {
    /// On the grid `first + k * period`, with a policy for runs the timer fell behind on.
    Rate(MisfirePolicy),
    /// One period after the end of the previous run.
    Delay,
}

/// What a task may carry besides its closure and its deadline. Boxed behind one thin optional
/// pointer, so a slot's cell stays 32 bytes and a task that carries nothing allocates nothing.
#[derive(Debug, Default)]
pub(crate) struct Label {
    /// The user's key (see [`Task::keyed`](crate::Task::keyed)).
    pub(crate) key: Option<String>,
    /// The instant its next run was meant for, when the timer's clock cannot hold it: one before
    /// the clock began (a stale [`Task::at`](crate::Task::at), a task handed back by an earlier timer). That run
    /// is due at the clock's beginning, that is at once; its context and lateness count from this
    /// instant. Only while the task is in the timer: set by the add that takes it, and taken by
    /// the run, or by the shutdown that hands the task back (as its deadline).
    pub(crate) stale: Option<Instant>,
}

/// A task's [`Label`], if it has one.
pub(crate) type Labels = Option<Box<Label>>;

/// The key in `label`.
pub(crate) fn key_of(label: &Labels) -> Option<&String> {
    label.as_deref()?.key.as_ref()
}

/// A one-shot task's closure. `SyncWrapper` makes a `Task` (and so `AddError`) `Sync`: nothing
/// reaches the closure through a shared reference.
pub(crate) type OnceFn = SyncWrapper<Box<dyn FnOnce(&mut TaskContext<'_>) + Send>>;

/// A repeating task's closure (see [`OnceFn`]).
pub(crate) type RepeatFn = SyncWrapper<Box<dyn FnMut(&mut TaskContext<'_>) + Send>>;

/// A repeating task: boxed, so a slot's cell stays 32 bytes.
pub(crate) struct Repeat {
    pub(crate) f: RepeatFn,
    /// As given, nanoseconds, saturating; zero is refused by `add_or_submit`. Runs use at least
    /// the tick.
    pub(crate) period: u64,
    pub(crate) cadence: Cadence,
    /// Runs so far (the context's run count).
    pub(crate) runs: u64,
    pub(crate) label: Labels,
    /// Its record of slow runs, when it is a class of its own (no class name).
    pub(crate) class: Class,
}

/// The closure of a task and how it repeats: what a slot's cell holds (32 bytes, so a slot stays
/// one cache line).
pub(crate) enum Work {
    Once {
        f: OnceFn,
        label: Labels,
        /// The closure has nothing to drop (zero-size, no drop glue): see `PLAIN` in `slots/word.rs`.
        plain: bool,
    },
    Every(Box<Repeat>),
    /// Wakes a future: run where it is handed out, never on the executor, and never returned by
    /// `shutdown` (which wakes it instead). It holds the future's waker once a poll left one
    /// (see `slots/waker.rs`), and whoever ends the arming wakes the waker in the task it took.
    Wake(Option<Waker>),
}

impl Work {
    /// Its label's place (a future's wake-up has none).
    pub(crate) fn label_mut(&mut self) -> Option<&mut Labels> {
        match self {
            Work::Once { label, .. } => Some(label),
            Work::Every(r) => Some(&mut r.label),
            Work::Wake(..) => None,
        }
    }

    pub(crate) fn label(&self) -> Option<&Label> {
        match self {
            Work::Once { label, .. } => label.as_deref(),
            Work::Every(r) => r.label.as_deref(),
            Work::Wake(..) => None,
        }
    }

    /// The spacing of its fixed-rate grid (ns, as asked for), if it is a fixed-rate task.
    pub(crate) fn grid(&self) -> Option<u64> {
        match self {
            Work::Every(r) if matches!(r.cadence, Cadence::Rate(_)) => Some(r.period),
            _ => None,
        }
    }

    /// Takes the instant its next run was meant for, if that is before the timer's clock began
    /// (see [`Label::stale`]).
    pub(crate) fn take_stale(&mut self) -> Option<Instant> {
        self.label_mut()?.as_mut()?.stale.take()
    }

    /// Marks its next run as meant for `at`, an instant before the timer's clock began.
    #[cold]
    pub(crate) fn mark_stale(&mut self, at: Instant) {
        if let Some(label) = self.label_mut() {
            label.get_or_insert_default().stale = Some(at);
        }
    }
}
