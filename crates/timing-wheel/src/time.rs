//! Pure time arithmetic: caller units to ticks, and which level and bucket a deadline belongs in.
//!
//! Everything here is a total function on `u64`: no overflow, no panic, for every input. The wheel
//! calls nothing else to decide where an entry lives, so these tables are the whole placement rule.

/// The tick a deadline is due at: `ceil(deadline / tick)`.
///
/// Rounding *up* is what makes the wheel never fire early: an entry placed at tick `k` is handed
/// out once `now >= k * tick >= deadline`.
#[inline]
pub(crate) fn due_tick(deadline: u64, tick: u64) -> u64 {
    deadline / tick + u64::from(!deadline.is_multiple_of(tick))
}

/// The tick `now` has reached: `floor(now / tick)`, except that `u64::MAX` reaches every tick.
///
/// The exception is the saturation rule: a deadline whose rounded-up value would not fit in a
/// `u64` is due at `u64::MAX`, the end of time.
#[inline]
pub(crate) fn reached_tick(now: u64, tick: u64) -> u64 {
    if now == u64::MAX {
        u64::MAX
    } else {
        now / tick
    }
}

/// The caller-unit time at which tick `t` is reached (`t * tick`, saturating at `u64::MAX`).
#[inline]
pub(crate) fn tick_to_time(t: u64, tick: u64) -> u64 {
    t.saturating_mul(tick)
}

/// The level an entry due at tick `due` lives on while the wheel's clock is at tick `cur`.
///
/// Level `k` buckets are `2^(bits*k)` ticks wide. An entry lives on the level of the highest digit
/// (in base `2^bits`) in which `due` and `cur` differ; digits above that are shared, so the entry
/// lies inside the clock's current level-`k+1` bucket and needs no coarser level. Requires
/// `due > cur`.
#[inline]
pub(crate) fn level_for(cur: u64, due: u64, bits: u32) -> u32 {
    debug_assert!(due > cur, "level_for({cur}, {due}): entry is already due");
    // The `| mask` keeps level 0 for everything within the clock's current level-0 span.
    let mask = (1u64 << bits) - 1;
    let significant = 63 - ((cur ^ due) | mask).leading_zeros();
    // `significant / bits`, without a division on the hot path of every insert and cascade.
    (significant * RECIPROCALS[(bits & 31) as usize]) >> 16
}

/// `ceil(2^16 / b)` for every width `b` below 32 (entry 0 unused): `n * RECIPROCALS[b] >> 16 ==
/// n / b` for every bit index `n < 64` (checked for all of them by a test).
const RECIPROCALS: [u32; 32] = {
    let mut table = [0; 32];
    let mut b = 1;
    while b < 32 {
        table[b] = (1_u32 << 16).div_ceil(b as u32);
        b += 1;
    }
    table
};

/// Index of the bucket holding tick `due` on `level`.
#[inline]
pub(crate) fn slot_for(due: u64, level: u32, bits: u32) -> u32 {
    let mask = (1u64 << bits) - 1;
    ((due >> (level * bits)) & mask) as u32
}

/// First tick covered by the `level` bucket that holds tick `due`: the bucket's expiration.
#[inline]
pub(crate) fn bucket_start(due: u64, level: u32, bits: u32) -> u64 {
    due & !bucket_span_mask(level, bits)
}

/// `width - 1` for a bucket on `level`, where `width = 2^(bits*level)`.
#[inline]
pub(crate) fn bucket_span_mask(level: u32, bits: u32) -> u64 {
    let shift = level * bits;
    if shift >= 64 {
        u64::MAX
    } else {
        (1u64 << shift) - 1
    }
}

/// Number of levels needed to cover every `u64` tick with `2^bits` buckets per level.
#[inline]
pub(crate) fn max_levels(bits: u32) -> u32 {
    64u32.div_ceil(bits)
}

#[cfg(test)]
mod tests {
    use super::*;

    const M: u64 = u64::MAX;

    #[test]
    fn due_tick_rounds_up() {
        // (deadline, tick, due tick)
        let table = [
            (0, 1, 0),
            (1, 1, 1),
            (M, 1, M),
            (0, 10, 0),
            (1, 10, 1),
            (10, 10, 1),
            (11, 10, 2),
            (M, 10, M / 10 + 1),
            (M, M, 1),
            (M - 1, M, 1),
            (5, M, 1),
        ];
        for (deadline, tick, want) in table {
            assert_eq!(
                due_tick(deadline, tick),
                want,
                "due_tick({deadline}, {tick})"
            );
        }
    }

