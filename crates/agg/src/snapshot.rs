//! What one flush produced: immutable, shared by every sink.

use std::fmt::Write;
use std::sync::Arc;

use compact_str::CompactString;
use std::time::Duration;

use crate::config::{HistogramRule, Threshold};
use crate::counters::Counters;
use crate::distinct::Distinct;
use crate::table::IngestCounts;

/// The metrics of one flush, with Etsy's derived values.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// The flush time in unix seconds (rounded, as Etsy's `Math.round(Date.now()/1000)`).
    pub timestamp: u64,
    /// The flush time in unix milliseconds, as the flusher gave it.
    pub flushed_at_ms: u64,
    /// The flush interval the rates are per second of.
    pub interval: Duration,
    /// Counters, sorted by key.
    pub counters: Counters,
    /// Timers and histograms, sorted by key.
    pub timers: Vec<TimerPoint>,
    /// Gauges, sorted by key.
    pub gauges: Vec<GaugePoint>,
    /// Sets, sorted by key.
    pub sets: Vec<SetPoint>,
    /// The thresholds named by [`TimerStat::Percentile`].
    pub thresholds: Arc<[Threshold]>,
    /// The histogram rules named by [`BinCounts::rule`].
    pub histograms: Arc<[HistogramRule]>,
    /// What the readers saw during this interval.
    pub ingest: IngestCounts,
    /// Milliseconds the flush spent deriving these values (Etsy's `processing_time`).
    pub processing_time_ms: f64,
    /// What sink queues are charged for this snapshot: [`Snapshot::estimate_bytes`], computed
    /// once by the flusher.
    pub queue_bytes: u64,
    /// Run once when the last holder lets this flush go: every sink has taken it (written,
    /// spooled, encoded) or dropped it. A global lets go of what the flush carried then.
    pub released: Released,
    /// True for a global's late interval: forwarded batches that came after the flush of the
    /// interval they belong to, stamped with that interval's time (`timestamp`,
    /// `flushed_at_ms`) and sent with the next flush. It holds their series alone (no
    /// `ingest` counts, none of histd's own series); sinks that report totals as they run
    /// (Prometheus, OTLP cumulative) fold it into those, the others place it at its time.
    pub late: bool,
    /// A global's: where in the topic it reads (`global.kafka`) the forwarded batches merged
    /// into this snapshot were read. The store keeps it in the transaction that writes the
    /// snapshot, so a global restarted passes over what its store holds already.
    pub log_positions: LogPositions,
}

/// Where the batches of one flush were read in a log (a Kafka topic). Empty for every flush
/// but a Kafka global's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogPositions {
    /// The topic.
    pub log: String,
    /// `(partition, offset)` of each message this snapshot holds (merged, or read and found
    /// to hold nothing to merge).
    pub offsets: Vec<(i32, i64)>,
    /// `(partition, offset)`: every message of the partition up to this offset that this
    /// global read is in the store with this flush or an earlier one (what its commit to Kafka
    /// says too, once made).
    pub through: Vec<(i32, i64)>,
}

impl LogPositions {
    /// True when it names no message.
    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty() && self.through.is_empty()
    }
}

/// Something to run once when a [`Snapshot`] is let go of; nothing by default. A copy of a
/// snapshot carries none.
#[derive(Default)]
pub struct Released(Option<Box<dyn FnOnce() + Send + Sync>>);

impl Released {
    /// Runs `then` when the snapshot holding it is dropped.
    pub fn with(then: impl FnOnce() + Send + Sync + 'static) -> Released {
        Released(Some(Box::new(then)))
    }
}

impl Drop for Released {
    fn drop(&mut self) {
        if let Some(then) = self.0.take() {
            then();
        }
    }
}

impl Clone for Released {
    fn clone(&self) -> Released {
        Released(None)
    }
}

impl std::fmt::Debug for Released {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "Released(set)" } else { "Released(none)" })
    }
}

