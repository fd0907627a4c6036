//! The samples of a series, in exposition order, for both `/metrics` and remote write: a
//! counter or gauge is one sample; a histogram is its buckets (classic `le` or `vmrange`),
//! `_sum` and `_count`.

use std::borrow::Cow;
use std::sync::Arc;

use super::config::HistogramMode;
use super::histogram::{classic, le_label, vmrange};
use super::mapping::Summary;
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
    /// A summary family's settings and the registry's now: quantiles instead of buckets.
    pub summary: Option<(Arc<Summary>, u64)>,
}

impl Layout {
    /// The layout for `mode` with classic `bounds`.
    pub fn new(mode: HistogramMode, bounds: &[f64]) -> Layout {
        let mut le_labels: Vec<String> = bounds.iter().map(|&b| le_label(b)).collect();
        le_labels.push(le_label(f64::INFINITY));
        Layout { mode, bounds: bounds.to_vec(), le_labels, summary: None }
    }

    /// This layout, or one with what a family's mapping sets: its own classic buckets, or
    /// quantiles at `now_unix_s` for a summary.
    pub fn for_family(
        &self,
        buckets: Option<&[f64]>,
        summary: Option<&Arc<Summary>>,
        now_unix_s: u64,
    ) -> Cow<'_, Layout> {
        if let Some(summary) = summary {
            return Cow::Owned(Layout { summary: Some((summary.clone(), now_unix_s)), ..self.clone() });
        }
        match buckets {
            Some(buckets) if self.mode == HistogramMode::Classic => Cow::Owned(Layout::new(self.mode, buckets)),
            _ => Cow::Borrowed(self),
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
    if let Some((summary, now)) = &layout.summary {
        for (q, value) in summary.quantiles.iter().zip(cumulative.window_quantiles(*now, summary)) {
            emit("", Some(("quantile", &q.to_string())), value, false);
        }
        emit("_sum", None, cumulative.sum, everything);
        emit("_count", None, histogram.count() as f64, everything);
        return;
    }
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
