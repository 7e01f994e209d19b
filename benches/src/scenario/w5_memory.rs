//! W5 and W5b, memory per pending timer: the measurements and their report section.
//!
//! W5: N timers with W1's deadlines, each holding a `Box<dyn FnOnce() + Send>` that captures
//! nothing, inserted into each implementation; heap bytes held afterwards per timer, and the peak
//! while inserting (counting allocator). W5b: the same N tasks through the `Timer` service on a
//! manual clock, everything it holds per task.

use std::hint::black_box;
use std::time::Duration;

use tickwheel_wheel::TimingWheel;

use super::{Config, Outcome, Scenario};
use crate::TimerQueue;
#[cfg(feature = "tokio-peers")]
use crate::impls::delay_queue::TokioDelayQueue;
use crate::impls::flat::FlatWheel;
use crate::impls::heap::LazyHeap;
use crate::impls::hhwt::{Hhwt, HhwtCancel};
use crate::impls::pq::Pq;
use crate::measure::alloc;
use crate::report::targets;
use crate::report::{self, Table};
use crate::workloads::{self, SEED};

/// Item type of W5: a boxed task, as a timer service stores it.
pub type Job = Box<dyn FnOnce() + Send>;

/// W5's measurement: heap bytes per pending timer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MemoryResult {
    /// Bytes held per pending timer after inserting them all.
    pub retained_per_timer: f64,
    /// Peak bytes per timer while inserting (growth doubles buffers for a moment).
    pub peak_per_timer: f64,
}

/// W5: inserts one boxed no-capture closure per deadline and measures the heap the queue holds,
/// with the counting allocator (all zeros without it). Checks the pending count, then drops the
/// queue (firing a day of timers would only measure the flat wheel's ticking again).
pub fn memory_per_timer<Q: TimerQueue<Job>>(deadlines: &[u64]) -> MemoryResult {
    let n = deadlines.len().max(1) as f64;
    let base = alloc::current();
    alloc::reset_peak();
    let mut q = Q::new();
    for &d in deadlines {
        let job: Job = Box::new(|| {});
        black_box(q.insert(d, job));
    }
    let retained = alloc::current().saturating_sub(base);
    let peak = alloc::peak().saturating_sub(base);
    assert_eq!(
        q.len(),
        deadlines.len(),
        "{}: pending count after inserts",
        Q::NAME
    );
    drop(q);
    MemoryResult {
        retained_per_timer: retained as f64 / n,
        peak_per_timer: peak as f64 / n,
    }
}

/// W5b: heap bytes per pending task through the `Timer` service (a captureless
/// `Task::after`, handle dropped; everything the service holds for it), measured with the
/// counting allocator, and what `Timer::heap_bytes()` reports, both per task. On a manual clock
/// that never moves, so nothing fires.
pub fn timer_memory_per_task(deadlines: &[u64]) -> (f64, f64) {
    use std::sync::Arc;
    use tickwheel::{InlineExecutor, ManualClock, Task, Timer};
    let timer = Timer::builder()
        .clock(ManualClock::new())
        .executor(Arc::new(InlineExecutor::new()))
        .build()
        .expect("W5b: a timer");
    let n = deadlines.len().max(1) as f64;
    let base = alloc::current();
    for &d in deadlines {
        let h = timer
            .add_or_submit(Task::after(Duration::from_millis(d), || {}))
            .expect("W5b: add");
        drop(h);
    }
    let held = alloc::current().saturating_sub(base);
    assert_eq!(
        timer.pending(),
        deadlines.len() as u64,
        "W5b: pending count"
    );
    (held as f64 / n, timer.heap_bytes() as f64 / n)
}

/// W5 cross-check: what our wheel's own `heap_bytes()` reports per timer for the same inserts.
pub fn wheel_heap_bytes_per_timer(deadlines: &[u64]) -> f64 {
    let mut w = <TimingWheel<Job> as TimerQueue<Job>>::new();
    for &d in deadlines {
        let job: Job = Box::new(|| {});
        TimerQueue::insert(&mut w, d, job);
    }
    w.heap_bytes() as f64 / deadlines.len().max(1) as f64
}

