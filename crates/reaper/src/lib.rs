//! The tick thread that drives a `timing_wheel::TimingWheel`. **Not yet built**: this crate is an
//! empty member of the workspace until the timer service issue fills it. It exports nothing, so
//! nothing can mistake it for working code.
