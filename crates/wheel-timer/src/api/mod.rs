//! Layer 4, the public API: what `lib.rs` re-exports, on top of the service.
//!
//! | file | what it holds |
//! |---|---|
//! | `timer.rs` | `Timer` |
//! | `add.rs` | the add path (`add_or_submit`): a thread's own shard, no lock |
//! | `builder.rs` | `TimerBuilder` |
//! | `handle.rs` | `TimerHandle`, `TaskState` |
//! | `task/` | `Task` and `MisfirePolicy` (`mod.rs`), the closure traits (`body.rs`), `TaskContext` and `WeakTimer` (`context.rs`) |
//! | `future/` | `Sleep`, `Timeout`, `Interval` |
//! | `shutdown.rs` | `ShutdownOptions`, `ShutdownReport`, and the tasks shutdown hands back |
//! | `error.rs` | `AddError`, `BuildError` |
//! | `stats.rs` | `Stats`, `ClassStats`, `RunTimes` |

pub(crate) mod add;
pub(crate) mod builder;
pub(crate) mod error;
pub(crate) mod future;
pub(crate) mod handle;
pub(crate) mod shutdown;
pub(crate) mod stats;
pub(crate) mod task;
pub(crate) mod timer;
