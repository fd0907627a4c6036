//! The prometheus backend: statsd flushes kept as the cumulative series Prometheus expects,
//! served on `/metrics` and sent by remote write 1.0 to Prometheus, VictoriaMetrics, Mimir or
//! Thanos receivers.
//!
//! What it sends: counters as counters (the running total of `value / rate`), gauges as
//! gauges, sets as gauges (distinct members in the last interval), timers and `h`/`d`
//! histograms as histograms: classic `le` buckets at `prometheus.buckets`, or, for
//! VictoriaMetrics, one `vmrange` bucket per circllhist bin, with no re-binning, so
//! `histogram_quantile` and `histogram_share` across hosts answer from the same bins histd has;
//! or Prometheus native histograms (`native.rs`), by remote write or the protobuf exposition.
//! `ms` timers are exported in seconds (`prometheus.timerSeconds`), as statsd_exporter does.
//!
//! What it loses: classic buckets count values below each boundary (circllhist bins are
//! lower-inclusive; see `histogram.rs`), a boundary with more than two significant digits
//! counts its whole bin above it, and `_sum` weights the interval's exact sum by its mean
//! sample rate; native histograms re-bin (`native.rs` says how and what it costs); a
//! mapping's `observer_type: summary` gets quantiles of the window's circllhist bins.

pub mod config;
pub mod encode;
pub mod exposition;
mod histogram;
pub mod mapping;
pub mod names;
pub mod native;
pub mod protobuf;
pub mod samples;
mod sink;
pub mod state;
#[cfg(test)]
mod tests;

pub use config::{HistogramMode, PrometheusConfig};

/// A circllhist of `values`, one sample each (for the tests of this folder).
#[cfg(test)]
fn histogram_of(values: &[f64]) -> circllhist::Histogram {
    let mut histogram = circllhist::Histogram::new();
    values.iter().for_each(|&v| {
        histogram.insert(v, 1);
    });
    histogram
}
pub use sink::Exposed;

use serde_json::Value;

use super::http_settings::HttpSettings;
use super::{Backend, Context, FileContents, Shared, Started};
use crate::config_reader::keys::KeyDoc;
use crate::config_reader::{ConfigError, Reader};

/// The prometheus backend: `/metrics` for scrapers, and remote write.
pub struct Prometheus;

impl Backend for Prometheus {
    const NAME: &'static str = "prometheus";
    const KEYS: &'static [KeyDoc] = config::KEYS;
    const SERVES_HTTP: bool = true;
    type Settings = PrometheusConfig;

    fn read(top: &Reader<'_>, _listed: bool) -> Result<PrometheusConfig, ConfigError> {
        config::prometheus(top)
    }

    fn effective(settings: &PrometheusConfig) -> Value {
        settings.effective()
    }

    fn check_files(settings: &PrometheusConfig) -> Vec<String> {
        settings.remote_write.iter().flat_map(|target| target.http.check_files("prometheus.remoteWrite[]")).collect()
    }

    /// The remote-write targets' header values are compared too (never printed: they are
    /// credentials): a reload that rotates an `Authorization` header restarts the sink, and the
    /// new one is sent.
    /// Its settings as shown, each remote-write target's (header values included), the bytes
    /// of its mapping file and TLS files, and `sinkQueueBytes`.
    type Identity = (Value, Vec<HttpSettings>, FileContents, u64);

    fn identity(settings: &PrometheusConfig, shared: &Shared) -> Self::Identity {
        let targets: Vec<HttpSettings> = settings.remote_write.iter().map(|target| target.http.clone()).collect();
        let tls = targets.iter().flat_map(|http| http.tls.paths());
        let files = FileContents::of(settings.mapping_file.as_deref().into_iter().chain(tls));
        (settings.effective(), targets, files, shared.sink_queue_bytes)
    }

    fn start(settings: &PrometheusConfig, context: Context) -> anyhow::Result<Started> {
        sink::spawn(settings.clone(), context)
    }
}
