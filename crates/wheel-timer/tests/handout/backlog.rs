//! The backlog of jobs handed to executors: `wait_idle` never returns while a task handed out can
//! still run, under an executor that runs jobs out of order on several threads, inline, drops
//! them, or panics before or after keeping them; and the count that `max_pending` reads counts
//! each task once while chunks are handed on, and neither leaks nor goes negative. (From an
//! adversarial review of the chunked hand-out's counting; giving a chunk's count back before its
//! tasks are handed on fails two of these.)

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::Duration;

use tickwheel::{AddError, Executor, Job, ManualClock, Task, Timer};

use crate::support::{Boom, Held, MS, Rng, SEC, silence_boom};

#[derive(Clone, Copy)]
struct Modes {
    inline: bool,
    drop: bool,
    panic_before: bool,
    panic_after_keeping: bool,
}

/// Jobs go to a shared bag that worker threads empty in random order, after a random pause;
/// some `execute` calls run the job inline, drop it, panic without keeping it, or keep it (or
/// run it inline) and then panic.
struct Hostile {
    bag: Mutex<VecDeque<Job>>,
    cv: Condvar,
    rng: Mutex<Rng>,
    modes: Modes,
    stop: AtomicBool,
    in_flight: AtomicUsize,
    dropped: AtomicUsize,
}

impl Hostile {
    fn new(seed: u64, modes: Modes) -> Arc<Hostile> {
        Arc::new(Hostile {
            bag: Mutex::new(VecDeque::new()),
            cv: Condvar::new(),
            rng: Mutex::new(Rng::new(seed)),
            modes,
            stop: AtomicBool::new(false),
            in_flight: AtomicUsize::new(0),
            dropped: AtomicUsize::new(0),
        })
    }

    fn start(self: &Arc<Self>, workers: usize) -> Vec<thread::JoinHandle<()>> {
        (0..workers)
            .map(|_| {
                let me = self.clone();
                thread::spawn(move || me.work())
            })
            .collect()
    }

    fn work(&self) {
        loop {
            let job = {
                let mut bag = self.bag.lock().unwrap();
                loop {
                    if self.stop.load(SeqCst) && bag.is_empty() {
                        return;
                    }
                    if !bag.is_empty() {
                        let i = self.rng.lock().unwrap().below(bag.len() as u64) as usize;
                        self.in_flight.fetch_add(1, SeqCst);
                        break bag.remove(i).unwrap();
                    }
                    bag = self
                        .cv
                        .wait_timeout(bag, Duration::from_millis(5))
                        .unwrap()
                        .0;
                }
            };
            let pause = self.rng.lock().unwrap().below(4);
            if pause == 0 {
                thread::sleep(Duration::from_micros(50));
            } else if pause == 1 {
                thread::yield_now();
            }
            job();
            self.in_flight.fetch_sub(1, SeqCst);
        }
    }

    /// No job kept and none running.
    fn quiescent(&self) -> bool {
        self.bag.lock().unwrap().is_empty() && self.in_flight.load(SeqCst) == 0
    }

    fn keep(&self, job: Job) {
        let mut bag = self.bag.lock().unwrap();
        if self.rng.lock().unwrap().below(2) == 0 {
            bag.push_back(job);
        } else {
            bag.push_front(job);
        }
        self.cv.notify_one();
    }
}

impl Executor for Hostile {
    fn execute(&self, job: Job) {
        let roll = self.rng.lock().unwrap().below(100);
        let m = self.modes;
        match roll {
            0..=9 if m.inline => job(),
            10..=14 if m.drop => {
                self.dropped.fetch_add(1, SeqCst);
                drop(job);
            }
            15..=19 if m.panic_before => {
                self.dropped.fetch_add(1, SeqCst);
                let _job = job; // dropped by the unwind
                std::panic::panic_any(Boom);
            }
            20..=24 if m.panic_after_keeping => {
                self.keep(job);
                std::panic::panic_any(Boom);
            }
            25..=27 if m.panic_after_keeping => {
                job(); // ran inline, then the executor panics
                std::panic::panic_any(Boom);
            }
            _ => self.keep(job),
        }
    }
}

