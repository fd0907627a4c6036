//! The flusher's state: everything that outlives one interval (gauges, known keys, totals).
//!
//! Reader tables are absorbed into it (any time: absorbing early only moves data forward into
//! the current interval), then [`Aggregator::flush`] derives a [`Snapshot`] and resets per
//! Etsy's delete rules. It never reads a clock: the caller passes the time.

use std::borrow::Cow;

use compact_str::CompactString;

use hashbrown::{HashMap, HashSet};
use proto::ParseError;

use crate::budget::{BudgetReport, Ledger};
use crate::config::AggConfig;
use crate::counters::{CounterStore, ReaderMap};
use crate::distinct::Distinct;
use crate::mergeable::{ForwardedGauge, Mergeable};
use crate::metric_type::MetricType;
use crate::snapshot::{GaugePoint, Released, SetPoint, Snapshot, TimerPoint, TimerStats};
use crate::table::{IngestCounts, Table, TakenInterval};
use crate::timer::{bin_counts, timer_stats};
use crate::timer_samples::{TimerPart, TimerSamples};
use crate::timer_store::TimerStore;

type KeyedMap<V> = HashMap<CompactString, V>;

/// Entries a map must have room for beyond what it holds before clearing it gives room back.
const SPARE_ENTRIES: usize = 4096;

/// Empties a hash map or set, first giving back the room it has beyond twice what it held (a
/// burst's table would otherwise stay allocated for good); true when it gave some back. A
/// macro: hashbrown's maps and sets share these methods but no trait.
macro_rules! clear_returning_memory {
    ($table:expr) => {{
        let table = $table;
        let excess = table.capacity() > 2 * table.len() + SPARE_ENTRIES;
        if excess {
            table.shrink_to(table.len());
        }
        table.clear();
        excess
    }};
}

/// A gauge's value, how many more flushes it lives without an update, and when it was last
/// updated.
#[derive(Debug, Clone, Copy, PartialEq)]
struct GaugeState {
    value: f64,
    ttl: u32,
    /// Unix seconds of the last update (0 for histd's own gauges).
    updated_unix_s: u64,
    /// Updated during the current interval.
    updated_in_interval: bool,
}

impl GaugeState {
    fn updated(value: f64, ttl: u32, updated_unix_s: u64) -> Self {
        GaugeState { value, ttl, updated_unix_s, updated_in_interval: true }
    }

    /// True when a forwarded `gauge` is newer than this state: a later update time, or at the
    /// same second the larger value's bits (so the winner does not depend on arrival order).
    fn is_older_than(&self, gauge: &ForwardedGauge) -> bool {
        (self.updated_unix_s, self.value.to_bits()) < (gauge.updated_unix_s, gauge.value.to_bits())
    }
}

/// Aggregated state across intervals.
#[derive(Debug)]
pub struct Aggregator {
    config: AggConfig,
    counters: CounterStore,
    timers: TimerStore,
    gauges: KeyedMap<GaugeState>,
    sets: KeyedMap<Distinct>,
    internal: InternalNames,
    interval: IngestCounts,
    totals: IngestCounts,
    /// Timer intervals whose percentiles were estimated from the histogram, since start.
    timers_over_sample_limit: u64,
    previous_flush_s: Option<u64>,
    /// A flush gave back a burst's room since [`Aggregator::take_released`] was last asked.
    released: bool,
    /// The cardinality budgets and what each type holds against them.
    ledger: Ledger,
    /// Set intervals that passed `maxSetMembers` and were counted by a sketch, since start.
    sets_sketched: u64,
    /// Flushes each set without a value has gone so, while an idle TTL is set.
    idle_sets: KeyedMap<u32>,
    /// Series the idle TTLs deleted, per type, since start.
    expired: [u64; 4],
}

/// Keys of the internal metrics under `prefixStats`.
#[derive(Debug)]
struct InternalNames {
    bad_lines_seen: CompactString,
    packets_received: CompactString,
    metrics_received: CompactString,
    timestamp_lag: CompactString,
    timers_over_sample_limit: CompactString,
    kernel_drops: CompactString,
    truncated_datagrams: CompactString,
    bad_lines_by_reason: Vec<CompactString>,
}

impl InternalNames {
    fn new(prefix: &str) -> Self {
        let name = |suffix: &str| CompactString::from(format!("{prefix}.{suffix}"));
        InternalNames {
            bad_lines_seen: name("bad_lines_seen"),
            packets_received: name("packets_received"),
            metrics_received: name("metrics_received"),
            timestamp_lag: name("timestamp_lag"),
            timers_over_sample_limit: name("timers_over_sample_limit"),
            kernel_drops: name("kernel_drops"),
            truncated_datagrams: name("truncated_datagrams"),
            bad_lines_by_reason: ParseError::ALL.iter().map(|r| name(&format!("bad_lines.{}", r.as_str()))).collect(),
        }
    }

    fn is_internal_counter(&self, key: &str) -> bool {
        [
            &self.bad_lines_seen,
            &self.packets_received,
            &self.metrics_received,
            &self.timers_over_sample_limit,
            &self.kernel_drops,
            &self.truncated_datagrams,
        ]
        .iter()
        .any(|k| ***k == *key)
            || self.bad_lines_by_reason.iter().any(|k| **k == *key)
    }
}

/// True when `key` is one of histd's own metrics under `prefixStats` (Etsy's three counters,
/// `timestamp_lag`, histd's self metrics): what a local does not forward, since the global
/// counts its own.
pub fn is_internal_key(prefix_stats: &str, key: &str) -> bool {
    let Some(name) = key.strip_prefix(prefix_stats).and_then(|rest| rest.strip_prefix('.')) else {
        return false;
    };
    const NAMES: [&str; 7] = [
        "bad_lines_seen",
        "packets_received",
        "metrics_received",
        "timestamp_lag",
        "timers_over_sample_limit",
        "kernel_drops",
        "truncated_datagrams",
    ];
    NAMES.contains(&name)
        || name.strip_prefix("bad_lines.").is_some_and(|reason| ParseError::ALL.iter().any(|r| r.as_str() == reason))
}

