//! W6, threads: add + cancel through the service from several threads, and the latency of single
//! adds; the measurements and their report section.
//!
//! 1, 2 and 4 threads each add a 30 s timer and cancel it, M times, through our `Timer` and
//! through the `Mutex<BinaryHeap>` baseline ([`MutexHeapTimer`]), alternating, on the real clock:
//! wall time per pair, with nothing else pending, with 100k other timers pending, and with each
//! cancel a thousand adds after its add. Then single adds timed one by one.

use std::sync::Barrier;
use std::thread;
use std::time::{Duration, Instant};

use tickwheel::{Task, Timer};

use super::{Config, Outcome, Scenario};
use crate::impls::mutex_heap::MutexHeapTimer;
use crate::report::svg::{Chart, Series};
use crate::report::targets;
use crate::report::{self, Table};
use crate::rng::Rng;
use crate::service::TIMER_NAME;

/// W6's delay: long enough that nothing fires during the run.
pub const W6_DELAY: Duration = Duration::from_secs(30);

/// Runs `body(thread_index)` on `threads` threads started together; returns the wall time from
/// the common start until the last one finished.
fn run_threads(threads: usize, body: impl Fn(usize) + Sync) -> Duration {
    let barrier = Barrier::new(threads + 1);
    thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let (barrier, body) = (&barrier, &body);
                s.spawn(move || {
                    barrier.wait();
                    body(i);
                })
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        for h in handles {
            if let Err(panic) = h.join() {
                std::panic::resume_unwind(panic);
            }
        }
        start.elapsed()
    })
}

/// The shape of a W6 run: threads, pairs per thread, other timers pending alongside, and how long
/// each task lives before its cancel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AddCancel {
    /// Threads adding and cancelling at once.
    pub threads: usize,
    /// Add + cancel pairs per thread.
    pub ops: usize,
    /// Tasks pending alongside (due in 1 min ..= 1 h, added untimed first).
    pub background: usize,
    /// 0: each add is cancelled at once; `w`: each thread keeps its last `w` tasks and cancels
    /// the oldest after each add (a request timeout cancelled when the request completes a little
    /// later: by then the task sits in the wheel, not in the add path's queue).
    pub window: usize,
}

/// Runs `add` and `cancel` through the window of `shape` on the current thread: `ops` adds,
/// each followed by the cancel of the task `window` adds older. (Pairs cancelled at once, window
/// 0, are a plain loop written out for each implementation: through these closures, which the
/// compiler does not inline, the call overhead and a queue's push and pop per pair were timed
/// for both sides and measured neither, about 3 ns of ours at one thread.)
fn add_cancel_loop<H>(
    shape: AddCancel,
    mut add: impl FnMut() -> H,
    mut cancel: impl FnMut(H) -> bool,
    name: &str,
) {
    assert!(
        shape.window > 0,
        "W6 {name}: pairs cancelled at once run in the loop written out for each implementation"
    );
    let mut live = std::collections::VecDeque::with_capacity(shape.window + 1);
    for _ in 0..shape.ops {
        live.push_back(add());
        if live.len() > shape.window {
            let h = live.pop_front().expect("just pushed");
            assert!(cancel(h), "W6 {name}: cancel of a pending timer failed");
        }
    }
    for h in live {
        assert!(cancel(h), "W6 {name}: cancel of a pending timer failed");
    }
}

/// W6 on our [`Timer`]: each thread adds a [`W6_DELAY`] task (a closure capturing nothing) and
/// cancels it through its handle, in the shape `shape`. Returns the wall time.
///
/// # Panics
///
/// If an add is refused, a cancel fails, anything fires, or the counters disagree at the end.
pub fn add_cancel_timer(shape: AddCancel) -> Duration {
    let timer = Timer::builder()
        .name("w6")
        .threads(1)
        .build()
        .unwrap_or_else(|e| panic!("W6 {TIMER_NAME}: build failed: {e}"));
    for d in background_delays(shape.background) {
        // Fire-and-forget: the handle is dropped, the task stays.
        let _ = timer
            .add_or_submit(Task::after(d, || {}))
            .unwrap_or_else(|e| panic!("W6 {TIMER_NAME}: add refused: {e}"));
    }
    let add = || {
        timer
            .add_or_submit(Task::after(W6_DELAY, || {}))
            .unwrap_or_else(|e| panic!("W6 {TIMER_NAME}: add refused: {e}"))
    };
    let elapsed = run_threads(shape.threads, |_| {
        if shape.window == 0 {
            for _ in 0..shape.ops {
                let h = add();
                assert!(
                    h.cancel(),
                    "W6 {TIMER_NAME}: cancel of a pending timer failed"
                );
            }
        } else {
            add_cancel_loop(shape, add, |h| h.cancel(), TIMER_NAME);
        }
    });
    let n = (shape.threads * shape.ops) as u64;
    let s = timer.stats();
    let bg = shape.background;
    assert!(
        s.added == n + bg as u64 && s.cancelled == n && s.fired == 0 && s.pending == bg as u64,
        "W6 {TIMER_NAME}: expected {n} added and cancelled, {bg} pending, none fired; got {s:?}"
    );
    let left = timer.shutdown().len();
    assert_eq!(
        left, bg,
        "W6 {TIMER_NAME}: shutdown must hand back the pending tasks"
    );
    elapsed
}

