//! The durable jobs of `tickwheel-durable`: W13 on one node (its embedded store, against Redis
//! and PostgreSQL pollers) and W14 on PostgreSQL (`PgStore`, 1 and 3 node processes, fail-over,
//! against a pool of `FOR UPDATE SKIP LOCKED` pollers).
//!
//! | file | holds |
//! |------|-------|
//! | `one_node.rs`, `one_node/` | W13: its parts (`schedules.rs`, `lateness.rs`, `recovery.rs`) |
//! | `cluster.rs`, `cluster/` | W14: its parts, the node processes (`node.rs`) and their driver (`nodes.rs`) |
//! | `common.rs` | what both share: formatting, wall-clock ms, seeds, lateness slots, leftovers of killed runs |
//! | `pollers.rs` | the baselines both measure against: Redis and PostgreSQL queues, a pool of pollers |

mod cluster;
mod common;
mod one_node;
mod pollers;

pub(super) use cluster::DurableCluster;
pub use cluster::{NODE_ARG, node_main};
pub(super) use one_node::Durable;
