//! The cumulative state Prometheus expects: statsd flushes are per-interval deltas, while a
//! Prometheus counter only goes up (until a reset) and a histogram's buckets are cumulative.
//! Each flush is added in; a series lives until `ttlSeconds` passes without an update, a
//! `/-/clear`, or a restart (each a counter reset, which `rate()` and `increase()` handle).

use std::collections::BTreeMap;

use agg::Snapshot;
use circllhist::{Bucket, Histogram};

use super::histogram::shifted;
use super::names::{series_name, Labels, SeriesName};
use super::native::Native;

/// A metric family's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Statsd counters: the running total of `value / rate`.
    Counter,
    /// Statsd gauges, and sets (distinct members in the last interval).
    Gauge,
    /// Statsd timers and `h`/`d` histograms.
    Histogram,
}

impl Kind {
    /// The `# TYPE` word.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// A histogram's running totals, in the exported unit.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Cumulative {
    /// Every value so far.
    pub histogram: Histogram,
    /// Their sum, weighted by sample rates (the count is the histogram's).
    pub sum: f64,
    /// The same values as a Prometheus native histogram, when a target sends native ones.
    pub native: Option<Native>,
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
        Series { value, updated_unix_s: now, created_unix_s: now, new_bins: (0, Vec::new()) }
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

/// The series of one metric name.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    /// Its type (the first type a name arrived as; later other types are refused).
    pub kind: Kind,
    /// Its series by labels.
    pub series: BTreeMap<Labels, Series>,
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
}

/// A series that was forgotten, for the stale markers remote write sends.
#[derive(Debug, Clone, PartialEq)]
pub struct Forgotten {
    /// The metric name.
    pub name: String,
    /// Its type.
    pub kind: Kind,
    /// Its labels.
    pub labels: Labels,
    /// Its last value.
    pub value: Value,
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
}

impl Registry {
    /// An empty registry; `timer_seconds` exports `ms` timers in seconds; `native_schema`
    /// keeps native histograms beside the circllhists.
    pub fn new(timer_seconds: bool, native_schema: Option<i32>) -> Registry {
        Registry { timer_shift: if timer_seconds { -3 } else { 0 }, native_schema, ..Registry::default() }
    }

    /// Adds one flush.
    pub fn apply(&mut self, snapshot: &Snapshot) {
        let now = snapshot.timestamp;
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
        for gauge in &snapshot.gauges {
            self.set_gauge(&gauge.key, gauge.value, now);
        }
        for set in &snapshot.sets {
            self.set_gauge(&set.key, set.count as f64, now);
        }
        for timer in snapshot.timers.iter().filter(|timer| timer.totals.received > 0) {
            let shift = if timer.milliseconds { self.timer_shift } else { 0 };
            let totals = timer.totals;
            // The exact sum is unweighted; weighted as the count is, exact when one sample
            // rate was used in the interval (the usual case).
            let weighted_sum = totals.sum * totals.count / totals.received as f64 * 10f64.powi(i32::from(shift));
            let interval = shifted(&timer.distribution, shift);
            let native_schema = self.native_schema;
            let new_series = || Value::Histogram(Box::default());
            let Some(series) = self.series(&timer.key, Kind::Histogram, now, new_series) else { continue };
            let Value::Histogram(cumulative) = &mut series.value else { continue };
            let known: Vec<Bucket> = cumulative.histogram.bins().map(|(bucket, _)| bucket).collect();
            let new_bins: Vec<Bucket> = interval
                .bins()
                .map(|(bucket, _)| bucket)
                .filter(|bucket| known.binary_search(bucket).is_err())
                .collect();
            cumulative.histogram.merge(&interval);
            cumulative.sum += weighted_sum;
            if let Some(schema) = native_schema {
                cumulative.native.get_or_insert_with(|| Native::new(schema)).add(&interval);
            }
            series.updated_unix_s = now;
            if !new_bins.is_empty() {
                series.new_bins = (now, new_bins);
            }
        }
    }

    fn set_gauge(&mut self, key: &str, value: f64, now: u64) {
        if let Some(series) = self.series(key, Kind::Gauge, now, || Value::Number(value)) {
            series.value = Value::Number(value);
            series.updated_unix_s = now;
        }
    }

    /// The series of `key`, created with `initial` when new; `None` when its name has
    /// another type (counted).
    fn series(&mut self, key: &str, kind: Kind, now: u64, initial: impl FnOnce() -> Value) -> Option<&mut Series> {
        let SeriesName { name, labels, dropped_tags } = series_name(key);
        self.counts.dropped_tags += dropped_tags as u64;
        let family = self.families.entry(name).or_insert_with(|| Family { kind, series: BTreeMap::new() });
        if family.kind != kind {
            self.counts.type_conflicts += 1;
            return None;
        }
        Some(family.series.entry(labels).or_insert_with(|| Series::new(initial(), now)))
    }

    /// Forgets the series not updated since `oldest_unix_s`, returning them.
    pub fn expire(&mut self, oldest_unix_s: u64) -> Vec<Forgotten> {
        let mut forgotten = Vec::new();
        for (name, family) in &mut self.families {
            let stale: Vec<Labels> = family
                .series
                .iter()
                .filter(|(_, series)| series.updated_unix_s < oldest_unix_s)
                .map(|(labels, _)| labels.clone())
                .collect();
            for labels in stale {
                if let Some(series) = family.series.remove(&labels) {
                    forgotten.push(Forgotten { name: name.clone(), kind: family.kind, labels, value: series.value });
                }
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
