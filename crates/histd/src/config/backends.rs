//! `backends` and each backend's keys.

use crate::config_reader::{ConfigError, Reader};

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
