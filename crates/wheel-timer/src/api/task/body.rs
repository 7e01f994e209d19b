//! What a task runs: the closure traits [`OnceBody`] and [`RepeatBody`], which let `Task`'s
//! constructors take a closure with or without a [`TaskContext`], and box it once.

use crate::service::context::TaskContext;

/// A closure a one-shot [`Task`](crate::Task) can run: `FnOnce()`, or
/// `FnOnce(&mut TaskContext<'_>)` for a task that wants to know when it was due or reach its
/// timer. The type parameter only tells the two apart; write the context's type in the closure
/// (`|cx: &mut TaskContext<'_>| ..`).
///
/// Why the type must be written: a constructor that takes both kinds of closure cannot tell the
/// compiler which argument a bare `|cx| ..` has, so it stops with E0282 ("type annotations
/// needed", with the hint `/* Type */`). Taking only one kind would make the other one
/// impossible (or double every constructor: `after`, `at`, `every`, `with_fixed_delay`, each
/// with and without a context). The annotation is the price of one constructor for both.
pub trait OnceBody<Args>: Send + 'static {
    /// `into_once`'s box has nothing to drop (see `PLAIN` in `slots/word.rs`). Only the impls below
    /// know that of their box; any other impl keeps the default.
    #[doc(hidden)]
    const PLAIN: bool = false;
    #[doc(hidden)]
    fn into_once(self) -> Box<dyn FnOnce(&mut TaskContext<'_>) + Send>;
}

/// A box of `F` (or of a closure that captures only `F`) has nothing to drop.
const fn plain<F>() -> bool {
    std::mem::size_of::<F>() == 0 && !std::mem::needs_drop::<F>()
}

/// A closure a repeating [`Task`](crate::Task) can run: `FnMut()`, or
/// `FnMut(&mut TaskContext<'_>)` for a task that wants its run count or lateness, or to stop
/// itself ([`TaskContext::stop`]). See [`OnceBody`].
pub trait RepeatBody<Args>: Send + 'static {
    #[doc(hidden)]
    fn into_repeat(self) -> Box<dyn FnMut(&mut TaskContext<'_>) + Send>;
}

impl<F: FnOnce() + Send + 'static> OnceBody<()> for F {
    const PLAIN: bool = plain::<F>();
    fn into_once(self) -> Box<dyn FnOnce(&mut TaskContext<'_>) + Send> {
        Box::new(move |_: &mut TaskContext<'_>| self())
    }
}

impl<F: FnOnce(&mut TaskContext<'_>) + Send + 'static> OnceBody<TaskContext<'static>> for F {
    const PLAIN: bool = plain::<F>();
    fn into_once(self) -> Box<dyn FnOnce(&mut TaskContext<'_>) + Send> {
        Box::new(self)
    }
}

impl<F: FnMut() + Send + 'static> RepeatBody<()> for F {
    fn into_repeat(mut self) -> Box<dyn FnMut(&mut TaskContext<'_>) + Send> {
        Box::new(move |_: &mut TaskContext<'_>| self())
    }
}

impl<F: FnMut(&mut TaskContext<'_>) + Send + 'static> RepeatBody<TaskContext<'static>> for F {
    fn into_repeat(self) -> Box<dyn FnMut(&mut TaskContext<'_>) + Send> {
        Box::new(self)
    }
}
