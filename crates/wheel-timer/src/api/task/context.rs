//! [`WeakTimer`], a reference to a timer that does not keep it alive, and how a running task
//! reaches it ([`TaskContext::timer`]; the rest of `TaskContext` is in `service/context.rs`).

use std::fmt;
use std::sync::{Arc, Weak};
use std::time::Instant;

use crate::api::error::AddError;
use crate::api::handle::TimerHandle;
use crate::api::task::Task;
use crate::service::context::TaskContext;
use crate::service::core::Core;

impl TaskContext<'_> {
    /// The timer running this task, as a reference that does not keep it alive. (A task run by
    /// hand with [`Task::run`] has no timer: adds through it are refused.)
    pub fn timer(&self) -> WeakTimer {
        WeakTimer {
            core: self.core().map(Arc::downgrade).unwrap_or_default(),
        }
    }
}

/// A reference to a [`Timer`](crate::Timer) that does not keep it alive: for tasks that add
/// follow-up tasks, so a timer whose owner dropped it shuts down and frees its threads even
/// while its tasks hold this. From [`Timer::downgrade`](crate::Timer::downgrade) or
/// [`TaskContext::timer`].
#[derive(Clone, Default)]
pub struct WeakTimer {
    core: Weak<Core>,
}

impl WeakTimer {
    pub(crate) fn new(core: &Arc<Core>) -> Self {
        WeakTimer {
            core: Arc::downgrade(core),
        }
    }

    /// [`Timer::add_or_submit`](crate::Timer::add_or_submit) on the timer, if it is still
    /// there; once it is dropped, every add is refused with
    /// [`AddError::Shutdown`](crate::AddError::Shutdown), the task handed back.
    pub fn add_or_submit(&self, task: Task) -> Result<TimerHandle, AddError> {
        match self.core.upgrade() {
            Some(core) => crate::api::add::add(&core, task),
            None => Err(AddError::Shutdown(task)),
        }
    }

    /// [`Timer::now`](crate::Timer::now), if the timer is still there.
    pub fn now(&self) -> Option<Instant> {
        let core = self.core.upgrade()?;
        Some(core.instant_of(core.clock.now()))
    }

    /// True once the timer was shut down or dropped.
    pub fn is_shutdown(&self) -> bool {
        self.core
            .upgrade()
            .is_none_or(|core| !core.lifecycle.is_open())
    }
}

impl fmt::Debug for WeakTimer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WeakTimer")
            .field("shutdown", &self.is_shutdown())
            .finish()
    }
}
