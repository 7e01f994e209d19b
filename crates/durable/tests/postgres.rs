//! The PostgreSQL store against the real server of the machine (127.0.0.1:5432, database
//! `test`; `TICKWHEEL_PG` overrides the connection string). Each test works in a schema of its
//! own, dropped at the end. Without a server, each test says so and passes without testing:
//! `cargo test -p tickwheel-durable --features postgres`.
#![cfg(feature = "postgres")]

mod support;

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use support::{Env, HOUR, MIN, SEC, settle};
use tickwheel_durable::store::{Lease, Op, PgOptions, PgStore};
use tickwheel_durable::{Job, JobContext, JobError, Jobs, Store};

fn conninfo() -> String {
    std::env::var("TICKWHEEL_PG")
        .unwrap_or_else(|_| "host=127.0.0.1 user=postgres dbname=test".to_owned())
}

/// A schema of the test's own, dropped when this goes.
struct Schema(String);

impl Schema {
    /// `None` (and a line saying why) if there is no server to test against.
    fn new(test: &str) -> Option<Schema> {
        static N: AtomicU64 = AtomicU64::new(0);
        let name = format!(
            "tw_{test}_{}_{}",
            std::process::id(),
            N.fetch_add(1, Relaxed)
        );
        match postgres::Client::connect(&conninfo(), postgres::NoTls) {
            Ok(_) => Some(Schema(name)),
            Err(e) => {
                eprintln!("SKIPPED: no PostgreSQL at {:?}: {e}", conninfo());
                None
            }
        }
    }

    fn options(&self, node: &str) -> PgOptions {
        PgOptions::new(conninfo())
            .schema(self.0.clone())
            .shards(8)
            .lease(Duration::from_millis(900))
            .node(node)
            .notify_within(Duration::from_secs(365 * 24 * 3600))
    }

    fn sql(&self, statement: &str) {
        let mut c = postgres::Client::connect(&conninfo(), postgres::NoTls).unwrap();
        c.batch_execute(&statement.replace("{s}", &self.0)).unwrap();
    }
}

impl Drop for Schema {
    fn drop(&mut self) {
        if let Ok(mut c) = postgres::Client::connect(&conninfo(), postgres::NoTls) {
            let _ = c.batch_execute(&format!("DROP SCHEMA IF EXISTS {} CASCADE", self.0));
        }
    }
}

