//! The one place a task's panic is handled: caught where the task runs (or where the timer drops
//! its closure), its message kept, its payload dropped safely, counted, and passed to the user's
//! hook.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::loom::Mutex;

/// Called with the message of every task that panics (after it is counted).
pub(crate) type Hook = Arc<dyn Fn(&str) + Send + Sync>;

/// Runs `f`, catching a panic and returning its message. The payload is dropped inside a guard of
/// its own: a payload whose `Drop` panics again is leaked rather than allowed to unwind further.
pub(crate) fn catch<R>(f: impl FnOnce() -> R) -> Result<R, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|payload| {
        let message = message(payload.as_ref());
        if let Err(again) = catch_unwind(AssertUnwindSafe(move || drop(payload))) {
            std::mem::forget(again);
        }
        message
    })
}

/// The message of a panic payload (`&str` or `String`), or a placeholder for other payloads.
fn message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "<non-string panic payload>".to_owned()
    }
}

/// What the timer knows of its tasks' panics.
pub(crate) struct Panics {
    count: AtomicU64,
    last: Mutex<Option<String>>,
    hook: Option<Hook>,
}

impl Panics {
    pub(crate) fn new(hook: Option<Hook>) -> Self {
        Panics {
            count: AtomicU64::new(0),
            last: Mutex::new(None),
            hook,
        }
    }

    /// Runs a task's closure; a panic is counted, kept as the last message and passed to the
    /// hook (itself guarded). Returns false if it panicked.
    pub(crate) fn run(&self, f: impl FnOnce()) -> bool {
        match catch(f) {
            Ok(()) => true,
            Err(message) => {
                self.report(message);
                false
            }
        }
    }

    /// Drops a task's closure (or a waker) where the timer itself lets go of it: at the end of a
    /// repeating task, in a job, at shutdown. Its `Drop` is the user's code, so a panic there is
    /// handled like a panicking run, and the timer's own bookkeeping, done before, stands. (A
    /// `cancel` drops the closure on the caller's thread instead, after its bookkeeping, and lets
    /// such a panic reach the caller: see `TimerHandle::cancel`.)
    pub(crate) fn drop_task<T>(&self, task: T) {
        self.run(move || drop(task));
    }

    /// Counts and reports a panic caught elsewhere (an executor that panicked on submit).
    pub(crate) fn report(&self, message: String) {
        self.count.fetch_add(1, Relaxed);
        crate::service::trace::panicked(&message);
        if let Some(hook) = &self.hook {
            let _ = catch(|| hook(&message));
        }
        *self.last.lock() = Some(message);
    }

    pub(crate) fn count(&self) -> u64 {
        self.count.load(Relaxed)
    }

    pub(crate) fn last(&self) -> Option<String> {
        self.last.lock().clone()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// A panic payload whose own `Drop` panics.
    struct Grenade;
    impl Drop for Grenade {
        fn drop(&mut self) {
            panic!("the payload's drop panics too");
        }
    }

    #[test]
    fn messages_of_every_payload_kind() {
        assert_eq!(catch(|| panic!("plain")).unwrap_err(), "plain");
        assert_eq!(catch(|| panic!("{}", 7)).unwrap_err(), "7");
        assert_eq!(
            catch(|| std::panic::panic_any(7u8)).unwrap_err(),
            "<non-string panic payload>"
        );
        assert_eq!(catch(|| 5).unwrap(), 5);
    }

    #[test]
    fn a_payload_whose_drop_panics_is_contained() {
        let r = catch(|| std::panic::panic_any(Grenade));
        assert_eq!(r.unwrap_err(), "<non-string panic payload>");
    }

    #[test]
    fn panics_are_counted_kept_and_hooked_even_if_the_hook_panics() {
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let s = seen.clone();
        let p = Panics::new(Some(Arc::new(move |m: &str| {
            s.lock().unwrap().push(m.to_owned());
            panic!("hook panics");
        })));
        assert!(p.run(|| {}));
        assert!(!p.run(|| panic!("one")));
        assert!(!p.run(|| std::panic::panic_any(Grenade)));
        assert_eq!(p.count(), 2);
        assert_eq!(p.last().as_deref(), Some("<non-string panic payload>"));
        assert_eq!(seen.lock().unwrap().len(), 2);
    }
}