/// W5: memory per pending timer.
pub(super) struct Memory;

fn mem_row<Q: TimerQueue<Job>>(
    deadlines: &[u64],
    progress: &mut dyn FnMut(&str),
) -> (String, MemoryResult) {
    progress(&format!("W5 {}", Q::NAME));
    (Q::NAME.to_owned(), memory_per_timer::<Q>(deadlines))
}

impl Scenario for Memory {
    fn id(&self) -> &'static str {
        "W5"
    }

    fn title(&self) -> &'static str {
        "memory: bytes per pending timer holding a Box<dyn FnOnce() + Send> (no captures)"
    }

    fn run(&self, cfg: &Config, progress: &mut dyn FnMut(&str)) -> Outcome {
        let n = cfg.n();
        let deadlines = workloads::long_range_deadlines(n, SEED);
        let mut t = Table::new(
            format!("W5 memory per pending timer, N = {}", report::count(n)),
            &[
                "implementation",
                "bytes/timer",
                "peak bytes/timer while inserting",
            ],
        );
        let mut out = Outcome::default();
        if !alloc::is_active() {
            t.note("counting allocator not installed: nothing measured");
            out.tables.push(t);
            return out;
        }
        let rows = [
            mem_row::<TimingWheel<Job>>(&deadlines, progress),
            mem_row::<LazyHeap<Job>>(&deadlines, progress),
            mem_row::<Pq<Job>>(&deadlines, progress),
            mem_row::<FlatWheel<Job>>(&deadlines, progress),
            mem_row::<Hhwt<Job>>(&deadlines, progress),
            mem_row::<HhwtCancel<Job>>(&deadlines, progress),
            #[cfg(feature = "tokio-peers")]
            mem_row::<TokioDelayQueue<Job>>(&deadlines, progress),
        ];
        for (name, r) in &rows {
            t.row(vec![
                name.clone(),
                format!("{:.1}", r.retained_per_timer),
                format!("{:.1}", r.peak_per_timer),
            ]);
        }
        let own = wheel_heap_bytes_per_timer(&deadlines);
        t.note(format!(
            "heap bytes held after inserting N timers (W1 deadlines), divided by N, counting allocator; includes \
             growth slack of vectors (up to 2x); the closures capture nothing, so the boxes allocate nothing. \
             Cross-check: TimingWheel::heap_bytes() reports {own:.1} B/timer"
        ));
        t.note("every run checks the pending count after the inserts");
        out.checks.push(targets::check(
            "W5.bytes",
            format!("{:.1} B", rows[0].1.retained_per_timer),
            Some(rows[0].1.retained_per_timer <= 48.0),
        ));
        out.tables.push(t);
        progress("W5b tickwheel Timer");
        let (through_timer, reported) = timer_memory_per_task(&deadlines);
        let mut b = Table::new(
            format!(
                "W5b memory per pending task through Timer, N = {}",
                report::count(n)
            ),
            &["what", "bytes/task"],
        );
        b.row(vec![
            "Timer: everything it holds (slot, ring, shard wheel)".to_owned(),
            format!("{through_timer:.1}"),
        ]);
        b.row(vec![
            "of which Timer::heap_bytes() accounts for".to_owned(),
            format!("{reported:.1}"),
        ]);
        b.row(vec![
            "bare TimingWheel (W5, for comparison)".to_owned(),
            format!("{:.1}", rows[0].1.retained_per_timer),
        ]);
        b.note("`add_or_submit(Task::after(d, || {}))` with W1's deadlines on a manual clock, the handle dropped; heap bytes held after the adds (counting allocator, the timer built before the measurement starts), divided by N; the service keeps one 64-byte slot per task (a cache line: the task's state word, its closure, deadlines and wheel link) besides the shard wheel's own entry and record");
        out.tables.push(b);
        out
    }
}
