//! Measurement helpers that are not a workload: the counting allocator that measures memory
//! ([`alloc`]), CPU time, context switches and resident memory from `/proc` ([`procfs`]), and the
//! machine's description and memory latency printed with every run ([`machine`]).

pub mod alloc;
pub mod machine;
pub mod procfs;
