//! The engine behind [`Jobs`](crate::Jobs): the store, the commit thread, the window, the timer,
//! and how they meet. A commit's report moves jobs into the window and arms them (`committed`);
//! the window's loads read the store in deadline order as the horizon moves (`load`); a job's
//! timer task runs its handler (`fire.rs`).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use tickwheel::{Task, Timer};

use crate::clock::WallClock;
use crate::commit::{Answer, CommitStats, Committed, Pending, Queue, Request};
use crate::error::{JobError, StoreError};
use crate::handler::Runner;
use crate::job::wall_ns;
use crate::retry::RetryPolicy;
use crate::stats::{Histogram, Stats};
use crate::store::{Applied, Cursor, Event, Lease, Op, Store};
use crate::window::{Entry, Load, Place, State, Window};

/// What runs jobs that were overdue when the store was opened (after a crash, or a stop longer
/// than their delay).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Misfire {
    /// Run every one (the default), earliest first.
    #[default]
    RunAll,
    /// Run those overdue by less than this; move the others to the dead-letter set (counted in
    /// [`Stats::misfired`](crate::Stats::misfired)), where they can be requeued.
    RunWithin(Duration),
    /// Run none: move them all to the dead-letter set.
    SkipAll,
}

/// The settings the builder settled.
pub(crate) struct Config {
    /// Wall-clock ns.
    pub(crate) horizon: u64,
    pub(crate) retry: RetryPolicy,
    pub(crate) misfire: Misfire,
    pub(crate) max_payload: usize,
    /// Jobs read per load.
    pub(crate) batch: usize,
}

/// The counters of [`Stats`] that the engine keeps.
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) scheduled: AtomicU64,
    pub(crate) fired: AtomicU64,
    pub(crate) succeeded: AtomicU64,
    pub(crate) retried: AtomicU64,
    pub(crate) dead: AtomicU64,
    pub(crate) misfired: AtomicU64,
    pub(crate) cancelled: AtomicU64,
    pub(crate) reads: AtomicU64,
}

pub(crate) struct Engine {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) timer: Timer,
    pub(crate) wall: Arc<dyn WallClock>,
    pub(crate) handlers: HashMap<String, Runner>,
    pub(crate) config: Config,
    /// Wall-clock ns when the store was opened: jobs due before it were overdue at open.
    pub(crate) opened_at: u64,
    /// How far ahead other nodes announce the jobs they store (wall ns), if there are others.
    announced: Option<u64>,
    pub(crate) window: Mutex<Window>,
    /// To the commit thread; `None` once closed.
    queue: Arc<Queue>,
    commit_thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    pub(crate) commit_stats: Arc<CommitStats>,
    pub(crate) counters: Counters,
    pub(crate) lateness: Histogram,
    pub(crate) closed: AtomicBool,
    /// The close has ended (see `finish_close`).
    finished: Mutex<bool>,
    /// Handlers running now (`close` waits for them).
    pub(crate) running: Mutex<usize>,
    pub(crate) idle: Condvar,
    /// Itself, for the closures of timer tasks.
    me: Weak<Engine>,
}

/// A job to arm in the timer: key, version, deadline (wall ns).
type Arming = (String, u64, u64);

/// What the builder hands the engine.
pub(crate) struct Parts {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) timer: Timer,
    pub(crate) wall: Arc<dyn WallClock>,
    pub(crate) handlers: HashMap<String, Runner>,
    pub(crate) config: Config,
    pub(crate) durability: crate::Durability,
}

impl Engine {
    /// Starts the commit thread.
    pub(crate) fn start(parts: Parts) -> std::io::Result<Arc<Engine>> {
        let queue = Arc::new(Queue::default());
        let commit_stats = Arc::new(CommitStats::new());
        let opened_at = wall_ns(parts.wall.now());
        let announced = (parts.store.announces_within())
            .map(|w| u64::try_from(w.as_nanos()).unwrap_or(u64::MAX));
        let engine = Arc::new_cyclic(|me: &Weak<Engine>| Engine {
            store: parts.store,
            timer: parts.timer,
            wall: parts.wall,
            handlers: parts.handlers,
            config: parts.config,
            opened_at,
            announced,
            window: Mutex::new(Window::default()),
            queue: queue.clone(),
            commit_thread: Mutex::new(None),
            commit_stats,
            counters: Counters::default(),
            lateness: Histogram::new(),
            closed: AtomicBool::new(false),
            finished: Mutex::new(false),
            running: Mutex::new(0),
            idle: Condvar::new(),
            me: me.clone(),
        });
        let sink: Weak<dyn Committed> = engine.me.clone();
        let thread = crate::commit::start(
            engine.store.clone(),
            parts.durability,
            sink,
            engine.commit_stats.clone(),
            queue,
        )?;
        *engine.commit_thread.lock() = Some(thread);
        Ok(engine)
    }

