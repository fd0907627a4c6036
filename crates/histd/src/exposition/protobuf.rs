//! Protobuf's exposition (`io.prometheus.client.MetricFamily`, length-delimited): a family
//! and its counters' and gauges' metrics. The prometheus backend's histograms and summaries
//! are written by `sinks/prometheus/protobuf.rs` with the same pieces.
//!
//! ```text
//! MetricFamily { string name = 1; string help = 2; MetricType type = 3; repeated Metric metric = 4; }
//! Metric       { repeated LabelPair label = 1; Gauge gauge = 2; Counter counter = 3; Histogram histogram = 7; }
//! LabelPair    { string name = 1; string value = 2; }
//! Gauge, Counter { double value = 1; }
//! ```

use super::wire;
use super::Kind;

/// The content type of the protobuf exposition.
pub const CONTENT_TYPE: &str =
    "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited";

/// A `MetricFamily` whose `Metric` fields (already tagged) are `metrics`, length-prefixed.
pub fn write_family(out: &mut Vec<u8>, name: &str, help: Option<&str>, kind: Kind, metrics: &[u8]) {
    let mut message = Vec::new();
    wire::bytes(&mut message, 0x0a, name.as_bytes());
    if let Some(help) = help {
        wire::bytes(&mut message, 0x12, help.as_bytes());
    }
    wire::uint(&mut message, 0x18, family_type(kind));
    message.extend_from_slice(metrics);
    wire::varint(out, message.len() as u64);
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
    wire::bytes(out, 0x22, &number_metric(labels, extra, kind, value));
}

/// A `Metric` holding a counter's or gauge's `value`.
pub fn number_metric(labels: &[(String, String)], extra: Option<(&str, &str)>, kind: Kind, value: f64) -> Vec<u8> {
    let mut metric = label_pairs(labels, extra);
    let mut inner = Vec::with_capacity(9);
    wire::double(&mut inner, 0x09, value);
    let tag = if kind == Kind::Counter { 0x1a } else { 0x12 };
    wire::bytes(&mut metric, tag, &inner);
    metric
}

fn family_type(kind: Kind) -> u64 {
    match kind {
        Kind::Counter => 0,
        Kind::Gauge => 1,
        Kind::Histogram => 4,
        Kind::Summary => 2,
    }
}

/// A `Metric`'s `LabelPair` fields.
pub fn label_pairs(labels: &[(String, String)], extra: Option<(&str, &str)>) -> Vec<u8> {
    let mut out = Vec::new();
    for (label, text) in labels.iter().map(|(k, v)| (k.as_str(), v.as_str())).chain(extra) {
        let mut pair = Vec::new();
        wire::bytes(&mut pair, 0x0a, label.as_bytes());
        wire::bytes(&mut pair, 0x12, text.as_bytes());
        wire::bytes(&mut out, 0x0a, &pair);
    }
    out
}
