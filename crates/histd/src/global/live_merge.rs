//! The live view of a group (`GET /api/v1/live` asked of a global with `global.peers`, what
//! `histd top` shows): the members' answers merged into one. A series' row is the sum of its
//! rows on the members that hold it this interval: counters' and timers' values and rates
//! added, timers' histograms merged bin for bin (circllhist bins are the same everywhere) and
//! their p50, p99 and samples at or above the threshold read from the merged histogram. Whose
//! gauge is newest is not known, so a gauge shows the first member's that has it; a set shows
//! the largest member's size (members' distinct values do not add). Input totals and series
//! counts are added (a series on two members is counted on each); the process figures (memory,
//! flushes, store, sinks, alerts) stay the answering global's own.
//!
//! Each member sends its busiest `limit` rows; the group's busiest are picked from their
//! union, and a member that cut its list is asked again for the rows of those it left out
//! ([`left_out`]), so the figures shown are whole. (A series that is not among any member's
//! busiest, though its sum would be, is not found: the cost of a bounded answer.)

use std::collections::{BTreeMap, HashMap, HashSet};

use circllhist::{Bucket, Histogram};

use super::peers::{add, combine};
use crate::contract::{Bin, Cardinality, Live, NameRow, Prefix, SeriesRow, SortBy};

/// Adds `other`'s input totals, series counts, rows and tables into `into`.
pub fn merge_live(into: &mut Live, other: Live) {
    let totals = &mut into.totals;
    totals.packets += other.totals.packets;
    totals.lines += other.totals.lines;
    totals.kernel_drops += other.totals.kernel_drops;
    totals.truncated_datagrams += other.totals.truncated_datagrams;
    for (reason, count) in other.totals.bad_lines {
        *totals.bad_lines.entry(reason).or_default() += count;
    }
    for (reason, example) in other.totals.bad_line_examples {
        match totals.bad_line_examples.get(&reason) {
            Some(kept) if kept.unix_s >= example.unix_s => {}
            _ => {
                totals.bad_line_examples.insert(reason, example);
            }
        }
    }
    let count = &mut into.series_count;
    count.counter += other.series_count.counter;
    count.timer += other.series_count.timer;
    count.gauge += other.series_count.gauge;
    count.set += other.series_count.set;
    into.matched = into.matched.max(other.matched);
    into.truncated |= other.truncated;
    merge_rows(&mut into.series, other.series);
    into.cardinality = match (into.cardinality.take(), other.cardinality) {
        (Some(mut mine), Some(theirs)) => {
            merge_cardinality(&mut mine, theirs);
            Some(mine)
        }
        (mine, theirs) => mine.or(theirs),
    };
    into.prefixes = match (into.prefixes.take(), other.prefixes) {
        (Some(mine), Some(theirs)) => Some(merge_prefixes(mine, theirs)),
        (mine, theirs) => mine.or(theirs),
    };
}

/// Adds `other`'s rows into `rows`: a series both hold becomes one row (see the module's
/// rules), the others are appended.
pub fn merge_rows(rows: &mut Vec<SeriesRow>, other: Vec<SeriesRow>) {
    let mut at: HashMap<String, usize> =
        rows.iter().enumerate().map(|(index, row)| (row.name.clone(), index)).collect();
    for row in other {
        match at.get(&row.name) {
            Some(&index) => merge_row(&mut rows[index], row),
            None => {
                at.insert(row.name.clone(), rows.len());
                rows.push(row);
            }
        }
    }
}

/// Sorts the merged rows as `sort` orders them (as each member sorted its own), cuts them to
/// `limit`, and says how many series matched (at least the most any member matched, and
/// every series the union lists); `truncated` when rows were cut.
pub fn order_and_cut(live: &mut Live, sort: SortBy, limit: usize) {
    let union = live.series.len() as u64;
    live.series.sort_by(|a, b| match sort {
        SortBy::Name => a.name.cmp(&b.name),
        _ => figure(sort, b).total_cmp(&figure(sort, a)).then_with(|| a.name.cmp(&b.name)),
    });
    live.matched = live.matched.max(union);
    if live.series.len() > limit {
        live.series.truncate(limit);
        live.truncated = true;
    }
}

/// The rows of `wanted` (the group's busiest so far) that a member's answer left out, when it
/// cut its list (a member that listed everything it matched has none of the others).
pub fn left_out(answer: &Live, wanted: &[SeriesRow]) -> Vec<String> {
    if !answer.truncated {
        return Vec::new();
    }
    let listed: HashSet<&str> = answer.series.iter().map(|row| row.name.as_str()).collect();
    wanted.iter().filter(|row| !listed.contains(row.name.as_str())).map(|row| row.name.clone()).collect()
}

/// A row's figure for `sort` (higher first), as the daemon sorts its own rows.
fn figure(sort: SortBy, row: &SeriesRow) -> f64 {
    let figure = match sort {
        SortBy::Name => Some(0.0),
        SortBy::Rate => row.rate,
        SortBy::Value => row.value,
        SortBy::P50 => row.p50,
        SortBy::P99 => row.p99,
        SortBy::Above => row.at_or_above.map(|n| n as f64),
    };
    figure.filter(|f| !f.is_nan()).unwrap_or(f64::NEG_INFINITY)
}

