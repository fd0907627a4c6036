//! A flush as `ExportMetricsServiceRequest`s (OTLP/HTTP, protobuf), pure: no clock, no I/O.
//!
//! ```text
//! ExportMetricsServiceRequest { repeated ResourceMetrics resource_metrics = 1; }
//! ResourceMetrics  { Resource resource = 1; repeated ScopeMetrics scope_metrics = 2; }
//! Resource         { repeated KeyValue attributes = 1; }
//! ScopeMetrics     { InstrumentationScope scope = 1; repeated Metric metrics = 2; }
//! InstrumentationScope { string name = 1; string version = 2; }
//! KeyValue         { string key = 1; AnyValue value = 2; }   AnyValue { string string_value = 1; }
//! Metric           { string name = 1; string unit = 3; Gauge gauge = 5; Sum sum = 7;
//!                    Histogram histogram = 9; ExponentialHistogram exponential_histogram = 10; }
//! Gauge            { repeated NumberDataPoint data_points = 1; }
//! Sum              { repeated NumberDataPoint data_points = 1; AggregationTemporality aggregation_temporality = 2; bool is_monotonic = 3; }
//! Histogram, ExponentialHistogram { repeated ...DataPoint data_points = 1; AggregationTemporality aggregation_temporality = 2; }
//! NumberDataPoint  { repeated KeyValue attributes = 7; fixed64 start_time_unix_nano = 2;
//!                    fixed64 time_unix_nano = 3; double as_double = 4; }
//! HistogramDataPoint { repeated KeyValue attributes = 9; fixed64 start_time_unix_nano = 2; fixed64 time_unix_nano = 3;
//!                    fixed64 count = 4; double sum = 5; repeated fixed64 bucket_counts = 6;
//!                    repeated double explicit_bounds = 7; double min = 11; double max = 12; }
//! ExponentialHistogramDataPoint { repeated KeyValue attributes = 1; fixed64 start_time_unix_nano = 2;
//!                    fixed64 time_unix_nano = 3; fixed64 count = 4; double sum = 5; sint32 scale = 6;
//!                    fixed64 zero_count = 7; Buckets positive = 8; Buckets negative = 9;
//!                    double min = 12; double max = 13; double zero_threshold = 14; }
//! Buckets          { sint32 offset = 1; repeated uint64 bucket_counts = 2; }
//! ```
//!
//! A series key `name;k=v` is the metric `name` with the attribute `k="v"`; the points of one
//! name and type are one `Metric`. `ms` timers have the unit `ms`.

use std::collections::BTreeMap;
use std::io::Write as _;

use agg::Snapshot;
use bytes::Bytes;
use circllhist::{Bucket, Histogram};

use super::config::{OtlpConfig, OtlpHistograms, Temporality};
use super::state::{HistogramValues, Running};
use crate::exposition::wire;
use crate::sinks::delivery::Request;
use crate::sinks::prometheus::native::Native;

/// `AggregationTemporality` values.
const DELTA: u64 = 1;
const CUMULATIVE: u64 = 2;

/// What the requests of every flush share: the resource and scope, encoded once.
#[derive(Debug, Clone)]
pub struct Encoder {
    /// `ResourceMetrics.resource` with its tag.
    resource: Vec<u8>,
    /// `ScopeMetrics.scope` with its tag.
    scope: Vec<u8>,
    histograms: OtlpHistograms,
    scale: i32,
    temporality: Temporality,
    gzip: bool,
    monotonic_counters: bool,
    max_request_bytes: usize,
}

/// The kinds of metric, in the order a request lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Sum,
    Gauge,
    Histogram,
}

/// The points of one metric, encoded, waiting for the rest of its name's series.
#[derive(Default)]
struct Points {
    bytes: Vec<u8>,
    count: u64,
    milliseconds: bool,
}

impl Encoder {
    /// An encoder for `config`'s layout and resource.
    pub fn new(config: &OtlpConfig) -> Encoder {
        let mut attributes = Vec::new();
        for (key, value) in &config.resource {
            key_value(&mut attributes, 0x0a, key, value);
        }
        let mut resource = Vec::new();
        wire::bytes(&mut resource, 0x0a, &attributes);
        let mut scope_fields = Vec::new();
        wire::bytes(&mut scope_fields, 0x0a, b"histd");
        wire::bytes(&mut scope_fields, 0x12, env!("CARGO_PKG_VERSION").as_bytes());
        let mut scope = Vec::new();
        wire::bytes(&mut scope, 0x0a, &scope_fields);
        Encoder {
            resource,
            scope,
            histograms: config.histograms,
            scale: config.scale,
            temporality: config.temporality,
            gzip: config.gzip,
            monotonic_counters: config.monotonic_counters,
            max_request_bytes: config.max_request_bytes(),
        }
    }