impl Snapshot {
    /// About how many bytes of memory this snapshot holds of its own (counter keys are shared
    /// with the aggregator and not counted): what a sink's queue is charged for it.
    pub fn estimate_bytes(&self) -> usize {
        let heap = |key: &CompactString| if key.is_heap_allocated() { key.len() } else { 0 };
        let timers: usize = self
            .timers
            .iter()
            .map(|timer| {
                std::mem::size_of::<TimerPoint>()
                    + heap(&timer.key)
                    + timer.stats.len() * std::mem::size_of::<f64>()
                    + timer.histogram.bin_count() * 10
                    + timer.values.as_ref().map_or(0, |values| std::mem::size_of::<crate::Values>() + values.bytes())
                    + timer.bins.as_ref().map_or(0, |bins| bins.counts.len() * 8)
            })
            .sum();
        let gauges: usize = self.gauges.iter().map(|g| std::mem::size_of::<GaugePoint>() + heap(&g.key)).sum();
        let sets: usize = self
            .sets
            .iter()
            .map(|s| {
                std::mem::size_of::<SetPoint>() + heap(&s.key) + s.distinct.as_ref().map_or(0, Distinct::heap_bytes)
            })
            .sum();
        std::mem::size_of::<Snapshot>() + self.counters.heap_bytes() + timers + gauges + sets
    }

    /// Etsy's `numStats`: the number of keys of every type in this flush.
    pub fn num_stats(&self) -> usize {
        self.counters.len() + self.timers.len() + self.gauges.len() + self.sets.len()
    }

    /// The Etsy name of every statistic this snapshot's thresholds give, for writers that name
    /// many timers: built once per flush instead of formatted per line.
    pub fn stat_names(&self) -> StatNames {
        let per_threshold = self
            .thresholds
            .iter()
            .enumerate()
            .map(|(index, _)| {
                PercentileStat::ALL.map(|which| {
                    let mut name = String::new();
                    self.write_stat_name(TimerStat::Percentile(which, index as u8), &mut name);
                    name
                })
            })
            .collect();
        StatNames { per_threshold }
    }

    /// Appends the Etsy name of `stat` (`mean_90`, `lower_top10`, `count_ps`).
    pub fn write_stat_name(&self, stat: TimerStat, out: &mut String) {
        match stat {
            TimerStat::Percentile(which, index) => {
                let threshold = &self.thresholds[usize::from(index)];
                let _ = write!(out, "{}_{}", which.base_name(threshold.percent), threshold.suffix);
            }
            plain => out.push_str(plain.plain_name()),
        }
    }
}

/// A timer's (or `h`/`d` histogram's) interval: Etsy's statistics, in Etsy's order.
#[derive(Debug, Clone, PartialEq)]
pub struct TimerPoint {
    /// The series key.
    pub key: CompactString,
    /// The statistics, filtered by `calculatedTimerMetrics`.
    pub stats: TimerStats,
    /// Etsy `histogram` bin counts when a rule matches the key (boxed: most timers match no
    /// rule, and a flush holds a point per timer).
    pub bins: Option<Box<BinCounts>>,
    /// Every value of the interval as a circllhist, counts weighted by `1 / rate`.
    pub histogram: circllhist::Histogram,
    /// The raw values, sorted, when [`crate::AggConfig::keep_mergeable`] is on and every value
    /// was kept (`exact_percentiles`); `None` otherwise (8 bytes in a point, as most timers of
    /// most flushes have none). Kept as compact as the interval held them (2 bytes a whole
    /// millisecond, where a forwarding local's flush took 8 a value as doubles).
    pub values: Option<Box<crate::Values>>,
    /// Exact totals of the interval, whatever `calculatedTimerMetrics` filters from `stats`.
    pub totals: TimerTotals,
    /// True when the percentile statistics are Etsy's exact ones (every raw value was kept);
    /// false when they were estimated from `histogram` past `timerSampleLimit`.
    pub exact_percentiles: bool,
    /// True when values came as statsd timers (`ms`), false when only as `h`/`d` histograms
    /// (whose unit is unknown): the Prometheus backend converts the first to seconds.
    pub milliseconds: bool,
}

/// A timer's statistics in a flush: which ones, in order (a list shared by the flush's timers
/// that have the same ones, as nearly all do), and their values: 8 bytes a statistic, where a
/// list of pairs took 16 (a flush of 100k timers holds about 1.4M of them).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TimerStats {
    which: Arc<[TimerStat]>,
    values: Box<[f64]>,
}

/// The iterator of [`TimerStats::iter`].
pub type TimerStatsIter<'a> =
    std::iter::Zip<std::iter::Copied<std::slice::Iter<'a, TimerStat>>, std::iter::Copied<std::slice::Iter<'a, f64>>>;

impl TimerStats {
    /// The most lists of statistics a flush shares (each timer compares its own with them).
    pub const SHARED_LISTS: usize = 8;

