//! The flusher: on a fixed grid anchored at start (Etsy's `startup_time + k × interval`, so
//! flushes never drift), take every reader's table, derive the snapshot, and hand it to each
//! sink without waiting for any of them.

use crate::clock::{next_grid_point, unix_now_ms};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agg::Snapshot;
use tokio::sync::mpsc;

use crate::aggregation::Aggregation;
use crate::aggregation::Receipt;
use crate::placement::Flushed;

use crate::telemetry::SinkTelemetry;

/// A sink's queue of snapshots, with its telemetry (the flusher counts what it could not
/// queue).
pub type Outlet = (Arc<SinkTelemetry>, mpsc::Sender<Arc<Snapshot>>);

/// The queues of the sinks in force, in config order; a reload replaces them between two
/// flushes (each flush goes to one list whole).
#[derive(Debug, Default)]
pub struct Outlets(Mutex<Vec<Outlet>>);

impl Outlets {
    /// Puts `outlets` in force from the next flush on.
    pub fn set(&self, outlets: Vec<Outlet>) {
        *crate::clock::lock(&self.0) = outlets;
    }

    /// The queues in force.
    pub fn current(&self) -> Vec<Outlet> {
        crate::clock::lock(&self.0).clone()
    }
}

/// Takes tables, flushes, fans out.
#[derive(Debug)]
pub struct Flusher {
    /// The readers' tables and the state flushes derive from.
    pub aggregation: Arc<Aggregation>,
    /// One queue per sink that reads snapshots.
    pub sinks: Arc<Outlets>,
    /// The global tier, told what each flush carried once every sink has taken the flush
    /// (its journal files are removed, its Kafka offsets committed).
    pub global: Option<Arc<crate::global::Global>>,
}

impl Flusher {
    /// Flushes now (`now_ms`: unix milliseconds).
    pub fn flush(&self, now_ms: u64) {
        self.flush_at(now_ms, false);
    }

    /// The final flush, at the stop: it also takes the forwarded batches held for flushes
    /// that will not come.
    pub fn flush_last(&self, now_ms: u64) {
        self.flush_at(now_ms, true);
    }

