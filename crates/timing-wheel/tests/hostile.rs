//! Hostile model-based tests: the wheel driven as a timer thread drives it (stepped advances to
//! each `next_expiration()`), interleaved with big jumps, inserts, cancels and reschedules (also
//! into the past), at every wheel size 2..=65536, against a BTreeMap model. Failures are
//! minimized (greedy op removal) and printed as a replayable call sequence.
//!
//! Env: HOSTILE_SEED, HOSTILE_CASES (per test), HOSTILE_OPS (max ops per case).

use std::collections::BTreeMap;
use std::fmt;
use std::panic::AssertUnwindSafe;

use tickwheel_wheel::{TimerId, TimingWheel};

mod support;

use support::{Boom, Pending, Rng, rounded, silence_boom};

#[derive(Clone, Copy, Debug)]
struct Cfg {
    tick: u64,
    size: usize,
    start: u64,
}

/// Concrete, replayable operations (items are numbered by insertion order of accepted inserts;
/// a refused insert consumes a number too).
#[derive(Clone, Copy)]
enum Op {
    Insert(u64),
    Cancel(u64),
    Reschedule(u64, u64),
    /// Timer-thread drive: advance to each next_expiration() < now, then to now.
    Stepped(u64),
    /// One advance.
    Jump(u64),
    /// One advance whose callback panics on its k-th item.
    Panicking(u64, usize),
    /// A stepped drive whose every advance's callback panics on its k-th item.
    SteppedPanicking(u64, usize),
}

impl fmt::Debug for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Op::Insert(d) => write!(f, "insert({d})"),
            Op::Cancel(i) => write!(f, "cancel(item#{i})"),
            Op::Reschedule(i, d) => write!(f, "reschedule(item#{i}, {d})"),
            Op::Stepped(n) => write!(f, "stepped_advance({n})"),
            Op::Jump(n) => write!(f, "advance({n})"),
            Op::Panicking(n, k) => write!(f, "advance({n}) panicking at {k}th item"),
            Op::SteppedPanicking(n, k) => write!(
                f,
                "stepped_advance({n}) each advance panicking at {k}th item"
            ),
        }
    }
}

macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(format!($($fmt)+));
        }
    };
}

struct Harness {
    tick: u64,
    w: TimingWheel<u64>,
    model: BTreeMap<u64, Pending>,
    ids: BTreeMap<u64, TimerId>,
    next_item: u64,
    advances: u64,
}

impl Harness {
    fn new(cfg: Cfg) -> Self {
        Harness {
            tick: cfg.tick,
            w: TimingWheel::new(cfg.tick, cfg.size, cfg.start).unwrap(),
            model: BTreeMap::new(),
            ids: BTreeMap::new(),
            next_item: 0,
            advances: 0,
        }
    }

