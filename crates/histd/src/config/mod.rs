//! Configuration: an Etsy statsd config file (a JavaScript object literal, read as JSON5, or
//! plain JSON) becomes a validated [`Config`]. Etsy's keys keep Etsy's meaning and defaults;
//! histd's own keys sit beside them. Every error names the key it is about.

mod backends;
pub mod keys;
mod timers;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use agg::AggConfig;

use crate::global::config::GlobalConfig;
use serde_json::{json, Map, Value};

pub use crate::config_reader::{object_literal, parse_bytes, parse_duration, read_file, ConfigError};
use crate::config_reader::{KeysRead, Reader};
pub use crate::ingest::{IngestConfig, Listener, UnixPath, DEFAULT_MAX_STREAM_LINE_BYTES};
pub use crate::sinks::console::ConsoleConfig;
pub use crate::sinks::graphite::{GraphiteConfig, GraphiteProtocol};
pub use crate::sinks::repeater::{RepeaterConfig, RepeaterProtocol};
pub use crate::sinks::store::StoreConfig;
pub use backends::{Backend, BackendSettings, SinkIdentity};

/// The management port when none is given.
pub const DEFAULT_MGMT_PORT: u16 = 8126;

/// A validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where metrics come in.
    pub listeners: Vec<Listener>,
    /// How datagram listeners read.
    pub ingest: IngestConfig,
    /// `queryMaxSteps` and `queryMaxSeries`: what one query of the HTTP API may ask for.
    pub query: crate::query_params::QueryLimits,
    /// The management interface (`mgmt_address`, default 127.0.0.1; `mgmt_port`, default 8126).
    pub mgmt: SocketAddr,
    /// Where flushes go, in config order.
    pub backends: Vec<Backend>,
    /// Aggregation settings.
    pub agg: AggConfig,
    /// Every backend's settings, as its own code read them ([`Config::settings`]).
    pub backend_settings: BackendSettings,
    /// What this histd does with batches other histd forward to it.
    pub global: GlobalConfig,
    /// The HTTP port: the query API, `/health`, `/metrics`, the web page, forwarded batches.
    pub http_port: HttpPort,
    /// Who may use the HTTP port (`http.*`: host names, tokens per role).
    pub http: crate::access::HttpSecurity,
    /// Alert rules (`alerts`) and where their notifications go (`alerting`).
    pub alerts: crate::alerts::AlertsConfig,
    /// `debug`: log at debug level.
    pub debug: bool,
    /// `sinkQueueBytes`: the bytes of flushes (the repeater: packets) each sink but graphite
    /// may have waiting (graphite's bound is `graphite.retryBufferBytes`).
    pub sink_queue_bytes: u64,
    /// `healthStatus`: whether the management `health` state starts `up` (the default).
    pub healthy_at_start: bool,
    /// Keys present in the file that histd did not read (paths such as `graphite.globalPrefx`).
    pub ignored_keys: Vec<String>,
    /// The config object as read, for the management `config` command.
    pub raw: Map<String, Value>,
}

/// The HTTP port's address and whether it is bound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpPort {
    /// `http_address` (127.0.0.1) and `http_port` (8127).
    pub address: SocketAddr,
    /// Whether it is bound at all: when something uses it (the store, the prometheus backend,
    /// `global.accept`), when `http_port` or `http_address` is given, or with `--http-port`;
    /// never with `--no-http`.
    pub serve: bool,
}

/// The HTTP port when none is given.
pub const DEFAULT_HTTP_PORT: u16 = 8127;

/// Reads `http_address` and `http_port`.
fn http_port(top: &Reader<'_>) -> Result<HttpPort, ConfigError> {
    let ip: IpAddr = match top.string("http_address")? {
        None => Ipv4Addr::LOCALHOST.into(),
        Some(text) => crate::ingest::servers::parse_ip(&text)
            .ok_or_else(|| top.error("http_address", format!("'{text}' is not an IP address")))?,
    };
    Ok(HttpPort {
        address: SocketAddr::new(ip, top.port("http_port", DEFAULT_HTTP_PORT)?),
        serve: top.raw("http_port").is_some() || top.raw("http_address").is_some(),
    })
}

