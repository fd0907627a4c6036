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
        for (labels, series) in &family.series {
            let starts = series.starts(family.kind, (timestamp_ms / 1000) as u64);
            let at = Times { sample_ms: timestamp_ms, start_ms: Some(flush.start_ms) };
            batcher.series_samples(name, labels, &series.value, layout, at, starts, None);
        }
    }
    let stale = f64::from_bits(STALE_NAN);
    for gone in forgotten {
        let at = Times { sample_ms: timestamp_ms, start_ms: None };
        batcher.series_samples(&gone.name, &gone.labels, &gone.value, layout, at, Starts::Nothing, Some(stale));
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

fn write_bytes(out: &mut Vec<u8>, tag: u8, bytes: &[u8]) {
    out.push(tag);
    write_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn varint_len(value: u64) -> usize {
    (64 - (value | 1).leading_zeros() as usize).div_ceil(7)
}

fn write_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}
