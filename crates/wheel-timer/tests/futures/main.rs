//! The futures (`Sleep`, `Timeout`, `Interval`): never early, woken once per arming, cancelled on
//! drop, told of shutdown; stamped in batches; hostile wakers; the edges of the clock.

#[path = "../support/mod.rs"]
mod support;

mod batched_sleeps;
mod behaviour;
mod edges;
mod shutdown;
mod wakers;
