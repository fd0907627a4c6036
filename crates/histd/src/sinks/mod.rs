//! Sinks (Etsy's "backends"): each runs on its own task, receives every flush's [`Snapshot`]
//! through a bounded queue, and counts what it does in its [`SinkTelemetry`] (published to the
//! management `stats` command and `/health`). A sink that falls behind loses snapshots
//! (counted), never blocks the flusher. README.md beside this file is the shape of a sink.

pub mod circonus;
pub mod console;
pub mod delivery;
pub mod file;
pub mod forward;
pub mod graphite;
pub mod otlp;
pub mod prometheus;
pub mod repeater;
pub mod store;

use std::sync::Arc;

use agg::Snapshot;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

pub use crate::telemetry::{Detail, DropReason, SinkTelemetry};

/// Snapshots a sink may have waiting before new ones are dropped.
pub const SNAPSHOT_QUEUE: usize = 64;

/// A running sink.
#[derive(Debug)]
pub struct SinkHandle {
    /// Where flushes are sent; `None` for sinks that read raw packets instead.
    pub snapshots: Option<mpsc::Sender<Arc<Snapshot>>>,
    /// What it counts, for `stats` and `/health`.
    pub telemetry: Arc<SinkTelemetry>,
    /// What each of its destinations counts, when it has several (prometheus' remote-write
    /// targets), published beside `telemetry`.
    pub targets: Vec<Arc<SinkTelemetry>>,
    /// Ends after its queue closes and it has delivered what it could.
    pub task: JoinHandle<()>,
}

/// Flushes of one aggregator with `config`, one packet each, 10 s apart from `first_ms`: the
/// snapshots the sinks' encoder tests read back.
#[cfg(test)]
pub(crate) fn test_flushes(packets: &[&str], first_ms: u64, config: agg::AggConfig) -> Vec<Snapshot> {
    let mut aggregator = agg::Aggregator::new(config.clone());
    let mut flushes = Vec::new();
    for (index, packet) in packets.iter().enumerate() {
        let mut table = agg::Table::new(config.key_name_sanitize, config.timer_sample_limit);
        table.insert_packet(1, packet.as_bytes());
        aggregator.absorb(table);
        flushes.push(aggregator.flush(first_ms + index as u64 * 10_000));
    }
    flushes
}