/// Rounds of up to 300 tasks due at once (chunks of 64 handed on by the pool's threads); after
/// `advance` + `wait_idle` of round r, no task of round r (or earlier) may start, and every
/// task ran or comes back from shutdown.
fn wait_idle_rounds(seed: u64, modes: Modes, rounds: u64) {
    silence_boom();
    let clock = ManualClock::new();
    let exec = Hostile::new(seed, modes);
    let workers = exec.start(3);
    let timer = Timer::builder()
        .clock(clock.clone())
        .executor(exec.clone())
        .build()
        .unwrap();
    let done_round = Arc::new(AtomicU64::new(0)); // rounds whose wait_idle returned, 1-based
    let late = Arc::new(Mutex::new(Vec::<(u64, u64)>::new()));
    let ran = Arc::new(AtomicU64::new(0));
    let mut r = Rng::new(seed ^ 0xABCD);
    let mut added = 0u64;
    for round in 1..=rounds {
        let n = 1 + r.below(300);
        for k in 0..n {
            let (d, l, ran) = (done_round.clone(), late.clone(), ran.clone());
            timer
                .add_or_submit(Task::after((1 + k as u32 % 5) * MS, move || {
                    let seen = d.load(SeqCst);
                    if seen >= round {
                        l.lock().unwrap().push((round, seen));
                    }
                    ran.fetch_add(1, SeqCst);
                }))
                .unwrap();
        }
        added += n;
        clock.advance(10 * MS);
        timer.wait_idle();
        done_round.store(round, SeqCst);
        if round % 16 == 0 {
            // Let stragglers (if any) show up.
            while !exec.quiescent() {
                thread::sleep(Duration::from_millis(1));
            }
        }
        let l = late.lock().unwrap();
        assert!(
            l.is_empty(),
            "seed {seed}: tasks of a round ran after that round's wait_idle returned: {:?}",
            &l[..l.len().min(10)]
        );
    }
    while !exec.quiescent() {
        thread::sleep(Duration::from_millis(1));
    }
    let back = timer.shutdown().len() as u64;
    exec.stop.store(true, SeqCst);
    exec.cv.notify_all();
    for w in workers {
        w.join().unwrap();
    }
    let ran = ran.load(SeqCst);
    assert!(late.lock().unwrap().is_empty());
    assert_eq!(
        ran + back,
        added,
        "seed {seed}: {ran} ran + {back} returned != {added} added"
    );
    if !(modes.drop || modes.panic_before) {
        assert_eq!(
            ran, added,
            "seed {seed}: nothing was dropped, yet not all ran"
        );
    }
}

#[test]
fn review_wait_idle_out_of_order_pool() {
    let m = Modes {
        inline: false,
        drop: false,
        panic_before: false,
        panic_after_keeping: false,
    };
    for seed in 1..=6 {
        wait_idle_rounds(seed, m, 64);
    }
}

#[test]
fn review_wait_idle_inline_and_panic_after_keeping() {
    let m = Modes {
        inline: true,
        drop: false,
        panic_before: false,
        panic_after_keeping: true,
    };
    for seed in 11..=16 {
        wait_idle_rounds(seed, m, 64);
    }
}

#[test]
fn review_wait_idle_everything_hostile() {
    let m = Modes {
        inline: true,
        drop: true,
        panic_before: true,
        panic_after_keeping: true,
    };
    for seed in 21..=26 {
        wait_idle_rounds(seed, m, 64);
    }
}

/// From a fresh thread (a shard of its own, whose budget is read from the whole timer's
/// count): how many far adds `max_pending` accepts now. The tasks are cancelled again.
fn headroom(timer: &Timer) -> usize {
    let weak = timer.downgrade();
    thread::spawn(move || {
        let mut handles = Vec::new();
        loop {
            match weak.add_or_submit(Task::after(3600 * SEC, || {})) {
                Ok(h) => handles.push(h),
                Err(AddError::Full(_)) => break,
                Err(e) => panic!("{e}"),
            }
            assert!(
                handles.len() <= 1 << 20,
                "no bound: the backlog wrapped below zero?"
            );
        }
        let n = handles.len();
        for h in handles {
            assert!(h.cancel());
        }
        n
    })
    .join()
    .unwrap()
}

