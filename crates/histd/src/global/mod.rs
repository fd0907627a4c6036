//! The global tier: batches forwarded by local histd (the `forward` backend) are merged into
//! this histd's own aggregation, each into the flush of the interval it belongs to
//! (placement.rs: late ones into a late interval of their own), so its backends, store,
//! `/metrics`, web page and query API show the fleet's series. `POST /api/v1/forward`
//! (http/forward.rs) hands bodies here.
//!
//! Each batch identity (source, interval start, part, chunk) is merged once per credential
//! that sent it (the name of the `write` token, or none on an open port): a copy (a retry
//! whose answer was lost, a spool replayed after the local crashed) is acknowledged and
//! skipped, and a batch sent with another local's credential cannot claim the identity of
//! this one's. The last `global.dedupBatches` identities (at most `global.dedupBytes` of them)
//! are remembered, the oldest forgotten first (`forward_ids_forgotten` counts them).
//!
//! A batch is screened as a statsd line is (screen.rs: keys cleaned, values that are not
//! finite, gauges stamped in the future and unbelievable intervals refused and counted), and
//! every request reserves what it will hold (its body, the batch decompressed, what that
//! decodes to) in one budget across requests (`global.maxBytesInFlight`, [`InFlight`]). With `global.journalDir` (`fleet::journal`) every
//! batch is written there before it is acknowledged and kept until a flush carried it, so a
//! global killed in between loses nothing; without it, a killed global loses what it merged
//! since its last flush, and forgets the identities it had seen.

pub mod config;
pub mod kafka;
pub mod live_merge;
pub mod peers;
pub mod rejoin;
pub mod screen;
pub mod standing;
pub mod unreadable;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use hashbrown::HashSet;

use crate::aggregation::{Aggregation, Receipt};
use crate::placement::Place;
use crate::telemetry::EdgeCounters;
use config::GlobalConfig;
use fleet::format::{self, BatchId, Checked, FormatError};
use fleet::signing::{SourceKeys, Unproven};

pub use fleet::journal::{self, Journal};

/// How many times its decompressed size a batch's entries may take in memory, as the reader
/// counts them (each entry's slot, a long key's bytes, a set member's bytes and place): an
/// empty set member is one byte on the wire and 24 in memory, the most of any entry (a counter
/// with a short key: 10 and 32). `global.maxBytesInFlight` reserves this (within
/// `global.maxBatchBytes`) for every request before it is read (probe P12: twice the size was
/// reserved where requests held about three times it).
pub const DECODED_PER_BYTE: usize = 24;

/// What a global does with forwarded batches.
#[derive(Debug)]
pub struct Global {
    config: GlobalConfig,
    aggregation: Arc<Aggregation>,
    edges: Arc<EdgeCounters>,
    seen: Mutex<SeenBatches>,
    journal: Option<Arc<Journal>>,
    in_flight: Arc<InFlight>,
    /// With `global.kafka`, what commits the offsets of what each flush carried.
    log: Mutex<Option<kafka::Committer>>,
    /// With `global.kafka`, the record batches the client could not decode.
    unreadable: Mutex<UnreadableReport>,
    /// With `global.kafka`, where this global stands in its topic (standing.rs).
    standing: Mutex<Option<standing::KafkaStanding>>,
    /// `global.peers`: the other members of its group (peers.rs).
    peers: Option<Arc<peers::Peers>>,
    /// The buffer the last batch was decompressed into, for the next.
    spare_buffer: SpareBuffer,
}

/// The buffer the last batch was decompressed into, kept for the next (a fresh one a batch is
/// pages the kernel clears each time). While it waits, its capacity (at most
/// `global.maxBatchBytes`) counts in `global.maxBytesInFlight`; it is let go of when the
/// budget has no room for it.
#[derive(Debug, Default)]
struct SpareBuffer {
    kept: Mutex<Option<(Vec<u8>, Reservation)>>,
}

impl SpareBuffer {
    /// The kept buffer, its reservation given back (the batch decompressed into it is its
    /// request's to reserve), or an empty one.
    fn take(&self) -> Vec<u8> {
        crate::clock::lock(&self.kept).take().map(|(buffer, _)| buffer).unwrap_or_default()
    }

