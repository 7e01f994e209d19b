//! The users' API: what a task, a handle, a context and the builder promise, and how executors
//! and classes of tasks protect each other; and the source tree's layering (`layers.rs`).

#[path = "../support/mod.rs"]
mod support;

mod isolation;
mod layers;
mod lazy_pool;
mod shutdown_async;
mod tasks;
