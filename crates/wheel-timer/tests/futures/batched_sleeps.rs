//! Hostile tests of sleeps stamped in batches and of sleeps that hold no Arc of their timer.

use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::atomic::Ordering::SeqCst;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tickwheel::{InlineExecutor, ManualClock, Sleep, TimeoutError, Timer};

use crate::support::{Batched, MS, SEC, batched, counter, manual, poll, tick};

// ---------------------------------------------------------------------------------------------
// deadline(): stable, never early, from any thread

#[test]
fn deadline_from_many_threads_while_the_tick_thread_stamps_is_one_instant() {
    let (hand, timer) = batched();
    let made = timer.now();
    let delays: Vec<Duration> = (0..300u64)
        .map(|i| 10 * SEC + Duration::from_millis(i))
        .collect();
    let sleeps: Vec<Sleep> = delays.iter().map(|&d| timer.sleep(d)).collect();
    let answers: Vec<Vec<Instant>> = std::thread::scope(|s| {
        let readers: Vec<_> = (0..3)
            .map(|k| {
                let sleeps = &sleeps;
                s.spawn(move || {
                    let mut v: Vec<Instant> = Vec::new();
                    // In different orders, so on-demand stamps and the tick thread interleave.
                    let order: Vec<usize> = match k {
                        0 => (0..sleeps.len()).collect(),
                        1 => (0..sleeps.len()).rev().collect(),
                        _ => (0..sleeps.len()).map(|i| (i * 7) % sleeps.len()).collect(),
                    };
                    let mut got = vec![None; sleeps.len()];
                    for i in order {
                        got[i] = Some(sleeps[i].deadline());
                    }
                    v.extend(got.into_iter().map(Option::unwrap));
                    v
                })
            })
            .collect();
        hand.advance(MS); // a tick-thread round, racing the readers
        readers.into_iter().map(|r| r.join().unwrap()).collect()
    });
    for (i, d) in delays.iter().enumerate() {
        let a = answers[0][i];
        assert!(
            answers.iter().all(|v| v[i] == a),
            "sleep {i}: threads disagree"
        );
        assert!(
            a >= made + *d,
            "sleep {i}: deadline earlier than made + delay"
        );
        assert!(
            a <= made + *d + MS,
            "sleep {i}: stamped from a reading after the move?"
        );
        assert_eq!(sleeps[i].deadline(), a, "asked again");
    }
}

#[test]
fn deadline_after_it_fired_but_before_it_was_polled_is_the_stamp() {
    let (hand, timer) = batched();
    let (wakes, waker) = counter();
    let made = timer.now();
    let mut s = timer.sleep(10 * SEC);
    assert!(poll(&mut s, &waker).is_pending());
    hand.advance(MS); // stamped now: made + 1 ms + 10 s
    hand.advance(10 * SEC - MS);
    let before = s.deadline();
    assert!(
        !s.is_elapsed() || before <= timer.now(),
        "fired early: deadline {:?} after now {:?}",
        before - made,
        timer.now() - made
    );
    assert!(before >= made + 10 * SEC);
    hand.advance(MS);
    assert!(s.is_elapsed());
    assert_eq!(wakes.0.load(SeqCst), 1);
    let fired = s.deadline();
    assert_eq!(fired, before);
    assert!(fired <= timer.now(), "fired before its deadline");
    assert!(poll(&mut s, &waker).is_ready());
    assert_eq!(s.deadline(), before, "after the poll");
    assert!(!format!("{s:?}").contains("None"), "{s:?}");
}

#[test]
fn deadline_asked_from_another_thread_while_the_sleep_fires_on_the_real_clock() {
    let timer = Timer::builder().threads(1).build().unwrap();
    let made = Instant::now();
    let sleeps: Vec<Sleep> = (0..64)
        .map(|i| timer.sleep(Duration::from_millis(70 + i)))
        .collect();
    let first: Vec<Instant> = std::thread::scope(|s| {
        let r = s.spawn(|| {
            let first: Vec<Instant> = sleeps.iter().map(|s| s.deadline()).collect();
            let until = Instant::now() + 400 * MS;
            while Instant::now() < until {
                for (s, f) in sleeps.iter().zip(&first) {
                    assert_eq!(s.deadline(), *f, "deadline moved");
                }
            }
            first
        });
        r.join().unwrap()
    });
    let (_, waker) = counter();
    for (i, (mut s, f)) in sleeps.into_iter().zip(first).enumerate() {
        assert!(
            f >= made + Duration::from_millis(70 + i as u64),
            "early deadline"
        );
        let give_up = Instant::now() + 10 * SEC;
        while poll(&mut s, &waker).is_pending() && Instant::now() < give_up {
            std::thread::sleep(MS);
        }
        assert!(s.is_elapsed());
        assert!(Instant::now() >= f, "completed early");
        assert_eq!(s.deadline(), f);
    }
}

