//! `GET /api/v1/live`: what `histd top` asks (rows, their order and filter, the tables) and
//! what the daemon answers (the current interval so far).

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use super::path_with;
use crate::query_params::{count, BadParameter, MAX_PATTERN_BYTES};

/// A column the rows can be sorted by (`sort`); `histd top` names its columns with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortBy {
    /// The series key, ascending.
    Name,
    /// Counter increments or timer samples per second.
    Rate,
    /// The interval's value (counter sum, timer count, gauge value, set size).
    Value,
    /// Median.
    P50,
    /// 99th percentile.
    P99,
    /// Samples at or above the threshold.
    Above,
}

impl SortBy {
    /// In `histd top`'s key order: `1` is the first.
    pub const ALL: [SortBy; 6] = [SortBy::Name, SortBy::Rate, SortBy::Value, SortBy::P50, SortBy::P99, SortBy::Above];

    /// The `sort` parameter's value.
    pub fn parameter(self) -> &'static str {
        match self {
            SortBy::Name => "name",
            SortBy::Rate => "rate",
            SortBy::Value => "value",
            SortBy::P50 => "p50",
            SortBy::P99 => "p99",
            SortBy::Above => "above",
        }
    }

    /// The column a `sort` value names.
    pub fn named(text: &str) -> Option<SortBy> {
        SortBy::ALL.into_iter().find(|column| column.parameter() == text)
    }
}

/// What a `/api/v1/live` request asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveRequest {
    /// The most rows (`limit`: 1 to [`LiveRequest::MOST_ROWS`], 50 when absent).
    pub limit: usize,
    /// Their order (`sort`, `rate` when absent).
    pub sort: SortBy,
    /// A regex the series key must match (`match`).
    pub pattern: Option<String>,
    /// Timers: count the samples at or above this (`threshold`).
    pub threshold: Option<f64>,
    /// The cardinality and prefix tables too (`tables=1`: a pass over every key).
    pub tables: bool,
    /// Only these series keys (`keys`, one per line; empty: every key).
    pub keys: Vec<String>,
}

impl LiveRequest {
    /// The route.
    pub const PATH: &'static str = "/api/v1/live";
    /// Its parameters, as `openapi.json` lists them.
    pub const PARAMETERS: [&'static str; 6] = ["limit", "sort", "match", "threshold", "tables", "keys"];
    /// Rows when `limit` is absent.
    pub const DEFAULT_ROWS: usize = 50;
    /// The most rows one answer gives.
    pub const MOST_ROWS: usize = 1000;

    /// The request its parameters spell; a bad one is named. (The `match` regex is compiled
    /// by the handler, which names it when it does not compile.)
    pub fn from_query(query: &HashMap<String, String>) -> Result<LiveRequest, BadParameter> {
        let get = |name: &str| query.get(name).map(String::as_str);
        let pattern = match get("match") {
            None | Some("") => None,
            Some(text) if text.len() > MAX_PATTERN_BYTES => {
                return Err(BadParameter { name: "match", message: format!("longer than {MAX_PATTERN_BYTES} bytes") })
            }
            Some(text) => Some(text.to_string()),
        };
        let threshold = match get("threshold") {
            None => None,
            Some(text) => Some(
                text.trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|t| t.is_finite())
                    .ok_or_else(|| BadParameter { name: "threshold", message: format!("'{text}' is not a number") })?,
            ),
        };
        let sort_text = get("sort").unwrap_or("rate");
        let sort = SortBy::named(sort_text).ok_or_else(|| BadParameter {
            name: "sort",
            message: format!("'{sort_text}' is not name, rate, value, p50, p99 or above"),
        })?;
        Ok(LiveRequest {
            limit: count("limit", get("limit"), Self::DEFAULT_ROWS, Self::MOST_ROWS)?,
            sort,
            pattern,
            threshold,
            tables: matches!(get("tables"), Some("1" | "true")),
            keys: get("keys").map_or_else(Vec::new, |text| {
                text.lines().filter(|key| !key.is_empty()).take(Self::MOST_ROWS).map(str::to_string).collect()
            }),
        })
    }

    /// The path and query that ask for it.
    pub fn path_and_query(&self) -> String {
        path_with(
            Self::PATH,
            [
                ("limit", Some(self.limit.to_string())),
                ("sort", Some(self.sort.parameter().to_string())),
                ("match", self.pattern.clone()),
                ("threshold", self.threshold.map(|t| t.to_string())),
                ("tables", self.tables.then(|| "1".to_string())),
                ("keys", (!self.keys.is_empty()).then(|| self.keys.join("\n"))),
            ],
        )
    }
}

