//! Sinks (Etsy's "backends"): each runs on its own task, receives every flush's [`Snapshot`]
//! through a bounded queue, and counts what it does in its [`SinkTelemetry`] (published to the
//! management `stats` command and `/health`). A sink that falls behind loses snapshots
//! (counted), never blocks the flusher. README.md beside this file is the shape of a sink.

pub mod backend;
pub mod circonus;
pub mod console;
pub mod delivery;
pub mod file;
pub mod forward;
pub mod graphite;
pub mod http_settings;
pub mod influx;
pub mod otlp;
pub mod prometheus;
pub mod repeater;
pub mod store;

#[cfg(test)]
use agg::Snapshot;

pub use crate::telemetry::{Detail, DropReason, SinkTelemetry};
pub use backend::{
    host_name, offer, Backend, Context, FileContents, Flushes, InPlace, Offered, QueueSlot, Reload, Shared, Started,
};

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
