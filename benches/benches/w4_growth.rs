//! Criterion bench of W4: W1 at 10k, 100k and 1M timers, per implementation (flat wheel excluded:
//! a day of 1 ms ticks per iteration).

use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use tickwheel_wheel::TimingWheel;
use wheel_benches::TimerQueue;
use wheel_benches::impls::{heap::LazyHeap, hhwt::Hhwt};
use wheel_benches::workloads::{SEED, insert_then_fire, long_range_deadlines};

fn sizes<Q: TimerQueue<u64>>(c: &mut Criterion, deadlines: &[u64]) {
    let mut g = c.benchmark_group(format!("w4_growth/{}", Q::NAME));
    g.sample_size(10).measurement_time(Duration::from_secs(3));
    for n in [10_000usize, 100_000, 1_000_000] {
        let d = &deadlines[..n];
        g.throughput(Throughput::Elements(n as u64));
        g.bench_with_input(BenchmarkId::from_parameter(n), d, |b, d| {
            b.iter_custom(|iters| (0..iters).map(|_| insert_then_fire::<Q>(d).elapsed).sum())
        });
    }
    g.finish();
}

fn w4(c: &mut Criterion) {
    let deadlines = long_range_deadlines(1_000_000, SEED);
    sizes::<TimingWheel<u64>>(c, &deadlines);
    sizes::<LazyHeap<u64>>(c, &deadlines);
    sizes::<Hhwt<u64>>(c, &deadlines);
}

criterion_group!(benches, w4);
criterion_main!(benches);