fn merge_row(into: &mut SeriesRow, other: SeriesRow) {
    match into.kind.as_str() {
        "counter" | "timer" => {
            into.value = add(into.value, other.value);
            into.rate = add(into.rate, other.rate);
        }
        "set" => into.value = combine(into.value, other.value, f64::max),
        _ => {} // a gauge: the first member's (whose is newest is not known)
    }
    if into.kind != "timer" {
        return;
    }
    into.at_or_above = match (into.at_or_above, other.at_or_above) {
        (Some(a), Some(b)) => Some(a.saturating_add(b)),
        (a, b) => a.or(b),
    };
    let mut histogram = histogram_of(into.bins());
    histogram.merge(&histogram_of(other.bins()));
    let quantile = |q: f64| (!histogram.is_empty()).then(|| histogram.quantile(q)).and_then(crate::contract::finite);
    into.p50 = quantile(0.5);
    into.p99 = quantile(0.99);
    into.bins = Some(store::bins_of(&histogram));
}

/// The histogram whose bins an answer lists (each bin is one circllhist bucket: its midpoint
/// names it).
pub fn histogram_of(bins: &[Bin]) -> Histogram {
    let mut histogram = Histogram::new();
    for &(lower, upper, count) in bins {
        histogram.insert_bucket(Bucket::of_f64((lower + upper) / 2.0), count);
    }
    histogram
}

/// Names' series added, each tag key's distinct values at least the most a member has; the
/// table cut to as many names as it had.
fn merge_cardinality(into: &mut Cardinality, other: Cardinality) {
    let shown = into.names.len().max(other.names.len());
    let mut names: BTreeMap<String, (u64, BTreeMap<String, u64>)> = BTreeMap::new();
    for row in into.names.drain(..).chain(other.names) {
        let (series, tags) = names.entry(row.name).or_default();
        *series += row.series;
        for (key, values) in row.tags {
            let kept = tags.entry(key).or_default();
            *kept = (*kept).max(values);
        }
    }
    let mut ranked: Vec<NameRow> = names
        .into_iter()
        .map(|(name, (series, tags))| {
            let mut tags: Vec<(String, u64)> = tags.into_iter().collect();
            tags.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            NameRow { name, series, tags }
        })
        .collect();
    ranked.sort_by(|a, b| b.series.cmp(&a.series).then_with(|| a.name.cmp(&b.name)));
    for cut in ranked.drain(shown.min(ranked.len())..) {
        into.other.names += 1;
        into.other.series += cut.series;
    }
    into.other.names += other.other.names;
    into.other.series += other.other.series;
    into.names = ranked;
}

