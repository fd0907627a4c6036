//! `forward` (a local histd sending its intervals to global ones) and `global` (a histd
//! accepting them) sections.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Value};

use crate::config_reader::keys::{histd, KeyDoc};
use crate::config_reader::{ConfigError, Reader};
use crate::http_client::HttpUrl;

use super::kafka::{ConsumerSettings, ProducerSettings};

/// Where batches are posted on a node given as `http://host:port` alone.
pub const FORWARD_PATH: &str = "/api/v1/forward";
/// The default `forward.spoolBytes`: 256 MiB.
pub const DEFAULT_SPOOL_BYTES: u64 = 256 * 1024 * 1024;
/// The default `forward.setMembersLimit`.
pub const DEFAULT_SET_MEMBERS_LIMIT: usize = 1000;
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

/// The forward backend's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct ForwardConfig {
    /// `forward.nodes` (required with the backend): the global nodes' HTTP URLs, as given
    /// (their identity in the hash), with where batches go (`/api/v1/forward` unless a path
    /// is given).
    pub nodes: Vec<(String, HttpUrl)>,
    /// `forward.source` (the host name): this histd's name in batch identities (and the
    /// source tag at a global with `global.tagSource`). Must be unique in the fleet.
    pub source: String,
    /// `forward.checkInterval` (10000 ms): how often each node's `/health` is asked.
    pub check_interval: Duration,
    /// `forward.timeoutMs` (10000): one request's deadline.
    pub timeout: Duration,
    /// `forward.redirectAfterMs` (60000): how long batches already cut for a node that went
    /// down wait for it before they go to the next node.
    pub redirect_after: Duration,
    /// `forward.spoolDir` (none: batches wait in memory): batches are written here before
    /// they are sent and removed once a node took them, so they survive a restart.
    pub spool_dir: Option<PathBuf>,
    /// `forward.spoolBytes` (256 MiB): what waits, on disk or in memory; past it the oldest
    /// batches are dropped (`forward.dropped_points.buffer_full`).
    pub spool_bytes: u64,
    /// `forward.setMembersLimit` (1000): sets with more members are forwarded as a
    /// HyperLogLog sketch (16 KiB, ~0.8% error).
    pub set_members_limit: usize,
    /// `forward.rawValuesLimit` (`timerSampleLimit`): timers with at most this many values
    /// send them all, so the global computes Etsy's exact percentiles; busier ones send only
    /// their histogram and exact totals.
    pub raw_values_limit: Option<usize>,
    /// `forward.tokenFile` (none): a file holding the token sent as `Authorization: Bearer` to
    /// the globals (their `http.tokens.write`; its name there is this local's credential).
    pub token_file: Option<PathBuf>,
    /// `forward.tls`: `{caFile, certFile, keyFile}` for `https://` nodes: a CA of its own
    /// (else the system's roots) and a client certificate to present (mutual TLS).
    pub tls: crate::tls::ClientFiles,
    /// `forward.maxBatchBytes` (8 MiB): a part larger than this before compression is sent in
    /// several requests.
    pub max_batch_bytes: usize,
    /// `forward.kafka` (none): produce the batches to a Kafka topic instead of posting them to
    /// `nodes`.
    pub kafka: Option<ProducerSettings>,
    /// `forward.paths` (none): independent destinations, each sent every batch with a spool
    /// and telemetry (`forward.<name>`) of its own; each is a copy of these settings with its
    /// own destination keys (the top level's are then empty).
    pub paths: Vec<(String, ForwardConfig)>,
}

/// The default `forward.maxBatchBytes`: 8 MiB before compression.
pub const DEFAULT_PART_BYTES: usize = 8 * 1024 * 1024;

impl Default for ForwardConfig {
    fn default() -> Self {
        ForwardConfig {
            nodes: Vec::new(),
            source: host_name(),
            check_interval: Duration::from_secs(10),
            timeout: Duration::from_secs(10),
            redirect_after: Duration::from_secs(60),
            spool_dir: None,
            spool_bytes: DEFAULT_SPOOL_BYTES,
            set_members_limit: DEFAULT_SET_MEMBERS_LIMIT,
            raw_values_limit: None,
            max_batch_bytes: DEFAULT_PART_BYTES,
            token_file: None,
            tls: crate::tls::ClientFiles::default(),
            kafka: None,
            paths: Vec::new(),
        }
    }
}

