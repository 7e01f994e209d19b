//! Unit tests of the wheel's internals (the behaviour against a model is in `tests/model.rs`).

use super::*;

/// A small deterministic generator, so these tests need no dependency and never flake.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Random operations with the invariant check after each; the behavioural comparison with a
/// model lives in `tests/model.rs`.
#[test]
fn invariants_hold_under_random_operations() {
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    for round in 0..300 {
        let bits = 1 + rng.below(8) as u32;
        let tick = 1 + rng.below(20);
        let start = if round % 10 == 0 {
            u64::MAX - rng.below(1 << 20)
        } else {
            rng.below(1 << 30)
        };
        let mut w = TimingWheel::new(tick, 1 << bits, start).unwrap();
        let mut ids = Vec::new();
        for _ in 0..200 {
            let now = w.now();
            match rng.below(10) {
                0..=3 => {
                    let shift = rng.below(64);
                    let d = now.saturating_add(1 + (rng.next() >> shift));
                    if let Ok(id) = w.insert(d, ()) {
                        ids.push(id);
                    }
                }
                4 | 5 if !ids.is_empty() => {
                    let id = ids[rng.below(ids.len() as u64) as usize];
                    w.cancel(id);
                }
                6 | 7 if !ids.is_empty() => {
                    let id = ids[rng.below(ids.len() as u64) as usize];
                    let d = if rng.below(4) == 0 {
                        now.saturating_sub(rng.below(3 * tick))
                    } else {
                        now.saturating_add(rng.next() >> rng.below(64))
                    };
                    w.reschedule(id, d);
                }
                _ => {
                    let step = rng.next() >> (8 + rng.below(56));
                    w.advance(now.saturating_add(step), |()| {});
                }
            }
            w.check();
        }
    }
}

#[test]
fn a_panicking_callback_loses_nothing() {
    let mut w = TimingWheel::new(1, 4, 0).unwrap();
    for d in 1..=20u64 {
        w.insert(d, d).unwrap();
    }
    let mut seen = Vec::new();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        w.advance(15, |d| {
            seen.push(d);
            assert_ne!(d, 7, "boom");
        })
    }));
    assert!(r.is_err());
    w.check();
    assert_eq!(seen, (1..=7).collect::<Vec<_>>());
    assert_eq!(w.len(), 13);
    w.advance(15, |d| seen.push(d));
    assert_eq!(seen, (1..=15).collect::<Vec<_>>());
    w.check();
}

/// A prefetch hint that panics is a panicking advance like any other: every due item comes out
/// once, in order, whether the hint failed before the first item (while the first hints are
/// given) or between items (adversarial review of `advance_prefetching`: both lost items).
#[test]
fn a_panicking_prefetch_hint_loses_nothing() {
    for bad in [0u64, 30] {
        let mut w = TimingWheel::new(1, 64, 0).unwrap();
        for i in 0..40u64 {
            w.insert(5 + i % 3, i).unwrap();
        }
        let mut seen = Vec::new();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            w.advance_prefetching(
                10,
                |&i| assert_ne!(i, bad, "a hint that fails"),
                |i| seen.push(i),
            )
        }));
        assert!(r.is_err(), "the hint for item {bad} panicked");
        w.check();
        w.advance(10, |i| seen.push(i));
        let mut sorted = seen.clone();
        sorted.sort_unstable();
        assert_eq!(
            sorted,
            (0..40).collect::<Vec<_>>(),
            "each item once (hint failing at {bad})"
        );
        let due = |i: &u64| 5 + i % 3;
        assert!(
            seen.windows(2).all(|p| due(&p[0]) <= due(&p[1])),
            "in order: {seen:?}"
        );
        w.check();
    }
}

/// Issue 9, item 7: after a panicking callback, an item rescheduled to the interrupted
/// advance's clock comes out after the items due earlier that the panic held back.
#[test]
fn after_a_panicking_callback_earlier_items_still_come_out_first() {
    let mut w = TimingWheel::new(1, 4, 0).unwrap();
    for d in [2u64, 5, 6] {
        w.insert(d, d).unwrap();
    }
    let x = w.insert(100, 7).unwrap();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        w.advance(7, |d| assert_ne!(d, 2, "boom"))
    }));
    assert!(r.is_err());
    w.check();
    assert_eq!(w.now(), 7);
    assert!(w.reschedule(x, 7));
    let mut seen = Vec::new();
    w.advance(7, |d| seen.push(d));
    assert_eq!(seen, [5, 6, 7]);
    w.check();
}

