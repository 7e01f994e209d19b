//! Advances at the edges: where an advance may stop looking for due buckets (once the bucket it
//! collected reaches its target), and a prefetch hint or callback that panics at any point. A
//! seeded differential test against a `BTreeMap` model that also panics in `prefetch`, aims
//! targets at bucket edges of every level and runs at every wheel size 2..=65536; an exhaustive
//! sweep of small states; and explicit cases at each level's last tick. (From an adversarial
//! review of the early stop; a mutant that stops a tick early fails three of these.)
//!
//! Env: REVIEW_SEED, REVIEW_CASES.

use std::collections::{BTreeMap, BTreeSet};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Coverage counters: advances, items fired, panicking advances, advances firing 2+ items.
static COUNTS: [AtomicU64; 4] = [const { AtomicU64::new(0) }; 4];

use tickwheel_wheel::{TimerId, TimingWheel};

mod support;
use support::{Boom, Rng, rounded, silence_boom};

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[derive(Clone, Copy, Debug)]
struct P {
    deadline: u64,
    /// Due at the next advance whatever the target (rescheduled into the past, or held back).
    forced: bool,
}

#[derive(Clone, Copy, Debug)]
enum Panic {
    No,
    /// `f` panics when handed its k-th item.
    F(usize),
    /// `prefetch` panics at its k-th call.
    Hint(usize),
}

struct Sim {
    tick: u64,
    bits: u32,
    w: TimingWheel<u64>,
    model: BTreeMap<u64, P>,
    ids: BTreeMap<u64, TimerId>,
    next_item: u64,
    log: Vec<String>,
}

impl Sim {
    fn new(tick: u64, bits: u32, start: u64) -> Sim {
        Sim {
            tick,
            bits,
            w: TimingWheel::new(tick, 1 << bits, start).unwrap(),
            model: BTreeMap::new(),
            ids: BTreeMap::new(),
            next_item: 0,
            log: vec![format!(
                "new(tick {tick}, size {}, start {start})",
                1u64 << bits
            )],
        }
    }

    fn fail(&self, msg: String) -> ! {
        let tail: Vec<&String> = self.log.iter().rev().take(40).collect();
        panic!("{msg}\nlast ops (newest first): {tail:#?}");
    }

    fn insert(&mut self, d: u64) {
        let item = self.next_item;
        self.next_item += 1;
        self.log.push(format!("insert({d}) -> #{item}"));
        let now = self.w.now();
        match self.w.insert(d, item) {
            Ok(id) => {
                if d <= now {
                    self.fail(format!("insert {d} <= now {now} accepted"));
                }
                self.ids.insert(item, id);
                self.model.insert(
                    item,
                    P {
                        deadline: d,
                        forced: false,
                    },
                );
            }
            Err(_) if d <= now => {}
            Err(_) => self.fail(format!("insert {d} > now {now} refused")),
        }
    }

    fn cancel(&mut self, item: u64) {
        let Some(&id) = self.ids.get(&item) else {
            return;
        };
        self.log.push(format!("cancel(#{item})"));
        let got = self.w.cancel(id);
        let want = self.model.remove(&item).map(|_| item);
        self.ids.remove(&item);
        if got != want {
            self.fail(format!("cancel #{item}: {got:?}, model {want:?}"));
        }
    }

    fn reschedule(&mut self, item: u64, d: u64) {
        let Some(&id) = self.ids.get(&item) else {
            return;
        };
        self.log.push(format!("reschedule(#{item}, {d})"));
        let now = self.w.now();
        if !self.w.reschedule(id, d) {
            self.fail(format!("reschedule #{item} refused"));
        }
        self.model.insert(
            item,
            P {
                deadline: d,
                forced: d <= now,
            },
        );
    }

    /// The targets worth aiming at: bucket edges of every level around the earliest pending
    /// deadline and around the clock.
    fn edge(&self, r: &mut Rng) -> u64 {
        let base_tick = match self
            .model
            .values()
            .filter(|p| !p.forced)
            .map(|p| p.deadline)
            .min()
        {
            Some(d) if r.below(3) > 0 => d.div_ceil(self.tick),
            _ => self.w.now() / self.tick,
        };
        let levels = 64u32.div_ceil(self.bits);
        let level = r.below(u64::from(levels)) as u32;
        let shift = level * self.bits;
        let mask = if shift >= 64 {
            u64::MAX
        } else {
            (1u64 << shift) - 1
        };
        let t = match r.below(4) {
            0 => base_tick | mask,                      // last tick of its level-L bucket
            1 => (base_tick | mask).saturating_add(1),  // first tick of the next one
            2 => (base_tick & !mask).saturating_sub(1), // just before its bucket
            _ => base_tick,
        };
        let t = t.saturating_mul(self.tick);
        match r.below(3) {
            0 => t.saturating_sub(1),
            1 => t.saturating_add(r.below(self.tick)),
            _ => t,
        }
    }

