//! Schedule a job, crash, reopen: the job fires. The crash is real: a child process schedules
//! the job and aborts (no close, no last commit); this process then opens the store.
//!
//! `cargo run -p tickwheel-durable --example crash_and_reopen`

use std::process::Command;
use std::sync::mpsc;
use std::time::{Duration, SystemTime};

use tickwheel_durable::{Job, JobContext, Jobs};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    if let (Some(mode), Some(path)) = (args.next(), args.next())
        && mode == "crash"
    {
        // The child: schedule, and die before anything else happens.
        let jobs = Jobs::builder()
            .handler("cancel-unpaid", |_: &JobContext<'_>| Ok(()))
            .open(&path)?;
        let due = SystemTime::now() + Duration::from_millis(300);
        jobs.schedule(Job::new("order-42", "cancel-unpaid", due))?; // on disk now
        std::process::abort();
    }
    let dir = std::env::temp_dir().join(format!("tickwheel-orders-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("orders.redb");
    let me = std::env::current_exe()?;
    let status = Command::new(me).arg("crash").arg(&path).status()?;
    assert!(!status.success(), "the child crashed");

    let (fired, rx) = mpsc::channel();
    let jobs = Jobs::builder()
        .handler("cancel-unpaid", move |cx: &JobContext<'_>| {
            fired.send(cx.key().to_owned())?;
            Ok(())
        })
        .open(&path)?;
    let key = rx.recv_timeout(Duration::from_secs(10))?;
    println!("{key} fired after the crash");
    jobs.close()?;
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