// ---------------------------------------------------------------------------------------------
// reset of a sleep stamped in a batch

#[test]
fn reset_before_its_stamp_earlier_later_and_into_the_past() {
    let (hand, timer) = batched();
    let (wakes, waker) = counter();
    let made = timer.now();
    let mut earlier = timer.sleep(30 * SEC);
    let mut later = timer.sleep(10 * SEC);
    let mut past = timer.sleep(10 * SEC);
    for s in [&mut earlier, &mut later, &mut past] {
        assert!(poll(s, &waker).is_pending());
    }
    Pin::new(&mut earlier).reset(made + 10 * SEC);
    Pin::new(&mut later).reset(made + 40 * SEC);
    Pin::new(&mut past).reset(made - SEC);
    assert_eq!(earlier.deadline(), made + 10 * SEC);
    assert_eq!(later.deadline(), made + 40 * SEC);
    assert_eq!(past.deadline(), made - SEC);
    assert!(past.is_elapsed(), "a past deadline completes at once");
    assert!(poll(&mut past, &waker).is_ready());
    assert_eq!(timer.pending(), 2);
    hand.advance(10 * SEC - MS);
    assert!(!earlier.is_elapsed(), "not early");
    hand.advance(MS);
    assert!(earlier.is_elapsed());
    assert!(poll(&mut earlier, &waker).is_ready());
    hand.advance(20 * SEC);
    assert!(
        !later.is_elapsed(),
        "the old deadline (made + 10 s) no longer counts"
    );
    hand.advance(10 * SEC - MS);
    assert!(!later.is_elapsed());
    hand.advance(MS);
    assert!(later.is_elapsed() && poll(&mut later, &waker).is_ready());
    assert_eq!(later.deadline(), made + 40 * SEC);
    assert_eq!(wakes.0.load(SeqCst), 3, "once per arming");
    let st = timer.stats();
    assert_eq!((st.pending, st.fired, st.cancelled), (0, 3, 0));
}

#[test]
fn reset_after_its_stamp_and_after_completion() {
    let (hand, timer) = batched();
    let (wakes, waker) = counter();
    let mut s = timer.sleep(10 * SEC);
    assert!(poll(&mut s, &waker).is_pending());
    hand.advance(MS); // stamped by the tick thread
    let stamped = s.deadline();
    Pin::new(&mut s).reset(stamped + 5 * SEC);
    hand.advance(10 * SEC);
    assert!(!s.is_elapsed());
    assert_eq!(s.deadline(), stamped + 5 * SEC);
    hand.advance(5 * SEC);
    assert!(s.is_elapsed() && poll(&mut s, &waker).is_ready());
    // Completed: reset re-arms it, in this timer.
    let now = timer.now();
    Pin::new(&mut s).reset(now + SEC);
    assert!(!s.is_shutdown() && poll(&mut s, &waker).is_pending());
    assert_eq!(timer.pending(), 1);
    hand.advance(SEC);
    assert!(poll(&mut s, &waker).is_ready() && s.is_elapsed());
    assert_eq!(wakes.0.load(SeqCst), 2);
    assert_eq!(s.deadline(), now + SEC);
}

#[test]
fn reset_after_completion_from_another_thread_whose_maker_thread_exited() {
    let (hand, timer) = batched();
    let (_, waker) = counter();
    // Made (and completed) on a thread that then exits: its shard is kept as a spare.
    let mut s = std::thread::scope(|sc| {
        sc.spawn(|| {
            let mut s = timer.sleep(SEC);
            hand.advance(MS);
            hand.advance(SEC);
            assert!(poll(&mut s, &waker).is_ready());
            s
        })
        .join()
        .unwrap()
    });
    let now = timer.now();
    Pin::new(&mut s).reset(now + SEC);
    assert!(!s.is_shutdown(), "the timer is alive: re-armed");
    assert!(poll(&mut s, &waker).is_pending());
    hand.advance(SEC);
    assert!(poll(&mut s, &waker).is_ready() && s.is_elapsed());
}

// ---------------------------------------------------------------------------------------------
// shutdown, drop, and shards reused by the next timer