/// W6's optional background: `n` delays uniform in 1 min ..= 1 h, fixed seed (none comes due
/// during a run: a slow, oversubscribed baseline run once outlasted the shortest of 1 s).
fn background_delays(n: usize) -> impl Iterator<Item = Duration> {
    let mut rng = Rng::new(crate::workloads::SEED);
    (0..n).map(move |_| Duration::from_millis(rng.range(60_000, 3_600_000)))
}

/// W6 on the [`MutexHeapTimer`] baseline, exactly as [`add_cancel_timer`].
///
/// # Panics
///
/// If a cancel fails, anything fires, or a job is left at the end.
pub fn add_cancel_baseline(shape: AddCancel) -> Duration {
    let timer = MutexHeapTimer::new();
    for d in background_delays(shape.background) {
        timer.schedule(d, Box::new(|| {}));
    }
    let name = MutexHeapTimer::NAME;
    let add = || timer.schedule(W6_DELAY, Box::new(|| {}));
    let elapsed = run_threads(shape.threads, |_| {
        if shape.window == 0 {
            for _ in 0..shape.ops {
                let id = add();
                assert!(
                    timer.cancel(id),
                    "W6 {name}: cancel of a pending timer failed"
                );
            }
        } else {
            add_cancel_loop(shape, add, |id| timer.cancel(id), name);
        }
    });
    let bg = shape.background;
    assert!(
        timer.len() == bg && timer.fired() == 0,
        "W6 {name}: {} pending (expected {bg}), {} fired after all cancels",
        timer.len(),
        timer.fired()
    );
    let left = timer.shutdown().len();
    assert_eq!(
        left, bg,
        "W6 {name}: shutdown must hand back the pending jobs"
    );
    elapsed
}

/// Latency of single adds, nanoseconds: what one `Instant::now()` pair around the add measured,
/// less the same pair around nothing (the clock's own cost, measured in the same run).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct AddLatency {
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Largest.
    pub max: f64,
    /// The clock pair's own median cost, subtracted from each figure above.
    pub clock: f64,
}

fn latency_of(mut ns: Vec<u64>, clock: f64) -> AddLatency {
    ns.sort_unstable();
    let at = |q: f64| {
        let i = ((ns.len() as f64 * q).ceil() as usize).clamp(1, ns.len()) - 1;
        (ns[i] as f64 - clock).max(0.0)
    };
    AddLatency {
        p50: at(0.50),
        p99: at(0.99),
        p999: at(0.999),
        max: (ns[ns.len() - 1] as f64 - clock).max(0.0),
        clock,
    }
}

/// The median cost of an `Instant::now()` pair around nothing.
fn clock_pair_cost(n: usize) -> f64 {
    let mut ns: Vec<u64> = (0..n)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(());
            t.elapsed().as_nanos() as u64
        })
        .collect();
    ns.sort_unstable();
    ns[ns.len() / 2] as f64
}

