//! A flush cut into parts, one per node that owns some of its series (split into chunks past
//! `forward.maxBatchBytes`), each a compressed batch. Pure: no I/O, no clock.

use agg::Snapshot;

use crate::format::{compress, BatchId, BatchWriter};
use crate::ring::Ring;

/// What a cut needs besides the snapshot and the ring.
#[derive(Debug, Clone)]
pub struct CutSettings {
    /// `forward.source`.
    pub source: String,
    /// `prefixStats`: histd's own metrics under it are not forwarded (the global has its own).
    pub prefix_stats: String,
    /// `forward.setMembersLimit`.
    pub set_members_limit: usize,
    /// `forward.rawValuesLimit`.
    pub raw_values_limit: usize,
    /// `forward.maxBatchBytes`.
    pub max_batch_bytes: usize,
}

/// One compressed batch and where it was cut for.
#[derive(Debug)]
pub struct Part {
    /// The interval start in its identity.
    pub interval_start_ms: u64,
    /// The index in the ring of the node that owns its series.
    pub node: usize,
    /// Series it holds.
    pub series: u64,
    /// The body to post.
    pub body: Vec<u8>,
}

/// Cuts a flush: counters with a non-zero sum, timers that received values, gauges updated in
/// the interval, sets with members; each series in the part of the node that owns its key.
/// `interval_start_ms` names the interval in the batch identities: the flush time less the
/// interval, and after `previous_start_ms` (the last cut's), so every cut has its own.
pub fn cut(snapshot: &Snapshot, settings: &CutSettings, ring: &Ring, previous_start_ms: u64) -> Vec<Part> {
    let mut parts = Parts::new(snapshot, settings, ring, previous_start_ms);
    let internal = |key: &str| agg::is_internal_key(&settings.prefix_stats, key);
    for counter in snapshot.counters.iter().filter(|c| c.count != 0.0 && !internal(c.key)) {
        parts.writer(counter.key).counter(counter.key, counter.count);
        parts.chunk_if_full();
    }
    for timer in snapshot.timers.iter().filter(|t| t.totals.received > 0) {
        parts.writer(&timer.key).timer(timer, settings.raw_values_limit);
        parts.chunk_if_full();
    }
    for gauge in snapshot.gauges.iter().filter(|g| !internal(&g.key)) {
        if let Some(updated) = gauge.updated_unix_s {
            parts.writer(&gauge.key).gauge(&gauge.key, gauge.value, updated);
            parts.chunk_if_full();
        }
    }
    for set in snapshot.sets.iter().filter(|s| s.count > 0) {
        if let Some(distinct) = &set.distinct {
            parts.writer(&set.key).set(&set.key, distinct, settings.set_members_limit);
            parts.chunk_if_full();
        }
    }
    parts.finish()
}

/// The writers being filled, one per node, and the parts done.
struct Parts<'a> {
    ring: &'a Ring,
    settings: &'a CutSettings,
    interval_start_ms: u64,
    interval_ms: u64,
    writers: Vec<Option<BatchWriter>>,
    chunks: Vec<u64>,
    current: usize,
    done: Vec<Part>,
}

impl<'a> Parts<'a> {
    fn new(snapshot: &Snapshot, settings: &'a CutSettings, ring: &'a Ring, previous_start_ms: u64) -> Self {
        let interval_ms = snapshot.interval.as_millis() as u64;
        let nodes = ring.nodes().len();
        // A late interval (this histd is a global forwarding on) keeps its own interval;
        // its chunks are numbered from when it is cut, so they never take the identity of
        // that interval's first batches, nor of another late cut of it.
        let (start_ms, first_chunk) = match snapshot.late {
            true => (snapshot.flushed_at_ms.saturating_sub(interval_ms), crate::unix_now_ms() << 16),
            false => (snapshot.flushed_at_ms.saturating_sub(interval_ms).max(previous_start_ms + 1), 0),
        };
        Parts {
            ring,
            settings,
            interval_start_ms: start_ms,
            interval_ms,
            writers: (0..nodes).map(|_| None).collect(),
            chunks: vec![first_chunk; nodes],
            current: 0,
            done: Vec::new(),
        }
    }

    /// The writer of the node owning `key` (remembered for [`Parts::chunk_if_full`]).
    fn writer(&mut self, key: &str) -> &mut BatchWriter {
        let node = self.ring.owner(key.as_bytes());
        self.current = node;
        let (ring, settings, chunk) = (self.ring, self.settings, self.chunks[node]);
        let (interval_start_ms, interval_ms) = (self.interval_start_ms, self.interval_ms);
        self.writers[node].get_or_insert_with(|| {
            BatchWriter::new(BatchId {
                source: settings.source.clone(),
                interval_start_ms,
                interval_ms,
                part: ring.nodes()[node].name.clone(),
                chunk,
            })
        })
    }

    /// Closes the last written node's batch once it reaches `maxBatchBytes`.
    fn chunk_if_full(&mut self) {
        let node = self.current;
        if self.writers[node].as_ref().is_some_and(|w| w.bytes() >= self.settings.max_batch_bytes) {
            self.close(node);
        }
    }

    fn close(&mut self, node: usize) {
        if let Some(writer) = self.writers[node].take() {
            let series = writer.series();
            let raw = writer.finish();
            self.done.push(Part { interval_start_ms: self.interval_start_ms, node, series, body: compress(&raw) });
            self.chunks[node] += 1;
        }
    }

    fn finish(mut self) -> Vec<Part> {
        for node in 0..self.writers.len() {
            self.close(node);
        }
        self.done
    }
}
