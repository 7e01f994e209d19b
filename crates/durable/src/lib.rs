//! Durable delayed jobs on the tickwheel timer: the store is the truth, the wheel fires the near
//! future at millisecond precision.
//!
//! A job is data: a unique key, a wall-clock deadline, a kind (which handler runs it) and a
//! payload. [`Jobs::schedule`] returns once the job is on disk; concurrent schedules share one
//! fsync (group commit). Only jobs due within the horizon (an hour by default) are in memory,
//! armed in the timer; the rest stay on disk and are read in deadline order as they come within
//! it, one range read per step, and none while nothing is due. On open, overdue jobs run first
//! (under a [`Misfire`] policy), then the horizon is loaded.
//!
//! ```
//! use std::time::{Duration, SystemTime};
//! use tickwheel::ManualClock;
//! use tickwheel_durable::{Job, JobContext, Jobs, ManualWall};
//!
//! # let dir = tempfile::tempdir()?;
//! let path = dir.path().join("orders.redb");
//! let start = SystemTime::now();
//! let clock = ManualClock::new(); // tests: hours of jobs in milliseconds
//! let open = |clock: &ManualClock| {
//!     let timer = tickwheel::Timer::builder().clock(clock.clone()).build()?;
//!     Jobs::builder()
//!         .handler("cancel-unpaid", |cx: &JobContext<'_>| {
//!             println!("order {} was not paid: cancelled (attempt {})", cx.key(), cx.attempt());
//!             Ok(())
//!         })
//!         .timer(timer)
//!         .wall_clock(ManualWall::new(clock.clone(), start))
//!         .open(&path)
//! };
//! let jobs = open(&clock)?;
//! jobs.schedule(Job::new("order-42", "cancel-unpaid", start + Duration::from_secs(900)))?;
//! drop(jobs); // or a crash: the job is on disk
//!
//! let jobs = open(&clock)?;
//! assert_eq!(jobs.counts()?.waiting, 1);
//! clock.advance(Duration::from_secs(900));
//! jobs.timer().wait_idle(); // the handler ran
//! jobs.sync()?;             // and its delete is on disk
//! assert_eq!(jobs.counts()?.waiting, 0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # What a crash does
//!
//! A job runs at least once across crashes and exactly once within one process's life (on a
//! store shared by many nodes: within one lease of its shard; a lease that passes on, even back
//! to the same node, may run it again). At each step:
//!
//! | the crash comes | after the restart |
//! |---|---|
//! | before `schedule` returned | the job is stored or not (its commit may have reached the disk): schedule it again under its key ([`Jobs::upsert`], or take [`JobError::Duplicate`] as done) |
//! | after `schedule` returned (default durability) | the job is stored; under [`Durability::Within`], stored if its commit's window had closed |
//! | after `cancel` / `reschedule` returned | the change holds (under `Within`, if its window had closed) |
//! | while the handler runs, or after it returned and before its delete was on disk (within [`OWN_FLUSH`], or with the next schedule's commit) | the job runs again (overdue, under the misfire policy), with the same attempt number |
//! | after a failed run's retry was on disk | the job runs at its retry time, with the next attempt number |
//! | after the delete was on disk | the job never runs again |
//!
//! # Layers
//!
//! `store/` (the [`Store`] trait, [`RedbStore`], the record layout) at the bottom; `commit.rs`
//! (the commit thread) on it; `window.rs` (what is in memory) beside it; `engine.rs` and
//! `fire.rs` (loads, arming, runs) on those; `jobs.rs` and `builder.rs` (the API) on top.
//! Design and figures: `docs/architecture.md` ("Durable jobs") and `docs/benchmarks.md` (W13).

/// The crate's README, compiled and run as a doc test.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

mod builder;
mod clock;
mod commit;
mod engine;
mod error;
mod fire;
mod handler;
mod job;
mod jobs;
mod retry;
mod stats;
pub mod store;
mod window;

pub use builder::JobsBuilder;
pub use clock::{ManualWall, SystemClock, WallClock};
pub use commit::{Durability, OWN_FLUSH};
pub use engine::Misfire;
pub use error::{JobError, OpenError, Refused, StoreError};
pub use handler::{Handler, HandlerError, JobContext};
pub use job::{DEFAULT_MAX_PAYLOAD, DeadJob, Job, MAX_KEY_LEN, MAX_KIND_LEN};
pub use jobs::Jobs;
pub use retry::RetryPolicy;
pub use stats::Stats;
pub use store::{Counts, RedbStore, Store};
