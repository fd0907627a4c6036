//! The `global` section: what a histd accepting other histd's forwarded intervals does with
//! them (over HTTP, or from a Kafka topic), and who the other members of its group are.

use std::path::PathBuf;

use fleet::kafka::ConsumerSettings;
use serde_json::{json, Value};

use crate::config_reader::keys::{histd, KeyDoc};
use crate::config_reader::{ConfigError, Reader};
use crate::http_client::HttpUrl;

/// The default `global.maxBatchBytes`: 64 MiB decompressed (a local cuts its parts at 8 MiB).
pub const DEFAULT_MAX_BATCH_BYTES: usize = 64 * 1024 * 1024;
/// The default `global.batchWaitMs`: how long past its interval's end a batch may come and
/// still be in the flush it belongs to.
pub const DEFAULT_BATCH_WAIT_MS: u64 = 2_000;

/// The default `global.maxLateIntervals`.
pub const DEFAULT_MAX_LATE_INTERVALS: usize = 16;

/// The default `global.maxBytesInFlight`: 512 MiB of bodies, their decompressed batches and
/// what those decode to, across every forwarded request at once.
pub const DEFAULT_MAX_BYTES_IN_FLIGHT: usize = 512 * 1024 * 1024;
/// The default `global.dedupBytes`: 32 MiB of remembered batch identities.
pub const DEFAULT_DEDUP_BYTES: usize = 32 * 1024 * 1024;
/// The default `global.dedupBatches`.
pub const DEFAULT_DEDUP_BATCHES: usize = 100_000;

/// What a global histd does with forwarded batches.
#[derive(Debug, Clone, PartialEq)]
pub struct GlobalConfig {
    /// `global.accept` (false): `POST /api/v1/forward` merges batches from local histd
    /// (refused with 403 otherwise).
    pub accept: bool,
    /// `global.tagSource` (none): a tag name; each forwarded series gets the tag
    /// `<name>=<source>`, so hosts stay apart instead of merging.
    pub tag_source: Option<String>,
    /// `global.dedupBatches` (100000): batch identities remembered so that a batch sent twice
    /// (a retry, a spool replayed after a crash) merges once; the oldest are forgotten first
    /// (`forward_ids_forgotten`).
    pub dedup_batches: usize,
    /// `global.dedupBytes` (32 MiB): the memory those identities may take; past it the oldest
    /// are forgotten too.
    pub dedup_bytes: usize,
    /// `global.maxBatchBytes` (64 MiB): the largest batch accepted, decompressed, and the most
    /// memory its entries may take once decoded.
    pub max_batch_bytes: usize,
    /// `global.maxBytesInFlight` (512 MiB): bodies, decompressed batches and decoded entries
    /// of every forwarded request at once; past it a request is answered 503 with
    /// `Retry-After` (the local keeps its batch and tries again).
    pub max_bytes_in_flight: usize,
    /// `global.journalDir` (none): batches are written here before they are acknowledged and
    /// removed once a flush carried them, so a global killed in between loses nothing.
    pub journal_dir: Option<PathBuf>,
    /// `global.kafka` (none): consume the batches locals produce to a Kafka topic, as a member
    /// of a consumer group.
    pub kafka: Option<ConsumerSettings>,
    /// `global.batchWaitMs` (2000): a batch whose interval ends at `e` belongs to this
    /// global's flush at the first grid point at or after `e` + this wait (see placement.rs);
    /// one that comes after that flush is late, flushed in an interval of its own.
    pub batch_wait_ms: u64,
    /// `global.peers` (none): the query URLs of the other members of this global's group;
    /// the histogram, heatmap and series routes asked of this global are answered for the
    /// whole group (global/peers.rs).
    pub peers: Vec<HttpUrl>,
    /// `global.peerTokenFile` (none): a read token of the peers, sent to them.
    pub peer_token_file: Option<PathBuf>,
    /// `global.peerCaFile` (none: the system's roots): CA certificates `https://` peers are
    /// checked against, besides the system's.
    pub peer_ca_file: Option<PathBuf>,
    /// `global.maxLateIntervals` (16): late intervals held or in the backends' hands at once;
    /// filling it sends those held at once; a batch that would start one more is answered 503
    /// with `Retry-After` (HTTP, counted in `forward_batches_busy`); a Kafka global pauses
    /// fetching.
    pub max_late_intervals: usize,
}

