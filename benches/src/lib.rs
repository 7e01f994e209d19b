//! Comparative benchmarks: the timing wheel against a flat hashed wheel, heaps and crates.io peers.
//!
//! Every implementation is driven through one small trait, [`TimerQueue`] (plus [`Cancel`] for
//! those that can cancel), on the same fixed-seed workloads in virtual time (milliseconds, clock
//! starting at 0):
//!
//! | module | implementation |
//! |--------|----------------|
//! | [`impls::wheel`] | this workspace's `timing_wheel::TimingWheel`, tick 1 ms, 64 buckets per level |
//! | [`impls::flat`] | a flat hashed wheel with round counters (Varghese–Lauck scheme 6, Netty) |
//! | [`impls::heap`] | `std::collections::BinaryHeap` with lazy cancellation (`java.util.Timer` style) |
//! | [`impls::pq`] | the `priority-queue` crate with real removal on cancel |
//! | [`impls::hhwt`] | `hierarchical_hash_wheel_timer`'s `QuadWheelWithOverflow` (plain and cancellable) |
//! | [`impls::delay_queue`] | `tokio-util`'s `DelayQueue` on a current-thread runtime with paused time |
//!
//! [`workloads`] holds the workloads (W1–W5) as plain generic functions that verify what they
//! measure; [`scenario`] turns them into the tables the `wheelbench` program prints, so that new
//! scenarios (the threaded `Timer` service, W6–W8) are one more [`scenario::Scenario`] each.
//! [`alloc`] is the counting allocator `wheelbench` installs to measure memory.

pub mod alloc;
pub mod impls;
pub mod machine;
pub mod queue;
pub mod report;
pub mod rng;
pub mod scenario;
pub mod svg;
pub mod workloads;

pub use queue::{Cancel, TimerQueue};
