//! The cost per flush of 100k series (90k counters, 10k timers of 150 values each) of the
//! backends that export flushes as they are: otlp (exponential and explicit histograms, delta,
//! gzipped), circonus (HTTPTrap JSON and IRONdb records), influx (line protocol) and file
//! (Net::Statsd::Server lines and JSON lines). Bytes per flush are printed once per mode.
//! Run: `cargo bench -p histd --bench exports`.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use histd::exports::circonus_config::CirconusFormat;
use histd::exports::file_config::FileFormat;
use histd::exports::{circonus, file, influx};
use histd::otlp::config::{OtlpConfig, OtlpHistograms};
use histd::otlp::encode::Encoder;
use histd::otlp::state::Running;

#[path = "flush_of_100k.rs"]
mod flush_of_100k;

fn export_costs(c: &mut Criterion) {
    let snapshot = flush_of_100k::snapshot(1_010_000, false);
    let mut group = c.benchmark_group("export a flush of 100k series");
    group.sample_size(10);
    let otlp_modes = [
        ("exponential, gzip", OtlpHistograms::Exponential, true),
        ("exponential, no compression", OtlpHistograms::Exponential, false),
        ("explicit, gzip", OtlpHistograms::Explicit, true),
    ];
    for (mode, histograms, gzip) in otlp_modes {
        let encoder = Encoder::new(&OtlpConfig { histograms, gzip, ..OtlpConfig::default() });
        let requests = encoder.encode(&snapshot, &mut Running::default());
        let bytes: usize = requests.iter().map(|r| r.body.len()).sum();
        eprintln!("otlp {mode}: {} requests, {bytes} bytes", requests.len());
        group.bench_function(format!("otlp, {mode}"), |b| {
            b.iter(|| black_box(encoder.encode(&snapshot, &mut Running::default())))
        });
    }
    let irondb =
        CirconusFormat::Irondb { check: "web1`histd`c_1_1::histd`1b988fd7-d1e1-48ec-848e-55709511d43f".into() };
    for (mode, format) in [("httptrap", CirconusFormat::HttpTrap), ("irondb", irondb)] {
        let bytes: usize = circonus::encode(&snapshot, &format, 4 << 20).iter().map(|r| r.body.len()).sum();
        eprintln!("circonus {mode}: {bytes} bytes");
        group.bench_function(format!("circonus, {mode}"), |b| {
            b.iter(|| black_box(circonus::encode(&snapshot, &format, 4 << 20)))
        });
    }
    let layout = influx::Layout {
        separator: "_".into(),
        tags: vec![("host".into(), "web-1".into())],
        max_request_bytes: 1 << 20,
    };
    let requests = influx::encode(&snapshot, &layout);
    let bytes: usize = requests.iter().map(|r| r.body.len()).sum();
    eprintln!("influx line protocol: {} requests, {bytes} bytes", requests.len());
    group.bench_function("influx, line protocol", |b| b.iter(|| black_box(influx::encode(&snapshot, &layout))));
    for (mode, format) in [("statsd", FileFormat::Statsd), ("jsonl", FileFormat::Jsonl)] {
        eprintln!("file {mode}: {} bytes", file::encode(&snapshot, format, "statsd").0.len());
        group.bench_function(format!("file, {mode}"), |b| {
            b.iter(|| black_box(file::encode(&snapshot, format, "statsd")))
        });
    }
    group.finish();
}

criterion_group!(benches, export_costs);
criterion_main!(benches);