impl Aggregator {
    /// Starts empty but for Etsy's three internal counters.
    pub fn new(config: AggConfig) -> Self {
        let internal = InternalNames::new(&config.prefix_stats);
        let mut counters = CounterStore::default();
        for key in [&internal.bad_lines_seen, &internal.packets_received, &internal.metrics_received] {
            counters.add_key(key, 0.0);
        }
        Aggregator {
            ledger: Ledger::new(config.budgets),
            sets_sketched: 0,
            idle_sets: keyed_map(),
            expired: [0; 4],
            config,
            counters,
            timers: TimerStore::default(),
            gauges: keyed_map(),
            sets: keyed_map(),
            internal,
            interval: IngestCounts::default(),
            totals: IngestCounts::default(),
            previous_flush_s: None,
            timers_over_sample_limit: 0,
            released: false,
        }
    }

    /// An aggregator for forwarded series alone (a global's interval that a late batch belongs
    /// to): none of histd's own counters (`bad_lines_seen`, ...), which the late interval's
    /// flush would otherwise write over what that interval's own flush reported.
    pub fn for_forwarded(config: AggConfig) -> Self {
        let mut aggregator = Aggregator::new(AggConfig { self_metrics: false, ..config });
        aggregator.counters = CounterStore::default();
        aggregator
    }

    /// The settings in force.
    pub fn config(&self) -> &AggConfig {
        &self.config
    }

    /// Applies new settings from now on (a config reload; those that take a restart stay,
    /// [`AggConfig::reloaded`]): the interval in progress is flushed by them, every series
    /// keeps its state, and the budgets are counted again.
    pub fn reconfigure(&mut self, config: &AggConfig) {
        self.config = self.config.reloaded(config);
        self.ledger.set_budgets(self.config.budgets);
    }

    /// Input counts since start (the management `stats` command).
    pub fn totals(&self) -> &IngestCounts {
        &self.totals
    }

    /// Timers whose interval passed `timerSampleLimit` (percentiles estimated from the
    /// histogram), counted once per flush each, since start.
    pub fn timers_over_sample_limit(&self) -> u64 {
        self.timers_over_sample_limit
    }

    /// True once since a flush gave back the room of a burst of timers or sets (the caller
    /// may then ask the allocator to return freed memory to the system).
    pub fn take_released(&mut self) -> bool {
        std::mem::take(&mut self.released)
    }

    /// Moves a whole table (one never taken before) into the current interval.
    pub fn absorb(&mut self, mut table: Table) {
        self.absorb_taken(&mut ReaderMap::default(), table.take(true));
    }

    /// Moves a reader's taken interval into the current one; `map` is this reader's map from
    /// its counter ids to the aggregator's (empty for a new reader, kept between takes).
    pub fn absorb_taken(&mut self, map: &mut ReaderMap, table: TakenInterval) {
        self.count_ingest(&table.ingest);
        self.refresh_ledger();
        // A reader that started over after a burst of names gives its tables back.
        self.released |= table.counters.released_more_than(SPARE_ENTRIES);
        let ledger = &mut self.ledger;
        self.counters.absorb(&mut map.counters, table.counters, |key| ledger.admit(MetricType::Counters, key));
        let limit = self.config.timer_sample_limit;
        self.timers.absorb(&mut map.timers, table.timers, limit, |key| ledger.admit(MetricType::Timers, key));
        let ttl = self.gauge_ttl();
        for (key, gauge) in table.gauges {
            let key = admitted(&mut self.ledger, self.gauges.contains_key(key.as_str()), MetricType::Gauges, &key);
            let state = self.gauges.get(&*key).map(|state| state.value);
            let updated = GaugeState::updated(gauge.update.apply(state), ttl, gauge.last_unix_s);
            *value_for(&mut self.gauges, &key, || updated) = updated;
        }
        let cap = self.config.budgets.max_set_members;
        for (key, members) in table.sets {
            let key = admitted(&mut self.ledger, self.sets.contains_key(key.as_str()), MetricType::Sets, &key);
            let set = value_for(&mut self.sets, &key, Distinct::default);
            set.extend(members);
            self.sets_sketched += u64::from(set.cap(cap));
        }
    }

    /// Sets a gauge histd computes itself (an alert's value and state), updated at
    /// `now_unix_s`; it is admitted like any new series.
    pub fn set_gauge(&mut self, key: &str, value: f64, now_unix_s: u64) {
        self.refresh_ledger();
        let updated = GaugeState::updated(value, self.gauge_ttl(), now_unix_s);
        let key = admitted(&mut self.ledger, self.gauges.contains_key(key), MetricType::Gauges, key);
        *value_for(&mut self.gauges, &key, || updated) = updated;
    }

    /// Counts again the types whose keys were deleted since their ledger was built.
    fn refresh_ledger(&mut self) {
        let ledger = &mut self.ledger;
        if ledger.is_stale(MetricType::Counters) {
            ledger.rebuild(MetricType::Counters, self.counters.all_keys());
        }
        if ledger.is_stale(MetricType::Timers) {
            ledger.rebuild(MetricType::Timers, self.timers.iter().map(|(key, _)| key));
        }
        if ledger.is_stale(MetricType::Gauges) {
            ledger.rebuild(MetricType::Gauges, keys_of(&self.gauges));
        }
        if ledger.is_stale(MetricType::Sets) {
            ledger.rebuild(MetricType::Sets, keys_of(&self.sets));
        }
    }

    /// The cardinality budgets, what each type holds against them, the folds since start and
    /// the names bringing new series fastest.
    pub fn budget_report(&self) -> BudgetReport {
        self.ledger.report(self.config.interval_seconds())
    }

    /// Set intervals counted by a sketch past `maxSetMembers`, since start.
    pub fn sets_sketched(&self) -> u64 {
        self.sets_sketched
    }

