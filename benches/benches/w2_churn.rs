//! Criterion bench of W2: churn with ~20k live timers (30 s timeouts, 99% cancelled early).

use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use wheel_benches::impls::cancellers;
use wheel_benches::scenario::ChurnParams;

fn w2(c: &mut Criterion) {
    let p = ChurnParams::for_live(20_000, 5_000);
    let mut g = c.benchmark_group("w2_churn_20k_live");
    g.sample_size(10).measurement_time(Duration::from_secs(5));
    for q in cancellers() {
        g.bench_function(q.name, |b| {
            b.iter_custom(|iters| (0..iters).map(|_| (q.churn)(&p).timing.elapsed).sum())
        });
    }
    g.finish();
}

criterion_group!(benches, w2);
criterion_main!(benches);
