//! Criterion bench of W2: churn with ~20k live timers (30 s timeouts, 99% cancelled early).

use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use tickwheel_wheel::TimingWheel;
use wheel_benches::Cancel;
use wheel_benches::impls::{heap::LazyHeap, pq::Pq};
use wheel_benches::workloads::{ChurnParams, churn};

fn one<Q: Cancel<u64>>(c: &mut Criterion, p: &ChurnParams) {
    c.benchmark_group("w2_churn_20k_live")
        .sample_size(10)
        .measurement_time(Duration::from_secs(5))
        .bench_function(Q::NAME, |b| {
            b.iter_custom(|iters| (0..iters).map(|_| churn::<Q>(p).timing.elapsed).sum())
        });
}

fn w2(c: &mut Criterion) {
    let p = ChurnParams::for_live(20_000, 5_000);
    one::<TimingWheel<u64>>(c, &p);
    one::<LazyHeap<u64>>(c, &p);
    one::<Pq<u64>>(c, &p);
}

criterion_group!(benches, w2);
criterion_main!(benches);
