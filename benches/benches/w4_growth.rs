//! Criterion bench of W4: W1 at 10k, 100k and 1M timers, per implementation (flat wheel excluded:
//! a day of 1 ms ticks per iteration).

use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use wheel_benches::impls::{Contender, contenders};
use wheel_benches::workloads::{SEED, long_range_deadlines};

fn sizes(c: &mut Criterion, q: Contender, deadlines: &[u64]) {
    let mut g = c.benchmark_group(format!("w4_growth/{}", q.name));
    g.sample_size(10).measurement_time(Duration::from_secs(3));
    for n in [10_000usize, 100_000, 1_000_000] {
        let d = &deadlines[..n];
        g.throughput(Throughput::Elements(n as u64));
        g.bench_with_input(BenchmarkId::from_parameter(n), d, |b, d| {
            b.iter_custom(|iters| (0..iters).map(|_| (q.run)(d).elapsed).sum())
        });
    }
    g.finish();
}

fn w4(c: &mut Criterion) {
    let deadlines = long_range_deadlines(1_000_000, SEED);
    for q in contenders() {
        sizes(c, q, &deadlines);
    }
}

criterion_group!(benches, w4);
criterion_main!(benches);
