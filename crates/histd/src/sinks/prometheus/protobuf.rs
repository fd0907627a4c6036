//! The protobuf exposition (`io.prometheus.client.MetricFamily`, length-delimited), the only
//! scrape format that carries native histograms: with `scrapeHistograms: "native"` a scraper
//! that asks for it (Prometheus with `--enable-feature=native-histograms`, or
//! `scrape_native_histograms`) gets each histogram with both its native buckets and its
//! classic `le` buckets.
//!
//! ```text
//! MetricFamily { string name = 1; string help = 2; MetricType type = 3; repeated Metric metric = 4; }
//! Metric       { repeated LabelPair label = 1; Gauge gauge = 2; Counter counter = 3; Histogram histogram = 7; }
//! LabelPair    { string name = 1; string value = 2; }
//! Gauge, Counter { double value = 1; }
//! Histogram    { uint64 sample_count = 1; double sample_sum = 2; repeated Bucket bucket = 3;
//!                sint32 schema = 5; double zero_threshold = 6; uint64 zero_count = 7;
//!                repeated BucketSpan negative_span = 9; repeated sint64 negative_delta = 10;
//!                repeated BucketSpan positive_span = 12; repeated sint64 positive_delta = 13; }
//! Bucket       { uint64 cumulative_count = 1; double upper_bound = 2; }
//! ```

use super::encode::{write_bytes, write_native_buckets, write_varint, zigzag};
use super::histogram::classic;
use super::native::Native;
use super::state::{Kind, Registry, Value};

/// The content type of the protobuf exposition.
pub const CONTENT_TYPE: &str =
    "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited";

/// True when `accept` asks for the protobuf exposition with a weight at least that of any
/// text format.
pub fn wants_protobuf(accept: &str) -> bool {
    let weight =
        |part: &str| part.split(';').find_map(|f| f.trim().strip_prefix("q=")?.parse::<f64>().ok()).unwrap_or(1.0);
    let (mut protobuf, mut text) = (0.0f64, 0.0f64);
    for part in accept.split(',') {
        let media = part.split(';').next().unwrap_or_default().trim();
        if media == "application/vnd.google.protobuf" && part.contains("io.prometheus.client.MetricFamily") {
            protobuf = protobuf.max(weight(part));
        } else if media == "text/plain" || media == "application/openmetrics-text" {
            text = text.max(weight(part));
        }
    }
    protobuf > 0.0 && protobuf >= text
}

/// Every family of `registry` (histograms with native and classic `bounds` buckets), each
/// prefixed by its length, appended to `out`.
pub fn write_registry(out: &mut Vec<u8>, registry: &Registry, bounds: &[f64]) {
    for (name, family) in &registry.families {
        let bounds = family.buckets.as_deref().unwrap_or(bounds);
        let mut metrics = Vec::new();
        for (labels, series) in &family.series {
            let message = match (&family.summary, &series.value) {
                (Some(summary), Value::Histogram(cumulative)) => {
                    let mut message = label_pairs(labels, None);
                    let quantiles = cumulative.window_quantiles(registry.now_unix_s, summary);
                    write_bytes(&mut message, 0x22, &summary_message(cumulative, &summary.quantiles, &quantiles));
                    message
                }
                _ => metric(labels, None, family.kind, &series.value, bounds),
            };
            write_bytes(&mut metrics, 0x22, &message);
        }
        write_family(out, name, family.help.as_deref(), family.exposed_kind(), &metrics);
    }
}

/// A `MetricFamily` whose `Metric` fields (already tagged) are `metrics`, length-prefixed.
pub fn write_family(out: &mut Vec<u8>, name: &str, help: Option<&str>, kind: Kind, metrics: &[u8]) {
    let mut message = Vec::new();
    write_bytes(&mut message, 0x0a, name.as_bytes());
    if let Some(help) = help {
        write_bytes(&mut message, 0x12, help.as_bytes());
    }
    message.push(0x18);
    write_varint(&mut message, family_type(kind));
    message.extend_from_slice(metrics);
    write_varint(out, message.len() as u64);
    out.extend_from_slice(&message);
}

