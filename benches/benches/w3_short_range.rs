//! Criterion bench of W3: 100k timers uniform in 1..=500 ms, insert all then fire all.

mod common;

use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use tickwheel_wheel::TimingWheel;
use wheel_benches::impls::{
    delay_queue::TokioDelayQueue, flat::FlatWheel, heap::LazyHeap, hhwt::Hhwt, pq::Pq,
};
use wheel_benches::workloads::{SEED, short_range_deadlines};

fn w3(c: &mut Criterion) {
    let deadlines = short_range_deadlines(100_000, SEED);
    let mut g = c.benchmark_group("w3_short_range_100k");
    g.sample_size(20).measurement_time(Duration::from_secs(3));
    common::bench_insert_fire::<TimingWheel<u64>>(&mut g, &deadlines);
    common::bench_insert_fire::<FlatWheel<u64>>(&mut g, &deadlines);
    common::bench_insert_fire::<LazyHeap<u64>>(&mut g, &deadlines);
    common::bench_insert_fire::<Pq<u64>>(&mut g, &deadlines);
    common::bench_insert_fire::<Hhwt<u64>>(&mut g, &deadlines);
    common::bench_insert_fire::<TokioDelayQueue<u64>>(&mut g, &deadlines);
    g.finish();
}

criterion_group!(benches, w3);
criterion_main!(benches);
