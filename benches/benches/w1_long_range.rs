//! Criterion bench of W1: 100k timers log-uniform in 1 ms ..= 24 h, insert all then fire all.

mod common;

use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use wheel_benches::impls::{Contender, contenders, flat::FlatWheel};
use wheel_benches::workloads::{SEED, long_range_deadlines};

fn w1(c: &mut Criterion) {
    let deadlines = long_range_deadlines(100_000, SEED);
    let mut g = c.benchmark_group("w1_long_range_100k");
    g.sample_size(10).measurement_time(Duration::from_secs(3));
    for q in contenders() {
        common::bench_insert_fire(&mut g, q, &deadlines);
    }
    g.finish();
    // The flat wheel visits all 86.4M ticks of the day whatever N is: a smaller N keeps it short.
    let few = &deadlines[..2_000];
    let mut g = c.benchmark_group("w1_long_range_2k");
    g.sample_size(10).measurement_time(Duration::from_secs(5));
    let ours = contenders()[0];
    common::bench_insert_fire(&mut g, ours, few);
    common::bench_insert_fire(&mut g, Contender::of::<FlatWheel<u64>>(), few);
    g.finish();
}

criterion_group!(benches, w1);
criterion_main!(benches);
