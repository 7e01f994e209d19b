//! The implementations under test, each behind [`TimerQueue`], and the registry of contenders.
//!
//! The registry is the one list `wheelbench` and the criterion benches both draw from: a
//! [`Contender`] or [`Canceller`] is an implementation's name with the workloads instantiated for
//! it, so a caller loops over plain values. Adding an implementation is one line in
//! [`contenders`] (it inserts and fires: W1, W3, W4) and one in [`cancellers`] (it can cancel:
//! W2's two shapes). The flat wheel is in neither: it visits every 1 ms tick, so each workload
//! adds it where it fits (W1 at a smaller N, W3 second, W4 up to a cap, W2's first shape last).
//!
//! The threaded baseline of W6, W10 and W12 is here too ([`mutex_heap`]: `Mutex<BinaryHeap>` and
//! one timer thread), with the generational [`slab`] both heap baselines keep their items in.

#[cfg(feature = "tokio-peers")]
pub mod delay_queue;
pub mod flat;
pub mod heap;
pub mod hhwt;
pub mod mutex_heap;
pub mod pq;
pub mod slab;
pub mod wheel;

#[cfg(test)]
mod tests;

use tickwheel_wheel::TimingWheel;

use crate::scenario::{ChurnParams, UniformParams, churn, churn_uniform};
use crate::workloads::{ChurnResult, Timing, insert_then_fire};
use crate::{Cancel, TimerQueue};
#[cfg(feature = "tokio-peers")]
use delay_queue::TokioDelayQueue;
use heap::LazyHeap;
use hhwt::{Hhwt, HhwtCancel};
use pq::Pq;

/// An implementation in the insert-then-fire workloads (W1, W3, W4): its name and the workload
/// instantiated for it.
#[derive(Clone, Copy, Debug)]
pub struct Contender {
    /// Its name in the tables, [`TimerQueue::NAME`].
    pub name: &'static str,
    /// [`insert_then_fire`] over it.
    pub run: fn(&[u64]) -> Timing,
}

impl Contender {
    /// `Q` as a contender.
    pub fn of<Q: TimerQueue<u64>>() -> Self {
        Contender {
            name: Q::NAME,
            run: insert_then_fire::<Q>,
        }
    }
}

/// An implementation in the cancelling workloads (W2's two shapes): its name and both shapes
/// instantiated for it.
#[derive(Clone, Copy, Debug)]
pub struct Canceller {
    /// Its name in the tables, [`TimerQueue::NAME`].
    pub name: &'static str,
    /// W2, Kafka's purgatory shape ([`churn`]), over it.
    pub churn: fn(&ChurnParams) -> ChurnResult,
    /// W2, uniform cancels ([`churn_uniform`]), over it.
    pub uniform: fn(&UniformParams) -> ChurnResult,
}

impl Canceller {
    /// `Q` as a canceller.
    pub fn of<Q: Cancel<u64>>() -> Self {
        Canceller {
            name: Q::NAME,
            churn: churn::<Q>,
            uniform: churn_uniform::<Q>,
        }
    }
}

/// The implementations that insert and fire at any size, ours first: W1, W3 and W4, and the
/// criterion benches of W1, W3 and W4 (tokio-util's `DelayQueue` only with `tokio-peers`).
pub fn contenders() -> Vec<Contender> {
    vec![
        Contender::of::<TimingWheel<u64>>(),
        Contender::of::<LazyHeap<u64>>(),
        Contender::of::<Pq<u64>>(),
        Contender::of::<Hhwt<u64>>(),
        #[cfg(feature = "tokio-peers")]
        Contender::of::<TokioDelayQueue<u64>>(),
    ]
}

/// The implementations that cancel, ours first: W2's two shapes, and its criterion bench
/// (tokio-util's `DelayQueue` only with `tokio-peers`).
pub fn cancellers() -> Vec<Canceller> {
    vec![
        Canceller::of::<TimingWheel<u64>>(),
        Canceller::of::<LazyHeap<u64>>(),
        Canceller::of::<Pq<u64>>(),
        #[cfg(feature = "tokio-peers")]
        Canceller::of::<TokioDelayQueue<u64>>(),
        Canceller::of::<HhwtCancel<u64>>(),
    ]
}
