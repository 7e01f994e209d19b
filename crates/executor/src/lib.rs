//! Runs fired timer tasks off the tick thread. **Not yet built**: this crate is an empty member
//! of the workspace until the timer service issue fills it (a rayon pool with panic isolation and a
//! pluggable `Executor` trait). It exports nothing, so nothing can mistake it for working code.
