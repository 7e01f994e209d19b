//! Opening a store: what was acknowledged is there; overdue jobs run first, under the misfire
//! policy; a file that is not a store, is damaged, or is open elsewhere is refused, untouched; a
//! stored kind with no handler is reported.

mod support;

use std::time::Duration;

use support::{Env, HOUR, MIN, SEC, settle};
use tickwheel_durable::{Job, Jobs, Misfire, OpenError};

#[test]
fn jobs_survive_a_close_and_overdue_ones_run_first_on_open() {
    let env = Env::new();
    let jobs = env.open();
    jobs.schedule(Job::new("overdue-2", "ok", env.now() + 2 * MIN))
        .unwrap();
    jobs.schedule(Job::new("overdue-1", "ok", env.now() + MIN))
        .unwrap();
    jobs.schedule(Job::new("later", "ok", env.now() + 3 * HOUR))
        .unwrap();
    jobs.close().unwrap();
    drop(jobs);
    env.clock.advance(HOUR); // down for an hour
    let jobs = env.open();
    settle(&jobs);
    let mut ran = env.ran();
    ran.sort();
    assert_eq!(ran, ["overdue-1", "overdue-2"]);
    let late: Vec<Duration> = env.runs.lock().unwrap().iter().map(|r| r.late).collect();
    assert!(
        late.contains(&(HOUR - MIN)) && late.contains(&(HOUR - 2 * MIN)),
        "{late:?}"
    );
    env.advance(&jobs, 2 * HOUR);
    assert_eq!(env.ran().len(), 3);
}

#[test]
fn the_misfire_policy_decides_which_overdue_jobs_run() {
    for (policy, ran, dead) in [
        (Misfire::RunAll, 2, 0),
        (Misfire::RunWithin(30 * MIN), 1, 1),
        (Misfire::SkipAll, 0, 2),
    ] {
        let env = Env::new();
        let jobs = env.open();
        jobs.schedule(Job::new("hour-late", "ok", env.now() + SEC))
            .unwrap();
        jobs.schedule(Job::new("ten-min-late", "ok", env.now() + 50 * MIN))
            .unwrap();
        drop(jobs);
        env.clock.advance(HOUR); // down for an hour: both overdue at the open
        let jobs = env.builder().misfire(policy).open(env.path()).unwrap();
        settle(&jobs);
        let runs = env.ran().len();
        let dead_now = jobs.dead_letters(None, 10).unwrap();
        assert_eq!((runs, dead_now.len()), (ran, dead), "{policy:?}");
        for d in &dead_now {
            assert!(d.reason.starts_with("misfired"), "{}", d.reason);
        }
        assert_eq!(jobs.stats().misfired, dead as u64);
        // A job due after the open is never a misfire.
        jobs.schedule(Job::new("fresh", "ok", env.now() - SEC))
            .unwrap();
        settle(&jobs);
        assert!(env.ran().contains(&"fresh".to_owned()), "{policy:?}");
    }
}

#[test]
fn a_stored_kind_with_no_handler_is_reported_at_open_or_kept_unrun() {
    let env = Env::new();
    let jobs = env
        .builder()
        .handler("retired-kind", |_: &tickwheel_durable::JobContext<'_>| {
            Ok(())
        })
        .open(env.path())
        .unwrap();
    jobs.schedule(Job::new("old-1", "retired-kind", env.now() + MIN))
        .unwrap();
    jobs.schedule(Job::new("old-2", "retired-kind", env.now() + MIN))
        .unwrap();
    jobs.schedule(Job::new("ok-1", "ok", env.now() + MIN))
        .unwrap();
    drop(jobs);
    match env.builder().open(env.path()) {
        Err(OpenError::UnknownKinds(kinds)) => assert_eq!(kinds, [("retired-kind".into(), 2)]),
        other => panic!("{other:?}"),
    }
    let jobs = env.builder().keep_unknown_kinds().open(env.path()).unwrap();
    env.advance(&jobs, HOUR);
    assert_eq!(env.ran(), ["ok-1"]);
    assert_eq!(
        jobs.counts().unwrap().waiting,
        2,
        "kept, not run, not dropped"
    );
}

