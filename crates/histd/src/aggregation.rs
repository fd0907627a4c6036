//! The state every flush, management dump and health check reads: the aggregator and the
//! flusher's per-reader maps behind one lock, brought up to date by taking every reader's
//! table first. [`Aggregation::current`] is the one way in.

use std::collections::HashMap;
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex, MutexGuard};

use agg::{AggConfig, Aggregator, Mergeable, ReaderMap, Snapshot};

use crate::clock::lock;
use crate::ingest::Shards;
use crate::placement::{Destination, Flushed, Grid, Place, Placement};
use crate::telemetry::{Counter, Gauge};

pub use crate::placement::Receipt;

/// The readers' shards and what their intervals are gathered into.
#[derive(Debug)]
pub struct Aggregation {
    /// The readers' tables.
    pub shards: Arc<Shards>,
    /// Flushes done so far.
    pub flushes: Counter,
    /// How long the last flush took to derive its snapshot, in microseconds.
    pub last_flush_us: Gauge,
    /// Unix milliseconds of the last flush (0 before the first): where the current interval
    /// began.
    pub last_flush_unix_ms: Gauge,
    gathered: Mutex<Gathered>,
    /// Told when late intervals are due to the sinks before the next flush.
    late_due: tokio::sync::Notify,
}

/// The aggregator, and for each live reader the map from its counter ids to the
/// aggregator's (kept between takes, forgotten with the reader).
#[derive(Debug)]
pub struct Gathered {
    aggregator: Aggregator,
    reader_maps: HashMap<u64, ReaderMap>,
    /// Where the forwarded batches merged since the last flush came from, for the flush that
    /// carries them.
    receipts: Vec<Receipt>,
    /// Forwarded batches that belong to another flush than the next.
    placement: Placement,
}

impl Aggregation {
    /// No readers and an empty aggregator configured by `config`.
    pub fn new(config: AggConfig) -> Self {
        let shards = Arc::new(Shards::new(config.key_name_sanitize, config.timer_sample_limit));
        let gathered = Gathered {
            aggregator: Aggregator::new(config),
            reader_maps: HashMap::new(),
            receipts: Vec::new(),
            placement: Placement::default(),
        };
        Aggregation {
            shards,
            flushes: Counter::default(),
            last_flush_us: Gauge::default(),
            last_flush_unix_ms: Gauge::default(),
            gathered: Mutex::new(gathered),
            late_due: tokio::sync::Notify::new(),
        }
    }

    /// The aggregator with every reader's interval so far absorbed, locked.
    pub fn current(&self) -> MutexGuard<'_, Gathered> {
        let mut gathered = lock(&self.gathered);
        self.shards.take_all(|taken| gathered.absorb(taken));
        gathered
    }

    /// Absorbs the last tables of readers that are gone (closed connections) whenever
    /// `CLOSED_PILE` (ingest/shards.rs) of them wait, rather than at the next flush,
    /// until `stop`. A pile met while a flush or a reader holds the aggregator is left to it.
    pub async fn absorb_closed_until(&self, mut stop: tokio::sync::watch::Receiver<bool>) {
        loop {
            tokio::select! {
                _ = self.shards.closed_piled_up() => self.absorb_closed(),
                _ = stop.changed() => return,
            }
        }
    }

    fn absorb_closed(&self) {
        let Ok(mut gathered) = self.gathered.try_lock() else { return };
        self.shards.take_closed(|taken| gathered.absorb(taken));
    }
}

impl Aggregation {
    /// Places forwarded batches on the flush grid `grid` (a global), at most `max_late` late
    /// intervals at once (`global.maxLateIntervals`), the interval open at `now_ms` being the
    /// current one; until then every batch merges into the current one.
    pub fn set_grid(&self, grid: Grid, max_late: usize, now_ms: u64) {
        lock(&self.gathered).placement.set_grid(grid, max_late, now_ms);
    }

    /// Merges another histd's forwarded interval (which ended at `end_ms`) into the flush it
    /// belongs to, as [`Aggregation::absorb_forwarded_with`] does.
    pub fn absorb_forwarded(&self, end_ms: u64, interval: Mergeable, receipt: Option<Receipt>) -> Place {
        self.absorb_forwarded_with(end_ms, receipt, |into| into.take(interval)).0
    }

