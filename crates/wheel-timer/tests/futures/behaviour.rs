//! The futures (`Sleep`, `Timeout`, `Interval`): on the manual clock, polled by hand with a
//! counting waker, so every assertion is exact (which instant, how many wake-ups); then under
//! tokio's multi-thread runtime and `futures`' executor on the real clock, asserting only "not
//! early" and "eventually".

use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use tickwheel::{InlineExecutor, Interval, ManualClock, MisfirePolicy, Sleep, TimeoutError, Timer};

use crate::support::{MS, Rng, SEC, batched, counter, manual, poll, tick};

#[test]
fn sleep_completes_at_its_deadline_and_not_before() {
    let (clock, timer) = manual();
    let (wakes, waker) = counter();
    let mut sleep = timer.sleep(30 * SEC);
    assert_eq!(timer.pending(), 1, "a sleep is a pending timer");
    assert!(poll(&mut sleep, &waker).is_pending());
    clock.advance(30 * SEC - MS);
    assert_eq!(wakes.0.load(SeqCst), 0);
    assert!(poll(&mut sleep, &waker).is_pending() && !sleep.is_elapsed());
    clock.advance(MS);
    assert_eq!(wakes.0.load(SeqCst), 1, "woken once, by the tick thread");
    assert!(sleep.is_elapsed() && !sleep.is_shutdown());
    assert!(poll(&mut sleep, &waker).is_ready());
    clock.advance(SEC);
    assert_eq!(wakes.0.load(SeqCst), 1, "never woken twice for one arming");
    let s = timer.stats();
    assert_eq!((s.pending, s.added, s.fired, s.cancelled), (0, 1, 1, 0));
    assert_eq!(s.lateness_max, Duration::ZERO);
}

#[test]
fn dropping_a_sleep_cancels_its_timer() {
    let (clock, timer) = manual();
    let sleep = timer.sleep(SEC);
    assert_eq!(timer.pending(), 1);
    drop(sleep);
    assert_eq!(timer.pending(), 0);
    clock.advance(2 * SEC);
    let s = timer.stats();
    assert_eq!((s.fired, s.cancelled), (0, 1));
}

#[test]
fn a_future_keeps_no_waker_once_it_stops_waiting() {
    // A waker holds its runtime task alive: once a sleep no longer waits (dropped, re-armed,
    // fired, shut down), the timer must hold no copy of it.
    let (clock, timer) = manual();
    let (wakes, waker) = counter();
    let held = || Arc::strong_count(&wakes);
    let alone = held();
    let mut dropped = timer.sleep(SEC);
    assert!(poll(&mut dropped, &waker).is_pending());
    assert_eq!(held(), alone + 1, "the timer keeps a copy while it waits");
    drop(dropped);
    assert_eq!(held(), alone, "dropped");
    let mut moved = timer.sleep(SEC);
    assert!(poll(&mut moved, &waker).is_pending());
    clock.advance(SEC);
    assert!(moved.is_elapsed());
    Pin::new(&mut moved).reset(Instant::now() + SEC); // ended: re-armed in a new slot
    assert_eq!(held(), alone, "fired (the copy was woken), then re-armed");
    assert!(poll(&mut moved, &waker).is_pending());
    drop(timer.shutdown());
    assert_eq!(held(), alone, "woken by shutdown");
    assert!(moved.is_shutdown());
    assert_eq!(wakes.0.load(SeqCst), 2);
}

