//! The operations the C reference was measured on (docs/circllhist.md §5), on data
//! shaped like the paper's: f64 and integer inserts, 2-way and 1000-way merges, 8 quantiles on
//! a ~380-bin histogram, serialisation both ways. Run: `cargo bench -p circllhist`.

use circllhist::{Histogram, QuantileType};
use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion};

/// A deterministic pseudo-random stream (SplitMix64), so every run measures the same data.
struct Stream(u64);

impl Stream {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Latency-like values: three significant digits over `decades` decades from 0.1 ms.
    fn latency(&mut self, decades: u64) -> f64 {
        let x = self.next();
        (100 + x % 900) as f64 * 10f64.powi(((x >> 32) % decades) as i32) / 1000.0
    }
}

fn histogram_of(seed: u64, samples: usize, decades: u64) -> Histogram {
    let mut stream = Stream(seed);
    let mut histogram = Histogram::new();
    for _ in 0..samples {
        histogram.insert(stream.latency(decades), 1);
    }
    histogram
}

fn inserts(c: &mut Criterion) {
    let mut stream = Stream(1);
    let values: Vec<f64> = (0..4096).map(|_| stream.latency(4)).collect();
    let integers: Vec<i64> = values.iter().map(|v| (v * 1000.0) as i64).collect();
    let mut histogram = histogram_of(2, 10_000, 4);
    let mut index = 0;
    c.bench_function("insert f64", |b| {
        b.iter(|| {
            index = (index + 1) & 4095;
            histogram.insert(black_box(values[index]), 1)
        })
    });
    c.bench_function("insert integer (value, scale)", |b| {
        b.iter(|| {
            index = (index + 1) & 4095;
            histogram.insert_int_scale(black_box(integers[index]), -3, 1)
        })
    });
}

fn merges(c: &mut Criterion) {
    let left = histogram_of(3, 700, 3);
    let right = histogram_of(4, 700, 3);
    eprintln!("2-way merge inputs: {} and {} bins", left.bin_count(), right.bin_count());
    c.bench_function("merge 2 histograms (~230 bins each)", |b| {
        b.iter_batched(|| left.clone(), |mut target| target.merge(black_box(&right)), BatchSize::SmallInput)
    });
    let many: Vec<Histogram> = (0..1000).map(|seed| histogram_of(seed, 400, 3)).collect();
    let average = many.iter().map(Histogram::bin_count).sum::<usize>() / many.len();
    eprintln!("1000-way merge inputs: {average} bins on average");
    c.bench_function("merge 1000 histograms", |b| b.iter(|| Histogram::merge_all(black_box(&many))));
}

fn queries(c: &mut Criterion) {
    let histogram = histogram_of(5, 100_000, 4);
    let mut histogram = histogram;
    histogram.merge(&histogram_of(6, 40, 1).clone());
    eprintln!("quantile histogram: {} bins", histogram.bin_count());
    let probes = [0.0, 0.01, 0.25, 0.5, 0.9, 0.99, 0.999, 1.0];
    c.bench_function("8 quantiles (~380 bins)", |b| {
        b.iter(|| histogram.quantiles(black_box(&probes), QuantileType::Type1).unwrap())
    });
    let bytes = histogram.to_bytes();
    c.bench_function("serialize (~380 bins)", |b| b.iter(|| black_box(&histogram).to_bytes()));
    c.bench_function("deserialize (~380 bins)", |b| b.iter(|| Histogram::from_bytes(black_box(&bytes)).unwrap()));
    let text = histogram.to_base64();
    c.bench_function("base64 encode (~380 bins)", |b| b.iter(|| black_box(&histogram).to_base64()));
    c.bench_function("base64 decode (~380 bins)", |b| b.iter(|| Histogram::from_base64(black_box(&text)).unwrap()));
}

criterion_group!(benches, inserts, merges, queries);
criterion_main!(benches);
