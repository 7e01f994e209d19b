//! Events and spans for the `tracing` crate, with this crate's `tracing` feature: a task that
//! panicked, a class isolated or back, an add refused, runs skipped by a misfire policy, and a
//! span around each hand-off to an executor. Without the feature these are empty inline
//! functions: nothing is compiled in.

/// The span [`handoff`] enters.
#[cfg(feature = "tracing")]
pub(crate) type Span = tracing::span::EnteredSpan;
/// Nothing, without the feature.
#[cfg(not(feature = "tracing"))]
pub(crate) struct Span;

/// Entered while a due task's job is handed to its executor.
#[inline(always)]
pub(crate) fn handoff(_shard: u32, _slot: u32, _pool: impl std::fmt::Debug) -> Span {
    #[cfg(feature = "tracing")]
    return tracing::trace_span!(target: "tickwheel", "handoff", shard = _shard, slot = _slot, pool = ?_pool).entered();
    #[cfg(not(feature = "tracing"))]
    Span
}

/// A task's closure panicked (it was caught and counted).
#[inline(always)]
pub(crate) fn panicked(_message: &str) {
    #[cfg(feature = "tracing")]
    tracing::warn!(target: "tickwheel", panic = _message, "a task panicked");
}

/// The user's hook `_hook` (a builder setting's name) panicked; the panic was caught.
#[inline(always)]
pub(crate) fn hook_panicked(_hook: &'static str, _message: &str) {
    #[cfg(feature = "tracing")]
    tracing::warn!(target: "tickwheel", hook = _hook, panic = _message, "a hook panicked");
}

/// The class `_class` (`""`: the default class) moved to the slow pool, or back.
#[inline(always)]
pub(crate) fn isolation(_class: &str, _isolated: bool) {
    #[cfg(feature = "tracing")]
    if _isolated {
        tracing::info!(target: "tickwheel", class = _class, "class isolated: its tasks run on the slow pool");
    } else {
        tracing::info!(target: "tickwheel", class = _class, "class back on the timer's pool");
    }
}

/// An add was refused (`_why`: "full" or "shut down").
#[inline(always)]
pub(crate) fn refused(_why: &'static str) {
    #[cfg(feature = "tracing")]
    tracing::debug!(target: "tickwheel", why = _why, "add refused");
}

/// A repeating task skipped `_runs` runs (its misfire policy).
#[inline(always)]
pub(crate) fn skipped(_runs: u64) {
    #[cfg(feature = "tracing")]
    tracing::debug!(target: "tickwheel", runs = _runs, "runs skipped by the misfire policy");
}
