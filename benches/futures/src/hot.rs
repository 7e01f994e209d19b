//! W11's hot-loop table: one timer operation N times in a loop inside one `block_on` of a
//! current-thread tokio runtime, ours (`tickwheel::Timer`) and tokio's (`tokio::time`) in the
//! same run, rounds alternating which goes first; ns per operation (wall) and process CPU per
//! operation, the median round; and the `W11.hot` check (ours no slower than tokio's on any row).

use std::future::{poll_fn, ready};
use std::hint::black_box;
use std::pin::{Pin, pin};
use std::task::Poll;
use std::time::{Duration, Instant};

use tickwheel::{Task, Timer};
use tokio::runtime::Runtime;
use wheel_benches::measure::{alloc, procfs};
use wheel_benches::report::{self, Table};
use wheel_benches::service::TIMER_NAME;

use crate::Report;
use crate::cost::TOKIO;

/// Every timeout and sleep of the loop: far beyond the loop, so none fires.
const LIMIT: Duration = Duration::from_secs(5);

/// Idle time after each loop, inside its CPU measurement: longer than any work a timer defers
/// (ours: the young queue files its cancelled records up to 320 ms after the add).
const SETTLE: Duration = Duration::from_millis(500);

/// The shortest loop whose time the figures resolve: below it, `Instant`'s reads and the
/// scheduler's noise are a large part of the figure.
const MIN_WALL: Duration = Duration::from_millis(1);

/// An operation of the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    TimeoutReady,
    TimeoutYield,
    SleepDropped,
    SleepPolled,
    AddCancel,
}

impl Op {
    const ALL: [Op; 5] = [
        Op::TimeoutReady,
        Op::TimeoutYield,
        Op::SleepDropped,
        Op::SleepPolled,
        Op::AddCancel,
    ];

    fn label(self) -> &'static str {
        match self {
            Op::TimeoutReady => "timeout(5 s, ready(())): made, polled to completion, dropped",
            Op::TimeoutYield => {
                "timeout(5 s, yield_now()), minus yield_now() alone: the waker registered"
            }
            Op::SleepDropped => "sleep(5 s): made, dropped, never polled",
            Op::SleepPolled => "sleep(5 s): polled once (Pending), dropped",
            Op::AddCancel => "add_or_submit(Task::after(5 s)) + TimerHandle::cancel (ours only)",
        }
    }

    /// Its name in the check's figure.
    fn short(self) -> &'static str {
        match self {
            Op::TimeoutReady => "timeout ready",
            Op::TimeoutYield => "timeout yield",
            Op::SleepDropped => "sleep unpolled",
            Op::SleepPolled => "sleep polled",
            Op::AddCancel => "add+cancel",
        }
    }

    /// Whether tokio has it (it has no task API: add + cancel is ours only).
    fn tokio_has(self) -> bool {
        self != Op::AddCancel
    }
}

/// One loop of the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lap {
    /// `tokio::task::yield_now().await` alone, subtracted from [`Op::TimeoutYield`].
    Yield,
    Ours(Op),
    Tokio(Op),
}

/// Polls `f` once with the task's context; true if it was pending.
async fn poll_once<F: Future>(mut f: Pin<&mut F>) -> bool {
    poll_fn(|cx| Poll::Ready(f.as_mut().poll(cx).is_pending())).await
}

/// The wall time of `n` runs of `$op`, read around the loop only.
macro_rules! timed {
    ($n:expr, $op:expr) => {{
        let start = Instant::now();
        for _ in 0..$n {
            $op;
        }
        start.elapsed()
    }};
}