impl Default for GlobalConfig {
    fn default() -> Self {
        GlobalConfig {
            accept: false,
            tag_source: None,
            dedup_batches: DEFAULT_DEDUP_BATCHES,
            dedup_bytes: DEFAULT_DEDUP_BYTES,
            max_batch_bytes: DEFAULT_MAX_BATCH_BYTES,
            max_bytes_in_flight: DEFAULT_MAX_BYTES_IN_FLIGHT,
            journal_dir: None,
            kafka: None,
            batch_wait_ms: DEFAULT_BATCH_WAIT_MS,
            max_late_intervals: DEFAULT_MAX_LATE_INTERVALS,
            peers: Vec::new(),
            peer_token_file: None,
            peer_ca_file: None,
        }
    }
}

impl GlobalConfig {
    /// The settings as `histd check-config` prints them.
    pub fn effective(&self) -> Value {
        json!({
            "accept": self.accept, "tagSource": self.tag_source,
            "dedupBatches": self.dedup_batches, "dedupBytes": self.dedup_bytes,
            "maxBatchBytes": self.max_batch_bytes, "maxBytesInFlight": self.max_bytes_in_flight,
            "journalDir": self.journal_dir,
            "batchWaitMs": self.batch_wait_ms, "maxLateIntervals": self.max_late_intervals,
            "kafka": self.kafka.as_ref().map(ConsumerSettings::effective),
            "peers": self.peers.iter().map(|url| format!("{}://{}{}", url.scheme(), url.authority(), url.path)).collect::<Vec<_>>(),
            "peerTokenFile": self.peer_token_file, "peerCaFile": self.peer_ca_file,
        })
    }
}

/// Reads `global.*`.
pub fn global(top: &Reader<'_>) -> Result<GlobalConfig, ConfigError> {
    let section = top.object("global")?;
    let defaults = GlobalConfig::default();
    let tag_source = section.string("tagSource")?;
    if let Some(tag) = &tag_source {
        let valid = !tag.is_empty() && tag.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !valid {
            return Err(section.error("tagSource", format!("'{tag}' is not a tag name ([A-Za-z0-9_-]+)")));
        }
    }
    let max_batch_bytes = section.whole("maxBatchBytes", defaults.max_batch_bytes as u64, 1024)? as usize;
    let max_bytes_in_flight = section.whole("maxBytesInFlight", defaults.max_bytes_in_flight as u64, 1024)? as usize;
    if max_bytes_in_flight < 3 * max_batch_bytes {
        let why = format!(
            "{max_bytes_in_flight} cannot hold one batch of global.maxBatchBytes ({max_batch_bytes}): a request holds its body, \
             the batch decompressed and what it decodes to, so give at least 3 × maxBatchBytes"
        );
        return Err(section.error("maxBytesInFlight", why));
    }
    Ok(GlobalConfig {
        accept: section.bool("accept", defaults.accept)?,
        tag_source,
        dedup_batches: section.whole("dedupBatches", defaults.dedup_batches as u64, 1)? as usize,
        dedup_bytes: section.whole("dedupBytes", defaults.dedup_bytes as u64, 4096)? as usize,
        max_batch_bytes,
        max_bytes_in_flight,
        journal_dir: section.string("journalDir")?.map(PathBuf::from),
        batch_wait_ms: section.whole("batchWaitMs", defaults.batch_wait_ms, 0)?,
        max_late_intervals: section.whole("maxLateIntervals", defaults.max_late_intervals as u64, 1)? as usize,
        kafka: match section.raw("kafka") {
            None => None,
            Some(_) => Some(crate::kafka_config::consumer(&section.object("kafka")?)?),
        },
        peers: peers(&section)?,
        peer_token_file: section.string("peerTokenFile")?.map(PathBuf::from),
        peer_ca_file: section.string("peerCaFile")?.map(PathBuf::from),
    })
}

