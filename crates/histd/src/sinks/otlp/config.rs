//! The `otlp` section: where the requests go, how histograms and time are laid out, the
//! resource that names this histd, and the bounds of what waits.

use std::time::Duration;

use serde_json::{json, Value};

use crate::config_reader::keys::{histd, KeyDoc};
use crate::config_reader::{string_object, ConfigError, Reader};
use crate::http_client::HttpUrl;
use crate::sinks::prometheus::native::SCHEMAS;

/// Where requests go when `otlp.endpoint` is absent: a collector on this host.
pub const DEFAULT_ENDPOINT: &str = "http://127.0.0.1:4318/v1/metrics";
/// The default exponential scale: buckets 2.2% wide, as fine as circllhist's bins make worth
/// it (docs/outputs.md: the measured quantile error per scale).
pub const DEFAULT_SCALE: i32 = 5;
/// What waits while the receiver fails.
pub const DEFAULT_RETRY_BUFFER_BYTES: u64 = 64 * 1024 * 1024;
/// One request's size before compression: a flush larger than this goes in several.
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 4 * 1024 * 1024;

/// How timers and `h`/`d` histograms are sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OtlpHistograms {
    /// `ExponentialHistogram` at `scale`: circllhist's bins re-binned (each bin's samples
    /// spread over the buckets it overlaps), with exact count, sum, min and max.
    Exponential,
    /// Explicit-bucket `Histogram` whose bounds are the edges of the point's populated
    /// circllhist bins: no re-binning, nothing lost but the edges' inclusivity.
    Explicit,
}

/// Whether each point holds its interval or everything since the series began.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Temporality {
    /// Each flush's interval alone (as the collector's statsd receiver sends).
    Delta,
    /// Running totals since the series was first seen (or came back after being deleted).
    Cumulative,
}

/// The otlp backend's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct OtlpConfig {
    /// `otlp.endpoint` (`http://127.0.0.1:4318/v1/metrics`): OTLP/HTTP, protobuf.
    pub url: HttpUrl,
    /// The endpoint as given (for `check-config`).
    pub endpoint: String,
    /// `otlp.histograms` (`exponential`).
    pub histograms: OtlpHistograms,
    /// `otlp.scale` (5): the exponential histograms' scale, −4 to 8.
    pub scale: i32,
    /// `otlp.temporality` (`delta`).
    pub temporality: Temporality,
    /// `otlp.headers` (none): sent with every request (`Authorization`, API keys).
    pub headers: Vec<(String, String)>,
    /// `otlp.resource` (`service.name: histd`, `host.name`: the host name): the resource's
    /// attributes; given ones are added to or replace these two.
    pub resource: Vec<(String, String)>,
    /// `otlp.compression` (`gzip`): `gzip` or `none`.
    pub gzip: bool,
    /// `otlp.monotonicCounters` (true): counters are monotonic Sums; false for counters that
    /// are also decremented (`-1|c`), which a monotonic Sum must not carry.
    pub monotonic_counters: bool,
    /// `otlp.timeoutMs` (10000): one request's deadline.
    pub timeout: Duration,
    /// `otlp.retryBufferBytes` (64 MiB): requests held while the receiver fails; past it the
    /// oldest go (`otlp.dropped_points.buffer_full`).
    pub retry_buffer_bytes: u64,
    /// `otlp.maxRequestBytes` (4 MiB): a flush larger than this (uncompressed) is split.
    pub max_request_bytes: usize,
}

impl Default for OtlpConfig {
    fn default() -> Self {
        OtlpConfig {
            url: HttpUrl::parse(DEFAULT_ENDPOINT).unwrap_or_else(|_| unreachable!("a valid URL")),
            endpoint: DEFAULT_ENDPOINT.to_string(),
            histograms: OtlpHistograms::Exponential,
            scale: DEFAULT_SCALE,
            temporality: Temporality::Delta,
            headers: Vec::new(),
            resource: default_resource(),
            gzip: true,
            monotonic_counters: true,
            timeout: Duration::from_secs(10),
            retry_buffer_bytes: DEFAULT_RETRY_BUFFER_BYTES,
            max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
        }
    }
}

