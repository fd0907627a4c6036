//! The flush the backend benchmarks share: 100k series, 90k counters and 10k timers of 150
//! values spread over ~100 circllhist bins each.

#![allow(dead_code)] // each bench uses part of it

use agg::{AggConfig, Aggregator, Snapshot, Table};

/// Counters in the flush.
pub const COUNTERS: usize = 90_000;
/// Timers in the flush.
pub const TIMERS: usize = 10_000;

/// One flush (with `keep_mergeable`, as the forward backend has it): every counter once, every timer with values spread over ~100 circllhist bins
/// (1 ms to 10 s, log-spaced), from a deterministic generator.
pub fn snapshot(flush_ms: u64, keep_mergeable: bool) -> Snapshot {
    aggregator(keep_mergeable).flush(flush_ms)
}

/// The aggregator holding that flush's interval, not flushed yet.
pub fn aggregator(keep_mergeable: bool) -> Aggregator {
    let config = AggConfig { keep_mergeable, ..AggConfig::default() };
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
    aggregator
}
