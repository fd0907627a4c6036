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

use super::samples::{for_each_sample, Layout};
use std::collections::BTreeMap;

use super::config::HistogramMode;
use super::native::Native;
use super::state::{Forgotten, Registry, Starts, Value};

/// Time series in one request (Prometheus sends at most 2000 samples a request by default;
/// receivers take far more: VictoriaMetrics up to 32 MiB a request).
pub const SERIES_PER_REQUEST: usize = 10_000;

/// The value Prometheus reads as "this series ended" (a stale marker).
pub const STALE_NAN: u64 = 0x7ff0_0000_0000_0002;

/// One request ready to send.
#[derive(Debug, Clone)]
pub struct Request {
    /// The snappy-compressed `WriteRequest`.
    pub body: Bytes,
    /// The samples it carries.
    pub samples: usize,
}

/// Builds requests: time series are added one by one and cut into requests.
struct Batcher<'a> {
    buffer: Vec<u8>,
    series: usize,
    done: Vec<Request>,
    labels: Vec<(String, String)>,
    external: &'a [(String, String)],
}

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
    let (layout, timestamp_ms) = (flush.layout, flush.timestamp_ms);
    let mut batcher = Batcher {
        buffer: Vec::new(),
        series: 0,
        done: Vec::new(),
        labels: Vec::new(),
        external: flush.external_labels,
    };
    for (name, family) in &registry.families {
        let layout = layout.for_family(family.buckets.as_deref(), family.summary.as_ref(), registry.now_unix_s);
        for (labels, series) in &family.series {
            let starts = series.starts(family.kind, (timestamp_ms / 1000) as u64);
            let at = Times { sample_ms: timestamp_ms, start_ms: Some(flush.start_ms) };
            batcher.series_samples(name, labels, &series.value, &layout, at, starts, None);
        }
    }
    let stale = f64::from_bits(STALE_NAN);
    for gone in forgotten {
        let at = Times { sample_ms: timestamp_ms, start_ms: None };
        let layout = layout.for_family(gone.buckets.as_deref(), None, 0);
        batcher.series_samples(&gone.name, &gone.labels, &gone.value, &layout, at, Starts::Nothing, Some(stale));
    }
    batcher.finish()
}

impl Batcher<'_> {
    /// The samples of one series, each its own time series; `stale` overrides every value.
    #[allow(clippy::too_many_arguments)]
    fn series_samples(
        &mut self,
        name: &str,
        labels: &[(String, String)],
        value: &Value,
        layout: &Layout,
        at: Times,
        starts: Starts<'_>,
        stale: Option<f64>,
    ) {
        if let (HistogramMode::Native, None, Value::Histogram(cumulative)) = (layout.mode, &layout.summary, value) {
            let native = cumulative.native.clone().unwrap_or_default();
            let sum = stale.unwrap_or(cumulative.sum);
            self.native_series(name, labels, &native, sum, at, starts == Starts::Everything);
            return;
        }
        for_each_sample(value, layout, starts, |suffix, extra, sample, begins| {
            self.labels.clear();
            self.labels.push(("__name__".to_string(), format!("{name}{suffix}")));
            self.labels.extend(labels.iter().cloned());
            if let Some((label, text)) = extra {
                self.labels.push((label.to_string(), text.to_string()));
            }
            for (label, text) in self.external {
                if !labels.iter().any(|(own, _)| own == label) {
                    self.labels.push((label.clone(), text.clone()));
                }
            }
            self.labels.sort_unstable();
            let start = at.start_ms.filter(|_| begins);
            write_time_series(&mut self.buffer, &self.labels, start, stale.unwrap_or(sample), at.sample_ms);
            self.series += 1;
            if self.series == SERIES_PER_REQUEST {
                self.cut();
            }
        });
    }

    /// One native histogram series (`__name__` without suffix), an empty one at the interval
    /// start first when it begins with this flush. A stale marker is a `sum` of stale NaN.
    fn native_series(
        &mut self,
        name: &str,
        labels: &[(String, String)],
        native: &Native,
        sum: f64,
        at: Times,
        begins: bool,
    ) {
        self.labels.clear();
        self.labels.push(("__name__".to_string(), name.to_string()));
        self.labels.extend(labels.iter().cloned());
        for (label, text) in self.external {
            if !labels.iter().any(|(own, _)| own == label) {
                self.labels.push((label.clone(), text.clone()));
            }
        }
        self.labels.sort_unstable();
        let mut histograms = Vec::new();
        if let (true, Some(start)) = (begins, at.start_ms) {
            write_native(&mut histograms, &Native::new(native.schema), 0.0, start);
        }
        write_native(&mut histograms, native, sum, at.sample_ms);
        let label_len: usize =
            self.labels.iter().map(|(n, v)| field_len(field_len(n.len()) + field_len(v.len()))).sum();
        self.buffer.push(0x0a);
        write_varint(&mut self.buffer, (label_len + histograms.len()) as u64);
        for (label, text) in &self.labels {
            self.buffer.push(0x0a);
            write_varint(&mut self.buffer, (field_len(label.len()) + field_len(text.len())) as u64);
            write_bytes(&mut self.buffer, 0x0a, label.as_bytes());
            write_bytes(&mut self.buffer, 0x12, text.as_bytes());
        }
        self.buffer.extend_from_slice(&histograms);
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
        self.done.push(Request { body: Bytes::from(compressed), samples: self.series });
        self.buffer.clear();
        self.series = 0;
    }

    fn finish(mut self) -> Vec<Request> {
        self.cut();
        self.done
    }
}