#[test]
fn many_batched_sleeps_then_shutdown_each_says_so_with_a_deadline_not_early() {
    let (hand, timer) = batched();
    let (wakes, waker) = counter();
    let made = timer.now();
    let mut sleeps: Vec<(Duration, Sleep)> = (0..2000u64)
        .map(|i| {
            let d = Duration::from_millis(100 + (i * 37) % 100_000);
            (d, timer.sleep(d))
        })
        .collect();
    // Some stamped on demand, some by the tick thread, some never.
    for (_, s) in sleeps.iter().step_by(3) {
        let _ = s.deadline();
    }
    for (_, s) in sleeps.iter_mut() {
        assert!(poll(s, &waker).is_pending());
    }
    hand.advance(MS);
    let more: Vec<(Duration, Sleep)> = (0..500u64)
        .map(|i| {
            let d = Duration::from_millis(200 + i);
            (d, timer.sleep(d))
        })
        .collect();
    let later = timer.now();
    let asked: Vec<Instant> = sleeps.iter().map(|(_, s)| s.deadline()).collect();
    assert!(timer.shutdown().is_empty());
    for (i, (d, s)) in sleeps.iter_mut().enumerate() {
        assert!(poll(s, &waker).is_ready() && s.is_shutdown(), "sleep {i}");
        assert_eq!(
            s.deadline(),
            asked[i],
            "sleep {i}: deadline moved at shutdown"
        );
        assert!(s.deadline() >= made + *d, "sleep {i}: early");
    }
    for (i, (d, mut s)) in more.into_iter().enumerate() {
        assert!(
            poll(&mut s, &waker).is_ready() && s.is_shutdown(),
            "more {i}"
        );
        assert!(s.deadline() >= later + d, "more {i}: early");
        assert_eq!(s.deadline(), s.deadline());
    }
    assert_eq!(wakes.0.load(SeqCst), 2000, "each polled sleep woken once");
    assert_eq!(timer.pending(), 0);
}

#[test]
fn shutdown_from_another_thread_while_sleeps_are_made_and_asked() {
    for round in 0..20 {
        let (hand, timer) = batched();
        let made = timer.now();
        let timer = Arc::new(timer);
        let results: Vec<(Duration, Sleep)> = std::thread::scope(|sc| {
            let t = timer.clone();
            let maker = sc.spawn(move || {
                let mut v = Vec::new();
                for i in 0..3000u64 {
                    let d = Duration::from_millis(100 + i);
                    let s = t.sleep(d);
                    if i % 5 == 0 {
                        let _ = s.deadline();
                    }
                    v.push((d, s));
                }
                v
            });
            let t = timer.clone();
            let h = hand.clone();
            let stopper = sc.spawn(move || {
                std::thread::sleep(Duration::from_micros(200 * round));
                h.advance(MS);
                t.shutdown();
            });
            stopper.join().unwrap();
            maker.join().unwrap()
        });
        let (_, waker) = counter();
        for (i, (d, mut s)) in results.into_iter().enumerate() {
            let first = s.deadline();
            assert!(first >= made + d, "round {round} sleep {i}: early");
            assert!(
                poll(&mut s, &waker).is_ready() && s.is_shutdown(),
                "round {round} {i}"
            );
            assert_eq!(s.deadline(), first, "round {round} sleep {i}: moved");
        }
        assert_eq!(timer.pending(), 0);
    }
}

#[test]
fn an_unstamped_sleep_outliving_its_timer_on_this_thread() {
    let (hand, timer) = batched();
    let (wakes, waker) = counter();
    let made = timer.now();
    let mut never_polled = timer.sleep(30 * SEC);
    let mut polled = timer.sleep(30 * SEC);
    assert!(poll(&mut polled, &waker).is_pending());
    drop(timer);
    assert_eq!(wakes.0.load(SeqCst), 1);
    // The next timer of this thread takes over the shard.
    let (_h2, next) = batched();
    let _other = next.sleep(10 * SEC);
    let _other2 = next.sleep(MS);
    assert_eq!(next.pending(), 2);
    assert!(never_polled.deadline() >= made + 30 * SEC);
    assert_eq!(
        never_polled.deadline(),
        made + 30 * SEC,
        "stamped by the drop's shutdown"
    );
    assert_eq!(polled.deadline(), made + 30 * SEC);
    assert!(poll(&mut never_polled, &waker).is_ready() && never_polled.is_shutdown());
    assert!(poll(&mut polled, &waker).is_ready() && polled.is_shutdown());
    Pin::new(&mut polled).reset(next.now() + SEC);
    assert!(polled.is_shutdown());
    assert_eq!(next.pending(), 2, "armed in a timer it does not belong to");
    drop(never_polled);
    drop(polled);
    let st = next.stats();
    assert_eq!((st.pending, st.cancelled), (2, 0));
    hand.advance(SEC);
}