    /// The flush's requests (several when it is larger than `maxRequestBytes`); `running`
    /// holds the cumulative totals and is moved on by this flush.
    pub fn encode(&self, snapshot: &Snapshot, running: &mut Running) -> Vec<Request> {
        let time_ns = snapshot.flushed_at_ms.saturating_mul(1_000_000);
        let start_ns = time_ns.saturating_sub(snapshot.interval.as_nanos().min(u128::from(u64::MAX)) as u64);
        if snapshot.late && self.temporality == Temporality::Cumulative {
            self.fold(snapshot, running, start_ns);
            return Vec::new();
        }
        let mut metrics: BTreeMap<(Kind, &str), Points> = BTreeMap::new();
        let mut flush = running.flush();
        for counter in &snapshot.counters {
            let (name, attributes) = split(counter.key);
            let (value, start) = match self.temporality {
                Temporality::Delta => (counter.count, start_ns),
                Temporality::Cumulative => flush.counter(counter.key, counter.count, start_ns),
            };
            number_point(metrics.entry((Kind::Sum, name)).or_default(), &attributes, start, time_ns, value);
        }
        for gauge in &snapshot.gauges {
            let (name, attributes) = split(&gauge.key);
            number_point(metrics.entry((Kind::Gauge, name)).or_default(), &attributes, start_ns, time_ns, gauge.value);
        }
        for set in &snapshot.sets {
            let (name, attributes) = split(&set.key);
            number_point(
                metrics.entry((Kind::Gauge, name)).or_default(),
                &attributes,
                start_ns,
                time_ns,
                set.count as f64,
            );
        }
        for timer in &snapshot.timers {
            let (name, attributes) = split(&timer.key);
            let interval = HistogramValues::of_interval(timer, self.histograms, self.scale);
            let points = metrics.entry((Kind::Histogram, name)).or_default();
            points.milliseconds |= timer.milliseconds;
            match self.temporality {
                Temporality::Delta => self.histogram_point(points, &attributes, start_ns, time_ns, &interval),
                Temporality::Cumulative => {
                    let (values, start) = flush.timer(&timer.key, interval, start_ns);
                    self.histogram_point(points, &attributes, start, time_ns, values);
                }
            }
        }
        drop(flush);
        let mut requests = Requests::new(self);
        for ((kind, name), points) in metrics {
            let count = points.count;
            requests.add(&self.metric(kind, name, points), count);
        }
        requests.finish()
    }

    /// A late interval into the running totals (cumulative temporality): its points would go
    /// back in time, so the flushes that next report its series carry it. With delta
    /// temporality a late interval is sent as it is, stamped with its own time.
    fn fold(&self, snapshot: &Snapshot, running: &mut Running, start_ns: u64) {
        for counter in &snapshot.counters {
            running.fold_counter(counter.key, counter.count, start_ns);
        }
        for timer in &snapshot.timers {
            running.fold_timer(&timer.key, HistogramValues::of_interval(timer, self.histograms, self.scale), start_ns);
        }
    }

    /// A `Metric` field (tagged for `ScopeMetrics.metrics`) holding `points`.
    fn metric(&self, kind: Kind, name: &str, points: Points) -> Vec<u8> {
        let temporality = match self.temporality {
            Temporality::Delta => DELTA,
            Temporality::Cumulative => CUMULATIVE,
        };
        let mut data = points.bytes;
        let data_tag = match kind {
            Kind::Gauge => 0x2a,
            Kind::Sum => {
                wire::uint(&mut data, 0x10, temporality);
                if self.monotonic_counters {
                    wire::uint(&mut data, 0x18, 1);
                }
                0x3a
            }
            Kind::Histogram => {
                wire::uint(&mut data, 0x10, temporality);
                match self.histograms {
                    OtlpHistograms::Explicit => 0x4a,
                    OtlpHistograms::Exponential => 0x52,
                }
            }
        };
        let mut metric = Vec::with_capacity(data.len() + name.len() + 16);
        wire::bytes(&mut metric, 0x0a, name.as_bytes());
        if points.milliseconds {
            wire::bytes(&mut metric, 0x1a, b"ms");
        }
        wire::bytes(&mut metric, data_tag, &data);
        let mut field = Vec::with_capacity(metric.len() + 4);
        wire::bytes(&mut field, 0x12, &metric);
        field
    }

