//! Comparative benchmarks: the timing wheel against a flat hashed wheel, heaps and crates.io peers.
//!
//! Every implementation is driven through one small trait, [`TimerQueue`] (plus [`Cancel`] for
//! those that can cancel), on the same fixed-seed workloads in virtual time (milliseconds, clock
//! starting at 0):
//!
//! | module | implementation |
//! |--------|----------------|
//! | [`impls::wheel`] | this workspace's `tickwheel_wheel::TimingWheel`, tick 1 ms, 64 buckets per level |
//! | [`impls::flat`] | a flat hashed wheel with round counters (Varghese–Lauck scheme 6, Netty) |
//! | [`impls::heap`] | `std::collections::BinaryHeap` with lazy cancellation (`java.util.Timer` style) |
//! | [`impls::pq`] | the `priority-queue` crate with real removal on cancel |
//! | [`impls::hhwt`] | `hierarchical_hash_wheel_timer`'s `QuadWheelWithOverflow` (plain and cancellable) |
//! | [`impls::delay_queue`] | `tokio-util`'s `DelayQueue` on a current-thread runtime with paused time |
//!
//! [`workloads`] holds the workloads (W1–W5) as plain generic functions that verify what they
//! measure; [`scenario`] turns them into the tables the `wheelbench` program prints, one
//! [`scenario::Scenario`] each. [`alloc`] is the counting allocator `wheelbench` installs to
//! measure memory.
//!
//! The threaded `tickwheel::Timer` service is measured on the real clock by [`service`] (W6
//! threads, W7 idle, W8 accuracy), against [`mutex_heap`] (`Mutex<BinaryHeap>` + one timer thread)
//! for W6, reading CPU time and context switches from [`procfs`]. [`slab`] is the generational
//! slab both heap baselines keep their items in.

pub mod alloc;
pub mod impls;
pub mod machine;
pub mod mutex_heap;
pub mod procfs;
pub mod queue;
pub mod report;
pub mod rng;
pub mod scenario;
pub mod service;
pub mod slab;
pub mod svg;
pub mod targets;
pub mod workloads;

pub use queue::{Cancel, TimerQueue};
