//! Aggregation: per-reader [`Table`]s filled by the ingest threads, one [`Aggregator`] that
//! absorbs them and flushes, and the immutable [`Snapshot`] every sink reads.
//!
//! Etsy statsd's semantics, exactly: counters scaled by sample rate, gauges with delta rules,
//! timer statistics computed in Etsy's arithmetic order, sets, histogram bins, and the
//! reset/delete rules after a flush. No clocks are read here; times are arguments.

#![deny(missing_docs)]

mod aggregator;
pub mod bad_line;
pub mod budget;
pub mod config;
mod counters;
pub mod distinct;
mod finite;
pub mod jsfmt;
mod key_index;
mod key_list;
mod mergeable;
mod metric_type;
mod numbered;
mod run;
mod series;
mod snapshot;
mod table;
mod timer;
mod timer_samples;
mod timer_store;
mod timers;
mod values;

pub use aggregator::{is_internal_key, Absorbing, Aggregator, LiveSeries};
pub use budget::{BudgetReport, Budgets, FoldReason, Offender};
pub use config::{AggConfig, BinLimit, HistogramRule, Threshold};
pub use counters::{CounterIter, CounterPoint, Counters, ReaderMap, CHURN_SLACK};
pub use distinct::{Distinct, Hll};
pub use finite::saturated;
pub use mergeable::{ForwardedGauge, Mergeable};
pub use metric_type::MetricType;
pub use snapshot::{
    BinCounts, GaugePoint, LogPositions, PercentileStat, Released, SetPoint, Snapshot, StatNames, TimerPoint,
    TimerStat, TimerStats, TimerStatsIter, TimerTotals,
};
pub use table::{apply_delta, GaugeInterval, GaugeUpdate, IngestCounts, Table, TakenInterval};
pub use timer_samples::{LazyHistogram, TimerPart, TimerSamples};
pub use values::Values;