    /// Merges another histd's interval (forwarded to this one) into the current interval,
    /// as [`Absorbing`] merges it series by series.
    pub fn absorb_mergeable(&mut self, interval: Mergeable) {
        let mut absorbing = self.absorbing();
        interval.counters.into_iter().for_each(|(key, amount)| absorbing.counter(&key, amount));
        interval.timers.into_iter().for_each(|(key, samples)| absorbing.timer_samples(&key, samples));
        interval.gauges.into_iter().for_each(|(key, gauge)| absorbing.gauge(&key, gauge));
        interval.sets.into_iter().for_each(|(key, distinct)| absorbing.set(&key, distinct));
    }

    /// A forwarded-only aggregator's interval ([`Aggregator::for_forwarded`]) as one
    /// [`Mergeable`]: what a global held for a later flush merges in when that flush's
    /// interval opens.
    pub fn into_mergeable(mut self) -> Mergeable {
        let counters = self.counters.live_values();
        let timers = self.timers.iter_mut().map(|(key, samples)| (key.into(), std::mem::take(samples))).collect();
        let gauge = |state: GaugeState| ForwardedGauge { value: state.value, updated_unix_s: state.updated_unix_s };
        let gauges = self.gauges.drain().map(|(key, state)| (key, gauge(state))).collect();
        let sets = self.sets.drain().collect();
        Mergeable { counters, timers, gauges, sets }
    }

