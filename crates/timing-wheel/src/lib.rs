//! A hierarchical timing wheel: the data structure, with no threads, no clock reads and no locks.
//!
//! [`TimingWheel`] holds items until their deadlines, in the caller's unit of time, with O(1)
//! insert, cancel and reschedule on a slab of entries, lazily created overflow levels that cover
//! the whole `u64` range, and one delay queue of buckets (the [`priority_queue`] crate) that tells
//! [`TimingWheel::next_expiration`] how long a driver may sleep without missing a deadline (a
//! wake-up may hand nothing out: a coarse bucket comes due at its first tick and may only move
//! its entries to finer levels, at most once per level for each entry, or hold only cancelled
//! ones). It never hands an item
//! out before its deadline, and hands it out at the first [`TimingWheel::advance`] that reaches the
//! deadline rounded up to the tick.
//!
//! The threaded timer service (tick thread, executor, `Timer`) is built on top of this crate
//! elsewhere in the workspace. See the [`wheel`] module for the scheme, the level table, the
//! rounding rule and the invariants.
//!
//! ```
//! use tickwheel_wheel::TimingWheel;
//!
//! let mut wheel = TimingWheel::new(1, 64, 0)?;        // 1 unit per tick, 64 buckets per level
//! let id = wheel.insert(30_000, "request timeout")?.clone();
//! wheel.insert(86_400_000, "daily report").map_err(|_| "already due")?;
//! assert!(wheel.reschedule(id, 45_000));
//!
//! let mut fired = Vec::new();
//! while let Some(t) = wheel.next_expiration() {
//!     wheel.advance(t, |item| fired.push((t, item)));
//! }
//! assert_eq!(fired, [(45_000, "request timeout"), (86_400_000, "daily report")]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod error;
mod occupancy;
mod slab;
mod time;
pub mod wheel;

pub use error::{AlreadyDue, ConfigError};
pub use wheel::{MAX_WHEEL_SIZE, TimerId, TimingWheel};