/// Waits until `f` holds, up to `limit` (real-clock tests: generous bounds, never a figure).
fn eventually(limit: Duration, what: &str, mut f: impl FnMut() -> bool) {
    let give_up = Instant::now() + limit;
    while !f() {
        assert!(Instant::now() < give_up, "not within {limit:?}: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn one_node_schedules_fires_and_forgets_on_the_manual_clock() {
    let Some(schema) = Schema::new("one") else {
        return;
    };
    let env = Env::new();
    let store = PgStore::open(schema.options("solo")).unwrap();
    let jobs = env.builder().open_store(store).unwrap();
    eventually(10 * SEC, "all shards held", || jobs.stats().shards == 8);
    jobs.schedule(Job::new("order-1", "ok", env.now() + 15 * MIN))
        .unwrap();
    let dup = jobs
        .schedule(Job::new("order-1", "ok", env.now()))
        .unwrap_err();
    assert!(matches!(dup.error, JobError::Duplicate(_)));
    jobs.schedule(Job::new("order-2", "ok", env.now() + HOUR))
        .unwrap();
    assert!(jobs.cancel("order-2").unwrap());
    assert!(!jobs.cancel("order-2").unwrap());
    jobs.schedule(Job::new("order-3", "ok", env.now() + 3 * HOUR))
        .unwrap();
    assert!(jobs.reschedule("order-3", env.now() + 20 * MIN).unwrap());
    env.advance(&jobs, 15 * MIN - SEC);
    assert!(env.ran().is_empty(), "early");
    env.advance(&jobs, SEC);
    assert_eq!(env.ran(), ["order-1"]);
    env.advance(&jobs, 5 * MIN);
    assert_eq!(env.ran(), ["order-1", "order-3"]);
    assert_eq!(jobs.counts().unwrap().waiting, 0);
    let batch: Vec<Job> = (0..500)
        .map(|i| Job::new(format!("b{i}"), "ok", env.now() + MIN).with_payload(vec![1; 64]))
        .collect();
    jobs.schedule_batch(batch).unwrap();
    env.advance(&jobs, MIN);
    assert_eq!(env.ran().len(), 502);
}

#[test]
fn failures_go_to_the_dead_letters_and_come_back() {
    let Some(schema) = Schema::new("dead") else {
        return;
    };
    let env = Env::new();
    let store = PgStore::open(schema.options("solo")).unwrap();
    let jobs = env
        .builder()
        .retry(tickwheel_durable::RetryPolicy::new(2).backoff(SEC, 1))
        .open_store(store)
        .unwrap();
    eventually(10 * SEC, "all shards held", || jobs.stats().shards == 8);
    jobs.schedule(Job::new("pay", "fail", env.now())).unwrap();
    settle(&jobs);
    env.advance(&jobs, SEC);
    let dead = jobs.dead_letters(None, 10).unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(
        (dead[0].job.attempts(), dead[0].reason.as_str()),
        (2, "refused by the payment service")
    );
    assert!(jobs.requeue("pay", env.now() + MIN).unwrap());
    assert_eq!(jobs.get("pay").unwrap().unwrap().attempts(), 0);
    assert!(jobs.drop_dead("pay").is_ok());
}

#[test]
fn jobs_survive_a_reopen_and_overdue_ones_run_first() {
    let Some(schema) = Schema::new("reopen") else {
        return;
    };
    let env = Env::new();
    let jobs = env
        .builder()
        .open_store(PgStore::open(schema.options("first")).unwrap())
        .unwrap();
    jobs.schedule(Job::new("a", "ok", env.now() + MIN)).unwrap();
    jobs.schedule(Job::new("b", "ok", env.now() + 2 * HOUR))
        .unwrap();
    jobs.close().unwrap();
    drop(jobs);
    env.clock.advance(HOUR);
    let jobs = env
        .builder()
        .open_store(PgStore::open(schema.options("second")).unwrap())
        .unwrap();
    eventually(10 * SEC, "the overdue job ran", || {
        jobs.timer().wait_idle();
        env.ran() == ["a"]
    });
    env.advance(&jobs, HOUR);
    assert_eq!(env.ran(), ["a", "b"]);
}

/// Fencing: the delete that ends a run applies only while the lease it ran under holds.
#[test]
fn a_runs_outcome_is_refused_once_its_lease_is_gone() {
    let Some(schema) = Schema::new("fence") else {
        return;
    };
    let store = PgStore::open(schema.options("holder")).unwrap();
    let at = SystemTime::now() + HOUR;
    let insert = Op::Insert {
        jobs: vec![Job::new("k", "ok", at)],
        upsert: false,
    };
    let applied = store.apply(&[insert], true).unwrap();
    let tickwheel_durable::store::Applied::Inserted(versions) = &applied[0] else {
        panic!("{applied:?}");
    };
    let shard = store.shard_of("k");
    // The lease as this node would hold it, then taken by another node (epoch 2).
    schema.sql(&format!(
        "UPDATE {{s}}.tw_leases SET owner = 'holder', epoch = 1, expires = now() + interval '1 hour'
         WHERE shard = {shard}"
    ));
    let complete = |epoch| Op::Complete {
        key: "k".into(),
        version: versions[0],
        lease: Lease { shard, epoch },
    };
    schema.sql(&format!(
        "UPDATE {{s}}.tw_leases SET owner = 'thief', epoch = 2 WHERE shard = {shard}"
    ));
    let refused = store.apply(&[complete(1)], true).unwrap();
    assert_eq!(refused, [tickwheel_durable::store::Applied::Removed(None)]);
    assert!(
        store.get("k").unwrap().is_some(),
        "still there for the new holder"
    );
    schema.sql(&format!(
        "UPDATE {{s}}.tw_leases SET owner = 'holder', epoch = 3 WHERE shard = {shard}"
    ));
    let done = store.apply(&[complete(3)], true).unwrap();
    assert_eq!(
        done,
        [tickwheel_durable::store::Applied::Removed(Some(
            versions[0]
        ))]
    );
}

/// Two nodes share the shards; a job scheduled on one, in a shard the other holds, due soon,
/// reaches the other at once (an announcement), not at its next horizon step.
#[test]
fn two_nodes_share_the_shards_and_hand_each_other_jobs() {
    let Some(schema) = Schema::new("two") else {
        return;
    };
    let fired: Arc<Mutex<Vec<(String, String)>>> = Arc::new(Mutex::new(Vec::new()));
    let node = |name: &'static str| {
        let f = fired.clone();
        Jobs::builder()
            .handler("mark", move |cx: &JobContext<'_>| {
                f.lock()
                    .unwrap()
                    .push((name.to_owned(), cx.key().to_owned()));
                Ok(())
            })
            .horizon(HOUR)
            .open_store(PgStore::open(schema.options(name)).unwrap())
            .unwrap()
    };
    let a = node("a");
    eventually(10 * SEC, "a holds every shard", || a.stats().shards == 8);
    let b = node("b");
    eventually(15 * SEC, "a and b hold four each", || {
        a.stats().shards == 4 && b.stats().shards == 4
    });
    // Keys in every shard, due in half a second, all scheduled through `a`.
    let soon = SystemTime::now() + Duration::from_millis(500);
    let batch: Vec<Job> = (0..64)
        .map(|i| Job::new(format!("k{i}"), "mark", soon))
        .collect();
    a.schedule_batch(batch).unwrap();
    eventually(20 * SEC, "every job fired", || {
        fired.lock().unwrap().len() >= 64
    });
    std::thread::sleep(Duration::from_millis(300));
    let fired = fired.lock().unwrap().clone();
    assert_eq!(fired.len(), 64, "each once: {fired:?}");
    let by_b = fired.iter().filter(|(n, _)| n == "b").count();
    assert!(
        by_b > 0 && by_b < 64,
        "both nodes fired some: b fired {by_b}"
    );
    assert_eq!(a.counts().unwrap().waiting, 0);
}