impl ForwardConfig {
    /// The settings as `histd check-config` prints them.
    pub fn effective(&self) -> Value {
        json!({
            "nodes": self.nodes.iter().map(|(name, _)| name).collect::<Vec<_>>(),
            "source": self.source,
            "checkInterval": self.check_interval.as_millis() as u64,
            "timeoutMs": self.timeout.as_millis() as u64,
            "redirectAfterMs": self.redirect_after.as_millis() as u64,
            "spoolDir": self.spool_dir,
            "spoolBytes": self.spool_bytes,
            "setMembersLimit": self.set_members_limit,
            "rawValuesLimit": self.raw_values_limit,
            "maxBatchBytes": self.max_batch_bytes,
            "tokenFile": self.token_file,
            "tls": { "caFile": self.tls.ca, "certFile": self.tls.identity.as_ref().map(|i| &i.0),
                     "keyFile": self.tls.identity.as_ref().map(|i| &i.1) },
            "kafka": self.kafka.as_ref().map(ProducerSettings::effective),
            "paths": self.paths.iter().map(|(name, path)| {
                let mut path = path.effective();
                path["name"] = json!(name);
                for shared in ["source", "setMembersLimit", "rawValuesLimit", "maxBatchBytes", "paths"] {
                    path.as_object_mut().map(|object| object.remove(shared));
                }
                path
            }).collect::<Vec<_>>(),
        })
    }
}

impl ForwardConfig {
    /// The files one destination reads at start (token, TLS, Kafka's password and TLS), read
    /// now; each problem names its key.
    pub fn check_files(&self) -> Vec<String> {
        let mut problems = Vec::new();
        problems.extend(self.token().err());
        problems.extend(self.client_tls().err());
        if let Some(kafka) = &self.kafka {
            problems.extend(kafka.client_config().err().map(|why| format!("forward.kafka: {why}")));
        }
        problems
    }

    /// The TLS settings of the `https://` nodes, when `forward.tls` names files.
    pub fn client_tls(&self) -> Result<Option<std::sync::Arc<tokio_rustls::rustls::ClientConfig>>, String> {
        if self.tls == crate::tls::ClientFiles::default() {
            return Ok(None);
        }
        crate::tls::client_config(&self.tls, crate::http_client::system_roots)
            .map(Some)
            .map_err(|why| format!("forward.tls: {why}"))
    }

    /// The token for the globals, from `forward.tokenFile` (its first line that is not blank
    /// or a `#` comment; a `NAME TOKEN` line sends the token), read again whenever the file
    /// changes.
    pub fn token(&self) -> Result<Option<std::sync::Arc<crate::secret_file::TokenFile>>, String> {
        let Some(path) = &self.token_file else { return Ok(None) };
        crate::secret_file::TokenFile::open(path, "forward.tokenFile").map(|file| Some(std::sync::Arc::new(file)))
    }
}

/// The host name (`/proc/sys/kernel/hostname`), or `histd` when it cannot be read.
pub(crate) fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|name| name.trim().to_string())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "histd".to_string())
}