    /// Starts watching the store's shards: each one held is loaded, overdue jobs first (once the
    /// users' handle exists: a run needs it). For the embedded store that is its one shard, at
    /// once, on this thread.
    pub(crate) fn begin(&self) {
        let me = self.me.clone();
        self.store.watch(Arc::new(move |event| {
            if let Some(engine) = me.upgrade() {
                engine.on_event(event);
            }
        }));
    }

    /// What the store says of its shards.
    fn on_event(&self, event: Event) {
        if self.closed.load(Relaxed) {
            return;
        }
        match event {
            Event::Held(lease) => {
                self.window.lock().take(lease.shard, lease.epoch);
                // A small first read, so the first overdue job runs at once, however many
                // are stored.
                self.load(lease.shard, FIRST_LOAD.min(self.config.batch));
            }
            Event::Lost { shard } => self.window.lock().release(shard),
            Event::Changed {
                shard,
                key,
                version,
                deadline,
            } => {
                let end = self.now().saturating_add(self.config.horizon);
                let mut w = self.window.lock();
                let place = match deadline {
                    Some(d) => w.stored(shard, &key, version, d, end),
                    None => {
                        w.forget(&key, version);
                        Place::Known
                    }
                };
                let next = w.shards.get(&shard).and_then(|s| s.next);
                drop(w);
                if let (Place::Arm, Some(d)) = (&place, deadline) {
                    self.arm(vec![(key, version, d)]);
                }
                if let Some(next) = next {
                    self.load_at(shard, next.saturating_sub(self.config.horizon));
                }
            }
            Event::Resync => {
                let shards: Vec<(u32, u64)> = {
                    let mut w = self.window.lock();
                    (w.shards.iter_mut())
                        .map(|(&id, s)| {
                            // Read again from the start: what is in memory is skipped by
                            // version.
                            s.cursor = None;
                            s.next = Some(0);
                            (id, s.epoch)
                        })
                        .collect()
                };
                for (shard, _) in shards {
                    self.load(shard, self.config.batch);
                }
            }
        }
    }

    /// The wall clock now, ns.
    pub(crate) fn now(&self) -> u64 {
        wall_ns(self.wall.now())
    }

    /// Sends `ops` to the commit thread and waits for what they did; the ops come back (with
    /// nothing if the jobs closed first).
    pub(crate) fn commit(&self, ops: Vec<Op>) -> (Vec<Op>, Result<Vec<Applied>, JobError>) {
        if crate::commit::on_commit_thread() {
            return (ops, Err(JobError::Reentrant));
        }
        let answer = Answer::new();
        let request = Request::Ops(Pending {
            ops,
            reply: Some(answer.clone()),
            since: Instant::now(),
            tries: 0,
        });
        // Not queued (closed): the request answers as it drops. Queued, it is answered (dropped
        // unanswered, too): the ops come back either way.
        drop(self.queue.push(request));
        let (ops, result) = answer.wait();
        let result = result.map_err(|e| match e {
            StoreError::Closed if self.closed.load(Relaxed) => JobError::Closed,
            e => JobError::Store(e),
        });
        (ops, result)
    }

    /// Sends the engine's own `op` (a run's outcome): committed with the next batch, retried
    /// until it is.
    pub(crate) fn commit_later(&self, op: Op) {
        let _ = self.queue.push(Request::Ops(Pending {
            ops: vec![op],
            reply: None,
            since: Instant::now(),
            tries: 0,
        }));
    }