/// After hostile rounds (jobs dropped, run inline, panicking executors, chunks handed on out
/// of order), once everything settled the backlog is back to zero: `max_pending` admits
/// exactly `max` far adds again (a leak admits fewer, a count below zero none).
#[test]
fn review_backlog_returns_to_zero_after_hostile_rounds() {
    silence_boom();
    const MAX: usize = 4096;
    for seed in [3u64, 7, 9] {
        let clock = ManualClock::new();
        let exec = Hostile::new(
            seed,
            Modes {
                inline: true,
                drop: true,
                panic_before: true,
                panic_after_keeping: true,
            },
        );
        let workers = exec.start(2);
        let timer = Timer::builder()
            .clock(clock.clone())
            .executor(exec.clone())
            .max_pending(MAX)
            .build()
            .unwrap();
        assert_eq!(headroom(&timer), MAX, "fresh timer");
        let mut r = Rng::new(seed);
        for _ in 0..20 {
            for k in 0..(1 + r.below(1000)) {
                let _ = timer.add_or_submit(Task::after((1 + k as u32 % 7) * MS, || {}));
            }
            clock.advance(10 * MS);
        }
        timer.wait_idle();
        while !exec.quiescent() {
            thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(timer.pending(), 0);
        assert_eq!(
            headroom(&timer),
            MAX,
            "seed {seed}: the backlog did not return to zero"
        );
        let _ = timer.shutdown();
        exec.stop.store(true, SeqCst);
        exec.cv.notify_all();
        for w in workers {
            w.join().unwrap();
        }
    }
}

/// While a chunk's job is half way through handing its tasks on (held executor: the task jobs
/// it made are held, the rest of the chunk not yet handed on), each due task counts exactly
/// once: `max_pending` admits `max - due` more, whichever number of chunk jobs ran.
#[test]
fn review_backlog_counts_each_task_once_at_every_stage() {
    const MAX: usize = 1000;
    for due in [66u32, 128, 200, 300] {
        let clock = ManualClock::new();
        let held = Arc::new(Held::default());
        let timer = Timer::builder()
            .clock(clock.clone())
            .executor(held.clone())
            .max_pending(MAX)
            .build()
            .unwrap();
        let ran = Arc::new(AtomicUsize::new(0));
        for k in 0..due {
            let ran = ran.clone();
            timer
                .add_or_submit(Task::after((1 + k % 3) * MS, move || {
                    ran.fetch_add(1, SeqCst);
                }))
                .unwrap();
        }
        clock.advance(10 * MS);
        let chunks = held.take();
        assert!(
            chunks.len() >= 2,
            "{due} due: in chunks, got {} jobs",
            chunks.len()
        );
        assert_eq!(
            headroom(&timer),
            MAX - due as usize,
            "{due} due, no chunk run"
        );
        let mut held_back = Vec::new();
        for (i, chunk) in chunks.into_iter().enumerate() {
            chunk(); // hands its tasks on, into `held`
            held_back.extend(held.take());
            assert_eq!(
                headroom(&timer),
                MAX - due as usize,
                "{due} due, {} chunk jobs run",
                i + 1
            );
        }
        // Run half of the tasks' jobs, drop the rest unrun.
        let half = held_back.len() / 2;
        let mut it = held_back.into_iter();
        for job in it.by_ref().take(half) {
            job();
        }
        assert_eq!(headroom(&timer), MAX - (due as usize - half));
        drop(it.collect::<Vec<_>>());
        assert_eq!(headroom(&timer), MAX, "{due} due: all ran or dropped");
        assert_eq!(ran.load(SeqCst), half);
        timer.wait_idle();
        let back = timer.shutdown().len();
        assert_eq!(back + half, due as usize);
    }
}
