//! The `prometheus` section: remote-write targets, the unit of timers, the classic bucket
//! boundaries, what `/metrics` shows of histograms, and how long idle series live.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use super::mapping::Mapper;
use crate::config_reader::keys::{histd, KeyDoc};
use crate::config_reader::{ConfigError, Reader};
use crate::http_client::HttpUrl;
use crate::sinks::http_settings::HttpSettings;

/// Prometheus' `DefBuckets`, in seconds.
pub const DEFAULT_BUCKETS: [f64; 11] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

/// How a histogram becomes Prometheus series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HistogramMode {
    /// Cumulative `<name>_bucket{le="…"}` at the configured boundaries, `_sum`, `_count`.
    Classic,
    /// VictoriaMetrics' `<name>_bucket{vmrange="<lo>...<hi>"}`, one per non-empty circllhist
    /// bin (exact, no re-binning), `_sum`, `_count`.
    Vmrange,
    /// Prometheus native histograms at `nativeSchema` (re-binned: see `native.rs`): remote
    /// write, and `/metrics` in protobuf (with classic buckets beside them; text scrapes get
    /// the classic buckets only).
    Native,
}

impl HistogramMode {
    fn parse(reader: &Reader<'_>, key: &str) -> Result<HistogramMode, ConfigError> {
        match reader.string(key)?.as_deref() {
            None | Some("classic") => Ok(HistogramMode::Classic),
            Some("vmrange") => Ok(HistogramMode::Vmrange),
            Some("native") => Ok(HistogramMode::Native),
            Some(other) => Err(reader.error(key, format!("'{other}' is not classic, vmrange or native"))),
        }
    }

    /// The name a config uses.
    pub fn name(self) -> &'static str {
        match self {
            HistogramMode::Classic => "classic",
            HistogramMode::Vmrange => "vmrange",
            HistogramMode::Native => "native",
        }
    }
}

/// One remote-write receiver.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteWriteTarget {
    /// `name` (`remote_write_<index>`): its telemetry's name in `stats` and `/health`.
    pub name: String,
    /// `url`, and what every HTTP destination is given (`headers`: `Authorization`,
    /// `X-Scope-OrgID`...; the retry buffer holds compressed requests).
    pub http: HttpSettings,
    /// `histograms` (`classic`): `classic`, `vmrange` or `native`.
    pub histograms: HistogramMode,
}

/// The prometheus backend's settings.
#[derive(Debug, Clone)]
pub struct PrometheusConfig {
    /// `prometheus.remoteWrite` (none).
    pub remote_write: Vec<RemoteWriteTarget>,
    /// `prometheus.timerSeconds` (true): `ms` timers are exported in seconds, as
    /// statsd_exporter does (`h`/`d` histograms keep their unit).
    pub timer_seconds: bool,
    /// `prometheus.buckets` (DefBuckets, in the exported unit): classic `le` boundaries, sorted.
    pub buckets: Vec<f64>,
    /// `prometheus.scrapeHistograms` (`classic`): what `/metrics` shows of histograms.
    pub scrape_histograms: HistogramMode,
    /// `prometheus.ttlSeconds` (0: never): a series not updated for this long is forgotten
    /// (remote write sends it a stale marker).
    pub ttl: Option<Duration>,
    /// `prometheus.mappingFile` (none): statsd_exporter's mapping file, compiled.
    pub mapping: Option<Arc<Mapper>>,
    /// The file it was read from.
    pub mapping_file: Option<PathBuf>,
    /// `prometheus.nativeSchema` (5): the resolution of native histograms (edges are powers of
    /// `2^(2^-schema)`: 5 is 2.2% wide buckets).
    pub native_schema: i32,
    /// `prometheus.externalLabels` (none): labels added to every remote-written series, as
    /// Prometheus' `external_labels` (`{instance: "web-1"}`), so that hosts writing the same
    /// names stay distinct series; a series' own label of the same name wins.
    pub external_labels: Vec<(String, String)>,
}

impl Default for PrometheusConfig {
    fn default() -> Self {
        PrometheusConfig {
            remote_write: Vec::new(),
            timer_seconds: true,
            buckets: DEFAULT_BUCKETS.to_vec(),
            scrape_histograms: HistogramMode::Classic,
            ttl: None,
            native_schema: 5,
            mapping: None,
            mapping_file: None,
            external_labels: Vec::new(),
        }
    }
}

