//! Shutdown and drop: what comes back, what runs, what is waited for, and no deadlock or double
//! run when shutdown races tasks, adds and re-arming.

#[path = "../support/mod.rs"]
mod support;

mod handing_back;
mod races;
