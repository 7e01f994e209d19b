//! `tokio-util`'s `DelayQueue` on a current-thread runtime with paused time.
//!
//! The queue lives outside the runtime; inserting into an empty queue (the only insert that
//! creates a timer) enters the runtime's context. `advance(now)` runs one `block_on` that moves
//! the paused clock to `now` with `tokio::time::advance` (which lets the time driver fire) and
//! then polls `poll_expired` until it is not ready, never awaiting it: awaiting a pending poll
//! would let the paused clock jump ahead to the next timer. The poll runs `unconstrained`, so
//! tokio's cooperative budget cannot cut a batch short.

use std::future::poll_fn;
use std::task::Poll;
use std::time::Duration;

use tokio::runtime::{Builder, Runtime};
use tokio::time::Instant;
use tokio_util::time::DelayQueue;
use tokio_util::time::delay_queue::Key;

use crate::{Cancel, TimerQueue};

/// A `DelayQueue` with its own paused-clock runtime.
#[derive(Debug)]
pub struct TokioDelayQueue<T> {
    rt: Runtime,
    queue: DelayQueue<T>,
    /// The paused clock's reading at virtual time 0.
    start: Instant,
    now: u64,
}

impl<T> TimerQueue<T> for TokioDelayQueue<T> {
    type Id = Key;
    const NAME: &'static str = "tokio-util DelayQueue";

    fn new() -> Self {
        let rt = Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("a current-thread runtime");
        let (queue, start) = {
            let _context = rt.enter();
            (DelayQueue::new(), Instant::now())
        };
        TokioDelayQueue {
            rt,
            queue,
            start,
            now: 0,
        }
    }

    #[inline]
    fn insert(&mut self, deadline: u64, item: T) -> Key {
        assert!(
            deadline > self.now,
            "deadline {deadline} is not after now {}",
            self.now
        );
        let when = self.start + Duration::from_millis(deadline);
        if self.queue.is_empty() {
            // The queue may create its `Sleep` now, which needs the runtime's context.
            let _context = self.rt.enter();
            self.queue.insert_at(item, when)
        } else {
            self.queue.insert_at(item, when)
        }
    }

    fn advance(&mut self, now: u64, mut f: impl FnMut(T)) {
        if now <= self.now && self.queue.is_empty() {
            return;
        }
        self.now = self.now.max(now);
        let target = self.start + Duration::from_millis(self.now);
        let queue = &mut self.queue;
        self.rt.block_on(tokio::task::unconstrained(async {
            let clock = Instant::now();
            if target > clock {
                tokio::time::advance(target - clock).await;
            }
            while let Poll::Ready(Some(expired)) =
                poll_fn(|cx| Poll::Ready(queue.poll_expired(cx))).await
            {
                f(expired.into_inner());
            }
        }));
    }

    fn len(&self) -> usize {
        self.queue.len()
    }
}

impl<T> Cancel<T> for TokioDelayQueue<T> {
    #[inline]
    fn cancel(&mut self, id: Key) -> bool {
        self.queue.try_remove(&id).is_some()
    }
}