/// When a series' samples are.
#[derive(Clone, Copy)]
struct Times {
    sample_ms: i64,
    /// Where a sample that begins with this flush gets its 0.
    start_ms: Option<i64>,
}

/// Appends `timeseries` (field 1 of `WriteRequest`): a 0 at `start_ms` when given, then
/// `value` at `timestamp_ms`.
fn write_time_series(
    out: &mut Vec<u8>,
    labels: &[(String, String)],
    start_ms: Option<i64>,
    value: f64,
    timestamp_ms: i64,
) {
    let label_lengths = labels.iter().map(|(n, v)| field_len(n.len()) + field_len(v.len()));
    let start_len = start_ms.map_or(0, |start| field_len(sample_len(start)));
    let series_len = label_lengths.map(field_len).sum::<usize>() + start_len + field_len(sample_len(timestamp_ms));
    out.push(0x0a);
    write_varint(out, series_len as u64);
    for (name, text) in labels {
        out.push(0x0a);
        write_varint(out, (field_len(name.len()) + field_len(text.len())) as u64);
        write_bytes(out, 0x0a, name.as_bytes());
        write_bytes(out, 0x12, text.as_bytes());
    }
    if let Some(start) = start_ms {
        write_sample(out, 0.0, start);
    }
    write_sample(out, value, timestamp_ms);
}

/// Appends `histograms` (field 4 of `TimeSeries`): an integer native histogram.
///
/// ```text
/// Histogram { uint64 count_int = 1; double sum = 3; sint32 schema = 4; double zero_threshold = 5;
///             uint64 zero_count_int = 6; repeated BucketSpan negative_spans = 8;
///             repeated sint64 negative_deltas = 9; repeated BucketSpan positive_spans = 11;
///             repeated sint64 positive_deltas = 12; int64 timestamp = 15; }
/// BucketSpan { sint32 offset = 1; uint32 length = 2; }
/// ```
fn write_native(out: &mut Vec<u8>, native: &Native, sum: f64, timestamp_ms: i64) {
    let mut message = Vec::new();
    message.push(0x08);
    write_varint(&mut message, native.count());
    message.push(0x19);
    message.extend_from_slice(&sum.to_le_bytes());
    message.push(0x20);
    write_varint(&mut message, zigzag(i64::from(native.schema)));
    message.push(0x29);
    message.extend_from_slice(&0f64.to_le_bytes());
    message.push(0x30);
    write_varint(&mut message, native.zero_count);
    write_native_buckets(&mut message, &native.negative, 0x42, 0x4a);
    write_native_buckets(&mut message, &native.positive, 0x5a, 0x62);
    message.push(0x78);
    write_varint(&mut message, timestamp_ms as u64);
    write_bytes(out, 0x22, &message);
}

/// Spans of consecutive indices (each offset from the previous span's end) and the counts
/// as deltas from the previous bucket, packed.
pub(super) fn write_native_buckets(out: &mut Vec<u8>, buckets: &BTreeMap<i32, u64>, span_tag: u8, delta_tag: u8) {
    let mut spans: Vec<(i32, u32)> = Vec::new();
    let mut next_index = 0;
    for &index in buckets.keys() {
        match spans.last_mut() {
            Some((_, length)) if index == next_index => *length += 1,
            _ => spans.push((index - next_index, 1)),
        }
        next_index = index + 1;
    }
    for (offset, length) in spans {
        let mut span = Vec::new();
        span.push(0x08);
        write_varint(&mut span, zigzag(i64::from(offset)));
        span.push(0x10);
        write_varint(&mut span, u64::from(length));
        write_bytes(out, span_tag, &span);
    }
    if buckets.is_empty() {
        return;
    }
    let mut deltas = Vec::new();
    let mut previous = 0i64;
    for &count in buckets.values() {
        write_varint(&mut deltas, zigzag(count as i64 - previous));
        previous = count as i64;
    }
    write_bytes(out, delta_tag, &deltas);
}

pub(super) fn zigzag(value: i64) -> u64 {
    ((value << 1) ^ (value >> 63)) as u64
}

/// The bytes of a `Sample` message.
fn sample_len(timestamp_ms: i64) -> usize {
    9 + 1 + varint_len(timestamp_ms as u64)
}

/// Appends `samples` (field 2 of `TimeSeries`).
fn write_sample(out: &mut Vec<u8>, value: f64, timestamp_ms: i64) {
    out.push(0x12);
    write_varint(out, sample_len(timestamp_ms) as u64);
    out.push(0x09);
    out.extend_from_slice(&value.to_le_bytes());
    out.push(0x10);
    write_varint(out, timestamp_ms as u64);
}

/// The bytes of a length-delimited field whose content is `len` bytes (one-byte tag).
fn field_len(len: usize) -> usize {
    1 + varint_len(len as u64) + len
}

pub(super) fn write_bytes(out: &mut Vec<u8>, tag: u8, bytes: &[u8]) {
    out.push(tag);
    write_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn varint_len(value: u64) -> usize {
    (64 - (value | 1).leading_zeros() as usize).div_ceil(7)
}

pub(super) fn write_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}