    /// `pairs` as statistics, sharing the list of which they are with an equal one in `lists`
    /// (or adding it there, up to [`TimerStats::SHARED_LISTS`]: a flush's timers have a few
    /// shapes, by which thresholds hold values).
    pub fn shared(pairs: &[(TimerStat, f64)], lists: &mut Vec<Arc<[TimerStat]>>) -> TimerStats {
        let same = |list: &&Arc<[TimerStat]>| list.iter().copied().eq(pairs.iter().map(|&(stat, _)| stat));
        let which = match lists.iter().find(same) {
            Some(list) => list.clone(),
            None => {
                let list: Arc<[TimerStat]> = pairs.iter().map(|&(stat, _)| stat).collect();
                if lists.len() < Self::SHARED_LISTS {
                    lists.push(list.clone());
                }
                list
            }
        };
        TimerStats { which, values: pairs.iter().map(|&(_, value)| value).collect() }
    }

    /// Each statistic with its value, in order.
    pub fn iter(&self) -> TimerStatsIter<'_> {
        self.which.iter().copied().zip(self.values.iter().copied())
    }

    /// How many statistics.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// True without statistics.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}

impl From<Vec<(TimerStat, f64)>> for TimerStats {
    fn from(pairs: Vec<(TimerStat, f64)>) -> TimerStats {
        TimerStats::shared(&pairs, &mut Vec::new())
    }
}

impl<'a> IntoIterator for &'a TimerStats {
    type Item = (TimerStat, f64);
    type IntoIter = TimerStatsIter<'a>;
    fn into_iter(self) -> TimerStatsIter<'a> {
        self.iter()
    }
}

/// A timer interval's exact totals.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct TimerTotals {
    /// Sample-rate-weighted count.
    pub count: f64,
    /// Values received.
    pub received: u64,
    /// Sum of values.
    pub sum: f64,
    /// Sum of squared values.
    pub sum_squares: f64,
    /// Smallest value (NaN when none).
    pub min: f64,
    /// Largest value (NaN when none).
    pub max: f64,
}

/// Counts per bin of one histogram rule.
#[derive(Debug, Clone, PartialEq)]
pub struct BinCounts {
    /// Index into [`Snapshot::histograms`].
    pub rule: usize,
    /// One count per bin of the rule.
    pub counts: Vec<u64>,
}

/// A gauge's value.
#[derive(Debug, Clone, PartialEq)]
pub struct GaugePoint {
    /// The series key.
    pub key: CompactString,
    /// The current value (gauges persist between flushes).
    pub value: f64,
    /// Unix seconds of its last update when it was updated during this interval.
    pub updated_unix_s: Option<u64>,
}

/// A set's interval.
#[derive(Debug, Clone, PartialEq)]
pub struct SetPoint {
    /// The series key.
    pub key: CompactString,
    /// Distinct members this interval (an estimate when `estimated`).
    pub count: u64,
    /// True when `count` is a HyperLogLog estimate (a forwarded sketch was merged in).
    pub estimated: bool,
    /// The members or sketch, when [`crate::AggConfig::keep_mergeable`] is on.
    pub distinct: Option<Distinct>,
}

/// One timer statistic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimerStat {
    /// A statistic of the values inside threshold `.1` (an index into the thresholds, of which
    /// there are at most [`crate::config::MAX_THRESHOLDS`]: a statistic and its value take 16
    /// bytes, and a flush holds ~14 for each of its timers).
    Percentile(PercentileStat, u8),
    /// Population standard deviation.
    Std,
    /// Largest value.
    Upper,
    /// Smallest value.
    Lower,
    /// Sample-rate-weighted count.
    Count,
    /// `count` per second.
    CountPs,
    /// Sum of values.
    Sum,
    /// Sum of squared values.
    SumSquares,
    /// Mean value.
    Mean,
    /// Median value.
    Median,
}

impl TimerStat {
    fn plain_name(self) -> &'static str {
        match self {
            TimerStat::Percentile(..) => "percent",
            TimerStat::Std => "std",
            TimerStat::Upper => "upper",
            TimerStat::Lower => "lower",
            TimerStat::Count => "count",
            TimerStat::CountPs => "count_ps",
            TimerStat::Sum => "sum",
            TimerStat::SumSquares => "sum_squares",
            TimerStat::Mean => "mean",
            TimerStat::Median => "median",
        }
    }

    /// The name `calculatedTimerMetrics` lists it by (`mean_percent`, `upper_percent`, `std`).
    pub fn filter_name(self, thresholds: &[Threshold]) -> String {
        match self {
            TimerStat::Percentile(which, index) => {
                format!("{}_percent", which.base_name(thresholds[usize::from(index)].percent))
            }
            plain => plain.plain_name().to_string(),
        }
    }
}