#[test]
fn reset_moves_the_deadline_either_way_even_after_completion() {
    let (clock, timer) = manual();
    let (wakes, waker) = counter();
    let mut sleep = timer.sleep(10 * SEC);
    let base = sleep.deadline() - 10 * SEC;
    assert!(poll(&mut sleep, &waker).is_pending());
    Pin::new(&mut sleep).reset(base + 20 * SEC); // later
    clock.advance(10 * SEC);
    assert!(!sleep.is_elapsed(), "the old deadline no longer counts");
    Pin::new(&mut sleep).reset(base + 15 * SEC); // earlier than the new one
    assert_eq!(sleep.deadline(), base + 15 * SEC);
    clock.advance(5 * SEC - MS);
    assert!(!sleep.is_elapsed());
    clock.advance(MS);
    assert!(sleep.is_elapsed());
    assert_eq!(wakes.0.load(SeqCst), 1);
    // After completing: reset re-arms it.
    Pin::new(&mut sleep).reset(base + 20 * SEC);
    assert!(!sleep.is_elapsed() && poll(&mut sleep, &waker).is_pending());
    assert_eq!(timer.pending(), 1);
    clock.advance(5 * SEC);
    assert!(poll(&mut sleep, &waker).is_ready());
    assert_eq!(wakes.0.load(SeqCst), 2);
    // Into the past: complete at once.
    Pin::new(&mut sleep).reset(base);
    assert!(sleep.is_elapsed());
    assert_eq!(timer.pending(), 0);
}

#[test]
fn a_deadline_already_passed_completes_at_once() {
    let (_clock, timer) = manual();
    let (wakes, waker) = counter();
    let mut sleep = timer.sleep(Duration::ZERO);
    assert!(sleep.is_elapsed());
    assert!(poll(&mut sleep, &waker).is_ready());
    let mut past = timer.sleep_until(Instant::now() - SEC);
    assert!(poll(&mut past, &waker).is_ready());
    assert_eq!(
        wakes.0.load(SeqCst),
        0,
        "ready on the first poll: nothing to wake"
    );
    assert_eq!(timer.stats().fired, 2);
}

#[test]
fn a_sleep_made_after_others_ended_starts_afresh() {
    // A new sleep may get the slot of one that ended on this thread: whatever the old ones
    // went through (fired, cancelled with a waker left in their task), a new
    // one starts armed, with no waker and no outcome.
    let (clock, timer) = manual();
    let (old, old_waker) = counter();
    for round in 0..3 {
        let mut fired = timer.sleep(SEC);
        assert!(poll(&mut fired, &old_waker).is_pending());
        clock.advance(SEC);
        assert!(poll(&mut fired, &old_waker).is_ready());
        drop(fired);
        let mut cancelled = timer.sleep(SEC);
        assert!(poll(&mut cancelled, &old_waker).is_pending());
        drop(cancelled);

        let (new, new_waker) = counter();
        let mut sleep = timer.sleep(2 * SEC);
        assert!(!sleep.is_elapsed() && !sleep.is_shutdown(), "round {round}");
        assert!(poll(&mut sleep, &new_waker).is_pending(), "round {round}");
        clock.advance(2 * SEC - MS);
        assert!(
            poll(&mut sleep, &new_waker).is_pending(),
            "round {round}: early"
        );
        clock.advance(MS);
        assert_eq!(new.0.load(SeqCst), 1, "round {round}");
        assert!(sleep.is_elapsed() && poll(&mut sleep, &new_waker).is_ready());
    }
    assert_eq!(
        old.0.load(SeqCst),
        3,
        "the old waker: once per fired sleep, never after"
    );
    // Ended by shutdown, then a sleep of another timer on the same thread.
    let mut ended = timer.sleep(SEC);
    assert!(poll(&mut ended, &old_waker).is_pending());
    drop(timer.shutdown());
    assert!(ended.is_shutdown());
    drop(ended);
    let (clock, timer) = manual();
    let (new, new_waker) = counter();
    let mut sleep = timer.sleep(SEC);
    assert!(!sleep.is_shutdown() && poll(&mut sleep, &new_waker).is_pending());
    clock.advance(SEC);
    assert_eq!(new.0.load(SeqCst), 1);
    assert!(sleep.is_elapsed() && !sleep.is_shutdown());
}

#[test]
fn only_the_latest_waker_is_woken() {
    let (clock, timer) = manual();
    let (first, w1) = counter();
    let (second, w2) = counter();
    let mut sleep = timer.sleep(SEC);
    assert!(poll(&mut sleep, &w1).is_pending());
    assert!(poll(&mut sleep, &w2).is_pending()); // moved to another task
    clock.advance(SEC);
    assert_eq!((first.0.load(SeqCst), second.0.load(SeqCst)), (0, 1));
}