    /// Merges another histd's interval series by series, as a decoder reads them (nothing of
    /// it built first).
    pub fn absorbing(&mut self) -> Absorbing<'_> {
        self.refresh_ledger();
        Absorbing { aggregator: self, next_counter: 0, next_timer: 0 }
    }

    fn count_ingest(&mut self, ingest: &IngestCounts) {
        self.interval.add(ingest);
        self.totals.add(ingest);
        let names = &self.internal;
        let mut add = |key: &CompactString, amount: u64| self.counters.add_key(key, amount as f64);
        add(&names.packets_received, ingest.packets);
        add(&names.metrics_received, ingest.lines);
        add(&names.bad_lines_seen, ingest.bad_lines());
        if !self.config.self_metrics {
            return;
        }
        let lazily_created = names.bad_lines_by_reason.iter().zip(ingest.bad_by_reason).chain([
            (&names.kernel_drops, ingest.kernel_drops),
            (&names.truncated_datagrams, ingest.truncated_datagrams),
        ]);
        for (key, count) in lazily_created {
            if count > 0 {
                add(key, count);
            }
        }
    }

    /// Derives the interval's snapshot at `now_ms` (unix milliseconds) and starts the next one.
    pub fn flush(&mut self, now_ms: u64) -> Snapshot {
        let timestamp = self.flush_timestamp(now_ms);
        if let Some(previous) = self.previous_flush_s {
            let lag = timestamp as f64 - previous as f64 - self.config.interval_seconds();
            let state = GaugeState { value: lag, ttl: u32::MAX, updated_unix_s: 0, updated_in_interval: false };
            self.gauges.insert(self.internal.timestamp_lag.clone(), state);
        }
        self.previous_flush_s = Some(timestamp);
        self.count_timers_over_limit();
        let snapshot = Snapshot {
            timestamp,
            flushed_at_ms: now_ms,
            interval: self.config.flush_interval,
            counters: self.counter_points(),
            timers: self.timer_points(),
            gauges: self.gauge_points(),
            sets: self.set_points(),
            thresholds: self.config.thresholds.clone(),
            histograms: self.config.histograms.clone(),
            ingest: std::mem::take(&mut self.interval),
            processing_time_ms: 0.0,
            queue_bytes: 0,
            released: Released::default(),
            late: false,
            log_positions: Default::default(),
        };
        self.reset_after_flush();
        snapshot
    }

    /// The flush time in unix seconds, rounded as Etsy rounds it; with a flush interval of a
    /// second or more, never the previous flush's second (the final flush at shutdown can come
    /// right after a periodic one): Graphite keeps one value per name and second, so a repeated
    /// second would overwrite the previous flush's values.
    fn flush_timestamp(&self, now_ms: u64) -> u64 {
        let rounded = (now_ms + 500) / 1000;
        match self.previous_flush_s {
            Some(previous) if rounded <= previous && self.config.flush_interval.as_millis() >= 1000 => previous + 1,
            _ => rounded,
        }
    }

    /// Adds the timers whose percentiles will be estimated this flush to
    /// `<prefixStats>.timers_over_sample_limit` (created when first needed).
    fn count_timers_over_limit(&mut self) {
        let over = self.timers.iter().filter(|(_, samples)| !samples.is_complete()).count();
        self.timers_over_sample_limit += over as u64;
        if over > 0 && self.config.self_metrics {
            self.counters.add_key(&self.internal.timers_over_sample_limit, over as f64);
        }
    }

    fn gauge_points(&self) -> Vec<GaugePoint> {
        let point = |(key, state): (&CompactString, &GaugeState)| GaugePoint {
            key: key.clone(),
            value: state.value,
            updated_unix_s: state.updated_in_interval.then_some(state.updated_unix_s),
        };
        sorted(self.gauges.iter().map(point), |p| &p.key)
    }

    /// The sets' counts; with `keep_mergeable`, their members (or sketch) move into the points.
    fn set_points(&mut self) -> Vec<SetPoint> {
        let keep = self.config.keep_mergeable;
        let point = |(key, distinct): (&CompactString, &mut Distinct)| SetPoint {
            key: key.clone(),
            count: distinct.count(),
            estimated: distinct.is_estimate(),
            distinct: keep.then(|| std::mem::take(distinct)),
        };
        sorted(self.sets.iter_mut().map(point), |p| &p.key)
    }

    fn counter_points(&mut self) -> crate::Counters {
        self.counters.flush_points(self.config.interval_seconds())
    }

    fn timer_points(&mut self) -> Vec<TimerPoint> {
        let config = &self.config;
        let filter: Option<HashSet<&str>> = match config.calculated_timer_metrics.is_empty() {
            true => None,
            false => Some(config.calculated_timer_metrics.iter().map(String::as_str).collect()),
        };
        let mut points = Vec::with_capacity(self.timers.len());
        let mut stat_lists = Vec::new();
        self.timers.for_each_sorted(|key, samples| {
            let mut stats = timer_stats(samples, config);
            let mut bins = bin_counts(key, samples, config);
            if let Some(wanted) = &filter {
                stats.retain(|(stat, _)| wanted.contains(stat.filter_name(&config.thresholds).as_str()));
                bins = bins.filter(|_| wanted.contains("histogram"));
            }
            let exact_percentiles = samples.is_complete();
            let totals = samples.totals();
            let histogram = std::mem::take(&mut samples.histogram).into_histogram();
            // Freed as each timer becomes its point, so that an interval's raw values and the
            // snapshot made of them are not both whole at once.
            let values = std::mem::take(&mut samples.values);
            let values = (config.keep_mergeable && exact_percentiles && !values.is_empty()).then(|| {
                let mut values = values;
                values.shrink_spare();
                Box::new(values)
            });
            points.push(TimerPoint {
                key: CompactString::from(key),
                stats: TimerStats::shared(&stats, &mut stat_lists),
                bins: bins.map(Box::new),
                histogram,
                values,
                totals,
                exact_percentiles,
                milliseconds: samples.milliseconds,
            });
        });
        points
    }

    /// Etsy's §4.6: idle values reset to zero, or deleted where `delete*` says so; series
    /// idle for their type's `idleTTL` deleted.
    fn reset_after_flush(&mut self) {
        let config = &self.config;
        let ttl = MetricType::ALL.map(|kind| config.idle_flushes(kind));
        let (delete_timers, delete_sets) = (config.delete_timers, config.delete_sets);
        let internal = &self.internal;
        let is_internal = |key: &str| internal.is_internal_counter(key);
        let (renumbered, expired) = self.counters.reset_after_flush(config.delete_counters, ttl[0], is_internal);
        self.expired[MetricType::Counters as usize] += expired as u64;
        if renumbered {
            self.ledger.deleted(MetricType::Counters);
        }
        self.ledger.flushed();
        let timer_ttl = ttl[MetricType::Timers as usize];
        let (expired, renumbered) = self.timers.reset_after_flush(delete_timers, timer_ttl);
        self.released |= renumbered;
        if delete_timers {
            self.ledger.deleted(MetricType::Timers);
        } else if timer_ttl.is_some() {
            self.count_expired(MetricType::Timers, expired);
        }
        if delete_sets {
            self.released |= clear_returning_memory!(&mut self.sets);
            self.ledger.deleted(MetricType::Sets);
        } else if let Some(ttl) = ttl[MetricType::Sets as usize] {
            let expired = expire_idle(&mut self.sets, &mut self.idle_sets, ttl, |set| set.count() > 0);
            self.count_expired(MetricType::Sets, expired);
        }
        for distinct in self.sets.values_mut() {
            match distinct {
                Distinct::Members(members) => self.released |= clear_returning_memory!(members),
                Distinct::Sketch(_) => *distinct = Distinct::default(),
            }
        }
        for state in self.gauges.values_mut() {
            state.updated_in_interval = false;
        }
        if self.config.delete_gauges || ttl[MetricType::Gauges as usize].is_some() {
            let before = self.gauges.len();
            let lag = &self.internal.timestamp_lag;
            self.gauges.retain(|key, state| {
                state.ttl = state.ttl.saturating_sub(1);
                key == lag || state.ttl > 0
            });
            if self.gauges.len() < before {
                self.ledger.deleted(MetricType::Gauges);
                if !self.config.delete_gauges {
                    self.expired[MetricType::Gauges as usize] += (before - self.gauges.len()) as u64;
                }
            }
        }
    }

    /// Counts series the idle TTL deleted (the ledger counts their type again).
    fn count_expired(&mut self, kind: MetricType, expired: usize) {
        if expired > 0 {
            self.expired[kind as usize] += expired as u64;
            self.ledger.deleted(kind);
            self.released = true;
        }
    }

    /// Flushes a gauge is kept from its update: the flush that reports it and its idle TTL,
    /// else `gaugesMaxTTL`.
    fn gauge_ttl(&self) -> u32 {
        let idle = self.config.idle_flushes(MetricType::Gauges);
        idle.map_or(self.config.gauges_max_ttl, |flushes| flushes.saturating_add(1))
    }

    /// Series the idle TTLs deleted, per type (counters, timers, gauges, sets), since start.
    pub fn expired(&self) -> [u64; 4] {
        self.expired
    }

    /// The keys of one type, sorted.
    pub fn keys(&mut self, metric_type: MetricType) -> Vec<CompactString> {
        let mut keys: Vec<CompactString> = match metric_type {
            MetricType::Counters => self.counters.live_values().into_iter().map(|(key, _)| key).collect(),
            MetricType::Timers => self.timers.iter().map(|(key, _)| key.into()).collect(),
            MetricType::Gauges => self.gauges.keys().cloned().collect(),
            MetricType::Sets => self.sets.keys().cloned().collect(),
        };
        keys.sort();
        keys
    }

    /// Deletes one key of one type; true if it existed.
    pub fn remove(&mut self, metric_type: MetricType, key: &str) -> bool {
        let removed = match metric_type {
            MetricType::Counters => self.counters.remove(key), // numbered until renumbered
            MetricType::Timers => self.timers.remove(key),
            MetricType::Gauges => self.gauges.remove(key).is_some(),
            MetricType::Sets => self.sets.remove(key).is_some(),
        };
        if removed && metric_type != MetricType::Counters {
            self.ledger.deleted(metric_type);
        }
        removed
    }

    /// Every series' interval so far (unsorted), with timers' samples at or above `threshold`.
    /// Settles the timers ([`TimerSamples::settle`]): what waited for the flush is binned now.
    pub fn live_series(&mut self, threshold: Option<f64>) -> Vec<LiveSeries> {
        let mut series: Vec<LiveSeries> = Vec::with_capacity(self.timers.len() + self.gauges.len() + self.sets.len());
        let plain =
            |key: CompactString, kind, value| LiveSeries { key, kind, value, quantiles: None, at_or_above: None };
        series.extend(
            self.counters.live_values().into_iter().map(|(key, value)| plain(key, MetricType::Counters, value)),
        );
        for (key, samples) in self.timers.iter_mut() {
            let key = CompactString::from(key);
            samples.settle();
            let histogram = &samples.histogram;
            let quantiles = (!histogram.is_empty()).then(|| (histogram.quantile(0.5), histogram.quantile(0.99)));
            series.push(LiveSeries {
                quantiles,
                at_or_above: threshold.map(|t| histogram.count_above(t, true)),
                ..plain(key, MetricType::Timers, samples.count)
            });
        }
        series.extend(self.gauges.iter().map(|(key, state)| plain(key.clone(), MetricType::Gauges, state.value)));
        series.extend(self.sets.iter().map(|(key, set)| plain(key.clone(), MetricType::Sets, set.count() as f64)));
        series
    }

    /// A timer's histogram of the interval so far (settled first).
    pub fn live_histogram(&mut self, key: &str) -> Option<circllhist::Histogram> {
        let samples = self.timers.get_mut(key)?;
        samples.settle();
        Some((*samples.histogram).clone())
    }

    /// Current counters (this interval so far), sorted.
    pub fn counter_values(&mut self) -> Vec<(CompactString, f64)> {
        self.counters.live_values()
    }

    /// Current timer values (this interval so far, in arrival order), sorted by key.
    pub fn timer_values(&self) -> Vec<(CompactString, Vec<f64>)> {
        sorted(self.timers.iter().map(|(k, s)| (k.into(), s.values.clone().into_doubles())), |(k, _)| k)
    }

    /// Current gauge values, sorted.
    pub fn gauge_values(&self) -> Vec<(CompactString, f64)> {
        sorted(self.gauges.iter().map(|(k, s)| (k.clone(), s.value)), |(k, _)| k)
    }

    /// Current set members (this interval so far), each set's members sorted (none for a set
    /// whose count is a forwarded sketch's estimate).
    pub fn set_members(&self) -> Vec<(CompactString, Vec<String>)> {
        let members = |set: &Distinct| {
            let Distinct::Members(set) = set else { return Vec::new() };
            let mut list: Vec<String> = set.iter().map(|m| String::from_utf8_lossy(m).into_owned()).collect();
            list.sort();
            list
        };
        sorted(self.sets.iter().map(|(k, s)| (k.clone(), members(s))), |(k, _)| k)
    }
}

