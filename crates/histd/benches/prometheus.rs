//! The prometheus backend's cost per flush of 100k series (90k counters, 10k timers of ~100
//! bins each): adding the flush to the cumulative registry, the remote-write requests in each
//! histogram mode (protobuf + snappy), and `/metrics` text. Bytes are printed once per mode.
//! Run: `cargo bench -p histd --bench prometheus`.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use histd::exposition::Exposition;
use histd::prometheus::config::{HistogramMode, DEFAULT_BUCKETS};
use histd::prometheus::encode::{encode, Flush};
use histd::prometheus::exposition::WriteRegistry;
use histd::prometheus::samples::Layout;
use histd::prometheus::state::Registry;

#[path = "flush_of_100k.rs"]
mod flush_of_100k;

use flush_of_100k::{snapshot, TIMERS};

fn flush_costs(c: &mut Criterion) {
    let first = snapshot(1_000_000, false);
    let second = snapshot(1_010_000, false);
    let mut registry = Registry::new(true, Some(5), None);
    registry.apply(&first);
    registry.apply(&second);
    let bins: usize = second.timers.iter().map(|t| t.histogram.bin_count()).sum();
    eprintln!(
        "{} series in the registry; {:.0} circllhist bins per timer",
        registry.series_count(),
        bins as f64 / TIMERS as f64
    );
    let mut group = c.benchmark_group("prometheus flush of 100k series");
    group.sample_size(10);
    for (label, native) in [("native kept", Some(5)), ("no native", None)] {
        let mut steady = Registry::new(true, native, None);
        steady.apply(&first);
        group.bench_function(format!("apply to the registry (series known, {label})"), |b| {
            b.iter(|| steady.apply(black_box(&second)))
        });
    }
    for mode in [HistogramMode::Classic, HistogramMode::Vmrange, HistogramMode::Native] {
        let layout = Layout::new(mode, &DEFAULT_BUCKETS);
        let flush = Flush { layout: &layout, timestamp_ms: 1_020_000, start_ms: 1_010_000, external_labels: &[] };
        let requests = encode(&registry, &flush, &[]);
        let samples: u64 = requests.iter().map(|r| r.points).sum();
        let bytes: usize = requests.iter().map(|r| r.body.len()).sum();
        eprintln!(
            "remote write, {}: {} requests, {samples} time series, {bytes} bytes (snappy)",
            mode.name(),
            requests.len()
        );
        group.bench_function(format!("remote write encode, {}", mode.name()), |b| {
            b.iter(|| encode(black_box(&registry), &flush, &[]))
        });
    }
    for mode in [HistogramMode::Classic, HistogramMode::Vmrange] {
        let layout = Layout::new(mode, &DEFAULT_BUCKETS);
        let mut text = Exposition::new(false);
        text.registry(&registry, &layout);
        eprintln!("/metrics, {}: {} bytes", mode.name(), text.finish().len());
        group.bench_function(format!("/metrics text, {}", mode.name()), |b| {
            b.iter(|| {
                let mut text = Exposition::new(false);
                text.registry(black_box(&registry), &layout);
                text.finish()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, flush_costs);
criterion_main!(benches);