impl Config {
    /// The settings of backend `B` (`config.settings::<sinks::graphite::Graphite>()`).
    pub fn settings<B: crate::sinks::Backend>(&self) -> &B::Settings {
        self.backend_settings.of::<B>()
    }

    /// The settings of backend `B`, to change (the command line's overrides).
    pub fn settings_mut<B: crate::sinks::Backend>(&mut self) -> &mut B::Settings {
        self.backend_settings.of_mut::<B>()
    }

    /// Reads and validates the config file at `path`.
    pub fn from_file(path: &Path) -> anyhow::Result<Config> {
        read_file(path, Config::from_text)
    }

    /// Reads and validates a config from its text (JSON5 or JSON; JavaScript's object literal
    /// syntax as Etsy configs use it).
    pub fn from_text(text: &str) -> anyhow::Result<Config> {
        Ok(Config::from_object(object_literal(text)?)?)
    }

    /// The defaults of `histd run` with no config file: UDP and TCP on 127.0.0.1:8125, the
    /// embedded store (and its HTTP API on 127.0.0.1:8127).
    pub fn local_default() -> Config {
        let raw = json!({
            "servers": [
                { "server": "./servers/udp", "address": "127.0.0.1", "port": 8125 },
                { "server": "./servers/tcp", "address": "127.0.0.1", "port": 8125 },
            ],
            "backends": ["store"],
        });
        let Value::Object(raw) = raw else { unreachable!("a literal object") };
        Config::from_object(raw).unwrap_or_else(|error| unreachable!("the built-in default config is valid: {error}"))
    }

    /// Validates a config object; an error names every wrong key the file has (the first as
    /// `key`, the others after it in the message).
    pub fn from_object(raw: Map<String, Value>) -> Result<Config, ConfigError> {
        Config::read_object(raw.clone(), &KeysRead::default()).map_err(|first| with_the_others(first, raw))
    }

    /// Validates a config object, recording in `read` every key looked at.
    fn read_object(raw: Map<String, Value>, read: &KeysRead) -> Result<Config, ConfigError> {
        let top = Reader::root(&raw, read);
        let mgmt_ip = match top.string("mgmt_address")? {
            None => Ipv4Addr::LOCALHOST.into(),
            Some(text) => crate::ingest::servers::parse_ip(&text)
                .ok_or_else(|| top.error("mgmt_address", format!("'{text}' is not an IP address")))?,
        };
        let backends = backends::backends(&top)?;
        let listed = |name: &str| backends.iter().any(|backend| backend.name() == name);
        // The file backend writes sets' members, which only mergeable snapshots carry.
        let keep_mergeable = listed("forward") || listed("file");
        let agg = AggConfig { keep_mergeable, ..agg_config(&top)? };
        let config = Config {
            alerts: crate::alerts::config::alerts(&top, agg.flush_interval)?,
            listeners: crate::ingest::servers::listeners(&top)?,
            ingest: crate::ingest::settings::ingest(&top)?,
            query: query_limits(&top)?,
            mgmt: SocketAddr::new(mgmt_ip, top.port("mgmt_port", DEFAULT_MGMT_PORT)?),
            agg,
            backend_settings: BackendSettings::read(&top, listed)?,
            global: crate::global::config::global(&top)?,
            backends,
            http_port: http_port(&top)?,
            http: crate::access::read(&top)?,
            debug: top.bool("debug", false)?,
            healthy_at_start: health_status(&top)?,
            sink_queue_bytes: sink_queue_bytes(&top)?,
            ignored_keys: Vec::new(),
            raw: Map::new(),
        };
        let ignored_keys = keys::unread_keys(&raw, read);
        let mut config = Config { ignored_keys, raw, ..config };
        let uses_http = config.backends.iter().any(|backend| backend.serves_http());
        config.http_port.serve |= uses_http || config.global.accept;
        if config.http_port.serve {
            config.http.check_exposure(config.http_port.address.ip(), config.global.accept)?;
        }
        Ok(config)
    }