    /// Keeps `buffer` for the next batch when it is larger than the one kept and `budget` has
    /// room for it; otherwise it is freed.
    fn give_back(&self, buffer: Vec<u8>, budget: &Arc<InFlight>) {
        let mut kept = crate::clock::lock(&self.kept);
        if kept.as_ref().is_some_and(|(spare, _)| spare.capacity() >= buffer.capacity()) {
            return;
        }
        if let Some(reserved) = budget.reserve(buffer.capacity()) {
            *kept = Some((buffer, reserved));
        }
    }
}

/// The Kafka record batches a global could not decode, as `/health` shows them: the
/// partitions held at one now, and the last ones skipped.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize)]
pub struct UnreadableReport {
    /// Partitions whose reading is held at a batch this histd cannot decode.
    pub held: Vec<UnreadableBatch>,
    /// The last [`SKIPPED_SHOWN`] damaged batches skipped.
    pub skipped: VecDeque<UnreadableBatch>,
}

/// How many skipped batches `/health` names.
pub const SKIPPED_SHOWN: usize = 16;

/// One record batch the Kafka client could not decode.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct UnreadableBatch {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The offset of the first record that could not be read.
    pub offset: i64,
    /// Why, for a person.
    pub reason: String,
}

/// The bytes every forwarded request holds at once, against `global.maxBytesInFlight`.
#[derive(Debug)]
pub struct InFlight {
    held: crate::telemetry::Gauge,
    limit: usize,
}

/// Bytes reserved in [`InFlight`], given back when dropped.
#[derive(Debug)]
pub struct Reservation {
    budget: Arc<InFlight>,
    bytes: u64,
}

impl InFlight {
    /// Reserves `bytes`; `None` when that would pass the limit.
    pub fn reserve(self: &Arc<Self>, bytes: usize) -> Option<Reservation> {
        let bytes = bytes as u64;
        self.held.try_add(bytes, self.limit as u64).then(|| Reservation { budget: self.clone(), bytes })
    }
}

impl Reservation {
    /// Reserves `more` bytes on top of these; `false` (nothing changed) past the limit.
    pub fn grow(&mut self, more: usize) -> bool {
        let more = more as u64;
        let grown = self.budget.held.try_add(more, self.budget.limit as u64);
        if grown {
            self.bytes += more;
        }
        grown
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget.held.sub(self.bytes);
    }
}

/// Why a batch was not taken.
#[derive(Debug)]
pub enum Refusal {
    /// The body is not a batch (HTTP 400).
    Malformed(FormatError),
    /// It could not be journaled (HTTP 503: the local keeps it and tries again).
    Journal(std::io::Error),
    /// Its interval is not a time this histd believes (HTTP 400).
    Interval(String),
    /// It is late and `global.maxLateIntervals` late intervals are held or in the sinks'
    /// hands (HTTP 503 with `Retry-After`: there is room once a sink has taken one).
    LateIntervalsHeld(usize),
    /// Read from Kafka with `global.kafka.signingKeys`, it does not prove its source.
    Unproven(Unproven),
}