/// A node that leaves (closes) gives its shards back at once; the other takes them all.
#[test]
fn a_node_that_leaves_hands_its_shards_over() {
    let Some(schema) = Schema::new("leave") else {
        return;
    };
    let env = Env::new();
    let a = env
        .builder()
        .open_store(PgStore::open(schema.options("a")).unwrap())
        .unwrap();
    let b = Jobs::builder()
        .handler("ok", |_: &JobContext<'_>| Ok(()))
        .open_store(PgStore::open(schema.options("b")).unwrap())
        .unwrap();
    eventually(15 * SEC, "shared", || {
        a.stats().shards + b.stats().shards == 8 && b.stats().shards > 0
    });
    b.close().unwrap();
    eventually(10 * SEC, "a holds all", || a.stats().shards == 8);
}

/// A handler in the store's transaction: its writes commit with the job's delete, or not at all
/// (a failure rolls them back, a retry writes them once; a lease stolen while it ran keeps
/// nothing of it).
#[test]
fn a_handlers_sql_commits_with_the_jobs_delete_or_not_at_all() {
    let Some(schema) = Schema::new("sql") else {
        return;
    };
    let s = schema.0.clone();
    schema.sql("CREATE SCHEMA IF NOT EXISTS {s}; CREATE TABLE {s}.effects (key text, attempt int)");
    let env = Env::new();
    let steal = schema.0.clone();
    let jobs = env
        .builder()
        .retry(tickwheel_durable::RetryPolicy::new(3).backoff(SEC, 1))
        .handler_in_transaction(
            "effect",
            move |cx: &JobContext<'_>, tx: &mut postgres::Transaction<'_>| {
                tx.execute(
                    &format!("INSERT INTO {s}.effects (key, attempt) VALUES ($1, $2)"),
                    &[&cx.key(), &(cx.attempt() as i32)],
                )?;
                match cx.key() {
                    "flaky" if cx.attempt() == 1 => Err("the first attempt fails".into()),
                    "stolen" => {
                        // Another node takes the shard while this run is in its transaction.
                        let mut other = postgres::Client::connect(&conninfo(), postgres::NoTls)?;
                        other.batch_execute(&format!(
                            "UPDATE {steal}.tw_leases SET owner = 'thief', epoch = epoch + 1,
                             expires = now() + interval '1 hour'"
                        ))?;
                        Ok(())
                    }
                    _ => Ok(()),
                }
            },
        )
        .open_store(PgStore::open(schema.options("solo")).unwrap())
        .unwrap();
    eventually(10 * SEC, "all shards held", || jobs.stats().shards == 8);
    let effects = |key: &str| -> Vec<i32> {
        let mut c = postgres::Client::connect(&conninfo(), postgres::NoTls).unwrap();
        let q = format!(
            "SELECT attempt FROM {}.effects WHERE key = $1 ORDER BY attempt",
            schema.0
        );
        c.query(&q, &[&key])
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect()
    };
    jobs.schedule(Job::new("clean", "effect", env.now() + SEC))
        .unwrap();
    jobs.schedule(Job::new("flaky", "effect", env.now() + SEC))
        .unwrap();
    env.advance(&jobs, SEC);
    assert_eq!(effects("clean"), [1], "written once, with the delete");
    assert!(jobs.get("clean").unwrap().is_none());
    assert_eq!(
        effects("flaky"),
        Vec::<i32>::new(),
        "the failed attempt's write rolled back"
    );
    env.advance(&jobs, SEC);
    assert_eq!(effects("flaky"), [2], "the retry's write, once");
    assert!(jobs.get("flaky").unwrap().is_none());

    jobs.schedule(Job::new("stolen", "effect", env.now() + SEC))
        .unwrap();
    env.advance(&jobs, SEC);
    assert_eq!(effects("stolen"), Vec::<i32>::new(), "fenced: nothing kept");
    assert!(
        jobs.get("stolen").unwrap().is_some(),
        "left for the shard's new holder"
    );
}

#[test]
fn a_handler_in_a_transaction_needs_a_store_that_runs_them() {
    let env = Env::new();
    let err = env
        .builder()
        .handler_in_transaction(
            "x",
            |_: &JobContext<'_>, _: &mut postgres::Transaction<'_>| Ok(()),
        )
        .open(env.path())
        .unwrap_err();
    assert!(
        matches!(err, tickwheel_durable::OpenError::Config(_)),
        "{err:?}"
    );
}

/// Every connection of a node cut by the server (as a restart or a network fault would): the
/// node reconnects and loses nothing acknowledged. A call that met the cut gets an error (its
/// commit's fate unknown to it, so the jobs do not guess); its retry works; the lease thread
/// takes its shards back.
#[test]
fn a_node_whose_connections_are_cut_reconnects_and_loses_nothing() {
    let Some(schema) = Schema::new("cut") else {
        return;
    };
    let env = Env::new();
    let node = format!("cut-{}", std::process::id());
    let jobs = env
        .builder()
        .open_store(PgStore::open(schema.options(&node)).unwrap())
        .unwrap();
    eventually(10 * SEC, "all shards held", || jobs.stats().shards == 8);
    jobs.schedule(Job::new("before", "ok", env.now() + MIN))
        .unwrap();
    let cut = || {
        let mut admin = postgres::Client::connect(&conninfo(), postgres::NoTls).unwrap();
        let n = admin
            .execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
                &[&format!("tickwheel-durable/{node}")],
            )
            .unwrap();
        assert!(n > 0, "the node's connections were found");
    };
    cut();
    std::thread::sleep(Duration::from_millis(200));
    // The first schedule may meet the cut connection; then it fails, and its retry works.
    let mut tries = 0;
    loop {
        tries += 1;
        match jobs.schedule(Job::new("after", "ok", env.now() + MIN)) {
            Ok(()) => break,
            Err(r) if tries < 3 && matches!(r.error, JobError::Store(_)) => continue,
            Err(r) => panic!("{:?}", r.error),
        }
    }
    assert!(
        jobs.get("before").unwrap().is_some(),
        "reads reconnect by themselves"
    );
    eventually(15 * SEC, "the shards held again", || {
        jobs.stats().shards == 8
    });
    env.advance(&jobs, MIN);
    let mut ran = env.ran();
    ran.sort();
    assert_eq!(ran, ["after", "before"]);
}