fn default_resource() -> Vec<(String, String)> {
    vec![
        ("service.name".to_string(), "histd".to_string()),
        ("host.name".to_string(), crate::sinks::forward::config::host_name()),
    ]
}

impl OtlpConfig {
    /// The settings as `histd check-config` prints them (header values hidden).
    pub fn effective(&self) -> Value {
        json!({
            "endpoint": self.endpoint,
            "histograms": match self.histograms { OtlpHistograms::Exponential => "exponential", OtlpHistograms::Explicit => "explicit" },
            "scale": self.scale,
            "temporality": match self.temporality { Temporality::Delta => "delta", Temporality::Cumulative => "cumulative" },
            "headers": self.headers.iter().map(|(name, _)| name).collect::<Vec<_>>(),
            "resource": self.resource.iter().map(|(k, v)| (k.clone(), Value::from(v.clone()))).collect::<serde_json::Map<_, _>>(),
            "compression": if self.gzip { "gzip" } else { "none" },
            "monotonicCounters": self.monotonic_counters,
            "timeoutMs": self.timeout.as_millis() as u64,
            "retryBufferBytes": self.retry_buffer_bytes,
            "maxRequestBytes": self.max_request_bytes,
        })
    }
}

/// Reads `otlp.*`.
pub fn otlp(top: &Reader<'_>) -> Result<OtlpConfig, ConfigError> {
    let section = top.object("otlp")?;
    let defaults = OtlpConfig::default();
    let endpoint = section.string("endpoint")?.unwrap_or(defaults.endpoint);
    let mut url = HttpUrl::parse(&endpoint).map_err(|message| section.error("endpoint", message))?;
    if url.path == "/" {
        url.path = "/v1/metrics".to_string();
    }
    let histograms = match section.string("histograms")?.as_deref() {
        None | Some("exponential") => OtlpHistograms::Exponential,
        Some("explicit") => OtlpHistograms::Explicit,
        Some(other) => {
            return Err(section.error("histograms", format!("expected exponential or explicit, got '{other}'")))
        }
    };
    let scale = match section.number("scale")? {
        None => defaults.scale,
        Some(n) if n.fract() == 0.0 && SCHEMAS.contains(&(n as i32)) => n as i32,
        Some(n) => return Err(section.error("scale", format!("expected a whole number from -4 to 8, got {n}"))),
    };
    let temporality = match section.string("temporality")?.as_deref() {
        None | Some("delta") => Temporality::Delta,
        Some("cumulative") => Temporality::Cumulative,
        Some(other) => return Err(section.error("temporality", format!("expected delta or cumulative, got '{other}'"))),
    };
    let gzip = match section.string("compression")?.as_deref() {
        None | Some("gzip") => true,
        Some("none") => false,
        Some(other) => return Err(section.error("compression", format!("expected gzip or none, got '{other}'"))),
    };
    let mut resource = defaults.resource;
    for (key, value) in string_object(&section, "resource")? {
        resource.retain(|(known, _)| *known != key);
        resource.push((key, value));
    }
    Ok(OtlpConfig {
        url,
        endpoint,
        histograms,
        scale,
        temporality,
        headers: string_object(&section, "headers")?,
        resource,
        gzip,
        monotonic_counters: section.bool("monotonicCounters", defaults.monotonic_counters)?,
        timeout: section.milliseconds("timeoutMs", defaults.timeout)?,
        retry_buffer_bytes: section.whole("retryBufferBytes", defaults.retry_buffer_bytes, 1024)?,
        max_request_bytes: section.whole("maxRequestBytes", defaults.max_request_bytes as u64, 4096)? as usize,
    })
}

