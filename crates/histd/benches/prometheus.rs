//! The prometheus backend's cost per flush of 100k series (90k counters, 10k timers of ~100
//! bins each): adding the flush to the cumulative registry, the remote-write requests in each
//! histogram mode (protobuf + snappy), and `/metrics` text. Bytes are printed once per mode.
//! Run: `cargo bench -p histd --bench prometheus`.

use agg::{AggConfig, Aggregator, Snapshot, Table};
use criterion::{black_box, criterion_group, criterion_main, Criterion};
use histd::prometheus::config::{HistogramMode, DEFAULT_BUCKETS};
use histd::prometheus::encode::{encode, Flush};
use histd::prometheus::exposition::Exposition;
use histd::prometheus::samples::Layout;
use histd::prometheus::state::Registry;

const COUNTERS: usize = 90_000;
const TIMERS: usize = 10_000;

/// One flush: every counter once, every timer with values spread over ~100 circllhist bins
/// (1 ms to 10 s, log-spaced), from a deterministic generator.
fn snapshot(flush_ms: u64) -> Snapshot {
    let config = AggConfig::default();
    let mut aggregator = Aggregator::new(config.clone());
    let mut table = Table::new(config.key_name_sanitize, config.timer_sample_limit);
    let mut packet = String::new();
    let mut send = |line: String, table: &mut Table| {
        packet.push_str(&line);
        packet.push('\n');
        if packet.len() > 1200 {
            table.insert_packet(1, packet.as_bytes());
            packet.clear();
        }
    };
    for i in 0..COUNTERS {
        send(format!("app.requests.{i}:1|c|#route:r{}", i % 50), &mut table);
    }
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..TIMERS {
        for _ in 0..150 {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            let value = 10f64.powf((state >> 11) as f64 / (1u64 << 53) as f64 * 4.0);
            send(format!("app.latency.{i}:{value:.3}|ms"), &mut table);
        }
    }
    table.insert_packet(1, packet.as_bytes());
    aggregator.absorb(table);
    aggregator.flush(flush_ms)
}

fn flush_costs(c: &mut Criterion) {
    let first = snapshot(1_000_000);
    let second = snapshot(1_010_000);
    let mut registry = Registry::new(true, Some(5), None);
    registry.apply(&first);
    registry.apply(&second);
    let bins: usize = second.timers.iter().map(|t| t.distribution.bin_count()).sum();
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
        let samples: usize = requests.iter().map(|r| r.samples).sum();
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