#[test]
fn a_sleep_outliving_its_timer_while_another_thread_takes_the_shard() {
    let (hand, timer) = batched();
    let (_, waker) = counter();
    let made = timer.now();
    // Made on a thread that exits: its shard is a spare of the timer, retired when it drops.
    let (mut a, mut b) = std::thread::scope(|sc| {
        sc.spawn(|| (timer.sleep(30 * SEC), timer.sleep(20 * SEC)))
            .join()
            .unwrap()
    });
    assert!(poll(&mut b, &waker).is_pending());
    drop(timer);
    std::thread::scope(|sc| {
        sc.spawn(|| {
            let (h2, next) = batched();
            let mut mine: Vec<Sleep> = (0..10).map(|_| next.sleep(10 * SEC)).collect();
            assert_eq!(a.deadline(), made + 30 * SEC);
            Pin::new(&mut a).reset(next.now() + SEC);
            assert!(poll(&mut a, &waker).is_ready() && a.is_shutdown());
            assert_eq!(next.pending(), 10);
            h2.advance(MS);
            h2.advance(10 * SEC);
            for s in mine.iter_mut() {
                assert!(poll(s, &waker).is_ready() && s.is_elapsed());
            }
        });
    });
    assert!(poll(&mut b, &waker).is_ready() && b.is_shutdown());
    assert_eq!(b.deadline(), made + 20 * SEC);
    hand.advance(SEC);
}

#[test]
fn reset_after_shutdown_and_after_drop() {
    let (hand, timer) = batched();
    let (_, waker) = counter();
    let made = timer.now();
    let mut s = timer.sleep(10 * SEC);
    let mut fresh = timer.sleep(10 * SEC);
    timer.shutdown();
    assert!(poll(&mut s, &waker).is_ready() && s.is_shutdown());
    assert_eq!(fresh.deadline(), made + 10 * SEC);
    Pin::new(&mut fresh).reset(made + 20 * SEC); // before its shutdown was polled
    assert!(poll(&mut fresh, &waker).is_ready() && fresh.is_shutdown());
    assert_eq!(fresh.deadline(), made + 20 * SEC);
    Pin::new(&mut s).reset(made + SEC);
    assert!(poll(&mut s, &waker).is_ready() && s.is_shutdown());
    assert_eq!(s.deadline(), made + SEC);
    let mut after = timer.sleep(10 * SEC);
    assert!(poll(&mut after, &waker).is_ready() && after.is_shutdown());
    assert_eq!(after.deadline(), made + 10 * SEC);
    Pin::new(&mut after).reset(made + 30 * SEC);
    assert!(after.is_shutdown() && after.deadline() == made + 30 * SEC);
    drop(timer);
    Pin::new(&mut s).reset(made - SEC);
    assert!(poll(&mut s, &waker).is_ready() && s.is_shutdown());
    hand.advance(SEC);
}

// ---------------------------------------------------------------------------------------------
// timeouts

#[test]
fn timeouts_whose_future_completes_before_the_stamp() {
    let (hand, timer) = batched();
    let (_, waker) = counter();
    let mut cx = Context::from_waker(&waker);
    for _ in 0..100 {
        let mut t = pin!(timer.timeout(10 * SEC, std::future::ready(1)));
        assert_eq!(t.as_mut().poll(&mut cx), Poll::Ready(Ok(1)));
        let _ = format!("{t:?}");
    }
    // Completing after the stamp, after the deadline fired but before the poll.
    let ready = Arc::new(Mutex::new(false));
    let flag = ready.clone();
    let inner = std::future::poll_fn(move |_| {
        if *flag.lock().unwrap() {
            Poll::Ready(5)
        } else {
            Poll::Pending
        }
    });
    let mut t = pin!(timer.timeout(10 * SEC, inner));
    assert!(t.as_mut().poll(&mut cx).is_pending());
    hand.advance(MS);
    hand.advance(10 * SEC);
    *ready.lock().unwrap() = true;
    assert_eq!(
        t.as_mut().poll(&mut cx),
        Poll::Ready(Ok(5)),
        "the future is polled first"
    );
    let dbg = format!("{t:?}");
    assert!(dbg.contains("Timeout"), "{dbg}");
    let st = timer.stats();
    assert_eq!((st.pending, st.cancelled, st.fired), (0, 100, 1));
    // One that times out: Elapsed, never early. (Stamped by the tick thread's first round
    // after the add, from a reading of this clock then: the one it was made at, or the next
    // move's, a millisecond later.)
    let made = timer.now();
    let mut slow = pin!(timer.timeout(10 * SEC, std::future::pending::<()>()));
    assert!(slow.as_mut().poll(&mut cx).is_pending());
    hand.advance(MS);
    let shown = format!("{slow:?}");
    assert!(
        [made + 10 * SEC, made + 10 * SEC + MS]
            .iter()
            .any(|d| shown.contains(&format!("{d:?}"))),
        "{shown} made {made:?}"
    );
    hand.advance(10 * SEC - 2 * MS);
    assert!(slow.as_mut().poll(&mut cx).is_pending(), "not early");
    hand.advance(2 * MS);
    assert_eq!(
        slow.as_mut().poll(&mut cx),
        Poll::Ready(Err(TimeoutError::Elapsed))
    );
    let mut shut = pin!(timer.timeout(10 * SEC, std::future::pending::<()>()));
    assert!(shut.as_mut().poll(&mut cx).is_pending());
    drop(timer);
    assert_eq!(
        shut.as_mut().poll(&mut cx),
        Poll::Ready(Err(TimeoutError::Shutdown))
    );
    let _ = format!("{shut:?}");
}

