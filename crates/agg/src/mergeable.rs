//! Another histd's interval in the form that merges exactly: what a global histd absorbs
//! from the locals that forward to it ([`crate::Aggregator::absorb_mergeable`]).

use compact_str::CompactString;

use crate::distinct::Distinct;
use crate::timer_samples::TimerSamples;

/// One forwarded interval of one source: every part merges into the receiver's interval in
/// any order with the same result (gauges by their update time).
#[derive(Debug, Default)]
pub struct Mergeable {
    /// Counters: the interval's sum of `value / rate`.
    pub counters: Vec<(CompactString, f64)>,
    /// Timers and `h`/`d` histograms: exact totals, the histogram, raw values while complete.
    pub timers: Vec<(CompactString, TimerSamples)>,
    /// Gauges updated during the interval.
    pub gauges: Vec<(CompactString, ForwardedGauge)>,
    /// Sets: members, or a sketch of them.
    pub sets: Vec<(CompactString, Distinct)>,
}

impl Mergeable {
    /// Series in all four parts.
    pub fn len(&self) -> usize {
        self.counters.len() + self.timers.len() + self.gauges.len() + self.sets.len()
    }

    /// True when there is no series.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A gauge's value as its source last set it. The receiver keeps the latest: the later
/// `updated_unix_s`, and at the same second the value whose IEEE-754 bits are larger, so the
/// result is the same whatever order batches arrive in.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ForwardedGauge {
    /// The value.
    pub value: f64,
    /// Unix seconds of the update.
    pub updated_unix_s: u64,
}
