//! `GET /api/v1/live`: the current interval so far, for `histd top` (and anyone polling): the
//! header figures (cumulative input counts, flushes, receive buffer, memory, store size, each
//! sink's telemetry), the busiest series with their rate, p50, p99 and samples at or above a
//! threshold, cardinality by metric name and tag key, and the hottest name prefixes.
//!
//! Cost: one pass over every series under the aggregation lock (timers' waiting values are
//! binned then, as the flush would), a sort of what matched, histograms cloned for the rows
//! returned only. BENCHMARKS.md measures it at 100k series.

use std::collections::{HashMap, HashSet};

use agg::{LiveSeries, MetricType};

use super::api::sinks_map;
use super::HttpState;
use crate::clock::{unix_now_ms, unix_now_s};
use crate::contract::{self, finite, Live, LiveRequest, SortBy};
use crate::query_params::BadParameter;

/// Names and prefixes listed in the cardinality and prefix tables.
const TOP_NAMES: usize = 20;

/// A row's figure for sorting by `sort` (higher first; names sort apart).
fn sort_figure(sort: SortBy, row: &LiveSeries) -> f64 {
    let figure = match sort {
        SortBy::Name => 0.0,
        SortBy::Rate if matches!(row.kind, MetricType::Counters | MetricType::Timers) => row.value,
        SortBy::Rate => f64::NEG_INFINITY,
        SortBy::Value => row.value,
        SortBy::P50 => row.quantiles.map_or(f64::NEG_INFINITY, |q| q.0),
        SortBy::P99 => row.quantiles.map_or(f64::NEG_INFINITY, |q| q.1),
        SortBy::Above => row.at_or_above.map_or(f64::NEG_INFINITY, |n| n as f64),
    };
    if figure.is_nan() {
        f64::NEG_INFINITY
    } else {
        figure
    }
}

/// The parameters, read, with the `match` regex compiled.
pub(crate) struct Asked {
    limit: usize,
    sort: SortBy,
    pattern: Option<regex::Regex>,
    threshold: Option<f64>,
    /// `tables=1`: the cardinality and prefix tables too (a pass over every key).
    tables: bool,
    /// `keys`: only these series (empty: every series).
    keys: HashSet<String>,
}

impl Asked {
    /// The same question for the rows of `keys` alone (what a group asks a member for the rows
    /// it left out).
    pub(crate) fn only(&self, keys: &[String]) -> Asked {
        Asked {
            limit: keys.len().max(1),
            sort: self.sort,
            pattern: None,
            threshold: self.threshold,
            tables: false,
            keys: keys.iter().cloned().collect(),
        }
    }

    /// The rows asked for, the column they are sorted by, the tables asked or not.
    pub(crate) fn shape(&self) -> (usize, SortBy) {
        (self.limit, self.sort)
    }
}

/// What a `/api/v1/live` request asks for, its `match` regex compiled; one that does not
/// compile is named.
pub(crate) fn asked(request: &LiveRequest) -> Result<Asked, BadParameter> {
    let pattern = match &request.pattern {
        None => None,
        Some(text) => Some(
            regex::RegexBuilder::new(text)
                .size_limit(1 << 20)
                .build()
                .map_err(|e| BadParameter { name: "match", message: format!("not a regex: {e}") })?,
        ),
    };
    let LiveRequest { limit, sort, threshold, tables, keys, .. } = request;
    let keys = keys.iter().cloned().collect();
    Ok(Asked { limit: *limit, sort: *sort, pattern, threshold: *threshold, tables: *tables, keys })
}

/// What is read under the aggregation lock.
pub(crate) struct Taken {
    interval_s: f64,
    totals: agg::IngestCounts,
    /// Every series; the matched ones first, the first `limit` of them sorted.
    series: Vec<LiveSeries>,
    matched: usize,
    /// The histograms of the rows returned (timers).
    histograms: Vec<Option<circllhist::Histogram>>,
    flush_lag: Option<f64>,
}

/// Reads every series, selects and sorts the rows asked for, clones their histograms.
pub(crate) fn take(aggregation: &crate::aggregation::Aggregation, asked: &Asked) -> Taken {
    let mut aggregator = aggregation.current();
    let lag_key = format!("{}.timestamp_lag", aggregator.config().prefix_stats);
    let mut series = aggregator.live_series(asked.threshold);
    let flush_lag = series.iter().find(|row| row.key == lag_key).map(|row| row.value);
    let matched = select(&mut series, asked);
    let histograms = series[..matched.min(asked.limit)]
        .iter()
        .map(|row| if row.kind == MetricType::Timers { aggregator.live_histogram(&row.key) } else { None })
        .collect();
    let interval_s = aggregator.config().interval_seconds();
    Taken { interval_s, totals: aggregator.totals().clone(), series, matched, histograms, flush_lag }
}

