//! [`Interval`]: ticks at a fixed rate (with a misfire policy) or with a fixed delay.

use std::fmt;
use std::future::poll_fn;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use super::{Outcome, Sleep};
use crate::loom::atomic::Ordering::Relaxed;
use crate::service::core::Core;
use crate::service::job::next_run;
use crate::service::work::MisfirePolicy;

/// Ticks every `period`, from [`Timer::interval`](crate::Timer::interval) and
/// [`Timer::interval_at`](crate::Timer::interval_at).
///
/// [`tick`](Self::tick) completes at each tick with the instant that tick was scheduled for.
/// By default ticks are on a fixed-rate grid `start + k * period`, and when the caller fell
/// behind by a period or more, the [`MisfirePolicy`] says what happens, as for
/// [`Task::every`](crate::Task::every): `RunOnce` (the default) gives one tick for all the missed
/// ones and goes on at the next grid point after now; `Skip` gives no tick a period plus a tick
/// or more late (see [`MisfirePolicy::Skip`]) and waits for the next grid point after now;
/// `CatchUp` gives every missed tick at once, back to back (at most
/// [`MisfirePolicy::MAX_CATCH_UP`](crate::MisfirePolicy::MAX_CATCH_UP) of them). With
/// [`set_fixed_delay`](Self::set_fixed_delay) the next tick is instead one period after the
/// previous one was taken (JDK's `scheduleWithFixedDelay`, tokio's `MissedTickBehavior::Delay`).
///
/// A period below the timer's tick (zero included) ticks at the tick, as `Task::every` runs.
/// Ticks are never early. If the timer shuts down, `tick` completes at once (every time) and
/// [`is_shutdown`](Self::is_shutdown) says so.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use std::time::Duration;
/// use tickwheel::{InlineExecutor, ManualClock, Timer};
///
/// let clock = ManualClock::new();
/// let timer = Timer::builder().clock(clock.clone()).executor(Arc::new(InlineExecutor::new())).build()?;
/// let mut every = timer.interval(Duration::from_secs(10));
/// // (in async code: `every.tick().await`)
/// # use std::task::{Context, Poll, Waker};
/// # let mut cx = Context::from_waker(Waker::noop());
/// # let mut tick = |i: &mut tickwheel::Interval| match std::pin::pin!(i.tick()).poll(&mut cx) {
/// #     Poll::Ready(at) => Some(at), Poll::Pending => None };
/// # use std::future::Future;
/// let first = tick(&mut every).expect("the first tick is at once");
/// assert!(tick(&mut every).is_none());
/// clock.advance(Duration::from_secs(10));
/// assert_eq!(tick(&mut every), Some(first + Duration::from_secs(10)));
/// # Ok(()) }
/// ```
pub struct Interval {
    /// Its timer: an interval re-arms at every tick, and reads the clock to do it.
    core: Arc<Core>,
    sleep: Sleep,
    /// Nanoseconds, at least the tick.
    period: u64,
    policy: MisfirePolicy,
    fixed_delay: bool,
    /// The instant the next tick was meant for, when it is before the timer's clock began (a
    /// [`reset_at`](Self::reset_at) in fixed-delay mode): that tick is due at once and reports it.
    stale: Option<Instant>,
    /// The last tick was taken: the next would fall past the end of the timer's clock.
    finished: bool,
}

impl Interval {
    /// First tick at clock time `start`, then every `period` ns.
    /// The spacing of the ticks for a `period` asked for (ns): a period below the tick runs at
    /// the tick, as `Task::every` does.
    pub(crate) fn grid(core: &Core, period: u64) -> u64 {
        period.max(core.tick_ns)
    }

    pub(crate) fn new(core: &Arc<Core>, sleep: Sleep, period: u64) -> Interval {
        let tick = core.tick_ns;
        // Counted as `Task::every` counts: only if added (not refused by a shutdown).
        if period < tick && sleep.is_armed() {
            core.rounded.fetch_add(1, Relaxed);
        }
        Interval {
            core: core.clone(),
            sleep,
            period: Interval::grid(core, period),
            policy: MisfirePolicy::default(),
            fixed_delay: false,
            stale: None,
            finished: false,
        }
    }

    /// Completes at the next tick with the instant it was scheduled for. Cancel-safe: dropping
    /// the returned future before it completes loses no tick. Never completes once the interval
    /// [`is_finished`](Self::is_finished).
    pub async fn tick(&mut self) -> Instant {
        poll_fn(|cx| self.poll_tick(cx)).await
    }

    /// The poll behind [`tick`](Self::tick), for hand-written futures and streams. Pending for
    /// ever, with no waker kept, once the interval [`is_finished`](Self::is_finished).
    pub fn poll_tick(&mut self, cx: &mut Context<'_>) -> Poll<Instant> {
        match self.poll_next_tick(cx) {
            Poll::Ready(Tick::Due(at) | Tick::Shutdown(at)) => Poll::Ready(at),
            Poll::Ready(Tick::Finished) | Poll::Pending => Poll::Pending,
        }
    }