    fn histogram_point(
        &self,
        points: &mut Points,
        attributes: &[(&str, &str)],
        start_ns: u64,
        time_ns: u64,
        values: &HistogramValues,
    ) {
        let mut point = Vec::new();
        let attribute_tag = match self.histograms {
            OtlpHistograms::Explicit => 0x4a,
            OtlpHistograms::Exponential => 0x0a,
        };
        for (key, value) in attributes {
            key_value(&mut point, attribute_tag, key, value);
        }
        wire::fixed64(&mut point, 0x11, start_ns);
        wire::fixed64(&mut point, 0x19, time_ns);
        wire::fixed64(&mut point, 0x21, values.count);
        wire::double(&mut point, 0x29, values.sum);
        match (self.histograms, &values.native) {
            (OtlpHistograms::Exponential, Some(native)) => {
                exponential_buckets(&mut point, native);
                optional_double(&mut point, 0x61, values.min);
                optional_double(&mut point, 0x69, values.max);
                wire::double(&mut point, 0x71, 0.0);
            }
            _ => {
                let (bounds, counts) = explicit_buckets(&values.histogram);
                let mut packed = Vec::with_capacity(counts.len() * 8);
                counts.iter().for_each(|count| packed.extend_from_slice(&count.to_le_bytes()));
                wire::bytes(&mut point, 0x32, &packed);
                if !bounds.is_empty() {
                    packed.clear();
                    bounds.iter().for_each(|bound| packed.extend_from_slice(&bound.to_le_bytes()));
                    wire::bytes(&mut point, 0x3a, &packed);
                }
                optional_double(&mut point, 0x59, values.min);
                optional_double(&mut point, 0x61, values.max);
            }
        }
        wire::bytes(&mut points.bytes, 0x0a, &point);
        points.count += 1;
    }
}

/// A series key's name and its tags as attributes.
fn split(key: &str) -> (&str, Vec<(&str, &str)>) {
    let (name, tags) = proto::key::split_series_key(key);
    (name, tags.collect())
}

/// Appends a `NumberDataPoint` (as `data_points`) holding `value`.
fn number_point(points: &mut Points, attributes: &[(&str, &str)], start_ns: u64, time_ns: u64, value: f64) {
    let mut point = Vec::with_capacity(48);
    for (key, value) in attributes {
        key_value(&mut point, 0x3a, key, value);
    }
    wire::fixed64(&mut point, 0x11, start_ns);
    wire::fixed64(&mut point, 0x19, time_ns);
    wire::double(&mut point, 0x21, value);
    wire::bytes(&mut points.bytes, 0x0a, &point);
    points.count += 1;
}

/// Appends a `KeyValue` field with a string value.
fn key_value(out: &mut Vec<u8>, tag: u8, key: &str, value: &str) {
    let mut any = Vec::with_capacity(value.len() + 2);
    wire::bytes(&mut any, 0x0a, value.as_bytes());
    let mut pair = Vec::with_capacity(key.len() + any.len() + 4);
    wire::bytes(&mut pair, 0x0a, key.as_bytes());
    wire::bytes(&mut pair, 0x12, &any);
    wire::bytes(out, tag, &pair);
}

/// A `double` present only when it is a number (min and max of an interval without values
/// are NaN).
fn optional_double(out: &mut Vec<u8>, tag: u8, value: f64) {
    if !value.is_nan() {
        wire::double(out, tag, value);
    }
}

/// The scale, zero count and dense positive and negative buckets of `native`. OTLP's bucket
/// `i` is `(base^i, base^(i+1)]`, Prometheus' bucket `i + 1`.
fn exponential_buckets(out: &mut Vec<u8>, native: &Native) {
    wire::uint(out, 0x30, wire::zigzag(i64::from(native.schema)));
    wire::fixed64(out, 0x39, native.zero_count);
    for (tag, side) in [(0x42, &native.positive), (0x4a, &native.negative)] {
        let Some((&first, _)) = side.first_key_value() else { continue };
        // Dense counts from the first bucket: a zero (one byte) for each empty one between.
        let mut packed = Vec::with_capacity(side.len() * 2);
        let mut next = first;
        for (&index, &count) in side {
            packed.resize(packed.len() + (index - next) as usize, 0);
            wire::varint(&mut packed, count);
            next = index + 1;
        }
        let mut buckets = Vec::with_capacity(packed.len() + 8);
        wire::uint(&mut buckets, 0x08, wire::zigzag(i64::from(first) - 1));
        wire::bytes(&mut buckets, 0x12, &packed);
        wire::bytes(out, tag, &buckets);
    }
}

