//! The four kinds of statsd metric.

/// The four metric types, for the management commands and the budgets (in this order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricType {
    /// Counters.
    Counters,
    /// Timers and `h`/`d` histograms.
    Timers,
    /// Gauges.
    Gauges,
    /// Sets.
    Sets,
}

impl MetricType {
    /// Every type, in the order of the budgets' arrays.
    pub const ALL: [MetricType; 4] = [MetricType::Counters, MetricType::Timers, MetricType::Gauges, MetricType::Sets];

    /// As the management commands and the outputs name it: `counters`, `timers`, `gauges`,
    /// `sets`.
    pub fn name(self) -> &'static str {
        match self {
            MetricType::Counters => "counters",
            MetricType::Timers => "timers",
            MetricType::Gauges => "gauges",
            MetricType::Sets => "sets",
        }
    }
}