#[test]
fn cancel_heavy_load_keeps_few_stale_records() {
    let mut w = TimingWheel::new(1, 64, 0).unwrap();
    let mut last = None;
    for i in 0..100_000u64 {
        // All into one far bucket, each cancelled right after the next insert (not the last
        // record, so it goes stale), checked every so often.
        let id = w.insert(1_000_000 + (i % 7), i).unwrap();
        if let Some(prev) = last.replace(id) {
            assert_eq!(w.cancel(prev), Some(i - 1));
        }
        if i % 9_999 == 0 {
            w.check();
        }
    }
    w.check();
    let records: usize = all_records(&w);
    assert!(
        records <= 1 + COMPACT_MIN as usize + SETTLE_BATCH,
        "{records} records for 1 live entry: stale ones are compacted away (once settled)"
    );
    w.advance(1, |_| {}); // settles
    let records: usize = all_records(&w);
    assert!(
        records <= 1 + COMPACT_MIN as usize,
        "{records} records for 1 live entry after a settle"
    );
}

#[test]
fn compaction_keeps_every_live_entry_and_its_order_of_firing() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut w = TimingWheel::new(1, 64, 0).unwrap();
    // One far bucket of many entries; cancel and reschedule (within the bucket and out of it) at
    // random, so compactions run over records whose slots were reused by later inserts.
    let mut live: Vec<(TimerId, u64)> = Vec::new();
    let mut swept = 0;
    for i in 0..20_000u64 {
        let before = all_records(&w);
        match rng.below(5) {
            0 | 1 => {
                let due = 1_000_000 + rng.below(4_000);
                live.push((w.insert(due, due).unwrap(), due));
            }
            2 | 3 if !live.is_empty() => {
                let (id, due) = live.swap_remove(rng.below(live.len() as u64) as usize);
                assert_eq!(w.cancel(id), Some(due));
            }
            _ if !live.is_empty() => {
                let k = rng.below(live.len() as u64) as usize;
                let due = 1_000_000 + rng.below(300_000);
                assert!(w.reschedule(live[k].0, due));
                *w.get_mut(live[k].0).unwrap() = due;
                live[k].1 = due;
            }
            _ => {}
        }
        swept += usize::from(all_records(&w) + 1 < before);
        if i % 97 == 0 {
            w.check();
        }
    }
    w.check();
    assert!(
        swept > 10,
        "compaction ran {swept} times: the test did not exercise it"
    );
    let mut fired = Vec::new();
    while let Some(t) = w.next_expiration() {
        w.advance(t, |d| {
            assert!(d <= t, "{d} fired at {t}");
            fired.push(d);
        });
        w.check();
    }
    let mut want: Vec<u64> = live.iter().map(|&(_, d)| d).collect();
    want.sort_unstable();
    assert_eq!(
        fired, want,
        "every live entry fires once, in deadline order"
    );
}

/// 100k entries in one far bucket, then all cancelled newest first but the one kept (the newest
/// if `keep_newest`, else the oldest): the bucket must give the burst's memory back.
fn cancel_a_burst_but_one(keep_newest: bool) -> TimingWheel<u64> {
    let mut w = TimingWheel::new(1, 64, 0).unwrap();
    let ids: Vec<_> = (0..100_000u64)
        .map(|i| w.insert(1_000_000 + (i % 7), i).unwrap())
        .collect();
    let peak = w.heap_bytes();
    let cancelled = if keep_newest {
        0..ids.len() - 1
    } else {
        1..ids.len()
    };
    for i in cancelled.rev() {
        assert_eq!(w.cancel(ids[i]), Some(i as u64));
    }
    w.check();
    let capacity: usize = w
        .levels
        .iter()
        .flat_map(|l| l.iter())
        .map(|b| b.recs.capacity())
        .sum();
    assert!(
        capacity <= RETAINED_CAPACITY,
        "the bucket kept {capacity} record slots for 1 record"
    );
    assert!(w.heap_bytes() < peak);
    w
}

