//! Table throughput: parse + aggregate, per line, for series already seen (the steady state),
//! at 1k and 100k names, and 100-line datagrams of exactly what `histd bench --lines 100` sends;
//! a flush of 100k counters; and sorting a timer's values at the sample
//! limit as the flush does. Run: `cargo bench -p agg --bench table`.

use agg::{AggConfig, Aggregator, Table, Values};
use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion, Throughput};

/// `datagrams` datagrams of 25 lines cycling through `names` names of `kind`.
fn traffic(names: usize, kind: &str, datagrams: usize) -> Vec<Vec<u8>> {
    datagrams_of(names, datagrams, 25, |next| format!("{}|{kind}", 1 + next % 997))
}

/// `datagrams` datagrams of `lines` lines cycling through `names` names, each line's value
/// and type given by `value_and_type` (of the line's number).
fn datagrams_of(
    names: usize,
    datagrams: usize,
    lines: usize,
    value_and_type: impl Fn(usize) -> String,
) -> Vec<Vec<u8>> {
    let mut next = 0;
    (0..datagrams)
        .map(|_| {
            let mut packet = String::new();
            for _ in 0..lines {
                packet.push_str(&format!("bench.{}:{}\n", next % names, value_and_type(next)));
                next += 1;
            }
            packet.into_bytes()
        })
        .collect()
}

fn warmed(names: usize, packets: &[Vec<u8>]) -> Table {
    let mut table = Table::new(true, 8192);
    for packet in packets.iter().cycle().take(names / 25 + packets.len()) {
        table.insert_packet(1, packet);
    }
    table
}

fn inserts(c: &mut Criterion) {
    let mut group = c.benchmark_group("table insert (25-line datagram)");
    for (label, names, kind) in
        [("1k counters", 1_000, "c"), ("100k counters", 100_000, "c"), ("1k timers", 1_000, "ms")]
    {
        let packets = traffic(names, kind, 4096);
        let mut table = warmed(names, &packets);
        let mut index = 0;
        group.throughput(Throughput::Elements(25));
        group.bench_function(label, |b| {
            b.iter(|| {
                index = (index + 1) % packets.len();
                table.insert_packet(1, black_box(&packets[index]));
            })
        });
    }
    group.finish();
    // What `histd bench --lines 100 --names 1000` sends: `bench.N:1|c`, 100 lines a datagram.
    let mut group = c.benchmark_group("table insert (100-line datagram)");
    let packets = datagrams_of(1_000, 1024, 100, |_| "1|c".to_string());
    let mut table = warmed(1_000, &packets);
    let mut index = 0;
    group.throughput(Throughput::Elements(100));
    group.bench_function("1k counters, bench tool's lines", |b| {
        b.iter(|| {
            index = (index + 1) % packets.len();
            table.insert_packet(1, black_box(&packets[index]));
        })
    });
    group.finish();
}

fn flush(c: &mut Criterion) {
    let packets = traffic(100_000, "c", 4000);
    c.bench_function("absorb + flush 100k counters", |b| {
        b.iter_batched(
            || warmed(100_000, &packets),
            |table| {
                let mut aggregator = Aggregator::new(AggConfig::default());
                aggregator.absorb(table);
                aggregator.flush(10_000)
            },
            BatchSize::LargeInput,
        )
    });
}

/// 8192 whole-millisecond values (1 to 997, the generator's), sorted as a flush sorts a timer
/// at the sample limit (`Values`: by radix), against comparison sorting of the same values.
fn sort(c: &mut Criterion) {
    let values: Vec<u16> = (0..8192u32).map(|i| (1 + i.wrapping_mul(2_654_435_761) % 997) as u16).collect();
    let mut group = c.benchmark_group("sort 8192 timer values");
    group.bench_function("Values::sort_prefix_like_etsy", |b| {
        b.iter_batched(
            || Values::Milliseconds(values.clone()),
            |mut list| {
                list.sort_prefix_like_etsy(list.len());
                list
            },
            BatchSize::SmallInput,
        )
    });
    group.bench_function("slice::sort_unstable", |b| {
        b.iter_batched(
            || values.clone(),
            |mut list| {
                list.sort_unstable();
                list
            },
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

criterion_group!(benches, inserts, flush, sort);
criterion_main!(benches);