/// Its keys, for README's table (`config/keys.rs`).
pub const KEYS: &[KeyDoc] = &[
    histd(&["otlp.endpoint"], "`http://127.0.0.1:4318/v1/metrics`", "with the `otlp` backend, where each flush is POSTed as OTLP/HTTP protobuf (`/v1/metrics` when the URL has no path); `https://` goes over TLS, checked as for remote write"),
    histd(&["otlp.histograms"], "`exponential`", "timers and `h`/`d` as `exponential` histograms (re-binned at `otlp.scale`, exact count, sum, min, max) or `explicit` histograms whose bounds are each point's populated circllhist edges (every bin whole)"),
    histd(&["otlp.scale"], "5", "the exponential histograms' scale, -4 to 8: buckets `2^(2^-scale)` wide (5: 2.2%); docs/outputs.md has the measured quantile error per scale"),
    histd(&["otlp.temporality"], "`delta`", "`delta`: each point holds its flush interval; `cumulative`: counters and histograms hold running totals since the series began (a series deleted as idle starts over)"),
    histd(&["otlp.monotonicCounters"], "true", "counters are sent as monotonic Sums; `false` sends them as non-monotonic Sums (an UpDownCounter), for counters that are also decremented (`-1|c`), which a monotonic Sum must not carry"),
    histd(&["otlp.headers"], "none", "added to every request (`Authorization`, an API key)"),
    histd(&["otlp.resource"], "`service.name: histd`, `host.name`: the host name", "the resource's attributes, added to or replacing those two"),
    histd(&["otlp.compression"], "`gzip`", "`gzip` or `none`"),
    histd(&["otlp.timeoutMs"], "10000", "one request's deadline"),
    histd(&["otlp.retryBufferBytes"], "67108864 (64 MiB)", "requests held while the receiver fails or asks to wait (429/502/503/504, `Retry-After` obeyed up to 60 s); past it the oldest are dropped (`otlp.dropped_points.buffer_full`)"),
    histd(&["otlp.maxRequestBytes"], "4194304 (4 MiB)", "a flush larger than this before compression is sent in several requests (whole metrics each)"),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn settings_are_read_or_refused_naming_the_key() {
        let read =
            |text: &str| Config::from_text(text).map(|config| config.settings::<crate::sinks::otlp::Otlp>().clone());
        let config = read("{ backends: ['otlp'] }").unwrap();
        assert_eq!(config.url, HttpUrl::parse(DEFAULT_ENDPOINT).unwrap());
        assert_eq!(
            (config.histograms, config.scale, config.temporality, config.gzip),
            (OtlpHistograms::Exponential, 5, Temporality::Delta, true)
        );
        let config = read(
            "{ otlp: { endpoint: 'http://collector:4318', histograms: 'explicit', scale: 3, temporality: 'cumulative',
               compression: 'none', headers: { 'api-key': 'k' }, resource: { 'service.name': 'edge', 'deployment.environment': 'prod' } } }",
        )
        .unwrap();
        assert_eq!(config.url.path, "/v1/metrics");
        assert_eq!(
            (config.histograms, config.scale, config.temporality, config.gzip),
            (OtlpHistograms::Explicit, 3, Temporality::Cumulative, false)
        );
        assert_eq!(config.headers, vec![("api-key".to_string(), "k".to_string())]);
        let names: Vec<&str> = config.resource.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, vec!["host.name", "service.name", "deployment.environment"]);
        for (text, key) in [
            ("{ otlp: { endpoint: 'grpc://x:4317' } }", "otlp.endpoint"),
            ("{ otlp: { histograms: 'native' } }", "otlp.histograms"),
            ("{ otlp: { scale: 9 } }", "otlp.scale"),
            ("{ otlp: { scale: 2.5 } }", "otlp.scale"),
            ("{ otlp: { temporality: 'both' } }", "otlp.temporality"),
            ("{ otlp: { compression: 'zstd' } }", "otlp.compression"),
            ("{ otlp: { resource: { a: 1 } } }", "otlp.resource"),
            ("{ otlp: { retryBufferBytes: 10 } }", "otlp.retryBufferBytes"),
        ] {
            let error = read(text).unwrap_err().to_string();
            assert!(error.contains(key), "{text}: {error}");
        }
    }
}
