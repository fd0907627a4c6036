//! Shards: one table per reader, registered so the flusher can take them all.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use agg::{Aggregator, ReaderMap, Table};

/// A reader's table. Only its reader inserts; the flusher takes it once per flush, so the lock
/// is uncontended but for that moment.
#[derive(Debug)]
pub struct Shard {
    table: Mutex<Table>,
    /// The flusher's map from this reader's counter ids to the aggregator's; only the flusher
    /// touches it (under the aggregator's lock).
    counter_map: Mutex<ReaderMap>,
    closed: AtomicBool,
}

impl Shard {
    /// Aggregates one packet received at `now_unix_s`.
    pub fn insert_packet(&self, now_unix_s: u64, packet: &[u8]) {
        lock(&self.table).insert_packet(now_unix_s, packet);
    }

    /// Runs `work` on the table under one lock (a whole receive batch).
    pub fn with_table(&self, work: impl FnOnce(&mut agg::Table)) {
        work(&mut lock(&self.table));
    }

    /// Marks the reader gone: the flusher takes the table one last time and forgets the shard.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
    }
}

/// Every live reader's shard.
#[derive(Debug)]
pub struct Shards {
    list: Mutex<Vec<Arc<Shard>>>,
    sanitize: bool,
    timer_sample_limit: usize,
}

impl Shards {
    /// No shards yet; tables apply `keyNameSanitize` when `sanitize` and keep at most
    /// `timer_sample_limit` raw values per timer.
    pub fn new(sanitize: bool, timer_sample_limit: usize) -> Self {
        Shards { list: Mutex::new(Vec::new()), sanitize, timer_sample_limit }
    }

    /// A new shard for a new reader.
    pub fn register(&self) -> Arc<Shard> {
        let shard = Arc::new(Shard {
            table: Mutex::new(Table::new(self.sanitize, self.timer_sample_limit)),
            counter_map: Mutex::new(ReaderMap::default()),
            closed: AtomicBool::new(false),
        });
        lock(&self.list).push(shard.clone());
        shard
    }

    /// Moves every shard's interval into `aggregator` (the lock on each table is held only to
    /// swap it out), and forgets closed shards.
    pub fn drain_into(&self, aggregator: &mut Aggregator) {
        let mut list = lock(&self.list);
        list.retain(|shard| {
            // Read `closed` first: a reader closes after its last insert.
            let closed = shard.closed.load(Ordering::Acquire);
            let taken = lock(&shard.table).take(closed);
            aggregator.absorb_taken(&mut lock(&shard.counter_map), taken);
            !closed
        });
    }
}

/// Locks, ignoring poisoning: a table is plain data, valid even if a holder panicked.
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