    fn flush_at(&self, now_ms: u64, last: bool) {
        let started = Instant::now();
        let (mut snapshot, released, flushed, in_flight) = {
            let mut gathered = self.aggregation.current();
            let (snapshot, flushed, in_flight) = gathered.flush_all(now_ms, last);
            (snapshot, gathered.take_released(), flushed, in_flight)
        };
        let trim_asked =
            TRIM_FLUSHES.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| left.checked_sub(1)).is_ok();
        if released || trim_asked {
            crate::malloc::return_freed_memory();
        }
        log_bad_lines(&snapshot.ingest);
        snapshot.processing_time_ms = started.elapsed().as_secs_f64() * 1000.0;
        self.aggregation.flushes.add(1);
        self.aggregation.last_flush_us.set(started.elapsed().as_micros() as u64);
        self.aggregation.last_flush_unix_ms.set(now_ms);
        snapshot.queue_bytes = snapshot.estimate_bytes() as u64;
        let Flushed { late, receipts } = flushed;
        // The late intervals go first, so this flush is let go of last: it carries the
        // receipts of all of them.
        snapshot.released = self.letting_go(receipts, None);
        self.name_log(&mut snapshot);
        let mut outgoing = self.late_snapshots(late, &in_flight, Vec::new());
        outgoing.push(Arc::new(snapshot));
        self.offer(&outgoing);
    }

    /// Hands the late intervals held to the sinks now, between two flushes (they are due:
    /// `global.maxLateIntervals` are held or in the sinks' hands).
    pub fn flush_late(&self) {
        let (Flushed { late, receipts }, in_flight) = self.aggregation.take_late();
        self.offer(&self.late_snapshots(late, &in_flight, receipts));
    }

    /// Late intervals ready for the sinks, each counting itself out of `in_flight` once every
    /// sink has taken it; the last one also lets go of `receipts` (a hand-over between two
    /// flushes; with a flush, that flush carries them).
    fn late_snapshots(
        &self,
        late: Vec<Snapshot>,
        in_flight: &Arc<AtomicUsize>,
        mut receipts: Vec<Receipt>,
    ) -> Vec<Arc<Snapshot>> {
        let count = late.len();
        let ready = late.into_iter().enumerate().map(|(index, mut late)| {
            late.queue_bytes = late.estimate_bytes() as u64;
            let carried = if index + 1 == count { std::mem::take(&mut receipts) } else { Vec::new() };
            late.released = self.letting_go(carried, Some(in_flight.clone()));
            self.name_log(&mut late);
            Arc::new(late)
        });
        ready.collect()
    }

    /// What runs when the flush that carried `receipts` is let go of by every sink: a global
    /// lets go of them (journal files removed, Kafka offsets committed) and, for a late
    /// interval, counts it out of `in_flight`. A global killed before then reads those
    /// batches again, not never.
    fn letting_go(&self, receipts: Vec<Receipt>, in_flight: Option<Arc<AtomicUsize>>) -> agg::Released {
        let global = self.global.clone().filter(|_| !receipts.is_empty());
        if global.is_none() && in_flight.is_none() {
            return agg::Released::default();
        }
        agg::Released::with(move || {
            if let Some(global) = global {
                global.carried(&receipts);
            }
            if let Some(in_flight) = in_flight {
                in_flight.fetch_sub(1, Ordering::Relaxed);
            }
        })
    }

    /// Names the topic a Kafka global read the batches of `snapshot` from, when it holds any
    /// (the store keeps their positions under it).
    fn name_log(&self, snapshot: &mut Snapshot) {
        if snapshot.log_positions.is_empty() {
            return;
        }
        let topic =
            self.global.as_ref().and_then(|global| global.config().kafka.as_ref().map(|k| k.cluster.topic.clone()));
        snapshot.log_positions.log = topic.unwrap_or_default();
    }

    /// Offers `outgoing` to every sink in force, in order.
    fn offer(&self, outgoing: &[Arc<Snapshot>]) {
        for (telemetry, queue) in &self.sinks.current() {
            for snapshot in outgoing {
                crate::sinks::offer(queue, telemetry, snapshot);
            }
        }
    }

    /// Flushes on the grid `start_ms + k × interval` (k ≥ 1) until the future is dropped.
    /// Between two, a global's late intervals go to the sinks as soon as they are due.
    pub async fn run_on_grid(&self, start_ms: u64, interval: Duration) {
        let interval_ms = interval.as_millis().max(1) as u64;
        loop {
            let now = unix_now_ms();
            let next = next_grid_point(start_ms, interval_ms, now);
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(next - now)) => self.flush(unix_now_ms().max(next)),
                () = self.aggregation.late_due() => self.flush_late(),
            }
        }
    }
}

/// Flushes still to give memory back after large HTTP answers were built: the answers are
/// freed only once their clients have read them, so the next few flushes each trim.
pub(crate) static TRIM_FLUSHES: AtomicUsize = AtomicUsize::new(0);

/// How many flushes trim after large answers.
pub(crate) const TRIM_FLUSHES_AFTER_ANSWERS: usize = 5;

