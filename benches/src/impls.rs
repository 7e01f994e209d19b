//! The implementations under test, each behind [`TimerQueue`](crate::TimerQueue).

pub mod delay_queue;
pub mod flat;
pub mod heap;
pub mod hhwt;
pub mod pq;
pub mod wheel;

#[cfg(test)]
mod tests;