// ---------------------------------------------------------------------------------------------
// intervals

#[test]
fn interval_reset_fixed_delay_and_shutdown_on_the_batched_clock() {
    let (hand, timer) = batched();
    let (_, waker) = counter();
    let mut every = timer.interval(SEC);
    let start = tick(&mut every, &waker).expect("first tick at once");
    assert_eq!(tick(&mut every, &waker), None);
    every.reset_at(start + 5 * SEC);
    hand.advance(SEC);
    assert_eq!(tick(&mut every, &waker), None, "moved later");
    hand.advance(4 * SEC);
    assert_eq!(tick(&mut every, &waker), Some(start + 5 * SEC));
    every.reset_at(start); // in the past: at once
    assert_eq!(tick(&mut every, &waker), Some(start));
    every.set_fixed_delay(true);
    hand.advance(SEC);
    let t = tick(&mut every, &waker);
    assert!(t.is_some(), "{t:?}");
    let _ = format!("{every:?}");
    timer.shutdown();
    assert!(tick(&mut every, &waker).is_some() && every.is_shutdown());
    every.reset_at(start + 100 * SEC);
    assert!(tick(&mut every, &waker).is_some() && every.is_shutdown());
    drop(timer);
    every.reset_at(start);
    assert!(tick(&mut every, &waker).is_some() && every.is_shutdown());
    let _ = format!("{every:?}");
}

#[test]
fn an_interval_outliving_its_timer_keeps_no_shard_from_the_next() {
    let (clock, timer) = manual();
    let (_, waker) = counter();
    let mut every = timer.interval(SEC);
    assert!(tick(&mut every, &waker).is_some());
    drop(timer);
    assert!(tick(&mut every, &waker).is_some() && every.is_shutdown());
    let (_c2, next) = manual();
    let _s = next.sleep(SEC);
    every.reset_at(next.now() + SEC);
    assert!(tick(&mut every, &waker).is_some() && every.is_shutdown());
    assert_eq!(next.pending(), 1);
    clock.advance(SEC);
}

// ---------------------------------------------------------------------------------------------
// the reported deadline is the one the timer fires at

#[test]
fn is_elapsed_exactly_when_the_clock_reaches_the_reported_deadline() {
    let (hand, timer) = batched();
    let mut made: Vec<(Instant, Duration)> = Vec::new();
    let sleeps: Vec<Sleep> = std::thread::scope(|sc| {
        let h = hand.clone();
        let mover = sc.spawn(move || {
            for _ in 0..40 {
                h.advance(MS);
                std::thread::sleep(Duration::from_micros(50));
            }
        });
        let mut v = Vec::new();
        for i in 0..600u64 {
            let d = Duration::from_millis(64 + (i * 13) % 500);
            made.push((timer.now(), d));
            v.push(timer.sleep(d));
            if i % 7 == 0 {
                let _ = v[(i as usize * 5) % v.len()].deadline();
            }
        }
        mover.join().unwrap();
        v
    });
    let first: Vec<Instant> = std::thread::scope(|sc| {
        let a = sc.spawn(|| {
            sleeps
                .iter()
                .rev()
                .map(|s| s.deadline())
                .collect::<Vec<_>>()
        });
        let b: Vec<Instant> = sleeps.iter().map(|s| s.deadline()).collect();
        let mut a = a.join().unwrap();
        a.reverse();
        assert_eq!(a, b, "two threads disagree");
        b
    });
    for (i, ((m, d), f)) in made.iter().zip(&first).enumerate() {
        assert!(
            *f >= *m + *d,
            "sleep {i}: deadline earlier than made + delay"
        );
    }
    let (_, waker) = counter();
    let mut sleeps = sleeps;
    for _ in 0..700 {
        hand.advance(MS);
        let now = timer.now();
        for (i, s) in sleeps.iter_mut().enumerate() {
            assert_eq!(
                s.is_elapsed(),
                now >= first[i],
                "sleep {i}: now {:?}, deadline {:?}",
                now - made[0].0,
                first[i] - made[0].0
            );
            if s.is_elapsed() {
                assert!(poll(s, &waker).is_ready());
                assert_eq!(s.deadline(), first[i]);
            }
        }
    }
    assert_eq!(timer.pending(), 0);
}

// ---------------------------------------------------------------------------------------------
// extreme inputs

