//! W6–W8: the threaded `Timer` service on the real clock (threads, idle, accuracy) as tables.

use std::time::Duration;

use super::{Config, Outcome, Scenario};
use crate::mutex_heap::MutexHeapTimer;
use crate::report::{self, Table};
use crate::service::{self, AddCancel, Lateness, TIMER_NAME};
use crate::svg::{Chart, Series};
use crate::targets;
use crate::workloads::SEED;

/// W6: adds and cancels from 1, 2 and 4 threads, and the latency of single adds.
pub(super) struct Threads;

/// W7: an idle timer holding many pending timers.
pub(super) struct Idle;

/// W8: lateness on the real clock.
pub(super) struct Accuracy;

/// Repetitions of each W6 measurement, alternating ours and the baseline.
const W6_REPS: usize = 5;

fn ms(ns: i64) -> String {
    format!("{:.3}", ns as f64 / 1e6)
}

fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

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
                ours = ours.min(service::add_cancel_timer(shape));
                base = base.min(service::add_cancel_baseline(shape));
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
             through the returned handle, at once or after the thread's next {} adds (by then our task sits \
             in its shard's wheel, so the cancel takes that shard's lock); the threads start together at a \
             barrier; wall time from the start to the last thread's end; best of {W6_REPS}, ours and the \
             baseline alternating; ratio = baseline time / ours (> 1: ours is faster); 4 threads on this \
             2-core machine are oversubscribed: those rows show what contention does",
            report::count(window)
        ));
        t.note(format!(
            "pending alongside 0 is the brief's workload: each thread has few timers live, so the baseline's \
             heap stays small and a 30 s push lands at its bottom in O(1); the {} rows add that many other \
             timers first (untimed, due uniformly in 1 min ..= 1 h, never fired)",
            report::count(background)
        ));
        t.note(
            "ours: `Timer` on the real clock, tick 1 ms, 64 buckets per level, 1 executor thread (nothing fires); \
             each adding thread has its own shard, and a 30 s add is stamped in batches (no clock read per add); \
             baseline: `ScheduledThreadPoolExecutor`'s design with one thread: a parking_lot Mutex around a \
             BinaryHeap of (deadline, slot, generation) records, jobs in a slab, a Copy handle, lazy cancel with \
             compaction once stale records outnumber live ones, clock read outside the lock, a Condvar \
             notified only when an add lands before the head (see `benches/src/mutex_heap.rs`)",
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
            let (ours, base) = service::add_latency(n, bg);
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

impl Scenario for Idle {
    fn id(&self) -> &'static str {
        "W7"
    }

    fn title(&self) -> &'static str {
        "idle: timers pending an hour out, tick-thread wake-ups and CPU over an idle window (real clock)"
    }

    fn run(&self, cfg: &Config, progress: &mut dyn FnMut(&str)) -> Outcome {
        let (n, window) = cfg.idle();
        let settle = Duration::from_millis(200);
        progress(&format!(
            "W7 {TIMER_NAME}: {} timers 1 h out, idle for {}",
            report::count(n),
            secs(window)
        ));
        let r = service::idle(n, window, settle);
        let mut t = Table::new(
            format!(
                "W7 idle, {} timers pending an hour out, {} window",
                report::count(n),
                secs(window)
            ),
            &[
                "implementation",
                "tick wake-ups (stats)",
                "tick thread sleeps (/proc)",
                "tick thread CPU ms",
                "process CPU ms",
            ],
        );
        let na = || "n/a".to_owned();
        let (sleeps, tick_cpu) = match r.tick_thread {
            Some((a, b)) => (
                (b.voluntary_switches - a.voluntary_switches).to_string(),
                (b.cpu.saturating_sub(a.cpu).as_millis()).to_string(),
            ),
            None => (na(), na()),
        };
        t.row(vec![
            TIMER_NAME.to_owned(),
            r.wakeups.to_string(),
            sleeps,
            tick_cpu,
            r.process_cpu.map_or_else(na, |d| d.as_millis().to_string()),
        ]);
        let w = window.as_secs_f64();
        t.note(format!(
            "not measured, for contrast: Netty's HashedWheelTimer wakes every tick even when idle ({:.0} \
             wake-ups in {} at a 1 ms tick); Kafka's SystemTimer reaper polls with a 200 ms cap ({:.0})",
            w * 1000.0,
            secs(window),
            w / 0.2
        ));
        t.note(format!(
            "method: `Timer` on the real clock (tick 1 ms, 2 executor threads); {} one-shot tasks \
             `Task::after(1 h, || {{}})` added in {:.0} ms, handles dropped; after {} ms to settle, sampled \
             `stats().tick_wakeups`, the tick thread's `/proc/self/task/<tid>/{{stat,status}}` and \
             `/proc/self/stat`, slept the window on the main thread, sampled again",
            report::count(n),
            r.add_time.as_secs_f64() * 1e3,
            settle.as_millis()
        ));
        t.note(
            "tick thread sleeps = its voluntary context switches, an independent count of its wake-ups; CPU \
             times are utime + stime in 10 ms clock ticks (the process figure includes this program's own \
             threads)",
        );
        t.note("every run checks: all timers pending and none fired before and after the window; shutdown hands all back");
        let mut out = Outcome::default();
        out.checks.push(targets::check(
            "W7.wakeups",
            format!(
                "{} in {} ({} pending)",
                r.wakeups,
                secs(window),
                report::count(n)
            ),
            Some(r.wakeups == 0),
        ));
        out.tables.push(t);
        out
    }
}

