//! The futures, the add path's refusals and the accounting, tried as a hostile user would (an
//! adversarial review): clock jumps of thousands of periods, resets after shutdown and racing
//! the tick thread, panicking wakers, refusals run again, `max_pending` with futures in the mix.
//! Manual clock only; every assertion after `clock.advance` is exact (the advance waits for the
//! tick thread, and tasks run inline).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::time::{Duration, Instant};

use tickwheel::{AddError, MisfirePolicy, Task, TimeoutError, Timer};

use crate::support::{DAY, MS, SEC, counter, manual, poll, tick};

fn runs() -> (Arc<AtomicUsize>, impl FnOnce() + Send + 'static) {
    let n = Arc::new(AtomicUsize::new(0));
    let m = n.clone();
    (n, move || {
        m.fetch_add(1, SeqCst);
    })
}

/// Adds a task through `add` to a timer that is shut down (or gone): it must come back in
/// `AddError::Shutdown`, whole, and run when asked.
fn handed_back_on_shutdown(add: impl FnOnce(Task) -> Result<tickwheel::TimerHandle, AddError>) {
    let (n, f) = runs();
    match add(Task::after(SEC, f)) {
        Err(AddError::Shutdown(task)) => task.run(),
        other => panic!("expected Shutdown, got {other:?}"),
    }
    assert_eq!(n.load(SeqCst), 1);
}

// ---------------------------------------------------------------- Interval

/// `Skip` skips a tick a period plus a tick or more late, and only that (`MisfirePolicy::Skip`):
/// a tick exactly one period late comes, one a period and a tick late does not.
#[test]
fn interval_skip_skips_from_a_period_and_a_tick_late() {
    let (clock, timer) = manual();
    let (_, waker) = counter();
    let mut iv = timer.interval(10 * MS);
    iv.set_misfire_policy(MisfirePolicy::Skip);
    let start = tick(&mut iv, &waker).expect("first tick at once");
    clock.advance(20 * MS); // the tick at 10 ms is one period late: still given
    let got = tick(&mut iv, &waker).map(|at| at - start);
    assert_eq!(got, Some(10 * MS));
    // The next grid point after 20 ms is 30 ms: at 41 ms it is a period and a tick late.
    clock.advance(21 * MS);
    let got = tick(&mut iv, &waker).map(|at| at - start);
    assert_eq!(
        got, None,
        "a tick a period and a tick late was given: {got:?}"
    );
    // Never given: 20 ms (passed while the 10 ms tick was late), 30 ms (a period and a tick
    // late) and 40 ms (passed meanwhile).
    assert_eq!(timer.stats().skipped, 3);
    clock.advance(9 * MS);
    assert_eq!(tick(&mut iv, &waker).map(|at| at - start), Some(50 * MS));
}

/// CatchUp after a jump of 5000 periods gives MAX_CATCH_UP + 1 ticks (every one on the
/// grid, increasing, none after now), then waits; skipped + given = grid points passed.
#[test]
fn interval_catch_up_after_a_huge_jump() {
    let (clock, timer) = manual();
    let (_, waker) = counter();
    let p = 10 * MS;
    let mut iv = timer.interval(p);
    iv.set_misfire_policy(MisfirePolicy::CatchUp);
    let start = tick(&mut iv, &waker).unwrap();
    clock.advance(p * 5000);
    let mut got = Vec::new();
    while let Some(at) = tick(&mut iv, &waker) {
        got.push(at - start);
        assert!(got.len() <= 6000, "endless catch-up");
    }
    assert_eq!(got.len() as u64, MisfirePolicy::MAX_CATCH_UP + 1);
    assert_eq!(got[0], p, "the due tick first");
    assert!(
        got[1..].windows(2).all(|w| w[1] - w[0] == p),
        "then the last MAX_CATCH_UP, back to back"
    );
    assert_eq!(*got.last().unwrap(), p * 5000);
    assert_eq!(timer.stats().skipped + got.len() as u64, 5000);
    clock.advance(p);
    assert_eq!(tick(&mut iv, &waker).map(|a| a - start), Some(p * 5001));
}