    /// Merges another histd's forwarded interval (which ended at `end_ms`), which `read` reads
    /// into where it belongs (placement.rs; the readers' tables are left to the next flush:
    /// their order does not matter to a merge), noting where it came from, if that must know
    /// when a flush carried it. Where it went, and what `read` gave.
    pub fn absorb_forwarded_with<R>(
        &self,
        end_ms: u64,
        receipt: Option<Receipt>,
        read: impl FnOnce(Destination<'_>) -> R,
    ) -> (Place, R) {
        let mut gathered = lock(&self.gathered);
        let Gathered { aggregator, receipts, placement, .. } = &mut *gathered;
        let place = placement.place(end_ms);
        let read = placement.keep(place, receipt, aggregator, receipts, read);
        if placement.late_due() {
            self.late_due.notify_one();
        }
        (place, read)
    }

    /// True when a batch that ended at `end_ms` would start a late interval past
    /// `global.maxLateIntervals`.
    pub fn late_would_pass(&self, end_ms: u64) -> bool {
        lock(&self.gathered).placement.would_pass(end_ms)
    }

    /// True while no late interval can start (`global.maxLateIntervals` held or in the
    /// sinks' hands).
    pub fn late_full(&self) -> bool {
        lock(&self.gathered).placement.late_full()
    }

    /// Resolves when late intervals are due to the sinks before the next flush
    /// ([`crate::placement::Placement::late_due`]).
    pub async fn late_due(&self) {
        self.late_due.notified().await;
    }

    /// The late intervals held, flushed now (the open interval and the batches held for later
    /// flushes stay), counted as handed to the sinks: with the counter each counts itself
    /// out of once every sink has taken it.
    pub fn take_late(&self) -> (Flushed, Arc<std::sync::atomic::AtomicUsize>) {
        let mut gathered = lock(&self.gathered);
        let Gathered { receipts, placement, .. } = &mut *gathered;
        let mut flushed = placement.take_late(receipts);
        if let Some(last) = flushed.late.last_mut() {
            last.log_positions.through = crate::placement::marks_of(&flushed.receipts);
        }
        let in_flight = placement.hand_over(flushed.late.len());
        (flushed, in_flight)
    }

    /// Notes a message that merged nothing (refused, a duplicate) for the next flush, so that
    /// its offset is committed with the others.
    pub fn note_receipt(&self, receipt: Receipt) {
        lock(&self.gathered).receipts.push(receipt);
    }
}

impl Aggregation {
    /// Sets gauges histd computes itself into the current interval (the readers' tables are
    /// left to the next flush).
    pub fn set_gauges(&self, gauges: &[(String, f64)], now_unix_s: u64) {
        let mut gathered = lock(&self.gathered);
        for (key, value) in gauges {
            gathered.aggregator.set_gauge(key, *value, now_unix_s);
        }
    }
}

impl Gathered {
    /// Absorbs a reader's interval through its map (kept for the next take while the reader
    /// lives, forgotten with it).
    fn absorb(&mut self, taken: crate::ingest::Taken) {
        let mut map = self.reader_maps.remove(&taken.shard).unwrap_or_default();
        self.aggregator.absorb_taken(&mut map, taken.interval);
        if !taken.closed {
            self.reader_maps.insert(taken.shard, map);
        }
    }

    /// Flushes the current interval at `now_ms` with the late intervals held, and opens the
    /// next with what was held for it (`last`: the final flush, which takes everything held
    /// for later flushes too).
    pub fn flush_all(&mut self, now_ms: u64, last: bool) -> (Snapshot, Flushed, Arc<std::sync::atomic::AtomicUsize>) {
        let Gathered { aggregator, receipts, placement, .. } = self;
        if last {
            placement.bring_forward(aggregator, receipts);
        }
        let mut snapshot = aggregator.flush(now_ms);
        let carried = std::mem::take(receipts);
        snapshot.log_positions.offsets = crate::placement::offsets_of(&carried);
        let flushed = placement.after_flush(now_ms, carried, aggregator, receipts);
        snapshot.log_positions.through = crate::placement::marks_of(&flushed.receipts);
        let in_flight = placement.hand_over(flushed.late.len());
        (snapshot, flushed, in_flight)
    }
}

impl Deref for Gathered {
    type Target = Aggregator;
    fn deref(&self) -> &Aggregator {
        &self.aggregator
    }
}

impl DerefMut for Gathered {
    fn deref_mut(&mut self) -> &mut Aggregator {
        &mut self.aggregator
    }
}