    /// One checked `advance(to)`.
    fn advance(&mut self, to: u64, panic_at: Option<usize>, ctx: &str) -> Result<(), String> {
        self.advances += 1;
        let tick = self.tick;
        let before = self.w.now();
        let reached = before.max(to);
        let mut fired: Vec<u64> = Vec::new();
        let w = &mut self.w;
        let panicked = std::panic::catch_unwind(AssertUnwindSafe(|| {
            w.advance(to, |item| {
                fired.push(item);
                if panic_at == Some(fired.len() - 1) {
                    std::panic::panic_any(Boom);
                }
            })
        }))
        .is_err();
        ensure!(
            self.w.now() == reached,
            "{ctx}: clock {} after advance({to}) from {before}",
            self.w.now()
        );
        let mut want: Vec<u64> = self
            .model
            .iter()
            .filter(|(_, p)| p.forced || rounded(p.deadline, tick) <= reached)
            .map(|(&i, _)| i)
            .collect();
        want.sort_unstable();
        ensure!(
            panicked == panic_at.is_some_and(|k| k < want.len()),
            "{ctx}: advance({to}) panicked={panicked}, {} due, panic_at {panic_at:?}",
            want.len()
        );
        // Every fired item: pending in the model, due, exactly once, nondecreasing rounded order.
        let mut seen = std::collections::BTreeSet::new();
        let mut prev = 0u64;
        for &item in &fired {
            ensure!(
                seen.insert(item),
                "{ctx}: advance({to}) fired item#{item} twice: {fired:?}"
            );
            let Some(p) = self.model.get(&item).copied() else {
                return Err(format!(
                    "{ctx}: advance({before}->{to}) fired item#{item} which is not pending (already fired/cancelled)"
                ));
            };
            let r = rounded(p.deadline, tick);
            ensure!(
                p.forced || r <= reached,
                "{ctx}: advance({before}->{to}) fired item#{item} EARLY: deadline {} rounded {r} > now {reached}",
                p.deadline
            );
            // forced items count as due "now": compare by their own rounded deadline
            ensure!(
                r >= prev,
                "{ctx}: advance({before}->{to}) out of order: {fired:?} (rounded {r} after {prev})"
            );
            prev = r;
        }
        if panicked {
            let k = panic_at.unwrap();
            ensure!(
                fired.len() == k + 1,
                "{ctx}: panicked but fired {}",
                fired.len()
            );
            // fired must be the k+1 earliest of want (by rounded deadline, ties free)
            let r = |i: &u64| rounded(self.model[i].deadline, tick);
            let last = fired.iter().map(r).max().unwrap_or(0);
            ensure!(
                want.iter().all(|j| fired.contains(j) || r(j) >= last),
                "{ctx}: panicking advance skipped an earlier item: fired {fired:?} want {want:?}"
            );
            for it in &fired {
                self.model.remove(it);
            }
            for j in &want {
                if let Some(p) = self.model.get_mut(j) {
                    p.forced = true;
                    p.stale_id = true;
                }
            }
        } else {
            let mut got = fired.clone();
            got.sort_unstable();
            if got != want {
                let missing: Vec<_> = want
                    .iter()
                    .filter(|i| !got.contains(i))
                    .map(|i| (i, self.model[i]))
                    .collect();
                return Err(format!(
                    "{ctx}: advance({before}->{to}) fired {fired:?}; model wants {want:?}; LATE/LOST (not fired but due): {missing:?}"
                ));
            }
            for it in &fired {
                self.model.remove(it);
            }
        }
        self.check_state(ctx)
    }

    fn check_state(&self, ctx: &str) -> Result<(), String> {
        let tick = self.tick;
        ensure!(
            self.w.len() == self.model.len(),
            "{ctx}: len {} != model {}",
            self.w.len(),
            self.model.len()
        );
        let now = self.w.now();
        match self.w.next_expiration() {
            None => ensure!(
                self.model.is_empty(),
                "{ctx}: next_expiration None with {} pending",
                self.model.len()
            ),
            Some(t) => {
                ensure!(
                    !self.model.is_empty(),
                    "{ctx}: next_expiration {t} on empty wheel"
                );
                if self.model.values().any(|p| p.forced) {
                    ensure!(
                        t <= now,
                        "{ctx}: overdue item pending but next_expiration {t} > now {now}"
                    );
                } else {
                    let (ei, ep) = self
                        .model
                        .iter()
                        .min_by_key(|(_, p)| rounded(p.deadline, tick))
                        .unwrap();
                    let earliest = rounded(ep.deadline, tick);
                    ensure!(
                        t > now,
                        "{ctx}: next_expiration {t} not after now {now} (nothing overdue)"
                    );
                    ensure!(
                        t <= earliest,
                        "{ctx}: next_expiration {t} LATER than earliest pending item#{ei} deadline {} rounded {earliest}",
                        ep.deadline
                    );
                }
            }
        }
        Ok(())
    }