#[test]
fn timeout_either_way() {
    let (clock, timer) = manual();
    let (_, waker) = counter();
    // The future wins: the timer is cancelled, never fired.
    let mut quick = pin!(timer.timeout(SEC, async { 7 }));
    assert_eq!(
        quick.as_mut().poll(&mut Context::from_waker(&waker)),
        Poll::Ready(Ok(7))
    );
    assert_eq!(timer.pending(), 0);
    assert_eq!(timer.stats().cancelled, 1);
    // The deadline wins, exactly at it.
    let mut slow = pin!(timer.timeout(SEC, std::future::pending::<()>()));
    assert!(
        slow.as_mut()
            .poll(&mut Context::from_waker(&waker))
            .is_pending()
    );
    clock.advance(SEC - MS);
    assert!(
        slow.as_mut()
            .poll(&mut Context::from_waker(&waker))
            .is_pending()
    );
    clock.advance(MS);
    assert_eq!(
        slow.as_mut().poll(&mut Context::from_waker(&waker)),
        Poll::Ready(Err(TimeoutError::Elapsed))
    );
    let s = timer.stats();
    assert_eq!((s.fired, s.cancelled, s.pending), (1, 1, 0));
}

#[test]
fn shutdown_wakes_every_pending_future_and_says_so() {
    let (clock, timer) = manual();
    let (wakes, waker) = counter();
    let mut sleep = timer.sleep(SEC);
    let mut timeout = pin!(timer.timeout(SEC, std::future::pending::<()>()));
    let mut interval = timer.interval(SEC);
    assert!(tick(&mut interval, &waker).is_some(), "first tick at once");
    assert!(poll(&mut sleep, &waker).is_pending());
    assert!(
        timeout
            .as_mut()
            .poll(&mut Context::from_waker(&waker))
            .is_pending()
    );
    assert!(tick(&mut interval, &waker).is_none());
    assert!(
        timer.shutdown().is_empty(),
        "futures are not returned as tasks"
    );
    assert_eq!(wakes.0.load(SeqCst), 3, "each pending future woken once");
    assert!(poll(&mut sleep, &waker).is_ready() && sleep.is_shutdown() && !sleep.is_elapsed());
    assert_eq!(
        timeout.as_mut().poll(&mut Context::from_waker(&waker)),
        Poll::Ready(Err(TimeoutError::Shutdown))
    );
    assert!(tick(&mut interval, &waker).is_some() && interval.is_shutdown());
    assert!(
        tick(&mut interval, &waker).is_some(),
        "and every tick after"
    );
    assert_eq!(timer.stats().returned, 3);
    // Made after shutdown: completes at once, saying so.
    let mut late = timer.sleep(SEC);
    assert!(poll(&mut late, &waker).is_ready() && late.is_shutdown());
    clock.advance(SEC);
    assert_eq!(
        timer.stats().fired,
        1,
        "only the interval's first tick fired"
    );
}

#[test]
fn dropping_the_timer_wakes_its_futures() {
    let (_clock, timer) = manual();
    let (wakes, waker) = counter();
    let mut sleep = timer.sleep(SEC);
    assert!(poll(&mut sleep, &waker).is_pending());
    drop(timer);
    assert_eq!(wakes.0.load(SeqCst), 1);
    assert!(poll(&mut sleep, &waker).is_ready() && sleep.is_shutdown());
}

#[test]
fn a_panicking_waker_is_counted_and_the_tick_thread_lives_on() {
    struct Grenade;
    impl Wake for Grenade {
        fn wake(self: Arc<Self>) {
            panic!("waker panics");
        }
    }
    let (clock, timer) = manual();
    let bad = Waker::from(Arc::new(Grenade));
    let mut sleep = timer.sleep(MS);
    assert!(poll(&mut sleep, &bad).is_pending());
    clock.advance(MS);
    assert!(sleep.is_elapsed());
    assert_eq!(timer.stats().panicked, 1);
    let (wakes, waker) = counter();
    let mut next = timer.sleep(MS);
    assert!(poll(&mut next, &waker).is_pending());
    clock.advance(MS);
    assert_eq!(wakes.0.load(SeqCst), 1, "the tick thread still runs");
}

