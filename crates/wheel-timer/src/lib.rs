//! The timer users link (`Timer`, `Task`, `TimerHandle`). **Not yet built**: this crate is an empty
//! member of the workspace until the timer service issue fills it; use the `timing-wheel` crate
//! directly meanwhile. It exports nothing, so nothing can mistake it for working code.
