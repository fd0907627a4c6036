//! `backends` and each backend's keys.

use serde_json::{json, Value};

use crate::config_reader::{ConfigError, Reader};

/// The default size of the graphite retry buffer: 16 MiB of Graphite lines.
pub const DEFAULT_GRAPHITE_BUFFER_BYTES: u64 = 16 * 1024 * 1024;

/// A backend flushes go to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// Graphite/carbon, plaintext protocol.
    Graphite,
    /// A readable dump of each flush on standard output.
    Console,
    /// Raw packets forwarded to other statsd servers.
    Repeater,
    /// The embedded store, read by the HTTP API and `histd query`.
    Store,
    /// Prometheus: `/metrics` and remote write.
    Prometheus,
    /// Each flush's mergeable state to global histd nodes.
    Forward,
    /// OTLP/HTTP to an OpenTelemetry collector.
    Otlp,
    /// Each flush appended to a file.
    File,
    /// Circonus HTTPTrap or IRONdb, histograms as circllhist.
    Circonus,
}

impl Backend {
    /// The short name (`graphite`).
    pub fn name(self) -> &'static str {
        match self {
            Backend::Graphite => "graphite",
            Backend::Console => "console",
            Backend::Repeater => "repeater",
            Backend::Store => "store",
            Backend::Prometheus => "prometheus",
            Backend::Forward => "forward",
            Backend::Otlp => "otlp",
            Backend::File => "file",
            Backend::Circonus => "circonus",
        }
    }
}

/// `backends`: Etsy module paths (`./backends/graphite`) or short names. Default: graphite.
pub fn backends(top: &Reader<'_>) -> Result<Vec<Backend>, ConfigError> {
    if top.raw("backends").is_none() {
        return Ok(vec![Backend::Graphite]);
    }
    let mut backends = Vec::new();
    for (index, name) in top.array("backends")?.iter().enumerate() {
        let key = format!("backends[{index}]");
        let text = name
            .as_str()
            .ok_or_else(|| ConfigError { key: key.clone(), message: format!("expected a backend name, got {name}") })?;
        let backend = match text.trim_start_matches("./backends/") {
            "graphite" => Backend::Graphite,
            "console" => Backend::Console,
            "repeater" => Backend::Repeater,
            "store" => Backend::Store,
            "prometheus" => Backend::Prometheus,
            "forward" => Backend::Forward,
            "otlp" => Backend::Otlp,
            "file" => Backend::File,
            "circonus" => Backend::Circonus,
            other => {
                let message = format!(
                    "unknown backend '{other}' (histd has graphite, console, repeater, store, prometheus, forward, otlp, file, circonus)"
                );
                return Err(ConfigError { key, message });
            }
        };
        if !backends.contains(&backend) {
            backends.push(backend);
        }
    }
    Ok(backends)
}

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

/// The console backend's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsoleConfig {
    /// `console.prettyprint` (false, as Etsy's code has it): one line per value when false,
    /// an aligned table when true.
    pub prettyprint: bool,
}

/// Reads `console.*`.
pub fn console(top: &Reader<'_>) -> Result<ConsoleConfig, ConfigError> {
    Ok(ConsoleConfig { prettyprint: top.object("console")?.bool("prettyprint", false)? })
}

/// How the repeater sends packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RepeaterProtocol {
    /// One UDP datagram per packet, over IPv4.
    Udp4,
    /// One UDP datagram per packet, over IPv6.
    Udp6,
    /// The packet and a newline on a TCP connection kept open per target.
    Tcp,
}

/// The repeater backend's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct RepeaterConfig {
    /// `repeater`: `[{host, port}]`.
    pub targets: Vec<(String, u16)>,
    /// `repeaterProtocol` (`udp4`).
    pub protocol: RepeaterProtocol,
}

impl RepeaterConfig {
    /// The settings as `histd check-config` prints them.
    pub fn effective(&self) -> Value {
        json!({
            "targets": self.targets.iter().map(|(h, p)| format!("{h}:{p}")).collect::<Vec<_>>(),
            "protocol": format!("{:?}", self.protocol).to_lowercase(),
        })
    }
}

/// Reads `repeater` and `repeaterProtocol`.
pub fn repeater(top: &Reader<'_>) -> Result<RepeaterConfig, ConfigError> {
    let protocol = match top.string("repeaterProtocol")?.as_deref() {
        None | Some("udp4") => RepeaterProtocol::Udp4,
        Some("udp6") => RepeaterProtocol::Udp6,
        Some("tcp") => RepeaterProtocol::Tcp,
        Some(other) => return Err(top.error("repeaterProtocol", format!("'{other}' is not udp4, udp6 or tcp"))),
    };
    let mut targets = Vec::new();
    for (index, target) in top.array("repeater")?.iter().enumerate() {
        let key = format!("repeater[{index}]");
        let Value::Object(object) = target else {
            return Err(ConfigError { key, message: format!("expected {{host, port}}, got {target}") });
        };
        let target = top.element(object, key);
        let host = target.string("host")?.ok_or_else(|| target.error("host", "is missing"))?;
        targets.push((host, target.port("port", crate::ingest::servers::DEFAULT_PORT)?));
    }
    Ok(RepeaterConfig { targets, protocol })
}
