//! Property test: random operation sequences on the wheel against a `BTreeMap` reference model.
//!
//! Each case draws a configuration (wheel sizes 2..=256, ticks 1..=1000, clocks near 0 or near
//! `u64::MAX`) and a sequence of inserts, cancels, reschedules and advances whose deadlines reach
//! every level: a tick ahead, equal to another item's, equal to `now`, in the past, random bit
//! widths up to 64, and right at `u64::MAX`. After every operation the wheel must agree with the
//! model: what fired (exactly once, never early, never late, in order), what `cancel`,
//! `reschedule`, `len` and `next_expiration` say. Some advances have a callback that panics part
//! way: the items it handed out are gone, the rest stay due and come out first next time.
//!
//! The generator is seeded, so a run is reproducible: `WHEEL_QC_SEED` picks the seed and
//! `WHEEL_QC_CASES` the number of cases (CI uses the defaults). quickcheck shrinks a failure to a
//! short sequence before reporting it.

use std::collections::BTreeMap;

use std::panic::AssertUnwindSafe;

use quickcheck::{Arbitrary, Gen, QuickCheck, TestResult};
use tickwheel_wheel::{TimerId, TimingWheel};

mod support;

use support::{Boom, Pending, rounded, silence_boom};

const DEFAULT_CASES: u64 = 20_000;
const DEFAULT_SEED: u64 = 0x5EED_0F71_3E20_2026;

#[derive(Clone, Debug)]
struct Scenario {
    tick: u64,
    wheel_size: usize,
    start: u64,
    ops: Vec<Op>,
}

/// A deadline, resolved against the clock when the operation runs.
#[derive(Clone, Copy, Debug)]
enum When {
    /// `now + k`, k small (a few ticks).
    Ahead(u64),
    /// `now + (x >> shift)`: every magnitude, so every level.
    Bits(u64, u32),
    /// Exactly `now`.
    Now,
    /// `now - k`.
    Behind(u64),
    /// `u64::MAX - k`, k small.
    NearMax(u64),
    /// The deadline of the `i`-th item inserted (mod count), or `now + 1` if none.
    SameAs(usize),
}

#[derive(Clone, Copy, Debug)]
enum Step {
    /// `now + k`, k small.
    By(u64),
    /// `now + (x >> shift)`.
    Bits(u64, u32),
    /// To `next_expiration()`, as the tick thread does.
    ToNext,
    /// To one before `next_expiration()`: nothing may fire (except items rescheduled into the past).
    JustBeforeNext,
    /// Backwards by k: must be ignored.
    Back(u64),
    /// To the end of time.
    ToMax,
}

#[derive(Clone, Copy, Debug)]
enum Op {
    Insert(When),
    Cancel(usize),
    Reschedule(usize, When),
    Advance(Step),
    /// An advance whose callback panics when handed its `k`-th item (if that many are due).
    AdvancePanicking(Step, u8),
}

impl When {
    fn draw(g: &mut Gen) -> When {
        match u8::arbitrary(g) % 16 {
            0..=4 => When::Ahead(u64::arbitrary(g)),
            5..=10 => When::Bits(u64::arbitrary(g), u32::arbitrary(g) % 64),
            11 => When::Now,
            12 => When::Behind(u64::arbitrary(g)),
            13 => When::NearMax(u64::arbitrary(g) % 2000),
            _ => When::SameAs(usize::arbitrary(g)),
        }
    }

    fn resolve(self, now: u64, tick: u64, deadlines: &[u64]) -> u64 {
        match self {
            When::Ahead(k) => now.saturating_add(k % (3 * tick + 1)),
            When::Bits(x, shift) => now.saturating_add(x >> shift),
            When::Now => now,
            When::Behind(k) => now.saturating_sub(k % (3 * tick + 1)),
            When::NearMax(k) => u64::MAX - k,
            When::SameAs(i) if deadlines.is_empty() => now.saturating_add(1 + i as u64 % tick),
            When::SameAs(i) => deadlines[i % deadlines.len()],
        }
    }
}