/// The statistics computed per threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PercentileStat {
    /// How many values are inside.
    Count,
    /// Their mean.
    Mean,
    /// The boundary: `upper_P` for a positive threshold, `lower_topP` for a negative one.
    Bound,
    /// Their sum.
    Sum,
    /// Their sum of squares.
    SumSquares,
}

/// The names of a snapshot's statistics ([`Snapshot::stat_names`]).
#[derive(Debug, Clone)]
pub struct StatNames {
    per_threshold: Vec<[String; 5]>,
}

impl StatNames {
    /// The Etsy name of `stat` (`mean_90`, `lower_top10`, `count_ps`).
    pub fn of(&self, stat: TimerStat) -> &str {
        match stat {
            TimerStat::Percentile(which, index) => &self.per_threshold[usize::from(index)][which as usize],
            plain => plain.plain_name(),
        }
    }
}

impl PercentileStat {
    /// Every statistic inside a threshold, in the order of their discriminants.
    const ALL: [PercentileStat; 5] = [
        PercentileStat::Count,
        PercentileStat::Mean,
        PercentileStat::Bound,
        PercentileStat::Sum,
        PercentileStat::SumSquares,
    ];

    fn base_name(self, percent: f64) -> &'static str {
        match self {
            PercentileStat::Count => "count",
            PercentileStat::Mean => "mean",
            PercentileStat::Bound if percent > 0.0 => "upper",
            PercentileStat::Bound => "lower",
            PercentileStat::Sum => "sum",
            PercentileStat::SumSquares => "sum_squares",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timers_with_the_same_statistics_share_one_list_of_which_they_are() {
        use TimerStat::{Count, CountPs, Lower, Upper};
        let mut lists = Vec::new();
        // (pairs, lists shared after it)
        let cases: [(&[(TimerStat, f64)], usize); 5] = [
            (&[(Count, 3.0), (CountPs, 1.5), (Lower, 1.0)], 1),
            (&[(Count, 4.0), (CountPs, 2.0), (Lower, 0.5)], 1),
            (&[(Count, 0.0), (CountPs, 0.0)], 2),
            (&[(Count, 2.0), (CountPs, 1.0), (Upper, 7.0)], 3),
            (&[(Count, 9.0), (CountPs, 4.5), (Lower, 2.0)], 3),
        ];
        let mut made = Vec::new();
        for (pairs, shared) in cases {
            let stats = TimerStats::shared(pairs, &mut lists);
            assert_eq!(stats.iter().collect::<Vec<_>>(), pairs, "read back as given");
            assert_eq!((stats.len(), lists.len()), (pairs.len(), shared), "{pairs:?}");
            made.push(stats);
        }
        assert!(Arc::ptr_eq(&made[0].which, &made[1].which) && Arc::ptr_eq(&made[0].which, &made[4].which));
        assert!(!Arc::ptr_eq(&made[0].which, &made[3].which));
        // Past SHARED_LISTS shapes, a timer keeps its own list, and reads the same.
        for length in 0..2 * TimerStats::SHARED_LISTS {
            let pairs: Vec<(TimerStat, f64)> = (0..length).map(|i| (Upper, i as f64)).collect();
            assert_eq!(TimerStats::shared(&pairs, &mut lists).iter().collect::<Vec<_>>(), pairs);
        }
        assert_eq!(lists.len(), TimerStats::SHARED_LISTS);
    }

    /// A flush holds about 14 statistics for each of its timers (100k timers: 1.4M): each is
    /// its value's 8 bytes in the timer, which statistic it is 2 bytes in a list the timers
    /// share (a `usize` threshold index made it 24 with its value; a pair, 16).
    #[test]
    fn a_statistic_takes_its_values_eight_bytes() {
        assert_eq!(std::mem::size_of::<TimerStat>(), 2);
        assert_eq!(std::mem::size_of::<TimerStats>(), 32, "two fat pointers, as a Vec of pairs took 24");
        let pairs = vec![(TimerStat::Count, 1.0); 14];
        assert_eq!(std::mem::size_of_val(&*TimerStats::from(pairs).values), 14 * 8);
    }

    /// A flush holds a point per timer: 184 bytes before what they point to (the raw values and
    /// the bin counts, which most timers do not have, boxed).
    #[test]
    fn a_timer_point_takes_184_bytes() {
        assert_eq!(std::mem::size_of::<TimerPoint>(), 184);
    }
}
