//! The global tier: batches forwarded by local histd (the `forward` backend) are merged into
//! this histd's own aggregation, so its backends, store, `/metrics`, web page and query API
//! show the fleet's series. `POST /api/v1/forward` (http/forward.rs) hands bodies here.
//!
//! Each batch identity (source, interval start, part, chunk) is merged once: a copy (a retry
//! whose answer was lost, a spool replayed after the local crashed) is acknowledged and
//! skipped. The last `global.dedupBatches` identities are remembered, the oldest forgotten
//! first (`forward_ids_forgotten` counts them). With `global.journalDir` (journal.rs) every
//! batch is written there before it is acknowledged and kept until a flush carried it, so a
//! global killed in between loses nothing; without it, a killed global loses what it merged
//! since its last flush, and forgets the identities it had seen.

mod journal;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use agg::Mergeable;
use compact_str::CompactString;
use hashbrown::HashSet;

use crate::flush::Aggregation;
use crate::sinks::forward::config::GlobalConfig;
use crate::sinks::forward::format::{self, Batch, BatchId, FormatError};
use crate::telemetry::EdgeCounters;

pub use journal::Journal;

/// What a global does with forwarded batches.
#[derive(Debug)]
pub struct Global {
    config: GlobalConfig,
    aggregation: Arc<Aggregation>,
    edges: Arc<EdgeCounters>,
    seen: Mutex<SeenBatches>,
    journal: Option<Arc<Journal>>,
}

/// Why a batch was not taken.
#[derive(Debug)]
pub enum Refusal {
    /// The body is not a batch (HTTP 400).
    Malformed(FormatError),
    /// It could not be journaled (HTTP 503: the local keeps it and tries again).
    Journal(std::io::Error),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Malformed(error) => write!(f, "{error}"),
            Refusal::Journal(error) => write!(f, "cannot write to global.journalDir: {error}"),
        }
    }
}

/// How a batch was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Received {
    /// Merged: this many series.
    Merged(usize),
    /// Its identity was merged before: nothing done.
    Duplicate,
}

impl Global {
    /// Merges into `aggregation`, counting into `edges`; with `global.journalDir`, first
    /// merges the batches an earlier run acknowledged and did not flush.
    pub fn new(
        config: GlobalConfig,
        aggregation: Arc<Aggregation>,
        edges: Arc<EdgeCounters>,
    ) -> anyhow::Result<Global> {
        let seen = Mutex::new(SeenBatches::new(config.dedup_batches));
        let (journal, left) = match &config.journal_dir {
            None => (None, Vec::new()),
            Some(dir) => {
                let (journal, left) = Journal::open(dir.clone())
                    .map_err(|error| anyhow::anyhow!("global.journalDir {}: {error}", dir.display()))?;
                (Some(Arc::new(journal)), left)
            }
        };
        let global = Global { config, aggregation, edges, seen, journal };
        global.replay(left);
        Ok(global)
    }

    /// The journal, for the flusher to remove what each flush carried.
    pub fn journal(&self) -> Option<Arc<Journal>> {
        self.journal.clone()
    }

    fn replay(&self, left: Vec<journal::Left>) {
        let Some(journal) = &self.journal else { return };
        let (mut merged, mut series) = (0, 0);
        for journal::Left { sequence, body } in left {
            match format::decode(&body, self.config.max_batch_bytes) {
                Ok(batch) => {
                    if self.remember(&batch.id) {
                        series += self.absorb(batch, Some(sequence));
                        merged += 1;
                    } else {
                        journal.remove(&[sequence]);
                    }
                }
                Err(error) => {
                    tracing::error!(sequence, %error, "global.journalDir: a batch cannot be read: set aside as .corrupt");
                    journal.set_aside(sequence);
                }
            }
        }
        if merged > 0 {
            tracing::info!(
                batches = merged,
                series,
                "global: merged the batches the last run acknowledged and did not flush"
            );
        }
    }

    /// True when `global.accept` is on.
    pub fn accepts(&self) -> bool {
        self.config.accept
    }

    /// The largest body taken, compressed (a batch is never larger compressed than this,
    /// with snappy's worst case).
    pub fn max_body_bytes(&self) -> usize {
        self.config.max_batch_bytes + self.config.max_batch_bytes / 6 + 64
    }

    /// Decodes a body and merges it once (journaled first, with `global.journalDir`); a
    /// refused body is counted and merges nothing.
    pub fn receive(&self, body: &[u8]) -> Result<Received, Refusal> {
        let batch = format::decode(body, self.config.max_batch_bytes).map_err(|error| {
            self.edges.forward_batches_refused.add(1);
            Refusal::Malformed(error)
        })?;
        if !self.remember(&batch.id) {
            self.edges.forward_batches_duplicate.add(1);
            return Ok(Received::Duplicate);
        }
        let sequence = match &self.journal {
            None => None,
            Some(journal) => match journal.write(body) {
                Ok(sequence) => Some(sequence),
                Err(error) => {
                    crate::ingest::shards_lock(&self.seen).forget(&batch.id);
                    self.edges.forward_batches_refused.add(1);
                    return Err(Refusal::Journal(error));
                }
            },
        };
        Ok(Received::Merged(self.absorb(batch, sequence)))
    }

