//! Layer 3, the service: one timer's shared state and the threads' work on it (the tick
//! thread's hand-out, the jobs that run fired tasks, shutdown), with the policies around them
//! (panics, isolation of slow classes, backpressure). The add path, which takes a `Task` and
//! returns a `TimerHandle`, is the API's (`api/add.rs`).
//!
//! | file | what it holds |
//! |---|---|
//! | `core.rs` | `Core`: the state a timer's threads share, the maths between instants and clock time, and `Tasks`, the kind of shard it owns |
//! | `dispatch.rs` | the tick thread's hand-out of due tasks to the executors, in chunks |
//! | `work.rs` | what a slot holds for a task (closure, cadence, label), and `MisfirePolicy` |
//! | `context.rs` | `TaskContext`, what a run sees |
//! | `job.rs` | a fired task's job: sent (with its count in the backlog), claimed, run, then ended, re-armed or handed back; a cancel's wait for a run in progress |
//! | `running.rs` | jobs running and the backlog: what `shutdown` and `wait_idle` wait for |
//! | `shutdown.rs` | shutdown: refuse adds, collect, wait, run or hand back |
//! | `lifecycle.rs` | open, closing, closed |
//! | `panic.rs` | a task's panic, caught and counted |
//! | `pool.rs` | the timer's own pool or the shared one, started by the first task that needs it |
//! | `registry.rs` | the process-wide registry of shards |
//! | `thread_cache.rs` | the thread-local cache through which a thread finds its own shard |
//! | `class.rs`, `route.rs` | isolation: a class's record of slow runs, and where a due task runs |
//! | `trace.rs` | the `tracing` feature's events |
//! | `histogram.rs` | lateness and run times in log-linear buckets |
//!
//! Imports from `shard` and `slots` below it.

pub(crate) mod class;
pub(crate) mod context;
pub(crate) mod core;
pub(crate) mod dispatch;
pub(crate) mod histogram;
pub(crate) mod job;
pub(crate) mod lifecycle;
pub(crate) mod panic;
pub(crate) mod pool;
pub(crate) mod registry;
pub(crate) mod route;
pub(crate) mod running;
pub(crate) mod shutdown;
pub(crate) mod thread_cache;
pub(crate) mod trace;
pub(crate) mod work;
