//! Shared helpers of the criterion benches: one group per workload, one function per implementation.

use criterion::{BenchmarkGroup, Throughput, measurement::WallTime};
use wheel_benches::TimerQueue;
use wheel_benches::workloads::insert_then_fire;

/// Benchmarks insert-all-then-fire-all of `deadlines` for `Q`, reporting per-timer throughput.
pub(crate) fn bench_insert_fire<Q: TimerQueue<u64>>(
    g: &mut BenchmarkGroup<'_, WallTime>,
    deadlines: &[u64],
) {
    g.throughput(Throughput::Elements(deadlines.len() as u64));
    g.bench_function(Q::NAME, |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| insert_then_fire::<Q>(deadlines).elapsed)
                .sum()
        })
    });
}