#[test]
fn a_foreign_file_is_refused_and_left_as_it_was() {
    let env = Env::new();
    let text = b"order_id,deadline\n42,2026-11-28\n".repeat(200);
    std::fs::write(env.path(), &text).unwrap();
    let err = env.builder().open(env.path()).unwrap_err();
    assert!(matches!(err, OpenError::Foreign(_)), "{err:?}");
    assert_eq!(std::fs::read(env.path()).unwrap(), text, "untouched");
}

#[test]
fn another_programs_redb_database_is_refused() {
    let env = Env::new();
    {
        let db = redb::Database::create(env.path()).unwrap();
        let tx = db.begin_write().unwrap();
        let def: redb::TableDefinition<'_, &str, u64> = redb::TableDefinition::new("users");
        tx.open_table(def).unwrap().insert("alice", 1).unwrap();
        tx.commit().unwrap();
    }
    let before = std::fs::read(env.path()).unwrap();
    let err = env.builder().open(env.path()).unwrap_err();
    assert!(
        matches!(err, OpenError::Foreign(ref why) if why.contains("users")),
        "{err:?}"
    );
    assert_eq!(std::fs::read(env.path()).unwrap(), before, "untouched");
}

#[test]
fn a_store_open_elsewhere_is_refused() {
    let env = Env::new();
    let jobs = env.open();
    let err = env.builder().open(env.path()).unwrap_err();
    assert!(matches!(err, OpenError::Locked), "{err:?}");
    drop(jobs);
    assert!(
        env.builder().open(env.path()).is_ok(),
        "free again once closed"
    );
}

#[test]
fn a_damaged_store_is_a_typed_error_not_a_panic() {
    let env = Env::new();
    let jobs = env.open();
    let batch: Vec<Job> = (0..500)
        .map(|i| Job::new(format!("k{i}"), "ok", env.now() + HOUR).with_payload(vec![7; 64]))
        .collect();
    jobs.schedule_batch(batch).unwrap();
    drop(jobs);
    let clean = std::fs::read(env.path()).unwrap();
    // Scribble over the pages past the header, one region at a time; every open either works
    // (the damage missed what it reads) or is refused with a typed error. None panics.
    let mut refused = 0;
    for start in (4096..clean.len()).step_by(clean.len() / 16) {
        let mut bytes = clean.clone();
        let end = (start + 2048).min(bytes.len());
        bytes[start..end].fill(0xA5);
        std::fs::write(env.path(), &bytes).unwrap();
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            env.builder()
                .open(env.path())
                .map(|j| j.counts().map(|c| c.waiting))
        })) {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                refused += 1;
                assert!(
                    matches!(
                        e,
                        OpenError::Corrupt(_) | OpenError::Io(_) | OpenError::Foreign(_)
                    ),
                    "{e:?}"
                );
            }
            Err(_) => panic!("opening a damaged store panicked (damage at {start})"),
        }
    }
    let _ = refused;
}

#[test]
fn a_store_of_a_newer_format_is_refused() {
    let env = Env::new();
    drop(env.open());
    {
        let db = redb::Database::create(env.path()).unwrap();
        let tx = db.begin_write().unwrap();
        let meta: redb::TableDefinition<'_, &str, u64> = redb::TableDefinition::new("meta");
        tx.open_table(meta).unwrap().insert("format", 2).unwrap();
        tx.commit().unwrap();
    }
    let err = env.builder().open(env.path()).unwrap_err();
    assert!(
        matches!(
            err,
            OpenError::NewerFormat {
                found: 2,
                supported: 1
            }
        ),
        "{err:?}"
    );
}

#[test]
fn bad_settings_are_refused_at_open() {
    let env = Env::new();
    let cases: Vec<(tickwheel_durable::JobsBuilder, &str)> = vec![
        (env.builder().horizon(Duration::ZERO), "horizon"),
        (env.builder().load_batch(0), "batch"),
        (
            env.builder()
                .durability(tickwheel_durable::Durability::Within(Duration::ZERO)),
            "window",
        ),
        (
            env.builder()
                .handler("", |_: &tickwheel_durable::JobContext<'_>| Ok(())),
            "kind",
        ),
    ];
    for (builder, what) in cases {
        match builder.open(env.path()) {
            Err(OpenError::Config(why)) => assert!(why.contains(what), "{why}"),
            other => panic!("{what}: {other:?}"),
        }
    }
    assert!(!env.path().exists(), "nothing was made");
    let _: fn() -> tickwheel_durable::JobsBuilder = Jobs::builder;
}
