//! Scenario tests in the spirit of Kafka's `TimingWheel` tests, plus ids, limits and configuration.

use tickwheel_wheel::{ConfigError, MAX_WHEEL_SIZE, TimerId, TimingWheel};

mod support;
use support::Rng;

fn fire_to<T>(wheel: &mut TimingWheel<T>, now: u64) -> Vec<T> {
    let mut out = Vec::new();
    wheel.advance(now, |t| out.push(t));
    out
}

#[test]
fn already_expired_inserts_hand_the_item_back() {
    let mut w = TimingWheel::new(1, 20_usize.next_power_of_two(), 100).unwrap();
    assert_eq!(w.insert(100, "now").unwrap_err().into_item(), "now");
    assert_eq!(w.insert(99, "past").unwrap_err().into_item(), "past");
    let refused = w.insert(0, "long past").unwrap_err();
    assert_eq!((refused.deadline(), refused.now()), (0, 100));
    assert_eq!(
        refused.to_string(),
        "deadline 0 is not after the wheel's clock 100: the item is already due"
    );
    assert_eq!(refused.into_item(), "long past");
    assert!(w.is_empty());
    assert!(w.insert(101, "next").is_ok());
}

#[test]
fn a_refused_insert_goes_through_question_mark_into_a_boxed_error() {
    fn insert_late() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        let mut w = TimingWheel::new(1, 64, 100)?;
        w.insert(50, String::from("late"))?;
        Ok(())
    }
    let e = insert_late().unwrap_err();
    assert!(e.to_string().contains("already due"), "{e}");
}

#[test]
fn tasks_spread_over_many_ticks_fire_in_their_ticks() {
    let mut w = TimingWheel::new(1, 16, 0).unwrap();
    // Three tasks per tick over 5000 ticks: levels 0, 1, 2 and 3.
    for t in 1..=5_000u64 {
        for k in 0..3 {
            w.insert(t, (t, k)).unwrap();
        }
    }
    for now in 1..=5_000u64 {
        let fired = fire_to(&mut w, now);
        assert_eq!(fired.len(), 3, "tick {now}");
        assert!(
            fired.iter().all(|&(t, _)| t == now),
            "tick {now}: {fired:?}"
        );
    }
    assert!(w.is_empty());
}

#[test]
fn a_deadline_fires_when_now_reaches_it_rounded_up_to_the_tick() {
    let mut w = TimingWheel::new(10, 8, 0).unwrap();
    w.insert(15, "a").unwrap();
    w.insert(20, "b").unwrap();
    w.insert(21, "c").unwrap();
    assert!(fire_to(&mut w, 15).is_empty(), "15 rounds up to 20");
    assert!(fire_to(&mut w, 19).is_empty());
    assert_eq!(fire_to(&mut w, 20), ["a", "b"]);
    assert!(fire_to(&mut w, 29).is_empty());
    assert_eq!(fire_to(&mut w, 30), ["c"]);
}

#[test]
fn cancelled_tasks_never_fire() {
    let mut w = TimingWheel::new(1, 64, 0).unwrap();
    let ids: Vec<_> = (1..=10_000u64)
        .map(|d| w.insert(d * 37, d).unwrap())
        .collect();
    for (i, id) in ids.iter().enumerate() {
        if i % 3 != 0 {
            assert_eq!(w.cancel(*id), Some(i as u64 + 1));
        }
    }
    let mut fired = Vec::new();
    while let Some(t) = w.next_expiration() {
        w.advance(t, |d| fired.push(d));
    }
    let want: Vec<u64> = (1..=10_000u64).filter(|d| (d - 1) % 3 == 0).collect();
    assert_eq!(fired, want);
}