/// Reads `forward.*`; `required` (the backend is on) makes a destination mandatory: `nodes`
/// or `kafka`, at the top or in each of `paths`.
pub fn forward(top: &Reader<'_>, required: bool) -> Result<ForwardConfig, ConfigError> {
    let section = top.object("forward")?;
    let defaults = ForwardConfig::default();
    let source = section.string("source")?.unwrap_or(defaults.source);
    if source.is_empty() || source.len() > 255 {
        return Err(section.error("source", "expected a name of 1 to 255 bytes"));
    }
    let mut config = ForwardConfig {
        source,
        set_members_limit: section.whole("setMembersLimit", defaults.set_members_limit as u64, 0)? as usize,
        raw_values_limit: match section.raw("rawValuesLimit") {
            None => None,
            Some(_) => Some(section.whole("rawValuesLimit", 0, 0)? as usize),
        },
        max_batch_bytes: section.whole("maxBatchBytes", DEFAULT_PART_BYTES as u64, 65_536)? as usize,
        ..ForwardConfig::default()
    };
    let paths = section.array("paths")?;
    let mut top_level = config.clone();
    read_destination(&section, &mut top_level, required && paths.is_empty())?;
    for (index, value) in paths.iter().enumerate() {
        let key = format!("paths[{index}]");
        let Value::Object(object) = value else {
            return Err(
                section.error(&key, format!("expected an object {{name, nodes | kafka, spoolDir, ...}}, got {value}"))
            );
        };
        let reader = section.element(object, section.key_path(&key));
        let mut path = config.clone();
        read_destination(&reader, &mut path, true)?;
        let name = reader.string("name")?.unwrap_or_else(|| format!("path{index}"));
        let legal = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'-';
        if name.is_empty() || name.len() > 64 || !name.bytes().all(legal) {
            return Err(reader.error("name", format!("'{name}' is not a path name ([A-Za-z0-9_-], 1 to 64)")));
        }
        if config.paths.iter().any(|(other, _)| *other == name) {
            return Err(reader.error("name", format!("'{name}' names two paths")));
        }
        let shares_spool =
            path.spool_dir.is_some() && config.paths.iter().any(|(_, other)| other.spool_dir == path.spool_dir);
        if shares_spool {
            return Err(reader.error("spoolDir", "each path needs a spool directory of its own"));
        }
        name_transactions(&mut path, Some(&name));
        config.paths.push((name, path));
    }
    if config.paths.is_empty() {
        name_transactions(&mut top_level, None);
        return Ok(top_level);
    }
    if !top_level.nodes.is_empty() || top_level.kafka.is_some() {
        return Err(section.error("paths", "give the destinations in forward.paths or at the top of forward, not both"));
    }
    Ok(config)
}

/// Reads where batches go (the top of `forward`, or one of `forward.paths`) into `config`:
/// Gives a Kafka destination with transactions and no `transactionalId` its default one.
fn name_transactions(config: &mut ForwardConfig, path: Option<&str>) {
    let source = config.source.clone();
    if let Some(id) = config.kafka.as_mut().and_then(|kafka| kafka.transactional_id.as_mut()) {
        if id.is_empty() {
            *id = super::kafka::default_transactional_id(&source, path);
        }
    }
}

/// `nodes` or `kafka` (one of them when `required`), and how they are sent and spooled.
fn read_destination(section: &Reader<'_>, config: &mut ForwardConfig, required: bool) -> Result<(), ConfigError> {
    let defaults = ForwardConfig::default();
    let mut nodes = Vec::new();
    for (index, node) in section.array("nodes")?.iter().enumerate() {
        let key = format!("nodes[{index}]");
        let text = node.as_str().ok_or_else(|| section.error(&key, format!("expected a URL string, got {node}")))?;
        let mut url = HttpUrl::parse(text).map_err(|message| section.error(&key, message))?;
        if url.path == "/" {
            url.path = FORWARD_PATH.to_string();
        }
        if text.len() > super::format::MAX_NAME_BYTES {
            return Err(section.error(&key, format!("a node's URL is at most {} bytes", super::format::MAX_NAME_BYTES)));
        }
        if nodes.iter().any(|(name, _)| name == text) {
            return Err(section.error(&key, format!("'{text}' is listed twice")));
        }
        nodes.push((text.to_string(), url));
    }
    let kafka = match section.raw("kafka") {
        None => None,
        Some(_) => Some(super::kafka::producer(&section.object("kafka")?)?),
    };
    if required && nodes.is_empty() && kafka.is_none() {
        return Err(section.error(
            "nodes",
            "the forward backend needs at least one global node: [\"http://host:8127\"] (or forward.kafka)",
        ));
    }
    if kafka.is_some() && !nodes.is_empty() {
        return Err(section.error("kafka", "give nodes or kafka, not both"));
    }
    if let Some(kafka) = &kafka {
        config.max_batch_bytes = config.max_batch_bytes.min(kafka.max_part_bytes());
    }
    config.nodes = nodes;
    config.kafka = kafka;
    config.check_interval = section.milliseconds("checkInterval", defaults.check_interval)?;
    config.timeout = section.milliseconds("timeoutMs", defaults.timeout)?;
    config.redirect_after = section.milliseconds("redirectAfterMs", defaults.redirect_after)?;
    config.spool_dir = section.string("spoolDir")?.map(PathBuf::from);
    config.spool_bytes = section.whole("spoolBytes", defaults.spool_bytes, 1024)?;
    config.token_file = section.string("tokenFile")?.map(PathBuf::from);
    config.tls = crate::sinks::http_settings::client_files(section)?;
    Ok(())
}

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
    pub peers: Vec<crate::http_client::HttpUrl>,
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
            Some(_) => Some(super::kafka::consumer(&section.object("kafka")?)?),
        },
        peers: peers(&section)?,
        peer_token_file: section.string("peerTokenFile")?.map(PathBuf::from),
        peer_ca_file: section.string("peerCaFile")?.map(PathBuf::from),
    })
}

