//! Remote write 1.0: the series as protobuf `WriteRequest`s (`prompb`), each compressed with
//! snappy's block format, at most [`SERIES_PER_REQUEST`] time series a request. Labels are
//! sorted by name with `__name__` among them; every sample of a flush has the flush's time. A
//! counter, histogram or bin that begins with a flush is sent a 0 at the interval's start
//! first (its value then), so that `increase()` counts its first value.
//!
//! ```text
//! WriteRequest { repeated TimeSeries timeseries = 1; }
//! TimeSeries   { repeated Label labels = 1; repeated Sample samples = 2; }
//! Label        { string name = 1; string value = 2; }
//! Sample       { double value = 1; int64 timestamp = 2; }   // milliseconds
//! ```

use bytes::Bytes;

use super::config::HistogramMode;
use super::native::Native;
use super::samples::{for_each_sample, Layout};
use super::state::{Forgotten, Registry, Starts, Value};
use crate::exposition::wire;

/// Time series in one request (Prometheus sends at most 2000 samples a request by default;
/// receivers take far more: VictoriaMetrics up to 32 MiB a request).
pub const SERIES_PER_REQUEST: usize = 10_000;

/// The value Prometheus reads as "this series ended" (a stale marker).
pub const STALE_NAN: u64 = 0x7ff0_0000_0000_0002;

/// One request ready to send: the snappy-compressed `WriteRequest` and the samples in it.
pub use crate::sinks::delivery::Request;

/// What every request of a flush shares.
pub struct Flush<'a> {
    /// How histograms are laid out.
    pub layout: &'a Layout,
    /// The flush's time.
    pub timestamp_ms: i64,
    /// The start of its interval (at most an hour before: older samples would be out of
    /// bounds for Prometheus' head block).
    pub start_ms: i64,
    /// Labels added to every series (sorted; a series' own label of the same name wins).
    pub external_labels: &'a [(String, String)],
}

/// Every series of `registry`, and a stale marker for each `forgotten` one.
pub fn encode(registry: &Registry, flush: &Flush<'_>, forgotten: &[Forgotten]) -> Vec<Request> {
    let mut batcher = Batcher::new(flush.external_labels);
    let now = Times { sample_ms: flush.timestamp_ms, start_ms: Some(flush.start_ms) };
    for (name, family) in &registry.families {
        let layout = flush.layout.for_family(family.buckets.as_deref(), family.summary.as_ref(), registry.now_unix_s);
        for (labels, series) in &family.series {
            let starts = series.starts(family.kind, (flush.timestamp_ms / 1000) as u64);
            batcher.series(name, labels, &series.value, &layout, now, starts, None);
        }
    }
    let stale = f64::from_bits(STALE_NAN);
    let at = Times { start_ms: None, ..now };
    for gone in forgotten {
        let layout = flush.layout.for_family(gone.buckets.as_deref(), gone.summary.as_ref(), registry.now_unix_s);
        batcher.series(&gone.name, &gone.labels, &gone.value, &layout, at, Starts::Nothing, Some(stale));
    }
    batcher.finish()
}

/// When a series' samples are.
#[derive(Clone, Copy)]
struct Times {
    sample_ms: i64,
    /// Where a sample that begins with this flush gets its 0.
    start_ms: Option<i64>,
}

/// Builds requests: time series are added one by one and cut into requests.
struct Batcher<'a> {
    /// `TimeSeries` fields of the request being built.
    buffer: Vec<u8>,
    series: usize,
    done: Vec<Request>,
    external: &'a [(String, String)],
    /// The samples (or histograms) of the time series being written.
    tail: Vec<u8>,
}

impl<'a> Batcher<'a> {
    fn new(external: &'a [(String, String)]) -> Self {
        Batcher { buffer: Vec::new(), series: 0, done: Vec::new(), external, tail: Vec::new() }
    }