    /// Waits until every change sent before is committed and on disk.
    pub(crate) fn sync(&self) -> Result<(), JobError> {
        if crate::commit::on_commit_thread() {
            return Err(JobError::Reentrant);
        }
        let answer = Answer::new();
        (self.queue.push(Request::Sync(answer.clone()))).map_err(|_| JobError::Closed)?;
        answer.wait().map_err(|e| match e {
            StoreError::Closed => JobError::Closed,
            e => JobError::Store(e),
        })
    }

    /// Reads the next jobs of `shard` after its cursor, up to the horizon's end and `limit`,
    /// into the window; arms them (or, overdue at open and misfired, buries them); and sets the
    /// shard's next load.
    pub(crate) fn load(&self, shard: u32, limit: usize) {
        // A full batch sets the next load for now; an inline executor runs that load inside the
        // add, that is inside this one. Such a nested load only notes its shard, and this loop
        // runs it: iteration, not recursion (a store of many jobs read a few at a time would
        // overflow the stack).
        if LOADING.with(Cell::get) {
            return DEFERRED.with(|d| d.borrow_mut().push(shard));
        }
        LOADING.with(|l| l.set(true));
        let _reset = Reset;
        let mut next = Some((shard, limit));
        while let Some((shard, limit)) = next {
            self.load_once(shard, limit);
            next = DEFERRED
                .with(|d| d.borrow_mut().pop())
                .map(|s| (s, self.config.batch));
        }
    }

    /// One read of `shard` (see `load`).
    fn load_once(&self, shard: u32, limit: usize) {
        if self.closed.load(Relaxed) {
            return;
        }
        let now = self.now();
        let until = now.saturating_add(self.config.horizon);
        let mut arm = Vec::new();
        let mut bury = Vec::new();
        let (full, next) = {
            let mut w = self.window.lock();
            let Some(s) = w.shards.get(&shard) else {
                return; // not held (any more)
            };
            let (epoch, cursor) = (s.epoch, s.cursor.clone());
            self.counters.reads.fetch_add(1, Relaxed);
            let due = match self.store.due(shard, cursor.as_ref(), until, limit) {
                Ok(due) => due,
                Err(_) => {
                    drop(w);
                    // The store failed to read: try again in a second.
                    return self.load_at(shard, now.saturating_add(RELOAD_AFTER_ERROR));
                }
            };
            let full = due.jobs.len() == limit;
            let last = due.jobs.last().map(|s| (s.job.deadline, s.job.key.clone()));
            for s in due.jobs {
                let key = s.job.key;
                if !self.handlers.contains_key(&s.job.kind)
                    || w.entries.get(&key).is_some_and(|e| e.version >= s.version)
                {
                    continue; // no handler (kept unrun), or in memory already
                }
                if let Some(reason) = self.misfired(s.job.deadline, now) {
                    bury.push(Op::Bury {
                        key,
                        version: s.version,
                        reason,
                        at: now,
                        failed: false,
                        lease: Lease { shard, epoch },
                    });
                    continue;
                }
                let entry = Entry {
                    shard,
                    version: s.version,
                    deadline: s.job.deadline,
                    state: State::Armed(None),
                };
                w.forget_any(&key); // an older version's timer task goes
                w.entries.insert(key.clone(), entry);
                arm.push((key, s.version, s.job.deadline));
            }
            let s = w
                .shards
                .get_mut(&shard)
                .expect("held: checked under this lock");
            match (full, last) {
                (true, Some((d, k))) => {
                    s.advance(Cursor::At(d, k));
                    s.next = Some(d);
                }
                _ => {
                    s.advance(Cursor::Through(until));
                    s.next = due.next;
                }
            }
            // Other nodes announce only jobs due within the store's window: one stored later
            // without an announcement is due past `now + window`, so this is no later than it,
            // and the shard is read again before such a job can enter the horizon (found by
            // W14: a job stored by one node, due past the window, in another's shard, never
            // fired).
            if let Some(window) = self.announced {
                let unannounced = now.saturating_add(window);
                s.next = Some(s.next.map_or(unannounced, |n| n.min(unannounced)));
            }
            (full, s.next)
        };
        for op in bury {
            self.commit_later(op);
        }
        self.arm(arm);
        match (full, next) {
            (true, _) => self.load_at(shard, now),
            (false, Some(next)) => self.load_at(shard, next.saturating_sub(self.config.horizon)),
            (false, None) => {}
        }
    }