/// Found by W14: the lease thread listened for announcements until a quiet moment, and a steady
/// stream of them (a node's own schedules due soon are enough) kept it from ever renewing: every
/// lease lapsed, and nothing fired. Under a steady stream the leases are renewed and a job due
/// meanwhile runs.
#[test]
fn leases_are_renewed_under_a_steady_stream_of_announcements() {
    let Some(schema) = Schema::new("stream") else {
        return;
    };
    let store = PgStore::open(schema.options("busy")).unwrap();
    let probe = store.clone();
    let ran = Arc::new(Mutex::new(Vec::new()));
    let r = ran.clone();
    let jobs = Jobs::builder()
        .handler("mark", move |cx: &JobContext<'_>| {
            r.lock().unwrap().push(cx.key().to_owned());
            Ok(())
        })
        .open_store(store)
        .unwrap();
    eventually(10 * SEC, "all shards held", || jobs.stats().shards == 8);
    jobs.schedule(Job::new("probe", "mark", SystemTime::now() + 2 * SEC))
        .unwrap();
    let before = probe.statements().1;
    // 100 schedules a second, each due in a minute (announced), for three leases.
    let end = Instant::now() + 3 * Duration::from_millis(900);
    let mut i = 0;
    while Instant::now() < end {
        jobs.schedule(Job::new(format!("s{i}"), "mark", SystemTime::now() + MIN))
            .unwrap();
        i += 1;
        std::thread::sleep(Duration::from_millis(10));
    }
    let renewals = probe.statements().1 - before;
    assert!(
        renewals >= 8,
        "the lease thread sent {renewals} statements in three leases"
    );
    assert_eq!(jobs.stats().shards, 8);
    eventually(10 * SEC, "the probe ran", || {
        ran.lock().unwrap().contains(&"probe".to_owned())
    });
}

