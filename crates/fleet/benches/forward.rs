//! The forward backend's cost per flush of 100k series (90k counters, 10k timers of 150 values
//! each) cut for 2 global nodes: at the local, cutting and compressing the batches (with the
//! timers' raw values, the default, and without: `forward.rawValuesLimit: 0`); at the global,
//! decoding and merging them; and what proving the batches' source costs (issue 48, P4): the
//! local signing each body (HMAC-SHA256, `forward.kafka.signingKeyFile`), the global checking
//! it (`global.kafka.signingKeys`, 100 sources). Bytes per flush are printed once per mode.
//! Run: `cargo bench -p fleet --bench forward`.

use agg::{AggConfig, Aggregator};
use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion};
use fleet::cut::{cut, CutSettings};
use fleet::format;
use fleet::ring::{Node, Ring};
use fleet::signing::{SigningKey, SourceKeys};

#[path = "../../histd/benches/flush_of_100k.rs"]
mod flush_of_100k;

fn ring() -> Ring {
    let node = |name: &str| Node::new(name.to_string());
    Ring::new(vec![node("http://10.0.0.5:8127"), node("http://10.0.0.6:8127")])
}

fn settings(raw_values_limit: usize) -> CutSettings {
    CutSettings {
        source: "web-1".into(),
        prefix_stats: "statsd".into(),
        set_members_limit: 1000,
        raw_values_limit,
        max_batch_bytes: 8 << 20,
    }
}

fn forward_costs(c: &mut Criterion) {
    let snapshot = flush_of_100k::snapshot(1_010_000, true);
    let ring = ring();
    let mut group = c.benchmark_group("forward flush of 100k series");
    group.sample_size(10);
    for (mode, limit) in [("with raw values", 8192), ("histograms only", 0)] {
        let parts = cut(&snapshot, &settings(limit), &ring, 0);
        let compressed: usize = parts.iter().map(|p| p.body.len()).sum();
        let raw: usize = parts.iter().map(|p| snap::raw::Decoder::new().decompress_vec(&p.body).unwrap().len()).sum();
        eprintln!(
            "{mode}: {} requests, {compressed} bytes compressed ({raw} before), {:.1} bytes a series",
            parts.len(),
            compressed as f64 / 100_000.0
        );
        group.bench_function(format!("local: cut and compress, {mode}"), |b| {
            b.iter(|| black_box(cut(&snapshot, &settings(limit), &ring, 0)))
        });
        let bodies: Vec<Vec<u8>> = parts.into_iter().map(|p| p.body).collect();
        let secret = |n: usize| format!("{n:04}-6f1d2c3b4a5968778695a4b3c2d1e0f1");
        let key = SigningKey::new(&secret(42)).unwrap();
        group.bench_function(format!("local: sign, {mode}"), |b| {
            b.iter(|| bodies.iter().map(|body| black_box(key.sign(body)).len()).sum::<usize>())
        });
        let sources: Vec<(String, SigningKey)> =
            (0..100).map(|n| (format!("web-{n}"), SigningKey::new(&secret(n)).unwrap())).collect();
        let keys = SourceKeys::new(sources);
        let signatures: Vec<Vec<u8>> = bodies.iter().map(|body| key.sign(body)).collect();
        group.bench_function(format!("global: check signatures, {mode}"), |b| {
            b.iter(|| {
                for (body, signature) in bodies.iter().zip(&signatures) {
                    keys.check("web-42", body, Some(signature)).unwrap();
                }
            })
        });
        group.bench_function(format!("global: decode and merge, {mode}"), |b| {
            b.iter_batched(
                || Aggregator::new(AggConfig::default()),
                |mut global| {
                    for body in &bodies {
                        merge_into(&mut global, body);
                    }
                    global
                },
                BatchSize::LargeInput,
            )
        });
        // A global's steady state: the series known already, 10 locals' flushes merged (each
        // timer's raw values adding up), then its flush, which sorts and bins them.
        group.bench_function(format!("global: 10 locals merged and flushed, {mode}"), |b| {
            b.iter_batched(
                || {
                    let mut global = Aggregator::new(AggConfig::default());
                    bodies.iter().for_each(|body| merge_into(&mut global, body));
                    global.flush(0);
                    global
                },
                |mut global| {
                    for _ in 0..10 {
                        bodies.iter().for_each(|body| merge_into(&mut global, body));
                    }
                    black_box(global.flush(10_000));
                    global
                },
                BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

/// What a global does with one body: decompress and check it, then merge its series where
/// they lie.
fn merge_into(global: &mut Aggregator, body: &[u8]) {
    format::decompress_checked(body, 1 << 30, usize::MAX).unwrap().read_into(&mut global.absorbing());
}

criterion_group!(benches, forward_costs);
criterion_main!(benches);
