//! W12, executors that protect each other: the workload, its measurement and its report section.
//!
//! `n` tasks due uniformly over `spread` on the real clock; 1% belong to the class `report` and
//! block for 200 ms when they run, the rest return at once. Through `Timer` with slow-task
//! isolation on (threshold 50 ms, 3 strikes within 1 s) and off, and through the
//! `Mutex<BinaryHeap>` timer thread handing every due job to a rayon pool as large as ours in
//! all (timer's pool + slow pool). Each task records its lateness; short tasks that have not run
//! by the cut-off (the last deadline plus `wait`) count as later than any measured.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering::Relaxed};
use std::thread;
use std::time::{Duration, Instant};

use tickwheel::{Isolation, ShutdownOptions, Task, Timer};

use super::{Config, Outcome, Scenario};
use crate::impls::mutex_heap::MutexHeapTimer;
use crate::report::targets;
use crate::report::{self, Table};
use crate::rng::Rng;
use crate::service::{TIMER_NAME, signed_ns};
use crate::workloads::SEED;

/// Threads of the timer's pool, and of its slow pool.
const FAST: usize = 2;
const SLOW: usize = 2;
/// How long a `report` run blocks.
const BLOCK: Duration = Duration::from_millis(200);

/// What one contender did in W12.
#[derive(Clone, Debug, PartialEq)]
pub struct SlowResult {
    /// Short tasks, and how many of them had not run by the cut-off.
    pub short: usize,
    /// Short tasks not run by the cut-off.
    pub censored: usize,
    /// Lateness of the short tasks, ns: p50, p99, max (`None`: beyond the cut-off).
    pub p50: Option<i64>,
    /// 99th percentile.
    pub p99: Option<i64>,
    /// Largest.
    pub max: Option<i64>,
    /// `report` runs that completed by the cut-off.
    pub reports_run: usize,
    /// `report` tasks.
    pub reports: usize,
}

const NOT_RUN: i64 = i64::MAX;

struct Record {
    lateness: Vec<AtomicI64>,
    short_run: AtomicUsize,
    reports_run: AtomicUsize,
    /// Set at the cut-off: jobs still queued return at once instead of blocking.
    stop: AtomicBool,
}

/// Runs W12 over one contender, `add(at, job)` from this thread.
fn run(
    n: usize,
    spread: Duration,
    wait: Duration,
    add: impl Fn(Instant, Box<dyn FnOnce() + Send>, bool),
) -> (SlowResult, Arc<Record>) {
    let mut rng = Rng::new(SEED ^ 0x5104);
    let record = Arc::new(Record {
        lateness: (0..n).map(|_| AtomicI64::new(NOT_RUN)).collect(),
        short_run: AtomicUsize::new(0),
        reports_run: AtomicUsize::new(0),
        stop: AtomicBool::new(false),
    });
    let spread_ns = u64::try_from(spread.as_nanos()).unwrap_or(u64::MAX);
    let base = Instant::now() + Duration::from_millis(200);
    let mut reports = 0;
    for i in 0..n {
        let at = base + Duration::from_nanos(rng.range(0, spread_ns - 1));
        let report = rng.range(0, 99) == 0;
        reports += usize::from(report);
        let r = record.clone();
        let job: Box<dyn FnOnce() + Send> = Box::new(move || {
            if r.stop.load(Relaxed) {
                return;
            }
            if report {
                thread::sleep(BLOCK);
                r.reports_run.fetch_add(1, Relaxed);
            } else {
                r.lateness[i].store(signed_ns(Instant::now(), at), Relaxed);
                r.short_run.fetch_add(1, Relaxed);
            }
        });
        add(at, job, report);
    }
    let short = n - reports;
    let cutoff = base + spread + wait;
    while record.short_run.load(Relaxed) < short && Instant::now() < cutoff {
        thread::sleep(Duration::from_millis(5));
    }
    record.stop.store(true, Relaxed);
    let mut late: Vec<i64> = (0..n).map(|i| record.lateness[i].load(Relaxed)).collect();
    late.sort_unstable();
    // Reports never record lateness: they sit at the top with the censored short tasks.
    late.truncate(short);
    let censored = late.iter().filter(|&&l| l == NOT_RUN).count();
    let early = late.iter().take_while(|&&l| l < 0).count();
    assert_eq!(early, 0, "W12: {early} short tasks ran early");
    let at = |q: f64| {
        let v = late[((short as f64 * q).ceil() as usize).clamp(1, short) - 1];
        (v != NOT_RUN).then_some(v)
    };
    let result = SlowResult {
        short,
        censored,
        p50: at(0.50),
        p99: at(0.99),
        max: at(1.0),
        reports_run: record.reports_run.load(Relaxed),
        reports,
    };
    (result, record)
}

