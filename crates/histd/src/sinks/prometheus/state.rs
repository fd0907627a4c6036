//! The cumulative state Prometheus expects: statsd flushes are per-interval deltas, while a
//! Prometheus counter only goes up (until a reset) and a histogram's buckets are cumulative.
//! Each flush is added in; a series lives until `ttlSeconds` passes without an update, a
//! `/-/clear`, or a restart (each a counter reset, which `rate()` and `increase()` handle).

use std::collections::BTreeMap;
use std::sync::Arc;

use agg::Snapshot;
use circllhist::{Bucket, Histogram};

use super::mapping::{Mapped, Mapper, Summary};
use super::names::{series_name, Labels, SeriesName};
use super::native::Native;
use crate::exposition::Kind;

/// A histogram's running totals, in the exported unit.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Cumulative {
    /// Every value so far.
    pub histogram: Histogram,
    /// Their sum, weighted by sample rates (the count is the histogram's).
    pub sum: f64,
    /// The same values as a Prometheus native histogram, when a target sends native ones.
    pub native: Option<Native>,
    /// A summary's recent values, by age bucket (start, unix seconds), oldest first.
    pub window: Option<std::collections::VecDeque<(u64, Histogram)>>,
}

impl Cumulative {
    /// Adds `interval` at `now` to the summary window of `summary`, dropping what is older
    /// than its `max_age`.
    fn add_to_window(&mut self, interval: &Histogram, now: u64, summary: &Summary) {
        let max_age = summary.max_age.as_secs().max(1);
        let piece = (max_age / u64::from(summary.age_buckets)).max(1);
        let window = self.window.get_or_insert_with(Default::default);
        if window.back().is_none_or(|(start, _)| start + piece <= now) {
            window.push_back((now, Histogram::new()));
        }
        if let Some((_, histogram)) = window.back_mut() {
            histogram.merge(interval);
        }
        while window.front().is_some_and(|(start, _)| start + max_age <= now) {
            window.pop_front();
        }
    }

    /// The summary's quantiles over the window as of `now` (NaN when it is empty, as
    /// client_golang reports).
    pub fn window_quantiles(&self, now: u64, summary: &Summary) -> Vec<f64> {
        let max_age = summary.max_age.as_secs().max(1);
        let recent = self.window.iter().flatten().filter(|(start, _)| start + max_age > now).map(|(_, h)| h);
        let merged = Histogram::merge_all(recent);
        summary.quantiles.iter().map(|&q| if merged.is_empty() { f64::NAN } else { merged.quantile(q) }).collect()
    }
}

/// A series' current value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A counter's or gauge's number.
    Number(f64),
    /// A histogram's totals.
    Histogram(Box<Cumulative>),
}

/// One series.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Its value.
    pub value: Value,
    /// The flush (unix seconds) that last changed it.
    pub updated_unix_s: u64,
    /// The flush that created it.
    pub created_unix_s: u64,
    /// The flush whose interval first put values in [`Series::new_bins`], and those bins.
    pub new_bins: (u64, Vec<Bucket>),
    /// Its mapping's `ttl`, in seconds.
    pub ttl_s: Option<u64>,
}

/// Which samples of a series begin with a flush: remote write sends each such sample a 0 at
/// the interval's start first, so that `increase()` counts its first value (VictoriaMetrics
/// and Prometheus otherwise take a new series' first value as a counter already running).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Starts<'a> {
    /// None: the series and its bins existed before.
    Nothing,
    /// Every sample (a new counter or histogram; never a gauge).
    Everything,
    /// These histogram bins.
    Bins(&'a [Bucket]),
}

impl Series {
    fn new(value: Value, now: u64) -> Series {
        Series { value, updated_unix_s: now, created_unix_s: now, new_bins: (0, Vec::new()), ttl_s: None }
    }

    /// What begins with the flush at `now_unix_s`.
    pub fn starts(&self, kind: Kind, now_unix_s: u64) -> Starts<'_> {
        match kind {
            Kind::Gauge => Starts::Nothing,
            _ if self.created_unix_s == now_unix_s => Starts::Everything,
            _ if self.new_bins.0 == now_unix_s => Starts::Bins(&self.new_bins.1),
            _ => Starts::Nothing,
        }
    }
}