/// W6 latency: `n` single adds on one thread, each timed alone (the cancel that follows is not),
/// through our [`Timer`] and through the baseline, with `background` other timers pending.
/// Includes every add that drains a full ring (one in 256 here).
///
/// # Panics
///
/// If an add is refused or a cancel fails.
pub fn add_latency(n: usize, background: usize) -> (AddLatency, AddLatency) {
    let clock = clock_pair_cost(n.min(100_000));
    let timer = Timer::builder()
        .name("w6l")
        .threads(1)
        .build()
        .unwrap_or_else(|e| panic!("W6 {TIMER_NAME}: build failed: {e}"));
    for d in background_delays(background) {
        let _ = timer.add_or_submit(Task::after(d, || {}));
    }
    let heap = MutexHeapTimer::new();
    for d in background_delays(background) {
        heap.schedule(d, Box::new(|| {}));
    }
    let (mut ours, mut base) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for _ in 0..n {
        let t = Instant::now();
        let h = timer.add_or_submit(Task::after(W6_DELAY, || {}));
        ours.push(t.elapsed().as_nanos() as u64);
        assert!(
            h.map(|h| h.cancel()).unwrap_or(false),
            "W6 {TIMER_NAME}: add or cancel failed"
        );
        let t = Instant::now();
        let id = heap.schedule(W6_DELAY, Box::new(|| {}));
        base.push(t.elapsed().as_nanos() as u64);
        assert!(
            heap.cancel(id),
            "W6 {}: cancel failed",
            MutexHeapTimer::NAME
        );
    }
    (latency_of(ours, clock), latency_of(base, clock))
}

/// W6: adds and cancels from 1, 2 and 4 threads, and the latency of single adds.
pub(super) struct Threads;

/// Repetitions of each W6 measurement, alternating ours and the baseline.
const W6_REPS: usize = 5;