    /// Remembers a batch identity: false when it was merged before.
    fn remember(&self, id: &BatchId) -> bool {
        let inserted = crate::ingest::shards_lock(&self.seen).insert(id);
        if let Some(forgotten) = inserted {
            self.edges.forward_ids_forgotten.add(forgotten);
        }
        inserted.is_some()
    }

    /// Merges a batch (journaled as `sequence`); the series it held.
    fn absorb(&self, batch: Batch, sequence: Option<u64>) -> usize {
        let Batch { id, mut interval } = batch;
        if let Some(tag) = &self.config.tag_source {
            tag_series(&mut interval, tag, &id.source);
        }
        let series = interval.len();
        self.aggregation.absorb_mergeable(interval, sequence);
        self.edges.forward_batches_merged.add(1);
        self.edges.forward_series_merged.add(series as u64);
        series
    }
}

/// Batch identities merged, oldest first, bounded.
#[derive(Debug)]
struct SeenBatches {
    set: HashSet<BatchId>,
    order: VecDeque<BatchId>,
    limit: usize,
}

impl SeenBatches {
    fn new(limit: usize) -> Self {
        SeenBatches { set: HashSet::new(), order: VecDeque::new(), limit: limit.max(1) }
    }

    /// Remembers `id`: `None` when it was remembered already, else how many older identities
    /// were forgotten to make room.
    fn insert(&mut self, id: &BatchId) -> Option<u64> {
        if self.set.contains(id) {
            return None;
        }
        let mut forgotten = 0;
        while self.order.len() >= self.limit {
            if let Some(oldest) = self.order.pop_front() {
                self.set.remove(&oldest);
                forgotten += 1;
            }
        }
        self.set.insert(id.clone());
        self.order.push_back(id.clone());
        Some(forgotten)
    }

    /// Forgets the newest identity again (it could not be journaled, so it was not merged).
    fn forget(&mut self, id: &BatchId) {
        if self.set.remove(id) {
            if let Some(at) = self.order.iter().rposition(|seen| seen == id) {
                self.order.remove(at);
            }
        }
    }
}

/// Adds the tag `<tag>=<source>` to every series key, in sorted place as a client's tag would
/// be (at the end of a key whose parts are not all `k=v` tags: a `;` in the name).
fn tag_series(interval: &mut Mergeable, tag: &str, source: &str) {
    let mut value = String::new();
    proto::key::push_sanitized(&mut value, source.as_bytes());
    let value = value.replace([';', '='], "_");
    let retag = |key: &mut CompactString| {
        let mut tagged = String::with_capacity(key.len() + tag.len() + value.len() + 2);
        tagged.push_str(key);
        tagged.push(';');
        tagged.push_str(tag);
        tagged.push('=');
        tagged.push_str(&value);
        if key.split(';').skip(1).all(|part| part.contains('=')) {
            proto::key::sort_tags(&mut tagged);
        }
        *key = CompactString::from(tagged);
    };
    interval.counters.iter_mut().for_each(|(key, _)| retag(key));
    interval.timers.iter_mut().for_each(|(key, _)| retag(key));
    interval.gauges.iter_mut().for_each(|(key, _)| retag(key));
    interval.sets.iter_mut().for_each(|(key, _)| retag(key));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(source: &str, start: u64, part: &str) -> BatchId {
        BatchId { source: source.into(), interval_start_ms: start, interval_ms: 10_000, part: part.into(), chunk: 0 }
    }

    #[test]
    fn an_identity_is_merged_once_and_the_oldest_are_forgotten_first() {
        let mut seen = SeenBatches::new(2);
        assert_eq!(seen.insert(&id("a", 0, "n1")), Some(0));
        assert_eq!(seen.insert(&id("a", 0, "n1")), None);
        assert_eq!(seen.insert(&id("a", 0, "n2")), Some(0), "another part of the same interval");
        assert_eq!(seen.insert(&id("b", 0, "n1")), Some(1));
        assert_eq!(seen.insert(&id("a", 0, "n1")), Some(1), "forgotten, so merged again");
    }

    #[test]
    fn the_source_tag_sits_in_sorted_place() {
        let mut interval = Mergeable::default();
        for key in ["req", "req;zone=b", "req;app=x", "odd;name;x=1"] {
            interval.counters.push((key.into(), 1.0));
        }
        tag_series(&mut interval, "host", "web-1.example");
        let keys: Vec<&str> = interval.counters.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "req;host=web-1.example",
                "req;host=web-1.example;zone=b",
                "req;app=x;host=web-1.example",
                "odd;name;x=1;host=web-1.example"
            ]
        );
    }
}
