//! Comparative benchmarks: the timing wheel against a flat hashed wheel, heaps and crates.io peers.
//!
//! Every implementation is driven through one small trait, [`TimerQueue`] (plus [`Cancel`] for
//! those that can cancel), on the same fixed-seed workloads in virtual time (milliseconds, clock
//! starting at 0):
//!
//! | module | implementation |
//! |--------|----------------|
//! | [`impls::wheel`] | this workspace's `tickwheel_wheel::TimingWheel`, tick 1 ms, 256 buckets per level |
//! | [`impls::flat`] | a flat hashed wheel with round counters (Varghese–Lauck scheme 6, Netty) |
//! | [`impls::heap`] | `std::collections::BinaryHeap` with lazy cancellation (`java.util.Timer` style) |
//! | [`impls::pq`] | the `priority-queue` crate with real removal on cancel |
//! | [`impls::hhwt`] | `hierarchical_hash_wheel_timer`'s `QuadWheelWithOverflow` (plain and cancellable) |
//! | `impls::delay_queue` | `tokio-util`'s `DelayQueue` on a current-thread runtime with paused time (feature `tokio-peers`, on by default) |
//!
//! [`impls`] also holds the registry of contenders that `wheelbench` and the criterion benches
//! both draw from. [`scenario`] holds the workloads, one file each with its measurement (plain
//! functions that verify what they measure) and its report section (the tables, charts and target
//! checks the `wheelbench` program prints, one [`scenario::Scenario`] each); its module docs list
//! which file holds which workload. What several workloads share is in [`workloads`] (virtual
//! time: the seed, W1's deadlines, insert-then-fire) and [`service`] (the threaded
//! `tickwheel::Timer` on the real clock: its name in the tables, lateness). [`measure`] holds the
//! measurement helpers (the counting allocator `wheelbench` installs, `/proc` readings, the
//! machine); [`report`] the tables, charts and targets.
//!
//! W6, W10 and W12 compare the service with [`impls::mutex_heap`] (`Mutex<BinaryHeap>` + one timer
//! thread); W7 and W11 read CPU time and context switches from [`measure::procfs`]. W11 runs in a
//! child process, `benches/futures`: a crate outside this workspace, so that its tokio is built
//! without `test-util` (which this crate's `tokio-peers` feature, on by default, brings for the
//! `DelayQueue` peer's paused clock); it uses this library with that feature off, and reports
//! through [`report::wire`]. [`impls::slab`] is the
//! generational slab both heap baselines keep their items in. W13 measures the durable jobs of
//! `tickwheel-durable` on the disk, against a Redis sorted set and a PostgreSQL
//! `FOR UPDATE SKIP LOCKED` worker (through the `redis` and `postgres` clients, where those
//! servers run on this machine), reading CPU and resident memory from [`measure::procfs`] too; W14 runs
//! them on PostgreSQL in node processes of their own (1 and 3 nodes, and a fail-over), against a
//! pool of such workers.

pub mod impls;
pub mod measure;
pub mod queue;
pub mod report;
pub mod rng;
pub mod scenario;
pub mod service;
pub mod workloads;

pub use queue::{Cancel, TimerQueue};
