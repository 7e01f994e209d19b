//! Layer 1, the slot protocol: a shard's array of task slots and the one word per slot that says
//! who may touch it. Every `unsafe` block of the crate is in this folder; the layers above use
//! only the safe operations it exposes.
//!
//! | file | what it holds |
//! |---|---|
//! | `word.rs` | a slot's state word: state, generation, flags, handle count, and who may write it |
//! | `slot.rs` | one slot: its word and its cell (the task), and the moves between states |
//! | `table.rs` | a shard's slots (`Slots`): allocation, the owner's and the remote free lists |
//! | `owner.rs` | which thread owns a shard's slots, and that thread's free list |
//! | `free_list.rs` | the owner's free slots, lowest first |
//! | `remote_free.rs` | slots freed by other threads, waiting for the owner |
//! | `append_only.rs` | an array whose elements never move, grown in chunks |
//! | `prefetch.rs` | a cache-line prefetch hint |
//! | `waker.rs` | a future's waker, kept in its task in the slot (`HELD`), and how an arming ended |
//!
//! Imports nothing from the layers above (`shard`, `service`, `api`).

pub(crate) mod append_only;
pub(crate) mod free_list;
pub(crate) mod owner;
pub(crate) mod prefetch;
pub(crate) mod remote_free;
pub(crate) mod slot;
pub(crate) mod table;
pub(crate) mod waker;
pub(crate) mod word;