/// After shutdown every tick completes at once, also after reset_at; is_shutdown.
#[test]
fn interval_after_shutdown_and_reset() {
    let (clock, timer) = manual();
    let (wakes, waker) = counter();
    let mut iv = timer.interval(SEC);
    tick(&mut iv, &waker).unwrap();
    assert!(tick(&mut iv, &waker).is_none());
    drop(timer.shutdown());
    assert_eq!(wakes.0.load(SeqCst), 1, "woken by shutdown");
    assert!(iv.is_shutdown());
    for _ in 0..3 {
        assert!(tick(&mut iv, &waker).is_some());
    }
    iv.reset_at(timer.now() + 100 * SEC);
    assert!(tick(&mut iv, &waker).is_some());
    assert!(iv.is_shutdown());
    clock.advance(SEC);
    assert_eq!(timer.pending(), 0);
}

/// A tick future dropped while pending loses no tick (cancel-safety, `Interval::tick`).
#[test]
fn interval_tick_dropped_while_pending_loses_nothing() {
    let (clock, timer) = manual();
    let (_, waker) = counter();
    let mut iv = timer.interval(SEC);
    let start = tick(&mut iv, &waker).unwrap();
    assert!(tick(&mut iv, &waker).is_none()); // polled once, dropped
    clock.advance(SEC);
    // not polled at the fire: the next tick() still gets it
    clock.advance(MS);
    assert_eq!(tick(&mut iv, &waker).map(|a| a - start), Some(SEC));
}

/// Periods of zero, 1 ns, Duration::MAX; interval_at far past / far future: no panic.
#[test]
fn interval_extreme_periods_and_starts() {
    let (clock, timer) = manual();
    let (_, waker) = counter();
    let mut huge = timer.interval(Duration::MAX);
    assert!(tick(&mut huge, &waker).is_some());
    assert!(tick(&mut huge, &waker).is_none());
    let past = Instant::now()
        .checked_sub(Duration::from_secs(3600))
        .unwrap_or_else(Instant::now);
    let mut p = timer.interval_at(past, Duration::ZERO);
    // Before the clock began: the grid (at the tick) keeps its phase, its first point within a
    // tick of the beginning (`Timer::interval_at`).
    clock.advance(MS);
    assert!(tick(&mut p, &waker).is_some());
    let far = Instant::now() + Duration::from_secs(100 * 365 * 86_400);
    let mut f = timer.interval_at(far, Duration::from_nanos(1));
    assert!(tick(&mut f, &waker).is_none());
    clock.advance(Duration::from_secs(86_400));
    assert!(tick(&mut huge, &waker).is_none());
    assert!(tick(&mut f, &waker).is_none());
    drop((huge, p, f));
    assert_eq!(timer.pending(), 0);
}

// ---------------------------------------------------------------- Sleep::reset

/// Reset after completion, to the past, to later, and after shutdown.
#[test]
fn sleep_reset_after_completion_and_shutdown() {
    let (clock, timer) = manual();
    let (_, waker) = counter();
    let mut s = Box::pin(timer.sleep(SEC));
    clock.advance(SEC);
    assert!(poll(&mut s, &waker).is_ready());
    // to the past: completes at once
    let past = timer.now() - 500 * MS;
    s.as_mut().reset(past);
    assert!(poll(&mut s, &waker).is_ready());
    assert!(s.is_elapsed());
    // later
    s.as_mut().reset(timer.now() + SEC);
    assert!(poll(&mut s, &waker).is_pending());
    assert!(!s.is_elapsed());
    clock.advance(SEC - MS);
    assert!(poll(&mut s, &waker).is_pending());
    clock.advance(MS);
    assert!(poll(&mut s, &waker).is_ready());
    // earlier, while pending
    s.as_mut().reset(timer.now() + 10 * SEC);
    assert!(poll(&mut s, &waker).is_pending());
    s.as_mut().reset(timer.now() + SEC);
    clock.advance(SEC);
    assert!(poll(&mut s, &waker).is_ready());
    assert_eq!(timer.pending(), 0);
    drop(timer.shutdown());
    s.as_mut().reset(timer.now() + SEC);
    assert!(poll(&mut s, &waker).is_ready());
    assert!(s.is_shutdown() && !s.is_elapsed());
}