    /// What is allowed but a person should know at once: the management port on a network
    /// address (it reads and deletes every series and sets the health check, with no
    /// credential: Etsy's own default, kept for drop-in configs).
    pub fn warnings(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        if !self.mgmt.ip().is_loopback() {
            warnings.push(format!(
                "`mgmt_address`: the management port is on {}, where anyone who reaches it can read and delete every series and set `health down`, with no credential: keep it on 127.0.0.1 unless a firewall stands in front",
                self.mgmt
            ));
        }
        let graphite_nowhere =
            self.lists("graphite") && self.settings::<crate::sinks::graphite::Graphite>().host.is_none();
        let keeps = self.backends.iter().any(|backend| backend.name() != "graphite") || !graphite_nowhere;
        if (self.global.accept || self.global.kafka.is_some()) && !keeps {
            warnings.push(
                "`global`: this global's backends keep the fleet's series nowhere (graphite without `graphiteHost`): name an output in `backends`, e.g. [\"store\"] for its query API and page".to_string(),
            );
        }
        warnings
    }

    /// Whether `backends` lists the backend named `name`.
    pub fn lists(&self, name: &str) -> bool {
        self.backends.iter().any(|backend| backend.name() == name)
    }

    /// The settings every backend may read besides its own.
    pub fn shared(&self) -> crate::sinks::Shared {
        crate::sinks::Shared {
            prefix_stats: self.agg.prefix_stats.clone(),
            key_name_sanitize: self.agg.key_name_sanitize,
            timer_sample_limit: self.agg.timer_sample_limit,
            sink_queue_bytes: self.sink_queue_bytes,
        }
    }

    /// Reads every file the settings name the way the daemon will at start (the HTTP port's
    /// token files and certificates, each listed backend's tokens, passwords and
    /// certificates, `global.kafka`'s): what cannot be read or used, each naming its key.
    pub fn check_files(&self) -> Vec<String> {
        let mut problems: Vec<String> = self.http.load().err().into_iter().collect();
        if let Some(files) = &self.http.tls {
            problems.extend(crate::tls::server_config(files).err().map(|why| format!("http.tls: {why}")));
        }
        problems.extend(self.backend_settings.check_files(&self.backends));
        if let Some(kafka) = &self.global.kafka {
            problems.extend(kafka.client_config().err().map(|why| format!("global.kafka: {why}")));
        }
        problems
    }

    /// Sets the store's data directory (`--data-dir`).
    pub fn set_data_dir(&mut self, dir: std::path::PathBuf) {
        self.settings_mut::<crate::sinks::store::Store>().data_dir = dir;
    }

    /// Sets the port of every UDP and TCP listener (`histd run --port`).
    pub fn set_listener_port(&mut self, port: u16) {
        for listener in &mut self.listeners {
            match listener {
                Listener::Udp(address, ..) | Listener::Tcp(address, _) => address.set_port(port),
                Listener::UnixStream(_) | Listener::UnixDatagram(_) => {}
            }
        }
    }

