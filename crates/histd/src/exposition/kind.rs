//! The metric family types Prometheus knows.

/// A metric family's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Statsd counters: the running total of `value / rate`.
    Counter,
    /// Statsd gauges, and sets (distinct members in the last interval).
    Gauge,
    /// Statsd timers and `h`/`d` histograms.
    Histogram,
    /// Timers a mapping makes summaries (`observer_type: summary`): how they are exposed; their
    /// family's kind stays `Histogram`.
    Summary,
}

impl Kind {
    /// The `# TYPE` word.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
            Kind::Summary => "summary",
        }
    }
}