/// The instants an interval gives, as offsets from its start, polling after each clock move.
fn ticks(
    policy: Option<MisfirePolicy>,
    period: Duration,
    moves: &[Duration],
) -> Vec<Vec<Duration>> {
    let (clock, timer) = manual();
    let (_, waker) = counter();
    let mut interval = timer.interval(period);
    match policy {
        Some(p) => interval.set_misfire_policy(p),
        None => interval.set_fixed_delay(true),
    }
    let start = tick(&mut interval, &waker).expect("the first tick is at once");
    moves
        .iter()
        .map(|&d| {
            clock.advance(d);
            std::iter::from_fn(|| tick(&mut interval, &waker).map(|at| at - start)).collect()
        })
        .collect()
}

#[test]
fn interval_ticks_per_misfire_policy() {
    let p = 10 * MS;
    let (m35, m5, m10) = (35 * MS, 5 * MS, 10 * MS);
    // On time: one tick per period.
    assert_eq!(
        ticks(Some(MisfirePolicy::RunOnce), p, &[m10, m10]),
        [vec![m10], vec![20 * MS]]
    );
    // 35 ms late: one tick for the missed ones, then the grid point after now (40 ms).
    assert_eq!(
        ticks(Some(MisfirePolicy::RunOnce), p, &[m35, m5]),
        [vec![m10], vec![40 * MS]]
    );
    // Skip: no late tick at all; the next one at 40 ms.
    assert_eq!(
        ticks(Some(MisfirePolicy::Skip), p, &[m35, m5]),
        [vec![], vec![40 * MS]]
    );
    // CatchUp: every missed tick, back to back, then on the grid.
    assert_eq!(
        ticks(Some(MisfirePolicy::CatchUp), p, &[m35, m5]),
        [vec![m10, 20 * MS, 30 * MS], vec![40 * MS]]
    );
    // Fixed delay: a period after the tick was taken (at 35 ms): 45 ms.
    assert_eq!(
        ticks(None, p, &[m35, 9 * MS, MS]),
        [vec![m10], vec![], vec![45 * MS]]
    );
    // A period below the tick (zero included) ticks at the tick, and nothing panics.
    for tiny in [Duration::ZERO, Duration::from_nanos(1)] {
        assert_eq!(
            ticks(Some(MisfirePolicy::RunOnce), tiny, &[MS, MS]),
            [vec![MS], vec![2 * MS]]
        );
    }
}

#[test]
fn interval_at_starts_at_its_instant() {
    let (clock, timer) = manual();
    let (_, waker) = counter();
    // Instants map to the manual clock from the timer's build instant: manual time 0 is the
    // deadline of a zero sleep made now.
    let zero = timer.sleep(Duration::ZERO).deadline();
    let mut interval = timer.interval_at(zero + 5 * SEC, SEC);
    assert_eq!(tick(&mut interval, &waker), None);
    clock.advance(5 * SEC);
    assert_eq!(tick(&mut interval, &waker), Some(zero + 5 * SEC));
    clock.advance(SEC);
    assert_eq!(tick(&mut interval, &waker), Some(zero + 6 * SEC));
}

/// 10,000 sleeps across tasks of a 2-worker tokio runtime, some dropped before they complete
/// (raced against a shorter timeout): every one that completes does so once and not early, and
/// the timer ends with nothing pending and every arming accounted for.
#[test]
fn ten_thousand_sleeps_on_a_multi_thread_runtime() {
    let timer = Arc::new(Timer::builder().threads(1).build().unwrap());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let completed = Arc::new(AtomicUsize::new(0));
    let mut rng = Rng::new(42);
    let jobs: Vec<_> = (0..10_000)
        .map(|_| {
            let (timer, completed) = (timer.clone(), completed.clone());
            let delay = Duration::from_millis(rng.below(50));
            let race = (rng.below(3) == 0).then(|| Duration::from_millis(rng.below(30)));
            rt.spawn(async move {
                let sleep: Sleep = timer.sleep(delay);
                let deadline = sleep.deadline();
                let done = match race {
                    Some(limit) => timer.timeout(limit, sleep).await.is_ok(),
                    None => {
                        sleep.await;
                        true
                    }
                };
                if done {
                    assert!(Instant::now() >= deadline, "a sleep completed early");
                    completed.fetch_add(1, SeqCst);
                }
            })
        })
        .collect();
    rt.block_on(async {
        for j in jobs {
            j.await.expect("no task panicked");
        }
    });
    let s = timer.stats();
    assert_eq!(s.pending, 0);
    // Every arming fired or was cancelled (a timeout that won cancelled its sleep).
    assert_eq!(s.fired + s.cancelled, s.added);
    assert!(completed.load(SeqCst) >= 6_000);
}

