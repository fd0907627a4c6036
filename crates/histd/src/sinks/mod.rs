//! Sinks (Etsy's "backends"): each runs on its own task, receives every flush's [`Snapshot`]
//! through a bounded queue, and reports its state for the management `stats` command.
//! A sink that falls behind loses snapshots (counted), never blocks the flusher.

pub mod console;
pub mod graphite;
pub mod repeater;
pub mod store;

use std::sync::{Arc, Mutex};

use agg::Snapshot;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::ingest::shards_lock as lock;

/// Snapshots a sink may have waiting before new ones are dropped.
pub const SNAPSHOT_QUEUE: usize = 64;

/// A running sink.
#[derive(Debug)]
pub struct SinkHandle {
    /// Where flushes are sent; `None` for sinks that read raw packets instead.
    pub snapshots: Option<mpsc::Sender<Arc<Snapshot>>>,
    /// What it reports to `stats`.
    pub status: SinkStatus,
    /// Ends after its queue closes and it has delivered what it could.
    pub task: JoinHandle<()>,
}

/// Named values a sink reports, shown by the management `stats` command as
/// `<sink>.<name>: <value>` (names starting with `last_` as seconds since).
#[derive(Debug, Clone)]
pub struct SinkStatus {
    sink: &'static str,
    values: Arc<Mutex<Vec<(&'static str, f64)>>>,
}

impl SinkStatus {
    /// An empty status for the sink called `sink`.
    pub fn new(sink: &'static str) -> Self {
        SinkStatus { sink, values: Arc::default() }
    }

    /// The sink's name.
    pub fn sink(&self) -> &'static str {
        self.sink
    }

    /// Sets one value.
    pub fn set(&self, name: &'static str, value: f64) {
        let mut values = lock(&self.values);
        match values.iter_mut().find(|(n, _)| *n == name) {
            Some(entry) => entry.1 = value,
            None => values.push((name, value)),
        }
    }

    /// Adds to one value.
    pub fn add(&self, name: &'static str, amount: f64) {
        let current = self.get(name).unwrap_or(0.0);
        self.set(name, current + amount);
    }

    /// One value.
    pub fn get(&self, name: &str) -> Option<f64> {
        lock(&self.values).iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
    }

    /// Every value, in the order first set.
    pub fn entries(&self) -> Vec<(&'static str, f64)> {
        lock(&self.values).clone()
    }
}
