//! Schedule, cancel, reschedule, read: what each operation promises, and bad input.

mod support;

use std::time::Duration;

use support::{Env, HOUR, MIN, SEC, settle};
use tickwheel_durable::{Job, JobError, MAX_KEY_LEN};

#[test]
fn a_job_runs_at_its_deadline_and_not_before() {
    let env = Env::new();
    let jobs = env.open();
    jobs.schedule(Job::new("order-1", "ok", env.now() + 15 * MIN).with_payload(b"42".to_vec()))
        .unwrap();
    env.advance(&jobs, 15 * MIN - Duration::from_millis(1));
    assert!(env.ran().is_empty(), "early");
    env.advance(&jobs, Duration::from_millis(1));
    assert_eq!(env.ran(), ["order-1"]);
    let run = env.runs.lock().unwrap()[0].clone();
    assert_eq!((run.attempt, run.late), (1, Duration::ZERO));
    assert_eq!(
        jobs.get("order-1").unwrap(),
        None,
        "deleted once it succeeded"
    );
    let s = jobs.stats();
    assert_eq!((s.scheduled, s.fired, s.succeeded), (1, 1, 1));
}

#[test]
fn the_handler_sees_its_job() {
    let env = Env::new();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(None));
    let s = seen.clone();
    let jobs = env
        .builder()
        .handler("mail", move |cx: &tickwheel_durable::JobContext<'_>| {
            *s.lock().unwrap() = Some((
                cx.key().to_owned(),
                cx.kind().to_owned(),
                cx.payload().to_vec(),
                cx.deadline(),
            ));
            Ok(())
        })
        .open(env.path())
        .unwrap();
    let at = env.now() + SEC;
    jobs.schedule(Job::new("m-1", "mail", at).with_payload(vec![1, 2, 3]))
        .unwrap();
    env.advance(&jobs, SEC);
    let seen = seen.lock().unwrap().clone().expect("ran");
    assert_eq!(seen, ("m-1".into(), "mail".into(), vec![1, 2, 3], at));
}

#[test]
fn a_job_due_already_runs_at_once_late_from_its_deadline() {
    let env = Env::new();
    let jobs = env.open();
    jobs.schedule(Job::new("late", "ok", env.now() - 5 * SEC))
        .unwrap();
    settle(&jobs);
    let runs = env.runs.lock().unwrap().clone();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].late, 5 * SEC);
}

#[test]
fn a_duplicate_key_is_refused_and_handed_back_and_upsert_replaces() {
    let env = Env::new();
    let jobs = env.open();
    jobs.schedule(Job::new("k", "ok", env.now() + HOUR))
        .unwrap();
    let again = Job::new("k", "ok", env.now() + MIN).with_payload(vec![9]);
    let refused = jobs.schedule(again.clone()).unwrap_err();
    assert!(matches!(refused.error, JobError::Duplicate(ref k) if k == "k"));
    assert_eq!(refused.into_inner(), again);
    jobs.upsert(again).unwrap();
    assert_eq!(jobs.get("k").unwrap().unwrap().payload(), [9]);
    env.advance(&jobs, MIN);
    assert_eq!(env.ran(), ["k"], "the upserted deadline");
    env.advance(&jobs, HOUR);
    assert_eq!(env.ran(), ["k"], "the replaced one does not run too");
}

#[test]
fn cancel_removes_a_waiting_job_in_or_out_of_the_window() {
    let env = Env::new();
    let jobs = env.builder().horizon(10 * MIN).open(env.path()).unwrap();
    jobs.schedule(Job::new("near", "ok", env.now() + MIN))
        .unwrap();
    jobs.schedule(Job::new("far", "ok", env.now() + 2 * HOUR))
        .unwrap();
    assert_eq!(jobs.stats().in_memory, 1);
    assert!(jobs.cancel("near").unwrap());
    assert!(jobs.cancel("far").unwrap());
    assert!(!jobs.cancel("far").unwrap(), "twice");
    assert!(!jobs.cancel("never-was").unwrap());
    assert_eq!(jobs.stats().in_memory, 0);
    env.advance(&jobs, 3 * HOUR);
    assert!(env.ran().is_empty());
    assert_eq!(jobs.counts().unwrap().waiting, 0);
    assert_eq!(jobs.stats().cancelled, 2);
}

