//! The process-wide shared pool is started by the first task that needs it, not by the first
//! timer (issue 46: a newcomer's `Timer::new()` started three threads to serve futures alone).
//! A binary of its own with one test: the pool lives as long as the process, so no other test
//! may have started it.

#[cfg(target_os = "linux")]
#[test]
fn a_default_timer_serving_futures_starts_no_shared_pool() {
    use std::sync::Arc;
    use std::task::{Context, Poll, Wake, Waker};
    use std::time::Duration;
    use tickwheel::{ManualClock, Task, Timer};

    struct Noop;
    impl Wake for Noop {
        fn wake(self: Arc<Self>) {}
    }
    // `tickwheel-shared-exec-{i}` as the kernel keeps it (15 bytes).
    fn shared_threads() -> usize {
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
            .filter(|comm| comm.trim_end().starts_with("tickwheel-share"))
            .count()
    }

    let clock = ManualClock::new();
    let timer = Timer::builder().clock(clock.clone()).build().unwrap();
    let waker = Waker::from(Arc::new(Noop));
    let mut cx = Context::from_waker(&waker);
    let mut sleep = Box::pin(timer.sleep(Duration::from_millis(5)));
    assert!(sleep.as_mut().poll(&mut cx).is_pending());
    clock.advance(Duration::from_millis(5));
    assert_eq!(sleep.as_mut().poll(&mut cx), Poll::Ready(()));
    assert_eq!(shared_threads(), 0, "futures alone start no pool");

    let (tx, rx) = std::sync::mpsc::channel();
    timer
        .add_or_submit(Task::after(Duration::ZERO, move || tx.send(()).unwrap()))
        .unwrap();
    rx.recv().unwrap();
    let width = std::thread::available_parallelism().map_or(2, |n| n.get());
    // A thread names itself as it starts: the pool's others may not have yet.
    let until = std::time::Instant::now() + Duration::from_secs(30);
    while shared_threads() < width && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(
        shared_threads(),
        width,
        "the first task started the shared pool"
    );
}
