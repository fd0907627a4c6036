//! The samples of a series, in exposition order, for both `/metrics` and remote write: a
//! counter or gauge is one sample; a histogram is its buckets (classic `le` or `vmrange`),
//! `_sum` and `_count`.

use super::config::HistogramMode;
use super::histogram::{classic, le_label, vmrange};
use super::state::{Starts, Value};

/// How histograms are written, with the classic boundaries' labels formatted once.
#[derive(Debug, Clone)]
pub struct Layout {
    /// Classic or vmrange.
    pub mode: HistogramMode,
    /// The classic boundaries.
    pub bounds: Vec<f64>,
    /// Their `le` labels, then `+Inf`.
    pub le_labels: Vec<String>,
}

impl Layout {
    /// The layout for `mode` with classic `bounds`.
    pub fn new(mode: HistogramMode, bounds: &[f64]) -> Layout {
        let mut le_labels: Vec<String> = bounds.iter().map(|&b| le_label(b)).collect();
        le_labels.push(le_label(f64::INFINITY));
        Layout { mode, bounds: bounds.to_vec(), le_labels }
    }
}

impl Layout {
    /// This layout, or one with a family's own classic `buckets` (from its mapping).
    pub fn with_buckets(&self, buckets: Option<&[f64]>) -> std::borrow::Cow<'_, Layout> {
        match buckets {
            Some(buckets) if self.mode == HistogramMode::Classic => {
                std::borrow::Cow::Owned(Layout::new(self.mode, buckets))
            }
            _ => std::borrow::Cow::Borrowed(self),
        }
    }
}

/// Calls `emit(suffix, extra_label, value, starts)` for each sample of `value`, where
/// `starts` says the sample begins with this flush (see [`Starts`]).
pub fn for_each_sample(
    value: &Value,
    layout: &Layout,
    starts: Starts<'_>,
    mut emit: impl FnMut(&'static str, Option<(&str, &str)>, f64, bool),
) {
    let everything = starts == Starts::Everything;
    let cumulative = match value {
        Value::Number(number) => return emit("", None, *number, everything),
        Value::Histogram(cumulative) => cumulative,
    };
    let histogram = &cumulative.histogram;
    match layout.mode {
        HistogramMode::Classic => {
            let counts = classic(histogram, &layout.bounds);
            for (label, count) in layout.le_labels.iter().zip(counts) {
                emit("_bucket", Some(("le", label)), count as f64, everything);
            }
        }
        // Written as one native histogram by the remote-write encoder, never as samples.
        HistogramMode::Native => return,
        HistogramMode::Vmrange => {
            for (bucket, count) in histogram.bins() {
                let new = everything || matches!(starts, Starts::Bins(bins) if bins.binary_search(&bucket).is_ok());
                if let Some(range) = vmrange(bucket) {
                    emit("_bucket", Some(("vmrange", &range)), count as f64, new);
                }
            }
        }
    }
    emit("_sum", None, cumulative.sum, everything);
    emit("_count", None, histogram.count() as f64, everything);
}
