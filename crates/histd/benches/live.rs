//! What one poll of `/api/v1/live` (`histd top`) costs the daemon at 100k series (90k
//! counters, 10k timers of 150 values): `Aggregator::live_series`, the part done under the
//! aggregation lock (the flusher waits for it; the readers never take that lock), first with
//! timers' values still waiting to be binned (the first poll of an interval), then settled
//! (every later poll). Run: `cargo bench -p histd --bench live`.

use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion};

#[path = "flush_of_100k.rs"]
mod flush_of_100k;

fn live_costs(c: &mut Criterion) {
    let mut group = c.benchmark_group("live view of 100k series");
    group.sample_size(10);
    group.bench_function("first poll of the interval (timers binned now)", |b| {
        b.iter_batched(
            || flush_of_100k::aggregator(false),
            |mut aggregator| black_box(aggregator.live_series(Some(1500.0)).len()),
            BatchSize::LargeInput,
        )
    });
    let mut settled = flush_of_100k::aggregator(false);
    settled.live_series(None);
    group.bench_function("a later poll", |b| b.iter(|| black_box(settled.live_series(Some(1500.0)).len())));
    group.finish();
}

criterion_group!(benches, live_costs);
criterion_main!(benches);