/// A family's series, sorted by labels (a family mostly has one: a vector costs far less
/// than a map's node).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SeriesList(Vec<(Labels, Series)>);

impl SeriesList {
    /// The series with `labels`, made by `make` when absent.
    pub fn get_or_insert_with(&mut self, labels: Labels, make: impl FnOnce() -> Series) -> &mut Series {
        let index = match self.0.binary_search_by(|(existing, _)| existing.cmp(&labels)) {
            Ok(index) => index,
            Err(index) => {
                // Most families hold one series: grow one at a time (a vector's first
                // allocation would otherwise hold four).
                self.0.reserve_exact(1);
                self.0.insert(index, (labels, make()));
                index
            }
        };
        &mut self.0[index].1
    }

    /// Removes and returns the series `doomed` picks.
    pub fn remove_where(&mut self, mut doomed: impl FnMut(&Series) -> bool) -> Vec<(Labels, Series)> {
        let (gone, kept) = std::mem::take(&mut self.0).into_iter().partition(|(_, series)| doomed(series));
        self.0 = kept;
        gone
    }

    /// The number of series.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when there is none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The series in label order.
    pub fn iter(&self) -> impl Iterator<Item = (&Labels, &Series)> {
        self.0.iter().map(|(labels, series)| (labels, series))
    }
}

impl<'a> IntoIterator for &'a SeriesList {
    type Item = (&'a Labels, &'a Series);
    type IntoIter = std::iter::Map<std::slice::Iter<'a, (Labels, Series)>, fn(&'a (Labels, Series)) -> Self::Item>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|(labels, series)| (labels, series))
    }
}

/// The series of one metric name.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    /// Its type (the first type a name arrived as; later other types are refused).
    pub kind: Kind,
    /// Its series by labels.
    pub series: SeriesList,
    /// `help` of the mapping that created it.
    pub help: Option<String>,
    /// Classic bucket boundaries of the mapping that created it (else `prometheus.buckets`).
    pub buckets: Option<Vec<f64>>,
    /// The mapping made it a summary: quantiles over a window instead of buckets.
    pub summary: Option<Arc<Summary>>,
    /// Most samples of a flush fell outside its classic buckets once (logged once, counted).
    pub outside_buckets: bool,
}

impl Family {
    /// The type it is exposed as.
    pub fn exposed_kind(&self) -> Kind {
        match self.summary {
            Some(_) => Kind::Summary,
            None => self.kind,
        }
    }
}

/// What applying flushes refused or forgot, for `/metrics`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RegistryCounts {
    /// Series updates refused because their name already has another type.
    pub type_conflicts: u64,
    /// Tags that could not become labels.
    pub dropped_tags: u64,
    /// Series forgotten after `ttlSeconds` without an update.
    pub expired: u64,
    /// Series updates a mapping's `action: drop` dropped.
    pub mapping_drops: u64,
    /// Series updates refused because their name is empty (`;k=v:1|c`, or a mapping's name
    /// that expands to nothing).
    pub empty_names: u64,
    /// Histogram families most of whose samples in a flush fell above the last classic bucket
    /// or below the first (each counted once): `histogram_quantile` can say nothing of them.
    pub outside_buckets: u64,
}

impl RegistryCounts {
    /// Each count with its name (`histd_prometheus_<name>_total` on `/metrics`) and meaning.
    pub fn entries(&self) -> [(&'static str, &'static str, u64); 6] {
        [
            ("type_conflicts", "Series updates refused: the name has another type.", self.type_conflicts),
            ("dropped_tags", "Tags that could not become labels (no value, reserved name).", self.dropped_tags),
            ("expired_series", "Series forgotten after their ttl without an update.", self.expired),
            ("mapping_drops", "Series updates a mapping's action: drop dropped.", self.mapping_drops),
            ("empty_names", "Series updates refused: an empty metric name.", self.empty_names),
            (
                "histograms_outside_buckets",
                "Histogram families most of whose samples fell outside the classic buckets (prometheus.buckets).",
                self.outside_buckets,
            ),
        ]
    }
}

