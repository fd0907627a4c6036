//! The store sink: every flush written to the embedded store by one writer thread, in one
//! transaction each (rows, rollups, retention).

use std::sync::Arc;
use std::time::Instant;

use agg::Snapshot;
use anyhow::Context;
use tokio::sync::mpsc;

use super::{SinkHandle, SinkStatus, SNAPSHOT_QUEUE};
use crate::config::StoreConfig;

/// The database file inside the data directory.
pub const DATABASE: &str = "histd.db";

/// Opens the store (creating the data directory) and starts its writer.
pub fn spawn(config: &StoreConfig, startup_unix_s: u64) -> anyhow::Result<SinkHandle> {
    std::fs::create_dir_all(&config.data_dir).with_context(|| {
        format!("cannot create the data directory {} (store.dataDir / --data-dir)", config.data_dir.display())
    })?;
    let path = config.data_dir.join(DATABASE);
    let mut store = store::Store::open(&path, config.retention)
        .with_context(|| format!("cannot open the store {}", path.display()))?;
    let (sender, mut receiver) = mpsc::channel::<Arc<Snapshot>>(SNAPSHOT_QUEUE);
    let status = SinkStatus::new("store");
    for (name, value) in [
        ("last_flush", startup_unix_s as f64),
        ("last_exception", 0.0),
        ("flush_time", 0.0),
        ("rows", 0.0),
        ("errors", 0.0),
    ] {
        status.set(name, value);
    }
    let reporter = status.clone();
    let task = tokio::task::spawn_blocking(move || {
        while let Some(snapshot) = receiver.blocking_recv() {
            let started = Instant::now();
            let rows = store::rows_of(&snapshot);
            let count = rows.len();
            match store.write(snapshot.timestamp as i64, rows) {
                Ok(()) => {
                    reporter.set("last_flush", snapshot.timestamp as f64);
                    reporter.set("flush_time", started.elapsed().as_secs_f64() * 1000.0);
                    reporter.set("rows", count as f64);
                }
                Err(error) => {
                    reporter.add("errors", 1.0);
                    reporter.set("last_exception", snapshot.timestamp as f64);
                    tracing::error!(%error, rows = count, "store write failed; this flush is not stored");
                }
            }
        }
    });
    Ok(SinkHandle { snapshots: Some(sender), status, task })
}
