//! The hand-out from the tick thread to the executors: chunks of due tasks, hostile executors
//! (dropping, inline, panicking, holding jobs), the backlog that `max_pending` and `wait_idle`
//! read, and turns for tasks that are always behind.

#[path = "../support/mod.rs"]
mod support;

mod backlog;
mod chunks;
mod hostile_executors;
