//! What aggregation needs from the configuration, already validated.

use std::sync::Arc;
use std::time::Duration;

use crate::jsfmt::js_number;

/// The most timer thresholds (`percentThreshold`) a config may list.
pub const MAX_THRESHOLDS: usize = u8::MAX as usize;

/// Aggregation settings (the Etsy keys in parentheses).
#[derive(Debug, Clone, PartialEq)]
pub struct AggConfig {
    /// Flush period (`flushInterval`); rates are per second of it.
    pub flush_interval: Duration,
    /// Timer percentiles (`percentThreshold`), in config order.
    pub thresholds: Arc<[Threshold]>,
    /// Timer histogram bins (`histogram`); the first rule whose `metric` is in the key wins.
    pub histograms: Arc<[HistogramRule]>,
    /// Timer statistics to emit (`calculatedTimerMetrics`); empty means all.
    pub calculated_timer_metrics: Vec<String>,
    /// Delete idle counters instead of sending 0 (`deleteCounters`).
    pub delete_counters: bool,
    /// Delete idle timers instead of sending count 0 (`deleteTimers`).
    pub delete_timers: bool,
    /// Delete idle sets instead of sending count 0 (`deleteSets`).
    pub delete_sets: bool,
    /// Delete gauges not updated for `gauges_max_ttl` flushes (`deleteGauges`).
    pub delete_gauges: bool,
    /// Flushes a gauge survives without updates when deleted (`gaugesMaxTTL`, at least 1).
    pub gauges_max_ttl: u32,
    /// How long a series of each type (counters, timers, gauges, sets) may go without a value
    /// before it is deleted (`idleTTL`); `None`: kept (reported as zero, a gauge as its last
    /// value) until a `delete*` key says otherwise, as Etsy does.
    pub idle_ttl: [Option<Duration>; 4],
    /// Namespace of internal metrics (`prefixStats`).
    pub prefix_stats: String,
    /// Apply Etsy's key sanitising (`keyNameSanitize`).
    pub key_name_sanitize: bool,
    /// Raw values kept per timer and interval (`timerSampleLimit`); past it, percentiles come
    /// from the timer's histogram.
    pub timer_sample_limit: usize,
    /// histd's own counters beyond Etsy's three (`bad_lines.<reason>`, `kernel_drops`,
    /// `truncated_datagrams`, `timers_over_sample_limit`) are aggregated and flushed like any
    /// counter (`histdSelfMetrics`); off, the flushed names and `numStats` are Etsy's.
    pub self_metrics: bool,
    /// Snapshots carry what another histd needs to merge an interval exactly: timers' raw
    /// values (while complete), sets' members or sketch, gauges' update times (on with the
    /// `forward` backend).
    pub keep_mergeable: bool,
    /// Cardinality budgets (`maxSeries`, `maxSeriesPerName`, `maxTagValues`,
    /// `maxSetMembers`).
    pub budgets: crate::budget::Budgets,
}

/// The default `timerSampleLimit`: 8192 values (64 KiB) per timer and interval.
pub const DEFAULT_TIMER_SAMPLE_LIMIT: usize = 8192;

impl Default for AggConfig {
    fn default() -> Self {
        AggConfig {
            flush_interval: Duration::from_secs(10),
            thresholds: vec![Threshold::new(90.0)].into(),
            histograms: Vec::new().into(),
            calculated_timer_metrics: Vec::new(),
            delete_counters: false,
            delete_timers: false,
            delete_sets: false,
            delete_gauges: false,
            gauges_max_ttl: 1,
            idle_ttl: [None; 4],
            prefix_stats: "statsd".to_string(),
            key_name_sanitize: true,
            timer_sample_limit: DEFAULT_TIMER_SAMPLE_LIMIT,
            self_metrics: false,
            keep_mergeable: false,
            budgets: crate::budget::Budgets::default(),
        }
    }
}

impl AggConfig {
    /// `new`'s settings with this config's that take a restart: the flush interval (the
    /// flusher's grid and the rates' divisor), `prefixStats` (histd's own series are named at
    /// start), `keyNameSanitize` (the readers build keys by it) and `keep_mergeable` (set by
    /// the forward backend). What a config reload applies.
    pub fn reloaded(&self, new: &AggConfig) -> AggConfig {
        AggConfig {
            flush_interval: self.flush_interval,
            prefix_stats: self.prefix_stats.clone(),
            key_name_sanitize: self.key_name_sanitize,
            keep_mergeable: self.keep_mergeable,
            ..new.clone()
        }
    }

    /// The idle TTL of `kind` in whole flushes (at least one), when it has one.
    pub fn idle_flushes(&self, kind: crate::MetricType) -> Option<u32> {
        let interval = self.flush_interval.as_millis().max(1);
        let ttl = self.idle_ttl[kind as usize]?;
        Some(ttl.as_millis().div_ceil(interval).clamp(1, u128::from(u32::MAX)) as u32)
    }

    /// The flush interval in seconds, the divisor of every per-second rate.
    pub fn interval_seconds(&self) -> f64 {
        self.flush_interval.as_millis() as f64 / 1000.0
    }
}

/// One `percentThreshold` entry and the suffix of its statistics.
#[derive(Debug, Clone, PartialEq)]
pub struct Threshold {
    /// The percentage: positive = the lowest `p`% of values, negative = the highest.
    pub percent: f64,
    /// The name suffix: the JavaScript string of `percent`, first `.` as `_`, first `-` as
    /// `top` (`90`, `99_9`, `top10`).
    pub suffix: String,
}

impl Threshold {
    /// A threshold and its Etsy suffix.
    pub fn new(percent: f64) -> Self {
        let suffix = js_number(percent).replacen('.', "_", 1).replacen('-', "top", 1);
        Threshold { percent, suffix }
    }
}

/// One `histogram` entry: keys containing `metric` get these bins.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramRule {
    /// A substring of the key.
    pub metric: String,
    /// Upper limits (exclusive), ascending; empty turns histograms off for matching keys.
    pub bins: Vec<BinLimit>,
}

impl HistogramRule {
    /// The statistic name of bin `index`: `bin_<limit>` with the first `.` as `_`.
    pub fn bin_name(&self, index: usize) -> String {
        match self.bins[index] {
            BinLimit::Below(limit) => format!("bin_{}", js_number(limit)).replacen('.', "_", 1),
            BinLimit::Infinity => "bin_inf".to_string(),
        }
    }
}

/// The upper limit of a histogram bin.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BinLimit {
    /// Values below this limit (and not in an earlier bin).
    Below(f64),
    /// Every value left (`'inf'`).
    Infinity,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_thresholds_like_etsy() {
        for (percent, suffix) in [(90.0, "90"), (99.9, "99_9"), (-10.0, "top10"), (0.5, "0_5"), (-99.9, "top99_9")] {
            assert_eq!(Threshold::new(percent).suffix, suffix);
        }
    }

    #[test]
    fn names_bins_like_etsy() {
        let rule = HistogramRule {
            metric: String::new(),
            bins: vec![BinLimit::Below(0.5), BinLimit::Below(2.21), BinLimit::Below(10.0), BinLimit::Infinity],
        };
        let names: Vec<String> = (0..4).map(|i| rule.bin_name(i)).collect();
        assert_eq!(names, ["bin_0_5", "bin_2_21", "bin_10", "bin_inf"]);
    }
}
