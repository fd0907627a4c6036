//! A row: one series over one interval, minute or hour, and how rows merge.

use circllhist::Histogram;

use crate::Kind;

/// One series' data over `[ts, ts + seconds)`. Unused fields are NaN (NULL in SQLite).
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// Start of the interval, unix seconds (raw rows: the flush time).
    pub ts: i64,
    /// Seconds of data the row covers (the flush intervals it holds).
    pub seconds: f64,
    /// Counters: increments; timers: rate-weighted samples.
    pub count: f64,
    /// Timers: sum of values.
    pub sum: f64,
    /// Timers: sum of squared values.
    pub sum_squares: f64,
    /// Timers and gauges: smallest value.
    pub min: f64,
    /// Timers and gauges: largest value.
    pub max: f64,
    /// Gauges: the value (the last, once rolled up); sets: distinct members (the largest);
    /// timers: values received, unweighted (for the exact mean, `sum / value`).
    pub value: f64,
    /// Timers: every sample.
    pub histogram: Option<Histogram>,
}

impl Row {
    /// An empty row at `ts`.
    pub fn empty(ts: i64) -> Row {
        Row {
            ts,
            seconds: 0.0,
            count: f64::NAN,
            sum: f64::NAN,
            sum_squares: f64::NAN,
            min: f64::NAN,
            max: f64::NAN,
            value: f64::NAN,
            histogram: None,
        }
    }

    /// A counter's row of a 10 s flush (for tests).
    #[cfg(test)]
    pub(crate) fn counter(ts: i64, count: f64) -> Row {
        Row { seconds: 10.0, count, ..Row::empty(ts) }
    }

    /// Adds `later` (a row of the same series, not earlier) into this one: counts and sums
    /// add, min/max combine, histograms merge exactly, a gauge keeps the later value, a set the
    /// larger count, a timer adds its values received.
    pub fn merge(&mut self, later: &Row, kind: Kind) {
        self.seconds += later.seconds;
        self.count = add(self.count, later.count);
        self.sum = add(self.sum, later.sum);
        self.sum_squares = add(self.sum_squares, later.sum_squares);
        self.min = combine(self.min, later.min, f64::min);
        self.max = combine(self.max, later.max, f64::max);
        self.value = match kind {
            Kind::Set => combine(self.value, later.value, f64::max),
            Kind::Timer => add(self.value, later.value),
            _ if later.value.is_nan() => self.value,
            _ => later.value,
        };
        match (&mut self.histogram, &later.histogram) {
            (Some(hist), Some(more)) => hist.merge(more),
            (None, Some(more)) => self.histogram = Some(more.clone()),
            _ => {}
        }
    }
}

/// NaN means "absent": absent + x = x.
fn add(a: f64, b: f64) -> f64 {
    combine(a, b, |a, b| a + b)
}

fn combine(a: f64, b: f64, both: impl Fn(f64, f64) -> f64) -> f64 {
    match (a.is_nan(), b.is_nan()) {
        (true, _) => b,
        (_, true) => a,
        _ => both(a, b),
    }
}
