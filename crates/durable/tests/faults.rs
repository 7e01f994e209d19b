//! Faults of the store: a full disk (a real one: the file-size limit of a child process), and a
//! store whose commits fail on demand. A failed commit is an error to its caller and loses
//! nothing acknowledged; the jobs' own outcomes (a run's delete) are kept and committed later.

mod support;

use std::process::{Command, Stdio};
use std::sync::atomic::Ordering::SeqCst;

use support::{Env, Hooked, MIN, SEC, settle};
use tickwheel_durable::{Job, JobError, Jobs, RedbStore, Store, StoreError};

const CHILD: &str = "DURABLE_FULL_DISK_CHILD";

/// The child: opens the store, then limits the size of any file it writes (RLIMIT_FSIZE; writes
/// past it fail with EFBIG, as on a full disk) and schedules 4 KiB jobs until the store refuses
/// several in a row. Prints `ACK key` for each acknowledged schedule, `ERR text` for each error.
#[test]
fn full_disk_child() {
    let Some(path) = std::env::var_os(CHILD) else {
        return;
    };
    let jobs = Jobs::builder()
        .handler("ok", |_: &tickwheel_durable::JobContext<'_>| Ok(()))
        .open(&path)
        .expect("opens");
    let size = std::fs::metadata(&path).unwrap().len();
    // SAFETY: plain libc calls on this process, with valid arguments.
    #[allow(unsafe_code)]
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
        let limit = libc::rlimit {
            rlim_cur: size + 256 * 1024,
            rlim_max: libc::RLIM_INFINITY,
        };
        assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &limit), 0);
    }
    let far = std::time::SystemTime::now() + 24 * 3600 * SEC;
    let mut failures_in_a_row = 0;
    for i in 0..10_000 {
        let key = format!("k{i:05}");
        match jobs.schedule(Job::new(key.as_str(), "ok", far).with_payload(vec![7u8; 4096])) {
            Ok(()) => {
                println!("ACK {key}");
                failures_in_a_row = 0;
            }
            Err(e) => {
                println!("ERR {}", e.error);
                failures_in_a_row += 1;
                if failures_in_a_row == 20 {
                    break;
                }
            }
        }
    }
    std::process::exit(0); // as a crash would: no close, no last commit
}

#[test]
fn a_full_disk_refuses_schedules_and_loses_nothing_acknowledged() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let env = Env::new();
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "full_disk_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, env.path())
        .stderr(Stdio::null())
        .output()
        .expect("the child runs");
    let out = String::from_utf8_lossy(&out.stdout);
    let acked: Vec<&str> = out.lines().filter_map(|l| l.strip_prefix("ACK ")).collect();
    let errors: Vec<&str> = out.lines().filter_map(|l| l.strip_prefix("ERR ")).collect();
    assert!(
        !acked.is_empty(),
        "nothing acknowledged before the disk filled:\n{out}"
    );
    assert!(errors.len() >= 20, "the store never refused:\n{out}");
    assert!(
        errors.iter().all(|e| e.starts_with("the store failed")),
        "{errors:?}"
    );
    // Reopened without the limit: every acknowledged job is there.
    let store = RedbStore::open(env.path()).expect("the store reopens after the failed commits");
    for key in &acked {
        assert!(
            store.get(key).unwrap().is_some(),
            "acknowledged {key} is lost"
        );
    }
    println!(
        "{} acknowledged, all kept; {} refused",
        acked.len(),
        errors.len()
    );
}

#[test]
fn failed_commits_are_errors_and_a_runs_delete_is_kept_until_it_commits() {
    let env = Env::new();
    let (store, knobs) = Hooked::new(RedbStore::open(env.path()).unwrap());
    let failing = &knobs.fail_apply;
    let jobs = env.builder().open_store(store).unwrap();
    jobs.schedule(Job::new("kept", "ok", env.now() + MIN))
        .unwrap();
    failing.store(true, SeqCst);
    let refused = jobs
        .schedule(Job::new("refused", "ok", env.now()))
        .unwrap_err();
    assert!(
        matches!(refused.error, JobError::Store(StoreError::Io(_))),
        "{refused:?}"
    );
    assert!(matches!(jobs.cancel("kept"), Err(JobError::Store(_))));
    // The job runs while the store fails: its delete cannot commit, and is kept.
    env.clock.advance(MIN);
    jobs.timer().wait_idle();
    assert_eq!(env.ran(), ["kept"]);
    assert_eq!(jobs.counts().unwrap().waiting, 1, "not deleted yet");
    failing.store(false, SeqCst);
    settle(&jobs);
    // Retried every 100 ms by the commit thread: wait for it, then check.
    let give_up = std::time::Instant::now() + 30 * SEC;
    while jobs.counts().unwrap().waiting != 0 {
        assert!(
            std::time::Instant::now() < give_up,
            "the delete never committed"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(
        jobs.get("refused").unwrap(),
        None,
        "a refused schedule stored nothing"
    );
    env.advance(&jobs, 10 * MIN);
    assert_eq!(env.ran(), ["kept"], "ran once");
}
