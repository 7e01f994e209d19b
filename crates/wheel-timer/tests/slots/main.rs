//! The per-thread shards and their task slots, seen from the public API: slots freed and reused
//! on the owner and on other threads, shards handed between threads and timers, memory that
//! stays put under churn.
//!
//! Every test here takes one lock (`serial`): they measure `heap_bytes`, and shards pass from
//! timer to timer through a process-wide registry, so a test running beside another could be
//! handed its shards midway.

use std::sync::{Mutex, MutexGuard};

#[path = "../support/mod.rs"]
mod support;

mod churn;
mod recycling;
mod shards;

static SERIAL: Mutex<()> = Mutex::new(());

/// The lock every test of this binary holds while it runs.
fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}
