//! The state every flush, management dump and health check reads: the aggregator and the
//! flusher's per-reader maps behind one lock, brought up to date by taking every reader's
//! table first. [`Aggregation::current`] is the one way in.

use std::collections::HashMap;
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex, MutexGuard};

use agg::{AggConfig, Aggregator, ReaderMap};

use crate::clock::lock;
use crate::ingest::Shards;
use crate::telemetry::{Counter, Gauge};

/// Where a forwarded batch came from, when its source must know once a flush carried it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Receipt {
    /// The file of `global.journalDir` it was written to, removed then.
    Journal(u64),
    /// A Kafka message: its offset is committed then (`generation`: the consumer's assignment
    /// it was read under; an older one's offsets were committed when it ended).
    Log {
        /// Its partition.
        partition: i32,
        /// Its offset.
        offset: i64,
        /// The assignment it was read under.
        generation: u64,
    },
}

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
}

impl Aggregation {
    /// No readers and an empty aggregator configured by `config`.
    pub fn new(config: AggConfig) -> Self {
        let shards = Arc::new(Shards::new(config.key_name_sanitize, config.timer_sample_limit));
        let gathered =
            Gathered { aggregator: Aggregator::new(config), reader_maps: HashMap::new(), receipts: Vec::new() };
        Aggregation {
            shards,
            flushes: Counter::default(),
            last_flush_us: Gauge::default(),
            last_flush_unix_ms: Gauge::default(),
            gathered: Mutex::new(gathered),
        }
    }

    /// The aggregator with every reader's interval so far absorbed, locked.
    pub fn current(&self) -> MutexGuard<'_, Gathered> {
        let mut gathered = lock(&self.gathered);
        let Gathered { aggregator, reader_maps, .. } = &mut *gathered;
        self.shards.take_all(|taken| {
            let mut map = reader_maps.remove(&taken.shard).unwrap_or_default();
            aggregator.absorb_taken(&mut map, taken.interval);
            if !taken.closed {
                reader_maps.insert(taken.shard, map);
            }
        });
        gathered
    }
}

impl Aggregation {
    /// Merges another histd's forwarded interval into the current one (the readers' tables
    /// are left to the next flush: their order does not matter to a merge), noting where it
    /// came from, if that must know when a flush carried it.
    pub fn absorb_mergeable(&self, interval: agg::Mergeable, receipt: Option<Receipt>) {
        let mut gathered = lock(&self.gathered);
        gathered.aggregator.absorb_mergeable(interval);
        gathered.receipts.extend(receipt);
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
    /// The receipts of what was merged since the last call (the flush takes them).
    pub fn take_receipts(&mut self) -> Vec<Receipt> {
        std::mem::take(&mut self.receipts)
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