/// Found by W14: a job stored by one node in another's shard, due past the announcement window,
/// was never read by the shard's holder. The holder now reads its shards again before such a job
/// can come within its horizon.
#[test]
fn a_job_stored_elsewhere_past_the_announcement_window_still_fires() {
    let Some(schema) = Schema::new("far") else {
        return;
    };
    let ran = Arc::new(Mutex::new(Vec::new()));
    let node = |name: &'static str| {
        let r = ran.clone();
        let store = PgStore::open(schema.options(name).notify_within(2 * SEC)).unwrap();
        let probe = store.clone();
        let jobs = Jobs::builder()
            .handler("mark", move |cx: &JobContext<'_>| {
                r.lock().unwrap().push((name, cx.key().to_owned()));
                Ok(())
            })
            .horizon(SEC)
            .open_store(store)
            .unwrap();
        (jobs, probe)
    };
    let (a, a_store) = node("a");
    let (b, _) = node("b");
    eventually(15 * SEC, "four shards each", || {
        a.stats().shards == 4 && b.stats().shards == 4
    });
    // A key in one of a's shards, stored through b, due past the 2 s window: not announced.
    let held = a_store.held_shards();
    let key = (0..)
        .map(|i| format!("far-{i}"))
        .find(|k| held.contains(&a_store.shard_of(k)))
        .unwrap();
    b.schedule(Job::new(key.as_str(), "mark", SystemTime::now() + 5 * SEC))
        .unwrap();
    eventually(20 * SEC, "the far job ran", || {
        ran.lock().unwrap().iter().any(|(_, k)| *k == key)
    });
    let ran = ran.lock().unwrap();
    assert_eq!(ran.iter().filter(|(_, k)| *k == key).count(), 1);
}
