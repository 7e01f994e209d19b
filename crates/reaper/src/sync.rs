//! Locks, condition variables, atomics and threads: `parking_lot` and `std` normally, `loom`'s
//! under `cfg(loom)`, so the same protocol code runs plain or model-checked (tokio's `loom`
//! module does the same). Used by this crate and by `wheel-timer`.
//!
//! The API is the subset of `parking_lot` the timer uses: `lock()` returns the guard, a condition
//! variable waits on `&mut` guard, and [`unlocked`] runs a closure with the lock released. Under
//! `loom` a timed wait is a plain wait: the model tests drive a manual clock, which never needs a
//! timeout.

#[cfg(not(loom))]
mod imp {
    pub use parking_lot::{Condvar, Mutex, MutexGuard};
    pub use std::sync::atomic;
    pub use std::thread;
    pub use std::thread_local;

    /// Runs `f` with the lock of `guard` released, and takes it again.
    pub fn unlocked<T, R>(guard: &mut MutexGuard<'_, T>, f: impl FnOnce() -> R) -> R {
        MutexGuard::unlocked(guard, f)
    }
}

#[cfg(loom)]
mod imp {
    use std::ops::{Deref, DerefMut};
    use std::time::Instant;

    pub use loom::sync::atomic;
    pub use loom::thread;
    pub use loom::thread_local;

    /// `loom`'s mutex behind `parking_lot`'s API.
    #[derive(Debug, Default)]
    pub struct Mutex<T> {
        inner: loom::sync::Mutex<T>,
    }

    /// The guard of [`Mutex`]; `None` only while [`unlocked`] or a wait has given the lock up.
    pub struct MutexGuard<'a, T> {
        mutex: &'a Mutex<T>,
        guard: Option<loom::sync::MutexGuard<'a, T>>,
    }

    impl<T> Mutex<T> {
        /// A new unlocked mutex.
        pub fn new(value: T) -> Self {
            Mutex {
                inner: loom::sync::Mutex::new(value),
            }
        }

        /// Takes the lock.
        pub fn lock(&self) -> MutexGuard<'_, T> {
            MutexGuard {
                mutex: self,
                guard: Some(self.inner.lock().expect("no poisoning in the model")),
            }
        }
    }

    impl<T> Deref for MutexGuard<'_, T> {
        type Target = T;
        fn deref(&self) -> &T {
            self.guard.as_ref().expect("guard held")
        }
    }

    impl<T> DerefMut for MutexGuard<'_, T> {
        fn deref_mut(&mut self) -> &mut T {
            self.guard.as_mut().expect("guard held")
        }
    }

    /// `loom`'s condition variable behind `parking_lot`'s API.
    #[derive(Debug, Default)]
    pub struct Condvar(loom::sync::Condvar);

    impl Condvar {
        /// A new condition variable.
        pub fn new() -> Self {
            Condvar(loom::sync::Condvar::new())
        }

        /// Releases the lock, waits for a notification, takes the lock again.
        pub fn wait<T>(&self, guard: &mut MutexGuard<'_, T>) {
            let inner = guard.guard.take().expect("guard held");
            guard.guard = Some(self.0.wait(inner).expect("no poisoning in the model"));
        }

        /// As [`wait`](Self::wait): the model has no timeouts.
        pub fn wait_until<T>(&self, guard: &mut MutexGuard<'_, T>, _deadline: Instant) {
            self.wait(guard);
        }

        /// Wakes one waiter.
        pub fn notify_one(&self) {
            self.0.notify_one();
        }

        /// Wakes every waiter.
        pub fn notify_all(&self) {
            self.0.notify_all();
        }
    }

    /// Runs `f` with the lock of `guard` released, and takes it again.
    pub fn unlocked<T, R>(guard: &mut MutexGuard<'_, T>, f: impl FnOnce() -> R) -> R {
        drop(guard.guard.take());
        let result = f();
        guard.guard = Some(guard.mutex.inner.lock().expect("no poisoning in the model"));
        result
    }
}

pub use imp::*;
