//! The prometheus backend's series in `/metrics` ([`crate::exposition`]): every family of its
//! registry, histograms laid out as `scrapeHistograms` says. Histograms in `vmrange` form are
//! not valid OpenMetrics, so with `scrapeHistograms: "vmrange"` the answer is always 0.0.4.

use super::protobuf;
use super::samples::{for_each_sample, Layout};
use super::state::{Registry, Starts};
use super::{Exposed, HistogramMode};
use crate::exposition::{Exposition, Format, Kind};

impl Exposed {
    /// The format to answer a scrape asking `accept` in: protobuf only with native
    /// histograms, never OpenMetrics for vmrange ones.
    pub fn format_for(&self, accept: &str) -> Format {
        match Format::negotiate(accept, self.layout.mode == HistogramMode::Native) {
            Format::OpenMetrics if self.layout.mode == HistogramMode::Vmrange => Format::Text,
            format => format,
        }
    }

    /// What the backend counts of itself, then every series, into `out` (written in
    /// `format`: native histograms are classic buckets in the text formats).
    pub fn write(&self, out: &mut Exposition, format: Format) {
        let registry = self.registry.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let series = registry.series_count() as f64;
        out.single("histd_prometheus_series", Kind::Gauge, "Series the prometheus backend holds.", series);
        for (name, help, value) in registry.counts.entries() {
            out.single(&format!("histd_prometheus_{name}_total"), Kind::Counter, help, value as f64);
        }
        match (self.layout.mode, format) {
            (HistogramMode::Native, Format::Text | Format::OpenMetrics) => {
                out.registry(&registry, &Layout::new(HistogramMode::Classic, &self.layout.bounds))
            }
            _ => out.registry(&registry, &self.layout),
        }
    }
}

/// Writes a registry into an exposition.
pub trait WriteRegistry {
    /// Every series of `registry`, histograms laid out as `layout` says.
    fn registry(&mut self, registry: &Registry, layout: &Layout);
}

impl WriteRegistry for Exposition {
    fn registry(&mut self, registry: &Registry, layout: &Layout) {
        if let Some(families) = self.protobuf_families() {
            protobuf::write_registry(families, registry, &layout.bounds);
            return;
        }
        for (name, family) in &registry.families {
            let sample = self.family(name, Some(family.exposed_kind()), family.help.as_deref());
            let layout = layout.for_family(family.buckets.as_deref(), family.summary.as_ref(), registry.now_unix_s);
            for (labels, series) in &family.series {
                for_each_sample(&series.value, &layout, Starts::Nothing, |suffix, extra, value, _| {
                    let name = if suffix.is_empty() { sample.clone() } else { format!("{name}{suffix}") };
                    self.sample(&name, labels, extra, value)
                });
            }
        }
    }
}
