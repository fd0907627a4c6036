//! The store sink: every flush written to the embedded store by one writer thread, in one
//! transaction each (rows, rollups, retention).

use std::sync::Arc;
use std::time::Instant;

use agg::Snapshot;
use anyhow::Context;
use tokio::sync::mpsc;

use super::{DropReason, EtsyStatus, SinkHandle, SinkTelemetry, SNAPSHOT_QUEUE};
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
    let telemetry = Arc::new(SinkTelemetry::new("store", EtsyStatus::None, startup_unix_s));
    let counts = telemetry.clone();
    let task = tokio::task::spawn_blocking(move || {
        while let Some(snapshot) = receiver.blocking_recv() {
            counts.queued.set(receiver.len() as u64);
            write_flush(&mut store, &snapshot, &counts);
        }
    });
    Ok(SinkHandle { snapshots: Some(sender), telemetry, task })
}

/// Writes one flush in one transaction, counting rows written or the failure.
fn write_flush(store: &mut store::Store, snapshot: &Snapshot, telemetry: &SinkTelemetry) {
    let started = Instant::now();
    let rows = store::rows_of(snapshot);
    let count = rows.len() as u64;
    match store.write(snapshot.timestamp as i64, rows) {
        Ok(()) => {
            telemetry.points_out.add(count);
            telemetry.last_flush_us.set(started.elapsed().as_micros() as u64);
            telemetry.succeeded(crate::ingest::unix_now_s());
        }
        Err(error) => {
            telemetry.failed(crate::ingest::unix_now_s());
            telemetry.drop_points(DropReason::Rejected, count);
            tracing::error!(%error, rows = count, "store write failed; this flush is not stored");
        }
    }
}
