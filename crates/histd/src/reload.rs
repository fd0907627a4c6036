//! Config reload (SIGHUP, `POST /-/reload`): the file is read again the way it was at start
//! (the same command-line overrides applied), compared with the config in force, and what can
//! change while histd runs is applied at once; the rest is named as needing a restart.
//!
//! Applied live, without losing or doubling a line or an interval:
//! - the listeners (`servers`, or `port`/`address`): new ones are opened, dropped ones drain
//!   what their sockets hold and close, kept ones are not touched (a new receive buffer,
//!   `udpReceiveBufferBytes` or `recvBufferSize`, and a socket's mode are set in place);
//! - the backends (`backends`, every backend's section, `sinkQueueBytes`): added ones start,
//!   dropped ones stop, and a changed one does what its backend says
//!   ([`crate::sinks::Backend::reload`]): it restarts, takes the change in place (the store's
//!   retention, `maxBytes`, scrub and snapshots) or is replaced (forward on a spool directory
//!   it keeps), each flush going whole to one generation of a sink and a retired sink
//!   delivering what it holds ([`crate::backends`]). A change is what the sink started with:
//!   its settings, header values included, and the bytes of the files it read at start
//!   (certificates, keys, passwords, a mapping file), so one rotated in place is taken up;
//! - who may use the HTTP port (`http.*`): the token files and the TLS certificate, key and
//!   client CA are read again at every reload, changed or not (rotation); turning HTTPS on or
//!   off takes a restart; a listener's `allow` list changes in place;
//! - the timer settings (`percentThreshold`, `histogram`, `calculatedTimerMetrics`,
//!   `timerSampleLimit`), the `delete*` family, `gaugesMaxTTL` and `idleTTL`, the cardinality budgets,
//!   and `histdSelfMetrics`: the interval in progress is
//!   flushed by the new settings; every series keeps its state.
//!
//! The new listeners and sinks are opened and started before anything running changes, so a
//! reload that cannot open a port or a store directory changes nothing. An invalid file keeps
//! the old config running; the error names the key, and the failure is counted.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value};

use crate::aggregation::Aggregation;
use crate::backends::Roster;
use crate::config::{BackendSettings, Config};
use crate::ingest::Ingress;
use crate::telemetry::EdgeCounters;

/// Where the config comes from: a file (or the built-in local default) and the command line's
/// overrides, applied again on every reload.
pub struct ConfigSource {
    /// The config file; `None` for the built-in local default.
    pub path: Option<PathBuf>,
    /// The command line's settings over the file's (`--port`, `--data-dir`, ...).
    pub overrides: Box<dyn Fn(&mut Config) + Send + Sync>,
}

impl ConfigSource {
    /// Reads the config as it was read at start.
    pub fn load(&self) -> anyhow::Result<Config> {
        let mut config = match &self.path {
            Some(path) => Config::from_file(path)?,
            None => Config::local_default(),
        };
        (self.overrides)(&mut config);
        Ok(config)
    }
}

/// The effective config's top-level keys a reload applies to the aggregator (the settings
/// [`agg::AggConfig::reloaded`] takes from the new config).
const AGGREGATOR_KEYS: [&str; 15] = [
    "percentThreshold",
    "histogram",
    "calculatedTimerMetrics",
    "timerSampleLimit",
    "deleteCounters",
    "deleteTimers",
    "deleteSets",
    "deleteGauges",
    "gaugesMaxTTL",
    "idleTTL",
    "histdSelfMetrics",
    "maxSeries",
    "maxSeriesPerName",
    "maxTagValues",
    "maxSetMembers",
];

/// The effective config's top-level keys that reopen listeners, restart sinks or change who
/// may use the HTTP port.
/// (Every backend's own section is applied too: its sink restarts with it.)
const EDGE_KEYS: [&str; 5] = ["servers", "backends", "sinkQueueBytes", "alerts", "http"];

/// Keys that are runtime state or derived, not settings to compare (`healthStatus` is the
/// management `health` command's to change; `ignoredKeys` is a report).
const NOT_COMPARED: [&str; 2] = ["healthStatus", "ignoredKeys"];

pub use crate::contract::ReloadOutcome;

/// The parts of the running daemon a reload changes.
#[derive(Debug)]
pub struct Daemon {
    /// The aggregator (its settings).
    pub aggregation: Arc<Aggregation>,
    /// The sinks.
    pub sinks: Arc<Roster>,
    /// The metric listeners.
    pub ingress: Arc<Ingress>,
    /// The alert rules at work, when the config had some at start.
    pub alerts: Option<Arc<crate::alerts::Alerts>>,
    /// Where reloads and their failures are counted.
    pub edges: Arc<EdgeCounters>,
    /// The management state: the config in force that `config` prints.
    pub admin: Arc<crate::admin::AdminState>,
    /// The HTTP port's guard: its token files are read again at every reload (rotation).
    pub guard: Arc<crate::access::Guard>,
    /// The HTTP port's TLS, when it serves HTTPS: its files are read again at every reload.
    pub tls: Option<Arc<crate::tls::ServerTls>>,
}

