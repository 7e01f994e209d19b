//! The locks, condition variables, atomics, cells and thread-locals of the timer's protocol:
//! `parking_lot` and `std` normally, `loom`'s under `cfg(loom)`, so the same code runs plain or
//! model-checked (tokio keeps the same `pub(crate) mod loom`). Private to this crate.

#[cfg(not(loom))]
mod imp {
    pub(crate) use parking_lot::{Condvar, Mutex, MutexGuard};
    pub(crate) use std::sync::atomic;
    pub(crate) use std::thread_local;

    /// `std`'s `UnsafeCell` behind `loom`'s closure API, so access can be modelled under loom.
    #[derive(Debug)]
    pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

    impl<T> UnsafeCell<T> {
        pub(crate) fn new(value: T) -> Self {
            UnsafeCell(std::cell::UnsafeCell::new(value))
        }

        pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
            f(self.0.get())
        }
    }
}

#[cfg(loom)]
mod imp {
    use std::ops::{Deref, DerefMut};

    pub(crate) use loom::cell::UnsafeCell;
    pub(crate) use loom::sync::atomic;
    pub(crate) use loom::thread_local;

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

        /// Waits, or times out: the model has no time, so it waits.
        pub(crate) fn wait_until<T>(
            &self,
            guard: &mut MutexGuard<'_, T>,
            _deadline: std::time::Instant,
        ) -> TimedOut {
            self.wait(guard);
            TimedOut(false)
        }

        pub(crate) fn notify_all(&self) {
            self.0.notify_all();
        }
    }

    /// `parking_lot`'s wait result, as far as this crate reads it.
    pub(crate) struct TimedOut(bool);

    impl TimedOut {
        pub(crate) fn timed_out(&self) -> bool {
            self.0
        }
    }
}

pub(crate) use imp::*;

/// One turn of a wait for another thread's short hold (a slot's `HELD` bit): a spin hint, and
/// after `turn` 64 the processor given up, for a holder the OS descheduled. Under loom, a yield,
/// so the model runs the holder.
#[inline]
pub(crate) fn spin(turn: u32) {
    #[cfg(not(loom))]
    if turn < 64 {
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
    #[cfg(loom)]
    {
        let _ = turn;
        loom::thread::yield_now();
    }
}
