//! The trait every implementation is driven through.

/// A queue of items with deadlines, driven in virtual time: milliseconds, the clock starting at 0.
///
/// Implementations must never hand an item out before its deadline, must hand out every item
/// whose deadline is `<= now` when [`advance`](Self::advance) is called with `now`, and must not
/// skip ahead of what `advance` was asked for.
pub trait TimerQueue<T>: Sized {
    /// The handle [`insert`](Self::insert) returns, for [`Cancel::cancel`].
    type Id: Copy;

    /// Short name used in tables and charts.
    const NAME: &'static str;

    /// An empty queue whose clock reads 0, with a 1 ms tick where the implementation has one.
    fn new() -> Self;

    /// Adds `item`, due at `deadline` (ms).
    ///
    /// # Panics
    ///
    /// If `deadline` is not after the clock: the workloads never ask for that, so it is a bug.
    fn insert(&mut self, deadline: u64, item: T) -> Self::Id;

    /// Moves the clock to `now` and calls `f` with every item due by then.
    fn advance(&mut self, now: u64, f: impl FnMut(T));

    /// Number of pending items.
    fn len(&self) -> usize;

    /// True when nothing is pending.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A [`TimerQueue`] that can cancel a pending item.
pub trait Cancel<T>: TimerQueue<T> {
    /// Cancels the pending item `id` and drops it; `true` if it was pending.
    ///
    /// The workloads only cancel items that are still pending: some implementations (tokio's
    /// `DelayQueue`) reuse keys without a generation, so a stale key could name another item.
    fn cancel(&mut self, id: Self::Id) -> bool;
}