/// Reset racing the tick thread: a sleep reset to a fresh deadline while the clock
/// moves on another thread completes once per arming it is polled for, never early.
#[test]
fn sleep_reset_racing_the_tick_thread() {
    let (clock, timer) = manual();
    let (_, waker) = counter();
    let c2 = clock.clone();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let st = stop.clone();
    let mover = std::thread::spawn(move || {
        while !st.load(SeqCst) {
            c2.advance(MS);
        }
    });
    let mut s = Box::pin(timer.sleep(MS));
    for _ in 0..2000 {
        let target = timer.now() + 2 * MS;
        s.as_mut().reset(target);
        let _ = poll(&mut s, &waker);
        if s.is_elapsed() {
            assert!(timer.now() >= target, "elapsed before its deadline");
        }
    }
    stop.store(true, SeqCst);
    mover.join().unwrap();
    drop(s);
    assert_eq!(timer.pending(), 0);
}

// ---------------------------------------------------------------- Timeout

/// An inner future ready exactly at the deadline wins (`Timeout`).
#[test]
fn timeout_inner_ready_at_the_deadline_wins() {
    let (clock, timer) = manual();
    let (_, waker) = counter();
    let at = timer.now() + SEC;
    let mut t = Box::pin(timer.timeout_at(at, timer.sleep_until(at)));
    assert!(poll(&mut t, &waker).is_pending());
    clock.advance(SEC);
    assert_eq!(poll(&mut t, &waker), std::task::Poll::Ready(Ok(())));
    drop(t);
    assert_eq!(timer.pending(), 0);
}

/// A timeout polled after its timer was dropped resolves to Shutdown; WeakTimer after
/// drop hands the task back intact.
#[test]
fn timeout_after_timer_dropped_and_weak_timer() {
    let (_clock, timer) = manual();
    let (_, waker) = counter();
    let mut t = Box::pin(timer.timeout(SEC, std::future::pending::<()>()));
    assert!(poll(&mut t, &waker).is_pending());
    let mut fresh = Box::pin(timer.timeout(SEC, std::future::pending::<()>()));
    let weak = timer.downgrade();
    drop(timer);
    assert_eq!(
        poll(&mut t, &waker),
        std::task::Poll::Ready(Err(TimeoutError::Shutdown))
    );
    assert_eq!(
        poll(&mut fresh, &waker),
        std::task::Poll::Ready(Err(TimeoutError::Shutdown))
    );
    handed_back_on_shutdown(|t| weak.add_or_submit(t));
}

// ---------------------------------------------------------------- accounting

/// Stats and pending for futures dropped before a poll, after completion, after
/// shutdown, and a timeout whose future won.
#[test]
fn future_accounting() {
    let (clock, timer) = manual();
    let (_, waker) = counter();
    drop(timer.sleep(SEC)); // before a poll
    assert_eq!(timer.pending(), 0);
    let mut done = timer.sleep(SEC);
    clock.advance(SEC);
    assert!(poll(&mut done, &waker).is_ready());
    drop(done);
    let mut won = Box::pin(timer.timeout(SEC, async { 7 }));
    assert_eq!(poll(&mut won, &waker), std::task::Poll::Ready(Ok(7)));
    drop(won);
    let mut left = timer.sleep(SEC);
    assert!(poll(&mut left, &waker).is_pending());
    let s = timer.stats();
    assert_eq!((s.pending, s.added, s.fired, s.cancelled), (1, 4, 1, 2));
    drop(timer.shutdown());
    assert!(poll(&mut left, &waker).is_ready() && left.is_shutdown());
    drop(left);
    let s = timer.stats();
    assert_eq!(
        (s.pending, s.added, s.fired, s.cancelled, s.returned),
        (0, 4, 1, 2, 1)
    );
    assert_eq!(timer.pending(), 0);
}