/// `n` operations of `lap`; returns the loop's wall time. Panics if an operation did not do what
/// the row says (a timeout that fired, a sleep not pending, a cancel that failed).
async fn lap(lap: Lap, timer: &Timer, n: usize) -> Duration {
    // How many operations did what they should: every one, or the row measures something else.
    let mut done = 0usize;
    let wall = match lap {
        Lap::Yield => timed!(n, {
            tokio::task::yield_now().await;
            done += 1;
        }),
        Lap::Ours(Op::TimeoutReady) => timed!(n, {
            let r = timer.timeout(black_box(LIMIT), ready(())).await;
            done += usize::from(black_box(r).is_ok());
        }),
        Lap::Tokio(Op::TimeoutReady) => timed!(n, {
            let r = tokio::time::timeout(black_box(LIMIT), ready(())).await;
            done += usize::from(black_box(r).is_ok());
        }),
        Lap::Ours(Op::TimeoutYield) => timed!(n, {
            let r = timer
                .timeout(black_box(LIMIT), tokio::task::yield_now())
                .await;
            done += usize::from(black_box(r).is_ok());
        }),
        Lap::Tokio(Op::TimeoutYield) => timed!(n, {
            let r = tokio::time::timeout(black_box(LIMIT), tokio::task::yield_now()).await;
            done += usize::from(black_box(r).is_ok());
        }),
        Lap::Ours(Op::SleepDropped) => timed!(n, {
            drop(black_box(timer.sleep(black_box(LIMIT))));
            done += 1;
        }),
        Lap::Tokio(Op::SleepDropped) => timed!(n, {
            drop(black_box(tokio::time::sleep(black_box(LIMIT))));
            done += 1;
        }),
        Lap::Ours(Op::SleepPolled) => timed!(n, {
            let s = pin!(timer.sleep(black_box(LIMIT)));
            done += usize::from(poll_once(s).await);
        }),
        Lap::Tokio(Op::SleepPolled) => timed!(n, {
            let s = pin!(tokio::time::sleep(black_box(LIMIT)));
            done += usize::from(poll_once(s).await);
        }),
        Lap::Ours(Op::AddCancel) => timed!(n, {
            let task = Task::after(black_box(LIMIT), || {});
            let handle = timer.add_or_submit(task).expect("W11 hot: an add");
            done += usize::from(handle.cancel());
        }),
        Lap::Tokio(Op::AddCancel) => unreachable!("tokio has no add + cancel"),
    };
    assert_eq!(done, n, "W11 hot {lap:?}: not every operation did its part");
    wall
}

/// One loop's wall time, and the process CPU from before it to [`SETTLE`] after it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Sample {
    wall: Duration,
    cpu: Duration,
}

fn sample(rt: &Runtime, timer: &Timer, which: Lap, n: usize) -> Sample {
    alloc::settle(); // the last loop's frees are not this one's cost (see `alloc::settle`)
    let cpu = procfs::process_cpu().unwrap_or_default();
    // Unconstrained: tokio's cooperative budget (128 polls of its resources per task poll) would
    // otherwise make every tokio sleep after the 128th of a loop that never yields return
    // Pending without registering. Both sides run in it alike.
    let wall = rt.block_on(tokio::task::unconstrained(lap(which, timer, n)));
    std::thread::sleep(SETTLE);
    let cpu = procfs::process_cpu()
        .unwrap_or_default()
        .saturating_sub(cpu);
    Sample { wall, cpu }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        len if len % 2 == 1 => v[len / 2],
        len => (v[len / 2 - 1] + v[len / 2]) / 2.0,
    }
}

/// A row's figures for one side: median ns per operation, wall and CPU, and its shortest loop.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Figure {
    wall_ns: f64,
    cpu_ns: f64,
    shortest: Duration,
}

impl Figure {
    /// The median over the rounds of `samples` minus `minus` (the same round's, if any), per op.
    fn of(samples: &[Sample], minus: Option<&[Sample]>, n: usize) -> Figure {
        let per_op = |f: &dyn Fn(&Sample) -> Duration| -> f64 {
            median(
                samples
                    .iter()
                    .enumerate()
                    .map(|(r, s)| {
                        let base = minus.map_or(0.0, |m| f(&m[r]).as_nanos() as f64);
                        (f(s).as_nanos() as f64 - base) / n as f64
                    })
                    .collect(),
            )
        };
        Figure {
            wall_ns: per_op(&|s| s.wall),
            cpu_ns: per_op(&|s| s.cpu),
            shortest: samples.iter().map(|s| s.wall).min().unwrap_or_default(),
        }
    }

    /// Whether the method resolves it: at least 1 ns per operation, from loops of at least
    /// [`MIN_WALL`].
    fn resolved(&self) -> bool {
        self.wall_ns >= 1.0 && self.shortest >= MIN_WALL
    }
}

