//! Exactly once: every added task runs once, is cancelled (`cancel` returned true) or is handed
//! back by shutdown; never two, never none. A model of the whole service checked after every
//! step, threads racing adds, cancels and reschedules, cancels racing runs, and closures whose
//! drop panics.

#[path = "../support/mod.rs"]
mod support;

mod cancel_and_runs;
mod concurrency;
mod model;
mod panicking_drops;