/// Applies reloads to the running daemon.
pub struct Reloader {
    source: ConfigSource,
    current: Mutex<Config>,
    daemon: Daemon,
    /// Serialises reloads (a SIGHUP and a POST at once apply one after the other).
    running: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for Reloader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reloader").field("path", &self.source.path).finish_non_exhaustive()
    }
}

impl crate::http::Reload for Reloader {
    fn reload(
        &self,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<ReloadOutcome, String>> + Send + '_>> {
        Box::pin(Reloader::reload(self))
    }
}

impl Reloader {
    /// A reloader for the daemon started with `config`.
    pub fn new(source: ConfigSource, config: Config, daemon: Daemon) -> Reloader {
        Reloader { source, current: Mutex::new(config), daemon, running: Default::default() }
    }

    /// Reads the config again and applies what changed; an error (the file unreadable or
    /// invalid, a new port or store directory that cannot be opened: the message names the
    /// key) leaves everything as it was. Logged and counted.
    pub async fn reload(&self) -> Result<ReloadOutcome, String> {
        let _one_at_a_time = self.running.lock().await;
        let result = self.apply().await;
        let edges = &self.daemon.edges;
        match &result {
            Ok(outcome) => {
                edges.config_reloads.add(1);
                tracing::info!(applied = ?outcome.applied, changes = ?outcome.changes, "config reloaded");
                if !outcome.needs_restart.is_empty() {
                    tracing::warn!(keys = ?outcome.needs_restart, "config keys changed that take a restart to apply");
                }
            }
            Err(error) => {
                edges.config_reload_failures.add(1);
                tracing::error!(error, "config reload failed; the config in force is unchanged");
            }
        }
        result
    }

    async fn apply(&self) -> Result<ReloadOutcome, String> {
        let new = self.source.load().map_err(|error| format!("{error:#}"))?;
        let credentials = new.http.load()?;
        if let (Some(tls), Some(files)) = (&self.daemon.tls, &new.http.tls) {
            tls.reload(files).map_err(|why| format!("http.tls: {why}"))?;
        }
        let in_force = crate::clock::lock(&self.current).clone();
        let applied = applied(&in_force, &new);
        let mut outcome = classify(&in_force.effective(), &new.effective());
        let Daemon { aggregation, sinks, ingress, alerts, .. } = &self.daemon;
        if self.daemon.tls.is_some() != new.http.tls.is_some() {
            outcome.needs_restart.push("http.tls (HTTPS turned on or off)".to_string());
        }
        if alerts.is_none() && outcome.applied.iter().any(|key| key == "alerts") {
            outcome.applied.retain(|key| key != "alerts");
            outcome.needs_restart.push("alerts (histd started without rules)".to_string());
        }
        let listeners = ingress
            .plan(&applied.listeners, applied.ingest.receive_buffer)
            .await
            .map_err(|error| format!("{error:#}"))?;
        let started = match sinks.plan(&applied) {
            Ok(started) => started,
            Err(error) => {
                listeners.opened.close();
                return Err(format!("{error:#}"));
            }
        };
        let done = sinks.apply(started);
        outcome.changes = done.changes;
        outcome.changes.extend(ingress.apply(listeners).await.map_err(|error| format!("{error:#}"))?);
        for change in done.in_place {
            change.await?;
        }
        for (backend, identity) in done.replace {
            outcome.changes.push(sinks.replace(&applied, backend, identity).await?);
        }
        if let Some(alerts) = alerts.as_ref().filter(|_| outcome.applied.iter().any(|key| key == "alerts")) {
            alerts.set_rules(&applied.alerts.rules);
        }
        if outcome.applied.iter().any(|key| AGGREGATOR_KEYS.contains(&key.as_str())) {
            aggregation.current().reconfigure(&applied.agg);
        }
        self.daemon.guard.replace(credentials);
        let raw = raw_in_force(&in_force.raw, &new.raw, &outcome.needs_restart);
        self.daemon.admin.config.replace(raw, crate::clock::unix_now_s());
        *crate::clock::lock(&self.current) = applied;
        Ok(outcome)
    }
}

