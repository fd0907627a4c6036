//! Shards: one table per reader, registered so the flusher can take them all.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::clock::lock;

use agg::{Table, TakenInterval};

/// A reader's table. Only its reader inserts; the flusher takes it once per flush, so the lock
/// is uncontended but for that moment.
#[derive(Debug)]
pub struct Shard {
    /// Unique among the shards of one [`Shards`], never reused.
    id: u64,
    table: Mutex<Table>,
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

/// Closed shards that may wait for the next flush; past this many they are absorbed at once
/// ([`Shards::closed_piled_up`]). Each holds its connection's table (a few KB), so a client
/// that opens a connection per send held one per connection until the flush: 40 MB for
/// 10,000 connections a second at a 1 s flush (issue 48).
pub const CLOSED_PILE: usize = 64;

/// Every live reader's shard.
#[derive(Debug)]
pub struct Shards {
    list: Mutex<Vec<Arc<Shard>>>,
    next_id: AtomicU64,
    sanitize: bool,
    timer_sample_limit: usize,
    /// Shards closed since they were last taken (a hint: a take resets it).
    closed_waiting: AtomicUsize,
    /// Told when [`CLOSED_PILE`] closed shards wait.
    piled_up: tokio::sync::Notify,
}

/// One reader's interval as the flusher takes it.
pub struct Taken {
    /// The reader's shard id.
    pub shard: u64,
    /// Its interval.
    pub interval: TakenInterval,
    /// The reader is gone: this was its last interval.
    pub closed: bool,
}

impl Shards {
    /// No shards yet; tables apply `keyNameSanitize` when `sanitize` and keep at most
    /// `timer_sample_limit` raw values per timer.
    pub fn new(sanitize: bool, timer_sample_limit: usize) -> Self {
        Shards {
            list: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(0),
            sanitize,
            timer_sample_limit,
            closed_waiting: AtomicUsize::new(0),
            piled_up: tokio::sync::Notify::new(),
        }
    }

    /// A new shard for a new reader.
    pub fn register(&self) -> Arc<Shard> {
        let shard = Arc::new(Shard {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            table: Mutex::new(Table::new(self.sanitize, self.timer_sample_limit)),
            closed: AtomicBool::new(false),
        });
        lock(&self.list).push(shard.clone());
        shard
    }

    /// Marks `shard`'s reader gone (a closed connection); once [`CLOSED_PILE`] such shards
    /// wait, [`Shards::closed_piled_up`] resolves.
    pub fn close(&self, shard: &Shard) {
        shard.close();
        if self.closed_waiting.fetch_add(1, Ordering::Relaxed) + 1 >= CLOSED_PILE {
            self.piled_up.notify_one();
        }
    }

    /// Resolves when [`CLOSED_PILE`] closed shards wait to be taken.
    pub async fn closed_piled_up(&self) {
        self.piled_up.notified().await;
    }

    /// Takes the last interval of every closed shard, hands it to `absorb` and forgets the
    /// shard; open shards are left to the flush.
    pub fn take_closed(&self, absorb: impl FnMut(Taken)) {
        self.take(true, absorb);
    }

    /// Takes every shard's interval (the lock on each table is held only to swap it out) and
    /// hands it to `absorb`; forgets closed shards.
    pub fn take_all(&self, absorb: impl FnMut(Taken)) {
        self.take(false, absorb);
    }

    /// Takes the interval of every shard (of the closed ones alone with `closed_only`) and
    /// forgets the closed ones.
    fn take(&self, closed_only: bool, mut absorb: impl FnMut(Taken)) {
        let mut list = lock(&self.list);
        self.closed_waiting.store(0, Ordering::Relaxed);
        list.retain(|shard| {
            // Read `closed` first: a reader closes after its last insert.
            let closed = shard.closed.load(Ordering::Acquire);
            if closed_only && !closed {
                return true;
            }
            let interval = lock(&shard.table).take(closed);
            absorb(Taken { shard: shard.id, interval, closed });
            !closed
        });
    }
}