impl Scenario for Threads {
    fn id(&self) -> &'static str {
        "W6"
    }

    fn title(&self) -> &'static str {
        "threads: 1, 2 and 4 threads each adding a 30 s timer and cancelling it (real clock)"
    }

    fn run(&self, cfg: &Config, progress: &mut dyn FnMut(&str)) -> Outcome {
        let ops = cfg.service_ops();
        let background = 100_000;
        let window = 1_000;
        let mut t = Table::new(
            format!(
                "W6 add + cancel through the service, {} pairs per thread",
                report::count(ops)
            ),
            &[
                "implementation",
                "threads",
                "pending alongside",
                "cancelled after",
                "ms",
                "M pairs/s",
                "ns/pair",
                "baseline/ours (time)",
            ],
        );
        let mut out = Outcome::default();
        let mut ratios = Vec::new();
        // ns per pair by threads, for the chart: (ours, baseline) per shape with nothing else
        // pending and cancels at once.
        let mut by_threads: [Vec<(f64, f64)>; 2] = [Vec::new(), Vec::new()];
        let shapes = [
            (1, 0, 0),
            (2, 0, 0),
            (4, 0, 0),
            (1, background, 0),
            (2, background, 0),
            (4, background, 0),
            (1, 0, window),
            (2, 0, window),
        ];
        for (threads, bg, window) in shapes {
            let shape = AddCancel {
                threads,
                ops,
                background: bg,
                window,
            };
            progress(&format!(
                "W6 {TIMER_NAME} and {} at {threads} thread(s), {} pending alongside, cancelled after \
                 {window} more adds, alternating (best of {W6_REPS})",
                MutexHeapTimer::NAME,
                report::count(bg)
            ));
            let (mut ours, mut base) = (Duration::MAX, Duration::MAX);
            for _ in 0..W6_REPS {
                ours = ours.min(add_cancel_timer(shape));
                base = base.min(add_cancel_baseline(shape));
            }
            let pairs = (threads * ops) as f64;
            if bg == 0 && window == 0 {
                by_threads[0].push((threads as f64, ours.as_nanos() as f64 / pairs));
                by_threads[1].push((threads as f64, base.as_nanos() as f64 / pairs));
            }
            let ratio = base.as_secs_f64() / ours.as_secs_f64();
            ratios.push((shape, ratio));
            for (name, d, r) in [
                (TIMER_NAME, ours, "1.00x (ours)".to_owned()),
                (MutexHeapTimer::NAME, base, report::ratio(ratio)),
            ] {
                t.row(vec![
                    name.to_owned(),
                    threads.to_string(),
                    report::count(bg),
                    if window == 0 {
                        "at once".to_owned()
                    } else {
                        format!("{} adds", report::count(window))
                    },
                    format!("{:.1}", d.as_secs_f64() * 1e3),
                    format!("{:.2}", pairs / d.as_secs_f64() / 1e6),
                    report::ns(d.as_nanos() as f64 / pairs),
                    r,
                ]);
            }
        }
        let ratio_of = |threads: usize, bg: usize| {
            ratios
                .iter()
                .find(|(s, _)| s.threads == threads && s.background == bg && s.window == 0)
                .map_or(0.0, |&(_, r)| r)
        };
        out.checks.push(targets::ratio("W6.1", ratio_of(1, 0)));
        out.checks.push(targets::ratio("W6.2", ratio_of(2, 0)));
        let [ours, base] = by_threads;
        out.charts.push(Chart {
            file: "w6-threads.svg",
            title: "W6: ns per add + cancel pair by adding threads (wall time / pairs)".to_owned(),
            x_label: "adding threads".to_owned(),
            y_label: "ns per pair".to_owned(),
            log_x: false,
            log_y: true,
            series: vec![
                Series {
                    name: TIMER_NAME.to_owned(),
                    points: ours,
                },
                Series {
                    name: MutexHeapTimer::NAME.to_owned(),
                    points: base,
                },
            ],
        });
        let (one, two) = (ratio_of(1, 0), ratio_of(2, 0));
        out.checks.push(targets::check(
            "W6.trend",
            format!("{} -> {}", report::ratio(one), report::ratio(two)),
            Some(two >= one),
        ));
        t.note(format!(
            "pair = one add (`add_or_submit(Task::after(30 s, || {{}}))`; baseline `schedule`) and one cancel \
             through the returned handle, at once or after the thread's next {} adds (by then our task has \
             left the ring: stamped, it waits in its shard's young queue, and the cancel is still one \
             compare-and-swap); the threads start together at a \
             barrier; wall time from the start to the last thread's end; best of {W6_REPS}, ours and the \
             baseline alternating; ratio = baseline time / ours (> 1: ours is faster); 4 threads on this \
             2-core machine are oversubscribed: those rows show what contention does",
            report::count(window)
        ));
        t.note(format!(
            "pending alongside 0 is W6 as docs/workloads.md defines it: each thread has few timers live, so the baseline's \
             heap stays small and a 30 s push lands at its bottom in O(1); the {} rows add that many other \
             timers first (untimed, due uniformly in 1 min ..= 1 h, never fired)",
            report::count(background)
        ));
        t.note(
            "ours: `Timer` on the real clock, tick 1 ms, 256 buckets per level, 1 executor thread (nothing fires); \
             each adding thread has its own shard, and a 30 s add is stamped in batches (no clock read per add); \
             baseline: `ScheduledThreadPoolExecutor`'s design with one thread: a parking_lot Mutex around a \
             BinaryHeap of (deadline, slot, generation) records, jobs in a slab, a Copy handle, lazy cancel with \
             compaction once stale records outnumber live ones, clock read outside the lock, a Condvar \
             notified only when an add lands before the head (see `benches/src/impls/mutex_heap.rs`)",
        );
        t.note(
            "every run checks: every add accepted, every cancel returned true, nothing fired, nothing pending \
             at the end (the `Timer`'s own counters, the baseline's length and fire count); neither allocates \
             per pair (a closure capturing nothing is not allocated)",
        );
        out.tables.push(t);

        let n = cfg.latency_ops();
        progress(&format!(
            "W6 add latency: {} single adds on one thread, ours and {}",
            report::count(n),
            MutexHeapTimer::NAME
        ));
        let mut l = Table::new(
            format!(
                "W6 add latency, {} single adds on one thread",
                report::count(n)
            ),
            &[
                "implementation",
                "pending alongside",
                "p50 ns",
                "p99 ns",
                "p99.9 ns",
                "max ns",
            ],
        );
        let mut clock = 0.0;
        for bg in [0, background] {
            let (ours, base) = add_latency(n, bg);
            clock = ours.clock;
            for (name, lat) in [(TIMER_NAME, ours), (MutexHeapTimer::NAME, base)] {
                l.row(vec![
                    name.to_owned(),
                    report::count(bg),
                    format!("{:.0}", lat.p50),
                    format!("{:.0}", lat.p99),
                    format!("{:.0}", lat.p999),
                    format!("{:.0}", lat.max),
                ]);
            }
        }
        l.note(format!(
            "each add timed alone with two `Instant::now()` reads; the reads' own median cost ({clock:.0} ns in \
             this run) is subtracted; the cancel after each add is not timed; ours includes every add that \
             drains its full ring into the wheel (one in 256) and every add after a drain, which reads the \
             clock once"
        ));
        out.tables.push(l);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_runs_verify() {
        for shape in [
            AddCancel {
                threads: 2,
                ops: 1000,
                background: 0,
                window: 0,
            },
            AddCancel {
                threads: 1,
                ops: 1000,
                background: 500,
                window: 100,
            },
        ] {
            assert!(add_cancel_timer(shape) > Duration::ZERO);
            assert!(add_cancel_baseline(shape) > Duration::ZERO);
        }
        let (ours, base) = add_latency(2000, 100);
        assert!(ours.p50 <= ours.p999 && base.p50 <= base.p999);
    }
}