/// Appends a `Metric` field (tagged) holding a counter's or gauge's `value`.
pub fn write_number_metric(
    out: &mut Vec<u8>,
    labels: &[(String, String)],
    extra: Option<(&str, &str)>,
    kind: Kind,
    value: f64,
) {
    write_bytes(out, 0x22, &metric(labels, extra, kind, &Value::Number(value), &[]));
}

fn family_type(kind: Kind) -> u64 {
    match kind {
        Kind::Counter => 0,
        Kind::Gauge => 1,
        Kind::Histogram => 4,
        Kind::Summary => 2,
    }
}

fn metric(
    labels: &[(String, String)],
    extra: Option<(&str, &str)>,
    kind: Kind,
    value: &Value,
    bounds: &[f64],
) -> Vec<u8> {
    let mut metric = label_pairs(labels, extra);
    match value {
        Value::Number(number) => {
            let mut inner = vec![0x09];
            inner.extend_from_slice(&number.to_le_bytes());
            let tag = if kind == Kind::Counter { 0x1a } else { 0x12 };
            write_bytes(&mut metric, tag, &inner);
        }
        Value::Histogram(cumulative) => write_bytes(&mut metric, 0x3a, &histogram(cumulative, bounds)),
    }
    metric
}

/// A `Metric`'s `LabelPair` fields.
fn label_pairs(labels: &[(String, String)], extra: Option<(&str, &str)>) -> Vec<u8> {
    let mut out = Vec::new();
    for (label, text) in labels.iter().map(|(k, v)| (k.as_str(), v.as_str())).chain(extra) {
        let mut pair = Vec::new();
        write_bytes(&mut pair, 0x0a, label.as_bytes());
        write_bytes(&mut pair, 0x12, text.as_bytes());
        write_bytes(&mut out, 0x0a, &pair);
    }
    out
}

/// `Summary { uint64 sample_count = 1; double sample_sum = 2; repeated Quantile quantile = 3; }`,
/// `Quantile { double quantile = 1; double value = 2; }`.
fn summary_message(cumulative: &super::state::Cumulative, quantiles: &[f64], values: &[f64]) -> Vec<u8> {
    let mut message = vec![0x08];
    write_varint(&mut message, cumulative.histogram.count());
    message.push(0x11);
    message.extend_from_slice(&cumulative.sum.to_le_bytes());
    for (q, value) in quantiles.iter().zip(values) {
        let mut quantile = vec![0x09];
        quantile.extend_from_slice(&q.to_le_bytes());
        quantile.push(0x11);
        quantile.extend_from_slice(&value.to_le_bytes());
        write_bytes(&mut message, 0x1a, &quantile);
    }
    message
}

fn histogram(cumulative: &super::state::Cumulative, bounds: &[f64]) -> Vec<u8> {
    let mut message = Vec::new();
    let count = cumulative.histogram.count();
    message.push(0x08);
    write_varint(&mut message, count);
    message.push(0x11);
    message.extend_from_slice(&cumulative.sum.to_le_bytes());
    for (bound, below) in bounds.iter().zip(classic(&cumulative.histogram, bounds)) {
        let mut bucket = vec![0x08];
        write_varint(&mut bucket, below);
        bucket.push(0x11);
        bucket.extend_from_slice(&bound.to_le_bytes());
        write_bytes(&mut message, 0x1a, &bucket);
    }
    if let Some(native) = &cumulative.native {
        write_native_fields(&mut message, native);
    }
    message
}

fn write_native_fields(message: &mut Vec<u8>, native: &Native) {
    message.push(0x28);
    write_varint(message, zigzag(i64::from(native.schema)));
    message.push(0x31);
    message.extend_from_slice(&0f64.to_le_bytes());
    message.push(0x38);
    write_varint(message, native.zero_count);
    write_native_buckets(message, &native.negative, 0x4a, 0x52);
    // An empty histogram still needs a span for Prometheus to read it as native.
    if native.positive.is_empty() && native.negative.is_empty() {
        let span = [0x08, 0x00, 0x10, 0x00];
        write_bytes(message, 0x62, &span);
    }
    write_native_buckets(message, &native.positive, 0x62, 0x6a);
}