    fn advance(&mut self, to: u64, panic: Panic) {
        self.log.push(format!("advance({to}, {panic:?})"));
        let now = self.w.now();
        let reached = now.max(to);
        let tick = self.tick;
        let mut fired: Vec<u64> = Vec::new();
        let hinted: std::cell::RefCell<Vec<u64>> = Default::default();
        let mut hint_before_f = true;
        let res = std::panic::catch_unwind(AssertUnwindSafe(|| {
            self.w.advance_prefetching(
                to,
                |&i| {
                    hinted.borrow_mut().push(i);
                    if let Panic::Hint(k) = panic
                        && hinted.borrow().len() - 1 == k
                    {
                        std::panic::panic_any(Boom);
                    }
                },
                |i| {
                    if !hinted.borrow().contains(&i) {
                        hint_before_f = false;
                    }
                    fired.push(i);
                    if let Panic::F(k) = panic
                        && fired.len() - 1 == k
                    {
                        std::panic::panic_any(Boom);
                    }
                },
            )
        }));
        let panicked = res.is_err();
        let hinted = hinted.into_inner();
        COUNTS[0].fetch_add(1, Relaxed);
        COUNTS[1].fetch_add(fired.len() as u64, Relaxed);
        COUNTS[2].fetch_add(u64::from(panicked), Relaxed);
        COUNTS[3].fetch_add(u64::from(fired.len() > 1), Relaxed);
        if self.w.now() != reached {
            self.fail(format!(
                "clock {} after advance to {to} from {now}",
                self.w.now()
            ));
        }
        let due: BTreeSet<u64> = self
            .model
            .iter()
            .filter(|(_, p)| p.forced || rounded(p.deadline, tick) <= reached)
            .map(|(&i, _)| i)
            .collect();
        let key = |m: &BTreeMap<u64, P>, i: &u64| rounded(m[i].deadline, tick);
        // Every fired item was due, once, in nondecreasing order.
        let mut seen = BTreeSet::new();
        let mut prev = 0;
        for i in &fired {
            if !due.contains(i) || !seen.insert(*i) {
                self.fail(format!(
                    "advance {now}->{to}: fired {i} not due or twice; fired {fired:?} due {due:?}"
                ));
            }
            let k = key(&self.model, i);
            if k < prev {
                self.fail(format!("advance {now}->{to}: out of order {fired:?}"));
            }
            prev = k;
        }
        if !panicked {
            if !matches!(panic, Panic::No) && !due.is_empty() {
                let k = match panic {
                    Panic::F(k) | Panic::Hint(k) => k,
                    Panic::No => unreachable!(),
                };
                if matches!(panic, Panic::F(_)) && k < due.len() {
                    self.fail(format!("f should have panicked at {k} of {}", due.len()));
                }
            }
            if fired.len() != due.len() {
                let missing: Vec<u64> = due.iter().filter(|i| !seen.contains(i)).copied().collect();
                self.fail(format!(
                    "advance {now}->{to}: missing {missing:?} (due {:?}); fired {fired:?}",
                    missing.iter().map(|i| self.model[i]).collect::<Vec<_>>()
                ));
            }
            if !hint_before_f {
                self.fail(format!("advance {now}->{to}: an item reached f unhinted"));
            }
            if hinted.iter().any(|i| !seen.contains(i)) {
                self.fail(format!(
                    "advance {now}->{to}: hinted {hinted:?} fired {fired:?}"
                ));
            }
        } else {
            // Held back: nothing due earlier than the last fired item stays behind.
            let last = fired.iter().map(|i| key(&self.model, i)).max().unwrap_or(0);
            for j in &due {
                if !seen.contains(j) && key(&self.model, j) < last {
                    self.fail(format!(
                        "advance {now}->{to} panicking: {j} held back but due before {last}"
                    ));
                }
            }
        }
        for i in &fired {
            self.model.remove(i);
            self.ids.remove(i);
        }
        if panicked {
            for j in &due {
                if let Some(p) = self.model.get_mut(j) {
                    p.forced = true;
                    self.ids.remove(j); // under a new id now
                }
            }
        }
        self.check_after();
    }

    fn check_after(&self) {
        if self.w.len() != self.model.len() {
            self.fail(format!("len {} model {}", self.w.len(), self.model.len()));
        }
        let now = self.w.now();
        match self.w.next_expiration() {
            None if self.model.is_empty() => {}
            None => self.fail("next_expiration None, model not empty".into()),
            Some(t) => {
                if self.model.values().any(|p| p.forced) {
                    if t != now {
                        self.fail(format!("overdue pending but next_expiration {t} != {now}"));
                    }
                } else {
                    let earliest = self
                        .model
                        .values()
                        .map(|p| rounded(p.deadline, self.tick))
                        .min();
                    match earliest {
                        None => self.fail(format!("next_expiration {t} on empty model")),
                        Some(e) if t <= now || t > e => {
                            self.fail(format!("next_expiration {t}, now {now}, earliest due {e}"))
                        }
                        _ => {}
                    }
                }
            }
        }
    }