    /// The reason to bury a job due at `deadline`, read by a load at `now`, under the misfire
    /// policy: only jobs that were overdue when the store was opened.
    fn misfired(&self, deadline: u64, now: u64) -> Option<String> {
        if deadline >= self.opened_at {
            return None;
        }
        let late = Duration::from_nanos(now.saturating_sub(deadline));
        let skip = match self.config.misfire {
            Misfire::RunAll => false,
            Misfire::RunWithin(limit) => late >= limit,
            Misfire::SkipAll => true,
        };
        skip.then(|| format!("misfired: {late:?} overdue when the store was opened"))
    }

    /// Sets the next load of `shard` for wall-clock time `at` (ns), unless one is set no later.
    pub(crate) fn load_at(&self, shard: u32, at: u64) {
        if self.closed.load(Relaxed) {
            return;
        }
        let id = {
            let mut w = self.window.lock();
            w.loads += 1;
            let id = w.loads;
            let Some(s) = w.shards.get_mut(&shard) else {
                return;
            };
            if s.load.as_ref().is_some_and(|l| l.at <= at) {
                return;
            }
            let new = Load { id, at, task: None };
            if let Some(old) = s.load.replace(new) {
                old.cancel();
            }
            id
        };
        let me = self.me.clone();
        let delay = Duration::from_nanos(at.saturating_sub(self.now()));
        let task = Task::after(delay, move || {
            if let Some(engine) = me.upgrade() {
                let mine = match engine.window.lock().shards.get_mut(&shard) {
                    Some(s) if s.load.as_ref().is_some_and(|l| l.id == id) => {
                        s.load = None;
                        true
                    }
                    _ => false,
                };
                // Not mine: an earlier load replaced it, or the shard changed hands; that
                // load reads.
                if mine {
                    engine.load(shard, engine.config.batch);
                }
            }
        });
        let added = self.timer.add_or_submit(task);
        let mut w = self.window.lock();
        let load = (w.shards.get_mut(&shard)).and_then(|s| s.load.as_mut().filter(|l| l.id == id));
        match (added, load) {
            (Ok(handle), Some(load)) => load.task = Some(handle),
            // It ran already (its task cleared it), or was replaced: nothing to keep.
            (Ok(handle), None) => {
                handle.cancel();
            }
            // Closing: nothing runs any more.
            (Err(_), Some(_)) => {
                if let Some(s) = w.shards.get_mut(&shard) {
                    s.load = None;
                }
            }
            (Err(_), None) => {}
        }
    }

    /// Arms `jobs` in the timer, outside the window's lock (an inline executor runs a due job's
    /// task right inside the add).
    pub(crate) fn arm(&self, jobs: Vec<Arming>) {
        if jobs.is_empty() {
            return;
        }
        // The wall clock and the timer's, read together once: each job's instant on the
        // timer's clock. A delay from `now` instead would count from a time that is stale by
        // the adds before it (found by W13: 20k jobs armed at once ran up to 3 ms late).
        let (now, timer_now) = (self.now(), self.timer.now());
        for (key, version, deadline) in jobs {
            let me = self.me.clone();
            let delay = Duration::from_nanos(deadline.saturating_sub(now));
            let k = key.clone();
            let body = move || {
                if let Some(engine) = me.upgrade() {
                    engine.fire(&k, version);
                }
            };
            let task = match timer_now.checked_add(delay) {
                Some(at) => Task::at(at, body),
                None => Task::after(delay, body),
            };
            let Ok(handle) = self.timer.add_or_submit(task) else {
                // The timer shut down (the jobs are closing): the job stays stored.
                self.window.lock().forget(&key, version);
                continue;
            };
            let mut w = self.window.lock();
            match w.entries.get_mut(&key) {
                Some(e) if e.version == version && matches!(e.state, State::Armed(None)) => {
                    e.state = State::Armed(Some(handle));
                }
                // Fired already (running, or done), or replaced meanwhile.
                _ => {
                    handle.cancel();
                }
            }
        }
    }