// ---------------------------------------------------------------- add_or_submit refusals

/// Every refusal hands the task back intact, and it runs.
#[test]
fn refusals_hand_back_runnable_tasks() {
    let clock = tickwheel::ManualClock::new();
    let timer = Timer::builder()
        .clock(clock.clone())
        .executor(Arc::new(tickwheel::InlineExecutor::new()))
        .max_pending(1)
        .build()
        .unwrap();
    let _first = timer.add_or_submit(Task::after(SEC, || {})).unwrap();
    let (n, f) = runs();
    match timer.add_or_submit(Task::after(SEC, f).keyed("k")) {
        Err(AddError::Full(task)) => {
            assert_eq!(task.key(), Some("k"));
            task.run();
        }
        other => panic!("expected Full, got {other:?}"),
    }
    assert_eq!(n.load(SeqCst), 1);
    drop(timer.shutdown());
    handed_back_on_shutdown(|t| timer.add_or_submit(t));
}

/// `max_pending` bounds everything a thread holds, futures included (`max_pending`'s docs).
/// Futures are never refused, but they spend the thread's budget: a sleep made first makes a
/// later add refused, and so do sleeps made after a task took a budget.
#[test]
fn max_pending_counts_futures_made_after_a_task() {
    let build = || {
        let clock = tickwheel::ManualClock::new();
        let t = Timer::builder()
            .clock(clock.clone())
            .executor(Arc::new(tickwheel::InlineExecutor::new()))
            .max_pending(2)
            .build()
            .unwrap();
        (clock, t)
    };
    // Sleeps first: the add is refused.
    let (_c, a) = build();
    let sleeps: Vec<_> = (0..5).map(|_| a.sleep(SEC)).collect();
    let a_sleep_first = a.add_or_submit(Task::after(SEC, || {})).is_err();
    assert!(a_sleep_first, "control: pending (5 sleeps) >= max refuses");
    drop(sleeps);
    // Task first, then the same sleeps: the second task is admitted with pending = 6 > 2.
    let (_c, b) = build();
    let _t1 = b.add_or_submit(Task::after(SEC, || {})).unwrap();
    let _sleeps: Vec<_> = (0..5).map(|_| b.sleep(SEC)).collect();
    assert_eq!(b.pending(), 6);
    let second = b.add_or_submit(Task::after(SEC, || {}));
    assert!(
        matches!(second, Err(AddError::Full(_))),
        "admitted with pending {} > max_pending 2 on a single thread",
        b.pending()
    );
}

// ---------------------------------------------------------------- more probes

struct Panicky(AtomicUsize);
impl std::task::Wake for Panicky {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, SeqCst);
        std::panic::panic_any(crate::support::Boom);
    }
}

fn panicky() -> (Arc<Panicky>, std::task::Waker) {
    let p = Arc::new(Panicky(AtomicUsize::new(0)));
    (p.clone(), std::task::Waker::from(p))
}

/// A reset of a waiting sleep to the past wakes its stored waker at once, on this
/// thread (the add/move is due at once); a panicking waker there must not unwind out of reset
/// ("wakers that panic are caught").
#[test]
fn reset_to_the_past_with_a_panicking_waker() {
    crate::support::silence_boom();
    let (_clock, timer) = manual();
    let (count, waker) = panicky();
    let mut s = Box::pin(timer.sleep(10 * SEC));
    assert!(poll(&mut s, &waker).is_pending());
    let past = timer.now() - SEC;
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| s.as_mut().reset(past)));
    assert!(r.is_ok(), "a waker's panic unwound out of Sleep::reset");
    assert_eq!(count.0.load(SeqCst), 1, "woken by the reset");
    assert!(s.is_elapsed());
    assert_eq!(timer.pending(), 0);
}