/// Explicit buckets whose bounds are the edges of `histogram`'s populated bins, in order:
/// each bin is the bucket `(low, high]` between its edges (exact zeros the bucket whose upper
/// bound is 0), so every bin stays whole and the gaps between bins are empty buckets.
/// Returns the bounds and one count more than bounds (the last bucket, above every bound, is
/// empty). NaN's bin is left out.
pub fn explicit_buckets(histogram: &Histogram) -> (Vec<f64>, Vec<u64>) {
    let mut bounds: Vec<f64> = Vec::with_capacity(histogram.bin_count() * 2);
    let mut counts: Vec<u64> = Vec::with_capacity(histogram.bin_count() * 2 + 1);
    let bound = |bounds: &mut Vec<f64>, counts: &mut Vec<u64>, at: f64| {
        if bounds.last() != Some(&at) {
            bounds.push(at);
            counts.push(0);
        }
    };
    for (bucket, count) in histogram.bins() {
        if bucket.is_nan() {
            continue;
        }
        let (low, high) = bin_edges(bucket);
        if !bucket.is_zero() {
            bound(&mut bounds, &mut counts, low);
        }
        bound(&mut bounds, &mut counts, high);
        if let Some(last) = counts.last_mut() {
            *last += count;
        }
    }
    counts.push(0);
    (bounds, counts)
}

/// A bin's edges toward -∞ and toward +∞, each computed as its neighbour's edge is, so that
/// neighbouring bins share their bound to the bit.
fn bin_edges(bucket: Bucket) -> (f64, f64) {
    let (val, exp) = (bucket.val(), bucket.exp());
    let outward = match val {
        0 => return (0.0, 0.0),
        99 => exp.checked_add(1).and_then(|exp| Bucket::new(10, exp)),
        -99 => exp.checked_add(1).and_then(|exp| Bucket::new(-10, exp)),
        v if v > 0 => Bucket::new(v + 1, exp),
        v => Bucket::new(v - 1, exp),
    };
    let far = outward.map_or(bucket.edge() + bucket.width().copysign(bucket.edge()), Bucket::edge);
    match val > 0 {
        true => (bucket.edge(), far),
        false => (far, bucket.edge()),
    }
}

/// Metrics packed into requests of at most `maxRequestBytes` (a metric larger than that goes
/// alone).
struct Requests<'a> {
    encoder: &'a Encoder,
    metrics: Vec<u8>,
    points: u64,
    done: Vec<Request>,
}

impl<'a> Requests<'a> {
    fn new(encoder: &'a Encoder) -> Requests<'a> {
        Requests { encoder, metrics: Vec::new(), points: 0, done: Vec::new() }
    }

    fn add(&mut self, metric: &[u8], points: u64) {
        if !self.metrics.is_empty() && self.metrics.len() + metric.len() > self.encoder.max_request_bytes {
            self.cut();
        }
        self.metrics.extend_from_slice(metric);
        self.points += points;
    }

    fn cut(&mut self) {
        if self.metrics.is_empty() {
            return;
        }
        let mut scope_metrics = Vec::with_capacity(self.encoder.scope.len() + self.metrics.len());
        scope_metrics.extend_from_slice(&self.encoder.scope);
        scope_metrics.append(&mut self.metrics);
        let mut resource_metrics = Vec::with_capacity(scope_metrics.len() + self.encoder.resource.len() + 8);
        resource_metrics.extend_from_slice(&self.encoder.resource);
        wire::bytes(&mut resource_metrics, 0x12, &scope_metrics);
        let mut request = Vec::with_capacity(resource_metrics.len() + 8);
        wire::bytes(&mut request, 0x0a, &resource_metrics);
        let body = if self.encoder.gzip { gzip(&request) } else { request };
        self.done.push(Request { body: Bytes::from(body), points: self.points });
        self.points = 0;
    }

    fn finish(mut self) -> Vec<Request> {
        self.cut();
        self.done
    }
}

/// `bytes` gzipped (the fast level: a flush is compressed on the sink's task once).
pub fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::with_capacity(bytes.len() / 4), flate2::Compression::fast());
    let written = encoder.write_all(bytes).and_then(|()| encoder.finish());
    written.unwrap_or_else(|_| unreachable!("writing to a Vec cannot fail"))
}