/// Reads `global.peers`: `http://` or `https://` URLs of the other members' HTTP ports.
fn peers(section: &Reader<'_>) -> Result<Vec<HttpUrl>, ConfigError> {
    let mut peers = Vec::new();
    for (index, peer) in section.array("peers")?.iter().enumerate() {
        let key = format!("peers[{index}]");
        let text = peer.as_str().ok_or_else(|| section.error(&key, format!("expected a URL, got {peer}")))?;
        let mut url = HttpUrl::parse(text).map_err(|why| section.error(&key, why))?;
        url.path = url.path.trim_end_matches('/').to_string();
        peers.push(url);
    }
    Ok(peers)
}

/// Its keys, for README's table (`config/keys.rs`; the global's `accept`, `dedup*`, `journalDir`
/// and batch limits are listed with the keys no backend owns).
pub const KEYS: &[KeyDoc] = &[
    histd(&["global.kafka.signingKeys"], "none", "a file of `SOURCE KEY` lines (each local's `forward.source` and the key in its `signingKeyFile`); when given, a batch is merged only when signed with the key of the source it names, and identities are remembered per source, so a producer without a local's key can neither forge its batches nor claim their identities first (refused: `messages.forward_refused_signatures`). Read at start"),
    histd(&["global.peers"], "none", "the query URLs of the other globals of this one's group (`[\"https://global2:8127\"]`): a query, histogram, heatmap or series list asked of this global is answered for the whole group, each peer asked in parallel within 5 s and the answers merged exactly (counts and sums added, histograms bin for bin, min and max combined, series listed once); a query of the query language merges each step's rows across members before its function is applied (a gauge's `value` and a set's `cardinality` are this global's alone, marked partial); every such answer carries `partial` and `members` (each peer's URL, whether it answered and why not): a peer down makes answers partial, never wrong. Read at start"),
    histd(&["global.peerTokenFile"], "none", "a file holding a read token of the peers (`http.tokens.read` there), sent to them"),
    histd(&["global.peerCaFile"], "none (the system's roots)", "a PEM file of CA certificates `https://` peers are checked against, besides the system's roots"),
    histd(&["global.kafka.group"], "`histd-global`", "the consumer group: the globals of one datacenter share one and split the partitions; every group receives every batch. Offsets are committed once every backend has taken the flush that carried their batches (the store wrote it, forward spooled it, ...)"),
    histd(&["global.kafka.sessionTimeoutMs"], "45000", "how long a silent global keeps its partitions before the group gives them to the others (a global stopped with SIGTERM leaves at once). Keep it above the brokers' failover (their `broker.session.timeout.ms`, 9 s, and the election after it): a group whose coordinator fails over for longer loses its members' sessions, and batches flushed meanwhile are read again by the next owners"),
    histd(&["global.kafka.instanceId"], "the one kept in the data directory", "this global's static membership of its group (Kafka's `group.instance.id`): restarted within `sessionTimeoutMs`, it is given its own partitions back at once and the others never stop (without one, the group waits `sessionTimeoutMs` for the old member). Unique in the group. When not given, a global with the store makes one at its first start and keeps it in `store.dataDir` (`kafka-instance-id`), as with `global.journalDir`; a global with neither has none (dynamic membership, logged at start)"),
    histd(&["global.kafka.skipUnreadableAfterMs"], "120000", "how long a partition may stay stopped at a record batch the Kafka client cannot read (damaged, or past its size limits) before that record is read past: counted in `forward_batches_unreadable`, logged with topic, partition and offset, named in `/health`; meanwhile the partition is held there and `/health` says degraded. 0: never skip (a person decides). A batch in a codec this histd lacks is never skipped: a newer histd may read it. At least 20000, well past a broker's failover"),
];
