//! The flusher: on a fixed grid anchored at start (Etsy's `startup_time + k × interval`, so
//! flushes never drift), take every reader's table, derive the snapshot, and hand it to each
//! sink without waiting for any of them.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agg::{Aggregator, Snapshot};
use tokio::sync::mpsc;

use crate::ingest::{shards_lock as lock, Shards};

/// Takes tables, flushes, fans out.
#[derive(Debug)]
pub struct Flusher {
    /// The state flushes derive from.
    pub aggregator: Arc<Mutex<Aggregator>>,
    /// The readers' tables.
    pub shards: Arc<Shards>,
    /// One queue per sink that reads snapshots.
    pub sinks: Vec<(&'static str, mpsc::Sender<Arc<Snapshot>>)>,
}

impl Flusher {
    /// Flushes now (`now_ms`: unix milliseconds).
    pub fn flush(&self, now_ms: u64) {
        let started = Instant::now();
        let mut snapshot = {
            let mut aggregator = lock(&self.aggregator);
            self.shards.drain_into(&mut aggregator);
            aggregator.flush(now_ms)
        };
        snapshot.processing_time_ms = started.elapsed().as_secs_f64() * 1000.0;
        let snapshot = Arc::new(snapshot);
        for (name, queue) in &self.sinks {
            if queue.try_send(snapshot.clone()).is_err() {
                tracing::warn!(sink = name, timestamp = snapshot.timestamp, "sink is behind: flush dropped for it");
            }
        }
    }

    /// Flushes on the grid `start_ms + k × interval` (k ≥ 1) until the future is dropped.
    pub async fn run_on_grid(&self, start_ms: u64, interval: Duration) {
        let interval_ms = interval.as_millis().max(1) as u64;
        loop {
            let now = unix_now_ms();
            let next = next_grid_point(start_ms, interval_ms, now);
            tokio::time::sleep(Duration::from_millis(next - now)).await;
            self.flush(unix_now_ms().max(next));
        }
    }
}

/// The first grid point strictly after `now_ms` (a late flush skips to the next point rather
/// than bunching up).
pub fn next_grid_point(start_ms: u64, interval_ms: u64, now_ms: u64) -> u64 {
    let elapsed = now_ms.saturating_sub(start_ms);
    start_ms + (elapsed / interval_ms + 1) * interval_ms
}

/// The runtime clock in unix milliseconds.
pub fn unix_now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::next_grid_point;

    #[test]
    fn stays_on_the_grid() {
        let cases = [(1000, 0), (1000, 999), (2000, 1000), (2000, 1999), (5000, 4500)];
        for (want, now) in cases {
            assert_eq!(next_grid_point(0, 1000, now), want, "now {now}");
        }
        assert_eq!(next_grid_point(10_000, 250, 10_600), 10_750);
    }
}