    fn drain_check(mut self) {
        let mut got = self.w.drain();
        got.sort_unstable();
        let want: Vec<u64> = self.model.keys().copied().collect();
        if got != want {
            let msg = format!("drain {got:?} model {want:?}");
            self.log.push("drain".into());
            self.fail(msg);
        }
    }
}

fn deadline(r: &mut Rng, s: &Sim) -> u64 {
    let now = s.w.now();
    match r.below(10) {
        0..=2 => now.saturating_add(1 + r.below(s.tick.saturating_mul(4))),
        3..=5 => now.saturating_add(r.next() >> r.below(64)),
        6 | 7 => s.edge(r),
        8 => u64::MAX - r.below(3 * s.tick.min(1 << 20)),
        _ => match s
            .model
            .values()
            .nth(r.below(s.model.len() as u64 + 1) as usize)
        {
            Some(p) => p.deadline,
            None => now.saturating_add(1),
        },
    }
}

fn random_case(r: &mut Rng, case: u64, ops: usize) {
    let bits = if case.is_multiple_of(5) {
        r.pick(&[12u32, 16])
    } else {
        1 + r.below(8) as u32
    };
    let any = 1 + r.below(5000);
    let tick = r.pick(&[1u64, 1, 1, 2, 3, 7, 10, 1000, any, u64::MAX / 3]);
    let start = match r.below(6) {
        0 => 0,
        1 => u64::MAX - r.below(1 << 30),
        2 => r.next(),
        _ => r.below(1 << 40),
    };
    let mut s = Sim::new(tick, bits, start);
    for _ in 0..ops {
        let now = s.w.now();
        match r.below(28) {
            0..=11 => {
                let d = deadline(r, &s);
                s.insert(d);
            }
            12 | 13 => {
                let i = r.below(s.next_item + 1);
                s.cancel(i);
            }
            14..=16 => {
                let i = r.below(s.next_item + 1);
                let d = match r.below(4) {
                    0 => now.saturating_sub(r.below(tick.saturating_mul(3))),
                    _ => deadline(r, &s),
                };
                s.reschedule(i, d);
            }
            _ => {
                let to = match r.below(9) {
                    0 | 1 => s.w.next_expiration().unwrap_or(now),
                    2 => s.w.next_expiration().map_or(now, |t| t.saturating_sub(1)),
                    3 | 4 => s.edge(r),
                    5 => now.saturating_add(r.next() >> r.below(64)),
                    6 => now.saturating_sub(r.below(1 << 20)),
                    7 => now,
                    _ => {
                        if r.below(6) == 0 {
                            u64::MAX
                        } else {
                            now.saturating_add(r.below(tick.saturating_mul(3)))
                        }
                    }
                };
                let panic = match r.below(6) {
                    0 => Panic::F(r.below(6) as usize),
                    1 => Panic::Hint(r.below(8) as usize),
                    _ => Panic::No,
                };
                s.advance(to, panic);
            }
        }
        s.check_after();
    }
    s.drain_check();
}

#[test]
fn review_random_differential() {
    silence_boom();
    let seed = env_u64("REVIEW_SEED", 0x0087_FB32);
    let cases = env_u64("REVIEW_CASES", 2000);
    let mut r = Rng::new(seed);
    for case in 0..cases {
        let mut rc = Rng::new(r.next());
        random_case(&mut rc, case, 300);
    }
    let c: Vec<u64> = COUNTS.iter().map(|c| c.load(Relaxed)).collect();
    eprintln!(
        "advances {}, fired {}, panicked {}, multi-item {}",
        c[0], c[1], c[2], c[3]
    );
}

/// Timer-thread style (the case the early stop is for): many items, stepped to each
/// `next_expiration`, some steps landing on the last tick of a coarse bucket, at every size.
#[test]
fn review_stepped_drive_every_size() {
    silence_boom();
    let seed = env_u64("REVIEW_SEED", 0x0087_FB32) ^ 0x5151;
    let mut r = Rng::new(seed);
    for bits in 1..=16u32 {
        for tick in [1u64, 3, 1000] {
            let start = if bits % 2 == 0 {
                r.below(1 << 30)
            } else {
                u64::MAX - r.below(1 << 36)
            };
            let mut s = Sim::new(tick, bits, start);
            for _ in 0..300 {
                let d = deadline(&mut r, &s);
                s.insert(d);
            }
            for step in 0..2000 {
                let Some(t) = s.w.next_expiration() else {
                    break;
                };
                let to = if step % 7 == 0 {
                    s.edge(&mut r).max(t)
                } else {
                    t
                };
                let panic = if step % 11 == 0 {
                    Panic::Hint(r.below(4) as usize)
                } else {
                    Panic::No
                };
                s.advance(to, panic);
                if step % 3 == 0 {
                    let d = deadline(&mut r, &s);
                    s.insert(d);
                }
            }
            s.drain_check();
        }
    }
}