impl Arbitrary for Op {
    fn arbitrary(g: &mut Gen) -> Op {
        match u8::arbitrary(g) % 20 {
            0..=6 => Op::Insert(When::draw(g)),
            7..=9 => Op::Cancel(usize::arbitrary(g)),
            10..=12 => Op::Reschedule(usize::arbitrary(g), When::draw(g)),
            13..=15 => Op::Advance(Step::By(u64::arbitrary(g))),
            16 => Op::Advance(Step::Bits(u64::arbitrary(g), u32::arbitrary(g) % 64)),
            17 => Op::Advance(Step::ToNext),
            18 => Op::Advance(if bool::arbitrary(g) {
                Step::JustBeforeNext
            } else {
                Step::Back(u64::arbitrary(g))
            }),
            19 if bool::arbitrary(g) => Op::AdvancePanicking(
                if bool::arbitrary(g) {
                    Step::ToNext
                } else {
                    Step::Bits(u64::arbitrary(g), u32::arbitrary(g) % 64)
                },
                u8::arbitrary(g) % 8,
            ),
            _ => Op::Advance(if u8::arbitrary(g) % 8 == 0 {
                Step::ToMax
            } else {
                Step::ToNext
            }),
        }
    }
}

impl Arbitrary for Scenario {
    fn arbitrary(g: &mut Gen) -> Scenario {
        let any_tick = 1 + u64::arbitrary(g) % 1000;
        let tick = *g.choose(&[1, 1, 1, 2, 3, 7, 10, 1000, any_tick]).unwrap();
        let wheel_size = 1usize << (1 + u32::arbitrary(g) % 8);
        let start = match u8::arbitrary(g) % 8 {
            0 => 0,
            1 => u64::MAX - u64::arbitrary(g) % (1 << 24),
            2 => u64::arbitrary(g),
            _ => u64::arbitrary(g) % (1 << 40),
        };
        let size = g.size();
        let len = 1 + usize::arbitrary(g) % size;
        let ops = (0..len).map(|_| Op::arbitrary(g)).collect();
        Scenario {
            tick,
            wheel_size,
            start,
            ops,
        }
    }

    /// Shorter prefixes first (a failure at step k survives truncation to k + 1 steps, so this
    /// converges in a logarithmic number of runs), then, for short sequences, every sequence with
    /// one operation removed.
    fn shrink(&self) -> Box<dyn Iterator<Item = Scenario>> {
        let this = self.clone();
        let len = self.ops.len();
        let prefixes = [len / 2, len * 3 / 4, len.saturating_sub(1)]
            .into_iter()
            .filter(move |&k| k > 0 && k < len);
        let removals = (0..if len <= 64 { len } else { 0 }).map(move |i| (i, ()));
        let a = this.clone();
        let b = this;
        Box::new(
            prefixes
                .map(move |k| Scenario {
                    ops: a.ops[..k].to_vec(),
                    ..a.clone()
                })
                .chain(removals.map(move |(i, ())| {
                    let mut ops = b.ops.clone();
                    ops.remove(i);
                    Scenario { ops, ..b.clone() }
                })),
        )
    }
}

fn run(s: Scenario) -> TestResult {
    match check(&s) {
        Ok(()) => TestResult::passed(),
        Err(msg) => TestResult::error(msg),
    }
}

macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(format!($($fmt)+));
        }
    };
}

