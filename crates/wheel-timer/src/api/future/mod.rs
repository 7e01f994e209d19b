//! Futures on the timer: [`Sleep`], [`Timeout`] and [`Interval`], for any async runtime (no
//! runtime dependency: they only need a [`Waker`](std::task::Waker)).
//!
//! A future is a timer like any other: arming it adds a task to the calling thread's shard, so it
//! counts in `pending()` and `stats()`, is never early and fires at most once per arming. Its task
//! holds no closure ([`Work::Wake`](crate::service::work::Work)); the thread that hands the task out (the
//! tick thread, or an add that is due at once) wakes the future itself, outside every lock,
//! instead of sending a job through the pool. Dropping the future cancels its task at once.
//!
//! How a future's waker reaches the thread that ends its arming: `slots/waker.rs`.

mod interval;
mod sleep;
mod timeout;

pub use interval::Interval;
pub use sleep::Sleep;
pub use timeout::{Timeout, TimeoutError};

pub(crate) use crate::slots::waker::Outcome;