    fn apply(&mut self, op: Op, step: usize) -> Result<(), String> {
        let ctx = format!("op {step} {op:?}");
        let now = self.w.now();
        match op {
            Op::Insert(d) => {
                let item = self.next_item;
                self.next_item += 1;
                match self.w.insert(d, item) {
                    Ok(id) => {
                        ensure!(d > now, "{ctx}: accepted deadline {d} <= now {now}");
                        self.ids.insert(item, id);
                        self.model.insert(
                            item,
                            Pending {
                                deadline: d,
                                forced: false,
                                stale_id: false,
                            },
                        );
                    }
                    Err(e) => {
                        ensure!(d <= now, "{ctx}: refused deadline {d} > now {now}");
                        ensure!(e.into_item() == item, "{ctx}: wrong item back");
                    }
                }
                self.check_state(&ctx)
            }
            Op::Cancel(item) => {
                if let Some(&id) = self.ids.get(&item) {
                    let got = self.w.cancel(id);
                    let want = match self.model.get(&item) {
                        Some(p) if !p.stale_id => {
                            self.model.remove(&item);
                            Some(item)
                        }
                        _ => None,
                    };
                    ensure!(got == want, "{ctx}: cancel gave {got:?}, model {want:?}");
                    ensure!(
                        self.w.cancel(id).is_none(),
                        "{ctx}: second cancel returned the item again"
                    );
                }
                self.check_state(&ctx)
            }
            Op::Reschedule(item, d) => {
                if let Some(&id) = self.ids.get(&item) {
                    let got = self.w.reschedule(id, d);
                    let want = self.model.get(&item).is_some_and(|p| !p.stale_id);
                    ensure!(got == want, "{ctx}: reschedule gave {got}, model {want}");
                    if want {
                        self.model.insert(
                            item,
                            Pending {
                                deadline: d,
                                forced: d <= now,
                                stale_id: false,
                            },
                        );
                    }
                }
                self.check_state(&ctx)
            }
            Op::Jump(to) => self.advance(to, None, &ctx),
            Op::Panicking(to, k) => self.advance(to, Some(k), &ctx),
            Op::Stepped(_) | Op::SteppedPanicking(..) => {
                let (to, pk) = match op {
                    Op::Stepped(t) => (t, None),
                    Op::SteppedPanicking(t, k) => (t, Some(k)),
                    _ => unreachable!(),
                };
                let mut guard = 0u32;
                while let Some(t) = self.w.next_expiration().filter(|&t| t < to) {
                    guard += 1;
                    ensure!(
                        guard < 200_000,
                        "{ctx}: stepped drive does not terminate (next_expiration {t}, now {})",
                        self.w.now()
                    );
                    let before_len = self.w.len();
                    let before_now = self.w.now();
                    self.advance(t, pk, &format!("{ctx} / inner advance({t})"))?;
                    // progress: either the clock moved or something came out
                    ensure!(
                        self.w.now() > before_now
                            || self.w.len() < before_len
                            || self.w.next_expiration() != Some(t),
                        "{ctx}: stepped drive stuck at next_expiration {t}"
                    );
                }
                self.advance(to, pk, &ctx)
            }
        }
    }
}

fn run(cfg: Cfg, ops: &[Op]) -> Result<(), String> {
    silence_boom();
    let mut h = Harness::new(cfg);
    for (i, &op) in ops.iter().enumerate() {
        h.apply(op, i)?;
    }
    // final: get() agrees, then drive to the end of time stepped, everything must come out.
    for (item, id) in &h.ids {
        let want = h.model.get(item).filter(|p| !p.stale_id).map(|_| *item);
        ensure!(
            h.w.get(*id).copied() == want,
            "final get(item#{item}) = {:?}, model {want:?}",
            h.w.get(*id)
        );
    }
    let n = ops.len();
    h.apply(Op::Stepped(u64::MAX), n)?;
    ensure!(
        h.w.is_empty() && h.model.is_empty(),
        "not empty at u64::MAX"
    );
    Ok(())
}

/// Same as `run`, but ending with drain instead of a drive to the end.
fn run_drain(cfg: Cfg, ops: &[Op]) -> Result<(), String> {
    silence_boom();
    let mut h = Harness::new(cfg);
    for (i, &op) in ops.iter().enumerate() {
        h.apply(op, i)?;
    }
    let drained = h.w.drain();
    let mut s = drained.clone();
    s.sort_unstable();
    let want: Vec<u64> = h.model.keys().copied().collect();
    ensure!(s == want, "drain gave {drained:?}, model {want:?}");
    // Every item in order of its own rounded deadline, those rescheduled into the past or left
    // by a panicking callback ("forced") too: their stored ticks are clamped to the clock, and
    // drain once ordered them by slot (review of 2026-11-27).
    let order: Vec<u64> = drained
        .iter()
        .map(|i| rounded(h.model[i].deadline, h.tick))
        .collect();
    ensure!(
        order.windows(2).all(|w| w[0] <= w[1]),
        "drain out of deadline order: {drained:?}"
    );
    ensure!(
        h.w.is_empty() && h.w.next_expiration().is_none(),
        "not empty after drain"
    );
    Ok(())
}