#[test]
fn a_cancelled_burst_gives_its_bucket_memory_back() {
    // The newest record stays last, so every cancel counts its record stale: compactions shrink.
    let mut w = cancel_a_burst_but_one(true);
    let mut fired = Vec::new();
    w.advance(1_000_010, |i| fired.push(i));
    assert_eq!(fired, [99_999]);
}

#[test]
fn cancelling_newest_first_gives_the_bucket_memory_back_too() {
    // Each cancel finds its record last, so it is popped and never counted stale: the shrink must
    // not wait for a compaction.
    let mut w = cancel_a_burst_but_one(false);
    let mut fired = Vec::new();
    w.advance(1_000_010, |i| fired.push(i));
    assert_eq!(fired, [0]);
}

/// Records in all buckets, live and stale.
fn all_records<T>(w: &TimingWheel<T>) -> usize {
    w.levels
        .iter()
        .flat_map(|l| l.iter())
        .map(|b| b.recs.len())
        .sum()
}

#[test]
fn a_panicking_callback_over_buckets_with_stale_records_loses_nothing() {
    let mut rng = Rng(0x0123_4567_89AB_CDEF);
    let mut w = TimingWheel::new(1, 8, 0).unwrap();
    let mut live = Vec::new();
    for i in 0..2_000u64 {
        let due = 1 + rng.below(3_000);
        live.push((w.insert(due, i).unwrap(), i));
    }
    // Cancel two thirds, scattered, so many buckets hold stale records, most below the compaction
    // bar (it takes more than two per live one, and at least 16).
    let mut kept = Vec::new();
    for (k, (id, i)) in live.into_iter().enumerate() {
        if k % 3 == 0 {
            kept.push(i);
        } else {
            assert_eq!(w.cancel(id), Some(i));
        }
    }
    w.check();
    let mut fired = Vec::new();
    let mut calls = 0;
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        w.advance(1_500, |i| {
            calls += 1;
            assert!(calls != 40, "boom");
            fired.push(i);
        })
    }));
    assert!(r.is_err());
    w.check();
    w.advance(3_000, |i| fired.push(i));
    w.check();
    assert!(w.is_empty());
    fired.sort_unstable();
    kept.sort_unstable();
    // The item whose callback panicked was consumed by it; every other one fired exactly once.
    assert_eq!(fired.len() + 1, kept.len());
    assert!(fired.iter().all(|i| kept.binary_search(i).is_ok()));
    let mut dedup = fired.clone();
    dedup.dedup();
    assert_eq!(dedup, fired, "an item fired twice");
}

/// The check of the check: a live record marked stale breaks an invariant `check` sees.
#[test]
#[should_panic(expected = "is marked")]
fn check_sees_a_live_record_marked_stale() {
    let mut w = TimingWheel::new(1, 64, 0).unwrap();
    for _ in 0..3 {
        w.insert(100, ()).unwrap(); // level 1, bucket 1 (100 / 64)
    }
    w.check();
    w.levels[1][1].marks[0] |= 1;
    w.check();
}

/// A burst flushed from its bucket gives its marks back with its records (`RETAINED_CAPACITY`):
/// found by the review of the marks, when a flush dropped a burst's records and kept its marks
/// (a bucket later refilled a little, and emptied by cancels, held them on).
#[test]
fn a_flushed_burst_gives_its_marks_back_with_its_records() {
    let marks: fn(&TimingWheel<u64>) -> usize = |w| {
        w.levels
            .iter()
            .flat_map(|l| l.iter())
            .map(|b| b.marks.capacity())
            .sum()
    };
    let mut w = TimingWheel::new(1, 64, 0).unwrap();
    for round in 0..8u64 {
        let base = 64 * (round + 1); // a level-1 bucket each round
        let ids: Vec<_> = (0..10_000u64)
            .map(|i| w.insert(base + i % 64, i).unwrap())
            .collect();
        if round % 2 == 0 {
            w.cancel(ids[10]); // the flush's path over marks
        }
        w.advance(base + 63, |_| {});
        w.check();
    }
    assert!(
        marks(&w) <= 8 * RETAINED_CAPACITY.div_ceil(64),
        "{} mark words kept after the flushes",
        marks(&w)
    );
}
