//! A timer used only for futures starts no executor threads: its pool is started by the first
//! task that needs it (issue 46: a newcomer's `Timer::new()` started three threads to serve
//! futures alone). The shared pool's twin is a binary of its own (`lazy_shared_pool.rs`): that
//! pool is process-wide, and any other test here may start it.

use std::time::Duration;

use tickwheel::{ManualClock, Task, Timer};

use crate::support::{MS, SEC, counter, poll};

/// Threads of this process whose name starts with `prefix` (the kernel keeps 15 bytes of a
/// name: keep prefixes short).
#[cfg(target_os = "linux")]
pub(crate) fn threads_named(prefix: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task is readable")
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|comm| comm.trim_end().starts_with(prefix))
        .count()
}

#[cfg(target_os = "linux")]
#[test]
fn sleeps_and_timeouts_start_no_pool_and_the_first_task_does() {
    let clock = ManualClock::new();
    // `lzown-exec-{i}`: a name no other test uses.
    let timer = Timer::builder()
        .clock(clock.clone())
        .threads(2)
        .name("lzown")
        .build()
        .unwrap();
    assert_eq!(threads_named("lzown-tick"), 1, "the tick thread runs");
    let (_, waker) = counter();
    let mut sleep = Box::pin(timer.sleep(5 * MS));
    let mut timeout = Box::pin(timer.timeout(SEC, std::future::pending::<()>()));
    let mut quick = Box::pin(timer.timeout(SEC, std::future::ready(7)));
    assert!(poll(&mut sleep, &waker).is_pending());
    assert!(poll(&mut timeout, &waker).is_pending());
    assert_eq!(poll(&mut quick, &waker), std::task::Poll::Ready(Ok(7)));
    clock.advance(SEC);
    assert!(poll(&mut sleep, &waker).is_ready());
    assert!(poll(&mut timeout, &waker).is_ready());
    let mut interval = timer.interval(10 * MS);
    for _ in 0..3 {
        crate::support::tick(&mut interval, &waker);
        clock.advance(10 * MS);
    }
    timer.wait_idle();
    assert_eq!(
        threads_named("lzown-exec"),
        0,
        "futures alone start no pool"
    );
    assert_eq!(timer.stats().panicked, 0);

    let (tx, rx) = std::sync::mpsc::channel();
    timer
        .add_or_submit(Task::after(Duration::ZERO, move || {
            tx.send(std::thread::current().name().map(str::to_owned))
                .unwrap();
        }))
        .unwrap();
    let ran_on = rx.recv().unwrap().unwrap_or_default();
    assert!(ran_on.starts_with("lzown-exec-"), "{ran_on}");
    // A thread names itself as it starts: the pool's other thread may not have yet.
    assert!(
        crate::support::eventually(|| threads_named("lzown-exec") == 2),
        "the first task started the pool"
    );
}

/// `threads(0)` is still refused at build, though the pool starts later.
#[test]
fn zero_threads_is_refused_at_build() {
    assert!(matches!(
        Timer::builder().threads(0).build(),
        Err(tickwheel::BuildError::ZeroThreads)
    ));
}