/// This daemon's own live view.
pub(crate) fn answer(state: &HttpState, asked: &Asked) -> Live {
    let aggregation = &state.admin.aggregation;
    let started_ms = aggregation.last_flush_unix_ms.get();
    let elapsed_s = (unix_now_ms().saturating_sub(started_ms) as f64 / 1000.0).max(0.001);
    let Taken { interval_s, totals, mut series, matched, histograms, flush_lag } = take(aggregation, asked);
    let per_type = count_types(&series);
    let (cardinality, prefixes) = match asked.tables {
        true => (Some(cardinality(&series)), Some(prefixes(&series, elapsed_s, &state.prefix_stats))),
        false => (None, None),
    };
    series.truncate(matched.min(asked.limit));
    let rows = series.iter().zip(&histograms).map(|(row, histogram)| series_row(row, histogram, elapsed_s)).collect();
    Live {
        now_ms: unix_now_ms(),
        uptime_s: unix_now_s().saturating_sub(state.admin.started_unix_s),
        interval: contract::Interval { seconds: interval_s, elapsed_s },
        totals: contract::Totals {
            packets: totals.packets,
            lines: totals.lines,
            bad_lines: proto::ParseError::ALL
                .iter()
                .zip(totals.bad_by_reason)
                .map(|(reason, n)| (reason.as_str().to_string(), n))
                .collect(),
            kernel_drops: totals.kernel_drops,
            truncated_datagrams: totals.truncated_datagrams,
            bad_line_examples: super::api::bad_line_examples(&totals.bad_examples),
        },
        receive_buffer_bytes: state.admin.edges.receive_buffer_bytes.get(),
        receive_queue_bytes: receive_queue_bytes(&state.ingress.udp_ports()),
        flush_lag_s: flush_lag,
        rss_bytes: crate::bench::daemon_stats::memory(std::process::id()).map_or(0, |(rss, _)| rss),
        flushes: aggregation.flushes.get(),
        last_flush_duration_ms: aggregation.last_flush_us.get() as f64 / 1000.0,
        store_bytes: store_bytes(state),
        series_count: contract::SeriesCount {
            counter: per_type[0] as u64,
            timer: per_type[1] as u64,
            gauge: per_type[2] as u64,
            set: per_type[3] as u64,
        },
        sinks: sinks_map(&state.admin.sinks.telemetry()),
        sink_last_errors: super::api::sink_last_errors(&state.admin.sinks.telemetry()),
        alerts: active_alerts(state),
        series: rows,
        matched: matched as u64,
        truncated: matched > asked.limit,
        cardinality,
        prefixes,
        partial: None,
        members: None,
        kafka: state.global.standing(),
    }
}

/// Keeps the rows `asked.pattern` matches at the front, sorted; how many matched. (The rest
/// stays behind them for the cardinality and prefix tables, which count every series.)
fn select(series: &mut [LiveSeries], asked: &Asked) -> usize {
    let matches = |row: &LiveSeries| {
        asked.pattern.as_ref().is_none_or(|p| p.is_match(&row.key))
            && (asked.keys.is_empty() || asked.keys.contains(row.key.as_str()))
    };
    let mut matched = 0;
    for index in 0..series.len() {
        if matches(&series[index]) {
            series.swap(matched, index);
            matched += 1;
        }
    }
    let sort = asked.sort;
    let order = |a: &LiveSeries, b: &LiveSeries| match sort {
        SortBy::Name => a.key.cmp(&b.key),
        // Rates are values over the same elapsed time: they sort as the values.
        _ => sort_figure(sort, b).total_cmp(&sort_figure(sort, a)).then_with(|| a.key.cmp(&b.key)),
    };
    // Only the rows returned are sorted: the first `limit` picked in linear time, then ordered.
    let rows = &mut series[..matched];
    if asked.limit < rows.len() {
        rows.select_nth_unstable_by(asked.limit, order);
    }
    rows[..asked.limit.min(matched)].sort_unstable_by(order);
    matched
}

fn series_row(row: &LiveSeries, histogram: &Option<circllhist::Histogram>, elapsed_s: f64) -> contract::SeriesRow {
    let rate = matches!(row.kind, MetricType::Counters | MetricType::Timers).then(|| row.value / elapsed_s);
    contract::SeriesRow {
        name: row.key.to_string(),
        kind: type_name(row.kind).to_string(),
        value: finite(row.value),
        rate: rate.and_then(finite),
        p50: row.quantiles.and_then(|q| finite(q.0)),
        p99: row.quantiles.and_then(|q| finite(q.1)),
        at_or_above: row.at_or_above,
        bins: histogram.as_ref().map(store::bins_of),
    }
}