    /// The stats of the engine.
    pub(crate) fn stats(&self) -> Stats {
        let c = &self.counters;
        let (in_memory, shards) = {
            let w = self.window.lock();
            (w.entries.len() as u64, w.shards.len() as u64)
        };
        let mut s = Stats {
            scheduled: c.scheduled.load(Relaxed),
            fired: c.fired.load(Relaxed),
            succeeded: c.succeeded.load(Relaxed),
            retried: c.retried.load(Relaxed),
            dead: c.dead.load(Relaxed),
            misfired: c.misfired.load(Relaxed),
            cancelled: c.cancelled.load(Relaxed),
            in_memory,
            shards,
            lateness_p50: self.lateness.quantile(0.5),
            lateness_p99: self.lateness.quantile(0.99),
            lateness_max: self.lateness.max(),
            commit_p50: self.commit_stats.latency.quantile(0.5),
            commit_p99: self.commit_stats.latency.quantile(0.99),
            commits: self.commit_stats.commits.load(Relaxed),
            store_reads: c.reads.load(Relaxed),
        };
        s.lateness_max = s.lateness_max.max(s.lateness_p99);
        s
    }

    /// Stops: no new loads or runs; waits for the running handlers; makes every change durable;
    /// stops the commit thread; lets the store go. The jobs stay stored. Called from a handler,
    /// it returns at once, and the close ends when the last running handler has sent its
    /// outcome (it cannot wait for itself).
    pub(crate) fn close(&self) -> Result<(), JobError> {
        if !self.closed.swap(true, Relaxed) {
            let mut w = self.window.lock();
            for s in w.shards.values_mut() {
                if let Some(load) = s.load.take() {
                    load.cancel();
                }
            }
            let armed: Vec<String> = (w.entries.iter())
                .filter(|(_, e)| matches!(e.state, State::Armed(_)))
                .map(|(k, _)| k.clone())
                .collect();
            for key in armed {
                w.forget_any(&key);
            }
        }
        if crate::fire::in_handler() > 0 {
            return Ok(());
        }
        let mut running = self.running.lock();
        while *running > 0 {
            self.idle.wait(&mut running);
        }
        drop(running);
        self.finish_close();
        Ok(())
    }

    /// Ends a close once no run is left (every outcome sent): a last durable commit, the commit
    /// thread stopped, the store let go. Once; a second caller waits for the first to finish.
    pub(crate) fn finish_close(&self) {
        if *self.running.lock() > 0 {
            return; // the last run to end finishes it
        }
        let mut finished = self.finished.lock();
        if *finished {
            return;
        }
        let stopped = Answer::new();
        if self.queue.push(Request::Stop(stopped.clone())).is_err() {
            *finished = true;
            return;
        }
        if crate::commit::on_commit_thread() {
            // It stops once this commit's report returns, after a last durable commit; the
            // store is let go as the engine goes.
            *finished = true;
            return;
        }
        stopped.wait();
        if let Some(t) = self.commit_thread.lock().take() {
            let _ = t.join();
        }
        // Every change is on disk: let the file go, for the next open.
        self.store.close();
        *finished = true;
    }
}

/// The shard to read again if a run's outcome under `lease` was refused because the lease
/// changed since (this node holds the shard under another epoch now): the job is still stored,
/// and out of memory. (Refused under the same lease, the job was cancelled or moved: nothing to
/// read.)
fn fenced(w: &Window, lease: Lease) -> Option<u32> {
    let now = w.epoch(lease.shard)?;
    (now != lease.epoch).then_some(lease.shard)
}

thread_local! {
    /// This thread is inside `Engine::load`.
    static LOADING: Cell<bool> = const { Cell::new(false) };
    /// Loads asked for inside a load on this thread, run by it next.
    static DEFERRED: RefCell<Vec<u32>> = const { RefCell::new(Vec::new()) };
}

/// Clears `LOADING` as the outermost load ends, however it ends.
struct Reset;

impl Drop for Reset {
    fn drop(&mut self) {
        LOADING.with(|l| l.set(false));
    }
}

/// Jobs read by the first load at open: enough to start, few enough to start at once.
const FIRST_LOAD: usize = 256;

/// How long after a failed read of the store the window tries again (wall ns).
const RELOAD_AFTER_ERROR: u64 = 1_000_000_000;