/// One series' interval so far, for live views (`histd top`, `/api/v1/live`).
#[derive(Debug, Clone, PartialEq)]
pub struct LiveSeries {
    /// The series key.
    pub key: CompactString,
    /// Its type.
    pub kind: MetricType,
    /// Counters: the sum of `value / rate`; timers: the weighted count; gauges: the value;
    /// sets: distinct members.
    pub value: f64,
    /// Timers: the median and the 99th percentile of the interval's histogram.
    pub quantiles: Option<(f64, f64)>,
    /// Timers, with a threshold: samples at or above it (weighted).
    pub at_or_above: Option<u64>,
}

/// An empty map hashing as the readers' tables do, so that absorbing a table (walked in its
/// slot order, which is hash order) visits this map's buckets in nearly ascending order.
fn keyed_map<V>() -> KeyedMap<V> {
    KeyedMap::with_hasher(crate::series::shared_hasher())
}

/// Advances the idle count of each series of `map` (`active`: it had values this interval)
/// and deletes those idle for `ttl` flushes; how many it deleted. `idle` holds only the
/// series idle now.
fn expire_idle<V>(map: &mut KeyedMap<V>, idle: &mut KeyedMap<u32>, ttl: u32, active: impl Fn(&V) -> bool) -> usize {
    for (key, value) in map.iter() {
        match active(value) {
            true if !idle.is_empty() => drop(idle.remove(key)),
            true => {}
            false => *value_for(idle, key, || 0) += 1,
        }
    }
    let before = map.len();
    idle.retain(|key, flushes| {
        let expired = *flushes >= ttl;
        if expired {
            map.remove(key);
        }
        !expired && map.contains_key(key)
    });
    before - map.len()
}

fn keys_of<V>(map: &KeyedMap<V>) -> impl Iterator<Item = &str> {
    map.keys().map(CompactString::as_str)
}

/// Another histd's interval merged into an [`Aggregator`]'s current one, series by series:
/// counters add, timers merge (raw values kept while they fit `timerSampleLimit`), a gauge
/// takes the forwarded value when it is newer ([`ForwardedGauge`]), sets unite. A series new
/// here is admitted by the budgets as a line's would be.
#[derive(Debug)]
pub struct Absorbing<'a> {
    aggregator: &'a mut Aggregator,
    /// Where the next counter and timer are looked for first: after the last one found.
    next_counter: u32,
    next_timer: u32,
}