#[test]
fn reschedule_moves_a_job_across_the_horizon_both_ways() {
    let env = Env::new();
    let jobs = env.builder().horizon(10 * MIN).open(env.path()).unwrap();
    jobs.schedule(Job::new("a", "ok", env.now() + MIN)).unwrap();
    jobs.schedule(Job::new("b", "ok", env.now() + 3 * HOUR))
        .unwrap();
    // a: out of the window; b: into it.
    assert!(jobs.reschedule("a", env.now() + 2 * HOUR).unwrap());
    assert!(jobs.reschedule("b", env.now() + 2 * MIN).unwrap());
    assert!(!jobs.reschedule("c", env.now()).unwrap());
    env.advance(&jobs, 2 * MIN);
    assert_eq!(env.ran(), ["b"]);
    env.advance(&jobs, 2 * HOUR - 2 * MIN - SEC);
    assert_eq!(env.ran(), ["b"], "a not early");
    env.advance(&jobs, SEC);
    assert_eq!(env.ran(), ["b", "a"]);
}

#[test]
fn a_batch_is_stored_all_or_none() {
    let env = Env::new();
    let jobs = env.open();
    jobs.schedule(Job::new("taken", "ok", env.now() + HOUR))
        .unwrap();
    let batch: Vec<Job> = ["x", "y", "taken"]
        .iter()
        .map(|k| Job::new(*k, "ok", env.now() + MIN))
        .collect();
    let refused = jobs.schedule_batch(batch.clone()).unwrap_err();
    assert!(matches!(refused.error, JobError::Duplicate(ref k) if k == "taken"));
    assert_eq!(refused.into_inner(), batch);
    assert_eq!(jobs.counts().unwrap().waiting, 1, "none of the batch");
    let twice = vec![
        Job::new("d", "ok", env.now()),
        Job::new("d", "ok", env.now()),
    ];
    assert!(matches!(
        jobs.schedule_batch(twice).unwrap_err().error,
        JobError::Duplicate(_)
    ));
    let fine: Vec<Job> = (0..100)
        .map(|i| Job::new(format!("j{i}"), "ok", env.now() + MIN + i * SEC))
        .collect();
    jobs.schedule_batch(fine).unwrap();
    assert_eq!(jobs.counts().unwrap().waiting, 101);
    // A second at a time: one job due per step (a jump would hand them all to the pool's two
    // threads at once, in order, to run side by side).
    for _ in 0..3 * 60 {
        env.advance(&jobs, SEC);
    }
    let expected: Vec<String> = (0..100).map(|i| format!("j{i}")).collect();
    assert_eq!(env.ran(), expected, "in deadline order");
}

#[test]
fn bad_input_gets_a_typed_error_and_changes_nothing() {
    let env = Env::new();
    let jobs = env.builder().max_payload(16).open(env.path()).unwrap();
    let now = env.now();
    let cases = [
        (Job::new("", "ok", now), "BadKey"),
        (Job::new("k".repeat(MAX_KEY_LEN + 1), "ok", now), "BadKey"),
        (Job::new("k", "", now), "BadKind"),
        (Job::new("k", "no-such-handler", now), "UnknownKind"),
        (
            Job::new("k", "ok", now).with_payload(vec![0; 17]),
            "PayloadTooLarge",
        ),
    ];
    for (job, what) in cases {
        let refused = jobs.schedule(job.clone()).unwrap_err();
        assert!(
            format!("{:?}", refused.error).starts_with(what),
            "{refused:?}"
        );
        assert_eq!(refused.into_inner(), job);
    }
    assert!(matches!(jobs.cancel(""), Err(JobError::BadKey { .. })));
    assert!(matches!(
        jobs.get(&"k".repeat(600)),
        Err(JobError::BadKey { .. })
    ));
    // Far past and far future deadlines are taken, not refused.
    let epoch = std::time::SystemTime::UNIX_EPOCH;
    jobs.schedule(Job::new("ancient", "ok", epoch - HOUR))
        .unwrap();
    jobs.schedule(Job::new(
        "eons",
        "ok",
        epoch + Duration::from_secs(u64::MAX / 2),
    ))
    .unwrap();
    settle(&jobs);
    assert_eq!(env.ran(), ["ancient"]);
    assert_eq!(jobs.counts().unwrap().waiting, 1);
}