/// At most one log line an interval about its rejected lines: how many, and the latest one
/// (the per-reason counts and examples are in `stats`, `/health` and `histd top`).
fn log_bad_lines(interval: &agg::IngestCounts) {
    let count = interval.bad_lines();
    if let Some((reason, line)) = interval.bad_examples.latest().filter(|_| count > 0) {
        let source = line.source.map_or_else(|| "a datagram".to_string(), |ip| ip.to_string());
        tracing::warn!(count, reason = reason.as_str(), line = %line.text(), %source, "bad lines this interval; the latest");
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use agg::AggConfig;
    use tokio::sync::mpsc;

    use super::{Aggregation, Flusher, Outlets};
    use crate::telemetry::{EtsyStatus, SinkTelemetry};

    /// A global's late intervals go to the sinks at once when they fill
    /// `global.maxLateIntervals` (the flusher is told), each stamped with its own flush's
    /// time, and count against the bound until every sink has taken them.
    #[tokio::test]
    async fn late_intervals_due_go_at_once_and_count_until_the_sinks_take_them() {
        use crate::placement::{Grid, Place};
        let aggregation = Arc::new(Aggregation::new(AggConfig::default()));
        let now = crate::clock::unix_now_ms();
        aggregation.set_grid(Grid { start_ms: now - now % 1000, interval_ms: 1000, wait_ms: 0 }, 2, now);
        for ago in [20_000, 10_000] {
            let batch = agg::Mergeable { counters: vec![("late".into(), 1.0)], ..Default::default() };
            assert!(matches!(aggregation.absorb_forwarded(now - ago, batch, None), Place::Late(_)));
        }
        assert!(aggregation.late_full() && aggregation.late_would_pass(now - 30_000));
        let told = tokio::time::timeout(std::time::Duration::from_secs(1), aggregation.late_due()).await;
        assert!(told.is_ok(), "the flusher is told they are due");
        let telemetry = Arc::new(SinkTelemetry::new("store", EtsyStatus::None, 0));
        let (sender, mut receiver) = mpsc::channel(8);
        let flusher = Flusher {
            aggregation: aggregation.clone(),
            sinks: Arc::new(Outlets(std::sync::Mutex::new(vec![(telemetry, sender)]))),
            global: None,
        };
        flusher.flush_late();
        let (first, second) = (receiver.try_recv().unwrap(), receiver.try_recv().unwrap());
        assert!(first.late && second.late);
        assert_eq!(second.timestamp - first.timestamp, 10, "each at its own time, oldest first");
        assert!(aggregation.late_would_pass(now - 30_000), "both still in the sink's hands");
        drop(first);
        assert!(!aggregation.late_would_pass(now - 30_000), "the sink took one: room for one");
        drop(second);
        assert!(!aggregation.late_full());
    }

    #[test]
    fn counts_the_flushes_a_full_queue_refused() {
        let telemetry = Arc::new(SinkTelemetry::new("slow", EtsyStatus::None, 0));
        let (sender, _receiver) = mpsc::channel(2);
        let flusher = Flusher {
            aggregation: Arc::new(Aggregation::new(AggConfig::default())),
            sinks: Arc::new(Outlets(std::sync::Mutex::new(vec![(telemetry.clone(), sender)]))),
            global: None,
        };
        for second in 1..=5 {
            flusher.flush(second * 1000);
        }
        assert_eq!((telemetry.queued.get(), telemetry.queue_full_drops.get()), (2, 3));
    }

    /// A global lets go of what a flush carried (here its journal file) only once every sink
    /// has taken the flush: a global killed while its store still writes it reads the batch
    /// again at its restart, where it lost it before.
    #[test]
    fn what_a_flush_carried_is_let_go_of_once_the_sinks_have_it() {
        use fleet::format::{compress, BatchId, BatchWriter};
        let dir = std::env::temp_dir().join(format!("histd-flush-release-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let aggregation = Arc::new(Aggregation::new(AggConfig::default()));
        let config =
            crate::global::config::GlobalConfig { accept: true, journal_dir: Some(dir.clone()), ..Default::default() };
        let edges = Arc::new(crate::telemetry::EdgeCounters::default());
        let global = Arc::new(crate::global::Global::new(config, aggregation.clone(), edges).unwrap());
        let now_ms = crate::clock::unix_now_ms();
        let mut batch = BatchWriter::new(BatchId {
            source: "web-1".into(),
            interval_start_ms: now_ms - 1_000,
            interval_ms: 1_000,
            part: "p".into(),
            chunk: 0,
        });
        batch.counter("hits", 1.0);
        global.receive(&compress(&batch.finish()), "").unwrap();
        let journaled = || std::fs::read_dir(&dir).unwrap().count();
        assert_eq!(journaled(), 1);
        let telemetry = Arc::new(SinkTelemetry::new("store", EtsyStatus::None, 0));
        let (sender, mut receiver) = mpsc::channel(2);
        let flusher = Flusher {
            aggregation,
            sinks: Arc::new(Outlets(std::sync::Mutex::new(vec![(telemetry, sender)]))),
            global: Some(global),
        };
        flusher.flush(now_ms);
        let taken = receiver.try_recv().expect("the flush queued to the sink");
        assert_eq!(journaled(), 1, "kept while a sink holds the flush");
        drop(taken);
        assert_eq!(journaled(), 0, "let go of once every sink has it");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
