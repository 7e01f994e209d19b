//! The window: only jobs due within the horizon are in memory; the rest are read from the store
//! in deadline order as the horizon reaches them, and the store is not read while nothing is
//! due.

mod support;

use std::time::Duration;

use support::{Env, HOUR, MIN, SEC};
use tickwheel_durable::Job;

const DAY: Duration = Duration::from_secs(86_400);

#[test]
fn memory_holds_the_horizon_not_the_store() {
    let env = Env::new();
    let jobs = env.builder().horizon(HOUR).open(env.path()).unwrap();
    // 2,000 jobs over 10 days, one every 432 s: about 8 per hour.
    let batch: Vec<Job> = (0..2000u32)
        .map(|i| Job::new(format!("j{i:05}"), "ok", env.now() + 432 * SEC * (i + 1)))
        .collect();
    jobs.schedule_batch(batch).unwrap();
    let mut most = 0;
    for _ in 0..10 * 24 {
        env.advance(&jobs, HOUR);
        most = most.max(jobs.stats().in_memory);
    }
    env.advance(&jobs, HOUR);
    let mut ran = env.ran();
    ran.sort();
    ran.dedup();
    assert_eq!(ran.len(), 2000, "every job ran, once");
    assert_eq!(env.runs.lock().unwrap().len(), 2000);
    assert!(
        most <= 20,
        "at most about two horizons' worth in memory, saw {most}"
    );
    assert_eq!(jobs.counts().unwrap().waiting, 0);
    let reads = jobs.stats().store_reads;
    // One read per job as it fires, and the window's range reads: about one per half horizon
    // (a read takes what is due within the next hour).
    assert!(reads <= 2000 + 2 * 24 * 10 + 10, "{reads} reads");
}

#[test]
fn the_store_is_not_read_while_nothing_is_due() {
    let env = Env::new();
    let jobs = env.builder().horizon(HOUR).open(env.path()).unwrap();
    jobs.schedule(Job::new("far", "ok", env.now() + 30 * DAY))
        .unwrap();
    let before = jobs.stats().store_reads;
    // Idle for 29 days (minus the horizon), moved an hour at a time.
    for _ in 0..29 * 24 - 1 {
        env.advance(&jobs, HOUR);
    }
    assert_eq!(
        jobs.stats().store_reads,
        before,
        "no reads while nothing is due"
    );
    env.advance(&jobs, DAY + HOUR);
    assert_eq!(env.ran(), ["far"]);
    // The horizon's read and the fire's.
    assert_eq!(jobs.stats().store_reads, before + 2);
}

#[test]
fn schedules_inside_the_horizon_go_straight_into_the_timer() {
    let env = Env::new();
    let jobs = env.builder().horizon(HOUR).open(env.path()).unwrap();
    let before = jobs.stats().store_reads;
    for i in 0..200u32 {
        jobs.schedule(Job::new(
            format!("s{i}"),
            "ok",
            env.now() + 10 * SEC * (i + 1),
        ))
        .unwrap();
    }
    assert_eq!(jobs.stats().in_memory, 200);
    assert_eq!(
        jobs.stats().store_reads,
        before,
        "no range read to arm them"
    );
    env.advance(&jobs, HOUR);
    assert_eq!(env.ran().len(), 200);
}

#[test]
fn jobs_stored_past_the_horizon_come_in_deadline_order() {
    let env = Env::new();
    let jobs = env.builder().horizon(10 * MIN).open(env.path()).unwrap();
    jobs.schedule(Job::new("first", "ok", env.now() + 20 * MIN))
        .unwrap();
    env.advance(&jobs, 5 * MIN);
    // Past the horizon too, after "first": it must not be armed before "first" is read.
    jobs.schedule(Job::new("second", "ok", env.now() + 16 * MIN))
        .unwrap();
    env.advance(&jobs, 15 * MIN - SEC);
    assert!(env.ran().is_empty(), "both still ahead");
    env.advance(&jobs, SEC);
    assert_eq!(env.ran(), ["first"]);
    env.advance(&jobs, MIN - SEC);
    assert_eq!(env.ran(), ["first"]);
    env.advance(&jobs, SEC);
    assert_eq!(env.ran(), ["first", "second"]);
}

#[test]
fn many_jobs_due_at_once_are_read_in_batches_and_all_run() {
    let env = Env::new();
    let jobs = env
        .builder()
        .horizon(MIN)
        .load_batch(64)
        .open(env.path())
        .unwrap();
    let at = env.now() + HOUR;
    let batch: Vec<Job> = (0..1000)
        .map(|i| Job::new(format!("b{i:04}"), "ok", at))
        .collect();
    jobs.schedule_batch(batch).unwrap();
    env.advance(&jobs, HOUR);
    assert_eq!(env.ran().len(), 1000);
    let mut ran = env.ran();
    ran.sort();
    ran.dedup();
    assert_eq!(ran.len(), 1000, "each once");
}

/// Found by W13: a load's task that ran on the pool before its handle was stored left that
/// handle behind as "the next load", and no later load of the shard was set: a reopened store
/// of many batches stopped loading after a few. Each batch here sets the next load for now, on
/// a two-thread pool, thousands of times.
#[test]
fn a_horizon_of_many_batches_is_loaded_whole() {
    const N: usize = 20_000;
    let env = Env::new();
    let jobs = env.builder().horizon(MIN).open(env.path()).unwrap();
    let batch: Vec<Job> = (0..N)
        .map(|i| Job::new(format!("h{i:05}"), "ok", env.now() + 30 * MIN))
        .collect();
    jobs.schedule_batch(batch).unwrap();
    assert_eq!(jobs.stats().in_memory, 0, "all past the one-minute horizon");
    jobs.close().unwrap();
    drop(jobs);
    let jobs = env
        .builder()
        .horizon(HOUR)
        .load_batch(2)
        .open(env.path())
        .unwrap();
    support::settle(&jobs);
    assert_eq!(jobs.stats().in_memory as usize, N, "every batch loaded");
    env.advance(&jobs, 30 * MIN);
    assert_eq!(env.ran().len(), N);
}