    /// The effective settings, for `histd check-config`.
    pub fn effective(&self) -> Value {
        let agg = &self.agg;
        let mut effective = json!({
            "servers": self.listeners.iter().map(Listener::effective).collect::<Vec<_>>(),
            "ingest": self.ingest.effective(),
            "query": { "queryMaxSteps": self.query.max_steps, "queryMaxSeries": self.query.max_series },
            "mgmt": self.mgmt.to_string(),
            "backends": self.backends.iter().map(|b| b.name()).collect::<Vec<_>>(),
            "flushInterval": agg.flush_interval.as_millis() as u64,
            "percentThreshold": agg.thresholds.iter().map(|t| t.percent).collect::<Vec<_>>(),
            "calculatedTimerMetrics": agg.calculated_timer_metrics,
            "histogram": agg.histograms.iter().map(|h| json!({"metric": h.metric, "bins": etsy_bins(&h.bins)})).collect::<Vec<_>>(),
            "deleteCounters": agg.delete_counters,
            "deleteTimers": agg.delete_timers,
            "deleteSets": agg.delete_sets,
            "deleteGauges": agg.delete_gauges,
            "gaugesMaxTTL": agg.gauges_max_ttl,
            "idleTTL": agg::MetricType::ALL.iter().zip(agg.idle_ttl)
                .map(|(kind, ttl)| (kind.name().to_string(), ttl.map_or(Value::Null, |t| json!(t.as_millis() as u64))))
                .collect::<serde_json::Map<_, _>>(),
            "prefixStats": agg.prefix_stats,
            "keyNameSanitize": agg.key_name_sanitize,
            "timerSampleLimit": agg.timer_sample_limit,
            "histdSelfMetrics": agg.self_metrics,
            "maxSeries": agg::MetricType::ALL.iter().zip(agg.budgets.max_series)
                .map(|(kind, limit)| (kind.name().to_string(), json!(limit)))
                .collect::<serde_json::Map<_, _>>(),
            "maxSeriesPerName": agg.budgets.max_series_per_name,
            "maxTagValues": agg.budgets.max_tag_values,
            "maxSetMembers": agg.budgets.max_set_members,
            "global": self.global.effective(),
            "httpPort": if self.http_port.serve { Value::String(self.http_port.address.to_string()) } else { Value::Null },
            "http": self.http.effective(),
            "alerts": self.alerts.effective().0,
            "alerting": self.alerts.effective().1,
            "debug": self.debug,
            "healthStatus": if self.healthy_at_start { "up" } else { "down" },
            "sinkQueueBytes": self.sink_queue_bytes,
            "ignoredKeys": self.ignored_keys,
        });
        if let Value::Object(object) = &mut effective {
            object.extend(self.backend_settings.effective());
        }
        effective
    }
}

/// `first` with every other error of the same file: each key found wrong is taken out and the
/// file read again (a bounded number of times), so one run of `check-config` names them all.
/// Reading stops at an error whose key cannot be taken out (a required key that is missing).
fn with_the_others(first: ConfigError, mut raw: Map<String, Value>) -> ConfigError {
    let mut seen = vec![first.clone()];
    // Elements of a list this loop set to null: an error about one is this loop's own making
    // (`expected a backend name, got null`), so the whole list goes and the reading goes on.
    let mut nulled: Vec<String> = Vec::new();
    let mut last = first.key.clone();
    while seen.len() < 20 && remove_path(&mut raw, &last) {
        if last.ends_with(']') {
            nulled.push(last.clone());
        }
        match Config::read_object(raw.clone(), &KeysRead::default()) {
            Err(next) if nulled.contains(&next.key) => {
                last = next.key.rsplit_once('[').map_or(next.key.clone(), |(list, _)| list.to_string())
            }
            Err(next) if !seen.contains(&next) => {
                last = next.key.clone();
                seen.push(next);
            }
            _ => break,
        }
    }
    let mut message = first.message.clone();
    for other in &seen[1..] {
        message.push_str(&format!("\nand {other}"));
    }
    ConfigError { key: first.key, message }
}

/// Removes the key at `path` (`graphite.globalPrefix`, `servers[1].port`); false when there is
/// none (an array element is replaced by `null`, so later indexes keep their meaning).
fn remove_path(raw: &mut Map<String, Value>, path: &str) -> bool {
    // The path as JSON pointer tokens: `servers[1].port` is `servers`, `1`, `port`.
    let mut tokens: Vec<&str> = Vec::new();
    for part in path.split('.') {
        let mut pieces = part.split('[');
        tokens.extend(pieces.next());
        tokens.extend(pieces.map(|index| index.trim_end_matches(']')));
    }
    let Some(last) = tokens.pop() else { return false };
    let parent: String = tokens.iter().map(|t| format!("/{}", t.replace('~', "~0").replace('/', "~1"))).collect();
    let mut root = Value::Object(std::mem::take(raw));
    let removed = match root.pointer_mut(&parent) {
        Some(Value::Object(object)) => object.remove(last).is_some(),
        Some(Value::Array(items)) => match last.parse::<usize>().ok().and_then(|index| items.get_mut(index)) {
            Some(element) if !element.is_null() => {
                *element = Value::Null;
                true
            }
            _ => false,
        },
        _ => false,
    };
    if let Value::Object(object) = root {
        *raw = object;
    }
    removed
}

