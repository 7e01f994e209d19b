//! The one error `TimingWheel::new` can return.

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
