//! Criterion bench of W1: 100k timers log-uniform in 1 ms ..= 24 h, insert all then fire all.

mod common;

use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use tickwheel_wheel::TimingWheel;
use wheel_benches::impls::{
    delay_queue::TokioDelayQueue, flat::FlatWheel, heap::LazyHeap, hhwt::Hhwt, pq::Pq,
};
use wheel_benches::workloads::{SEED, long_range_deadlines};

fn w1(c: &mut Criterion) {
    let deadlines = long_range_deadlines(100_000, SEED);
    let mut g = c.benchmark_group("w1_long_range_100k");
    g.sample_size(10).measurement_time(Duration::from_secs(3));
    common::bench_insert_fire::<TimingWheel<u64>>(&mut g, &deadlines);
    common::bench_insert_fire::<LazyHeap<u64>>(&mut g, &deadlines);
    common::bench_insert_fire::<Pq<u64>>(&mut g, &deadlines);
    common::bench_insert_fire::<Hhwt<u64>>(&mut g, &deadlines);
    common::bench_insert_fire::<TokioDelayQueue<u64>>(&mut g, &deadlines);
    g.finish();
    // The flat wheel visits all 86.4M ticks of the day whatever N is: a smaller N keeps it short.
    let few = &deadlines[..2_000];
    let mut g = c.benchmark_group("w1_long_range_2k");
    g.sample_size(10).measurement_time(Duration::from_secs(5));
    common::bench_insert_fire::<TimingWheel<u64>>(&mut g, few);
    common::bench_insert_fire::<FlatWheel<u64>>(&mut g, few);
    g.finish();
}

criterion_group!(benches, w1);
criterion_main!(benches);