/// The config in force after a reload: `new`'s live settings over `in_force` (what takes a
/// restart stays, so the next reload still names it as changed).
fn applied(in_force: &Config, new: &Config) -> Config {
    let mut applied = in_force.clone();
    applied.agg = in_force.agg.reloaded(&new.agg);
    applied.listeners = new.listeners.clone();
    applied.ingest.receive_buffer = new.ingest.receive_buffer;
    applied.backends = new.backends.clone();
    applied.backend_settings = new.backend_settings.clone();
    applied.sink_queue_bytes = new.sink_queue_bytes;
    applied.alerts.rules = new.alerts.rules.clone();
    applied.http = new.http.clone();
    applied
}

/// The file's settings in force after a reload: the new file's, except where a key that takes a
/// restart changed (named as the effective config names it in `needs_restart`): those keep the
/// values in force, as the file spells them.
fn raw_in_force(old: &Map<String, Value>, new: &Map<String, Value>, needs_restart: &[String]) -> Map<String, Value> {
    let mut raw = new.clone();
    for name in needs_restart {
        let name = name.split(' ').next().unwrap_or_default();
        for spelling in file_spellings(name) {
            let mut path = spelling.split('.');
            let top = path.next().unwrap_or_default();
            match path.next() {
                None => keep(&mut raw, old, top),
                Some(field) => {
                    let old_section = old.get(top).and_then(Value::as_object).cloned().unwrap_or_default();
                    if let Some(section) = raw.get_mut(top).and_then(Value::as_object_mut) {
                        keep(section, &old_section, field);
                    }
                }
            }
        }
    }
    raw
}

/// `to[key]` as in `from` (absent when absent there).
fn keep(to: &mut Map<String, Value>, from: &Map<String, Value>, key: &str) {
    match from.get(key) {
        Some(value) => to.insert(key.to_string(), value.clone()),
        None => to.remove(key),
    };
}

/// The keys of the file that an effective config's key is read from.
fn file_spellings(effective: &str) -> Vec<&str> {
    match effective {
        "mgmt" => vec!["mgmt_port", "mgmt_address"],
        "httpPort" => vec!["http_port", "http_address"],
        other => vec![other],
    }
}

/// The keys that differ between two effective configs, sorted into applied and not.
fn classify(old: &Value, new: &Value) -> ReloadOutcome {
    let mut outcome = ReloadOutcome::default();
    let (Some(old), Some(new)) = (old.as_object(), new.as_object()) else { return outcome };
    let keys: std::collections::BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    for key in keys {
        if NOT_COMPARED.contains(&key.as_str()) || old.get(key) == new.get(key) {
            continue;
        }
        match key.as_str() {
            "ingest" => classify_fields(old.get(key), new.get(key), "", INGEST_FIELDS, &mut outcome),
            key if AGGREGATOR_KEYS.contains(&key)
                || EDGE_KEYS.contains(&key)
                || BackendSettings::names().any(|name| name == key) =>
            {
                outcome.applied.push(key.to_string())
            }
            _ => outcome.needs_restart.push(key.clone()),
        }
    }
    outcome
}

/// The ingest keys: the receive buffer applies to running sockets; the readers, their batches
/// and the connection bounds take a restart.
const INGEST_FIELDS: &[(&str, bool)] = &[
    ("udpReceiveBufferBytes", true),
    ("udpReaders", false),
    ("udpReaderMode", false),
    ("udpBatchDatagrams", false),
    ("maxDatagramBytes", false),
    ("shutdownDrainMs", false),
    ("streamPendingBytes", false),
    ("maxStreamConnections", false),
    ("connectionIdleTimeoutMs", false),
    ("httpMaxConnections", false),
    ("httpMaxConnectionsPerAddress", false),
    ("httpHeaderTimeoutMs", false),
    ("httpBodyTimeoutMs", false),
    ("maxStreamLineBytes", false),
    ("mgmtMaxConnections", false),
    ("mgmtMaxLineBytes", false),
    ("mgmtFirstCommandTimeoutMs", false),
    ("queryMaxSteps", false),
    ("queryMaxSeries", false),
];

