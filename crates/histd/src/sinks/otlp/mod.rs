//! The otlp backend: each flush as an OTLP/HTTP protobuf request (`ExportMetricsServiceRequest`,
//! gzipped unless `otlp.compression: "none"`) to an OpenTelemetry collector or any OTLP
//! receiver.
//!
//! What it sends: counters as monotonic `Sum`s (the interval's `value / rate` total, or with
//! `temporality: "cumulative"` the running total since the series began), gauges as `Gauge`s,
//! sets as `Gauge`s of their distinct members, timers and `h`/`d` histograms as
//! `ExponentialHistogram`s at `otlp.scale` or, with `histograms: "explicit"`, as `Histogram`s
//! whose bounds are the point's populated circllhist edges. Every histogram point carries the
//! exact count, sum, min and max beside its buckets. A series' tags are its attributes; the
//! resource names this histd (`service.name`, `host.name`, and `otlp.resource`).
//!
//! What it loses: exponential buckets re-bin circllhist's bins (each bin's samples spread
//! over the buckets it overlaps, as `prometheus/native.rs` does: quantiles stay within the
//! circllhist bin widened by a bucket); explicit buckets keep every bin whole, but OTLP's
//! buckets are upper-inclusive where circllhist's are lower-inclusive, so a value exactly on
//! an edge (`100|ms`) is counted in the bucket whose lower bound it is. NaN and ±∞ samples
//! are in neither.

pub mod config;
pub mod encode;
mod sink;
pub mod state;
#[cfg(test)]
mod tests;

use serde_json::Value;

pub use config::OtlpConfig;
pub use sink::{judge, partial_success};

use super::{Backend, Context, FileContents, Shared, Started};
use crate::config_reader::keys::KeyDoc;
use crate::config_reader::{ConfigError, Reader};

/// The otlp backend: OTLP/HTTP to an OpenTelemetry collector.
pub struct Otlp;

impl Backend for Otlp {
    const NAME: &'static str = "otlp";
    const KEYS: &'static [KeyDoc] = config::KEYS;
    type Settings = OtlpConfig;

    fn read(top: &Reader<'_>, _listed: bool) -> Result<OtlpConfig, ConfigError> {
        config::otlp(top)
    }

    fn effective(settings: &OtlpConfig) -> Value {
        settings.effective()
    }

    fn check_files(settings: &OtlpConfig) -> Vec<String> {
        settings.http.check_files("otlp")
    }

    /// Its settings (header values included), its TLS files' bytes and `sinkQueueBytes`.
    type Identity = (OtlpConfig, FileContents, u64);

    fn identity(settings: &OtlpConfig, shared: &Shared) -> Self::Identity {
        (settings.clone(), settings.http.files(), shared.sink_queue_bytes)
    }

    /// Its `retryBufferBytes` bounds the requests waiting; the queue of flushes is
    /// `sinkQueueBytes`.
    fn start(settings: &OtlpConfig, context: Context) -> anyhow::Result<Started> {
        Ok(Started::task(sink::spawn(settings, context)?))
    }
}
