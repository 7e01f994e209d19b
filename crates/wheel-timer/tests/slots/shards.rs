//! The per-thread shards seen from outside: counts and bounds are for the whole timer, handles
//! work from any thread, and a thread's shard outlives the thread (its tasks still run) and is
//! reused by the next thread. On the manual clock, so every assertion is exact.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::thread;

use tickwheel::{AddError, InlineExecutor, ManualClock, Task, Timer, TimerHandle};

use crate::support::{DAY, SEC, manual};

/// Adds `n` far tasks from a new thread and returns their handles once the thread has exited.
fn add_from_a_thread(timer: &Arc<Timer>, n: usize) -> Vec<TimerHandle> {
    let t = timer.clone();
    thread::spawn(move || {
        (0..n)
            .map(|_| t.add_or_submit(Task::after(DAY, || {})).unwrap())
            .collect()
    })
    .join()
    .unwrap()
}

#[test]
fn a_handle_is_one_word_and_can_be_shared() {
    let _serial = crate::serial();
    fn shareable<T: Clone + Send + Sync + 'static>() {}
    shareable::<TimerHandle>();
    assert_eq!(std::mem::size_of::<TimerHandle>(), 8);
    assert_eq!(
        std::mem::size_of::<Option<TimerHandle>>(),
        8,
        "a handle is never zero"
    );
}

#[test]
fn pending_counts_every_thread_and_cancels_from_other_threads() {
    let _serial = crate::serial();
    let (_clock, timer) = manual();
    let timer = Arc::new(timer);
    let handles: Vec<TimerHandle> = (0..4)
        .flat_map(|_| add_from_a_thread(&timer, 100))
        .collect();
    assert_eq!(timer.pending(), 400);
    assert_eq!(timer.stats().added, 400);
    // Cancel every task from a thread that added none of them.
    assert!(handles.iter().all(TimerHandle::cancel));
    assert_eq!(timer.pending(), 0);
    let stats = timer.stats();
    assert_eq!((stats.pending, stats.cancelled), (0, 400));
}

#[test]
fn max_pending_is_one_bound_for_the_whole_timer() {
    let _serial = crate::serial();
    const MAX: usize = 1_000;
    const THREADS: usize = 4;
    let timer = Arc::new(
        Timer::builder()
            .clock(ManualClock::new())
            .executor(Arc::new(InlineExecutor::new()))
            .max_pending(MAX)
            .build()
            .unwrap(),
    );
    // Each thread adds until it is refused.
    let accepted: Vec<Vec<TimerHandle>> = (0..THREADS)
        .map(|_| {
            let t = timer.clone();
            thread::spawn(move || {
                let mut mine = Vec::new();
                loop {
                    match t.add_or_submit(Task::after(DAY, || {})) {
                        Ok(h) => mine.push(h),
                        Err(AddError::Full(_)) => return mine,
                        Err(e) => panic!("unexpected {e:?}"),
                    }
                }
            })
        })
        .map(|t| t.join().unwrap())
        .collect();
    let total: usize = accepted.iter().map(Vec::len).sum();
    // Each thread reads the total once every 64 adds: up to 64 more per other adding thread.
    assert!(
        (MAX..=MAX + 64 * (THREADS - 1)).contains(&total),
        "{total} accepted with max_pending({MAX}) and {THREADS} threads"
    );
    assert_eq!(timer.pending(), total as u64);
    assert_eq!(timer.stats().rejected, THREADS as u64);
    // Cancels on this thread make room for adds on another.
    let all: Vec<&TimerHandle> = accepted.iter().flatten().collect();
    for h in &all[..total - MAX + 10] {
        assert!(h.cancel());
    }
    assert_eq!(add_from_a_thread(&timer, 10).len(), 10);
}

#[test]
fn a_thread_s_tasks_outlive_it_and_its_shard_is_reused() {
    let _serial = crate::serial();
    let (clock, timer) = manual();
    let timer = Arc::new(timer);
    let ran = Arc::new(AtomicUsize::new(0));
    // A thread adds a task and exits: the task still runs, and its handle works from here.
    let (r, t) = (ran.clone(), timer.clone());
    let (runs, cancelled) = thread::spawn(move || {
        let r2 = r.clone();
        let runs = t
            .add_or_submit(Task::after(SEC, move || {
                r2.fetch_add(1, SeqCst);
            }))
            .unwrap();
        let cancelled = t
            .add_or_submit(Task::after(SEC, move || {
                r.fetch_add(100, SeqCst);
            }))
            .unwrap();
        (runs, cancelled)
    })
    .join()
    .unwrap();
    assert!(cancelled.cancel(), "a handle from an exited thread cancels");
    clock.advance(SEC);
    assert_eq!(ran.load(SeqCst), 1);
    assert!(runs.is_done());

    // Fifty threads in turn, each adding ten tasks that are cancelled once it has exited: one
    // shard serves them all, so the memory does not grow with the number of threads that ever
    // added.
    let cycle = || {
        for h in add_from_a_thread(&timer, 10) {
            assert!(h.cancel());
        }
    };
    cycle();
    let one_thread = timer.heap_bytes();
    for _ in 0..50 {
        cycle();
    }
    assert_eq!(timer.pending(), 0);
    assert_eq!(
        timer.heap_bytes(),
        one_thread,
        "threads that exited left shards that were not reused"
    );
}

#[test]
fn the_next_timer_takes_over_the_shards_around_the_handles_the_last_one_left() {
    let _serial = crate::serial();
    use tickwheel::TaskState;
    // A timer's shards go to the next timer, whose adds sweep up their slots lowest first; slots
    // still pinned by the old timer's handles are stepped over, and come back when those go.
    let mut kept: Vec<(TimerHandle, TaskState)> = Vec::new();
    for round in 0..4 {
        let (clock, timer) = manual();
        let ran = Arc::new(AtomicUsize::new(0));
        let handles: Vec<TimerHandle> = (0..300)
            .map(|i| {
                let r = ran.clone();
                let delay = SEC * (1 + i % 3);
                let task = Task::after(delay, move || {
                    r.fetch_add(1, SeqCst);
                });
                timer.add_or_submit(task).unwrap()
            })
            .collect();
        // The old timers' handles answer for their own tasks, whatever reused the shards.
        for (h, state) in &kept {
            assert_eq!(h.state(), *state, "round {round}");
            assert!(!h.cancel() && !h.reschedule(SEC), "round {round}");
        }
        if round % 2 == 1 {
            kept.clear(); // their slots come back to whichever shard holds them
        }
        for h in handles.iter().skip(1).step_by(3) {
            assert!(h.cancel(), "round {round}: the 2 s tasks");
        }
        clock.advance(SEC);
        assert_eq!(
            ran.load(SeqCst),
            100,
            "round {round}: the 1 s tasks ran, once each"
        );
        let [done, cancelled, returned] = [0, 1, 2].map(|i| handles[i].clone());
        drop(handles);
        assert_eq!(timer.shutdown().len(), 100, "round {round}: the 3 s tasks");
        kept.push((done, TaskState::Done));
        kept.push((cancelled, TaskState::Cancelled));
        kept.push((returned, TaskState::Returned));
    }
}
