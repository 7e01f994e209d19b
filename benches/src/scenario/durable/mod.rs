//! The durable jobs of `tickwheel-durable`: W13 on one node (its embedded store, against Redis
//! and PostgreSQL pollers) and W14 on PostgreSQL (`PgStore`, 1 and 3 node processes, fail-over,
//! against a pool of `FOR UPDATE SKIP LOCKED` pollers).
//!
//! | file | holds |
//! |------|-------|
//! | `w13_one_node.rs`, `w13_one_node/` | W13: its parts (`schedules.rs`, `lateness.rs`, `recovery.rs`) |
//! | `w14_cluster.rs`, `w14_cluster/` | W14: its parts, the node processes (`node.rs`) and their driver (`nodes.rs`) |
//! | `common.rs` | what both share: formatting, wall-clock ms, seeds, lateness slots, leftovers of killed runs |
//! | `pollers.rs` | the baselines both measure against: Redis and PostgreSQL queues, a pool of pollers |

mod common;
mod pollers;
mod w13_one_node;
mod w14_cluster;

pub(super) use w13_one_node::Durable;
pub(super) use w14_cluster::DurableCluster;
pub use w14_cluster::{NODE_ARG, node_main};