/// A series that was forgotten, for the stale markers remote write sends (laid out as its
/// family was: its own buckets, or a summary's quantiles).
#[derive(Debug, Clone, PartialEq)]
pub struct Forgotten {
    /// The metric name.
    pub name: String,
    /// Its labels.
    pub labels: Labels,
    /// Its last value.
    pub value: Value,
    /// Its family's own classic buckets.
    pub buckets: Option<Vec<f64>>,
    /// Its family's summary settings.
    pub summary: Option<Arc<Summary>>,
}

/// Every series, by name.
#[derive(Debug, Default)]
pub struct Registry {
    /// Families by name (sorted: the exposition is in name order).
    pub families: BTreeMap<String, Family>,
    /// What was refused or forgotten.
    pub counts: RegistryCounts,
    /// Move `ms` timers this many decades (-3: seconds; 0: milliseconds).
    timer_shift: i8,
    /// Keep native histograms at this schema too.
    native_schema: Option<i32>,
    /// statsd_exporter mappings.
    mapper: Option<Arc<Mapper>>,
    /// The last flush applied (unix seconds): the "now" of summary windows.
    pub now_unix_s: u64,
    /// `prometheus.buckets`, in the exported unit: families whose samples mostly miss them are
    /// reported (empty: not checked).
    classic_bounds: Vec<f64>,
}

impl Registry {
    /// An empty registry; `timer_seconds` exports `ms` timers in seconds; `native_schema`
    /// keeps native histograms beside the circllhists.
    pub fn new(timer_seconds: bool, native_schema: Option<i32>, mapper: Option<Arc<Mapper>>) -> Registry {
        Registry { timer_shift: if timer_seconds { -3 } else { 0 }, native_schema, mapper, ..Registry::default() }
    }

    /// This registry, checking histograms against the classic buckets `bounds` (sorted).
    pub fn with_classic_bounds(mut self, bounds: &[f64]) -> Registry {
        self.classic_bounds = bounds.to_vec();
        self
    }

    /// Adds one flush. A late interval (forwarded batches that came after their flush) is
    /// folded into the totals as of now: its counters and histograms count from when it
    /// came; its gauges and set counts are an older interval's, and left out.
    pub fn apply(&mut self, snapshot: &Snapshot) {
        let now = match snapshot.late {
            true => self.now_unix_s.max(snapshot.timestamp),
            false => snapshot.timestamp,
        };
        self.now_unix_s = now;
        for counter in snapshot.counters.iter() {
            if let Some(series) = self.series(counter.key, Kind::Counter, now, || Value::Number(0.0)) {
                if let Value::Number(total) = &mut series.value {
                    *total += counter.count;
                }
                if counter.count != 0.0 {
                    series.updated_unix_s = now;
                }
            }
        }
        let current = (!snapshot.late).then_some(snapshot);
        for gauge in current.iter().flat_map(|snapshot| &snapshot.gauges) {
            self.set_gauge(&gauge.key, gauge.value, now);
        }
        for set in current.iter().flat_map(|snapshot| &snapshot.sets) {
            self.set_gauge(&set.key, set.count as f64, now);
        }
        let bounds = std::mem::take(&mut self.classic_bounds);
        for timer in snapshot.timers.iter().filter(|timer| timer.totals.received > 0) {
            if self.apply_timer(timer, now, &bounds) {
                self.counts.outside_buckets += 1;
            }
        }
        self.classic_bounds = bounds;
    }

