//! Shared helpers of the criterion benches: one group per workload, one function per implementation.

use criterion::{BenchmarkGroup, Throughput, measurement::WallTime};
use wheel_benches::impls::Contender;

/// Benchmarks insert-all-then-fire-all of `deadlines` for `c`, reporting per-timer throughput.
pub(crate) fn bench_insert_fire(
    g: &mut BenchmarkGroup<'_, WallTime>,
    c: Contender,
    deadlines: &[u64],
) {
    g.throughput(Throughput::Elements(deadlines.len() as u64));
    g.bench_function(c.name, |b| {
        b.iter_custom(|iters| (0..iters).map(|_| (c.run)(deadlines).elapsed).sum())
    });
}
