//! The users' API: what a task, a handle, a context and the builder promise, and how executors
//! and classes of tasks protect each other.

#[path = "../support/mod.rs"]
mod support;

mod isolation;
mod tasks;
