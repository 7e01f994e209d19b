//! Runs: a failure (an error or a panic) is retried under the policy, then the job is dead; dead
//! jobs can be listed, requeued and dropped; the handler sees its attempt.

mod support;

use std::sync::{Arc, Barrier};
use std::time::Duration;

use support::{Env, HOUR, MIN, SEC, settle};
use tickwheel_durable::{Job, JobContext, RetryPolicy};

#[test]
fn a_failing_job_is_retried_with_backoff_then_dead() {
    let env = Env::new();
    let policy = RetryPolicy::new(3).backoff(10 * SEC, 3);
    let jobs = env.builder().retry(policy).open(env.path()).unwrap();
    jobs.schedule(Job::new("pay-1", "fail", env.now() + MIN))
        .unwrap();
    env.advance(&jobs, MIN);
    env.advance(&jobs, 10 * SEC - Duration::from_millis(1));
    assert_eq!(env.ran().len(), 1, "the retry not early");
    env.advance(&jobs, Duration::from_millis(1));
    assert_eq!(env.ran().len(), 2);
    assert_eq!(jobs.get("pay-1").unwrap().unwrap().attempts(), 2);
    env.advance(&jobs, 30 * SEC);
    let attempts: Vec<u32> = env.runs.lock().unwrap().iter().map(|r| r.attempt).collect();
    assert_eq!(attempts, [1, 2, 3]);
    assert_eq!(jobs.get("pay-1").unwrap(), None, "no longer waiting");
    let dead = jobs.dead_letters(None, 10).unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].job.key(), "pay-1");
    assert_eq!(dead[0].job.attempts(), 3);
    assert_eq!(dead[0].reason, "refused by the payment service");
    assert_eq!(dead[0].died, env.now());
    env.advance(&jobs, HOUR);
    assert_eq!(env.ran().len(), 3, "a dead job does not run");
    let s = jobs.stats();
    assert_eq!((s.fired, s.retried, s.dead, s.succeeded), (3, 2, 1, 0));
    assert_eq!(jobs.counts().unwrap().dead, 1);
}

#[test]
fn a_panicking_handler_counts_as_a_failed_attempt() {
    let env = Env::new();
    let jobs = env
        .builder()
        .retry(RetryPolicy::never())
        .open(env.path())
        .unwrap();
    jobs.schedule(Job::new("boom", "panic", env.now())).unwrap();
    settle(&jobs);
    let dead = jobs.dead_letters(None, 10).unwrap();
    assert_eq!(dead.len(), 1);
    assert!(
        dead[0].reason.contains("panicked on purpose"),
        "{}",
        dead[0].reason
    );
    assert_eq!(
        jobs.timer().stats().panicked,
        0,
        "caught by the jobs, not the pool"
    );
}

#[test]
fn a_dead_job_can_be_requeued_or_dropped() {
    let env = Env::new();
    let jobs = env
        .builder()
        .retry(RetryPolicy::never())
        .open(env.path())
        .unwrap();
    for key in ["a", "b", "c"] {
        jobs.schedule(Job::new(key, "fail", env.now())).unwrap();
    }
    settle(&jobs);
    let keys = |v: Vec<tickwheel_durable::DeadJob>| -> Vec<String> {
        v.into_iter().map(|d| d.job.key().to_owned()).collect()
    };
    assert_eq!(keys(jobs.dead_letters(None, 10).unwrap()), ["a", "b", "c"]);
    assert_eq!(
        keys(jobs.dead_letters(Some("a"), 1).unwrap()),
        ["b"],
        "paged"
    );
    assert!(jobs.drop_dead("b").unwrap());
    assert!(!jobs.drop_dead("b").unwrap());
    // A waiting job of the same key refuses a requeue.
    jobs.schedule(Job::new("c", "ok", env.now() + HOUR))
        .unwrap();
    assert!(jobs.requeue("c", env.now()).is_err());
    assert!(jobs.requeue("a", env.now() + MIN).unwrap());
    assert!(!jobs.requeue("zz", env.now()).unwrap());
    assert_eq!(
        jobs.get("a").unwrap().unwrap().attempts(),
        0,
        "attempts reset"
    );
    env.advance(&jobs, MIN);
    let attempts: Vec<(String, u32)> = env
        .runs
        .lock()
        .unwrap()
        .iter()
        .map(|r| (r.key.clone(), r.attempt))
        .collect();
    assert_eq!(attempts.last(), Some(&("a".to_owned(), 1)));
    assert_eq!(
        keys(jobs.dead_letters(None, 10).unwrap()),
        ["a", "c"],
        "a failed again"
    );
}

#[test]
fn a_cancel_while_the_handler_runs_answers_false_and_stops_the_retries() {
    let env = Env::new();
    let started = Arc::new(Barrier::new(2));
    let release = Arc::new(Barrier::new(2));
    let (s, r) = (started.clone(), release.clone());
    let jobs = env
        .builder()
        .handler("slow-fail", move |_: &JobContext<'_>| {
            s.wait();
            r.wait();
            Err("failed".into())
        })
        .open(env.path())
        .unwrap();
    jobs.schedule(Job::new("k", "slow-fail", env.now()))
        .unwrap();
    started.wait();
    assert!(!jobs.cancel("k").unwrap(), "it had started");
    release.wait();
    settle(&jobs);
    env.advance(&jobs, HOUR);
    assert_eq!(jobs.get("k").unwrap(), None);
    assert!(jobs.dead_letters(None, 10).unwrap().is_empty());
    assert_eq!(jobs.stats().fired, 1, "no retry of a cancelled job");
}

#[test]
fn a_reschedule_while_the_handler_runs_runs_it_again_at_the_new_deadline() {
    let env = Env::new();
    let started = Arc::new(Barrier::new(2));
    let release = Arc::new(Barrier::new(2));
    let (s, r) = (started.clone(), release.clone());
    let runs = env.runs.clone();
    let jobs = env
        .builder()
        .handler("slow", move |cx: &JobContext<'_>| {
            runs.lock().unwrap().push(support::Run {
                key: cx.key().to_owned(),
                attempt: cx.attempt(),
                at: cx.deadline(),
                late: cx.lateness(),
            });
            if runs.lock().unwrap().len() == 1 {
                s.wait();
                r.wait();
            }
            Ok(())
        })
        .open(env.path())
        .unwrap();
    jobs.schedule(Job::new("k", "slow", env.now())).unwrap();
    started.wait();
    assert!(jobs.reschedule("k", env.now() + MIN).unwrap());
    release.wait();
    settle(&jobs);
    assert_eq!(env.ran(), ["k"]);
    env.advance(&jobs, MIN);
    assert_eq!(env.ran(), ["k", "k"]);
    assert_eq!(jobs.get("k").unwrap(), None);
}

#[test]
fn lateness_is_measured_from_the_wall_clock_deadline() {
    let env = Env::new();
    let jobs = env.open();
    jobs.schedule(Job::new("on-time", "ok", env.now() + SEC))
        .unwrap();
    env.advance(&jobs, SEC);
    let s = jobs.stats();
    assert_eq!(
        (s.lateness_p50, s.lateness_max),
        (Duration::ZERO, Duration::ZERO)
    );
    assert!(s.commits >= 1 && s.commit_p99 > Duration::ZERO);
}