/// W12 through `Timer`, isolation on or off.
pub fn slow_timer(n: usize, spread: Duration, wait: Duration, isolate: bool) -> SlowResult {
    let builder = Timer::builder().name("w12").threads(FAST);
    let builder = if isolate {
        builder.isolation(
            Isolation::new()
                .threshold(Duration::from_millis(50))
                .strikes(3)
                .window(Duration::from_secs(1))
                .slow_threads(SLOW),
        )
    } else {
        builder.no_isolation()
    };
    let timer = builder
        .build()
        .unwrap_or_else(|e| panic!("W12 {TIMER_NAME}: build failed: {e}"));
    let (result, record) = run(n, spread, wait, |at, job, report| {
        let task = Task::at(at, job);
        let task = if report { task.class("report") } else { task };
        timer
            .add_or_submit(task)
            .unwrap_or_else(|e| panic!("W12 {TIMER_NAME}: add refused: {e}"));
    });
    let report = timer.shutdown_with(ShutdownOptions::new().wait_at_most(2 * BLOCK));
    drop(report);
    drop(record);
    result
}

/// W12 through the `Mutex<BinaryHeap>` timer thread and a pool of `FAST + SLOW` threads.
pub fn slow_heap(n: usize, spread: Duration, wait: Duration) -> SlowResult {
    let pool = Arc::new(
        rayon::ThreadPoolBuilder::new()
            .num_threads(FAST + SLOW)
            .thread_name(|i| format!("w12-heap-{i}"))
            .build()
            .expect("W12: a rayon pool"),
    );
    let timer = MutexHeapTimer::new();
    let (result, _record) = run(n, spread, wait, |at, job, _| {
        let pool = pool.clone();
        timer.schedule_at(at, Box::new(move || pool.spawn(job)));
    });
    drop(timer.shutdown());
    result
}

/// W12: slow tasks among punctual ones.
pub(super) struct Slow;

impl Scenario for Slow {
    fn id(&self) -> &'static str {
        "W12"
    }

    fn title(&self) -> &'static str {
        "executors that protect each other: 1% of tasks block 200 ms, the rest must stay punctual"
    }

    fn run(&self, cfg: &Config, progress: &mut dyn FnMut(&str)) -> Outcome {
        let (n, spread, wait) = if cfg.quick {
            (10_000, Duration::from_secs(2), Duration::from_secs(3))
        } else {
            (100_000, Duration::from_secs(10), Duration::from_secs(10))
        };
        progress(&format!("W12 {TIMER_NAME}, isolation on"));
        let on = slow_timer(n, spread, wait, true);
        progress(&format!("W12 {TIMER_NAME}, isolation off"));
        let off = slow_timer(n, spread, wait, false);
        progress(&format!("W12 {}", MutexHeapTimer::NAME));
        let heap = slow_heap(n, spread, wait);
        let ms = |v: Option<i64>| match v {
            Some(ns) => format!("{:.2}", ns as f64 / 1e6),
            None => format!("> {:.0} s", wait.as_secs_f64()),
        };
        let with_unit = |v: Option<i64>| match v {
            Some(_) => format!("{} ms", ms(v)),
            None => ms(v),
        };
        let mut t = Table::new(
            format!(
                "W12 {} tasks over {} s, 1% blocking {} ms",
                report::count(n),
                spread.as_secs(),
                BLOCK.as_millis()
            ),
            &[
                "implementation",
                "pool threads",
                "short p50 ms",
                "short p99 ms",
                "short max ms",
                "short not run by cut-off",
                "report runs done",
            ],
        );
        let rows = [
            (
                format!("{TIMER_NAME}, isolation on"),
                format!("{FAST} + {SLOW} slow"),
                &on,
            ),
            (
                format!("{TIMER_NAME}, isolation off"),
                format!("{FAST}"),
                &off,
            ),
            (
                MutexHeapTimer::NAME.to_owned(),
                format!("{}", FAST + SLOW),
                &heap,
            ),
        ];
        for (name, threads, r) in rows {
            t.row(vec![
                name,
                threads,
                ms(r.p50),
                ms(r.p99),
                ms(r.max),
                format!("{} of {}", r.censored, r.short),
                format!("{} of {}", r.reports_run, r.reports),
            ]);
        }
        t.note(format!(
            "lateness of the short tasks (start minus deadline, measured by the task); the cut-off is the last deadline plus {} s, after which queued jobs return at once; isolation: threshold 50 ms, 3 strikes within 1 s, slow pool of {SLOW} threads, a named class runs on at most threads - 1 of the timer's pool; the heap's timer thread hands every job to a pool of {} threads",
            wait.as_secs(),
            FAST + SLOW
        ));
        let tick_plus_2ms = 3_000_000;
        Outcome {
            tables: vec![t],
            charts: Vec::new(),
            checks: vec![targets::check(
                "W12.p99",
                format!("{} (off: {})", with_unit(on.p99), with_unit(off.p99)),
                Some(on.p99.is_some_and(|p| p <= tick_plus_2ms)),
            )],
        }
    }
}