#[test]
fn stale_ids_are_refused() {
    let mut w = TimingWheel::new(1, 4, 0).unwrap();
    let fired = w.insert(1, 1).unwrap();
    let cancelled = w.insert(10, 2).unwrap();
    assert_eq!(fire_to(&mut w, 1), [1]);
    assert_eq!(w.cancel(fired), None, "after fire");
    assert!(!w.reschedule(fired, 50));
    assert_eq!(w.cancel(cancelled), Some(2));
    assert_eq!(w.cancel(cancelled), None, "cancel twice");
    assert!(!w.reschedule(cancelled, 50), "after cancel");
    // Both slots get reused; the old ids must not reach the new occupants.
    let a = w.insert(100, 3).unwrap();
    let b = w.insert(200, 4).unwrap();
    assert_eq!(w.cancel(fired), None, "after reuse");
    assert_eq!(w.cancel(cancelled), None, "after reuse");
    assert!(!w.reschedule(fired, 5));
    assert_eq!(w.len(), 2);
    assert_eq!(TimerId::from_raw(a.into_raw()), a);
    assert_eq!(w.get(a), Some(&3));
    *w.get_mut(b).unwrap() += 0;
    assert_eq!(w.get(fired), None, "get refuses a stale id too");
    assert_eq!(
        w.cancel(TimerId::from_raw(u64::MAX)),
        None,
        "a made-up id is just stale"
    );
    assert_eq!(w.cancel(a), Some(3));
    assert_eq!(w.cancel(b), Some(4));
}

#[test]
fn reschedule_earlier_later_and_into_the_past() {
    let mut w = TimingWheel::new(1, 8, 0).unwrap();
    let later = w.insert(10, "later").unwrap();
    let earlier = w.insert(10_000, "earlier").unwrap();
    let past = w.insert(500, "past").unwrap();
    assert!(w.reschedule(later, 20_000));
    assert!(w.reschedule(earlier, 5));
    assert_eq!(fire_to(&mut w, 9), ["earlier"]);
    assert!(w.reschedule(past, 3), "a deadline before now is accepted");
    assert_eq!(w.next_expiration(), Some(9), "and is due at once");
    assert_eq!(
        fire_to(&mut w, 9),
        ["past"],
        "the next advance hands it out, even without moving"
    );
    assert!(fire_to(&mut w, 19_999).is_empty());
    assert_eq!(fire_to(&mut w, 20_000), ["later"]);
}

#[test]
fn deadlines_at_the_end_of_time() {
    let mut w = TimingWheel::new(1, 64, 0).unwrap();
    w.insert(u64::MAX, "max").unwrap();
    w.insert(u64::MAX - 1, "max-1").unwrap();
    w.insert(1, "soon").unwrap();
    assert_eq!(fire_to(&mut w, 1), ["soon"]);
    assert_eq!(fire_to(&mut w, u64::MAX - 2), Vec::<&str>::new());
    assert_eq!(fire_to(&mut w, u64::MAX - 1), ["max-1"]);
    assert_eq!(fire_to(&mut w, u64::MAX), ["max"]);
    assert!(
        w.insert(u64::MAX, "too late").is_err(),
        "nothing is after u64::MAX"
    );

    // With a coarse tick, a deadline whose rounding overflows is due only at u64::MAX.
    let mut w = TimingWheel::new(1000, 2, u64::MAX - 10_000).unwrap();
    w.insert(u64::MAX - 5, "saturated").unwrap();
    assert!(fire_to(&mut w, u64::MAX - 1).is_empty());
    assert_eq!(w.next_expiration(), Some(u64::MAX));
    assert_eq!(fire_to(&mut w, u64::MAX), ["saturated"]);
}

#[test]
fn the_clock_never_goes_backwards() {
    let mut w = TimingWheel::new(1, 8, 1_000).unwrap();
    w.insert(1_500, ()).unwrap();
    assert!(fire_to(&mut w, 10).is_empty());
    assert_eq!(w.now(), 1_000);
    assert_eq!(fire_to(&mut w, 1_500).len(), 1);
    assert!(fire_to(&mut w, 1_200).is_empty());
    assert_eq!(w.now(), 1_500);
}

#[test]
fn drain_returns_everything_pending_earliest_first() {
    let mut w = TimingWheel::new(1, 64, 0).unwrap();
    let ids: Vec<_> = [5_000_000u64, 7, 90_000, 3, 1 << 40]
        .iter()
        .map(|&d| w.insert(d, d).unwrap())
        .collect();
    w.cancel(ids[2]);
    assert_eq!(w.drain(), [3, 7, 5_000_000, 1 << 40]);
    assert!(w.is_empty());
    assert_eq!(w.next_expiration(), None);
    assert!(
        ids.iter().all(|&id| w.cancel(id).is_none()),
        "drained ids are stale"
    );
    // The wheel is usable afterwards.
    w.insert(10, 10).unwrap();
    assert_eq!(fire_to(&mut w, 10), [10]);
}