/// Reads `global.peers`: `http://` or `https://` URLs of the other members' HTTP ports.
fn peers(section: &Reader<'_>) -> Result<Vec<crate::http_client::HttpUrl>, ConfigError> {
    let mut peers = Vec::new();
    for (index, peer) in section.array("peers")?.iter().enumerate() {
        let key = format!("peers[{index}]");
        let text = peer.as_str().ok_or_else(|| section.error(&key, format!("expected a URL, got {peer}")))?;
        let mut url = crate::http_client::HttpUrl::parse(text).map_err(|why| section.error(&key, why))?;
        url.path = url.path.trim_end_matches('/').to_string();
        peers.push(url);
    }
    Ok(peers)
}

/// Its keys, for README's table (`config/keys.rs`).
pub const KEYS: &[KeyDoc] = &[
    histd(&["forward.nodes", "forward.paths[].nodes"], "required with the `forward` backend", "the global histd nodes, `[\"http://10.0.0.5:8127\", ...]` (their HTTP port; batches go to `/api/v1/forward` unless a path is given). Each series goes to one node by rendezvous hashing of its key over the nodes that are up (docs/forward-format.md); a node that fails is skipped until its `/health` answers again"),
    histd(&["forward.tokenFile", "forward.paths[].tokenFile"], "none", "a file holding the token (its first line; `NAME TOKEN` sends TOKEN) sent as `Authorization: Bearer` with every batch and health check: one of the globals' `http.tokens.write` (its name there is this local's credential: batch identities are bound to it). Read again whenever the file changes: a token rotated in place is sent from the next request on"),
    histd(&["forward.tls.caFile", "forward.paths[].tls.caFile"], "none (the system's roots)", "a PEM file of the CA certificates `https://` nodes are checked against, instead of the system's"),
    histd(&["forward.tls.certFile", "forward.tls.keyFile", "forward.paths[].tls.certFile", "forward.paths[].tls.keyFile"], "none", "a client certificate and its key (PEM) presented to `https://` nodes (mutual TLS: the globals' `http.tls.clientCAFile`); its subject's CN is this local's credential where `http.tls.clientCertRoles` has `write`"),
    histd(&["forward.paths"], "none", "independent destinations, `[{name, nodes | kafka, spoolDir, ...}]`: every batch goes to each, with a spool and counters (`forward.<name>.*`) of its own, so one path's outage never holds the other (e.g. the globals of two datacenters, or one over HTTP and one through Kafka). Each takes the destination keys below (`nodes`, `kafka`, `spoolDir`, `spoolBytes`, `tokenFile`, `tls`, `checkInterval`, `timeoutMs`, `redirectAfterMs`); `source` and the limits are shared. Each path's globals are exact on their own"),
    histd(&["forward.paths[].name"], "`path<index>`", "the path's name in its counters (`forward.<name>.points_out`, ...) and the log"),
    histd(&["forward.source"], "the host name", "this histd's name in the batches it sends: unique in the fleet (the identity a global merges once; the tag value with `global.tagSource`)"),
    histd(&["forward.checkInterval", "forward.paths[].checkInterval"], "10000", "milliseconds between health checks (`GET /health`) of every node"),
    histd(&["forward.timeoutMs", "forward.paths[].timeoutMs"], "10000", "one request's deadline; a node that does not answer in time is marked down"),
    histd(&["forward.redirectAfterMs", "forward.paths[].redirectAfterMs"], "60000", "batches already cut for a node that goes down wait this long for it, then go to the next node (new flushes go to the live nodes at once). Waiting keeps a batch the dead node took before dying from being merged twice"),
    histd(&["forward.spoolDir", "forward.paths[].spoolDir"], "none (memory)", "batches are written here (synced) before they are sent and removed once a node took them: they survive a stop, SIGKILL or a crash and are sent at the next start, oldest first"),
    histd(&["forward.spoolBytes", "forward.paths[].spoolBytes"], "268435456 (256 MiB)", "compressed batches kept while no node takes them, on disk or in memory; past it the oldest are dropped (`forward.dropped_points.buffer_full`)"),
    histd(&["forward.setMembersLimit"], "1000", "sets with more members this interval are sent as a HyperLogLog sketch (16 KiB, ~0.8% error) instead of their members"),
    histd(&["forward.rawValuesLimit"], "`timerSampleLimit`", "timers with at most this many values send them all (the global's percentiles are then Etsy-exact); busier ones send their circllhist and exact totals only (8 bytes a value saved)"),
    histd(&["forward.maxBatchBytes"], "8388608 (8 MiB)", "a node's part of a flush larger than this before compression goes in several requests"),
    histd(&["forward.kafka.brokers", "global.kafka.brokers", "forward.paths[].kafka.brokers"], "none (required to use Kafka)", "`[\"host:port\", ...]`: some of the Kafka cluster's brokers. With `forward.kafka` a local produces its batches to the topic instead of posting them to `forward.nodes`; with `global.kafka` a global consumes them"),
    histd(&["forward.kafka.topic", "global.kafka.topic", "forward.paths[].kafka.topic"], "`histd-forward`", "the topic. Each series goes to one partition: rendezvous hashing of its key over the partitions' numbers (docs/forward-format.md); give the topic replication factor 3 and `min.insync.replicas` 2. Partitions added later are used by a local from its next start"),
    histd(&["forward.kafka.clientId", "global.kafka.clientId", "forward.paths[].kafka.clientId"], "`histd`", "the client's name in the brokers' logs and quotas"),
    histd(&["forward.kafka.tls", "global.kafka.tls", "forward.paths[].kafka.tls"], "none (plaintext)", "`true`: TLS to the brokers, checked against the system's CAs; an object: with the files below"),
    histd(&["forward.kafka.tls.caFile", "global.kafka.tls.caFile", "forward.paths[].kafka.tls.caFile"], "the system's CAs", "PEM CA certificates the brokers are checked against"),
    histd(&["forward.kafka.tls.certFile", "forward.kafka.tls.keyFile", "global.kafka.tls.certFile", "global.kafka.tls.keyFile", "forward.paths[].kafka.tls.certFile", "forward.paths[].kafka.tls.keyFile"], "none", "a client certificate and its key (PEM), for brokers that ask for one (both or neither)"),
    histd(&["forward.kafka.sasl", "global.kafka.sasl", "forward.paths[].kafka.sasl"], "none", "SASL authentication to the brokers (over TLS when `tls` is set)"),
    histd(&["forward.kafka.sasl.mechanism", "global.kafka.sasl.mechanism", "forward.paths[].kafka.sasl.mechanism"], "`SCRAM-SHA-512`", "`PLAIN`, `SCRAM-SHA-256` or `SCRAM-SHA-512`"),
    histd(&["forward.kafka.sasl.username", "global.kafka.sasl.username", "forward.kafka.sasl.passwordFile", "global.kafka.sasl.passwordFile", "forward.paths[].kafka.sasl.username", "forward.paths[].kafka.sasl.passwordFile"], "none (required with `sasl`)", "the user, and a file whose first line is the password"),
    histd(&["forward.kafka.acks", "forward.paths[].kafka.acks"], "`all`", "`all`: every in-sync replica has the batch before it leaves the spool (an idempotent producer: no duplicates from its retries); `1`: the leader alone"),
    histd(&["forward.kafka.compression", "forward.paths[].kafka.compression"], "`none`", "`none`, `gzip`, `snappy`, `lz4` or `zstd` of the record batches (the batches are snappy-compressed already)"),
    histd(&["forward.kafka.maxMessageBytes", "forward.paths[].kafka.maxMessageBytes"], "1000000", "the largest message the topic takes (its `max.message.bytes`); a part is cut to fit"),
    histd(&["forward.kafka.deliveryTimeoutMs", "forward.paths[].kafka.deliveryTimeoutMs"], "30000", "how long librdkafka tries a batch before handing it back to the spool, where it waits (bounded by `forward.spoolBytes`) and is produced again, in order, with backoff"),
    histd(&["forward.kafka.transactions", "forward.paths[].kafka.transactions"], "`true` with `acks: 'all'`", "the batches of each send are produced in one Kafka transaction and leave the spool once it commits: a copy the brokers took without the local hearing of it (a dying leader, a local killed mid-send) is aborted and never read by a global, which reads committed batches only. Needs brokers whose transaction log can be written (`transaction.state.log.replication.factor` brokers up); `false` for brokers that do not allow transactions"),
    histd(&["forward.kafka.transactionalId", "forward.paths[].kafka.transactionalId"], "`histd-<forward.source>` (`-<name>` for a path)", "the transactions' id: unique in the fleet and the same across restarts. A local's start fences the run before it (what that left open is aborted)"),
    histd(&["forward.kafka.signingKeyFile", "forward.paths[].kafka.signingKeyFile"], "none", "a file whose first line holds this local's signing key (at least 32 characters, 8 of them different: `openssl rand -hex 32`); each batch is signed with it (HMAC-SHA256 in the message's `histd-signature` header), so globals with `global.kafka.signingKeys` know it came from this local. Read at start"),
    histd(&["global.kafka.signingKeys"], "none", "a file of `SOURCE KEY` lines (each local's `forward.source` and the key in its `signingKeyFile`); when given, a batch is merged only when signed with the key of the source it names, and identities are remembered per source, so a producer without a local's key can neither forge its batches nor claim their identities first (refused: `messages.forward_refused_signatures`). Read at start"),
    histd(&["global.peers"], "none", "the query URLs of the other globals of this one's group (`[\"https://global2:8127\"]`): a query, histogram, heatmap or series list asked of this global is answered for the whole group, each peer asked in parallel within 5 s and the answers merged exactly (counts and sums added, histograms bin for bin, min and max combined, series listed once); a query of the query language merges each step's rows across members before its function is applied (a gauge's `value` and a set's `cardinality` are this global's alone, marked partial); every such answer carries `partial` and `members` (each peer's URL, whether it answered and why not): a peer down makes answers partial, never wrong. Read at start"),
    histd(&["global.peerTokenFile"], "none", "a file holding a read token of the peers (`http.tokens.read` there), sent to them"),
    histd(&["global.peerCaFile"], "none (the system's roots)", "a PEM file of CA certificates `https://` peers are checked against, besides the system's roots"),
    histd(&["global.kafka.group"], "`histd-global`", "the consumer group: the globals of one datacenter share one and split the partitions; every group receives every batch. Offsets are committed once every backend has taken the flush that carried their batches (the store wrote it, forward spooled it, ...)"),
    histd(&["global.kafka.sessionTimeoutMs"], "45000", "how long a silent global keeps its partitions before the group gives them to the others (a global stopped with SIGTERM leaves at once). Keep it above the brokers' failover (their `broker.session.timeout.ms`, 9 s, and the election after it): a group whose coordinator fails over for longer loses its members' sessions, and batches flushed meanwhile are read again by the next owners"),
    histd(&["global.kafka.instanceId"], "the one kept in the data directory", "this global's static membership of its group (Kafka's `group.instance.id`): restarted within `sessionTimeoutMs`, it is given its own partitions back at once and the others never stop (without one, the group waits `sessionTimeoutMs` for the old member). Unique in the group. When not given, a global with the store makes one at its first start and keeps it in `store.dataDir` (`kafka-instance-id`), as with `global.journalDir`; a global with neither has none (dynamic membership, logged at start)"),
    histd(&["global.kafka.skipUnreadableAfterMs"], "120000", "how long a partition may stay stopped at a record batch the Kafka client cannot read (damaged, or past its size limits) before that record is read past: counted in `forward_batches_unreadable`, logged with topic, partition and offset, named in `/health`; meanwhile the partition is held there and `/health` says degraded. 0: never skip (a person decides). A batch in a codec this histd lacks is never skipped: a newer histd may read it. At least 20000, well past a broker's failover"),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config_reader::object_literal;

    fn read(text: &str) -> Result<ForwardConfig, String> {
        let object = object_literal(text).map_err(|e| e.to_string())?;
        let keys = Default::default();
        forward(&Reader::root(&object, &keys), true).map_err(|e| e.to_string())
    }

    #[test]
    fn paths_and_their_errors() {
        let config = read(
            "{ forward: { source: 'h', paths: [ { nodes: ['http://a:8127'], spoolDir: '/s1' }, \
               { name: 'log', kafka: { brokers: ['k:9092'] }, spoolDir: '/s2' } ] } }",
        )
        .unwrap();
        let names: Vec<&str> = config.paths.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(names, ["path0", "log"]);
        assert_eq!(config.paths[0].1.source, "h", "shared settings reach every path");
        assert!(config.paths[1].1.max_batch_bytes < DEFAULT_PART_BYTES, "a Kafka path cuts parts to fit a message");
        let transactional_id = |config: &ForwardConfig| config.kafka.as_ref().unwrap().transactional_id.clone();
        assert_eq!(transactional_id(&config.paths[1].1).as_deref(), Some("histd-h-log"), "a path's own id");
        let top = read("{ forward: { source: 'h', kafka: { brokers: ['k:9092'] } } }").unwrap();
        assert_eq!(transactional_id(&top).as_deref(), Some("histd-h"), "the source's id at the top");
        let given = read("{ forward: { source: 'h', kafka: { brokers: ['k:9092'], transactionalId: 'x' } } }").unwrap();
        assert_eq!(transactional_id(&given).as_deref(), Some("x"));
        let cases = [
            ("{ forward: { nodes: ['http://a:8127'], paths: [ { nodes: ['http://b:8127'] } ] } }", "not both"),
            ("{ forward: { paths: [ { spoolDir: '/s' } ] } }", "forward.paths[0].nodes"),
            ("{ forward: { paths: [ { name: 'a', nodes: ['http://a:1'] }, { name: 'a', nodes: ['http://b:1'] } ] } }", "names two paths"),
            ("{ forward: { paths: [ { nodes: ['http://a:1'], spoolDir: '/s' }, { nodes: ['http://b:1'], spoolDir: '/s' } ] } }", "of its own"),
            ("{ forward: { paths: [ { name: 'a b', nodes: ['http://a:1'] } ] } }", "path name"),
            ("{ forward: { paths: [ 'http://a:1' ] } }", "expected an object"),
            ("{ forward: { paths: [ { nodes: ['http://a:1'], kafka: { brokers: ['k:1'] } } ] } }", "not both"),
        ];
        for (text, expected) in cases {
            let error = read(text).expect_err(text);
            assert!(error.contains(expected), "{text}: {error}");
        }
    }
}