fn both(cfg: Cfg, ops: &[Op]) -> Result<(), String> {
    run_drain(cfg, ops)?;
    run(cfg, ops)
}

fn minimize(cfg: Cfg, mut ops: Vec<Op>) -> (Vec<Op>, String) {
    let mut err = both(cfg, &ops).unwrap_err();
    // truncate after failing op
    let mut chunk = ops.len() / 2;
    while chunk >= 1 {
        let mut i = 0;
        while i + chunk <= ops.len() {
            let mut cand = ops.clone();
            cand.drain(i..i + chunk);
            if let Err(e) = both(cfg, &cand) {
                ops = cand;
                err = e;
            } else {
                i += chunk;
            }
        }
        chunk /= 2;
    }
    (ops, err)
}

fn report(cfg: Cfg, ops: Vec<Op>, seed: u64, case: u64) -> ! {
    let (min, err) = minimize(cfg, ops);
    let mut s = format!(
        "FAIL seed {seed:#x} case {case}\n  TimingWheel::new(tick={}, size={}, start={})\n",
        cfg.tick, cfg.size, cfg.start
    );
    for op in &min {
        s += &format!("  {op:?}\n");
    }
    s += &format!("  error: {err}\n");
    panic!("{s}");
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A deadline relative to the wheel's view of `now` (the generator tracks an approximate clock).
fn gen_deadline(r: &mut Rng, now: u64, cfg: Cfg, known: &[u64]) -> u64 {
    let tick = cfg.tick;
    let bits = cfg.size.trailing_zeros();
    let cur = if now == u64::MAX {
        u64::MAX
    } else {
        now / tick
    };
    match r.below(20) {
        0..=3 => now.saturating_add(1 + r.below(3 * tick + 2)),
        4..=8 => now.saturating_add(r.next() >> r.below(64)),
        9 => now,
        10 => now.saturating_sub(r.below(3 * tick + 1)),
        11 => u64::MAX - r.below(3),
        12 => u64::MAX - r.below(3 * tick + 2000),
        13 if !known.is_empty() => r.pick(known),
        _ => {
            // A bucket edge: level L, j buckets ahead of the clock's, +/- a little.
            let max_l = 64u32.div_ceil(bits);
            let l = r.below(u64::from(max_l)) as u32;
            let shift = l * bits;
            if shift >= 64 {
                return u64::MAX - r.below(2);
            }
            let base = (cur >> shift)
                .wrapping_add(r.below(4))
                .checked_shl(shift)
                .unwrap_or(u64::MAX);
            let delta = r.below(5) as i64 - 2;
            let t = (base as i128 + delta as i128).clamp(0, u64::MAX as i128) as u64;
            let d = (t as u128 * tick as u128).min(u64::MAX as u128) as u64;
            let off = r.below(tick);
            d.saturating_sub(off)
        }
    }
}

fn gen_case(r: &mut Rng, max_ops: u64) -> (Cfg, Vec<Op>) {
    let bits = 1 + r.below(16) as u32;
    let any = 1 + r.below(1000);
    let tick = r.pick(&[1, 1, 1, 2, 3, 7, 10, 1000, any]);
    let start = match r.below(6) {
        0 => 0,
        1 => r.below(1000),
        2 => u64::MAX - r.below(1 << 24),
        3 => u64::MAX - r.below(1 << 44),
        4 => r.next(),
        _ => r.below(1 << 40),
    };
    let cfg = Cfg {
        tick,
        size: 1 << bits,
        start,
    };
    let n = 1 + r.below(max_ops);
    let mut ops = Vec::new();
    let mut now = start;
    let mut items = 0u64;
    let mut known = Vec::new();
    for _ in 0..n {
        let op = match r.below(20) {
            0..=6 => {
                let d = gen_deadline(r, now, cfg, &known);
                known.push(d);
                items += 1;
                Op::Insert(d)
            }
            7..=8 => Op::Cancel(r.below(items + 1)),
            9..=11 => {
                let d = gen_deadline(r, now, cfg, &known);
                known.push(d);
                Op::Reschedule(r.below(items + 1), d)
            }
            k => {
                let to = if r.below(4) == 0 {
                    now.saturating_sub(r.below(1 << 10)) // backwards / same
                } else {
                    let d = gen_deadline(r, now, cfg, &known);
                    if r.below(3) == 0 {
                        d.saturating_sub(r.below(2))
                    } else {
                        d
                    }
                };
                now = now.max(to);
                match k {
                    12..=15 => Op::Stepped(to),
                    16..=17 => Op::Jump(to),
                    18 => Op::SteppedPanicking(to, r.below(4) as usize),
                    _ => Op::Panicking(to, r.below(4) as usize),
                }
            }
        };
        ops.push(op);
    }
    (cfg, ops)
}

#[test]
fn hostile_random_stepped_and_jumps() {
    let seed = env_u64("HOSTILE_SEED", 0xBAD_C0FFEE);
    let cases = env_u64("HOSTILE_CASES", 3000);
    let max_ops = env_u64("HOSTILE_OPS", 120);
    let mut r = Rng::new(seed);
    for case in 0..cases {
        let (cfg, ops) = gen_case(&mut r, max_ops);
        if both(cfg, &ops).is_err() {
            report(cfg, ops, seed, case);
        }
    }
}

/// Targeted at change 1 and 3: put entries on both sides of an advance target inside one bucket
/// of level L >= 1 (incl. the last digit of a level, wrapping into the next higher bucket), plus
/// entries in the neighbouring buckets and the level above, then advance (jump or stepped) into
/// the bucket, and drive on.
#[test]
fn hostile_targets_inside_a_bucket() {
    let seed = env_u64("HOSTILE_SEED", 0xBAD_C0FFEE) ^ 0x1234;
    let cases = env_u64("HOSTILE_CASES", 3000) * 2;
    let mut r = Rng::new(seed);
    for case in 0..cases {
        let bits = 1 + r.below(16) as u32;
        let any = 1 + r.below(1000);
        let tick = r.pick(&[1, 1, 2, 3, 10, 1000, any]);
        let max_l = 64u32.div_ceil(bits);
        let level = 1 + r.below(u64::from(max_l - 1).min(3)) as u32; // 1..=3 mostly
        let level = if r.below(5) == 0 {
            1 + r.below(u64::from(max_l - 1)) as u32
        } else {
            level
        };
        let shift = level * bits;
        if shift >= 64 {
            continue;
        }
        let mask = (1u64 << bits) - 1;
        // Start tick: random high digits; the digit at `level` is either random or mask-1, so the
        // next bucket is the last digit of the level.
        let hi = match r.below(3) {
            0 => 0,
            1 => r.below(1 << 20),
            _ => r.next(),
        };
        let mut cur0 = hi;
        if r.below(2) == 0 {
            // digit `level` = mask - 1 (or mask with bits=1 -> 0), so the target bucket is the last
            let d = mask.saturating_sub(1);
            cur0 = (cur0 & !(mask << shift)) | (d << shift);
        }
        // low digits of cur0 random
        cur0 = (cur0 & !((1u64 << shift) - 1)) | (r.next() & ((1u64 << shift) - 1));
        // avoid the top where (bucket+1) overflows
        let width = 1u64 << shift;
        let bstart = match ((cur0 >> shift) + 1).checked_mul(width) {
            Some(b)
                if width
                    .checked_mul(3)
                    .and_then(|w3| b.checked_add(w3))
                    .is_some() =>
            {
                b
            }
            _ => continue,
        };
        let start_time = match cur0
            .checked_mul(tick)
            .and_then(|t| t.checked_add(r.below(tick)))
        {
            Some(t) => t,
            None => continue,
        };
        let cfg = Cfg {
            tick,
            size: 1 << bits,
            start: start_time,
        };
        let to_time = |t: u64| (t as u128 * tick as u128).min(u64::MAX as u128) as u64;
        let mut ops = Vec::new();
        let in_bucket = |r: &mut Rng, b: u64| b + r.below(width);
        // entries in the bucket at `level` right after the clock's, both sides of the target
        let target_tick = in_bucket(&mut r, bstart);
        for _ in 0..(1 + r.below(12)) {
            let t = match r.below(6) {
                0 => target_tick,
                1 => target_tick + 1,
                2 => target_tick.saturating_sub(1).max(bstart),
                3 => bstart,
                4 => bstart + width - 1,
                _ => in_bucket(&mut r, bstart),
            };
            let d = to_time(t).saturating_sub(r.below(tick));
            ops.push(Op::Insert(d));
        }
        // neighbours: the next bucket(s) on this level, the previous one (if past clock), the
        // level above, and finer levels before the bucket
        for _ in 0..r.below(6) {
            let t = match r.below(5) {
                0 => in_bucket(&mut r, bstart + width),
                1 => bstart + width,
                2 => in_bucket(&mut r, bstart + 2 * width),
                3 => bstart.saturating_sub(1 + r.below(width)).max(cur0 + 1),
                _ => (bstart + width).saturating_add(r.next() >> r.below(64)),
            };
            ops.push(Op::Insert(to_time(t).saturating_sub(r.below(tick))));
        }
        // some cancels/reschedules before
        let n_items = ops.len() as u64;
        for _ in 0..r.below(3) {
            match r.below(3) {
                0 => ops.push(Op::Cancel(r.below(n_items))),
                _ => ops.push(Op::Reschedule(
                    r.below(n_items),
                    to_time(in_bucket(&mut r, bstart)),
                )),
            }
        }
        let to = to_time(target_tick) + r.below(tick).min(u64::MAX - to_time(target_tick));
        ops.push(match r.below(3) {
            0 => Op::Jump(to),
            1 => Op::Stepped(to),
            _ => Op::Panicking(to, r.below(3) as usize),
        });
        // after: more ops in the bucket and further
        for _ in 0..r.below(6) {
            let t = match r.below(3) {
                0 => target_tick + 1 + r.below(width),
                1 => in_bucket(&mut r, bstart + width),
                _ => target_tick + r.below(3),
            };
            ops.push(match r.below(4) {
                0 => Op::Reschedule(r.below(n_items), to_time(t)),
                1 => Op::Jump(to_time(t)),
                2 => Op::Stepped(to_time(t)),
                _ => Op::Insert(to_time(t)),
            });
        }
        if both(cfg, &ops).is_err() {
            report(cfg, ops, seed, case);
        }
    }
}

/// Fixed edge cases: size 2 and 65536, deadlines at u64::MAX and u64::MAX - 1 with tick > 1.
#[test]
fn hostile_edges_near_max() {
    for bits in [1u32, 2, 3, 5, 6, 7, 16] {
        for tick in [1u64, 2, 3, 7, 10, 999, 1000] {
            for start in [
                0u64,
                u64::MAX - 5000,
                u64::MAX - 2 * tick,
                u64::MAX / tick * tick - 1,
                u64::MAX - 1,
            ] {
                let cfg = Cfg {
                    tick,
                    size: 1 << bits,
                    start,
                };
                let ops = vec![
                    Op::Insert(u64::MAX),
                    Op::Insert(u64::MAX - 1),
                    Op::Insert(u64::MAX - tick),
                    Op::Insert(u64::MAX / tick * tick),
                    Op::Insert(start.saturating_add(1)),
                    Op::Stepped(u64::MAX - 2),
                    Op::Stepped(u64::MAX - 1),
                    Op::Insert(u64::MAX),
                    Op::Reschedule(4, u64::MAX),
                    Op::Stepped(u64::MAX),
                    Op::Reschedule(0, 5),
                    Op::Jump(u64::MAX),
                ];
                if both(cfg, &ops).is_err() {
                    report(cfg, ops, bits as u64, tick);
                }
                // jumps only
                let ops2: Vec<Op> = ops
                    .iter()
                    .map(|&o| match o {
                        Op::Stepped(n) => Op::Jump(n),
                        o => o,
                    })
                    .collect();
                if both(cfg, &ops2).is_err() {
                    report(cfg, ops2, bits as u64, tick);
                }
            }
        }
    }
}

/// A dense timer-thread workload: many items, stepped all the way, at the two extreme sizes.
#[test]
fn hostile_dense_stepped_drive() {
    let seed = env_u64("HOSTILE_SEED", 0xBAD_C0FFEE) ^ 0x77;
    let mut r = Rng::new(seed);
    let rounds = env_u64("HOSTILE_CASES", 3000) / 100 + 1;
    for case in 0..rounds {
        for bits in [1u32, 2, 4, 6, 8, 12, 16] {
            let tick = r.pick(&[1, 3, 1000]);
            let start = if case % 2 == 0 {
                r.below(1 << 30)
            } else {
                u64::MAX - r.below(1 << 40)
            };
            let cfg = Cfg {
                tick,
                size: 1 << bits,
                start,
            };
            let mut ops = Vec::new();
            let mut now = start;
            let mut items = 0;
            for _ in 0..400 {
                match r.below(10) {
                    0..=5 => {
                        let d = now.saturating_add(1 + (r.next() >> (r.below(64).max(20))));
                        ops.push(Op::Insert(d));
                        items += 1;
                    }
                    6 => ops.push(Op::Cancel(r.below(items + 1))),
                    7 => ops.push(Op::Reschedule(
                        r.below(items + 1),
                        now.saturating_add(r.next() >> 30)
                            .saturating_sub(r.below(5) * tick),
                    )),
                    _ => {
                        now = now.saturating_add(r.next() >> r.below(64).max(24));
                        ops.push(Op::Stepped(now));
                    }
                }
            }
            if both(cfg, &ops).is_err() {
                report(cfg, ops, seed, case);
            }
        }
    }
}

fn fire(w: &mut TimingWheel<u64>, now: u64) -> Vec<u64> {
    let mut v = Vec::new();
    w.advance(now, |i| v.push(i));
    v
}

#[test]
fn hostile_explicit_cases() {
    // Level-1 bucket 64..=127 with entries on both sides of the target 110 (size 64).
    let mut w = TimingWheel::new(1, 64, 0).unwrap();
    for d in [64u64, 100, 110, 111, 127, 128, 4095, 4096] {
        w.insert(d, d).unwrap();
    }
    assert_eq!(fire(&mut w, 110), [64, 100, 110]);
    assert_eq!(w.next_expiration(), Some(111));
    assert_eq!(fire(&mut w, 127), [111, 127]);
    assert_eq!(fire(&mut w, 4096), [128, 4095, 4096]);
    // Level-1 bucket at the last digit (4032..=4095), wrapping into the next level-2 bucket.
    let mut w = TimingWheel::new(1, 64, 4000).unwrap();
    for d in [4032u64, 4033, 4050, 4051, 4095, 4096, 4100, 8191, 8192] {
        w.insert(d, d).unwrap();
    }
    assert_eq!(fire(&mut w, 4050), [4032, 4033, 4050]);
    let mut got = Vec::new();
    while let Some(t) = w.next_expiration().filter(|&t| t < 9000) {
        assert!(t > w.now());
        got.extend(fire(&mut w, t));
    }
    assert_eq!(got, [4051, 4095, 4096, 4100, 8191, 8192]);
    // Size 2 and 65536, tick 10, deadlines at u64::MAX and u64::MAX - 1.
    for size in [2usize, 65536] {
        let mut w = TimingWheel::new(10, size, u64::MAX - 100).unwrap();
        w.insert(u64::MAX, 1).unwrap();
        w.insert(u64::MAX - 1, 2).unwrap();
        w.insert(u64::MAX - 10, 3).unwrap();
        let r3 = (u64::MAX - 10).div_ceil(10).saturating_mul(10);
        assert!(fire(&mut w, r3 - 1).is_empty());
        assert_eq!(fire(&mut w, r3), [3]);
        assert!(
            fire(&mut w, u64::MAX - 1).is_empty(),
            "MAX-1 rounds up past MAX: due only at MAX"
        );
        let mut out = fire(&mut w, u64::MAX);
        out.sort();
        assert_eq!(out, [1, 2]);
    }
    // Documented, but not "rounded up": a reschedule to a deadline <= now fires at the next
    // advance even when its rounded deadline is still ahead.
    let mut w = TimingWheel::new(10, 64, 15).unwrap();
    let id = w.insert(100, 7).unwrap();
    assert!(w.reschedule(id, 15));
    assert_eq!(
        fire(&mut w, 15),
        [7],
        "fires at now=15 though 15 rounds up to 20"
    );
}