#[test]
fn memory_per_pending_boxed_closure_is_at_most_48_bytes() {
    // The workload of the memory target: a million pending `Box<dyn FnOnce() + Send>` tasks
    // capturing nothing (so the box itself does not allocate), delays log-uniform 1 ms .. 24 h.
    let n = 1_000_000u64;
    let mut w: TimingWheel<Box<dyn FnOnce() + Send>> = TimingWheel::new(1, 64, 0).unwrap();
    let mut rng = Rng::new(0x9E37_79B9_7F4A_7C15);
    for _ in 0..n {
        let d = rng.log_uniform(86_400_000);
        assert!(w.insert(d, Box::new(|| {})).is_ok());
    }
    let per_timer = w.heap_bytes() as f64 / n as f64;
    println!("{per_timer:.1} bytes per pending timer");
    assert!(per_timer <= 48.0, "{per_timer:.1} bytes per pending timer");
}

#[test]
fn invalid_configurations_get_typed_errors() {
    type W = TimingWheel<()>;
    assert_eq!(W::new(0, 64, 0).unwrap_err(), ConfigError::ZeroTick);
    assert_eq!(
        W::new(1, 0, 0).unwrap_err(),
        ConfigError::WheelSizeTooSmall { size: 0 }
    );
    assert_eq!(
        W::new(1, 1, 0).unwrap_err(),
        ConfigError::WheelSizeTooSmall { size: 1 }
    );
    assert_eq!(
        W::new(1, 3, 0).unwrap_err(),
        ConfigError::WheelSizeNotPowerOfTwo { size: 3 }
    );
    assert_eq!(
        W::new(1, 100, 0).unwrap_err(),
        ConfigError::WheelSizeNotPowerOfTwo { size: 100 }
    );
    assert_eq!(
        W::new(1, MAX_WHEEL_SIZE * 2, 0).unwrap_err(),
        ConfigError::WheelSizeTooLarge {
            size: MAX_WHEEL_SIZE * 2,
            max: MAX_WHEEL_SIZE
        }
    );
    assert!(W::new(1, 2, 0).is_ok());
    assert!(W::new(u64::MAX, MAX_WHEEL_SIZE, u64::MAX).is_ok());
    // Messages name the value and the rule.
    assert_eq!(
        W::new(1, 100, 0).unwrap_err().to_string(),
        "invalid wheel size 100: the wheel size must be a power of two"
    );
    assert_eq!(
        W::new(0, 64, 0).unwrap_err().to_string(),
        "invalid tick 0: the tick must be at least 1"
    );
}

// Found by the adversarial review of 2026-11-27: `drain` ordered overdue entries, whose stored
// tick is clamped to the clock, by slot rather than by their own deadlines.

#[test]
fn drain_after_a_panicking_advance_is_earliest_deadline_first() {
    let mut w = TimingWheel::new(1, 64, 0).unwrap();
    for d in [300u64, 200, 100, 50] {
        w.insert(d, d).unwrap();
    }
    // The callback panics on the first item (50): 100, 200 and 300 stay in the wheel, overdue.
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        w.advance(1_000, |_| panic!("callback fails"));
    }));
    assert!(r.is_err());
    assert_eq!(w.len(), 3);
    assert_eq!(w.drain(), [100, 200, 300]);
}

#[test]
fn drain_after_reschedules_into_the_past_is_earliest_deadline_first() {
    let mut w = TimingWheel::new(10, 64, 15).unwrap(); // now 15, inside tick 1
    let x = w.insert(100, "x: deadline 15").unwrap();
    let y = w.insert(100, "y: deadline 5").unwrap();
    assert!(w.reschedule(x, 15)); // due at tick 2, later in the current one: overdue
    assert!(w.reschedule(y, 5)); // due at tick 1
    assert_eq!(w.drain(), ["y: deadline 5", "x: deadline 15"]);
}
