//! The locks, condition variables, atomics and threads this crate uses: `parking_lot` and `std`
//! normally, `loom`'s under `cfg(loom)`, so the tick thread's protocol runs plain or model-checked
//! (tokio keeps the same `pub(crate) mod loom`). Private: each crate has its own shim.
//!
//! The API is the subset of `parking_lot` the tick thread needs: `lock()` returns the guard, a
//! condition variable waits on `&mut` guard. Under `loom` a timed wait is a plain wait: the
//! models drive a manual clock, which never needs a timeout.

#[cfg(not(loom))]
mod imp {
    pub(crate) use parking_lot::{Condvar, Mutex};
    pub(crate) use std::sync::atomic;
    pub(crate) use std::thread;
}

#[cfg(loom)]
mod imp {
    use std::ops::{Deref, DerefMut};
    use std::time::Instant;

    pub(crate) use loom::sync::atomic;
    pub(crate) use loom::thread;

    /// `loom`'s mutex behind `parking_lot`'s API.
    #[derive(Debug, Default)]
    pub(crate) struct Mutex<T>(loom::sync::Mutex<T>);

    /// The guard of [`Mutex`]; `None` only while a wait has given the lock up.
    pub(crate) struct MutexGuard<'a, T>(Option<loom::sync::MutexGuard<'a, T>>);

    impl<T> Mutex<T> {
        pub(crate) fn new(value: T) -> Self {
            Mutex(loom::sync::Mutex::new(value))
        }

        pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
            MutexGuard(Some(self.0.lock().expect("no poisoning in the model")))
        }
    }

    impl<T> Deref for MutexGuard<'_, T> {
        type Target = T;
        fn deref(&self) -> &T {
            self.0.as_ref().expect("guard held")
        }
    }

    impl<T> DerefMut for MutexGuard<'_, T> {
        fn deref_mut(&mut self) -> &mut T {
            self.0.as_mut().expect("guard held")
        }
    }

    /// `loom`'s condition variable behind `parking_lot`'s API.
    #[derive(Debug, Default)]
    pub(crate) struct Condvar(loom::sync::Condvar);

    impl Condvar {
        pub(crate) fn new() -> Self {
            Condvar(loom::sync::Condvar::new())
        }

        pub(crate) fn wait<T>(&self, guard: &mut MutexGuard<'_, T>) {
            let inner = guard.0.take().expect("guard held");
            guard.0 = Some(self.0.wait(inner).expect("no poisoning in the model"));
        }

        /// As [`wait`](Self::wait): the model has no timeouts.
        pub(crate) fn wait_until<T>(&self, guard: &mut MutexGuard<'_, T>, _deadline: Instant) {
            self.wait(guard);
        }

        pub(crate) fn notify_one(&self) {
            self.0.notify_one();
        }

        pub(crate) fn notify_all(&self) {
            self.0.notify_all();
        }
    }
}

pub(crate) use imp::*;