fn check(s: &Scenario) -> Result<(), String> {
    silence_boom();
    let tick = s.tick;
    let mut wheel = TimingWheel::new(tick, s.wheel_size, s.start).map_err(|e| e.to_string())?;
    let mut model: BTreeMap<u64, Pending> = BTreeMap::new();
    let mut ids: Vec<(TimerId, u64)> = Vec::new(); // every id handed out, with its item
    let mut deadlines: Vec<u64> = Vec::new();
    let mut next_item = 0u64;

    for (step, op) in s.ops.iter().enumerate() {
        let now = wheel.now();
        match *op {
            Op::Insert(when) => {
                let d = when.resolve(now, tick, &deadlines);
                let item = next_item;
                next_item += 1;
                match wheel.insert(d, item) {
                    Ok(id) => {
                        ensure!(
                            d > now,
                            "step {step}: insert at {d} <= now {now} was accepted"
                        );
                        ids.push((id, item));
                        model.insert(
                            item,
                            Pending {
                                deadline: d,
                                forced: false,
                                stale_id: false,
                            },
                        );
                        deadlines.push(d);
                    }
                    Err(back) => {
                        ensure!(
                            d <= now,
                            "step {step}: insert at {d} > now {now} was refused"
                        );
                        ensure!(
                            back.into_item() == item,
                            "step {step}: refused insert handed back another item"
                        );
                    }
                }
            }
            Op::Cancel(i) if !ids.is_empty() => {
                let (id, item) = ids[i % ids.len()];
                let got = wheel.cancel(id);
                let want = match model.get(&item) {
                    Some(p) if !p.stale_id => model.remove(&item).map(|_| item),
                    _ => None,
                };
                ensure!(
                    got == want,
                    "step {step}: cancel of item {item} gave {got:?}, model {want:?}"
                );
            }
            Op::Reschedule(i, when) if !ids.is_empty() => {
                let (id, item) = ids[i % ids.len()];
                let d = when.resolve(now, tick, &deadlines);
                let got = wheel.reschedule(id, d);
                let want = model.get(&item).is_some_and(|p| !p.stale_id);
                ensure!(
                    got == want,
                    "step {step}: reschedule of item {item} to {d} gave {got}, model {want}"
                );
                if want {
                    model.insert(
                        item,
                        Pending {
                            deadline: d,
                            forced: d <= now,
                            stale_id: false,
                        },
                    );
                    deadlines.push(d);
                }
            }
            Op::Cancel(_) | Op::Reschedule(..) => {}
            Op::Advance(step_kind) | Op::AdvancePanicking(step_kind, _) => {
                let panic_at = match *op {
                    Op::AdvancePanicking(_, k) => Some(usize::from(k)),
                    _ => None,
                };
                let to = match step_kind {
                    Step::By(k) => now.saturating_add(k % (3 * tick + 1)),
                    Step::Bits(x, shift) => now.saturating_add(x >> shift),
                    Step::ToNext => wheel.next_expiration().unwrap_or(now),
                    Step::JustBeforeNext => {
                        wheel.next_expiration().map_or(now, |t| t.saturating_sub(1))
                    }
                    Step::Back(k) => now.saturating_sub(1 + k % (1 << 20)),
                    Step::ToMax => u64::MAX,
                };
                let forced_before: Vec<u64> = model
                    .iter()
                    .filter(|(_, p)| p.forced)
                    .map(|(&i, _)| i)
                    .collect();
                let mut fired = Vec::new();
                let panicked = std::panic::catch_unwind(AssertUnwindSafe(|| {
                    wheel.advance(to, |item| {
                        fired.push(item);
                        if panic_at == Some(fired.len() - 1) {
                            std::panic::panic_any(Boom);
                        }
                    })
                }))
                .is_err();
                let reached = now.max(to);
                ensure!(
                    wheel.now() == reached,
                    "step {step}: clock at {} after advance to {to} from {now}",
                    wheel.now()
                );

                // Exactly the model's due items, each once.
                let mut want: Vec<u64> = model
                    .iter()
                    .filter(|(_, p)| p.forced || rounded(p.deadline, tick) <= reached)
                    .map(|(&item, _)| item)
                    .collect();
                ensure!(
                    panicked == panic_at.is_some_and(|k| k < want.len()),
                    "step {step}: panicked {panicked} with {} due, panic at {panic_at:?}",
                    want.len()
                );
                // The item the callback panicked on was handed out (and dropped by the unwind).
                let handed = panic_at.filter(|_| panicked).map_or(want.len(), |k| k + 1);
                let mut got_sorted = fired.clone();
                got_sorted.sort_unstable();
                want.sort_unstable();
                if panicked {
                    // The first `handed` items in order came out; the rest stay, due at once.
                    let r = |i: &u64| rounded(model[i].deadline, tick);
                    let last = fired.iter().map(r).max().unwrap_or(0);
                    ensure!(
                        fired.len() == handed
                            && fired.iter().all(|i| want.contains(i))
                            && want.iter().all(|j| fired.contains(j) || r(j) >= last),
                        "step {step}: advance {now} -> {to} panicking at item {handed} fired {fired:?}, model wants a prefix of {want:?}"
                    );
                } else {
                    ensure!(
                        got_sorted == want,
                        "step {step}: advance {now} -> {to} fired {fired:?}, model wants {want:?} (pending {model:?})"
                    );
                }
                let mut prev = 0;
                for item in &fired {
                    let p = model.remove(item).expect("checked above");
                    ensure!(
                        p.deadline <= reached,
                        "step {step}: item {item} fired early: deadline {} > now {reached}",
                        p.deadline
                    );
                    let r = rounded(p.deadline, tick);
                    ensure!(
                        r >= prev,
                        "step {step}: out of order: {fired:?}, rounded deadline {r} after {prev}"
                    );
                    prev = r;
                }
                if panicked {
                    // Held back by the panic: due at once, whatever the next advance's target.
                    for j in &want {
                        if let Some(p) = model.get_mut(j) {
                            p.forced = true;
                            p.stale_id = true;
                        }
                    }
                }
                if matches!(step_kind, Step::JustBeforeNext) {
                    // next_expiration is the earliest time anything becomes due: before it, only
                    // items rescheduled into the past may come out.
                    ensure!(
                        fired.iter().all(|i| forced_before.contains(i)),
                        "step {step}: advancing to just before next_expiration ({to}) fired {fired:?}"
                    );
                }
            }
        }

        // Agreement after every operation.
        ensure!(
            wheel.len() == model.len(),
            "step {step}: len {} != model {}",
            wheel.len(),
            model.len()
        );
        ensure!(
            wheel.is_empty() == model.is_empty(),
            "step {step}: is_empty disagrees"
        );
        let now = wheel.now();
        match wheel.next_expiration() {
            None => ensure!(
                model.is_empty(),
                "step {step}: next_expiration None with {} pending",
                model.len()
            ),
            Some(t) => {
                ensure!(
                    !model.is_empty(),
                    "step {step}: next_expiration {t} on an empty wheel"
                );
                if model.values().any(|p| p.forced) {
                    ensure!(
                        t == now,
                        "step {step}: an item is overdue but next_expiration is {t}, now {now}"
                    );
                } else {
                    let earliest = model
                        .values()
                        .map(|p| rounded(p.deadline, tick))
                        .min()
                        .unwrap();
                    ensure!(
                        t > now,
                        "step {step}: next_expiration {t} not after now {now}"
                    );
                    ensure!(
                        t <= earliest,
                        "step {step}: next_expiration {t} after the earliest due time {earliest}"
                    );
                }
            }
        }
    }

    // Drain hands back exactly what is pending, earliest first.
    let drained = wheel.drain();
    let mut sorted = drained.clone();
    sorted.sort_unstable();
    let want: Vec<u64> = model.keys().copied().collect();
    ensure!(sorted == want, "drain gave {drained:?}, model {want:?}");
    // Every item in order of its own rounded deadline, those rescheduled into the past or left
    // by a panicking callback ("forced") too: their stored ticks are clamped to the clock, and
    // drain once ordered them by slot (review of 2026-11-27).
    let order: Vec<u64> = drained
        .iter()
        .map(|i| rounded(model[i].deadline, tick))
        .collect();
    ensure!(
        order.windows(2).all(|w| w[0] <= w[1]),
        "drain out of deadline order: {drained:?}"
    );
    ensure!(
        wheel.is_empty() && wheel.next_expiration().is_none(),
        "wheel not empty after drain"
    );
    for (id, item) in &ids {
        ensure!(
            wheel.cancel(*id).is_none(),
            "id of item {item} still live after drain"
        );
    }
    Ok(())
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn wheel_agrees_with_the_model() {
    let cases = env_u64("WHEEL_QC_CASES", DEFAULT_CASES);
    let seed = env_u64("WHEEL_QC_SEED", DEFAULT_SEED);
    QuickCheck::new()
        .rng(Gen::from_size_and_seed(200, seed))
        .tests(cases)
        .max_tests(cases * 2)
        .quickcheck(run as fn(Scenario) -> TestResult);
}

/// An eighth as many cases at three times the length with a second seed, so a run also explores longer
/// sequences (more cascades per case).
#[test]
fn wheel_agrees_with_the_model_long_sequences() {
    let cases = env_u64("WHEEL_QC_CASES", DEFAULT_CASES) / 8;
    let seed = env_u64("WHEEL_QC_SEED", DEFAULT_SEED).rotate_left(17) ^ 0xA5A5;
    QuickCheck::new()
        .rng(Gen::from_size_and_seed(600, seed))
        .tests(cases)
        .max_tests(cases * 2)
        .quickcheck(run as fn(Scenario) -> TestResult);
}