    /// Adds one timer's interval to its histogram series; true when its family is newly
    /// found to have most samples outside the classic buckets `bounds` (then logged once).
    fn apply_timer(&mut self, timer: &agg::TimerPoint, now: u64, bounds: &[f64]) -> bool {
        let shift = if timer.milliseconds { self.timer_shift } else { 0 };
        let totals = timer.totals;
        // The exact sum is unweighted; weighted as the count is, exact when one sample
        // rate was used in the interval (the usual case).
        let weighted_sum = totals.sum * totals.count / totals.received as f64 * 10f64.powi(i32::from(shift));
        let interval = timer.histogram.shift_decades(shift);
        let native_schema = self.native_schema;
        let new_series = || Value::Histogram(Box::default());
        let Some(Found { series, scale, summary, buckets, outside_buckets }) =
            self.series_scaled(&timer.key, Kind::Histogram, now, new_series)
        else {
            return false;
        };
        let (interval, weighted_sum) = match scale {
            Some(scale) => (scaled(&interval, scale), weighted_sum * scale),
            None => (interval, weighted_sum),
        };
        let side = (!*outside_buckets && buckets.is_none()).then(|| mostly_outside(&interval, bounds)).flatten();
        if let Some(side) = side {
            *outside_buckets = true;
            let unit = if shift != 0 { "seconds" } else { "the series' own unit" };
            tracing::warn!(
                series = %timer.key,
                buckets = ?bounds,
                "prometheus: most samples of this histogram fall {side} the classic buckets (prometheus.buckets, in {unit}): \
                 histogram_quantile cannot place them; set prometheus.buckets for its unit, or use native or vmrange histograms"
            );
        }
        let Value::Histogram(cumulative) = &mut series.value else { return side.is_some() };
        let new_bins = bins_not_in(&interval, &cumulative.histogram);
        cumulative.histogram.merge(&interval);
        cumulative.sum += weighted_sum;
        if let Some(summary) = summary {
            cumulative.add_to_window(&interval, now, &summary);
        }
        if let Some(schema) = native_schema {
            cumulative.native.get_or_insert_with(|| Native::new(schema)).add(&interval);
        }
        series.updated_unix_s = now;
        if !new_bins.is_empty() {
            series.new_bins = (now, new_bins);
        }
        side.is_some()
    }

    fn set_gauge(&mut self, key: &str, value: f64, now: u64) {
        if let Some(series) = self.series(key, Kind::Gauge, now, || Value::Number(value)) {
            series.value = Value::Number(value);
            series.updated_unix_s = now;
        }
    }

    /// The series of `key`, created with `initial` when new; `None` when its name has
    /// another type or a mapping drops it (counted).
    fn series(&mut self, key: &str, kind: Kind, now: u64, initial: impl FnOnce() -> Value) -> Option<&mut Series> {
        self.series_scaled(key, kind, now, initial).map(|found| found.series)
    }

    /// As [`Registry::series`], with the `scale` its mapping sets for observed values and
    /// its family's summary settings.
    fn series_scaled(&mut self, key: &str, kind: Kind, now: u64, initial: impl FnOnce() -> Value) -> Option<Found<'_>> {
        let SeriesName { mut name, statsd_name, mut labels, dropped_tags } = series_name(key);
        self.counts.dropped_tags += dropped_tags as u64;
        let mapping = match self.mapper.as_ref().map(|mapper| mapper.map(&statsd_name, kind)) {
            Some(Mapped::Drop) => {
                self.counts.mapping_drops += 1;
                return None;
            }
            Some(Mapped::Series(mapping)) => Some(mapping),
            Some(Mapped::Unmatched) | None => None,
        };
        if let Some(mapping) = &mapping {
            name = mapping.name.clone();
            merge_labels(&mut labels, &mapping.labels, mapping.honor_labels);
        }
        if name.is_empty() {
            self.counts.empty_names += 1;
            return None;
        }
        let family = self.families.entry(name).or_insert_with(|| Family {
            kind,
            series: SeriesList::default(),
            help: mapping.as_ref().and_then(|m| m.help.clone()),
            buckets: mapping.as_ref().and_then(|m| m.buckets.clone()),
            summary: mapping.as_ref().and_then(|m| m.summary.clone()),
            outside_buckets: false,
        });
        if family.kind != kind {
            self.counts.type_conflicts += 1;
            return None;
        }
        let Family { series: list, summary, buckets, outside_buckets, .. } = family;
        let series = list.get_or_insert_with(labels, || Series::new(initial(), now));
        series.ttl_s = mapping.as_ref().and_then(|m| m.ttl).map(|ttl| ttl.as_secs().max(1));
        Some(Found {
            series,
            scale: mapping.and_then(|m| m.scale),
            summary: summary.clone(),
            buckets: buckets.as_deref(),
            outside_buckets,
        })
    }

    /// Forgets the series not updated within their mapping's `ttl`, or else `default_ttl_s`
    /// (none: never), at `now_unix_s`, returning them.
    pub fn expire(&mut self, now_unix_s: u64, default_ttl_s: Option<u64>) -> Vec<Forgotten> {
        let mut forgotten = Vec::new();
        for (name, family) in &mut self.families {
            let expired = |series: &Series| match series.ttl_s.or(default_ttl_s) {
                Some(ttl) => series.updated_unix_s < now_unix_s.saturating_sub(ttl),
                None => false,
            };
            for (labels, series) in family.series.remove_where(expired) {
                let (name, buckets, summary) = (name.clone(), family.buckets.clone(), family.summary.clone());
                forgotten.push(Forgotten { name, labels, value: series.value, buckets, summary });
            }
        }
        self.families.retain(|_, family| !family.series.is_empty());
        self.counts.expired += forgotten.len() as u64;
        forgotten
    }

    /// Forgets every series (`/-/clear`).
    pub fn clear(&mut self) {
        self.families.clear();
    }

    /// The number of series.
    pub fn series_count(&self) -> usize {
        self.families.values().map(|family| family.series.len()).sum()
    }
}