fn type_name(kind: MetricType) -> &'static str {
    match kind {
        MetricType::Counters => "counter",
        MetricType::Timers => "timer",
        MetricType::Gauges => "gauge",
        MetricType::Sets => "set",
    }
}

/// A metric name's series, and the distinct values of each of its tag keys.
type NameTally<'a> = (usize, HashMap<&'a str, hashbrown::HashSet<&'a str>>);

/// The number of series of each type.
fn count_types(series: &[LiveSeries]) -> [usize; 4] {
    let mut per_type = [0usize; 4];
    series.iter().for_each(|row| per_type[type_index(row.kind)] += 1);
    per_type
}

/// Metric names by number of series (the busiest `TOP_NAMES`, then one "other" row), each
/// with the distinct values of each tag key.
fn cardinality(series: &[LiveSeries]) -> contract::Cardinality {
    let mut names: HashMap<&str, NameTally<'_>> = HashMap::new();
    for row in series {
        let (name, tags) = proto::key::split_series_key(&row.key);
        let entry = names.entry(name).or_default();
        entry.0 += 1;
        for (key, value) in tags {
            entry.1.entry(key).or_default().insert(value);
        }
    }
    let mut ranked: Vec<(&str, NameTally<'_>)> = names.into_iter().collect();
    ranked.sort_unstable_by(|a, b| b.1 .0.cmp(&a.1 .0).then_with(|| a.0.cmp(b.0)));
    let other: usize = ranked.iter().skip(TOP_NAMES).map(|(_, (n, _))| n).sum();
    let other_names = ranked.len().saturating_sub(TOP_NAMES);
    let names = ranked
        .iter()
        .take(TOP_NAMES)
        .map(|(name, (count, tags))| {
            let mut tags: Vec<(String, u64)> = tags.iter().map(|(k, v)| (k.to_string(), v.len() as u64)).collect();
            tags.sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            contract::NameRow { name: name.to_string(), series: *count as u64, tags }
        })
        .collect();
    contract::Cardinality { names, other: contract::Other { names: other_names as u64, series: other as u64 } }
}

fn type_index(kind: MetricType) -> usize {
    match kind {
        MetricType::Counters => 0,
        MetricType::Timers => 1,
        MetricType::Gauges => 2,
        MetricType::Sets => 3,
    }
}

/// The hottest first segments of names (`api` of `api.latency`), and first two (`api.latency`),
/// by counter increments plus timer samples per second, with their share of the whole.
/// The name prefixes bringing the most traffic (counters' increments and timers' samples), with
/// their share; histd's own series (under `prefix_stats`) are not traffic and are left out.
fn prefixes(series: &[LiveSeries], elapsed_s: f64, prefix_stats: &str) -> Vec<contract::Prefix> {
    let mut volume: HashMap<&str, f64> = HashMap::new();
    let mut total = 0.0;
    let own = format!("{prefix_stats}.");
    let traffic = |r: &&LiveSeries| {
        matches!(r.kind, MetricType::Counters | MetricType::Timers)
            && (prefix_stats.is_empty() || !r.key.starts_with(&own))
    };
    for row in series.iter().filter(traffic) {
        let amount = row.value.abs();
        if !amount.is_finite() {
            continue;
        }
        total += amount;
        let name = row.key.split(';').next().unwrap_or_default();
        let mut dots = name.match_indices('.').map(|(at, _)| at);
        for end in [dots.next(), dots.next()].into_iter().flatten() {
            *volume.entry(&name[..end]).or_default() += amount;
        }
    }
    let mut ranked: Vec<(&str, f64)> = volume.into_iter().collect();
    ranked.sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    ranked
        .iter()
        .take(TOP_NAMES)
        .map(|(prefix, amount)| {
            let share = if total > 0.0 { amount / total } else { 0.0 };
            contract::Prefix { prefix: prefix.to_string(), rate: amount / elapsed_s, share }
        })
        .collect()
}

/// Bytes waiting in the UDP listeners' receive buffers (the kernel's count, /proc/net/udp).
fn receive_queue_bytes(ports: &[u16]) -> u64 {
    ports.iter().filter_map(|&port| crate::bench::socket_stats::counts(port).ok()).map(|c| c.queued_bytes).sum()
}

/// The alert rules firing or pending: `{name, state, summary}`.
fn active_alerts(state: &HttpState) -> Vec<contract::ActiveAlert> {
    let Some(alerts) = &state.alerts else { return Vec::new() };
    alerts
        .view()
        .alerts
        .into_iter()
        .filter(|rule| rule.state != "inactive")
        .map(|rule| contract::ActiveAlert { name: rule.name, state: rule.state, summary: rule.summary })
        .collect()
}

/// The store's files (database and write-ahead log), when the store is on.
fn store_bytes(state: &HttpState) -> Option<u64> {
    let database = state.database()?;
    let size = |suffix: &str| {
        let mut path = database.clone().into_os_string();
        path.push(suffix);
        std::fs::metadata(path).map_or(0, |m| m.len())
    };
    Some(size("") + size("-wal"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use compact_str::CompactString;

    fn row(key: &str, kind: MetricType, value: f64, p99: Option<f64>) -> LiveSeries {
        LiveSeries {
            key: CompactString::from(key),
            kind,
            value,
            quantiles: p99.map(|p| (p / 2.0, p)),
            at_or_above: p99.map(|p| p as u64),
        }
    }

    fn rows() -> Vec<LiveSeries> {
        vec![
            row("api.latency;route=/a", MetricType::Timers, 10.0, Some(900.0)),
            row("api.latency;route=/b", MetricType::Timers, 30.0, Some(100.0)),
            row("api.hits;route=/a", MetricType::Counters, 500.0, None),
            row("db.pool", MetricType::Gauges, 7000.0, None),
            row("users", MetricType::Sets, 3.0, None),
        ]
    }

    fn asked(sort: SortBy, pattern: Option<&str>) -> Asked {
        Asked {
            limit: 10,
            sort,
            pattern: pattern.map(|p| regex::Regex::new(p).unwrap()),
            threshold: None,
            tables: false,
            keys: HashSet::new(),
        }
    }

    #[test]
    fn rows_sort_by_the_column_asked_and_match_filters_them() {
        let cases: &[(SortBy, Option<&str>, &[&str])] = &[
            (
                SortBy::Rate,
                None,
                &["api.hits;route=/a", "api.latency;route=/b", "api.latency;route=/a", "db.pool", "users"],
            ),
            (
                SortBy::P99,
                None,
                &["api.latency;route=/a", "api.latency;route=/b", "api.hits;route=/a", "db.pool", "users"],
            ),
            (SortBy::Name, Some("latency"), &["api.latency;route=/a", "api.latency;route=/b"]),
            (SortBy::Value, Some("^(db|users)"), &["db.pool", "users"]),
        ];
        for (sort, pattern, want) in cases {
            let mut series = rows();
            let matched = select(&mut series, &asked(*sort, *pattern));
            let got: Vec<&str> = series[..matched].iter().map(|r| r.key.as_str()).collect();
            assert_eq!(&got, want, "{sort:?} {pattern:?}");
            let mut series = rows();
            let top_two = select(&mut series, &Asked { limit: 2, ..asked(*sort, *pattern) });
            let got: Vec<&str> = series[..top_two.min(2)].iter().map(|r| r.key.as_str()).collect();
            assert_eq!(got, want[..want.len().min(2)], "the first 2 of {sort:?} {pattern:?}");
        }
        let mut series = rows();
        let keys = HashSet::from(["users".to_string(), "db.pool".to_string(), "gone".to_string()]);
        let matched = select(&mut series, &Asked { keys, ..asked(SortBy::Name, None) });
        let got: Vec<&str> = series[..matched].iter().map(|r| r.key.as_str()).collect();
        assert_eq!(got, ["db.pool", "users"], "keys: those rows alone");
    }

    #[test]
    fn cardinality_counts_series_per_name_and_values_per_tag() {
        let mut series = rows();
        series.push(row("api.latency;route=/c;env=prod", MetricType::Timers, 1.0, Some(1.0)));
        let table = cardinality(&series);
        assert_eq!(count_types(&series), [1, 3, 1, 1]);
        let tags = vec![("route".to_string(), 3), ("env".to_string(), 1)];
        assert_eq!(table.names[0], contract::NameRow { name: "api.latency".into(), series: 3, tags });
        series.push(row("statsd.metrics_received", MetricType::Counters, 100_000.0, None));
        let prefixes = prefixes(&series, 2.0, "statsd");
        assert_eq!(prefixes[0].prefix, "api", "histd's own counters are not traffic");
        assert_eq!(prefixes[0].rate, (10.0 + 30.0 + 500.0 + 1.0) / 2.0);
        assert!(prefixes.iter().all(|p| p.prefix != "statsd"));
    }
}