    /// The next tick: one its deadline brought (even one whose re-arming the timer then
    /// refused, shutting down), one a shutdown completed, or none, ever again.
    fn poll_next_tick(&mut self, cx: &mut Context<'_>) -> Poll<Tick> {
        loop {
            if self.finished {
                return Poll::Ready(Tick::Finished);
            }
            let scheduled = self.sleep.deadline_ns();
            match self.sleep.poll_outcome(cx) {
                Poll::Pending => return Poll::Pending,
                // Shut down: every tick completes at once, at the instant it was due.
                Poll::Ready(Outcome::Shutdown) => {
                    let at = self
                        .stale
                        .unwrap_or_else(|| self.core.instant_of(scheduled));
                    return Poll::Ready(Tick::Shutdown(at));
                }
                Poll::Ready(Outcome::Fired) => {}
            }
            let stale = self.stale.take();
            let at = stale.unwrap_or_else(|| self.core.instant_of(scheduled));
            let now = self.core.clock.now();
            if self.fixed_delay {
                self.rearm(now.checked_add(self.period));
                return Poll::Ready(Tick::Due(at));
            }
            let late = now.saturating_sub(scheduled);
            let (next, mut skipped) = match stale {
                // A tick meant before the clock began (set in fixed-delay mode, which was left
                // since): its grid goes on at its first point at or after the beginning.
                Some(at) => match self.core.ns_at(at, || Some(self.period)) {
                    first if first > now => (Some(first), 0),
                    first => next_run(first, self.period, now, self.policy),
                },
                None => next_run(scheduled, self.period, now, self.policy),
            };
            self.rearm(next);
            // Rounding to the tick makes every tick up to a tick late: not a misfire.
            let skip_this = self.policy == MisfirePolicy::Skip
                && late >= self.period.saturating_add(self.core.tick_ns);
            skipped += u64::from(skip_this);
            if skipped > 0 {
                self.core.skipped.fetch_add(skipped, Relaxed);
            }
            if skip_this {
                continue; // no late tick: wait for the next grid point
            }
            return Poll::Ready(Tick::Due(at));
        }
    }

    /// Arms the next tick at clock time `next`; `None`, past the end of the timer's clock (as a
    /// repeating task then ends): the interval is finished.
    fn rearm(&mut self, next: Option<u64>) {
        match next {
            Some(next) => self.sleep.reset_to(&self.core, next),
            None => {
                self.finished = true;
                self.sleep.cancel();
            }
        }
    }

    /// True once the next tick would fall past the end of the timer's clock (`u64::MAX` ns, about
    /// 584 years after it began, or a [`ManualClock`](crate::ManualClock) moved that far): the
    /// last tick was taken, [`tick`](Self::tick) never completes again and the stream (with the
    /// `stream` feature) has ended, as a repeating task ends there. [`reset_at`](Self::reset_at)
    /// starts it again. A finished interval stays so if the timer then shuts down (its `tick`
    /// does not start completing at once).
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Sets what happens to ticks the caller fell behind on (fixed-rate mode).
    pub fn set_misfire_policy(&mut self, policy: MisfirePolicy) {
        self.policy = policy;
    }

    /// The misfire policy.
    pub fn misfire_policy(&self) -> MisfirePolicy {
        self.policy
    }

    /// Fixed-delay mode: each tick comes one period after the previous one was taken, instead
    /// of on a fixed-rate grid (the misfire policy then does not apply).
    pub fn set_fixed_delay(&mut self, fixed_delay: bool) {
        self.fixed_delay = fixed_delay;
    }

    /// The period, after rounding up to the timer's tick.
    pub fn period(&self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.period)
    }

    /// True if the timer shut down: every tick now completes at once.
    pub fn is_shutdown(&self) -> bool {
        self.sleep.is_shutdown()
    }

    /// Moves the next tick to `at` (and the fixed-rate grid with it). An instant before the
    /// timer's clock began (the instant the timer was built, or a
    /// [`ManualClock`](crate::ManualClock)'s epoch) keeps the grid's phase: the next tick is the
    /// grid's first point at or after that beginning, as for
    /// [`Timer::interval_at`](crate::Timer::interval_at). In fixed-delay mode there is no grid:
    /// the tick is due at once and completes with `at`.
    pub fn reset_at(&mut self, at: Instant) {
        let grid = (!self.fixed_delay).then_some(self.period);
        let ns = self.core.ns_at(at, || grid);
        self.stale = (self.fixed_delay && at < self.core.origin).then_some(at);
        self.finished = false;
        self.sleep.reset_to(&self.core, ns);
    }
}

/// What [`Interval::poll_next_tick`] found.
enum Tick {
    /// A tick its deadline brought, scheduled for this instant.
    Due(Instant),
    /// The timer shut down: the tick completes at once, at the instant it was due.
    Shutdown(Instant),
    /// The next tick would fall past the end of the timer's clock: none will ever come.
    Finished,
}

/// With the `stream` feature: the ticks as a stream, ending once the timer has shut down (where
/// [`tick`](Interval::tick) would complete at once for ever) or the interval
/// [`is_finished`](Interval::is_finished).
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use futures::StreamExt;
/// use tickwheel::Timer;
///
/// let timer = Timer::new()?;
/// let ticks: Vec<_> = futures::executor::block_on(timer.interval(Duration::from_millis(1)).take(3).collect());
/// assert_eq!(ticks.len(), 3);
/// assert!(ticks.windows(2).all(|w| w[1] - w[0] >= Duration::from_millis(1)));
/// # Ok(()) }
/// ```
#[cfg(feature = "stream")]
impl futures_core::Stream for Interval {
    type Item = Instant;

    fn poll_next(self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Instant>> {
        let this = self.get_mut();
        if this.is_shutdown() {
            return Poll::Ready(None);
        }
        // A tick its deadline brought is yielded even if the timer refused the next arming.
        this.poll_next_tick(cx).map(|tick| match tick {
            Tick::Due(at) => Some(at),
            Tick::Shutdown(_) | Tick::Finished => None,
        })
    }
}

impl fmt::Debug for Interval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Interval")
            .field("next", &self.sleep.deadline())
            .field("period", &self.period())
            .field("policy", &self.policy)
            .field("fixed_delay", &self.fixed_delay)
            .field("finished", &self.finished)
            .finish()
    }
}