impl Committed for Engine {
    /// A run's outcome given up: the run leaves memory and its shard is read again, so the job
    /// (still stored) runs again.
    fn abandoned(&self, ops: &[Op]) {
        let mut shards = Vec::new();
        {
            let mut w = self.window.lock();
            for op in ops {
                let (Op::Complete { key, version, .. }
                | Op::Retry { key, version, .. }
                | Op::Bury { key, version, .. }) = op
                else {
                    continue;
                };
                w.forget(key, *version);
                let shard = self.store.shard_of(key);
                if let Some(s) = w.shards.get_mut(&shard) {
                    s.cursor = None;
                    s.next = Some(0);
                    shards.push(shard);
                }
            }
        }
        for shard in shards {
            self.load_at(shard, 0);
        }
    }

    /// Moves the committed changes into the window: stored jobs are armed (if their shard is
    /// held here and the window covers them, or can), removed ones disarmed.
    fn committed(&self, ops: &[Op], applied: &mut [Applied]) {
        let end = self.now().saturating_add(self.config.horizon);
        let mut arm = Vec::new();
        let mut touched = Vec::new();
        // Shards to read again from the start: a run's outcome was fenced off by a lease that
        // changed meanwhile, and the job, still stored, is out of memory.
        let mut reread = Vec::new();
        let mut w = self.window.lock();
        let mut place = |w: &mut Window, key: &str, version: u64, deadline: u64| {
            let shard = self.store.shard_of(key);
            match w.stored(shard, key, version, deadline, end) {
                Place::Arm => arm.push((key.to_owned(), version, deadline)),
                Place::Disk => touched.push(shard),
                Place::Elsewhere | Place::Known => {}
            }
        };
        for (op, applied) in ops.iter().zip(applied.iter_mut()) {
            match (op, &*applied) {
                (Op::Insert { jobs, .. }, Applied::Inserted(versions)) => {
                    for (job, &v) in jobs.iter().zip(versions) {
                        place(&mut w, &job.key, v, job.deadline);
                    }
                }
                (Op::Retry { key, deadline, .. }, Applied::Moved(Some(v))) => {
                    self.counters.retried.fetch_add(1, Relaxed);
                    place(&mut w, key, *v, *deadline);
                }
                (Op::Reschedule { key, deadline }, Applied::Moved(Some(v)))
                | (Op::Requeue { key, deadline }, Applied::Moved(Some(v))) => {
                    place(&mut w, key, *v, *deadline);
                }
                (Op::Cancel { key }, Applied::Removed(Some(_))) => {
                    // Its run had begun: the cancel came too late for it (it is gone from the
                    // store, so the run is not retried).
                    let was_running = w.forget_any(key);
                    if was_running {
                        *applied = Applied::Removed(None);
                    }
                }
                // A run's outcome committed (or found the job gone): its entry ends.
                (
                    Op::Complete {
                        key,
                        version,
                        lease,
                    },
                    done,
                ) => {
                    w.forget(key, *version);
                    if matches!(done, Applied::Removed(None)) {
                        reread.extend(fenced(&w, *lease));
                    }
                }
                (
                    Op::Bury {
                        key,
                        version,
                        failed,
                        lease,
                        ..
                    },
                    removed,
                ) => {
                    if matches!(removed, Applied::Removed(Some(_))) {
                        self.counters.dead.fetch_add(1, Relaxed);
                        if !failed {
                            self.counters.misfired.fetch_add(1, Relaxed);
                        }
                    } else {
                        reread.extend(fenced(&w, *lease));
                    }
                    w.forget(key, *version);
                }
                (
                    Op::Retry {
                        key,
                        version,
                        lease,
                        ..
                    },
                    Applied::Moved(None),
                ) => {
                    reread.extend(fenced(&w, *lease));
                    w.forget(key, *version);
                }
                _ => {}
            }
        }
        touched.sort_unstable();
        touched.dedup();
        reread.sort_unstable();
        reread.dedup();
        for &shard in &reread {
            if let Some(s) = w.shards.get_mut(&shard) {
                s.cursor = None;
                s.next = Some(0);
            }
        }
        let loads: Vec<(u32, u64)> = (touched.iter())
            .filter_map(|&shard| Some((shard, w.shards.get(&shard)?.next?)))
            .collect();
        drop(w);
        self.arm(arm);
        // A job stored past a cursor, due within the horizon, with stored jobs before it: the
        // window must read them first.
        for (shard, next) in loads {
            self.load_at(shard, next.saturating_sub(self.config.horizon));
        }
        for shard in reread {
            self.load_at(shard, 0);
        }
    }
}