/// One answer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
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
    /// Why each backend that failed last failed, by backend name.
    #[serde(default)]
    pub sink_last_errors: BTreeMap<String, String>,
    /// Alert rules firing or pending.
    #[serde(default)]
    pub alerts: Vec<ActiveAlert>,
    /// The rows asked for.
    pub series: Vec<SeriesRow>,
    /// Series the filter matched.
    pub matched: u64,
    /// More matched than `limit`: the first `limit` rows are given.
    #[serde(default)]
    pub truncated: bool,
    /// Series per name, distinct values per tag key (asked with `tables=1`; `null` without).
    #[serde(default)]
    pub cardinality: Option<Cardinality>,
    /// The hottest name prefixes (asked with `tables=1`; `null` without).
    #[serde(default)]
    pub prefixes: Option<Vec<Prefix>>,
    /// Asked of a global with `global.peers`: a member did not answer (`null` otherwise).
    #[serde(default)]
    pub partial: Option<bool>,
    /// Asked of a global with `global.peers`: each member and whether it answered.
    #[serde(default)]
    pub members: Option<Vec<super::Member>>,
    /// A Kafka global: where it stands in its topic (`null` for any other histd).
    #[serde(default)]
    pub kafka: Option<KafkaStanding>,
}

/// One assigned partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PartitionStanding {
    /// The partition.
    pub partition: i32,
    /// The next offset this global reads.
    pub next: i64,
    /// The offset the log ends at for a `read_committed` reader (its last stable offset).
    pub end: i64,
    /// `end - next`: messages waiting.
    pub lag: i64,
}

/// A Kafka global's standing in its topic, as `/health` and `/api/v1/live` show it.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct KafkaStanding {
    /// The topic.
    pub topic: String,
    /// The consumer group.
    pub group: String,
    /// Its static membership id, if any (global/rejoin.rs).
    pub instance_id: Option<String>,
    /// The partitions assigned, with their lag (only those fetching from a known leader).
    pub partitions: Vec<PartitionStanding>,
    /// The lag of them all.
    pub lag: i64,
    /// Partitions whose carried offsets wait for the coordinator's acknowledgement.
    pub commits_pending: u64,
    /// Seconds since the coordinator last acknowledged a commit (none yet: `null`).
    pub last_commit_age_s: Option<u64>,
    /// The lag has grown over each of the last windows without ever falling back: this
    /// global does not keep up (`/health` says `degraded`).
    pub falling_behind: bool,
}

/// The interval.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    /// The flush interval.
    pub seconds: f64,
    /// Seconds since the last flush.
    pub elapsed_s: f64,
}

/// Input counts since start.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BadLineExample {
    /// Its first bytes, made printable.
    pub line: String,
    /// The peer that sent it, when known.
    pub source: Option<String>,
    /// When it arrived, unix seconds.
    pub unix_s: u64,
}

/// Series per type.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
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
    /// Timers: `[lower, upper, count]` bins of the interval's histogram (absent for the rest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bins: Option<Vec<super::Bin>>,
}

impl SeriesRow {
    /// Its bins (none for a series that is not a timer).
    pub fn bins(&self) -> &[super::Bin] {
        self.bins.as_deref().unwrap_or_default()
    }
}

/// The cardinality table.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Cardinality {
    /// The names with the most series.
    pub names: Vec<NameRow>,
    /// The rest.
    pub other: Other,
}

/// One metric name.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NameRow {
    /// The name.
    pub name: String,
    /// Its series.
    pub series: u64,
    /// `[tag key, distinct values]`, most first.
    pub tags: Vec<(String, u64)>,
}

/// Names past the table.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Other {
    /// How many names.
    pub names: u64,
    /// Their series.
    pub series: u64,
}

/// A hot prefix.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Prefix {
    /// The prefix (`api`, `api.latency`).
    pub prefix: String,
    /// Counter increments and timer samples per second.
    pub rate: f64,
    /// Share of all of them.
    pub share: f64,
}

/// An alert rule firing or pending.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActiveAlert {
    /// The rule's name.
    pub name: String,
    /// `firing` or `pending`.
    pub state: String,
    /// Its summary, filled in.
    pub summary: String,
}