/// What a batch read from Kafka is checked with: the sources' keys
/// (`global.kafka.signingKeys`) and the message's `histd-signature` header.
#[derive(Debug, Clone, Copy)]
pub struct Proof<'a> {
    /// The keys by source.
    pub keys: &'a SourceKeys,
    /// The signature the message carried.
    pub signature: Option<&'a [u8]>,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Malformed(error) => write!(f, "{error}"),
            Refusal::Journal(error) => write!(f, "cannot write to global.journalDir: {error}"),
            Refusal::Interval(why) => write!(f, "{why}"),
            Refusal::LateIntervalsHeld(max) => write!(
                f,
                "busy: {max} late intervals (global.maxLateIntervals) wait for the backends to take them; send it again shortly"
            ),
            Refusal::Unproven(why) => write!(f, "{why}"),
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
        let seen = Mutex::new(SeenBatches::new(config.dedup_batches, config.dedup_bytes));
        let in_flight = Arc::new(InFlight { held: Default::default(), limit: config.max_bytes_in_flight });
        let (journal, left) = match &config.journal_dir {
            None => (None, Vec::new()),
            Some(dir) => {
                let (journal, left, damaged) = Journal::open(dir.clone())
                    .map_err(|error| anyhow::anyhow!("global.journalDir {}: {error}", dir.display()))?;
                edges.journal_corrupt_batches.add(damaged);
                (Some(Arc::new(journal)), left)
            }
        };
        let peers = peers::Peers::of(&config).map_err(|why| anyhow::anyhow!(why))?.map(Arc::new);
        let global = Global {
            config,
            aggregation,
            edges,
            seen,
            journal,
            in_flight,
            log: Default::default(),
            unreadable: Default::default(),
            standing: Default::default(),
            peers,
            spare_buffer: SpareBuffer::default(),
        };
        global.replay(left);
        Ok(global)
    }

    /// Every sink has taken a flush that carried what `receipts` name (the flusher's
    /// [`agg::Released`] hook): their journal files go, their Kafka offsets are
    /// committed.
    pub fn carried(&self, receipts: &[Receipt]) {
        if let Some(journal) = &self.journal {
            let files: Vec<u64> = receipts
                .iter()
                .filter_map(|receipt| match receipt {
                    Receipt::Journal(sequence) => Some(*sequence),
                    Receipt::Log { .. } => None,
                })
                .collect();
            journal.remove(&files);
        }
        if let Some(log) = crate::clock::lock(&self.log).as_ref() {
            log.note_carried(receipts);
        }
    }

    /// At the stop, after the final flush: commits what Kafka gave and leaves the group.
    pub async fn leave_log(&self) {
        let Some(log) = crate::clock::lock(&self.log).take() else { return };
        let leaving = tokio::task::spawn_blocking(move || log.leave());
        if tokio::time::timeout(std::time::Duration::from_secs(10), leaving).await.is_err() {
            tracing::warn!("global.kafka: leaving the consumer group took over 10 s: the group takes the partitions after global.kafka.sessionTimeoutMs");
        }
    }

    /// True while `global.maxLateIntervals` late intervals are held or in the sinks' hands
    /// (the Kafka reader pauses fetching).
    pub fn late_intervals_held(&self) -> bool {
        self.aggregation.late_full()
    }

    /// The settings it was made with.
    pub fn config(&self) -> &GlobalConfig {
        &self.config
    }

    fn replay(&self, left: Vec<journal::Left>) {
        let Some(journal) = &self.journal else { return };
        let (mut merged, mut series) = (0, 0);
        for journal::Left { sequence, body, credential } in left {
            match format::decompress_checked(&body, self.config.max_batch_bytes, usize::MAX) {
                Ok(batch) => {
                    if self.remember(&credential, &batch.id) {
                        series += self.absorb(batch, Some(Receipt::Journal(sequence)));
                        merged += 1;
                    } else {
                        journal.remove(&[sequence]);
                    }
                }
                Err(error) => {
                    tracing::error!(sequence, %error, "global.journalDir: a batch cannot be read: set aside as .corrupt (journal_corrupt_batches)");
                    self.edges.journal_corrupt_batches.add(1);
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

    /// The budget every forwarded request reserves its bytes in.
    pub fn in_flight(&self) -> &Arc<InFlight> {
        &self.in_flight
    }

    /// What a body of `decompressed` bytes holds at most while it is read: the batch itself
    /// and its entries decoded, which may take [`DECODED_PER_BYTE`] times its size (bounded
    /// by `global.maxBatchBytes` too; decoding refuses a batch that would take more).
    pub fn decoding_bytes(&self, decompressed: usize) -> usize {
        let max = self.config.max_batch_bytes;
        decompressed.min(max) + format::decoded_bound(decompressed, max, DECODED_PER_BYTE)
    }

    /// Decodes a body sent with `credential` (the `write` token's name; empty on an open port)
    /// and merges it once (journaled first, with `global.journalDir`); a refused body is
    /// counted and merges nothing.
    pub fn receive(&self, body: &[u8], credential: &str) -> Result<Received, Refusal> {
        let Some(batch) = self.admit(body, credential)? else { return Ok(Received::Duplicate) };
        if self.aggregation.late_would_pass(batch.id.end_ms()) {
            crate::clock::lock(&self.seen).forget(credential, &batch.id);
            self.edges.forward_batches_busy.add(1);
            return Err(Refusal::LateIntervalsHeld(self.config.max_late_intervals));
        }
        let receipt = match &self.journal {
            None => None,
            Some(journal) => match journal.write(body, credential) {
                Ok(sequence) => Some(Receipt::Journal(sequence)),
                Err(error) => {
                    crate::clock::lock(&self.seen).forget(credential, &batch.id);
                    self.edges.forward_batches_refused.add(1);
                    return Err(Refusal::Journal(error));
                }
            },
        };
        Ok(Received::Merged(self.absorb(batch, receipt)))
    }

    /// Decodes a batch read from Kafka (the topic's message at `receipt`) and merges it
    /// once; whatever becomes of it, its offset is committed with the next flush.
    pub fn receive_logged(&self, body: &[u8], proof: Option<Proof<'_>>, receipt: Receipt) -> Result<Received, Refusal> {
        let admitted = match proof {
            None => self.admit(body, kafka::CREDENTIAL),
            // Signed batches: identities are remembered per source, which only its key holder
            // can write as.
            Some(proof) => self.admit_as(body, |batch| {
                let source = &batch.id.source;
                proof.keys.check(source, body, proof.signature).map(|()| format!("{}:{source}", kafka::CREDENTIAL))
            }),
        };
        let received = admitted.map(|batch| match batch {
            Some(batch) => Received::Merged(self.absorb(batch, Some(receipt))),
            None => Received::Duplicate,
        });
        if !matches!(received, Ok(Received::Merged(_))) {
            self.aggregation.note_receipt(receipt);
        }
        received
    }

    /// Notes a Kafka message read and not merged (its batch is in the store already): its
    /// offset is committed with the next flush.
    pub fn note_read_unmerged(&self, receipt: Receipt) {
        self.aggregation.note_receipt(receipt);
    }

    /// Notes a Kafka record skipped unread (a damaged batch) at `receipt`: its offset is
    /// committed with the flush that carries the current interval, as a merged one's is.
    pub fn skip_logged(&self, receipt: Receipt, batch: UnreadableBatch) {
        self.aggregation.note_receipt(receipt);
        let mut report = crate::clock::lock(&self.unreadable);
        if report.skipped.len() == SKIPPED_SHOWN {
            report.skipped.pop_front();
        }
        report.skipped.push_back(batch);
    }

    /// The partitions held now at a batch that cannot be decoded.
    pub fn hold_unreadable(&self, held: Vec<UnreadableBatch>) {
        self.edges.forward_partitions_held.set(held.len() as u64);
        crate::clock::lock(&self.unreadable).held = held;
    }

    /// The Kafka batches that could not be decoded: held partitions and the last skipped.
    pub fn unreadable(&self) -> UnreadableReport {
        crate::clock::lock(&self.unreadable).clone()
    }

    /// The other members of its group (`global.peers`), if any.
    pub fn peers(&self) -> Option<Arc<peers::Peers>> {
        self.peers.clone()
    }

    /// Notes where this global stands in its Kafka topic, for `/health`.
    pub fn show_standing(&self, standing: standing::KafkaStanding) {
        *crate::clock::lock(&self.standing) = Some(standing);
    }

    /// Where this global stands in its Kafka topic (none without `global.kafka`, or before
    /// the first look).
    pub fn standing(&self) -> Option<standing::KafkaStanding> {
        crate::clock::lock(&self.standing).clone()
    }

    /// Decompresses and checks a batch sent with `credential` and remembers its identity;
    /// `None` when that identity was merged before. A refusal is counted.
    fn admit(&self, body: &[u8], credential: &str) -> Result<Option<Checked<'static>>, Refusal> {
        self.admit_as(body, |_| Ok(credential.to_string()))
    }

    /// As [`Global::admit`], the credential found from the batch (its proof checked): a batch
    /// without one is refused and counted.
    fn admit_as(
        &self,
        body: &[u8],
        credential: impl FnOnce(&Checked<'static>) -> Result<String, Unproven>,
    ) -> Result<Option<Checked<'static>>, Refusal> {
        let buffer = self.spare_buffer.take();
        let decoded = format::decompress_checked_into(body, self.config.max_batch_bytes, DECODED_PER_BYTE, buffer);
        let batch = decoded.map_err(|(error, buffer)| {
            self.give_back(buffer);
            self.edges.forward_batches_refused.add(1);
            Refusal::Malformed(error)
        })?;
        if let Err(why) = screen::check_interval(&batch.id, crate::clock::unix_now_s()) {
            self.edges.forward_batches_refused.add(1);
            self.edges.forward_refused_intervals.add(1);
            return Err(Refusal::Interval(why));
        }
        let credential = credential(&batch).map_err(|why| {
            self.edges.forward_batches_refused.add(1);
            self.edges.forward_refused_signatures.add(1);
            Refusal::Unproven(why)
        })?;
        if !self.remember(&credential, &batch.id) {
            self.edges.forward_batches_duplicate.add(1);
            self.give_back(batch.into_buffer());
            return Ok(None);
        }
        Ok(Some(batch))
    }

    /// Keeps a batch's decompression buffer for the next one ([`SpareBuffer`]).
    fn give_back(&self, buffer: Vec<u8>) {
        self.spare_buffer.give_back(buffer, &self.in_flight);
    }

    fn count_screened(&self, screened: screen::Screened) {
        let edges = &self.edges;
        edges.forward_keys_sanitized.add(screened.keys_sanitized);
        edges.forward_refused_empty_keys.add(screened.empty_keys);
        edges.forward_refused_non_finite.add(screened.non_finite);
        edges.forward_refused_future_gauges.add(screened.future_gauges);
    }

    /// Remembers a batch identity sent with `credential`: false when it was merged before.
    fn remember(&self, credential: &str, id: &BatchId) -> bool {
        let inserted = crate::clock::lock(&self.seen).insert(credential, id);
        if let Some(forgotten) = inserted {
            self.edges.forward_ids_forgotten.add(forgotten);
        }
        inserted.is_some()
    }

    /// Merges a checked batch (from where `receipt` says) into the flush it belongs to, its
    /// series screened on the way ([`screen::Screening`]); the series merged.
    fn absorb(&self, batch: Checked<'static>, receipt: Option<Receipt>) -> usize {
        let tag = self.config.tag_source.as_deref().map(|tag| screen::SourceTag::new(tag, &batch.id.source));
        let now_unix_s = crate::clock::unix_now_s();
        let (place, (screened, series)) = self.aggregation.absorb_forwarded_with(batch.id.end_ms(), receipt, |into| {
            let mut screening = screen::Screening::new(into, now_unix_s, tag.as_ref());
            batch.read_into(&mut screening);
            screening.finish()
        });
        self.give_back(batch.into_buffer());
        self.count_screened(screened);
        if matches!(place, Place::Late(_)) {
            self.edges.forward_batches_late.add(1);
        }
        self.edges.forward_batches_merged.add(1);
        self.edges.forward_series_merged.add(series as u64);
        series
    }
}

/// A batch identity as remembered: the credential that sent it, then the batch's identity.
type Seen = Arc<(String, BatchId)>;

/// Batch identities merged, oldest first, bounded in number and in bytes.
#[derive(Debug)]
struct SeenBatches {
    set: HashSet<Seen>,
    order: VecDeque<Seen>,
    limit: usize,
    bytes: usize,
    max_bytes: usize,
}

impl SeenBatches {
    fn new(limit: usize, max_bytes: usize) -> Self {
        SeenBatches { set: HashSet::new(), order: VecDeque::new(), limit: limit.max(1), bytes: 0, max_bytes }
    }

    /// The memory one remembered identity takes: its names, the entry and its two slots.
    fn cost(seen: &(String, BatchId)) -> usize {
        seen.0.len() + seen.1.source.len() + seen.1.part.len() + 160
    }

    /// Remembers `id` sent with `credential`: `None` when it was remembered already, else how
    /// many older identities were forgotten to make room.
    fn insert(&mut self, credential: &str, id: &BatchId) -> Option<u64> {
        let seen: Seen = Arc::new((credential.to_string(), id.clone()));
        if self.set.contains(&seen) {
            return None;
        }
        let cost = Self::cost(&seen);
        let mut forgotten = 0;
        while self.order.len() >= self.limit || (self.bytes + cost > self.max_bytes && !self.order.is_empty()) {
            if let Some(oldest) = self.order.pop_front() {
                self.bytes -= Self::cost(&oldest);
                self.set.remove(&oldest);
                forgotten += 1;
            }
        }
        self.bytes += cost;
        self.set.insert(seen.clone());
        self.order.push_back(seen);
        Some(forgotten)
    }

    /// Forgets the newest identity again (it could not be journaled, so it was not merged).
    fn forget(&mut self, credential: &str, id: &BatchId) {
        let seen = (credential.to_string(), id.clone());
        if self.set.remove(&seen) {
            self.bytes -= Self::cost(&seen);
            if let Some(at) = self.order.iter().rposition(|held| **held == seen) {
                self.order.remove(at);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(source: &str, start: u64, part: &str) -> BatchId {
        BatchId { source: source.into(), interval_start_ms: start, interval_ms: 10_000, part: part.into(), chunk: 0 }
    }

    #[test]
    fn an_identity_is_merged_once_and_the_oldest_are_forgotten_first() {
        let mut seen = SeenBatches::new(2, usize::MAX);
        assert_eq!(seen.insert("", &id("a", 0, "n1")), Some(0));
        assert_eq!(seen.insert("", &id("a", 0, "n1")), None);
        assert_eq!(seen.insert("", &id("a", 0, "n2")), Some(0), "another part of the same interval");
        assert_eq!(seen.insert("", &id("b", 0, "n1")), Some(1));
        assert_eq!(seen.insert("", &id("a", 0, "n1")), Some(1), "forgotten, so merged again");
    }

    #[test]
    fn identities_are_per_credential_and_bounded_in_bytes() {
        let mut seen = SeenBatches::new(1000, 3 * (160 + 8));
        assert_eq!(seen.insert("web-2", &id("web-1", 0, "n1")), Some(0), "a forgery under another credential");
        assert_eq!(seen.insert("web-1", &id("web-1", 0, "n1")), Some(0), "does not displace the real batch");
        assert_eq!(seen.insert("web-1", &id("web-1", 0, "n1")), None);
        assert_eq!(seen.insert("web-1", &id("web-1", 10, "n1")), Some(1), "past the bytes, the oldest goes");
        let long = "x".repeat(1000);
        assert_eq!(seen.insert("web-1", &id(&long, 0, "n1")), Some(2), "one large identity pushes out what it must");
        assert!(seen.bytes <= 3 * (160 + 8) || seen.order.len() == 1, "{} bytes", seen.bytes);
        seen.forget("web-1", &id(&long, 0, "n1"));
        assert_eq!((seen.bytes, seen.order.len()), (0, 0));
    }

    /// The spare decompression buffer counts in `global.maxBytesInFlight` while it waits, is
    /// not kept past the budget, and gives its bytes back when taken.
    #[test]
    fn the_spare_buffer_counts_in_the_bytes_in_flight() {
        let budget = Arc::new(InFlight { held: Default::default(), limit: 1000 });
        let spare = SpareBuffer::default();
        spare.give_back(Vec::with_capacity(600), &budget);
        assert_eq!(budget.held.get(), 600, "kept, and counted");
        spare.give_back(Vec::with_capacity(100), &budget);
        assert_eq!(budget.held.get(), 600, "a smaller buffer does not replace it");
        spare.give_back(Vec::with_capacity(700), &budget);
        assert_eq!(budget.held.get(), 600, "no room beside it: freed, the first kept");
        let request = budget.reserve(300).expect("room for a request");
        assert_eq!(spare.take().capacity(), 600);
        assert_eq!(budget.held.get(), 300, "taken: only the request's reservation is held");
        assert_eq!(spare.take().capacity(), 0, "nothing kept now");
        spare.give_back(Vec::with_capacity(800), &budget);
        assert_eq!(budget.held.get(), 300, "past the budget with the request's bytes: not kept");
        drop(request);
        spare.give_back(Vec::with_capacity(800), &budget);
        assert_eq!((budget.held.get(), spare.take().capacity(), budget.held.get()), (800, 800, 0));
    }
}