impl PrometheusConfig {
    /// The settings as `histd check-config` prints them.
    pub fn effective(&self) -> Value {
        let targets: Vec<Value> = self
            .remote_write
            .iter()
            .map(|t| {
                let url = &t.http.url;
                let mut shown = t.http.effective();
                shown.insert("name".into(), json!(t.name));
                shown.insert("url".into(), json!(format!("{}://{}{}", url.scheme(), url.authority(), url.path)));
                shown.insert("histograms".into(), json!(t.histograms.name()));
                Value::Object(shown)
            })
            .collect();
        json!({
            "remoteWrite": targets, "timerSeconds": self.timer_seconds, "buckets": self.buckets,
            "scrapeHistograms": self.scrape_histograms.name(), "ttlSeconds": self.ttl.map_or(0, |t| t.as_secs()),
            "nativeSchema": self.native_schema, "mappingFile": self.mapping_file,
            "externalLabels": self.external_labels.iter().map(|(k, v)| (k.clone(), json!(v))).collect::<serde_json::Map<_, _>>(),
        })
    }
}

/// Reads `prometheus.*`.
pub fn prometheus(top: &Reader<'_>) -> Result<PrometheusConfig, ConfigError> {
    let section = top.object("prometheus")?;
    let timer_seconds = section.bool("timerSeconds", true)?;
    let buckets = match section.raw("buckets") {
        None if timer_seconds => DEFAULT_BUCKETS.to_vec(),
        None => DEFAULT_BUCKETS.iter().map(|b| b * 1000.0).collect(),
        Some(_) => buckets(&section)?,
    };
    let ttl = match section.number("ttlSeconds")? {
        None => None,
        Some(0.0) => None,
        Some(s) if s > 0.0 && s.is_finite() => Some(Duration::from_secs_f64(s)),
        Some(s) => return Err(section.error("ttlSeconds", format!("expected seconds (0: never), got {s}"))),
    };
    let mapping_file = section.string("mappingFile")?.map(PathBuf::from);
    let mapping = match &mapping_file {
        None => None,
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| section.error("mappingFile", format!("cannot read {}: {e}", path.display())))?;
            Some(
                Mapper::from_yaml(&text)
                    .map_err(|e| section.error("mappingFile", format!("{}: {e}", path.display())))?,
            )
        }
    };
    let mut remote_write = Vec::new();
    for (index, target) in section.array("remoteWrite")?.iter().enumerate() {
        let key = section.key_path(&format!("remoteWrite[{index}]"));
        let Value::Object(object) = target else {
            return Err(ConfigError { key, message: format!("expected {{url, histograms, headers}}, got {target}") });
        };
        remote_write.push(remote_write_target(&section.element(object, key), index)?);
    }
    Ok(PrometheusConfig {
        remote_write,
        timer_seconds,
        buckets,
        scrape_histograms: HistogramMode::parse(&section, "scrapeHistograms")?,
        ttl,
        native_schema: native_schema(&section)?,
        mapping: mapping.map(Arc::new),
        mapping_file,
        external_labels: external_labels(&section)?,
    })
}

fn native_schema(section: &Reader<'_>) -> Result<i32, ConfigError> {
    match section.number("nativeSchema")? {
        None => Ok(5),
        Some(s) if s.fract() == 0.0 && super::native::SCHEMAS.contains(&(s as i32)) => Ok(s as i32),
        Some(s) => Err(section.error("nativeSchema", format!("expected an integer from -4 to 8, got {s}"))),
    }
}

/// `externalLabels`: an object of label names (valid Prometheus names) and non-empty values.
fn external_labels(section: &Reader<'_>) -> Result<Vec<(String, String)>, ConfigError> {
    let mut labels = Vec::new();
    for (name, value) in crate::config_reader::string_object(section, "externalLabels")? {
        let valid = !name.is_empty() && name == super::names::escape(&name) && !name.starts_with("__");
        if !valid || value.is_empty() {
            let message = format!(
                "'{name}: {value}' is not a label: a name of [A-Za-z0-9_] not starting with a digit or __, and a value"
            );
            return Err(section.error("externalLabels", message));
        }
        labels.push((name, value));
    }
    labels.sort();
    Ok(labels)
}

