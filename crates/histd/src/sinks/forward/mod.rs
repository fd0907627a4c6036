//! The forward backend: a local histd sends each flush's mergeable state to global histd
//! nodes, which merge the fleet's intervals exactly (`global/`).
//!
//! What it sends (format.rs, docs/forward-format.md): counters as interval sums, timers and
//! `h`/`d` histograms as exact count, sum, sum of squares, min, max and the circllhist (the
//! raw values too while at most `forward.rawValuesLimit`, so the global's percentiles stay
//! Etsy-exact), gauges updated in the interval with their update time (the latest wins at the
//! global), sets as members up to `forward.setMembersLimit` and a HyperLogLog sketch past it.
//! Each series goes to the node that owns its key (ring.rs: rendezvous hashing); each batch
//! carries an identity the global merges once. Batches wait in a spool bounded in bytes
//! (spool.rs), on disk with `forward.spoolDir`, while no node takes them.
//!
//! What it loses: nothing while the spool has room and, without `forward.spoolDir`, the
//! process lives. histd's own metrics (under `prefixStats`) stay local. A sketched set's count
//! is an estimate (~0.8%). A batch a node took whose answer was lost is sent to another node
//! when the first is marked down: then both merge it.

pub mod config;
pub mod encode;
pub mod format;
pub mod ring;
mod sink;
pub mod spool;
#[cfg(test)]
mod tests;

pub use config::{ForwardConfig, GlobalConfig};
pub use sink::spawn;
