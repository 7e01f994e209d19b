//! [`Timeout`]: a future with a deadline.

use std::error::Error;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;

use super::{Outcome, Sleep};

/// Why a [`Timeout`] gave up on its future.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TimeoutError {
    /// The deadline passed before the future completed.
    Elapsed,
    /// The timer shut down (or was dropped) before either happened.
    Shutdown,
}

impl fmt::Display for TimeoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TimeoutError::Elapsed => "deadline has elapsed",
            TimeoutError::Shutdown => "the timer shut down before the deadline",
        })
    }
}

impl Error for TimeoutError {}

pin_project! {
    /// A future that runs `F` until a deadline: `Ok` with its output if it completes first, else
    /// [`TimeoutError`]. Made by [`Timer::timeout`](crate::Timer::timeout) and
    /// [`Timer::timeout_at`](crate::Timer::timeout_at). If `F` completes first, the timer is
    /// cancelled at once and never fires. The future is polled first, so one that is ready at the
    /// deadline still wins.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// use tickwheel::{Timer, TimeoutError};
    ///
    /// let timer = Timer::new()?;
    /// let quick = timer.timeout(Duration::from_secs(5), async { 42 });
    /// assert_eq!(futures_lite_block_on(quick), Ok(42));
    /// let never = timer.timeout(Duration::from_millis(10), std::future::pending::<()>());
    /// assert_eq!(futures_lite_block_on(never), Err(TimeoutError::Elapsed));
    /// # Ok(()) }
    /// # fn futures_lite_block_on<F: std::future::Future>(f: F) -> F::Output {
    /// #     use std::task::{Context, Poll, Wake, Waker};
    /// #     struct Unpark(std::thread::Thread);
    /// #     impl Wake for Unpark { fn wake(self: std::sync::Arc<Self>) { self.0.unpark() } }
    /// #     let waker = Waker::from(std::sync::Arc::new(Unpark(std::thread::current())));
    /// #     let mut f = std::pin::pin!(f);
    /// #     loop {
    /// #         if let Poll::Ready(v) = f.as_mut().poll(&mut Context::from_waker(&waker)) { return v; }
    /// #         std::thread::park();
    /// #     }
    /// # }
    /// ```
    #[must_use = "a timeout does nothing unless awaited"]
    #[derive(Debug)]
    pub struct Timeout<F> {
        #[pin]
        future: F,
        sleep: Sleep,
    }
}

impl<F> Timeout<F> {
    pub(crate) fn new(future: F, sleep: Sleep) -> Self {
        Timeout { future, sleep }
    }

    /// The inner future.
    pub fn get_ref(&self) -> &F {
        &self.future
    }

    /// The inner future, taking it out (the timer is cancelled).
    pub fn into_inner(self) -> F {
        self.future
    }
}

impl<F: Future> Future for Timeout<F> {
    type Output = Result<F::Output, TimeoutError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // `future` is structurally pinned; `sleep` is `Unpin`, reached by a plain `&mut`.
        let this = self.project();
        let future = this.future;
        this.sleep.prefetch(); // a completed future cancels the timer: fetch its lines meanwhile
        if let Poll::Ready(v) = future.poll(cx) {
            this.sleep.cancel();
            return Poll::Ready(Ok(v));
        }
        this.sleep.poll_outcome(cx).map(|o| {
            Err(match o {
                Outcome::Fired => TimeoutError::Elapsed,
                Outcome::Shutdown => TimeoutError::Shutdown,
            })
        })
    }
}