/// Shutdown with a panicking waker: shutdown returns, other futures still woken.
#[test]
fn shutdown_with_a_panicking_waker() {
    crate::support::silence_boom();
    let (_clock, timer) = manual();
    let (count, bad) = panicky();
    let (wakes, good) = counter();
    let mut a = timer.sleep(SEC);
    let mut b = timer.sleep(SEC);
    assert!(poll(&mut a, &bad).is_pending());
    assert!(poll(&mut b, &good).is_pending());
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(timer.shutdown())));
    assert!(r.is_ok(), "a waker's panic unwound out of shutdown");
    assert_eq!(count.0.load(SeqCst), 1);
    assert_eq!(wakes.0.load(SeqCst), 1);
    assert!(a.is_shutdown() && b.is_shutdown());
}

/// A waiting sleep reset to a later or earlier deadline keeps its waiter.
#[test]
fn reset_while_waiting_keeps_the_waiter() {
    let (clock, timer) = manual();
    let (wakes, waker) = counter();
    let mut s = Box::pin(timer.sleep(SEC));
    assert!(poll(&mut s, &waker).is_pending());
    s.as_mut().reset(timer.now() + 3 * SEC);
    clock.advance(2 * SEC);
    assert_eq!(wakes.0.load(SeqCst), 0, "not early");
    s.as_mut().reset(timer.now() + SEC / 2);
    clock.advance(SEC / 2);
    assert_eq!(wakes.0.load(SeqCst), 1, "woken without a new poll");
}

/// Timeout::into_inner and dropping an Interval cancel their timers at once.
#[test]
fn into_inner_and_interval_drop_cancel() {
    let (_clock, timer) = manual();
    let (_, waker) = counter();
    let t = timer.timeout(SEC, std::future::ready(1));
    assert_eq!(timer.pending(), 1);
    let _inner = t.into_inner();
    assert_eq!(timer.pending(), 0);
    let mut iv = timer.interval(SEC);
    tick(&mut iv, &waker).unwrap();
    assert_eq!(timer.pending(), 1);
    drop(iv);
    assert_eq!(timer.pending(), 0);
}

/// Reset_at to the past under RunOnce gives one tick then continues on the grid
/// from that instant (`Interval::reset_at`).
#[test]
fn interval_reset_at_the_past() {
    let (clock, timer) = manual();
    let (_, waker) = counter();
    let mut iv = timer.interval(SEC);
    let start = tick(&mut iv, &waker).unwrap();
    clock.advance(10 * SEC + 300 * MS);
    let _ = std::iter::from_fn(|| tick(&mut iv, &waker)).count();
    iv.reset_at(start + 5 * SEC);
    assert_eq!(tick(&mut iv, &waker).map(|a| a - start), Some(5 * SEC));
    assert_eq!(tick(&mut iv, &waker), None);
    clock.advance(700 * MS);
    assert_eq!(tick(&mut iv, &waker).map(|a| a - start), Some(11 * SEC));
}

/// Fixed-delay mode after a jump of several periods and after shutdown.
#[test]
fn interval_fixed_delay_jump_and_shutdown() {
    let (clock, timer) = manual();
    let (_, waker) = counter();
    let mut iv = timer.interval(SEC);
    iv.set_fixed_delay(true);
    let start = tick(&mut iv, &waker).unwrap();
    clock.advance(5 * SEC + 500 * MS);
    assert_eq!(tick(&mut iv, &waker).map(|a| a - start), Some(SEC));
    assert_eq!(tick(&mut iv, &waker), None);
    clock.advance(SEC - MS);
    assert_eq!(tick(&mut iv, &waker), None, "never early");
    clock.advance(MS);
    assert_eq!(
        tick(&mut iv, &waker).map(|a| a - start),
        Some(6 * SEC + 500 * MS)
    );
    drop(timer.shutdown());
    assert!(tick(&mut iv, &waker).is_some() && iv.is_shutdown());
    assert_eq!(timer.stats().skipped, 0);
}