#[test]
fn extreme_delays_and_ticks_panic_nowhere() {
    let (hand, timer) = batched();
    let (_, waker) = counter();
    let mut cx = Context::from_waker(&waker);
    for d in [
        Duration::MAX,
        Duration::from_nanos(u64::MAX),
        Duration::from_nanos(u64::MAX - 1),
        Duration::from_secs(400 * 365 * 86_400),
        Duration::from_millis(64),
        Duration::from_nanos(64_000_000 - 1),
    ] {
        let mut s = timer.sleep(d);
        let first = s.deadline();
        assert_eq!(s.deadline(), first);
        assert!(poll(&mut s, &waker).is_pending() || d < Duration::from_millis(64));
        let _ = format!("{s:?}");
        let mut t = pin!(timer.timeout(d, std::future::pending::<()>()));
        assert!(t.as_mut().poll(&mut cx).is_pending());
        let _ = format!("{t:?}");
        let mut every = timer.interval(d);
        assert!(tick(&mut every, &waker).is_some());
        let _ = format!("{every:?}");
        every.reset_at(first);
        let _ = tick(&mut every, &waker);
        Pin::new(&mut s).reset(first);
    }
    hand.advance(MS);
    hand.advance(SEC);
    let coarse = Timer::builder()
        .tick(SEC)
        .clock(Batched {
            hand: hand.clone(),
            origin: Instant::now() + Duration::from_secs(365 * 86_400),
        })
        .executor(Arc::new(InlineExecutor::new()))
        .build()
        .unwrap();
    let made = coarse.now();
    let mut s = coarse.sleep(100 * SEC);
    assert!(poll(&mut s, &waker).is_pending());
    assert!(s.deadline() >= made + 100 * SEC);
    let d = s.deadline();
    hand.advance(d - coarse.now() - MS);
    assert!(!s.is_elapsed(), "early on a coarse tick");
    hand.advance(SEC);
    assert!(s.is_elapsed());
    drop(coarse);
    drop(timer);
}

// ---------------------------------------------------------------------------------------------
// churn: the owner makes and drops sleeps while others ask

#[test]
fn churn_on_the_owner_while_other_threads_ask_and_the_tick_thread_stamps() {
    let timer = Timer::builder().threads(1).build().unwrap();
    std::thread::sleep(200 * MS); // so a clock reading folded into a delay is visible
    let (tx, rx) = std::sync::mpsc::channel::<(Instant, Sleep)>();
    std::thread::scope(|sc| {
        let t = &timer;
        sc.spawn(move || {
            let until = Instant::now() + 1500 * MS;
            let mut n = 0u64;
            while Instant::now() < until {
                let x = t.sleep(10 * SEC);
                drop(x);
                let made = Instant::now();
                let y = t.sleep(10 * SEC);
                n += 1;
                if n.is_multiple_of(64) {
                    tx.send((made, y)).unwrap();
                }
            }
        });
        let asker = sc.spawn(move || {
            let mut kept = Vec::new();
            for (made, y) in rx {
                let d = y.deadline();
                assert!(d >= made + 10 * SEC, "early");
                assert!(
                    d <= Instant::now() + 10 * SEC + 100 * MS,
                    "{:?} late",
                    d - (made + 10 * SEC)
                );
                kept.push((made, d, y));
            }
            kept
        });
        let kept = asker.join().unwrap();
        for (made, d, y) in &kept {
            assert_eq!(y.deadline(), *d);
            assert!(*d >= *made + 10 * SEC);
        }
        assert!(kept.len() > 100, "{}", kept.len());
    });
}

