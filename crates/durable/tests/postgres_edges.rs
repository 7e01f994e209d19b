//! The PostgreSQL store's edges and races, and the engine's close, from the second hostile review of
//! 2026-11-28 (issue 47; eight of these failed before their fixes: docs/reliability.md).
//! Real clocks; every wait is bounded.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant, SystemTime};

use tickwheel_durable::{Job, JobContext, Jobs, RetryPolicy};

/// Runs `f` on a thread; fails the test instead of hanging.
#[allow(dead_code)]
fn within<T: Send + 'static>(secs: u64, what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(v) => v,
        Err(_) => panic!("{what}: no answer in {secs} s (deadlock?)"),
    }
}

/// Waits until `f` holds, up to `limit`; false if it never did.
#[allow(dead_code)]
fn eventually(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let give_up = Instant::now() + limit;
    while !f() {
        if Instant::now() >= give_up {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

// ---------------------------------------------------------------------------------------------
// B. The engine (redb).
// ---------------------------------------------------------------------------------------------

/// `close` promises: no new run starts, running handlers finish. A run claimed just before the
/// close's sweep, but not yet counted as running, starts after `close` returned.
#[test]
fn no_handler_starts_after_close_returned() {
    let late = Arc::new(AtomicUsize::new(0));
    let mut total_runs = 0;
    for round in 0..150 {
        let dir = tempfile::tempdir().unwrap();
        let closed = Arc::new(AtomicBool::new(false));
        let runs = Arc::new(AtomicUsize::new(0));
        let (c, l, r) = (closed.clone(), late.clone(), runs.clone());
        let jobs = Jobs::builder()
            .handler("ok", move |_cx: &JobContext<'_>| {
                if c.load(SeqCst) {
                    l.fetch_add(1, SeqCst);
                }
                r.fetch_add(1, SeqCst);
                Ok(())
            })
            .open(dir.path().join("j.redb"))
            .unwrap();
        let now = SystemTime::now();
        let batch: Vec<Job> = (0..64)
            .map(|i| Job::new(format!("k{i}"), "ok", now))
            .collect();
        jobs.schedule_batch(batch).unwrap();
        // Close while the runs are being claimed.
        std::thread::sleep(Duration::from_micros(200 + (round % 7) * 150));
        let j = jobs.clone();
        within(20, "close", move || j.close().unwrap());
        closed.store(true, SeqCst);
        std::thread::sleep(Duration::from_millis(5));
        total_runs += runs.load(SeqCst);
        drop(jobs);
    }
    eprintln!("runs before/at close: {total_runs}");
    assert_eq!(
        late.load(SeqCst),
        0,
        "handlers started after close() returned"
    );
}

/// A handler closes the jobs while a second one runs, and a third handler drops the last users'
/// handle: no deadlock, and the close ends when the last handler ends.
#[test]
fn close_and_last_drop_from_handlers_while_others_run() {
    let dir = tempfile::tempdir().unwrap();
    let holder: Arc<Mutex<Option<Jobs>>> = Arc::new(Mutex::new(None));
    let h = holder.clone();
    let (gate_tx, gate_rx) = mpsc::channel::<()>();
    let gate_rx = Arc::new(Mutex::new(gate_rx));
    let jobs = Jobs::builder()
        .handler("slow", move |_cx: &JobContext<'_>| {
            let _ = gate_rx
                .lock()
                .unwrap()
                .recv_timeout(Duration::from_secs(10));
            Ok(())
        })
        .handler("closer", |cx: &JobContext<'_>| {
            cx.jobs().close().unwrap();
            Ok(())
        })
        .handler("dropper", move |_cx: &JobContext<'_>| {
            drop(h.lock().unwrap().take());
            Ok(())
        })
        .open(dir.path().join("j.redb"))
        .unwrap();
    let now = SystemTime::now();
    jobs.schedule(Job::new("slow", "slow", now)).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    jobs.schedule(Job::new("closer", "closer", now)).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    *holder.lock().unwrap() = Some(jobs.clone());
    drop(jobs);
    std::thread::sleep(Duration::from_millis(200));
    gate_tx.send(()).unwrap();
    // The file is let go: a reopen works.
    let path = dir.path().join("j.redb");
    let counts = within(20, "reopen after the close ended", move || {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match Jobs::builder()
                .handler("slow", |_: &JobContext<'_>| Ok(()))
                .handler("closer", |_: &JobContext<'_>| Ok(()))
                .handler("dropper", |_: &JobContext<'_>| Ok(()))
                .open(&path)
            {
                Ok(j) => break j.counts().unwrap(),
                Err(e) if Instant::now() < deadline => {
                    let _ = e;
                    std::thread::sleep(Duration::from_millis(50))
                }
                Err(e) => panic!("reopen: {e}"),
            }
        }
    });
    assert_eq!(
        counts.waiting, 0,
        "both runs' deletes were committed by the close"
    );
}

// ---------------------------------------------------------------------------------------------
// A. PostgreSQL.
// ---------------------------------------------------------------------------------------------

#[cfg(feature = "postgres")]
mod pg {
    use super::*;
    use tickwheel_durable::store::{Op, PgOptions, PgStore};
    use tickwheel_durable::{JobError, OpenError, Store};

    fn conninfo() -> String {
        std::env::var("TICKWHEEL_PG")
            .unwrap_or_else(|_| "host=127.0.0.1 user=postgres dbname=test".to_owned())
    }

    pub(super) struct Schema(pub String);

    impl Schema {
        fn new(test: &str) -> Schema {
            static N: AtomicU64 = AtomicU64::new(0);
            Schema(format!(
                "r2_{test}_{}_{}",
                std::process::id(),
                N.fetch_add(1, SeqCst)
            ))
        }
        fn options(&self, node: &str) -> PgOptions {
            PgOptions::new(conninfo())
                .schema(self.0.clone())
                .shards(8)
                .lease(Duration::from_millis(900))
                .node(node)
        }
        fn client(&self) -> postgres::Client {
            postgres::Client::connect(&conninfo(), postgres::NoTls).unwrap()
        }
    }

    impl Drop for Schema {
        fn drop(&mut self) {
            if let Ok(mut c) = postgres::Client::connect(&conninfo(), postgres::NoTls) {
                let _ = c.batch_execute(&format!("DROP SCHEMA IF EXISTS {} CASCADE", self.0));
            }
        }
    }

    /// Jobs on `store` with a handler "ok" that counts runs per key.
    fn counting(store: PgStore, runs: Arc<Mutex<Vec<String>>>) -> Jobs {
        Jobs::builder()
            .handler("ok", move |cx: &JobContext<'_>| {
                runs.lock().unwrap().push(cx.key().to_owned());
                Ok(())
            })
            .open_store(store)
            .unwrap()
    }

    fn insert(store: &PgStore, jobs: Vec<Job>) {
        store
            .apply(
                &[Op::Insert {
                    jobs,
                    upsert: false,
                }],
                true,
            )
            .unwrap();
    }

    /// A job whose last failure's text has a NUL byte: its burial is refused by PostgreSQL
    /// (text cannot hold NUL), for ever. The job is never buried, never run again, its entry
    /// never leaves memory, and `sync` fails from then on.
    #[test]
    fn a_nul_in_the_last_error_still_buries_the_job() {
        let schema = Schema::new("nul");
        let store = PgStore::open(schema.options("a")).unwrap();
        let jobs = Jobs::builder()
            .retry(RetryPolicy::never())
            .handler("bad", |_cx: &JobContext<'_>| Err("bad\0byte".into()))
            .open_store(store)
            .unwrap();
        assert!(eventually(Duration::from_secs(10), || jobs.stats().shards == 8));
        jobs.schedule(Job::new("k", "bad", SystemTime::now()))
            .unwrap();
        std::thread::sleep(Duration::from_secs(3));
        let dead = jobs.dead_letters(None, 10).unwrap();
        let counts = jobs.counts().unwrap();
        let stats = jobs.stats();
        let sync = jobs.sync();
        eprintln!(
            "fired={} dead={:?} counts={counts:?} in_memory={} commits={} sync={sync:?}",
            stats.fired,
            dead.iter()
                .map(|d| d.job.key().to_owned())
                .collect::<Vec<_>>(),
            stats.in_memory,
            stats.commits
        );
        assert_eq!(dead.len(), 1, "the failed job reaches the dead letters");
        assert!(sync.is_ok());
    }

    /// A node name with a newline was accepted, and every announcement it sent was dropped by
    /// the others (a job it stored, due soon, in another node's shard never fired). Names with
    /// white space or control characters are now refused at open; a plain one works.
    #[test]
    fn a_node_name_with_a_newline_is_refused_and_a_plain_one_hands_jobs_over() {
        let schema = Schema::new("nl");
        let bad = PgStore::open(schema.options("b\nx"));
        assert!(
            matches!(bad, Err(tickwheel_durable::OpenError::Config(_))),
            "{bad:?}"
        );
        let runs = Arc::new(Mutex::new(Vec::new()));
        let a = counting(PgStore::open(schema.options("a")).unwrap(), runs.clone());
        assert!(eventually(Duration::from_secs(10), || a.stats().shards == 8));
        std::thread::sleep(Duration::from_millis(300)); // every shard loaded
        let b = PgStore::open(schema.options("b")).unwrap(); // never leases: a writer only
        let soon = SystemTime::now() + Duration::from_secs(1);
        insert(
            &b,
            (0..8)
                .map(|i| Job::new(format!("j{i}"), "ok", soon))
                .collect(),
        );
        let fired = eventually(Duration::from_secs(6), || runs.lock().unwrap().len() == 8);
        assert!(
            fired,
            "jobs stored by b reach a: {:?}",
            runs.lock().unwrap()
        );
    }

    /// A node name longer than a NOTIFY payload (accepted): every schedule due within
    /// `notify_within` fails, with an untyped server error.
    #[test]
    fn a_node_name_too_long_for_an_announcement_is_refused() {
        let schema = Schema::new("long");
        let name = "n".repeat(8000);
        let r = PgStore::open(schema.options(&name));
        assert!(
            matches!(r, Err(tickwheel_durable::OpenError::Config(_))),
            "{r:?}"
        );
    }

    /// Two live nodes opened with the same name were accepted, and lost jobs (the first took
    /// the second's announcements for its own; the second renewed the first's leases and never
    /// loaded them). A store opened under the name of a live node is now refused.
    #[test]
    fn a_second_live_node_of_one_name_is_refused() {
        let schema = Schema::new("same");
        let runs = Arc::new(Mutex::new(Vec::new()));
        let a = counting(PgStore::open(schema.options("same")).unwrap(), runs.clone());
        assert!(eventually(Duration::from_secs(10), || a.stats().shards == 8));
        let again = PgStore::open(schema.options("same"));
        assert!(
            matches!(again, Err(tickwheel_durable::OpenError::Locked)),
            "{again:?}"
        );
        drop(a); // leaves: its row goes, the name is free
        assert!(PgStore::open(schema.options("same")).is_ok());
    }

    /// Invariant 1: a node fires a shard's jobs only while it holds the lease by its own clock.
    /// The check is made before the run's read of its job; the claim after the read does not
    /// check again. A read that takes longer than the lease (here: the tables locked by an
    /// operator's transaction for 2 s) starts the handler with the lease long lapsed, and the
    /// same job version then runs a second time in this one process, under the new epoch.
    #[test]
    fn no_run_starts_once_its_lease_lapsed() {
        let schema = Schema::new("lapse");
        let lease = Duration::from_secs(3);
        let store = PgStore::open(schema.options("a").lease(lease)).unwrap();
        let probe = store.clone();
        let starts: Arc<Mutex<Vec<Instant>>> = Arc::new(Mutex::new(Vec::new()));
        let s = starts.clone();
        let jobs = Jobs::builder()
            .handler("ok", move |_cx: &JobContext<'_>| {
                s.lock().unwrap().push(Instant::now());
                std::thread::sleep(Duration::from_millis(200));
                Ok(())
            })
            .open_store(store)
            .unwrap();
        assert!(eventually(Duration::from_secs(10), || jobs.stats().shards == 8));
        std::thread::sleep(Duration::from_millis(300));
        jobs.schedule(Job::new(
            "k",
            "ok",
            SystemTime::now() + Duration::from_secs(60),
        ))
        .unwrap();
        // Just after a round (its renewal sent at about `round`).
        let before = probe.statements().1;
        assert!(eventually(Duration::from_secs(5), || probe.statements().1 > before));
        let round = Instant::now();
        assert!(
            jobs.reschedule("k", SystemTime::now() + Duration::from_millis(300))
                .unwrap()
        );
        // Lock both tables from 100 ms before the deadline, for 4 s (> the lease): the run's
        // read waits, so does the next renewal.
        std::thread::sleep(Duration::from_millis(200).saturating_sub(round.elapsed()));
        let mut c = schema.client();
        let mut tx = c.transaction().unwrap();
        tx.batch_execute(&format!(
            "LOCK TABLE {s}.tw_jobs, {s}.tw_leases IN ACCESS EXCLUSIVE MODE",
            s = schema.0
        ))
        .unwrap();
        let locked = Instant::now();
        std::thread::sleep(Duration::from_millis(4000));
        let unlocked = Instant::now();
        tx.commit().unwrap();
        drop(c);
        eventually(Duration::from_secs(8), || {
            jobs.counts().unwrap().waiting == 0
        });
        std::thread::sleep(Duration::from_millis(500));
        let starts = starts.lock().unwrap().clone();
        eprintln!(
            "runs of one version in one process: {}; started {:?} after the last renewal was sent \
             (lease {lease:?}; this node's clock gave it until {:?}); lock held {:?}",
            starts.len(),
            starts
                .iter()
                .map(|t| t.saturating_duration_since(round))
                .collect::<Vec<_>>(),
            lease - lease / 10,
            unlocked - locked,
        );
        assert_eq!(
            starts.len(),
            1,
            "the job version ran more than once in one process"
        );
    }

    /// A due job finds the lease lapsed by this node's clock (a renewal slower than 0.9 of a
    /// lease: here, `tw_leases` locked for 1.5 s by another transaction) and `due_now` drops the
    /// whole shard from the window ("its loss is on its way as an event"). But the slow renewal
    /// then succeeds under the same epoch (its `now()` is its start), so no `Lost`/`Held`
    /// follows: the node keeps renewing the shard and never loads it again. Its jobs never fire,
    /// and no other node may take them.
    #[test]
    fn a_slow_renewal_does_not_strand_a_shard() {
        let schema = Schema::new("strand");
        let runs = Arc::new(Mutex::new(Vec::new()));
        let store = PgStore::open(schema.options("a").lease(Duration::from_secs(6))).unwrap();
        let probe = store.clone();
        let a = counting(store, runs.clone());
        assert!(eventually(Duration::from_secs(10), || a.stats().shards == 8));
        std::thread::sleep(Duration::from_millis(300));
        let mut c = schema.client();
        // Just after a round (the lease thread's statements move): T = that round + 0.5 s.
        let before = probe.statements().1;
        assert!(eventually(Duration::from_secs(5), || probe.statements().1 > before));
        std::thread::sleep(Duration::from_millis(500));
        // Due after this node's clock says its lease lapsed (round + 5.4 s), before the unlock
        // (round + 5.8 s), itself before the server's lease expires (round + 6 s): the blocked
        // renewal (prepared, then run after the unlock) then renews the same epoch.
        let soon = SystemTime::now() + Duration::from_millis(5100);
        for i in 0..16 {
            a.schedule(Job::new(format!("j{i}"), "ok", soon)).unwrap();
        }
        let mut tx = c.transaction().unwrap();
        tx.batch_execute(&format!(
            "LOCK TABLE {}.tw_leases IN ACCESS EXCLUSIVE MODE",
            schema.0
        ))
        .unwrap();
        std::thread::sleep(Duration::from_millis(5300));
        tx.commit().unwrap();
        eprintln!("right after the unlock: window shards {}", a.stats().shards);
        std::thread::sleep(Duration::from_secs(3));
        let later = SystemTime::now() + Duration::from_millis(500);
        for i in 0..16 {
            a.schedule(Job::new(format!("late{i}"), "ok", later))
                .unwrap();
        }
        let all = eventually(Duration::from_secs(6), || runs.lock().unwrap().len() >= 32);
        let (owners,): (i64,) = {
            let r = c
                .query_one(
                    &format!(
                        "SELECT count(*) FROM {}.tw_leases WHERE owner = 'a' AND expires > now()",
                        schema.0
                    ),
                    &[],
                )
                .unwrap();
            (r.get(0),)
        };
        eprintln!(
            "fired {} of 32; window shards {}; store holds {:?}; server leases of 'a': {owners}; waiting {}",
            runs.lock().unwrap().len(),
            a.stats().shards,
            probe.held_shards(),
            a.counts().unwrap().waiting
        );
        assert!(all, "jobs of a shard this node still leases never fire");
    }

    /// `notify_within` shorter than the jobs' horizon is accepted (the docs say it must be at
    /// least the largest horizon): a job scheduled on one node, in a shard another holds, due
    /// between the two, is never fired.
    #[test]
    fn notify_within_is_the_schemas_and_bounds_the_horizon() {
        let schema = Schema::new("nw");
        let runs = Arc::new(Mutex::new(Vec::new()));
        let a = counting(PgStore::open(schema.options("a")).unwrap(), runs.clone());
        assert!(eventually(Duration::from_secs(10), || a.stats().shards == 8));
        std::thread::sleep(Duration::from_millis(300));
        // A node asking for a shorter announcement window than the schema's: the schema's holds
        // (it was a node's own, and a job it stored within a's window was never announced).
        let b = PgStore::open(schema.options("b").notify_within(Duration::from_secs(1))).unwrap();
        insert(
            &b,
            vec![Job::new(
                "j",
                "ok",
                SystemTime::now() + Duration::from_secs(2),
            )],
        );
        let fired = eventually(Duration::from_secs(6), || !runs.lock().unwrap().is_empty());
        assert!(fired, "a job due in 2 s, stored by b, reached a");
        // Jobs whose horizon is longer than the schema's window are refused at open.
        let fresh = Schema::new("nw2");
        let short =
            PgStore::open(fresh.options("c").notify_within(Duration::from_secs(60))).unwrap();
        let refused = Jobs::builder()
            .handler("ok", |_cx: &JobContext<'_>| Ok(()))
            .horizon(Duration::from_secs(3600))
            .open_store(short);
        assert!(matches!(
            refused,
            Err(tickwheel_durable::OpenError::Config(_))
        ));
    }

    /// The things that held: odd keys, a 2,000-job batch announced in many NOTIFYs, cut
    /// connections with jobs due, jobs moved between nodes, bigint saturation, schema names.
    #[test]
    fn announcements_of_odd_keys_and_big_batches_arrive() {
        let schema = Schema::new("odd");
        let runs = Arc::new(Mutex::new(Vec::new()));
        let a = counting(PgStore::open(schema.options("a")).unwrap(), runs.clone());
        assert!(eventually(Duration::from_secs(10), || a.stats().shards == 8));
        std::thread::sleep(Duration::from_millis(300));
        let b = PgStore::open(schema.options("b")).unwrap();
        let soon = SystemTime::now() + Duration::from_secs(2);
        let mut keys: Vec<String> = vec![
            "a b".into(),
            "line\nbreak\n".into(),
            "3 17 1000 5 x".into(),
            "ünïcødé ✓ 日本".into(),
            "k".repeat(512),
            "é".repeat(256),
            " ".into(),
            "\n".into(),
        ];
        keys.extend((0..2000).map(|i| format!("bulk-{i}-{}", "p".repeat(100))));
        let n = keys.len();
        insert(
            &b,
            keys.iter()
                .map(|k| Job::new(k.clone(), "ok", soon))
                .collect(),
        );
        let all = eventually(Duration::from_secs(15), || runs.lock().unwrap().len() >= n);
        let mut got = runs.lock().unwrap().clone();
        got.sort();
        got.dedup();
        eprintln!(
            "fired {} distinct of {n}, {} runs",
            got.len(),
            runs.lock().unwrap().len()
        );
        assert!(all && got.len() == n);
    }

    #[test]
    fn cut_connections_with_jobs_due_lose_nothing() {
        let schema = Schema::new("cut");
        let runs = Arc::new(Mutex::new(Vec::new()));
        let a = counting(
            PgStore::open(schema.options(&format!("cut-a-{}", std::process::id()))).unwrap(),
            runs.clone(),
        );
        let b_runs = Arc::new(Mutex::new(Vec::new()));
        let b = counting(
            PgStore::open(schema.options(&format!("cut-b-{}", std::process::id()))).unwrap(),
            b_runs.clone(),
        );
        assert!(eventually(Duration::from_secs(10), || {
            a.stats().shards + b.stats().shards == 8 && a.stats().shards > 0 && b.stats().shards > 0
        }));
        let mut c = schema.client();
        let start = SystemTime::now();
        let mut n = 0;
        for round in 0..20 {
            for i in 0..25 {
                let due = start + Duration::from_millis(200 + (round * 25 + i) * 8);
                // half from each node
                let node = if i % 2 == 0 { &a } else { &b };
                if node
                    .schedule(Job::new(format!("c{round}-{i}"), "ok", due))
                    .is_ok()
                {
                    n += 1;
                }
            }
            // Only this test's nodes: the other tests of this binary run beside it.
            c.batch_execute(&format!(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                 WHERE application_name LIKE 'tickwheel-durable/cut-_-{}' AND pid <> pg_backend_pid()
                 AND datname = current_database()",
                std::process::id()
            ))
            .unwrap();
            std::thread::sleep(Duration::from_millis(100));
        }
        let ok = eventually(Duration::from_secs(15), || {
            runs.lock().unwrap().len() + b_runs.lock().unwrap().len() >= n
        });
        let mut all: Vec<String> = runs.lock().unwrap().clone();
        all.extend(b_runs.lock().unwrap().iter().cloned());
        let total = all.len();
        all.sort();
        all.dedup();
        eprintln!("acknowledged {n}, runs {total}, distinct {}", all.len());
        assert!(ok && all.len() == n);
    }

    #[test]
    fn schema_names_that_pass_the_check() {
        for name in ["select", "user", "public"] {
            let r = PgStore::open(PgOptions::new(conninfo()).schema(name).shards(4).node("x"));
            eprintln!(
                "schema {name:?}: {:?}",
                r.as_ref().map(|_| ()).map_err(|e| format!("{e:?}"))
            );
            if name == "public" {
                let mut c = postgres::Client::connect(&conninfo(), postgres::NoTls).unwrap();
                let _ = c.batch_execute(
                    "DROP TABLE IF EXISTS public.tw_meta, public.tw_jobs, public.tw_dead,
                     public.tw_leases, public.tw_nodes; DROP SEQUENCE IF EXISTS public.tw_version",
                );
            }
        }
        for bad in ["Upper", "1x", "", "a-b", &"x".repeat(41)] {
            let r = PgStore::open(PgOptions::new(conninfo()).schema(bad));
            assert!(matches!(r, Err(OpenError::Config(_))), "{bad:?}");
        }
        let r = PgStore::open(PgOptions::new(conninfo()).schema("r2_z").shards(65_537));
        assert!(matches!(r, Err(OpenError::Config(_))));
        let r = PgStore::open(PgOptions::new(conninfo()).lease(Duration::from_millis(299)));
        assert!(matches!(r, Err(OpenError::Config(_))));
    }

    #[test]
    fn newer_schema_refused_and_bigint_saturation_and_nul_key() {
        let schema = Schema::new("ver");
        let store = PgStore::open(schema.options("a")).unwrap();
        let runs = Arc::new(Mutex::new(Vec::new()));
        let jobs = counting(store, runs);
        let far = SystemTime::UNIX_EPOCH + Duration::from_secs(400 * 365 * 24 * 3600);
        jobs.schedule(Job::new("far", "ok", far)).unwrap();
        let got = jobs.get("far").unwrap().unwrap();
        eprintln!("far deadline stored as {:?}", got.deadline());
        let nul = jobs.schedule(Job::new("a\0b", "ok", SystemTime::now()));
        eprintln!("NUL key: {:?}", nul.as_ref().map_err(|r| &r.error));
        assert!(
            matches!(nul, Err(ref r) if matches!(r.error, JobError::Store(_) | JobError::BadKey { .. }))
        );
        drop(jobs);
        let mut c = schema.client();
        c.batch_execute(&format!(
            "UPDATE {}.tw_meta SET value = 2 WHERE key = 'schema_version'",
            schema.0
        ))
        .unwrap();
        let r = PgStore::open(schema.options("a"));
        assert!(
            matches!(
                r,
                Err(OpenError::NewerFormat {
                    found: 2,
                    supported: 1
                })
            ),
            "{r:?}"
        );
    }

    #[test]
    fn many_nodes_join_at_once_and_share_evenly_then_leave() {
        let schema = Schema::new("many");
        let opts = |n: &str| {
            schema
                .options(n)
                .shards(64)
                .lease(Duration::from_millis(900))
        };
        let runs = Arc::new(Mutex::new(Vec::new()));
        let nodes: Vec<Jobs> = (0..9)
            .map(|i| counting(PgStore::open(opts(&format!("n{i}"))).unwrap(), runs.clone()))
            .collect();
        let even = eventually(Duration::from_secs(15), || {
            let held: Vec<u64> = nodes.iter().map(|j| j.stats().shards).collect();
            held.iter().sum::<u64>() == 64 && held.iter().all(|&h| (7..=8).contains(&h))
        });
        eprintln!(
            "nine nodes, 64 shards: {:?}",
            nodes.iter().map(|j| j.stats().shards).collect::<Vec<_>>()
        );
        assert!(even);
        let mut nodes = nodes;
        nodes.truncate(2);
        let even = eventually(Duration::from_secs(15), || {
            nodes.iter().all(|j| j.stats().shards == 32)
        });
        eprintln!(
            "two: {:?}",
            nodes.iter().map(|j| j.stats().shards).collect::<Vec<_>>()
        );
        assert!(even);
        let one = PgStore::open(schema.options("x").shards(1));
        assert!(one.is_ok(), "shards of an existing schema are its own");
    }

    /// Three nodes, one joining and leaving over and over, leases of 600 ms, schedules,
    /// reschedules and cancels of the same keys from every node: every job left waiting fires,
    /// none that was cancelled does.
    #[test]
    fn churn_of_three_nodes_loses_nothing() {
        let schema = Schema::new("churn");
        let opts = |n: &str| schema.options(n).lease(Duration::from_millis(600));
        let runs = Arc::new(Mutex::new(Vec::new()));
        let a = counting(PgStore::open(opts("a")).unwrap(), runs.clone());
        let b = counting(PgStore::open(opts("b")).unwrap(), runs.clone());
        let stop = Arc::new(AtomicBool::new(false));
        let st = stop.clone();
        let r2 = runs.clone();
        let o = opts("c");
        let churn = std::thread::spawn(move || {
            let mut i = 0;
            while !st.load(SeqCst) {
                let c = counting(
                    PgStore::open(o.clone().node(format!("c{i}"))).unwrap(),
                    r2.clone(),
                );
                std::thread::sleep(Duration::from_millis(700));
                drop(c);
                std::thread::sleep(Duration::from_millis(300));
                i += 1;
            }
        });
        let start = SystemTime::now();
        let mut expect = std::collections::BTreeSet::new();
        for i in 0..300u64 {
            let key = format!("k{}", i % 100);
            let node = if i % 2 == 0 { &a } else { &b };
            let due = start + Duration::from_millis(500 + i * 20);
            match i % 3 {
                0 | 1 => {
                    if node.upsert(Job::new(key.clone(), "ok", due)).is_ok() {
                        expect.insert(key);
                    }
                }
                _ => {
                    if let Ok(true) = node.cancel(&key) {
                        expect.remove(&key);
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let ok = eventually(Duration::from_secs(20), || a.counts().unwrap().waiting == 0);
        stop.store(true, SeqCst);
        churn.join().unwrap();
        let got: std::collections::BTreeSet<String> =
            runs.lock().unwrap().iter().cloned().collect();
        let missing: Vec<_> = expect.iter().filter(|k| !got.contains(*k)).collect();
        eprintln!(
            "runs {}, distinct {}, missing {:?}, waiting {}",
            runs.lock().unwrap().len(),
            got.len(),
            missing,
            a.counts().unwrap().waiting
        );
        assert!(ok && missing.is_empty());
    }
}
