//! What `/api/v1/live` answers, read with serde (the fields `histd top` shows).

use std::collections::BTreeMap;

use serde::Deserialize;

/// One answer.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Live {
    /// The daemon's clock, unix milliseconds.
    pub now_ms: u64,
    /// Seconds since the daemon started.
    pub uptime_s: u64,
    /// The flush interval and how far into it the figures are.
    pub interval: Interval,
    /// Cumulative input counts.
    pub totals: Totals,
    /// The smallest UDP receive buffer granted (kernel bytes).
    pub receive_buffer_bytes: u64,
    /// Bytes waiting in the UDP receive buffers.
    #[serde(default)]
    pub receive_queue_bytes: u64,
    /// How late the last flush ran past its grid point, in seconds (`timestamp_lag`).
    #[serde(default)]
    pub flush_lag_s: Option<f64>,
    /// The daemon's resident memory.
    pub rss_bytes: u64,
    /// Flushes done.
    pub flushes: u64,
    /// How long the last flush took.
    pub last_flush_duration_ms: f64,
    /// The store's size on disk, when the store is on.
    pub store_bytes: Option<u64>,
    /// Series per type.
    pub series_count: SeriesCount,
    /// Each backend's telemetry.
    pub sinks: BTreeMap<String, BTreeMap<String, f64>>,
    /// Alert rules firing or pending.
    #[serde(default)]
    pub alerts: Vec<ActiveAlert>,
    /// The rows asked for.
    pub series: Vec<SeriesRow>,
    /// Series the filter matched.
    pub matched: u64,
    /// Series per name, distinct values per tag key (asked with `tables=1`).
    #[serde(default, deserialize_with = "null_as_default")]
    pub cardinality: Cardinality,
    /// The hottest name prefixes (asked with `tables=1`).
    #[serde(default, deserialize_with = "null_as_default")]
    pub prefixes: Vec<Prefix>,
}

/// A `null` field read as its type's default.
fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// The interval.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Interval {
    /// The flush interval.
    pub seconds: f64,
    /// Seconds since the last flush.
    pub elapsed_s: f64,
}

/// Input counts since start.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Totals {
    /// Packets.
    pub packets: u64,
    /// Lines.
    pub lines: u64,
    /// Bad lines by reason.
    pub bad_lines: BTreeMap<String, u64>,
    /// Datagrams the kernel dropped.
    pub kernel_drops: u64,
    /// Datagrams cut short.
    pub truncated_datagrams: u64,
    /// The last rejected line of each reason.
    #[serde(default)]
    pub bad_line_examples: BTreeMap<String, BadLineExample>,
}

/// A rejected line as the daemon kept it.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct BadLineExample {
    /// Its first bytes, made printable.
    pub line: String,
    /// The peer that sent it, when known.
    pub source: Option<String>,
    /// When it arrived, unix seconds.
    pub unix_s: u64,
}

/// Series per type.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct SeriesCount {
    /// Counters.
    pub counter: u64,
    /// Timers and histograms.
    pub timer: u64,
    /// Gauges.
    pub gauge: u64,
    /// Sets.
    pub set: u64,
}

/// One series.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub struct SeriesRow {
    /// The series key (`name;tag=value`).
    pub name: String,
    /// `counter`, `timer`, `gauge` or `set`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Counter sum, timer count, gauge value, set size.
    pub value: Option<f64>,
    /// Per second of the interval so far (counters, timers).
    pub rate: Option<f64>,
    /// Timers: median.
    pub p50: Option<f64>,
    /// Timers: 99th percentile.
    pub p99: Option<f64>,
    /// Timers: samples at or above the threshold.
    pub at_or_above: Option<u64>,
    /// Timers: `[lower, upper, count]` bins.
    #[serde(default)]
    pub bins: Vec<(f64, f64, u64)>,
}

/// The cardinality table.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Cardinality {
    /// The names with the most series.
    pub names: Vec<NameRow>,
    /// The rest.
    pub other: Other,
}

/// One metric name.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct NameRow {
    /// The name.
    pub name: String,
    /// Its series.
    pub series: u64,
    /// `[tag key, distinct values]`, most first.
    pub tags: Vec<(String, u64)>,
}

/// Names past the table.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Other {
    /// How many names.
    pub names: u64,
    /// Their series.
    pub series: u64,
}

/// A hot prefix.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Prefix {
    /// The prefix (`api`, `api.latency`).
    pub prefix: String,
    /// Counter increments and timer samples per second.
    pub rate: f64,
    /// Share of all of them.
    pub share: f64,
}

/// An alert rule firing or pending.
#[derive(Debug, Clone, Deserialize)]
pub struct ActiveAlert {
    /// The rule's name.
    pub name: String,
    /// `firing` or `pending`.
    pub state: String,
    /// Its summary, filled in.
    pub summary: String,
}