/// Histogram bins as Etsy's config writes them: numbers, and `'inf'`.
fn etsy_bins(bins: &[agg::BinLimit]) -> Vec<Value> {
    bins.iter()
        .map(|limit| match limit {
            agg::BinLimit::Below(upper) => json!(upper),
            agg::BinLimit::Infinity => json!("inf"),
        })
        .collect()
}

fn agg_config(top: &Reader<'_>) -> Result<AggConfig, ConfigError> {
    let delete_idle = top.bool("deleteIdleStats", false)?;
    let prefix_stats = top.string("prefixStats")?.unwrap_or_else(|| "statsd".to_string());
    Ok(AggConfig {
        flush_interval: flush_interval(top)?,
        thresholds: timers::thresholds(top)?.into(),
        histograms: timers::histograms(top)?.into(),
        calculated_timer_metrics: timers::calculated_timer_metrics(top)?,
        delete_counters: top.bool("deleteCounters", delete_idle)?,
        delete_timers: top.bool("deleteTimers", delete_idle)?,
        delete_sets: top.bool("deleteSets", delete_idle)?,
        delete_gauges: top.bool("deleteGauges", delete_idle)?,
        gauges_max_ttl: gauges_max_ttl(top)?,
        idle_ttl: idle_ttl(top)?,
        prefix_stats,
        key_name_sanitize: top.bool("keyNameSanitize", true)?,
        timer_sample_limit: timer_sample_limit(top)?,
        self_metrics: top.bool("histdSelfMetrics", false)?,
        keep_mergeable: false,
        budgets: budgets(top)?,
    })
}

/// `idleTTL` (histd): one duration for every type, or one per type
/// (`{counters, timers, gauges, sets}`); each a duration (`10m`, `1h`, `7d`) or milliseconds.
fn idle_ttl(top: &Reader<'_>) -> Result<[Option<std::time::Duration>; 4], ConfigError> {
    let one = |reader: &Reader<'_>, key: &str| -> Result<Option<std::time::Duration>, ConfigError> {
        let bad = |got: &Value| {
            reader.error(key, format!("expected a duration like 10m, 1h or 7d (or milliseconds), got {got}"))
        };
        match reader.raw(key) {
            None => Ok(None),
            Some(Value::Number(n)) => match n.as_f64() {
                Some(ms) if ms >= 1.0 && ms.is_finite() => Ok(Some(std::time::Duration::from_millis(ms as u64))),
                _ => Err(bad(&Value::Number(n.clone()))),
            },
            Some(Value::String(text)) => match parse_duration(text) {
                Some(seconds) => Ok(Some(std::time::Duration::from_secs(seconds as u64))),
                None => Err(bad(&Value::String(text.clone()))),
            },
            Some(other) => Err(bad(other)),
        }
    };
    match top.raw("idleTTL") {
        Some(Value::Object(_)) => {
            let per_type = top.object("idleTTL")?;
            let mut ttl = [None; 4];
            for (at, kind) in agg::MetricType::ALL.into_iter().enumerate() {
                ttl[at] = one(&per_type, kind.name())?;
            }
            Ok(ttl)
        }
        _ => Ok([one(top, "idleTTL")?; 4]),
    }
}

/// `maxSeries` (a number, or one per type), `maxSeriesPerName`, `maxTagValues`,
/// `maxSetMembers` (histd): each a whole number from 1 to a billion.
fn budgets(top: &Reader<'_>) -> Result<agg::Budgets, ConfigError> {
    let defaults = agg::Budgets::default();
    let count = |reader: &Reader<'_>, key: &str, default: usize| -> Result<usize, ConfigError> {
        match reader.number(key)? {
            None => Ok(default),
            Some(n) if (1.0..=1e9).contains(&n) && n.fract() == 0.0 => Ok(n as usize),
            Some(n) => Err(reader.error(key, format!("expected a whole number from 1 to 1e9, got {n}"))),
        }
    };
    let mut max_series = defaults.max_series;
    match top.raw("maxSeries") {
        None => {}
        Some(serde_json::Value::Object(_)) => {
            let per_type = top.object("maxSeries")?;
            for (at, kind) in agg::MetricType::ALL.into_iter().enumerate() {
                max_series[at] = count(&per_type, kind.name(), defaults.max_series[at])?;
            }
        }
        Some(_) => max_series = [count(top, "maxSeries", 0)?; 4],
    }
    Ok(agg::Budgets {
        max_series,
        max_series_per_name: count(top, "maxSeriesPerName", defaults.max_series_per_name)?,
        max_tag_values: count(top, "maxTagValues", defaults.max_tag_values)?,
        max_set_members: count(top, "maxSetMembers", defaults.max_set_members)?,
    })
}

