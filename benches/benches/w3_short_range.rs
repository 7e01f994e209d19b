//! Criterion bench of W3: 100k timers uniform in 1..=500 ms, insert all then fire all.

mod common;

use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use wheel_benches::impls::{Contender, contenders, flat::FlatWheel};
use wheel_benches::scenario::short_range_deadlines;
use wheel_benches::workloads::SEED;

fn w3(c: &mut Criterion) {
    let deadlines = short_range_deadlines(100_000, SEED);
    let mut g = c.benchmark_group("w3_short_range_100k");
    g.sample_size(20).measurement_time(Duration::from_secs(3));
    // As `wheelbench` runs W3: the flat wheel second, after ours.
    let mut list = contenders();
    list.insert(1, Contender::of::<FlatWheel<u64>>());
    for q in list {
        common::bench_insert_fire(&mut g, q, &deadlines);
    }
    g.finish();
}

criterion_group!(benches, w3);
criterion_main!(benches);