/// Far sleeps made in a stream by one thread and nothing else: more than its ring holds, so the
/// thread files most of them itself (into the young queue), and a stamped record asks the tick
/// thread for a look only by its deadline, not within a tick. Each still completes, none early,
/// no waker woken twice, nothing left pending.
#[test]
fn far_sleeps_filed_by_their_own_thread_still_wake() {
    let timer = Timer::builder().threads(1).build().unwrap();
    let (count, waker) = counter();
    let made = Instant::now();
    let mut sleeps: Vec<Sleep> = (0..1_000)
        .map(|i| timer.sleep(Duration::from_millis(600 + i % 100)))
        .collect();
    let mut done = vec![false; sleeps.len()];
    let give_up = made + 30 * SEC;
    while done.contains(&false) && Instant::now() < give_up {
        for (sleep, done) in sleeps.iter_mut().zip(done.iter_mut()) {
            if !*done && poll(sleep, &waker).is_ready() {
                assert!(
                    Instant::now() >= sleep.deadline(),
                    "a sleep completed early"
                );
                *done = true;
            }
        }
        std::thread::sleep(5 * MS);
    }
    let completed = done.iter().filter(|&&d| d).count();
    assert_eq!(completed, sleeps.len(), "sleeps still asleep after 30 s");
    assert!(count.0.load(SeqCst) <= sleeps.len(), "a waker woken twice");
    assert_eq!(timer.pending(), 0);
}

/// A reset drains its shard's ring on the resetting thread, and may file a far sleep there into
/// the young queue, whose filing comes long before any look the tick thread has promised; a
/// later near sleep then trusts `next_wake` and asks for nothing. The reset must wake the tick
/// thread by the filing, or the near sleep waits for the far one's look (29 s late here; found by
/// an adversarial review).
#[test]
fn a_reset_that_files_young_tasks_keeps_later_sleeps_on_time() {
    let timer = Timer::builder().threads(1).build().unwrap();
    let (_count, waker) = counter();
    let _far = timer.sleep(60 * SEC); // stays in the ring: looked at by its deadline
    let mut soon = timer.sleep(30 * SEC); // the tick thread now sleeps until 30 s
    let start = Instant::now();
    Pin::new(&mut soon).reset(start); // drains the ring: `_far` is young, filed in 0.3 s
    let mut near = timer.sleep(500 * MS);
    let give_up = start + 20 * SEC;
    while poll(&mut near, &waker).is_pending() && Instant::now() < give_up {
        std::thread::sleep(5 * MS);
    }
    assert!(near.is_elapsed(), "a 500 ms sleep still asleep after 20 s");
    assert!(Instant::now() >= near.deadline(), "completed early");
    assert!(soon.is_elapsed(), "reset to now completes it");
}

#[test]
fn works_under_a_current_thread_runtime_and_futures_executor() {
    let timer = Timer::builder().threads(1).build().unwrap();
    let start = Instant::now();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(timer.sleep(20 * MS));
    assert!(start.elapsed() >= 20 * MS);
    let mut interval = timer.interval(5 * MS);
    let first = futures::executor::block_on(interval.tick());
    let second = futures::executor::block_on(interval.tick());
    assert_eq!(second - first, 5 * MS);
    assert!(Instant::now() >= second);
    assert_eq!(
        futures::executor::block_on(timer.timeout(5 * MS, std::future::pending::<()>())),
        Err(TimeoutError::Elapsed)
    );
}