/// Prefixes' rates added, shares of the group's whole.
fn merge_prefixes(mine: Vec<Prefix>, theirs: Vec<Prefix>) -> Vec<Prefix> {
    let shown = mine.len().max(theirs.len());
    // A member's whole is its rate over its share (of any prefix it lists).
    let whole = |list: &[Prefix]| list.iter().find(|p| p.share > 0.0).map_or(0.0, |p| p.rate / p.share);
    let total = whole(&mine) + whole(&theirs);
    let mut rates: BTreeMap<String, f64> = BTreeMap::new();
    for prefix in mine.into_iter().chain(theirs) {
        *rates.entry(prefix.prefix).or_default() += prefix.rate;
    }
    let mut merged: Vec<Prefix> = rates
        .into_iter()
        .map(|(prefix, rate)| Prefix { prefix, rate, share: if total > 0.0 { rate / total } else { 0.0 } })
        .collect();
    merged.sort_by(|a, b| b.rate.total_cmp(&a.rate).then_with(|| a.prefix.cmp(&b.prefix)));
    merged.truncate(shown);
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timer(name: &str, values: &[f64]) -> SeriesRow {
        let mut histogram = Histogram::new();
        values.iter().for_each(|&v| {
            histogram.insert(v, 1);
        });
        SeriesRow {
            name: name.into(),
            kind: "timer".into(),
            value: Some(values.len() as f64),
            rate: Some(values.len() as f64 / 2.0),
            p50: Some(histogram.quantile(0.5)),
            p99: Some(histogram.quantile(0.99)),
            at_or_above: Some(histogram.count_above(100.0, true)),
            bins: Some(store::bins_of(&histogram)),
        }
    }

    fn plain(name: &str, kind: &str, value: f64) -> SeriesRow {
        let rate = matches!(kind, "counter").then_some(value / 2.0);
        SeriesRow { name: name.into(), kind: kind.into(), value: Some(value), rate, ..SeriesRow::default() }
    }

    /// Issue 49: a timer two members hold is the timer of every sample (its quantiles those of
    /// the merged histogram, not a mix of the members'); counters add; a gauge stays the first
    /// member's; a set is the largest member's; a series one member holds passes unchanged.
    #[test]
    fn rows_of_one_series_on_two_members_merge_into_the_rows_of_every_sample() {
        let low: Vec<f64> = (1..=90).map(f64::from).collect();
        let high: Vec<f64> = (100..=1000).step_by(100).map(f64::from).collect();
        let every: Vec<f64> = low.iter().chain(&high).copied().collect();
        // (this member's rows, a peer's rows, the merged rows)
        let cases: Vec<(Vec<SeriesRow>, Vec<SeriesRow>, Vec<SeriesRow>)> = vec![
            (vec![timer("t", &low)], vec![timer("t", &high)], vec![timer("t", &every)]),
            (vec![plain("c", "counter", 3.0)], vec![plain("c", "counter", 4.0)], vec![plain("c", "counter", 7.0)]),
            (vec![plain("g", "gauge", 3.0)], vec![plain("g", "gauge", 9.0)], vec![plain("g", "gauge", 3.0)]),
            (vec![plain("s", "set", 3.0)], vec![plain("s", "set", 9.0)], vec![plain("s", "set", 9.0)]),
            (
                vec![plain("a", "counter", 1.0)],
                vec![timer("t", &high)],
                vec![plain("a", "counter", 1.0), timer("t", &high)],
            ),
        ];
        for (mut mine, theirs, want) in cases {
            merge_rows(&mut mine, theirs);
            assert_eq!(mine, want);
        }
    }

    fn live(rows: Vec<SeriesRow>, matched: u64, truncated: bool) -> Live {
        Live { series: rows, matched, truncated, ..Live::default() }
    }

    /// The group's busiest rows: sorted by the column asked, cut to the limit; a member that
    /// cut its own list is asked for the busiest it left out, one that did not is not.
    #[test]
    fn the_groups_busiest_rows_are_picked_from_the_union_and_asked_for_where_left_out() {
        let mut group = live(vec![plain("a", "counter", 10.0), plain("b", "counter", 8.0)], 50, true);
        let peer = live(vec![plain("c", "counter", 9.5), plain("b", "counter", 1.0)], 2, false);
        let cutting_peer = live(vec![plain("d", "counter", 20.0)], 70, true);
        merge_live(&mut group, peer.clone());
        merge_live(&mut group, cutting_peer.clone());
        order_and_cut(&mut group, SortBy::Rate, 3);
        let names: Vec<&str> = group.series.iter().map(|row| row.name.as_str()).collect();
        assert_eq!(names, ["d", "a", "c"]);
        assert_eq!((group.matched, group.truncated), (70, true));
        assert_eq!(left_out(&peer, &group.series), Vec::<String>::new(), "it listed all it has");
        assert_eq!(left_out(&cutting_peer, &group.series), ["a", "c"]);
    }

    /// A peer's word is taken as it comes: bins at the ends of the doubles and counts at their
    /// limit merge without a panic (counts saturate), and the quantiles stay numbers or none.
    #[test]
    fn extreme_bins_from_a_peer_merge_without_a_panic() {
        let bins =
            vec![(1e308, 1.7e308, u64::MAX), (-1.7e308, -1e308, u64::MAX), (0.0, 0.0, 1), (f64::MAX, f64::MAX, 3)];
        let row = SeriesRow { name: "t".into(), kind: "timer".into(), bins: Some(bins), ..SeriesRow::default() };
        let mut rows = vec![row.clone()];
        merge_rows(&mut rows, vec![row]);
        let merged = &rows[0];
        assert!(merged.bins().iter().all(|&(lower, upper, _)| lower <= upper), "{merged:?}");
        assert!(merged.p99.is_none_or(f64::is_finite) && merged.p50.is_none_or(f64::is_finite), "{merged:?}");
    }

    #[test]
    fn tables_add_and_shares_are_of_the_groups_whole() {
        let table = |names: Vec<(&str, u64)>| Cardinality {
            names: names
                .into_iter()
                .map(|(name, series)| NameRow { name: name.into(), series, tags: vec![("route".into(), series)] })
                .collect(),
            other: Default::default(),
        };
        let mut mine = table(vec![("a", 5), ("b", 3)]);
        merge_cardinality(&mut mine, table(vec![("b", 4), ("c", 1)]));
        let names: Vec<(&str, u64)> = mine.names.iter().map(|row| (row.name.as_str(), row.series)).collect();
        assert_eq!(names, [("b", 7), ("a", 5)]);
        assert_eq!((mine.other.names, mine.other.series), (1, 1));
        assert_eq!(mine.names[0].tags, [("route".to_string(), 4)]);
        let prefix = |name: &str, rate: f64, share: f64| Prefix { prefix: name.into(), rate, share };
        let merged = merge_prefixes(vec![prefix("api", 30.0, 0.75)], vec![prefix("api", 10.0, 0.25)]);
        assert_eq!(merged, [prefix("api", 40.0, 40.0 / 80.0)]);
    }
}