/// The `W11.hot` check over the rows with a tokio figure: (ours, tokio's) per op.
fn hot_check(rows: &[(Op, Figure, Figure)]) -> (String, Option<bool>) {
    let unresolved: Vec<&str> = rows
        .iter()
        .filter(|(_, o, t)| !o.resolved() || !t.resolved())
        .map(|(op, _, _)| op.short())
        .collect();
    if !unresolved.is_empty() {
        return (
            format!("below resolution: {}", unresolved.join(", ")),
            Some(false),
        );
    }
    let ratios: Vec<String> = rows
        .iter()
        .map(|(op, o, t)| format!("{} {}", op.short(), report::ratio(t.wall_ns / o.wall_ns)))
        .collect();
    let met = rows.iter().all(|(_, o, t)| o.wall_ns <= t.wall_ns);
    (
        format!("tokio/ours (wall): {}", ratios.join(", ")),
        Some(met),
    )
}

/// The hot-loop table and the `W11.hot` check.
pub(crate) fn run(quick: bool, progress: &mut dyn FnMut(&str)) -> Report {
    let (n, rounds) = if quick { (20_000, 3) } else { (200_000, 5) };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("W11 hot: a tokio runtime");
    let timer = Timer::builder()
        .threads(1)
        .name("w11-hot")
        .build()
        .expect("W11 hot: a timer");
    progress(&format!(
        "W11 hot loop: {} operations x {rounds} rounds, {TIMER_NAME} and {TOKIO} alternating",
        report::count(n)
    ));
    // Warm-up, unmeasured: the runtime's and the timer's first allocations, the code's pages.
    let laps = Op::ALL
        .iter()
        .flat_map(|&op| [Lap::Ours(op), Lap::Tokio(op)])
        .filter(|l| !matches!(l, Lap::Tokio(op) if !op.tokio_has()));
    for l in laps.chain([Lap::Yield]) {
        rt.block_on(tokio::task::unconstrained(lap(l, &timer, n / 10)));
    }
    std::thread::sleep(SETTLE);

    let mut yields = Vec::new();
    // [op][0: ours, 1: tokio's], one sample per round.
    let mut samples: Vec<[Vec<Sample>; 2]> = Op::ALL.iter().map(|_| Default::default()).collect();
    for round in 0..rounds {
        yields.push(sample(&rt, &timer, Lap::Yield, n));
        for (i, &op) in Op::ALL.iter().enumerate() {
            // Which side goes first alternates, so neither always follows the other's leftovers.
            let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
            for side in order {
                match side {
                    0 => samples[i][0].push(sample(&rt, &timer, Lap::Ours(op), n)),
                    _ if op.tokio_has() => {
                        samples[i][1].push(sample(&rt, &timer, Lap::Tokio(op), n))
                    }
                    _ => {}
                }
            }
        }
    }
    let alone = Figure::of(&yields, None, n);

    let mut t = Table::new(
        format!(
            "W11 hot loop: ns and CPU per operation, {} operations per loop, median of {rounds} rounds",
            report::count(n)
        ),
        &[
            "operation",
            "ours ns/op",
            "tokio ns/op",
            "ours CPU ns/op",
            "tokio CPU ns/op",
            "tokio/ours (wall)",
        ],
    );
    let mut judged = Vec::new();
    for (i, &op) in Op::ALL.iter().enumerate() {
        let minus = (op == Op::TimeoutYield).then_some(yields.as_slice());
        let ours = Figure::of(&samples[i][0], minus, n);
        let theirs = op.tokio_has().then(|| Figure::of(&samples[i][1], minus, n));
        let dash = || "-".to_owned();
        t.row(vec![
            op.label().to_owned(),
            report::ns(ours.wall_ns),
            theirs.map_or_else(dash, |f| report::ns(f.wall_ns)),
            report::ns(ours.cpu_ns),
            theirs.map_or_else(dash, |f| report::ns(f.cpu_ns)),
            match theirs {
                None => dash(),
                Some(f) if !ours.resolved() || !f.resolved() => "below resolution".to_owned(),
                Some(f) => report::ratio(f.wall_ns / ours.wall_ns),
            },
        ]);
        if let Some(f) = theirs {
            judged.push((op, ours, f));
        }
    }
    t.note(format!("each row: one operation {n} times in a loop inside one `block_on` of a current-thread tokio runtime (`enable_time()`; tokio built without `test-util`, in benches/futures), the loop inside `tokio::task::unconstrained` for both sides (else tokio's cooperative budget would make each tokio sleep after the 128th return Pending without registering); ours = {TIMER_NAME} (`Timer::builder().threads(1)`), tokio = {TOKIO}; per round each row runs ours and tokio's, which goes first alternating; the median round is shown, ns/op and CPU ns/op each"));
    t.note(format!("ns/op = `Instant` around the loop / {n}; CPU ns/op = the process CPU clock (CLOCK_PROCESS_CPUTIME_ID, every thread: the runtime's, our tick thread) from before the loop to {} ms after it / {n}, so what a timer defers past the loop (our young queue files cancelled records up to 320 ms after their add) is charged to its row; our tick thread idles through tokio's rows too", SETTLE.as_millis()));
    t.note(format!("timeout(5 s, ready(())): the timeout made, polled once (the inner future is ready at once), dropped; timeout(5 s, yield_now()): the inner future is Pending at the first poll, so the timeout's sleep is polled and registers the task's waker; it completes at the second poll and is dropped before its deadline; the cost of `tokio::task::yield_now().await` alone in the same round is subtracted, wall and CPU: median {} ns/op wall, {} ns/op CPU", report::ns(alone.wall_ns), report::ns(alone.cpu_ns)));
    t.note("sleep(5 s) polled once: pinned and polled once through `std::future::poll_fn` with the task's context (Pending, so it registers), then dropped; add + cancel: `Timer::add_or_submit(Task::after(5 s, || {}))`, `TimerHandle::cancel()`, the handle dropped (tokio has no task API); every loop checks that each operation did its part (no timeout fired, every polled sleep was Pending, every cancel succeeded)");
    t.note(format!("a figure below 1 ns/op or from a loop shorter than {} ms is below what this method resolves: the ratio says so, and W11.hot counts it as not met", MIN_WALL.as_millis()));
    let (measured, met) = hot_check(&judged);
    Report {
        tables: vec![t],
        checks: vec![("W11.hot", measured, met)],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(wall_ms: u64, cpu_ms: u64) -> Sample {
        Sample {
            wall: Duration::from_millis(wall_ms),
            cpu: Duration::from_millis(cpu_ms),
        }
    }

    #[test]
    fn figures_are_median_rounds_minus_the_same_rounds_baseline() {
        // 1,000 ops per loop; the second round was slow in the row and in its baseline alike.
        let row = [s(10, 20), s(40, 50), s(12, 22)];
        let base = [s(5, 5), s(33, 33), s(5, 5)];
        let f = Figure::of(&row, Some(&base), 1_000);
        assert_eq!(f.wall_ns, 7_000.0, "rounds 5, 7, 7 us: the median");
        assert_eq!(f.cpu_ns, 17_000.0, "rounds 15, 17, 17 us");
        assert_eq!(f.shortest, Duration::from_millis(10));
        assert_eq!(Figure::of(&row, None, 1_000).wall_ns, 12_000.0);
    }

    #[test]
    fn the_hot_check_needs_every_row_resolved_and_no_slower() {
        let fig = |wall_ns: f64, ms: u64| Figure {
            wall_ns,
            cpu_ns: wall_ns,
            shortest: Duration::from_millis(ms),
        };
        let rows = |ours: f64| {
            vec![
                (Op::TimeoutReady, fig(10.0, 5), fig(20.0, 5)),
                (Op::SleepPolled, fig(ours, 5), fig(30.0, 5)),
            ]
        };
        assert_eq!(hot_check(&rows(30.0)).1, Some(true), "equal is met");
        assert_eq!(hot_check(&rows(31.0)).1, Some(false));
        let (text, met) = hot_check(&rows(0.5));
        assert_eq!(met, Some(false));
        assert_eq!(text, "below resolution: sleep polled");
        let short = vec![(Op::TimeoutReady, fig(10.0, 0), fig(20.0, 5))];
        assert_eq!(hot_check(&short).1, Some(false), "a loop under 1 ms");
    }
}