/// Sorts the fields of one section that changed, named `prefix` + field.
fn classify_fields(
    old: Option<&Value>,
    new: Option<&Value>,
    prefix: &str,
    fields: &[(&str, bool)],
    outcome: &mut ReloadOutcome,
) {
    let field = |value: Option<&Value>, name: &str| value.and_then(|v| v.get(name)).cloned();
    for &(name, live) in fields {
        if field(old, name) != field(new, name) {
            let list = if live { &mut outcome.applied } else { &mut outcome.needs_restart };
            list.push(format!("{prefix}{name}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn effective(text: &str) -> Value {
        Config::from_text(text).unwrap().effective()
    }

    #[test]
    fn changes_are_sorted_into_applied_and_needing_a_restart() {
        let base = "{ port: 8125, percentThreshold: 90, flushInterval: 10000 }";
        let cases: &[(&str, &[&str], &[&str])] = &[
            (base, &[], &[]),
            ("{ port: 8125, percentThreshold: [50, 99], flushInterval: 10000 }", &["percentThreshold"], &[]),
            (
                "{ port: 8125, percentThreshold: 90, flushInterval: 10000, maxSeries: 10, deleteIdleStats: true }",
                &["deleteCounters", "deleteGauges", "deleteSets", "deleteTimers", "maxSeries"],
                &[],
            ),
            ("{ port: 9125, percentThreshold: 90, flushInterval: 5000 }", &["servers"], &["flushInterval"]),
            (
                "{ port: 8125, percentThreshold: 90, flushInterval: 10000, store: { retention: { raw: '2h' }, dataDir: '/x' } }",
                &["store"],
                &[],
            ),
            (
                "{ port: 8125, percentThreshold: 90, flushInterval: 10000, backends: ['console'], udpReaders: 3, udpReceiveBufferBytes: 1000000 }",
                &["backends", "udpReceiveBufferBytes"],
                &["udpReaders"],
            ),
            ("{ port: 8125, percentThreshold: 90, flushInterval: 10000, mgmt_port: 9126 }", &[], &["mgmt"]),
            ("{ port: 8125, percentThreshold: 90, flushInterval: 10000, http_port: 9127 }", &[], &["httpPort"]),
            (
                "{ port: 8125, percentThreshold: 90, flushInterval: 10000, otlp: { scale: 3 }, console: { prettyprint: true } }",
                &["console", "otlp"],
                &[],
            ),
            ("{ port: 8125, percentThreshold: 90, flushInterval: 10000, healthStatus: 'down' }", &[], &[]),
            ("{ port: 8125, percentThreshold: 90, flushInterval: 10000, maxSetMembers: 5 }", &["maxSetMembers"], &[]),
        ];
        for (text, applied, restart) in cases {
            let outcome = classify(&effective(base), &effective(text));
            assert_eq!(outcome.applied, *applied, "{text}");
            assert_eq!(outcome.needs_restart, *restart, "{text}");
        }
    }

    /// What a reload leaves in force: the live settings new, the rest as before, so that the
    /// next reload names a restart-only change again and a live one not again.
    #[test]
    fn the_config_in_force_keeps_what_takes_a_restart() {
        let in_force = Config::from_text("{ percentThreshold: 90, flushInterval: 10000, prefixStats: 'a' }").unwrap();
        let new = Config::from_text("{ percentThreshold: 50, flushInterval: 5000, prefixStats: 'b', maxTagValues: 7 }")
            .unwrap();
        let after = applied(&in_force, &new);
        assert_eq!(after.agg.flush_interval, in_force.agg.flush_interval, "the flusher's grid and the rates' divisor");
        assert_eq!(after.agg.prefix_stats, "a");
        assert_eq!((after.agg.thresholds[0].percent, after.agg.budgets.max_tag_values), (50.0, 7));
        let otlp_scale = |config: &Config| config.settings::<crate::sinks::otlp::Otlp>().scale;
        let new = Config::from_text(
            "{ percentThreshold: 50, flushInterval: 5000, prefixStats: 'b', maxTagValues: 7, otlp: { scale: 3 } }",
        )
        .unwrap();
        let after = applied(&in_force, &new);
        assert_eq!(otlp_scale(&after), 3, "every backend's section is applied: its sink restarts with it");
        let again = classify(&after.effective(), &new.effective());
        assert_eq!(again.applied, Vec::<String>::new());
        assert_eq!(again.needs_restart, ["flushInterval", "prefixStats"]);
    }

    #[test]
    fn the_file_in_force_keeps_the_keys_that_take_a_restart() {
        let object = |text: &str| -> Map<String, Value> { serde_json::from_str(text).unwrap() };
        let old = object(r#"{"percentThreshold": [90], "flushInterval": 1000, "mgmt_port": 8126, "http_port": 1}"#);
        let new = object(r#"{"percentThreshold": [75], "flushInterval": 2000, "mgmt_port": 9000, "http_port": 2}"#);
        let cases: &[(&[&str], &str)] = &[
            (&[], r#"{"percentThreshold": [75], "flushInterval": 2000, "mgmt_port": 9000, "http_port": 2}"#),
            (
                &["flushInterval"],
                r#"{"percentThreshold": [75], "flushInterval": 1000, "mgmt_port": 9000, "http_port": 2}"#,
            ),
            (
                &["mgmt", "httpPort"],
                r#"{"percentThreshold": [75], "flushInterval": 2000, "mgmt_port": 8126, "http_port": 1}"#,
            ),
        ];
        for (restart, want) in cases {
            let restart: Vec<String> = restart.iter().map(|s| s.to_string()).collect();
            assert_eq!(raw_in_force(&old, &new, &restart), object(want), "{restart:?}");
        }
    }
}
