//! Store benchmarks: one flush of 100k series; what checksumming its blocks costs (CRC32C over
//! the bytes of the blocks a flush writes: it verifies them before merging and seals them
//! after, so twice that); a scrub of the store those flushes made; one
//! timer's p99 over 24 h of 10 s flushes (8,640 histograms), merged from raw rows and through
//! the query (hour rollups; and with the longest head tail); a 7-day query served from rollups.
//! Run: `cargo bench -p store --bench store`.

use std::path::PathBuf;

use agg::{AggConfig, Aggregator, Table};
use circllhist::Histogram;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use store::{parse, Kind, Options, Resolution, Row, Selector, Store};

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("histd-store-bench-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("histd.db")
}

/// A flush of `series` counters, as the daemon would write it.
fn flush_rows(series: usize, ts: u64) -> agg::Snapshot {
    let mut aggregator = Aggregator::new(AggConfig::default());
    let mut table = Table::new(true, 8192);
    for start in (0..series).step_by(100) {
        let packet: String = (start..(start + 100).min(series)).map(|i| format!("bench.{i}:1|c\n")).collect();
        table.insert_packet(ts, packet.as_bytes());
    }
    aggregator.absorb(table);
    aggregator.flush(ts * 1000)
}

/// A timer row at `ts`: 100 latency-like samples.
fn timer_row(ts: i64, seconds: f64) -> Row {
    let mut hist = Histogram::new();
    let (mut sum, mut min, mut max) = (0.0, f64::MAX, f64::MIN);
    for k in 0..100 {
        let value = ((ts as u64 * 7919 + k * 104_729) % 90_000 + 100) as f64 / 100.0;
        hist.insert(value, 1);
        sum += value;
        min = min.min(value);
        max = max.max(value);
    }
    Row { ts, seconds, count: 100.0, sum, sum_squares: f64::NAN, min, max, value: 100.0, histogram: Some(hist) }
}

/// One timer written every `every` seconds for `span` seconds ending at `end`.
fn timer_store(name: &str, end: i64, span: i64, every: i64) -> Store {
    let retention = store::Retention { raw: 2 * 86_400, minute: 30 * 86_400, hour: 365 * 86_400 };
    let mut store = Store::open(&temp(name), Options { retention, ..Options::default() }).unwrap();
    let mut ts = end - span + every;
    while ts <= end {
        store.write(ts, &[(Kind::Timer, "api.latency", timer_row(ts, every as f64))][..]).unwrap();
        ts += every;
    }
    store.load_series().unwrap();
    store
}

fn writes(c: &mut Criterion) {
    let path = temp("writes");
    let mut store = Store::open(&path, Options::default()).unwrap();
    let mut ts = 1_700_000_000;
    store.write(ts, &flush_rows(100_000, ts as u64)).unwrap(); // series created once
    let mut group = c.benchmark_group("store");
    group.sample_size(10);
    group.bench_function("write a flush of 100k counter series", |b| {
        b.iter_batched(
            || {
                ts += 10;
                (ts, flush_rows(100_000, ts as u64))
            },
            |(at, rows)| store.write(at, &rows).unwrap(),
            BatchSize::LargeInput,
        )
    });
    let flush_bytes = bytes_one_flush_writes(&path, ts);
    let bytes = vec![0x5au8; flush_bytes];
    // A flush checks each block it merges into and seals each block it writes: twice these bytes.
    group.bench_function(format!("crc32c over the blocks one flush writes ({flush_bytes} bytes)"), |b| {
        b.iter(|| crc32c::crc32c(std::hint::black_box(&bytes)))
    });
    let report = store.scrub().unwrap();
    let file_bytes = std::fs::metadata(&path).map_or(0, |meta| meta.len());
    group.bench_function(
        format!("scrub the store those flushes made ({} blocks, {file_bytes} bytes)", report.blocks),
        |b| b.iter(|| assert!(store.scrub().unwrap().is_clean())),
    );
    group.finish();
}

/// The bytes of the blocks the last flush (at `ts`) wrote: its head blocks (span 0, one per
/// series group) and each block holding `ts` (rollups), which it read (and verified), merged,
/// encoded and sealed again.
fn bytes_one_flush_writes(path: &std::path::Path, ts: i64) -> usize {
    let connection = rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let bytes: i64 = connection
        .query_row(
            "SELECT coalesce(sum(length(data)), 0) FROM blocks \
             WHERE (span = 0 AND start = ?1) OR (start <= ?1 AND start + span > ?1)",
            [ts],
            |row| row.get(0),
        )
        .unwrap();
    (bytes as usize).max(1)
}

fn queries(c: &mut Criterion) {
    let end = 1_700_006_400;
    let day = timer_store("day", end, 86_400, 10);
    let selector = Selector { name: "api.latency".into(), tags: vec![] };
    let id = day.select(&selector)[0].id;
    let mut group = c.benchmark_group("store");
    group.bench_function("p99 over 24 h: merge 8,640 raw histograms", |b| {
        b.iter(|| {
            let rows = day.rows(id, Resolution::Raw, end - 86_400, end + 1).unwrap();
            assert_eq!(rows.len(), 8640);
            let merged = Histogram::merge_all(rows.iter().filter_map(|r| r.histogram.as_ref()));
            merged.quantile(0.99)
        })
    });
    let p99 = parse("quantile(api.latency, 0.99)").unwrap();
    group.bench_function("p99 over 24 h: the query (hour rollups + finer tail)", |b| {
        b.iter(|| day.query(&p99, end - 86_400, end + 1, 86_400).unwrap())
    });
    // The worst tail: the query ends as a ten-minute period does, its 59 flushes still in the
    // head (one head block each, not compacted yet).
    let tail_end = end + 590;
    let tail = timer_store("tail", tail_end, 86_400, 10);
    group.bench_function("p99 over 24 h: the query, 59 flushes in the head", |b| {
        b.iter(|| tail.query(&p99, tail_end - 86_400, tail_end + 1, 86_400).unwrap())
    });
    let week = timer_store("week", end, 7 * 86_400, 60);
    group.bench_function("p99 per hour over 7 days (168 steps from rollups)", |b| {
        b.iter(|| {
            let points = week.query(&p99, end - 7 * 86_400, end + 1, 3600).unwrap();
            assert!(points.len() >= 168);
            points
        })
    });
    group.finish();
}

criterion_group!(benches, writes, queries);
criterion_main!(benches);