impl Absorbing<'_> {
    /// Adds a counter's interval sum.
    pub fn counter(&mut self, key: &str, amount: f64) {
        let aggregator = &mut *self.aggregator;
        if let Some(id) = aggregator.counters.add_if_held(key, amount, self.next_counter) {
            self.next_counter = id + 1;
            return;
        }
        // Not numbered here: new, so the budgets say under which key it is kept.
        let key = aggregator.ledger.admit(MetricType::Counters, key);
        aggregator.counters.add_key(&key, amount);
    }

    /// Merges a timer's forwarded part, read where it lies.
    pub fn timer(&mut self, key: &str, part: &TimerPart<'_>) {
        let aggregator = &mut *self.aggregator;
        let limit = aggregator.config.timer_sample_limit;
        if let Some(id) = aggregator.timers.merge_part_if_live(key, part, limit, self.next_timer) {
            self.next_timer = id + 1;
            return;
        }
        // Not a live timer here: the budgets say under which key it is kept.
        let key = aggregator.ledger.admit(MetricType::Timers, key);
        aggregator.timers.merge_part(&key, part, limit);
    }

    /// Merges a timer's samples.
    pub fn timer_samples(&mut self, key: &str, samples: TimerSamples) {
        let aggregator = &mut *self.aggregator;
        let key = admitted(&mut aggregator.ledger, aggregator.timers.contains(key), MetricType::Timers, key);
        aggregator.timers.merge(&key, samples, aggregator.config.timer_sample_limit);
    }

    /// Takes a gauge's forwarded value when it is newer than the one held.
    pub fn gauge(&mut self, key: &str, gauge: ForwardedGauge) {
        let aggregator = &mut *self.aggregator;
        let ttl = aggregator.gauge_ttl();
        let key = admitted(&mut aggregator.ledger, aggregator.gauges.contains_key(key), MetricType::Gauges, key);
        let updated = GaugeState::updated(gauge.value, ttl, gauge.updated_unix_s);
        let state = value_for(&mut aggregator.gauges, &key, || updated);
        if state.is_older_than(&gauge) {
            *state = updated;
        }
    }

    /// Unites a set with the one held.
    pub fn set(&mut self, key: &str, distinct: Distinct) {
        let aggregator = &mut *self.aggregator;
        let key = admitted(&mut aggregator.ledger, aggregator.sets.contains_key(key), MetricType::Sets, key);
        let set = value_for(&mut aggregator.sets, &key, Distinct::default);
        set.merge(distinct);
        aggregator.sets_sketched += u64::from(set.cap(aggregator.config.budgets.max_set_members));
    }
}

/// The key a series is kept under: its own when it is `held` already, else what the budgets
/// admit.
fn admitted<'k>(ledger: &mut Ledger, held: bool, kind: MetricType, key: &'k str) -> Cow<'k, str> {
    match held {
        true => Cow::Borrowed(key),
        false => ledger.admit(kind, key),
    }
}

/// The value for a key moved out of a reader's table; the key is copied only when new.
fn value_for<'m, V>(map: &'m mut KeyedMap<V>, key: &str, make: impl FnOnce() -> V) -> &'m mut V {
    map.entry_ref(key).or_insert_with(make)
}