fn buckets(section: &Reader<'_>) -> Result<Vec<f64>, ConfigError> {
    let mut buckets = Vec::new();
    for value in section.array("buckets")? {
        match crate::config_reader::number_of(value) {
            Some(b) if b.is_finite() => buckets.push(b),
            _ => return Err(section.error("buckets", format!("expected finite numbers, got {value}"))),
        }
    }
    if buckets.windows(2).any(|pair| pair[0] >= pair[1]) {
        return Err(section.error("buckets", "expected increasing boundaries"));
    }
    Ok(buckets)
}

fn remote_write_target(target: &Reader<'_>, index: usize) -> Result<RemoteWriteTarget, ConfigError> {
    let url = target.string("url")?.ok_or_else(|| target.error("url", "is missing"))?;
    let url = HttpUrl::parse(&url).map_err(|message| target.error("url", message))?;
    Ok(RemoteWriteTarget {
        name: target.string("name")?.unwrap_or_else(|| format!("remote_write_{index}")),
        http: HttpSettings::read(target, url, None)?,
        histograms: HistogramMode::parse(target, "histograms")?,
    })
}

/// Its keys, for README's table (`config/keys.rs`).
pub const KEYS: &[KeyDoc] = crate::with_http_keys!("prometheus.remoteWrite[]", "headers added to every request, an object of strings (`Authorization`, `X-Scope-OrgID`)", [
    histd(&["prometheus.remoteWrite"], "none", "remote-write 1.0 receivers (Prometheus `--web.enable-remote-write-receiver`, VictoriaMetrics, Mimir, Thanos): `[{url, name, histograms, headers, timeoutMs, retryBufferBytes, tls}]`; with the `prometheus` backend every flush sends every series, at the flush's time"),
    histd(&["prometheus.remoteWrite[].url"], "required", "`http://host:port/path` (`/api/v1/write`), or `https://`: over TLS, the server's certificate checked against the system's trusted roots (`SSL_CERT_FILE` or `SSL_CERT_DIR` name others) and the target's `tls.caFile`; a 4xx answer other than 429 drops the request (`dropped_points.rejected`)"),
    histd(&["prometheus.remoteWrite[].name"], "`remote_write_<index>`", "the target's telemetry is `prometheus.<name>` in `stats`, `/health` and `/metrics`"),
    histd(&["prometheus.remoteWrite[].histograms"], "`classic`", "`classic`: cumulative `le` buckets at `prometheus.buckets`; `vmrange`: one VictoriaMetrics `vmrange` bucket per circllhist bin (exact, for VictoriaMetrics only); `native`: Prometheus native histograms at `prometheus.nativeSchema` (the receiver needs `--enable-feature=native-histograms` before Prometheus 3.8)"),
    histd(&["prometheus.timerSeconds"], "true", "export `ms` timers in seconds, as statsd_exporter does (`h` and `d` histograms keep their unit)"),
    histd(&["prometheus.buckets"], "Prometheus' DefBuckets `[0.005 … 10]` (×1000 without `timerSeconds`)", "classic `le` boundaries, increasing; exact for boundaries with two significant digits. A bucket counts the values below its boundary (circllhist bins are lower-inclusive)"),
    histd(&["prometheus.scrapeHistograms"], "`classic`", "histograms on `/metrics`: `classic`; `vmrange` (for vmagent or VictoriaMetrics scraping; always served as text 0.0.4); `native`: the protobuf exposition to scrapers that ask for it, each histogram with native and classic buckets (text scrapers get the classic ones)"),
    histd(&["prometheus.ttlSeconds"], "0 (never)", "forget a series not updated for this long (remote write sends it a stale marker); a counter that comes back starts again from 0, which `rate()` reads as a reset"),
    histd(&["prometheus.nativeSchema"], "5", "native histograms' resolution, -4 to 8: bucket edges are powers of 2^(2^-schema) (5: 2.2% wide). Each circllhist bin is spread over the native buckets it overlaps; a quantile stays within its circllhist bin widened by one native bucket"),
    histd(&["prometheus.mappingFile"], "none", "a statsd_exporter mapping file (YAML), read unchanged: `match` (glob or regex), `name`, `labels` with `$1`/`${1}`, `action: drop`, `match_metric_type`, `help`, `ttl`, `scale`, `honor_labels`, `histogram_options.buckets`, `observer_type: summary` with `summary_options`, `defaults`; globs first, then regexes, first match wins"),
    histd(&["prometheus.externalLabels"], "none", "labels added to every remote-written series, as Prometheus' `external_labels` (`{instance: 'web-1'}`): hosts writing the same names to one receiver must differ by one; a series' own tag of that name wins"),
]);