#[test]
fn futures_are_send_sync_and_static() {
    fn spawnable<T: Send + Sync + 'static>() {}
    spawnable::<Sleep>();
    spawnable::<Interval>();
    spawnable::<tickwheel::Timeout<Sleep>>();
    let _ = (ManualClock::new(), InlineExecutor::new());
}

/// With the `stream` feature, an interval is a stream of its ticks that ends at shutdown.
#[cfg(feature = "stream")]
#[test]
fn an_interval_is_a_stream_that_ends_at_shutdown() {
    use futures::Stream;

    let (clock, timer) = manual();
    let (_, waker) = counter();
    let mut cx = Context::from_waker(&waker);
    let mut every = timer.interval(10 * SEC);
    let start = timer.now();
    let mut next = |every: &mut Interval| Pin::new(every).poll_next(&mut cx);
    assert_eq!(
        next(&mut every),
        Poll::Ready(Some(start)),
        "first tick at once"
    );
    assert_eq!(next(&mut every), Poll::Pending);
    clock.advance(10 * SEC - MS);
    assert_eq!(next(&mut every), Poll::Pending, "never early");
    clock.advance(MS);
    assert_eq!(next(&mut every), Poll::Ready(Some(start + 10 * SEC)));
    assert_eq!(next(&mut every), Poll::Pending);
    assert!(timer.shutdown().is_empty());
    assert_eq!(next(&mut every), Poll::Ready(None), "the stream ends");
    assert_eq!(next(&mut every), Poll::Ready(None));
}

/// A tick its deadline brought, not yet taken when the timer shut down, is yielded before the
/// stream ends (found by the review of 2026-11-27: the stream dropped it, since the interval's
/// next arming was refused and the stream asked only whether the interval was shut down).
#[cfg(feature = "stream")]
#[test]
fn an_interval_stream_yields_a_tick_that_came_before_shutdown() {
    use futures::Stream;

    let (clock, timer) = manual();
    let (_, waker) = counter();
    let mut cx = Context::from_waker(&waker);
    let start = timer.now() + 10 * MS;
    let mut every = timer.interval_at(start, 100 * MS);
    let mut next = |every: &mut Interval| Pin::new(every).poll_next(&mut cx);
    assert_eq!(next(&mut every), Poll::Pending);
    clock.advance(10 * MS); // the tick comes; nobody takes it yet
    assert!(timer.shutdown().is_empty());
    assert_eq!(
        next(&mut every),
        Poll::Ready(Some(start)),
        "the tick that came"
    );
    assert_eq!(next(&mut every), Poll::Ready(None), "then the stream ends");
}

/// At the end of the timer's clock the stream yields its last tick and ends (issue 43: it
/// yielded the same instant thousands of times at once and never ended).
#[cfg(feature = "stream")]
#[test]
fn an_interval_stream_ends_at_the_end_of_time() {
    use futures::Stream;

    let (clock, timer) = manual();
    let (_, waker) = counter();
    let mut cx = Context::from_waker(&waker);
    let mut every = timer.interval(10 * SEC);
    let start = timer.now();
    let mut next = |every: &mut Interval| Pin::new(every).poll_next(&mut cx);
    assert_eq!(next(&mut every), Poll::Ready(Some(start)));
    clock.advance(Duration::MAX);
    assert_eq!(
        next(&mut every),
        Poll::Ready(Some(start + 10 * SEC)),
        "one late tick for all"
    );
    assert_eq!(next(&mut every), Poll::Ready(None), "then the stream ends");
    assert_eq!(next(&mut every), Poll::Ready(None));
}