fn sorted<T>(items: impl Iterator<Item = T>, key: impl Fn(&T) -> &CompactString) -> Vec<T> {
    let mut list: Vec<T> = items.collect();
    list.sort_unstable_by(|a, b| key(a).cmp(key(b)));
    list
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::Threshold;

    fn absorb(aggregator: &mut Aggregator, packet: &str) {
        let mut table = Table::new(true, aggregator.config().timer_sample_limit);
        table.insert_packet(1, packet.as_bytes());
        aggregator.absorb(table);
    }

    fn counter(snapshot: &Snapshot, key: &str) -> Option<(f64, f64)> {
        snapshot.counters.iter().find(|p| p.key == key).map(|p| (p.count, p.rate))
    }

    fn gauge(snapshot: &Snapshot, key: &str) -> Option<f64> {
        snapshot.gauges.iter().find(|p| &*p.key == key).map(|p| p.value)
    }

    /// Issue 20: past a budget, new series fold into an overflow series whose totals are
    /// exact; deleted series make room again; a set past `maxSetMembers` is sketched.
    #[test]
    fn new_series_past_the_budgets_fold_into_overflow_series() {
        let budgets = crate::Budgets {
            max_series: [1, 3, 2, 1],
            max_series_per_name: 2,
            max_tag_values: 100,
            max_set_members: 3,
        };
        let config = AggConfig { budgets, delete_timers: true, ..AggConfig::default() };
        let mut aggregator = Aggregator::new(config);
        // Etsy's three counters (histd's own) are outside the budgets.
        // One absorb per step where the order decides who is admitted: a table hands its
        // timers, gauges and sets over in hash order.
        absorb(&mut aggregator, "a:1|c\nb:2|c\nc:4|c\nt1:5|ms\nt2:6|ms\nt3:7|ms\n");
        absorb(&mut aggregator, "t4:9|ms\n");
        absorb(&mut aggregator, "r:1|ms|#x:1\nr:1|ms|#x:2\n");
        absorb(&mut aggregator, "s:a|s\ns:b|s\ns:c|s\ns:d|s\n");
        absorb(&mut aggregator, "u:z|s\n");
        let snapshot = aggregator.flush(10_000);
        assert_eq!(counter(&snapshot, "a"), Some((1.0, 0.1)));
        assert_eq!(counter(&snapshot, "__overflow__"), Some((6.0, 0.6)), "b and c: totals kept");
        let timers: Vec<(&str, f64)> = snapshot.timers.iter().map(|t| (t.key.as_str(), t.totals.count)).collect();
        assert_eq!(timers, [("__overflow__", 3.0), ("t1", 1.0), ("t2", 1.0), ("t3", 1.0)]);
        let sets: Vec<(&str, u64, bool)> =
            snapshot.sets.iter().map(|s| (s.key.as_str(), s.count, s.estimated)).collect();
        assert_eq!(sets, [("__overflow__", 1, false), ("s", 4, true)]);
        let report = aggregator.budget_report();
        assert_eq!(report.series, [1, 3, 0, 1]);
        assert_eq!(report.folded, [6, 0, 0]);
        assert_eq!(aggregator.sets_sketched(), 1);
        // deleteTimers: the timers are gone after the flush, so new ones fit again.
        absorb(&mut aggregator, "r:1|ms|#x:1\nr:2|ms|#x:2\n");
        absorb(&mut aggregator, "r:3|ms|#x:3\n");
        let snapshot = aggregator.flush(20_000);
        let timers: Vec<(&str, f64)> = snapshot.timers.iter().map(|t| (t.key.as_str(), t.totals.count)).collect();
        assert_eq!(timers, [("r.__overflow__", 1.0), ("r;x=1", 1.0), ("r;x=2", 1.0)]);
        assert_eq!(aggregator.budget_report().folded, [6, 1, 0]);
    }

    /// With `keep_mergeable` a flush's timer carries its raw values sorted and as compact as
    /// they came (2 bytes a whole millisecond, 4 a thousandth, 8 otherwise); without it, none.
    #[test]
    fn a_forwarding_flush_keeps_raw_values_compact_and_sorted() {
        /// The values a point kept: their form and the values.
        type Kept<'a> = Option<(&'a str, &'a [f64])>;
        // (packet, keep_mergeable, the values kept)
        let cases: [(&str, bool, Kept); 5] = [
            ("t:30|ms\nt:5|ms\nt:12|ms", true, Some(("ms", &[5.0, 12.0, 30.0]))),
            ("t:1.5|ms\nt:0.25|ms", true, Some(("thousandths", &[0.25, 1.5]))),
            ("t:0.1|ms\nt:1e-9|ms\nt:70000|ms", true, Some(("doubles", &[1e-9, 0.1, 70000.0]))),
            ("t:30|ms\nt:5|ms", false, None),
            ("other:1|c", true, None),
        ];
        for (packet, keep_mergeable, want) in cases {
            let mut aggregator = Aggregator::new(AggConfig { keep_mergeable, ..AggConfig::default() });
            absorb(&mut aggregator, packet);
            let snapshot = aggregator.flush(10_000);
            let kept = snapshot.timers.iter().find(|t| t.key == "t").and_then(|t| t.values.as_deref());
            let got = kept.map(|values| {
                let form = match values {
                    crate::Values::Milliseconds(_) => "ms",
                    crate::Values::Thousandths(_) => "thousandths",
                    crate::Values::Doubles(_) => "doubles",
                };
                (form, values.iter().collect::<Vec<f64>>())
            });
            assert_eq!(
                got,
                want.map(|(form, values)| (form, values.to_vec())),
                "{packet} keep_mergeable={keep_mergeable}"
            );
        }
    }

    #[test]
    fn a_bursts_room_is_given_back_once_the_burst_is_gone() {
        let config = AggConfig { delete_timers: true, delete_sets: true, ..AggConfig::default() };
        let mut aggregator = Aggregator::new(config);
        let burst: String = (0..20_000).map(|i| format!("t{i}:1|ms\ns{i}:x|s\n")).collect();
        absorb(&mut aggregator, &burst);
        aggregator.flush(10_000);
        assert!(!aggregator.take_released(), "the burst's own flush keeps the room it used");
        let room = aggregator.timers.capacity();
        absorb(&mut aggregator, "t1:1|ms\nbig:a|s\nbig:b|s");
        aggregator.flush(20_000);
        assert!(aggregator.take_released(), "the next flush gives it back");
        assert!(aggregator.timers.capacity() < room / 100 && aggregator.sets.capacity() < room / 100);
        assert!(!aggregator.take_released(), "said once");
        absorb(&mut aggregator, "t1:1|ms");
        aggregator.flush(30_000);
        assert!(!aggregator.take_released(), "a table of its usual size is left alone");
    }

    #[test]
    fn counters_reset_to_zero_or_are_deleted() {
        for (delete, second_flush) in [(false, Some((0.0, 0.0))), (true, None)] {
            let config = AggConfig { delete_counters: delete, ..AggConfig::default() };
            let mut aggregator = Aggregator::new(config);
            absorb(&mut aggregator, "c:20|c");
            assert_eq!(counter(&aggregator.flush(10_000), "c"), Some((20.0, 2.0)));
            let snapshot = aggregator.flush(20_000);
            assert_eq!(counter(&snapshot, "c"), second_flush);
            assert_eq!(counter(&snapshot, "statsd.packets_received"), Some((0.0, 0.0)), "internal never deleted");
        }
    }

    #[test]
    fn internal_counters_count_packets_lines_and_bad_lines() {
        for self_metrics in [false, true] {
            let mut aggregator = Aggregator::new(AggConfig { self_metrics, ..AggConfig::default() });
            let snapshot = aggregator.flush(10_000);
            assert_eq!(snapshot.num_stats(), 3);
            absorb(&mut aggregator, "a:1|c\nfoo\nb:x|c");
            let snapshot = aggregator.flush(20_000);
            assert_eq!(counter(&snapshot, "statsd.packets_received"), Some((1.0, 0.1)));
            assert_eq!(counter(&snapshot, "statsd.metrics_received"), Some((3.0, 0.3)));
            assert_eq!(counter(&snapshot, "statsd.bad_lines_seen"), Some((2.0, 0.2)));
            let by_reason = self_metrics.then_some((1.0, 0.1));
            assert_eq!(counter(&snapshot, "statsd.bad_lines.no_value"), by_reason, "only with histdSelfMetrics");
            assert_eq!(gauge(&snapshot, "statsd.timestamp_lag"), Some(0.0));
            assert_eq!(aggregator.totals().bad_lines(), 2);
            // Etsy's numStats: a, b's bad value dropped, three internal counters, the lag gauge.
            assert_eq!(snapshot.num_stats(), if self_metrics { 7 } else { 5 });
        }
    }

    #[test]
    fn gauges_persist_and_expire_after_ttl() {
        let config = AggConfig { delete_gauges: true, gauges_max_ttl: 2, ..AggConfig::default() };
        let mut aggregator = Aggregator::new(config);
        absorb(&mut aggregator, "g:5|g");
        assert_eq!(gauge(&aggregator.flush(10_000), "g"), Some(5.0));
        assert_eq!(gauge(&aggregator.flush(20_000), "g"), Some(5.0));
        assert_eq!(gauge(&aggregator.flush(30_000), "g"), None);
        absorb(&mut aggregator, "g:+2|g");
        assert_eq!(gauge(&aggregator.flush(40_000), "g"), Some(2.0));
    }

    #[test]
    fn gauge_deltas_apply_to_earlier_flushes() {
        let mut aggregator = Aggregator::new(AggConfig::default());
        absorb(&mut aggregator, "g:10|g");
        aggregator.flush(10_000);
        absorb(&mut aggregator, "g:+5|g");
        absorb(&mut aggregator, "g:-3|g");
        assert_eq!(gauge(&aggregator.flush(20_000), "g"), Some(12.0));
    }

    /// `idleTTL`: a series of each type is reported through `ttl` idle flushes (zero, a gauge
    /// its last value), then deleted and counted; a value in between starts it over.
    #[test]
    fn series_idle_for_their_ttl_are_deleted_and_counted() {
        let ttl = Some(Duration::from_secs(25)); // three flushes of 10 s
        let mut aggregator = Aggregator::new(AggConfig { idle_ttl: [ttl; 4], ..AggConfig::default() });
        let present = |snapshot: &Snapshot| {
            [
                counter(snapshot, "c").is_some(),
                snapshot.timers.iter().any(|t| t.key == "t"),
                gauge(snapshot, "g").is_some(),
                snapshot.sets.iter().any(|s| s.key == "s"),
            ]
        };
        absorb(&mut aggregator, "c:1|c\nt:5|ms\ng:7|g\ns:a|s");
        let mut seen = Vec::new();
        for flush in 1..=6 {
            if flush == 3 {
                absorb(&mut aggregator, "c:1|c"); // the counter starts over
            }
            seen.push(present(&aggregator.flush(flush * 10_000)));
        }
        let all = [true; 4];
        let counter_only = [true, false, false, false];
        let none = [false; 4];
        assert_eq!(seen, [all, all, all, all, counter_only, counter_only]);
        assert_eq!(aggregator.expired(), [1, 1, 1, 1], "the counter went after its third idle flush, 6");
        let seventh = aggregator.flush(70_000);
        assert_eq!(present(&seventh), none);
        assert_eq!(gauge(&seventh, "statsd.timestamp_lag"), Some(0.0), "internal series stay");
        assert_eq!(counter(&aggregator.flush(80_000), "statsd.packets_received"), Some((0.0, 0.0)));
        assert_eq!(aggregator.timers.len() + aggregator.idle_sets.len(), 0, "nothing left idle");
    }

    #[test]
    fn idle_timers_and_sets_report_zero() {
        let mut aggregator = Aggregator::new(AggConfig::default());
        absorb(&mut aggregator, "t:5|ms\nu:a|s\nu:b|s");
        let first = aggregator.flush(10_000);
        assert_eq!(first.sets[0].count, 2);
        let second = aggregator.flush(20_000);
        assert_eq!(second.sets[0].count, 0);
        assert_eq!(
            second.timers[0].stats.iter().collect::<Vec<_>>(),
            [(crate::TimerStat::Count, 0.0), (crate::TimerStat::CountPs, 0.0)]
        );
    }

    #[test]
    fn calculated_timer_metrics_keep_fractional_percentiles() {
        let config = AggConfig {
            thresholds: vec![Threshold::new(90.0), Threshold::new(99.9)].into(),
            calculated_timer_metrics: vec!["mean_percent".into(), "count_ps".into()],
            ..AggConfig::default()
        };
        let mut aggregator = Aggregator::new(config);
        absorb(&mut aggregator, "t:1|ms\nt:2|ms");
        let snapshot = aggregator.flush(10_000);
        let mut names = Vec::new();
        for (stat, _) in &snapshot.timers[0].stats {
            let mut name = String::new();
            snapshot.write_stat_name(stat, &mut name);
            names.push(name);
        }
        assert_eq!(names, ["mean_90", "mean_99_9", "count_ps"]);
    }

    #[test]
    fn timers_past_the_limit_are_counted_and_keep_their_histogram() {
        let config = AggConfig { timer_sample_limit: 3, self_metrics: true, ..AggConfig::default() };
        let mut aggregator = Aggregator::new(config);
        absorb(&mut aggregator, "small:1|ms\nsmall:2|ms\nbig:1|ms\nbig:2|ms");
        absorb(&mut aggregator, "big:3|ms\nbig:4|ms");
        let snapshot = aggregator.flush(10_000);
        assert_eq!(counter(&snapshot, "statsd.timers_over_sample_limit"), Some((1.0, 0.1)));
        assert_eq!(aggregator.timers_over_sample_limit(), 1);
        let big = snapshot.timers.iter().find(|t| &*t.key == "big").unwrap();
        assert!(!big.exact_percentiles);
        assert_eq!(big.histogram.count(), 4);
        let small = snapshot.timers.iter().find(|t| &*t.key == "small").unwrap();
        assert!(small.exact_percentiles);
        assert_eq!(small.histogram.count(), 2);
    }

    #[test]
    fn a_snapshot_estimates_what_it_holds() {
        let mut aggregator = Aggregator::new(AggConfig::default());
        let empty = aggregator.flush(10_000).estimate_bytes();
        let lines: String = (0..1000).map(|i| format!("t{i}:{i}|ms\nt{i}:{}|ms\n", i * 3)).collect();
        absorb(&mut aggregator, &lines);
        let full = aggregator.flush(20_000).estimate_bytes();
        // 1000 timers, each a point of a few hundred bytes with its stats and two bins.
        assert!(full > empty + 1000 * 200 && full < empty + 1000 * 2000, "{empty} -> {full}");
    }

    #[test]
    fn timestamps_round_and_lag_is_measured() {
        let mut aggregator = Aggregator::new(AggConfig::default());
        assert_eq!(aggregator.flush(10_499).timestamp, 10);
        let snapshot = aggregator.flush(21_500);
        assert_eq!(snapshot.timestamp, 22);
        assert_eq!(gauge(&snapshot, "statsd.timestamp_lag"), Some(2.0));
        // A final flush 300 ms after a periodic one takes the next second, not the same one.
        assert_eq!(aggregator.flush(21_800).timestamp, 23);
        // Sub-second intervals keep Etsy's rounding (their flushes share seconds in Etsy too).
        let mut fast = Aggregator::new(AggConfig {
            flush_interval: std::time::Duration::from_millis(200),
            ..AggConfig::default()
        });
        assert_eq!([fast.flush(10_000).timestamp, fast.flush(10_200).timestamp], [10, 10]);
    }
}