    /// The time series of one series (a sample each, or one native histogram); `stale`
    /// overrides every value.
    #[allow(clippy::too_many_arguments)]
    fn series(
        &mut self,
        name: &str,
        labels: &[(String, String)],
        value: &Value,
        layout: &Layout,
        at: Times,
        starts: Starts<'_>,
        stale: Option<f64>,
    ) {
        // The series' labels and the external ones it does not have itself, borrowed.
        let mut base: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let external = self.external.iter().filter(|(label, _)| !labels.iter().any(|(own, _)| own == label));
        base.extend(external.map(|(k, v)| (k.as_str(), v.as_str())));
        if let (HistogramMode::Native, None, Value::Histogram(cumulative)) = (layout.mode, &layout.summary, value) {
            let empty = Native::default();
            let native = cumulative.native.as_ref().unwrap_or(&empty);
            self.tail.clear();
            if let (Starts::Everything, Some(start)) = (starts, at.start_ms) {
                native_histogram(&mut self.tail, &Native::new(native.schema), 0.0, start);
            }
            native_histogram(&mut self.tail, native, stale.unwrap_or(cumulative.sum), at.sample_ms);
            base.push(("__name__", name));
            self.push(base);
            return;
        }
        let mut metric = String::new();
        for_each_sample(value, layout, starts, |suffix, extra, sample, begins| {
            metric.clear();
            metric.push_str(name);
            metric.push_str(suffix);
            let mut all = base.clone();
            all.push(("__name__", &metric));
            all.extend(extra);
            self.tail.clear();
            if let (true, Some(start)) = (begins, at.start_ms) {
                sample_field(&mut self.tail, 0.0, start);
            }
            sample_field(&mut self.tail, stale.unwrap_or(sample), at.sample_ms);
            self.push(all);
        });
    }

    /// Appends a `TimeSeries` of `labels` (sorted here) and the fields in `tail`; cuts the
    /// request when it is full.
    fn push(&mut self, mut labels: Vec<(&str, &str)>) {
        labels.sort_unstable();
        let label_len = |name: &str, value: &str| wire::field_len(name.len()) + wire::field_len(value.len());
        let labels_len: usize = labels.iter().map(|(name, value)| wire::field_len(label_len(name, value))).sum();
        self.buffer.push(0x0a);
        wire::varint(&mut self.buffer, (labels_len + self.tail.len()) as u64);
        for (name, value) in labels {
            self.buffer.push(0x0a);
            wire::varint(&mut self.buffer, label_len(name, value) as u64);
            wire::bytes(&mut self.buffer, 0x0a, name.as_bytes());
            wire::bytes(&mut self.buffer, 0x12, value.as_bytes());
        }
        self.buffer.extend_from_slice(&self.tail);
        self.series += 1;
        if self.series == SERIES_PER_REQUEST {
            self.cut();
        }
    }

    fn cut(&mut self) {
        if self.series == 0 {
            return;
        }
        let compressed = snap::raw::Encoder::new()
            .compress_vec(&self.buffer)
            .unwrap_or_else(|_| unreachable!("snappy compresses any input below 4 GiB; a request is far smaller"));
        self.done.push(Request { body: Bytes::from(compressed), points: self.series as u64 });
        self.buffer.clear();
        self.series = 0;
    }

    fn finish(mut self) -> Vec<Request> {
        self.cut();
        self.done
    }
}

/// Appends `samples` (field 2 of `TimeSeries`): `Sample { double value = 1; int64 timestamp = 2; }`.
fn sample_field(out: &mut Vec<u8>, value: f64, timestamp_ms: i64) {
    let mut sample = Vec::with_capacity(20);
    wire::double(&mut sample, 0x09, value);
    wire::uint(&mut sample, 0x10, timestamp_ms as u64);
    wire::bytes(out, 0x12, &sample);
}

/// Appends `histograms` (field 4 of `TimeSeries`): an integer native histogram.
///
/// ```text
/// Histogram { uint64 count_int = 1; double sum = 3; sint32 schema = 4; double zero_threshold = 5;
///             uint64 zero_count_int = 6; repeated BucketSpan negative_spans = 8;
///             repeated sint64 negative_deltas = 9; repeated BucketSpan positive_spans = 11;
///             repeated sint64 positive_deltas = 12; int64 timestamp = 15; }
/// ```
fn native_histogram(out: &mut Vec<u8>, native: &Native, sum: f64, timestamp_ms: i64) {
    let mut message = Vec::new();
    wire::uint(&mut message, 0x08, native.count());
    wire::double(&mut message, 0x19, sum);
    wire::uint(&mut message, 0x20, wire::zigzag(i64::from(native.schema)));
    wire::double(&mut message, 0x29, 0.0);
    wire::uint(&mut message, 0x30, native.zero_count);
    wire::native_buckets(&mut message, &native.negative, 0x42, 0x4a);
    wire::native_buckets(&mut message, &native.positive, 0x5a, 0x62);
    wire::uint(&mut message, 0x78, timestamp_ms as u64);
    wire::bytes(out, 0x22, &message);
}