#[test]
fn sleeps_of_dead_timers_on_exited_threads_never_touch_the_timers_that_take_their_shards() {
    let (hand, timer) = batched();
    let made = timer.now();
    let timer = Arc::new(timer);
    // Four threads make sleeps (each its own shard), some fired, then exit.
    let mut old: Vec<Sleep> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..4)
            .map(|_| {
                let t = timer.clone();
                sc.spawn(move || {
                    (0..50)
                        .map(|i| t.sleep(Duration::from_millis(100 + i * 100)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    hand.advance(MS);
    hand.advance(SEC); // some fired, not polled
    let fired: Vec<bool> = old.iter().map(Sleep::is_elapsed).collect();
    assert!(fired.iter().any(|&f| f) && fired.iter().any(|&f| !f));
    let before: Vec<Instant> = old.iter().map(Sleep::deadline).collect();
    drop(timer); // the last Arc: dropped, shut down; its shards go to the next timers
    std::thread::scope(|sc| {
        for k in 0..4 {
            let old = &before;
            sc.spawn(move || {
                let (h2, next) = batched();
                let mut mine: Vec<Sleep> = (0..20).map(|_| next.sleep(10 * SEC)).collect();
                assert_eq!(next.pending(), 20);
                h2.advance(MS);
                let _ = (k, old);
                h2.advance(10 * SEC);
                let (_, waker) = counter();
                for s in mine.iter_mut() {
                    assert!(poll(s, &waker).is_ready() && s.is_elapsed());
                }
                let st = next.stats();
                assert_eq!((st.fired, st.cancelled, st.pending), (20, 0, 0));
            });
        }
    });
    let (_, waker) = counter();
    for (i, s) in old.iter_mut().enumerate() {
        assert_eq!(s.deadline(), before[i], "sleep {i}");
        assert!(s.deadline() >= made + Duration::from_millis(100 + (i as u64 % 50) * 100));
        assert!(poll(s, &waker).is_ready());
        assert_eq!(s.is_elapsed(), fired[i], "sleep {i}");
        assert_eq!(s.is_shutdown(), !fired[i], "sleep {i}");
        Pin::new(&mut *s).reset(Instant::now());
        assert!(s.is_shutdown());
    }
    drop(old);
}

#[test]
fn reset_from_another_thread_while_the_owner_keeps_adding_on_the_real_clock() {
    let timer = Timer::builder().threads(1).build().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<Sleep>();
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|sc| {
        let t = &timer;
        let stop = &stop;
        sc.spawn(move || {
            let mut keep = Vec::new();
            let mut n = 0u64;
            while !stop.load(SeqCst) {
                keep.push(t.sleep(Duration::from_millis(100 + n % 400)));
                if keep.len() > 300 {
                    drop(keep.remove(0));
                }
                n += 1;
                if n.is_multiple_of(100) && tx.send(t.sleep(10 * SEC)).is_err() {
                    break;
                }
            }
        });
        let (_, waker) = counter();
        let mut done = Vec::new();
        for (k, mut s) in rx.iter().take(200).enumerate() {
            let target = Instant::now() + Duration::from_millis(20 + (k as u64 % 5) * 10);
            Pin::new(&mut s).reset(target);
            assert_eq!(s.deadline(), target);
            done.push(s);
        }
        stop.store(true, SeqCst);
        let give_up = Instant::now() + 10 * SEC;
        for s in done.iter_mut() {
            while poll(s, &waker).is_pending() && Instant::now() < give_up {
                std::thread::sleep(MS);
            }
            assert!(s.is_elapsed());
            assert!(Instant::now() >= s.deadline());
        }
    });
}

#[test]
fn a_manual_clock_and_the_batched_clock_agree() {
    fn script(hand: &ManualClock, timer: &Timer) -> Vec<String> {
        let (_, waker) = counter();
        let made = timer.now();
        let mut log = Vec::new();
        let mut a = timer.sleep(10 * SEC);
        let mut b = timer.sleep(20 * SEC);
        let mut c = timer.sleep(30 * SEC);
        log.push(format!("a {:?}", a.deadline() - made));
        log.push(format!("b {:?}", b.deadline() - made));
        Pin::new(&mut c).reset(made + 5 * SEC);
        for s in [&mut a, &mut b, &mut c] {
            assert!(poll(s, &waker).is_pending());
        }
        hand.advance(5 * SEC);
        log.push(format!("c {} {:?}", c.is_elapsed(), c.deadline() - made));
        hand.advance(5 * SEC);
        log.push(format!("a {} {:?}", a.is_elapsed(), a.deadline() - made));
        Pin::new(&mut a).reset(made + 15 * SEC);
        hand.advance(5 * SEC);
        log.push(format!("a {} {:?}", a.is_elapsed(), a.deadline() - made));
        timer.shutdown();
        log.push(format!(
            "b {:?} {} {:?}",
            poll(&mut b, &waker),
            b.is_shutdown(),
            b.deadline() - made
        ));
        log.push(format!("{:?}", timer.stats().returned));
        log
    }
    let (c1, t1) = manual();
    let (c2, t2) = batched();
    assert_eq!(script(&c1, &t1), script(&c2, &t2));
}

#[test]
fn the_end_of_time() {
    let (hand, timer) = batched();
    let (wakes, waker) = counter();
    let made = timer.now();
    let mut far = timer.sleep(Duration::MAX);
    let mut long = timer.sleep(Duration::from_secs(100 * 365 * 86_400));
    assert!(poll(&mut far, &waker).is_pending() && poll(&mut long, &waker).is_pending());
    let f = far.deadline();
    assert!(f >= made, "{f:?}");
    hand.advance(Duration::MAX);
    assert!(long.is_elapsed(), "the clock is at its end");
    let _ = far.is_elapsed();
    let mut at_end = timer.sleep(10 * SEC);
    let _ = poll(&mut at_end, &waker);
    let _ = at_end.deadline();
    Pin::new(&mut at_end).reset(made + Duration::from_secs(1000 * 365 * 86_400));
    let _ = poll(&mut at_end, &waker);
    let _ = format!("{at_end:?} {far:?} {long:?}");
    timer.shutdown();
    let _ = (poll(&mut far, &waker), far.is_shutdown(), far.deadline());
    let _ = wakes;
}

/// A timer that lived long on this thread leaves its clock reading in the shard it used; the next
/// timer of this thread takes that shard over (`Shard::adopt`), and its first long sleep files
/// itself with the dead timer's reading: the tick thread is asked to look only once the new
/// clock reaches that reading, so the sleep is not stamped (nor fired) until then.
#[test]
fn a_long_sleep_in_a_shard_taken_over_from_an_older_timer_is_stamped_in_time() {
    let (old_hand, old) = batched();
    old_hand.advance(3600 * SEC); // the old timer lived an hour
    // Its last add on this thread, unstamped: its clock reading of 1 h + 5 s stays cached (a
    // short one's reading is for that add only).
    drop(old.sleep(10 * SEC));
    drop(old);
    let (hand, timer) = batched(); // 5 s on its clock; takes over this thread's shard
    let (_, waker) = counter();
    let made = timer.now();
    let mut s = timer.sleep(10 * SEC);
    assert!(poll(&mut s, &waker).is_pending());
    hand.advance(MS); // the tick thread must stamp it now (within a tick)
    hand.advance(10 * SEC);
    assert!(
        s.is_elapsed(),
        "10 s sleep not done 10.001 s after it was made (deadline {:?} after made)",
        s.deadline() - made
    );
}

/// A thread's first add to a timer that has been up an hour, in a shard made for it: its sleeps
/// are on time, and `stats()` must say so (lateness counts from made + delay).
#[test]
fn a_new_threads_sleeps_are_not_counted_an_hour_late() {
    let (hand, timer) = batched();
    hand.advance(3600 * SEC);
    let (_, waker) = counter();
    let mut s = std::thread::scope(|sc| sc.spawn(|| timer.sleep(10 * SEC)).join().unwrap());
    assert!(poll(&mut s, &waker).is_pending());
    hand.advance(MS);
    hand.advance(10 * SEC);
    assert!(poll(&mut s, &waker).is_ready() && s.is_elapsed());
    let st = timer.stats();
    assert_eq!(st.fired, 1);
    assert!(
        st.lateness_max <= 2 * MS,
        "lateness_max {:?}",
        st.lateness_max
    );
}

/// Debug of a waiting timeout shows its deadline once stamped; once the future won, the timer is
/// cancelled without looking the deadline up (a completed timeout never needs it), so the same
/// timeout shows `None`, as documented on `Sleep::cancel`.
#[test]
fn a_completed_timeout_forgets_a_deadline_it_never_needed() {
    let (hand, timer) = batched();
    let (_, waker) = counter();
    let mut cx = Context::from_waker(&waker);
    let go = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = go.clone();
    let inner = std::future::poll_fn(move |_| {
        if flag.load(SeqCst) {
            Poll::Ready(7)
        } else {
            Poll::Pending
        }
    });
    let mut t = pin!(timer.timeout(10 * SEC, inner));
    assert!(t.as_mut().poll(&mut cx).is_pending());
    hand.advance(MS); // stamped by the tick thread
    let shown = format!("{t:?}");
    assert!(!shown.contains("deadline: None"), "{shown}");
    go.store(true, SeqCst);
    assert_eq!(t.as_mut().poll(&mut cx), Poll::Ready(Ok(7)));
    let after = format!("{t:?}");
    assert!(
        after.contains("deadline: None") && after.contains("elapsed: false"),
        "before: {shown}\nafter: {after}"
    );
}

/// A sleep dropped while it still waits unstamped in its shard's ring is cancelled and its slot
/// let go in one move: counted as a cancel, no longer pending, its waker (if a poll left one)
/// released, its slot reused by the next sleep (the memory stays flat), and its stale ring
/// record skipped when the ring is drained.
#[test]
fn a_sleep_dropped_in_the_ring_is_cancelled_and_let_go_at_once() {
    let (hand, timer) = batched();
    let (wakes, waker) = counter();
    let alone = Arc::strong_count(&wakes);
    let round = |polled: bool| {
        for _ in 0..100 {
            let mut s = timer.sleep(3600 * SEC);
            if polled {
                assert!(poll(&mut s, &waker).is_pending());
                assert_eq!(
                    Arc::strong_count(&wakes),
                    alone + 1,
                    "the cell keeps a copy"
                );
            }
            drop(s);
            assert_eq!(Arc::strong_count(&wakes), alone, "dropped with the sleep");
        }
    };
    round(false);
    let bytes = timer.heap_bytes();
    round(true);
    assert_eq!(timer.heap_bytes(), bytes, "the slots were reused");
    assert_eq!(timer.pending(), 0);
    hand.advance(MS); // the tick thread drains the ring: every record is stale
    hand.advance(7200 * SEC);
    let st = timer.stats();
    assert_eq!((st.added, st.cancelled, st.fired), (200, 200, 0));
    assert_eq!(wakes.0.load(SeqCst), 0);
}