/// The default `sinkQueueBytes`: 64 MiB.
pub const DEFAULT_SINK_QUEUE_BYTES: u64 = 64 * 1024 * 1024;

/// `sinkQueueBytes` (histd): a byte count of at least 1 MiB.
/// `queryMaxSteps` and `queryMaxSeries`.
fn query_limits(top: &Reader<'_>) -> Result<crate::query_params::QueryLimits, ConfigError> {
    let defaults = crate::query_params::QueryLimits::default();
    Ok(crate::query_params::QueryLimits {
        max_steps: crate::ingest::settings::count(top, "queryMaxSteps", defaults.max_steps, 10, 10_000_000)?,
        max_series: crate::ingest::settings::count(top, "queryMaxSeries", defaults.max_series, 1, 100_000_000)?,
    })
}

fn sink_queue_bytes(top: &Reader<'_>) -> Result<u64, ConfigError> {
    match top.number("sinkQueueBytes")? {
        None => Ok(DEFAULT_SINK_QUEUE_BYTES),
        Some(bytes) if bytes >= 1_048_576.0 && bytes.is_finite() => Ok(bytes as u64),
        Some(bytes) => {
            Err(top.error("sinkQueueBytes", format!("expected a byte count of at least 1 MiB, got {bytes}")))
        }
    }
}

/// `healthStatus` (Etsy): `up` or `down`.
fn health_status(top: &Reader<'_>) -> Result<bool, ConfigError> {
    match top.string("healthStatus")?.as_deref() {
        None | Some("up") => Ok(true),
        Some("down") => Ok(false),
        Some(other) => Err(top.error("healthStatus", format!("'{other}' is neither up nor down"))),
    }
}

/// `timerSampleLimit` (histd): raw values kept per timer and interval.
fn timer_sample_limit(top: &Reader<'_>) -> Result<usize, ConfigError> {
    match top.number("timerSampleLimit")? {
        None => Ok(agg::config::DEFAULT_TIMER_SAMPLE_LIMIT),
        Some(limit) if limit >= 0.0 && limit.fract() == 0.0 && limit <= 1e9 => Ok(limit as usize),
        Some(limit) => {
            Err(top.error("timerSampleLimit", format!("expected a whole number of values up to 1e9, got {limit}")))
        }
    }
}

/// The longest `flushInterval`: a day (longer ones overflowed the flush grid).
const MAX_FLUSH_INTERVAL_MS: f64 = 86_400_000.0;

fn flush_interval(top: &Reader<'_>) -> Result<Duration, ConfigError> {
    match top.number("flushInterval")? {
        None => Ok(Duration::from_secs(10)),
        Some(ms) if (1.0..=MAX_FLUSH_INTERVAL_MS).contains(&ms) => Ok(Duration::from_millis(ms as u64)),
        Some(ms) => Err(top.error(
            "flushInterval",
            format!("expected milliseconds from 1 to {MAX_FLUSH_INTERVAL_MS} (a day), got {ms}"),
        )),
    }
}

/// Etsy's rule: anything but an integer above 1 is 1.
fn gauges_max_ttl(top: &Reader<'_>) -> Result<u32, ConfigError> {
    Ok(match top.raw("gaugesMaxTTL").and_then(crate::config_reader::number_of) {
        Some(ttl) if ttl.fract() == 0.0 && ttl > 1.0 => ttl.min(f64::from(u32::MAX)) as u32,
        _ => 1,
    })
}

#[cfg(test)]
mod tests;
