//! The timer users link: [`Timer`], [`Task`], [`TimerHandle`]. `add_or_submit(task)` from any
//! thread; a tick thread drives hierarchical timing wheels (one per adding thread) and hands due
//! tasks to a rayon pool.
//!
//! - O(1) add, cancel and reschedule. An add takes no lock and writes nothing another adding
//!   thread writes; a cancelled task's closure is dropped at once.
//! - Never early; late by less than a tick plus scheduling jitter on an idle machine (plus up to
//!   one tick more for tasks due 64 ticks or more after their add, whose deadlines are stamped
//!   in batches).
//! - The tick thread sleeps until the earliest task is due: no polling while nothing is due.
//! - Tasks run on the executor, never on the tick thread; a panicking task is caught and counted.
//! - Periodic tasks at a fixed rate, with a [`MisfirePolicy`] for when the timer fell behind.
//! - `max_pending` backpressure refuses an add with an error that hands the task back.
//! - [`Timer::shutdown`] returns every task that never ran; calling it from a task is fine.
//!   [`Timer::shutdown_async`] does so from async code without blocking; a dropped timer waits
//!   for running tasks at most [`TimerBuilder::drop_wait`].
//! - A [`ManualClock`] drives the same code in tests: days of timers in milliseconds.
//! - Slow classes of tasks move to a slow pool so punctual ones never wait behind them
//!   ([`Isolation`]); a task may name its own executor; timers share one pool by default.
//! - Optional `tracing` events and spans (the `tracing` feature).
//! - Futures for any async runtime: [`Timer::sleep`], [`Timer::timeout`], [`Timer::interval`],
//!   woken by the tick thread directly, cancelled when dropped.
//!
//! ```
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicUsize, Ordering};
//! use std::time::Duration;
//! use tickwheel::{InlineExecutor, ManualClock, Task, Timer};
//!
//! // A test drives the timer by hand: the same tick thread and wheels, no sleeping.
//! let clock = ManualClock::new();
//! let timer = Timer::builder().clock(clock.clone()).executor(Arc::new(InlineExecutor::new())).build()?;
//! let runs = Arc::new(AtomicUsize::new(0));
//! let r = runs.clone();
//! let order = timer.add_or_submit(Task::after(Duration::from_secs(15 * 60), move || {
//!     r.fetch_add(1, Ordering::SeqCst);
//! }))?;
//! clock.advance(Duration::from_secs(14 * 60));
//! assert_eq!(runs.load(Ordering::SeqCst), 0);
//! clock.advance(Duration::from_secs(60));
//! assert_eq!(runs.load(Ordering::SeqCst), 1);
//! assert!(order.is_done() && !order.cancel());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Testing code that awaits the timer
//!
//! `tokio::time::pause()` and `advance()` move tokio's clock, not this timer's: the timer has a
//! clock of its own. Build it on a [`ManualClock`] and move that instead; `advance` returns once
//! everything due was handed out (futures woken, tasks given to the executor), and
//! [`Timer::wait_idle`] once the tasks have run.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use tickwheel::{ManualClock, Timer, TimeoutError};
//!
//! let clock = ManualClock::new();
//! let timer = Arc::new(Timer::builder().clock(clock.clone()).build()?);
//! let rt = tokio::runtime::Builder::new_current_thread().build()?;
//! let t = timer.clone();
//! let request = rt.spawn(async move {
//!     t.timeout(Duration::from_secs(30), std::future::pending::<()>()).await
//! });
//! rt.block_on(tokio::task::yield_now()); // the request starts, and waits
//! clock.advance(Duration::from_secs(30)); // thirty seconds, at once
//! assert!(matches!(rt.block_on(request)?, Err(TimeoutError::Elapsed)));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! How the add path works, and which thread writes what: `docs/architecture.md`.
//!
//! # Features
//!
//! | feature | what it adds |
//! |---|---|
//! | `stream` | [`Interval`] implements `futures_core::Stream` (so `StreamExt` works on it); the stream ends when the timer shuts down or the interval [finishes](Interval::is_finished) |
//! | `tracing` | `tracing` events (a panicking task, an isolated class, a refused add, skipped runs) and spans around the tick thread's hand-offs |
//!
//! Neither is on by default.

// The source tree is four layers, one folder each, bottom first. A file imports only from its
// own layer and those below (`tests/api/layers.rs` checks it), and every `unsafe` block is in
// the bottom one. Each folder's `mod.rs` lists its files; `docs/architecture.md` tells the whole.
// (`loom.rs`, beneath them all, swaps in loom's primitives under `cfg(loom)`.)

mod loom;

/// Layer 1: the slot protocol (a shard's task slots, their state words, ownership, free lists,
/// where a future's waker waits).
mod slots;

/// Layer 2: one adding thread's shard (its slots, the ring of unstamped adds, its wheel), generic
/// over what a slot holds.
mod shard;

/// Layer 3: one timer's shared state (`Core`), the jobs that run fired tasks, the hand-out,
/// shutdown, isolation, panics.
mod service;

/// Layer 4: what users call (`Timer`, `TimerBuilder`, `Task`, `TimerHandle`, the futures, the
/// add path).
mod api;

pub use api::builder::TimerBuilder;
pub use api::error::{AddError, BuildError};
pub use api::future::{Interval, Sleep, Timeout, TimeoutError};
pub use api::handle::{TaskState, TimerHandle};
pub use api::shutdown::{ShutdownFuture, ShutdownOptions, ShutdownReport};
pub use api::stats::{ClassStats, RunTimes, Stats};
pub use api::task::context::WeakTimer;
pub use api::task::{OnceBody, RepeatBody, Task};
pub use api::timer::Timer;
pub use service::class::Isolation;
pub use service::context::TaskContext;
pub use service::work::MisfirePolicy;
pub use tickwheel_executor::{Executor, InlineExecutor, Job, RayonExecutor};
pub use tickwheel_reaper::{Clock, Driver, ManualClock, RealClock};
pub use tickwheel_wheel::ConfigError;

/// The README's examples, compiled and run as doc tests so they cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
