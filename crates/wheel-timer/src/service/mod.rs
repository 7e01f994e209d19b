//! Layer 3, the service: one timer's shared state and the threads' work on it (adds, the tick
//! thread's hand-out, the jobs that run fired tasks, shutdown), with the policies around them
//! (panics, isolation of slow classes, backpressure).
//!
//! | file | what it holds |
//! |---|---|
//! | `core.rs` | `Core`: the state a timer's threads share, and the maths between instants and clock time |
//! | `dispatch.rs` | the tick thread's hand-out of due tasks to the executors, in chunks |
//! | `work.rs` | what a slot holds for a task (closure, cadence, label), and `MisfirePolicy` |
//! | `context.rs` | `TaskContext`, what a run sees |
//! | `job.rs` | a fired task's job: claim, run, then end, re-arm or hand back |
//! | `running.rs` | jobs on their way and jobs running: the backlog, `wait_idle`, cancel's wait |
//! | `shutdown.rs` | shutdown: refuse adds, collect, wait, run or hand back |
//! | `lifecycle.rs` | open, closing, closed |
//! | `panic.rs` | a task's panic, caught and counted |
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
pub(crate) mod registry;
pub(crate) mod route;
pub(crate) mod running;
pub(crate) mod shutdown;
pub(crate) mod thread_cache;
pub(crate) mod trace;
pub(crate) mod work;