/// `periods_rounded_up` counts repeating tasks and intervals added with a sub-tick period: not
/// an interval made after shutdown, which adds nothing, as it does not count a refused task.
#[test]
fn an_interval_refused_by_shutdown_is_not_counted_as_rounded_up() {
    let (_clock, timer) = manual();
    drop(timer.shutdown());
    assert!(
        timer
            .add_or_submit(Task::every(Duration::from_nanos(1), || {}))
            .is_err()
    );
    assert_eq!(
        timer.stats().periods_rounded_up,
        0,
        "control: a refused task is not counted"
    );
    let iv = timer.interval(Duration::from_nanos(1));
    assert!(iv.is_shutdown());
    assert_eq!(
        timer.stats().periods_rounded_up,
        0,
        "an interval that was never added is counted"
    );
}

/// Item 2: an interval whose start is before the timer's clock began keeps its grid
/// `start + k * period`: its first tick is the first point of it at or after the beginning.
#[test]
fn an_interval_started_before_the_clock_began_keeps_its_grid() {
    let start = Instant::now();
    std::thread::sleep(5 * MS);
    let (clock, timer) = manual();
    let epoch = timer.now();
    let period = 10 * MS;
    let before = epoch - start;
    assert!(
        before < period,
        "the test needs the epoch within a period of start"
    );
    let (_, waker) = counter();
    let mut interval = timer.interval_at(start, period);
    assert_eq!(
        tick(&mut interval, &waker),
        None,
        "not before start + period"
    );
    // Just before the first point, then a period on (past the point rounded up to the tick).
    clock.advance(period - before - Duration::from_nanos(1));
    assert_eq!(tick(&mut interval, &waker), None, "never early");
    clock.advance(period);
    assert_eq!(tick(&mut interval, &waker), Some(start + period));
    clock.advance(period);
    assert_eq!(tick(&mut interval, &waker), Some(start + 2 * period));
}

/// Item 2, the same far back: a start days before the beginning, a period that does not divide
/// the gap. (On the real clock the beginning is the timer's build: an instant taken before it,
/// to align ticks to, is the common case.)
#[test]
fn an_interval_started_long_before_the_clock_began_keeps_its_grid() {
    let timer = Timer::new().unwrap();
    let now = timer.now();
    let Some(start) = now.checked_sub(3 * DAY) else {
        return; // this machine's monotonic clock does not reach that far back
    };
    let period = Duration::from_millis(7);
    let mut interval = timer.interval_at(start, period);
    let first = futures::executor::block_on(interval.tick());
    let offset = (first - start).as_nanos();
    assert_eq!(offset % period.as_nanos(), 0, "on the grid");
    assert!(
        first + period > now,
        "the first point at or after the beginning"
    );
}

/// Item 2, found by the review of the fix: a period past the end of time (2^64 ns or more) from a
/// start before the clock began has no grid point in range, so no tick; the first version
/// computed one from the saturated period, about 584 years after `start`, early.
#[test]
fn an_interval_started_before_the_clock_began_with_an_endless_period_never_ticks_early() {
    let start = Instant::now();
    std::thread::sleep(3 * MS);
    let (clock, timer) = manual();
    let before = timer.now() - start;
    let (_, waker) = counter();
    let mut interval = timer.interval_at(start, Duration::MAX);
    assert_eq!(tick(&mut interval, &waker), None);
    // A tick past `start + 2^64 ns` (the saturated period), well before `start + Duration::MAX`.
    assert!(before > MS);
    clock.advance(Duration::from_nanos(u64::MAX) - before + MS);
    assert_eq!(tick(&mut interval, &waker), None, "never early");
}

/// Item 2, for a sleep: an instant before the clock began is that beginning (the rule was
/// already so; the review found it undocumented, and it is now in `Timer::sleep_until`).
#[test]
fn a_sleep_until_before_the_clock_began_completes_at_once() {
    let start = Instant::now();
    std::thread::sleep(5 * MS);
    let (_clock, timer) = manual();
    let sleep = timer.sleep_until(start);
    assert!(sleep.is_elapsed());
    assert_eq!(sleep.deadline(), timer.now());
}
