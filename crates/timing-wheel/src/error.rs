//! The wheel's errors: a refused configuration, and an insert of an item that is already due.

use std::fmt;

/// Why a wheel configuration was refused. Each variant names the value and the rule it broke.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConfigError {
    /// `tick` was 0; a tick is at least one unit of the caller's time.
    ZeroTick,
    /// `wheel_size` was below 2; a level needs at least two buckets.
    WheelSizeTooSmall {
        /// The refused size.
        size: usize,
    },
    /// `wheel_size` was not a power of two, which bucket indexing by bit mask needs.
    WheelSizeNotPowerOfTwo {
        /// The refused size.
        size: usize,
    },
    /// `wheel_size` was above [`MAX_WHEEL_SIZE`](crate::MAX_WHEEL_SIZE).
    WheelSizeTooLarge {
        /// The refused size.
        size: usize,
        /// The largest size accepted.
        max: usize,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ConfigError::ZeroTick => f.write_str("invalid tick 0: the tick must be at least 1"),
            ConfigError::WheelSizeTooSmall { size } => {
                write!(
                    f,
                    "invalid wheel size {size}: a wheel needs at least 2 buckets"
                )
            }
            ConfigError::WheelSizeNotPowerOfTwo { size } => {
                write!(
                    f,
                    "invalid wheel size {size}: the wheel size must be a power of two"
                )
            }
            ConfigError::WheelSizeTooLarge { size, max } => {
                write!(
                    f,
                    "invalid wheel size {size}: the wheel size must be at most {max}"
                )
            }
        }
    }
}

impl std::error::Error for ConfigError {}

/// [`TimingWheel::insert`](crate::TimingWheel::insert) refused an item whose deadline is not after
/// the wheel's clock: it is already due. The item comes back with the error
/// ([`into_item`](Self::into_item)), so a caller can run it at once.
///
/// `Debug` and `Display` do not need `T: Debug`; it is an [`Error`](std::error::Error) for any
/// `T`, and `?` converts it into `Box<dyn Error + Send + Sync>` when `T` is `Send + Sync +
/// 'static` (the item is then dropped with the box).
#[derive(Clone, PartialEq, Eq)]
pub struct AlreadyDue<T> {
    pub(crate) item: T,
    pub(crate) deadline: u64,
    pub(crate) now: u64,
}

impl<T> AlreadyDue<T> {
    /// The refused item.
    pub fn into_item(self) -> T {
        self.item
    }

    /// The refused item, by reference.
    pub fn item(&self) -> &T {
        &self.item
    }

    /// The deadline it was given.
    pub fn deadline(&self) -> u64 {
        self.deadline
    }

    /// The wheel's clock when it was refused (at or after the deadline).
    pub fn now(&self) -> u64 {
        self.now
    }
}

impl<T> fmt::Debug for AlreadyDue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AlreadyDue")
            .field("deadline", &self.deadline)
            .field("now", &self.now)
            .finish_non_exhaustive()
    }
}

impl<T> fmt::Display for AlreadyDue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "deadline {} is not after the wheel's clock {}: the item is already due",
            self.deadline, self.now
        )
    }
}

impl<T> std::error::Error for AlreadyDue<T> {}
