//! The `forward` section: a local histd sending its intervals to global ones.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Value};

use crate::config_reader::keys::{histd, KeyDoc};
use crate::config_reader::{ConfigError, Reader};
use crate::http_client::HttpUrl;

use fleet::kafka::ProducerSettings;

/// Where batches are posted on a node given as `http://host:port` alone.
pub const FORWARD_PATH: &str = "/api/v1/forward";
/// The default `forward.spoolBytes`: 256 MiB.
pub const DEFAULT_SPOOL_BYTES: u64 = 256 * 1024 * 1024;
/// The default `forward.setMembersLimit`.
pub const DEFAULT_SET_MEMBERS_LIMIT: usize = 1000;
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
            source: crate::sinks::host_name(),
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
    /// The files its sink reads at start, every path's too (TLS files, the Kafka password,
    /// TLS files and signing key; the token file is read again whenever it changes).
    pub fn files(&self) -> crate::sinks::FileContents {
        crate::sinks::FileContents::of(self.file_paths())
    }

    fn file_paths(&self) -> Vec<&std::path::Path> {
        let mut paths: Vec<&std::path::Path> = self.tls.paths().collect();
        if let Some(kafka) = &self.kafka {
            let cluster = &kafka.cluster;
            paths.extend(cluster.sasl.iter().map(|sasl| sasl.password_file.as_path()));
            let tls = cluster.tls.iter().flat_map(|tls| [&tls.ca, &tls.cert, &tls.key]);
            paths.extend(tls.flatten().map(PathBuf::as_path));
            paths.extend(kafka.signing_key_file.as_deref());
        }
        paths.extend(self.paths.iter().flat_map(|(_, path)| path.file_paths()));
        paths
    }

    /// The spool directories it writes (its own, or each path's).
    pub fn spool_dirs(&self) -> impl Iterator<Item = &std::path::Path> {
        self.spool_dir.as_deref().into_iter().chain(self.paths.iter().filter_map(|(_, path)| path.spool_dir.as_deref()))
    }

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
            *id = fleet::kafka::default_transactional_id(&source, path);
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
        if text.len() > fleet::format::MAX_NAME_BYTES {
            return Err(section.error(&key, format!("a node's URL is at most {} bytes", fleet::format::MAX_NAME_BYTES)));
        }
        if nodes.iter().any(|(name, _)| name == text) {
            return Err(section.error(&key, format!("'{text}' is listed twice")));
        }
        nodes.push((text.to_string(), url));
    }
    let kafka = match section.raw("kafka") {
        None => None,
        Some(_) => Some(crate::kafka_config::producer(&section.object("kafka")?)?),
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
    histd(&["forward.kafka.acks", "forward.paths[].kafka.acks"], "`all`", "`all`: every in-sync replica has the batch before it leaves the spool (an idempotent producer: no duplicates from its retries); `1`: the leader alone"),
    histd(&["forward.kafka.compression", "forward.paths[].kafka.compression"], "`none`", "`none`, `gzip`, `snappy`, `lz4` or `zstd` of the record batches (the batches are snappy-compressed already)"),
    histd(&["forward.kafka.maxMessageBytes", "forward.paths[].kafka.maxMessageBytes"], "1000000", "the largest message the topic takes (its `max.message.bytes`); a part is cut to fit"),
    histd(&["forward.kafka.deliveryTimeoutMs", "forward.paths[].kafka.deliveryTimeoutMs"], "30000", "how long librdkafka tries a batch before handing it back to the spool, where it waits (bounded by `forward.spoolBytes`) and is produced again, in order, with backoff"),
    histd(&["forward.kafka.transactions", "forward.paths[].kafka.transactions"], "`true` with `acks: 'all'`", "the batches of each send are produced in one Kafka transaction and leave the spool once it commits: a copy the brokers took without the local hearing of it (a dying leader, a local killed mid-send) is aborted and never read by a global, which reads committed batches only. Needs brokers whose transaction log can be written (`transaction.state.log.replication.factor` brokers up); `false` for brokers that do not allow transactions"),
    histd(&["forward.kafka.transactionalId", "forward.paths[].kafka.transactionalId"], "`histd-<forward.source>` (`-<name>` for a path)", "the transactions' id: unique in the fleet and the same across restarts. A local's start fences the run before it (what that left open is aborted)"),
    histd(&["forward.kafka.signingKeyFile", "forward.paths[].kafka.signingKeyFile"], "none", "a file whose first line holds this local's signing key (at least 32 characters, 8 of them different: `openssl rand -hex 32`); each batch is signed with it (HMAC-SHA256 in the message's `histd-signature` header), so globals with `global.kafka.signingKeys` know it came from this local. Read at start"),
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