    #[test]
    fn reached_tick_rounds_down_and_saturates() {
        let table = [
            (0, 1, 0),
            (9, 10, 0),
            (10, 10, 1),
            (M - 1, 10, (M - 1) / 10),
            (M, 10, M),
            (M, 1, M),
        ];
        for (now, tick, want) in table {
            assert_eq!(reached_tick(now, tick), want, "reached_tick({now}, {tick})");
        }
    }

    #[test]
    fn a_deadline_is_reached_exactly_when_now_passes_it_rounded_up() {
        for tick in [1u64, 3, 7, 10, 1000, M / 2, M] {
            for deadline in [0u64, 1, 2, 9, 10, 11, 999, 1000, 1001, M / 3, M - 1, M] {
                let rounded = due_tick(deadline, tick).checked_mul(tick).unwrap_or(M);
                assert!(rounded >= deadline);
                for now in [
                    rounded.saturating_sub(1),
                    rounded,
                    rounded.saturating_add(1),
                    M,
                ] {
                    let fired = reached_tick(now, tick) >= due_tick(deadline, tick);
                    assert_eq!(
                        fired,
                        now >= rounded,
                        "deadline {deadline} tick {tick} now {now}"
                    );
                }
            }
        }
    }

    #[test]
    fn tick_to_time_saturates() {
        assert_eq!(tick_to_time(3, 10), 30);
        assert_eq!(tick_to_time(M / 10 + 1, 10), M);
        assert_eq!(tick_to_time(M, 1), M);
    }

    #[test]
    fn level_for_table() {
        // bits = 6: 64 buckets per level, as tokio and the design brief.
        // (cur, due, level)
        let table = [
            (0, 1, 0),
            (0, 63, 0),
            (0, 64, 1),
            (0, 4095, 1),
            (0, 4096, 2),
            (0, 262_143, 2),
            (0, 262_144, 3),
            (0, 1 << 60, 10),
            (0, M, 10),
            (63, 64, 1), // crossing a level-0 boundary needs level 1, even one tick ahead
            (64, 127, 0), // same level-1 bucket as the clock
            (4095, 4096, 2),
            (M - 1, M, 0),
            (1 << 63, M, 10),
        ];
        for (cur, due, want) in table {
            assert_eq!(level_for(cur, due, 6), want, "level_for({cur}, {due}, 6)");
        }
    }

    #[test]
    fn the_reciprocals_divide_every_bit_index_exactly() {
        for b in 1..32u32 {
            for n in 0..64u32 {
                assert_eq!((n * RECIPROCALS[b as usize]) >> 16, n / b, "{n} / {b}");
            }
        }
    }

    #[test]
    fn level_for_other_widths() {
        assert_eq!(level_for(0, 1, 1), 0);
        assert_eq!(level_for(0, 2, 1), 1);
        assert_eq!(level_for(0, M, 1), 63);
        assert_eq!(level_for(0, M, 16), 3);
        assert_eq!(level_for(0, M, 5), 12); // 13 levels of 5 bits cover 65 bits
        assert_eq!(max_levels(1), 64);
        assert_eq!(max_levels(5), 13);
        assert_eq!(max_levels(6), 11);
        assert_eq!(max_levels(16), 4);
    }

    #[test]
    fn buckets_cover_their_ticks() {
        for bits in [1u32, 3, 6, 8, 16] {
            for (cur, due) in [
                (0u64, 1u64),
                (0, 100_000),
                (12_345, 9_999_999),
                (0, M),
                (M - 5, M),
                (1 << 40, 1 << 50),
            ] {
                let level = level_for(cur, due, bits);
                assert!(level < max_levels(bits));
                let start = bucket_start(due, level, bits);
                let last = start | bucket_span_mask(level, bits);
                assert!(
                    start <= due && due <= last,
                    "bits {bits} cur {cur} due {due}"
                );
                assert!(start > cur, "a bucket never starts at or before the clock");
                assert!(u64::from(slot_for(due, level, bits)) < 1 << bits);
            }
        }
    }

    #[test]
    fn span_mask() {
        assert_eq!(bucket_span_mask(0, 6), 0);
        assert_eq!(bucket_span_mask(1, 6), 63);
        assert_eq!(bucket_span_mask(10, 6), (1 << 60) - 1);
        assert_eq!(bucket_span_mask(11, 6), M);
    }
}
