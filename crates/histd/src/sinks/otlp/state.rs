//! What a flush's timers and counters become as OTLP points: an interval's own values
//! (delta), or running totals kept here since each series was first seen (cumulative).
//!
//! A cumulative series starts over (a new start time) when it is missing from a flush: Etsy
//! flushes idle series as zeros until `deleteIdleStats` deletes them, and a deleted series
//! that comes back is a new one to OTLP too. Exponential buckets are kept as running counts
//! (each interval re-binned on its own and added), so no bucket count ever goes down.

use std::collections::{HashMap, HashSet};

use agg::TimerPoint;
use circllhist::Histogram;
use compact_str::CompactString;

use super::config::OtlpHistograms;
use crate::sinks::prometheus::native::Native;

/// A histogram point's values.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramValues {
    /// Samples (sample-rate weighted), NaN and ±∞ left out: OTLP cannot carry them.
    pub count: u64,
    /// Their exact sum (weighted by the interval's mean sample rate).
    pub sum: f64,
    /// The smallest value.
    pub min: f64,
    /// The largest value.
    pub max: f64,
    /// The circllhist bins (explicit mode; empty in exponential mode, which needs only
    /// `native`).
    pub histogram: Histogram,
    /// The re-binned buckets (exponential mode).
    pub native: Option<Native>,
}

impl HistogramValues {
    /// One interval of `timer`, its buckets laid out for `mode` at `scale`.
    pub fn of_interval(timer: &TimerPoint, mode: OtlpHistograms, scale: i32) -> HistogramValues {
        let histogram = &timer.histogram;
        let count = histogram.count().saturating_sub(histogram.nan_count());
        let totals = &timer.totals;
        let weight = if totals.received > 0 { totals.count / totals.received as f64 } else { 1.0 };
        let (histogram, native) = match mode {
            OtlpHistograms::Explicit => (histogram.clone(), None),
            OtlpHistograms::Exponential => {
                let mut native = Native::new(scale);
                native.add(histogram);
                (Histogram::new(), Some(native))
            }
        };
        HistogramValues { count, sum: totals.sum * weight, min: totals.min, max: totals.max, histogram, native }
    }

    /// Adds a later interval.
    fn add(&mut self, later: &HistogramValues) {
        self.count += later.count;
        self.sum += later.sum;
        self.min = self.min.min(later.min);
        self.max = self.max.max(later.max);
        self.histogram.merge(&later.histogram);
        if let (Some(native), Some(more)) = (&mut self.native, &later.native) {
            native.merge(more);
        }
    }
}

/// A running series: its totals and when they began.
#[derive(Debug, Clone)]
struct Since<T> {
    start_ns: u64,
    value: T,
}

/// The running totals of a cumulative backend.
#[derive(Debug, Default)]
pub struct Running {
    counters: HashMap<CompactString, Since<f64>>,
    timers: HashMap<CompactString, Since<HistogramValues>>,
    /// Series a late interval added to that no flush has reported since: kept until one
    /// does (a flush forgets the series it does not touch).
    folded: HashSet<CompactString>,
}

/// Running totals of one flush, read while the next flush's are built.
pub struct Flush<'a> {
    previous: &'a mut Running,
    next: Running,
}

impl Running {
    /// Starts a flush: every series it holds and [`Flush::counter`] or [`Flush::timer`] does
    /// not touch is forgotten when it ends.
    pub fn flush(&mut self) -> Flush<'_> {
        let next = Running {
            counters: HashMap::with_capacity(self.counters.len()),
            timers: HashMap::with_capacity(self.timers.len()),
            folded: HashSet::new(),
        };
        Flush { previous: self, next }
    }

    /// Adds a late interval's counter (forwarded batches that came after their flush) to its
    /// running total: the total grows when it comes, and the next flush that reports the
    /// series carries it (`start_ns`: the late interval's start, for a series new here).
    pub fn fold_counter(&mut self, key: &str, count: f64, start_ns: u64) {
        self.counters.entry(key.into()).or_insert(Since { start_ns, value: 0.0 }).value += count;
        self.folded.insert(key.into());
    }

    /// Adds a late interval's timer to its running values, as [`Running::fold_counter`].
    pub fn fold_timer(&mut self, key: &str, interval: HistogramValues, start_ns: u64) {
        match self.timers.get_mut(key) {
            Some(running) => running.value.add(&interval),
            None => {
                self.timers.insert(key.into(), Since { start_ns, value: interval });
            }
        }
        self.folded.insert(key.into());
    }
}

impl Flush<'_> {
    /// The counter `key`'s total with this interval's `count` added, and its start time
    /// (`interval_start_ns` for a series new in this flush).
    pub fn counter(&mut self, key: &str, count: f64, interval_start_ns: u64) -> (f64, u64) {
        self.previous.folded.remove(key);
        let mut running =
            self.previous.counters.remove(key).unwrap_or(Since { start_ns: interval_start_ns, value: 0.0 });
        running.value += count;
        let answer = (running.value, running.start_ns);
        self.next.counters.insert(key.into(), running);
        answer
    }

    /// The timer `key`'s running values with `interval` added, and its start time.
    pub fn timer(&mut self, key: &str, interval: HistogramValues, interval_start_ns: u64) -> (&HistogramValues, u64) {
        self.previous.folded.remove(key);
        let running = match self.previous.timers.remove(key) {
            Some(mut running) => {
                running.value.add(&interval);
                running
            }
            None => Since { start_ns: interval_start_ns, value: interval },
        };
        let entry = self.next.timers.entry(key.into()).or_insert(running);
        (&entry.value, entry.start_ns)
    }
}

impl Drop for Flush<'_> {
    fn drop(&mut self) {
        // What a late interval added and this flush did not report is kept for a later one.
        let folded = std::mem::take(&mut self.previous.folded);
        for key in &folded {
            if let Some(running) = self.previous.counters.remove(key) {
                self.next.counters.insert(key.clone(), running);
            }
            if let Some(running) = self.previous.timers.remove(key) {
                self.next.timers.insert(key.clone(), running);
            }
        }
        self.next.folded = folded;
        *self.previous = std::mem::take(&mut self.next);
    }
}
