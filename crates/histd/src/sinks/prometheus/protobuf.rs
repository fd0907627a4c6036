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

use super::histogram::classic;
use super::native::Native;
use super::state::{Cumulative, Registry, Value};
use crate::exposition::protobuf::{label_pairs, number_metric, write_family};
use crate::exposition::{wire, Kind};

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
                    wire::bytes(&mut message, 0x22, &summary_message(cumulative, &summary.quantiles, &quantiles));
                    message
                }
                _ => metric(labels, family.kind, &series.value, bounds),
            };
            wire::bytes(&mut metrics, 0x22, &message);
        }
        write_family(out, name, family.help.as_deref(), family.exposed_kind(), &metrics);
    }
}

/// A `Metric` of a series: its number, or its histogram with native and classic `bounds`
/// buckets.
fn metric(labels: &[(String, String)], kind: Kind, value: &Value, bounds: &[f64]) -> Vec<u8> {
    match value {
        Value::Number(number) => number_metric(labels, None, kind, *number),
        Value::Histogram(cumulative) => {
            let mut metric = label_pairs(labels, None);
            wire::bytes(&mut metric, 0x3a, &histogram(cumulative, bounds));
            metric
        }
    }
}

/// `Summary { uint64 sample_count = 1; double sample_sum = 2; repeated Quantile quantile = 3; }`,
/// `Quantile { double quantile = 1; double value = 2; }`.
fn summary_message(cumulative: &Cumulative, quantiles: &[f64], values: &[f64]) -> Vec<u8> {
    let mut message = Vec::new();
    wire::uint(&mut message, 0x08, cumulative.histogram.count());
    wire::double(&mut message, 0x11, cumulative.sum);
    for (q, value) in quantiles.iter().zip(values) {
        let mut quantile = Vec::with_capacity(18);
        wire::double(&mut quantile, 0x09, *q);
        wire::double(&mut quantile, 0x11, *value);
        wire::bytes(&mut message, 0x1a, &quantile);
    }
    message
}

/// `Histogram` with `Bucket { uint64 cumulative_count = 1; double upper_bound = 2; }`.
fn histogram(cumulative: &Cumulative, bounds: &[f64]) -> Vec<u8> {
    let mut message = Vec::new();
    wire::uint(&mut message, 0x08, cumulative.histogram.count());
    wire::double(&mut message, 0x11, cumulative.sum);
    for (bound, below) in bounds.iter().zip(classic(&cumulative.histogram, bounds)) {
        let mut bucket = Vec::with_capacity(20);
        wire::uint(&mut bucket, 0x08, below);
        wire::double(&mut bucket, 0x11, *bound);
        wire::bytes(&mut message, 0x1a, &bucket);
    }
    if let Some(native) = &cumulative.native {
        write_native_fields(&mut message, native);
    }
    message
}

fn write_native_fields(message: &mut Vec<u8>, native: &Native) {
    wire::uint(message, 0x28, wire::zigzag(i64::from(native.schema)));
    wire::double(message, 0x31, 0.0);
    wire::uint(message, 0x38, native.zero_count);
    wire::native_buckets(message, &native.negative, 0x4a, 0x52);
    // An empty histogram still needs a span for Prometheus to read it as native.
    if native.positive.is_empty() && native.negative.is_empty() {
        wire::bytes(message, 0x62, &[0x08, 0x00, 0x10, 0x00]);
    }
    wire::native_buckets(message, &native.positive, 0x62, 0x6a);
}
