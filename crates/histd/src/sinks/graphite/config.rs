//! The graphite backend's settings: `graphiteHost`, `graphitePort`, `graphiteProtocol`,
//! `flush_counts`, `histdSelfMetrics` and `graphite.*`.

use serde_json::{json, Value};

use crate::config_reader::keys::{etsy, histd, KeyDoc};
use crate::config_reader::{ConfigError, Reader};

/// The default size of the graphite retry buffer: 16 MiB of Graphite lines.
pub const DEFAULT_GRAPHITE_BUFFER_BYTES: u64 = 16 * 1024 * 1024;

/// How flushes are written to carbon (`graphiteProtocol`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GraphiteProtocol {
    /// Plaintext lines, to `graphitePort`.
    Text,
    /// Length-prefixed pickles, to `graphitePicklePort`.
    Pickle,
}

/// The graphite backend's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct GraphiteConfig {
    /// `graphiteHost`: unset means compute but send nothing (Etsy's behaviour).
    pub host: Option<String>,
    /// `graphiteProtocol` (`text`).
    pub protocol: GraphiteProtocol,
    /// The port for the protocol: `graphitePort` (2003) for text, `graphitePicklePort` (2004)
    /// for pickle.
    pub port: u16,
    /// `graphite.legacyNamespace` (true).
    pub legacy_namespace: bool,
    /// `graphite.globalPrefix` ("stats").
    pub global_prefix: String,
    /// `graphite.prefixCounter` ("counters").
    pub prefix_counter: String,
    /// `graphite.prefixTimer` ("timers").
    pub prefix_timer: String,
    /// `graphite.prefixGauge` ("gauges").
    pub prefix_gauge: String,
    /// `graphite.prefixSet` ("sets").
    pub prefix_set: String,
    /// `graphite.globalSuffix` (none).
    pub global_suffix: Option<String>,
    /// `flush_counts` (true): also send counters' raw counts.
    pub flush_counts: bool,
    /// `graphite.retryBufferBytes` (histd; 16 MiB): lines kept while carbon is unreachable.
    pub retry_buffer_bytes: u64,
    /// `histdSelfMetrics` (histd; false): also send `graphiteStats.retry_buffer_bytes`,
    /// `dropped_lines` and `errors`.
    pub self_metrics: bool,
}

impl GraphiteConfig {
    /// The settings as `histd check-config` prints them.
    pub fn effective(&self) -> Value {
        json!({
            "host": self.host, "port": self.port, "legacyNamespace": self.legacy_namespace,
            "protocol": match self.protocol { GraphiteProtocol::Text => "text", GraphiteProtocol::Pickle => "pickle" },
            "globalPrefix": self.global_prefix, "prefixCounter": self.prefix_counter,
            "prefixTimer": self.prefix_timer, "prefixGauge": self.prefix_gauge, "prefixSet": self.prefix_set,
            "globalSuffix": self.global_suffix, "flush_counts": self.flush_counts,
            "retryBufferBytes": self.retry_buffer_bytes,
        })
    }
}

/// Reads `graphiteHost`, `graphitePort`, `graphiteProtocol`, `flush_counts` and `graphite.*`.
pub fn graphite(top: &Reader<'_>) -> Result<GraphiteConfig, ConfigError> {
    let protocol = match top.string("graphiteProtocol")?.as_deref() {
        None | Some("text") => GraphiteProtocol::Text,
        Some("pickle") => GraphiteProtocol::Pickle,
        Some(other) => return Err(top.error("graphiteProtocol", format!("'{other}' is neither text nor pickle"))),
    };
    let port = match protocol {
        GraphiteProtocol::Text => top.port("graphitePort", 2003)?,
        GraphiteProtocol::Pickle => top.port("graphitePicklePort", 2004)?,
    };
    let section = top.object("graphite")?;
    let text = |key: &str, default: &str| -> Result<String, ConfigError> {
        Ok(section.string(key)?.unwrap_or_else(|| default.to_string()))
    };
    let retry_buffer_bytes = match section.number("retryBufferBytes")? {
        None => DEFAULT_GRAPHITE_BUFFER_BYTES,
        Some(bytes) if bytes >= 0.0 && bytes.is_finite() => bytes as u64,
        Some(bytes) => return Err(section.error("retryBufferBytes", format!("expected a byte count, got {bytes}"))),
    };
    Ok(GraphiteConfig {
        host: top.string("graphiteHost")?.filter(|host| !host.is_empty()),
        protocol,
        port,
        legacy_namespace: section.bool("legacyNamespace", true)?,
        global_prefix: text("globalPrefix", "stats")?,
        prefix_counter: text("prefixCounter", "counters")?,
        prefix_timer: text("prefixTimer", "timers")?,
        prefix_gauge: text("prefixGauge", "gauges")?,
        prefix_set: text("prefixSet", "sets")?,
        global_suffix: section.string("globalSuffix")?.filter(|suffix| !suffix.is_empty()),
        flush_counts: top.bool("flush_counts", true)?,
        retry_buffer_bytes,
        self_metrics: top.bool("histdSelfMetrics", false)?,
    })
}

/// Its keys, for README's table (`config/keys.rs`).
pub const KEYS: &[KeyDoc] = &[
    etsy(&["flush_counts"], "true", "also send each counter's raw count"),
    etsy(&["graphiteHost"], "unset", "carbon's host; unset: compute flushes, send nothing (Etsy's behaviour)"),
    etsy(&["graphitePort"], "2003", "carbon's plaintext port (with `graphiteProtocol: text`)"),
    etsy(&["graphiteProtocol"], "`text`", "`text` (plaintext lines) or `pickle` (Etsy's pickle messages: a 4-byte length and a list of `(path, (timestamp, \"value\"))`)"),
    etsy(&["graphitePicklePort"], "2004", "carbon's pickle port (with `graphiteProtocol: pickle`)"),
    etsy(&["graphite.legacyNamespace"], "true", "Etsy's legacy names (`stats.<counter>`, `stats_counts.<counter>`)"),
    etsy(&["graphite.globalPrefix"], "`stats`", "the prefix of every name"),
    etsy(&["graphite.prefixCounter"], "`counters`", "counters' prefix (new namespace)"),
    etsy(&["graphite.prefixTimer"], "`timers`", "timers' prefix"),
    etsy(&["graphite.prefixGauge"], "`gauges`", "gauges' prefix"),
    etsy(&["graphite.prefixSet"], "`sets`", "sets' prefix"),
    etsy(&["graphite.globalSuffix"], "none", "a suffix after every name (new namespace)"),
    histd(&["graphite.retryBufferBytes"], "16777216 (16 MiB)", "what graphite holds while carbon is slow or unreachable: flushes waiting to be encoded (estimated) and encoded lines waiting to be sent (always at least the newest ~64 KiB chunk), and lines sent that carbon may not have read yet (kept to send again if the connection breaks; let go of once the kernel says carbon read them); past it the oldest lines are dropped (`graphite.dropped_points.buffer_full`) and new flushes are not queued (`graphite.queue_full_drops`)"),
];