impl Scenario for Accuracy {
    fn id(&self) -> &'static str {
        "W8"
    }

    fn title(&self) -> &'static str {
        "accuracy: lateness of real-clock timers spread over a window, tick 1 ms"
    }

    fn run(&self, cfg: &Config, progress: &mut dyn FnMut(&str)) -> Outcome {
        let (n, spread) = cfg.accuracy();
        let tick = Duration::from_millis(1);
        let lead = Duration::from_millis(250);
        progress(&format!(
            "W8 {TIMER_NAME}: {} timers over {}",
            report::count(n),
            secs(spread)
        ));
        let r = service::accuracy(n, spread, lead, SEED);
        let chart = Chart {
            file: "w8-lateness.svg",
            title: format!(
                "W8: lateness of {} real-clock timers by percentile (tick 1 ms)",
                report::count(n)
            ),
            x_label: "percentile".to_owned(),
            y_label: "lateness ms".to_owned(),
            log_x: false,
            log_y: true,
            series: vec![Series {
                name: TIMER_NAME.to_owned(),
                points: r
                    .percentiles
                    .iter()
                    .map(|&(q, ns)| (q, (ns as f64 / 1e6).max(1e-3)))
                    .collect(),
            }],
        };
        let mut t = Table::new(
            format!(
                "W8 accuracy, {} timers due uniformly over {}, tick 1 ms",
                report::count(n),
                secs(spread)
            ),
            &[
                "lateness source",
                "p50 ms",
                "p99 ms",
                "max ms",
                "early fires",
            ],
        );
        let row = |name: &str, l: Lateness, early: String| {
            vec![name.to_owned(), ms(l.p50), ms(l.p99), ms(l.max), early]
        };
        t.row(row(
            "tasks: Instant::now() - deadline",
            r.measured,
            r.early.to_string(),
        ));
        t.row(row(
            "Timer::stats() (to within 1/8)",
            r.stats,
            "-".to_owned(),
        ));
        t.note(format!(
            "method: `Timer` on the real clock, tick 1 ms, 2 executor threads; {} tasks `Task::at(deadline, ..)` \
             with deadlines uniform over {} starting {} ms after the first add (all added in {:.0} ms, in \
             random order); each task stores `Instant::now() - deadline` (signed) into its own preallocated \
             slot; percentiles by nearest rank; early = ran before its deadline (earliest run here: {} ms \
             after its deadline)",
            report::count(n),
            secs(spread),
            lead.as_millis(),
            r.add_time.as_secs_f64() * 1e3,
            ms(r.min)
        ));
        t.note(
            "the machine may be shared and busy: these are the figures this run measured; the run fails only \
             on an early fire, a lost task (not run 10 s after the last deadline), a double run or a miscount",
        );
        let mut out = Outcome::default();
        let target = tick + Duration::from_millis(1);
        out.checks.push(targets::check(
            "W8.p99",
            format!("{} ms", ms(r.measured.p99)),
            Some(r.measured.p99 <= i64::try_from(target.as_nanos()).unwrap_or(i64::MAX)),
        ));
        out.checks.push(targets::check(
            "W8.early",
            format!("{} of {}", r.early, report::count(n)),
            Some(r.early == 0),
        ));
        out.tables.push(t);
        out.charts.push(chart);
        out
    }
}