/// A series found (or made) for an update, with what its mapping says of observed values.
struct Found<'a> {
    series: &'a mut Series,
    /// `scale`.
    scale: Option<f64>,
    /// The family's summary settings.
    summary: Option<Arc<Summary>>,
    /// The family's own classic buckets (a mapping's).
    buckets: Option<&'a [f64]>,
    /// Whether the family was reported for samples outside its buckets.
    outside_buckets: &'a mut bool,
}

/// `Some("above")` or `Some("below")` when most of `interval`'s samples lie past the last of
/// `bounds` or under the first (none when `bounds` is empty).
fn mostly_outside(interval: &Histogram, bounds: &[f64]) -> Option<&'static str> {
    let (first, last) = (bounds.first()?, bounds.last()?);
    let total = interval.count();
    if total == 0 {
        return None;
    }
    let half = total / 2;
    if total - interval.count_below(*last, true) > half {
        return Some("above");
    }
    (interval.count_below(*first, false) > half).then_some("below")
}

/// The bins of `interval` that `known` does not have, by one walk of both (bins are sorted).
fn bins_not_in(interval: &Histogram, known: &Histogram) -> Vec<Bucket> {
    let mut known = known.bins().map(|(bucket, _)| bucket).peekable();
    let mut new = Vec::new();
    for (bucket, _) in interval.bins() {
        while known.next_if(|&existing| existing < bucket).is_some() {}
        if known.peek() != Some(&bucket) {
            new.push(bucket);
        }
    }
    new
}

/// Sets the mapping's labels on a series' tag labels: the mapping wins unless `honor_labels`.
fn merge_labels(labels: &mut Labels, mapped: &[(String, String)], honor_labels: bool) {
    for (label, value) in mapped {
        match labels.iter_mut().find(|(existing, _)| existing == label) {
            Some(_) if honor_labels => {}
            Some(entry) => entry.1 = value.clone(),
            None => labels.push((label.clone(), value.clone())),
        }
    }
    labels.retain(|(_, value)| !value.is_empty());
    labels.sort_unstable();
}

/// `histogram` with every value multiplied by `scale`: exact (a shift of decades) for a power
/// of ten, else each bin's samples moved to its midpoint times `scale`.
fn scaled(histogram: &Histogram, scale: f64) -> Histogram {
    let decades = scale.log10().round();
    if (10f64.powf(decades) - scale).abs() <= scale * 1e-12 && decades.abs() < 100.0 {
        return histogram.shift_decades(decades as i8);
    }
    let mut out = Histogram::new();
    for (bucket, count) in histogram.bins() {
        out.insert(bucket.midpoint() * scale, count);
    }
    out
}
