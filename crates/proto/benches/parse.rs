//! Parser throughput: lines per second on one core, for the line shapes of the ingest
//! benchmarks, through the full parser and through the readers' one-pass scanner (which hands
//! any line it does not read itself to the full parser, as the readers do).
//! Run: `cargo bench -p proto --bench parse`.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use proto::{lines, parse_line, scan_lines, Line, Scanned};

/// A datagram of `count` lines made by `line`.
fn datagram(count: usize, line: impl Fn(usize) -> String) -> Vec<u8> {
    (0..count).map(|i| line(i) + "\n").collect::<String>().into_bytes()
}

fn parse_all(packet: &[u8]) -> usize {
    let mut parsed = 0;
    for line in lines(packet) {
        if let Line::Metrics(values) = parse_line(line) {
            parsed += values.filter(Result::is_ok).count();
        }
    }
    parsed
}

fn scan_all(packet: &[u8]) -> usize {
    let mut parsed = 0;
    for line in scan_lines(packet) {
        match line {
            Scanned::Simple(metric) => parsed += usize::from(!metric.name.is_empty()),
            Scanned::Other(line) => {
                if let Line::Metrics(values) = parse_line(line) {
                    parsed += values.filter(Result::is_ok).count();
                }
            }
        }
    }
    parsed
}

fn parser(c: &mut Criterion) {
    let cases = [
        ("counters", datagram(25, |i| format!("bench.{}:1|c", 1000 + i))),
        ("timers", datagram(25, |i| format!("bench.timer.{}:{}.5|ms|@0.5", i, 10 + i))),
        ("tagged", datagram(25, |i| format!("api.latency:{}|h|#route:/login,host:web-{},env:prod", 3 + i, i % 7))),
        ("mixed", datagram(25, |i| ["a:1|c", "b:2.5|ms", "c:+3|g", "d:user42|s", "e:1:2:3|d"][i % 5].to_string())),
    ];
    let mut group = c.benchmark_group("parse 25-line datagram");
    for (name, packet) in &cases {
        group.throughput(Throughput::Elements(25));
        group.bench_function(*name, |b| b.iter(|| parse_all(black_box(packet))));
        group.bench_function(format!("{name}, one-pass scanner"), |b| b.iter(|| scan_all(black_box(packet))));
    }
    group.finish();
}

criterion_group!(benches, parser);
criterion_main!(benches);