/// Every small state: two or three items (deadlines within 3 level-1 spans of the clock), and a
/// pair of advances to every pair of targets, then a stepped drive, at sizes 2, 4, 8.
#[test]
fn review_exhaustive_small() {
    silence_boom();
    for bits in 1..=3u32 {
        for tick in 1..=3u64 {
            for start in [0u64, 1, 5, 7, 13] {
                let span = ((3u64 << (2 * bits)) * tick).min(48);
                for a in 1..=span {
                    for b in [a, a + 1, a + tick, span / 2, span] {
                        for t1 in start..=start + span {
                            for t2 in [t1, t1 + 1, t1 + tick, start + span, start + a + b] {
                                let mut s = Sim::new(tick, bits, start);
                                s.insert(start + a);
                                s.insert(start + b);
                                s.insert(start + span + 1);
                                s.advance(t1, Panic::No);
                                s.advance(t2, Panic::No);
                                while let Some(t) = s.w.next_expiration() {
                                    s.advance(t, Panic::No);
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The early stop's boundary: for every level of every size, items on both sides of the last
/// tick of a bucket (and at the first tick of the next bucket of each level), an advance exactly
/// to that last tick; nothing due may stay, nothing later may come.
#[test]
fn review_target_on_the_last_tick_of_each_level() {
    silence_boom();
    for bits in 1..=16u32 {
        let levels = 64u32.div_ceil(bits);
        for tick in [1u64, 7] {
            for level in 0..levels {
                let shift = level * bits;
                if shift >= 63 {
                    continue;
                }
                let w = 1u64 << shift;
                for start in [0u64, w.saturating_sub(1), 3 * w + 1] {
                    let start_t = start.saturating_mul(tick);
                    // A bucket of `level` ahead of the clock: [lo, hi]
                    let lo_tick = ((start >> shift) + 1) << shift;
                    let hi_tick = lo_tick | (w - 1);
                    if hi_tick.checked_mul(tick).is_none()
                        || hi_tick.checked_mul(tick).unwrap() > u64::MAX / 4
                    {
                        continue;
                    }
                    let mut s = Sim::new(tick, bits, start_t);
                    for t in [
                        lo_tick,
                        hi_tick.saturating_sub(1),
                        hi_tick,
                        hi_tick + 1,
                        hi_tick + 2,
                        hi_tick + w,
                        hi_tick + (w << bits.min(8)),
                    ] {
                        if let Some(d) = t.checked_mul(tick).filter(|&d| d > start_t) {
                            s.insert(d);
                            s.insert(d - (tick - 1)); // same due tick, rounded up
                        }
                    }
                    for p in [Panic::No, Panic::Hint(1), Panic::F(1)] {
                        let mut s2 = Sim::new(tick, bits, start_t);
                        for p in s.model.values() {
                            s2.insert(p.deadline);
                        }
                        s2.advance(hi_tick * tick, p);
                        s2.advance(hi_tick * tick, Panic::No);
                        s2.advance(hi_tick * tick + tick - 1, Panic::No);
                        while let Some(t) = s2.w.next_expiration() {
                            s2.advance(t, Panic::No);
                        }
                    }
                    s.advance(hi_tick * tick, Panic::No);
                    s.drain_check();
                }
            }
        }
    }
}

/// A prefetch hint that panics at every position of a multi-bucket advance (overdue items,
/// several level-0 and level-1 buckets, a queued bucket, and the last bucket partly due).
#[test]
fn review_hint_panicking_at_every_position() {
    silence_boom();
    for bits in [1u32, 2, 6] {
        for k in 0..120usize {
            for f_too in [false, true] {
                let mut s = Sim::new(1, bits, 0);
                let mut ids = Vec::new();
                for i in 0..100u64 {
                    s.insert(1 + (i * 37) % 300);
                    ids.push(i);
                }
                s.advance(3, Panic::No);
                for i in [10u64, 20, 30] {
                    s.reschedule(i, 2); // into the past: overdue
                }
                let p = if f_too { Panic::F(k) } else { Panic::Hint(k) };
                s.advance(150, p);
                s.reschedule(40, 1); // into the past after the panic
                s.advance(150, Panic::No);
                while let Some(t) = s.w.next_expiration() {
                    s.advance(t, Panic::No);
                }
                assert!(s.model.is_empty());
            }
        }
    }
}