#[test]
fn a_sleep_stamped_in_a_batch_knows_its_deadline_however_it_ends() {
    let (hand, timer) = batched();
    let (_, waker) = counter();
    let made = timer.now();

    // Asked while it waits: stamped on demand, the same answer every time.
    let mut fired = timer.sleep(30 * SEC);
    assert_eq!(fired.deadline(), made + 30 * SEC);
    assert_eq!(fired.deadline(), made + 30 * SEC);
    assert!(poll(&mut fired, &waker).is_pending());
    hand.advance(30 * SEC - MS);
    assert!(poll(&mut fired, &waker).is_pending(), "not early");

    // Never asked: fired, or handed back by shutdown, it still answers with its stamp, taken
    // by the tick thread's next round (after the next move, so a millisecond late) or shutdown.
    let later = timer.now();
    let stamped = |d: Duration| later + d..=later + d + MS;
    let mut quiet = timer.sleep(10 * SEC);
    assert!(poll(&mut quiet, &waker).is_pending());
    let mut returned = timer.sleep(60 * SEC);
    assert!(poll(&mut returned, &waker).is_pending());
    hand.advance(MS);
    assert!(poll(&mut fired, &waker).is_ready() && fired.is_elapsed());
    hand.advance(10 * SEC);
    assert!(poll(&mut quiet, &waker).is_ready() && quiet.is_elapsed());
    assert!(stamped(10 * SEC).contains(&quiet.deadline()));
    // Made with the clock standing still until shutdown: shutdown stamps it.
    let mut last = timer.sleep(60 * SEC);
    assert!(poll(&mut last, &waker).is_pending());
    assert_eq!(timer.pending(), 2);
    assert!(timer.shutdown().is_empty());
    assert!(poll(&mut returned, &waker).is_ready() && returned.is_shutdown());
    assert!(stamped(60 * SEC).contains(&returned.deadline()));
    assert!(poll(&mut last, &waker).is_ready() && last.is_shutdown());
    assert_eq!(last.deadline(), timer.now() + 60 * SEC);
    assert_eq!(fired.deadline(), made + 30 * SEC);
}

#[test]
fn a_batched_sleep_dropped_or_timed_out_before_its_stamp_leaves_nothing() {
    let (_hand, timer) = batched();
    let (_, waker) = counter();
    let sleeps: Vec<Sleep> = (0..100).map(|_| timer.sleep(10 * SEC)).collect();
    assert_eq!(timer.pending(), 100);
    drop(sleeps);
    let mut quick = pin!(timer.timeout(10 * SEC, std::future::ready(7)));
    assert_eq!(
        quick.as_mut().poll(&mut Context::from_waker(&waker)),
        Poll::Ready(Ok(7))
    );
    assert!(format!("{quick:?}").contains("deadline: None"), "{quick:?}");
    assert_eq!(timer.pending(), 0, "every cancel counted");
    assert_eq!(timer.stats().cancelled, 101);
}

#[test]
fn a_sleep_outliving_its_timer_never_arms_in_the_next_one() {
    let (clock, timer) = manual();
    let (_, waker) = counter();
    let mut sleep = timer.sleep(SEC);
    clock.advance(SEC);
    assert!(poll(&mut sleep, &waker).is_ready() && sleep.is_elapsed());
    drop(timer);
    // The next timer of this thread takes over the shard the sleep was armed in.
    let (_clock, next) = manual();
    let _other = next.sleep(SEC);
    Pin::new(&mut sleep).reset(next.now() + SEC);
    assert!(poll(&mut sleep, &waker).is_ready() && sleep.is_shutdown());
    assert_eq!(next.pending(), 1, "armed in a timer it does not belong to");
}

#[test]
fn a_long_sleep_after_an_hour_without_one_is_dated_by_a_fresh_reading() {
    let (hand, timer) = batched();
    let (_, waker) = counter();
    // Short: stamped at once from a reading taken for it, which leaves nothing in the ring
    // (so no drain tells the thread its reading is old).
    let mut short = timer.sleep(MS);
    hand.advance(MS);
    assert!(poll(&mut short, &waker).is_ready());
    hand.advance(3600 * SEC);
    let mut long = timer.sleep(10 * SEC);
    assert!(poll(&mut long, &waker).is_pending());
    hand.advance(MS);
    hand.advance(10 * SEC);
    assert!(poll(&mut long, &waker).is_ready() && long.is_elapsed());
    let stats = timer.stats();
    assert_eq!(stats.fired, 2);
    assert!(
        stats.lateness_max <= 2 * MS,
        "lateness counted from an hour-old reading: {:?}",
        stats.lateness_max
    );
}
