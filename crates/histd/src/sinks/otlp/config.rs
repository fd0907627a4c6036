//! The `otlp` section: where the requests go, how histograms and time are laid out, the
//! resource that names this histd, and the bounds of what waits.

use serde_json::{json, Value};

use crate::config_reader::keys::{histd, KeyDoc};
use crate::config_reader::{string_object, ConfigError, Reader};
use crate::http_client::HttpUrl;
use crate::sinks::http_settings::HttpSettings;
use crate::sinks::prometheus::native::SCHEMAS;

/// Where requests go when `otlp.endpoint` is absent: a collector on this host.
pub const DEFAULT_ENDPOINT: &str = "http://127.0.0.1:4318/v1/metrics";
/// The default exponential scale: buckets 2.2% wide, as fine as circllhist's bins make worth
/// it (docs/outputs.md: the measured quantile error per scale).
pub const DEFAULT_SCALE: i32 = 5;
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
    /// `otlp.endpoint` (`http://127.0.0.1:4318/v1/metrics`): OTLP/HTTP, protobuf; and what
    /// every HTTP destination is given (`headers`: `Authorization`, API keys;
    /// `maxRequestBytes` 4 MiB, uncompressed).
    pub http: HttpSettings,
    /// The endpoint as given (for `check-config`).
    pub endpoint: String,
    /// `otlp.histograms` (`exponential`).
    pub histograms: OtlpHistograms,
    /// `otlp.scale` (5): the exponential histograms' scale, −4 to 8.
    pub scale: i32,
    /// `otlp.temporality` (`delta`).
    pub temporality: Temporality,
    /// `otlp.resource` (`service.name: histd`, `host.name`: the host name): the resource's
    /// attributes; given ones are added to or replace these two.
    pub resource: Vec<(String, String)>,
    /// `otlp.compression` (`gzip`): `gzip` or `none`.
    pub gzip: bool,
    /// `otlp.monotonicCounters` (true): counters are monotonic Sums; false for counters that
    /// are also decremented (`-1|c`), which a monotonic Sum must not carry.
    pub monotonic_counters: bool,
}

impl Default for OtlpConfig {
    fn default() -> Self {
        OtlpConfig {
            http: HttpSettings {
                url: HttpUrl::parse(DEFAULT_ENDPOINT).unwrap_or_else(|_| unreachable!("a valid URL")),
                headers: Vec::new(),
                timeout: crate::sinks::http_settings::DEFAULT_TIMEOUT,
                retry_buffer_bytes: crate::sinks::http_settings::DEFAULT_RETRY_BUFFER_BYTES,
                max_request_bytes: Some(DEFAULT_MAX_REQUEST_BYTES),
                tls: crate::tls::ClientFiles::default(),
            },
            endpoint: DEFAULT_ENDPOINT.to_string(),
            histograms: OtlpHistograms::Exponential,
            scale: DEFAULT_SCALE,
            temporality: Temporality::Delta,
            resource: default_resource(),
            gzip: true,
            monotonic_counters: true,
        }
    }
}

fn default_resource() -> Vec<(String, String)> {
    vec![("service.name".to_string(), "histd".to_string()), ("host.name".to_string(), crate::sinks::host_name())]
}

impl OtlpConfig {
    /// The settings as `histd check-config` prints them (header values hidden).
    pub fn effective(&self) -> Value {
        let mut shown = self.http.effective();
        let histograms = match self.histograms {
            OtlpHistograms::Exponential => "exponential",
            OtlpHistograms::Explicit => "explicit",
        };
        let temporality = match self.temporality {
            Temporality::Delta => "delta",
            Temporality::Cumulative => "cumulative",
        };
        let resource = self.resource.iter().map(|(k, v)| (k.clone(), Value::from(v.clone())));
        for (key, value) in [
            ("endpoint", json!(self.endpoint)),
            ("histograms", json!(histograms)),
            ("scale", json!(self.scale)),
            ("temporality", json!(temporality)),
            ("resource", Value::Object(resource.collect())),
            ("compression", json!(if self.gzip { "gzip" } else { "none" })),
            ("monotonicCounters", json!(self.monotonic_counters)),
        ] {
            shown.insert(key.into(), value);
        }
        Value::Object(shown)
    }

    /// The largest request, uncompressed.
    pub fn max_request_bytes(&self) -> usize {
        self.http.max_request_bytes.unwrap_or(DEFAULT_MAX_REQUEST_BYTES)
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
        http: HttpSettings::read(&section, url, Some(DEFAULT_MAX_REQUEST_BYTES))?,
        endpoint,
        histograms,
        scale,
        temporality,
        resource,
        gzip,
        monotonic_counters: section.bool("monotonicCounters", defaults.monotonic_counters)?,
    })
}

/// Its keys, for README's table (`config/keys.rs`).
pub const KEYS: &[KeyDoc] = crate::with_http_keys!("otlp", "added to every request (`Authorization`, an API key)", [
    histd(&["otlp.endpoint"], "`http://127.0.0.1:4318/v1/metrics`", "with the `otlp` backend, where each flush is POSTed as OTLP/HTTP protobuf (`/v1/metrics` when the URL has no path); `https://` goes over TLS, checked as for remote write"),
    histd(&["otlp.histograms"], "`exponential`", "timers and `h`/`d` as `exponential` histograms (re-binned at `otlp.scale`, exact count, sum, min, max) or `explicit` histograms whose bounds are each point's populated circllhist edges (every bin whole)"),
    histd(&["otlp.scale"], "5", "the exponential histograms' scale, -4 to 8: buckets `2^(2^-scale)` wide (5: 2.2%); docs/outputs.md has the measured quantile error per scale"),
    histd(&["otlp.temporality"], "`delta`", "`delta`: each point holds its flush interval; `cumulative`: counters and histograms hold running totals since the series began (a series deleted as idle starts over)"),
    histd(&["otlp.monotonicCounters"], "true", "counters are sent as monotonic Sums; `false` sends them as non-monotonic Sums (an UpDownCounter), for counters that are also decremented (`-1|c`), which a monotonic Sum must not carry"),
    histd(&["otlp.resource"], "`service.name: histd`, `host.name`: the host name", "the resource's attributes, added to or replacing those two"),
    histd(&["otlp.compression"], "`gzip`", "`gzip` or `none`"),
    histd(&["otlp.maxRequestBytes"], "4194304 (4 MiB)", "a flush larger than this before compression is sent in several requests (whole metrics each)"),
]);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn settings_are_read_or_refused_naming_the_key() {
        let read =
            |text: &str| Config::from_text(text).map(|config| config.settings::<crate::sinks::otlp::Otlp>().clone());
        let config = read("{ backends: ['otlp'] }").unwrap();
        assert_eq!(config.http.url, HttpUrl::parse(DEFAULT_ENDPOINT).unwrap());
        assert_eq!(
            (config.histograms, config.scale, config.temporality, config.gzip),
            (OtlpHistograms::Exponential, 5, Temporality::Delta, true)
        );
        let config = read(
            "{ otlp: { endpoint: 'http://collector:4318', histograms: 'explicit', scale: 3, temporality: 'cumulative',
               compression: 'none', headers: { 'api-key': 'k' }, resource: { 'service.name': 'edge', 'deployment.environment': 'prod' } } }",
        )
        .unwrap();
        assert_eq!(config.http.url.path, "/v1/metrics");
        assert_eq!(
            (config.histograms, config.scale, config.temporality, config.gzip),
            (OtlpHistograms::Explicit, 3, Temporality::Cumulative, false)
        );
        assert_eq!(config.http.headers, vec![("api-key".to_string(), "k".to_string())]);
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