#[test]
fn every_call_after_close_is_refused_and_the_jobs_stay_stored() {
    let env = Env::new();
    let jobs = env.open();
    jobs.schedule(Job::new("k", "ok", env.now() + MIN)).unwrap();
    jobs.close().unwrap();
    jobs.close().unwrap();
    let refused = jobs.schedule(Job::new("k2", "ok", env.now())).unwrap_err();
    assert!(matches!(refused.error, JobError::Closed));
    assert!(matches!(jobs.cancel("k"), Err(JobError::Closed)));
    assert!(matches!(jobs.sync(), Err(JobError::Closed)));
    env.clock.advance(HOUR);
    jobs.timer().wait_idle();
    assert!(env.ran().is_empty(), "no run after close");
    drop(jobs);
    let jobs = env.open();
    assert_eq!(
        jobs.get("k").unwrap().map(|j| j.key().to_owned()),
        Some("k".into())
    );
}

#[test]
fn a_handler_can_schedule_the_next_job() {
    let env = Env::new();
    let runs = env.runs.clone();
    let jobs = env
        .builder()
        .handler("chain", move |cx: &tickwheel_durable::JobContext<'_>| {
            let n: u32 = String::from_utf8_lossy(cx.payload()).parse().unwrap();
            runs.lock().unwrap().push(support::Run {
                key: cx.key().to_owned(),
                attempt: cx.attempt(),
                at: cx.deadline(),
                late: cx.lateness(),
            });
            if n < 3 {
                let next = Job::new(format!("chain-{}", n + 1), "chain", cx.deadline() + MIN)
                    .with_payload((n + 1).to_string().into_bytes());
                cx.jobs().schedule(next)?;
            }
            Ok(())
        })
        .open(env.path())
        .unwrap();
    jobs.schedule(Job::new("chain-0", "chain", env.now() + MIN).with_payload(b"0".to_vec()))
        .unwrap();
    for _ in 0..4 {
        env.advance(&jobs, MIN);
    }
    assert_eq!(env.ran(), ["chain-0", "chain-1", "chain-2", "chain-3"]);
}

/// The README shows `examples/crash_and_reopen.rs` (which CI runs): the two stay the same.
#[test]
fn the_readme_shows_the_example_as_it_is() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let example = std::fs::read_to_string(root.join("examples/crash_and_reopen.rs")).unwrap();
    let Ok(readme) = std::fs::read_to_string(root.join("../../README.md")) else {
        return; // built from the packaged crate, without the workspace's README
    };
    let block = readme
        .split("```rust,ignore\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the README's durable example");
    assert_eq!(block, example);
}

/// With an `InlineExecutor`, a job due as it is armed runs on the commit thread itself: a call
/// back into the jobs from its handler would wait for that thread, so it is refused with a typed
/// error instead of hanging. (Run from the tick thread, as a clock move runs it, it works.)
#[test]
fn a_handler_run_on_the_commit_thread_gets_reentrant_not_a_deadlock() {
    use std::sync::{Arc, Mutex};
    let env = Env::new();
    let timer = tickwheel::Timer::builder()
        .clock(env.clock.clone())
        .executor(Arc::new(tickwheel::InlineExecutor::new()))
        .build()
        .unwrap();
    let answers = Arc::new(Mutex::new(Vec::new()));
    let a = answers.clone();
    let jobs = tickwheel_durable::Jobs::builder()
        .timer(timer)
        .wall_clock(tickwheel_durable::ManualWall::new(
            env.clock.clone(),
            env.start,
        ))
        .retry(tickwheel_durable::RetryPolicy::never())
        .handler(
            "calls-back",
            move |cx: &tickwheel_durable::JobContext<'_>| {
                let follow = Job::new(format!("{}-next", cx.key()), "noop", cx.deadline() + MIN);
                let answer = cx
                    .jobs()
                    .schedule(follow)
                    .map_err(|r| format!("{:?}", r.error));
                a.lock().unwrap().push(answer);
                Ok(())
            },
        )
        .handler("noop", |_: &tickwheel_durable::JobContext<'_>| Ok(()))
        .open(env.path())
        .unwrap();
    // Due as it is armed: runs on the commit thread.
    jobs.schedule(Job::new("now", "calls-back", env.now()))
        .unwrap();
    // Due later: runs on the tick thread as the clock moves.
    jobs.schedule(Job::new("later", "calls-back", env.now() + SEC))
        .unwrap();
    env.clock.advance(SEC);
    jobs.sync().unwrap();
    let answers = answers.lock().unwrap().clone();
    assert_eq!(answers, [Err("Reentrant".to_owned()), Ok(())]);
}
