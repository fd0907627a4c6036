//! Encoder tests: snapshots from the real aggregator, names checked line by line.

use agg::{AggConfig, Aggregator, Table};

use super::{Chunked, GraphiteNames};
use crate::config::Config;

fn encode(config_text: &str, packet: &str) -> Vec<String> {
    let config = Config::from_text(config_text).unwrap();
    let mut aggregator = Aggregator::new(AggConfig { ..config.agg.clone() });
    let mut table = Table::new(config.agg.key_name_sanitize, config.agg.timer_sample_limit);
    table.insert_packet(1, packet.as_bytes());
    aggregator.absorb(table);
    let snapshot = aggregator.flush(1_000_000);
    let names = GraphiteNames::new(
        config.settings::<super::Graphite>(),
        &config.agg.prefix_stats,
        config.agg.key_name_sanitize,
    );
    let mut out = String::new();
    let mut chunks = Chunked::new(|chunk: String| out.push_str(&chunk));
    names.encode(&snapshot, &mut chunks);
    chunks.finish();
    out.lines().map(str::to_string).collect()
}

#[test]
fn names_every_type_in_both_namespaces() {
    let packet = "c:20|c\nt:1|ms\ng:2|g\nu:x|s\ntg:1|c|#env:prod";
    let legacy = encode("{ percentThreshold: [90], calculatedTimerMetrics: ['mean'] }", packet);
    let want_legacy = [
        "stats.c 2 1000",
        "stats_counts.c 20 1000",
        "stats.statsd.bad_lines_seen 0 1000",
        "stats_counts.statsd.bad_lines_seen 0 1000",
        "stats.statsd.metrics_received 0.5 1000",
        "stats_counts.statsd.metrics_received 5 1000",
        "stats.statsd.packets_received 0.1 1000",
        "stats_counts.statsd.packets_received 1 1000",
        "stats.tg;env=prod 0.1 1000",
        "stats_counts.tg;env=prod 1 1000",
        "stats.timers.t.mean 1 1000",
        "stats.gauges.g 2 1000",
        "stats.sets.u.count 1 1000",
        "statsd.numStats 8 1000",
    ];
    assert_eq!(legacy, want_legacy);
    let namespaced = encode("{ graphite: { legacyNamespace: false }, calculatedTimerMetrics: ['mean'] }", packet);
    assert!(namespaced.contains(&"stats.counters.c.rate 2 1000".to_string()));
    assert!(namespaced.contains(&"stats.counters.tg.count;env=prod 1 1000".to_string()));
    assert!(namespaced.contains(&"stats.timers.t.mean 1 1000".to_string()));
    assert!(namespaced.contains(&"stats.gauges.g 2 1000".to_string()));
    assert!(namespaced.contains(&"stats.sets.u.count 1 1000".to_string()));
    assert_eq!(namespaced.last().unwrap(), "stats.statsd.numStats 8 1000");
}

#[test]
fn cleans_raw_keys_when_the_daemon_did_not() {
    let lines = encode("{ keyNameSanitize: false }", "a b/c:1|c|#x y:z");
    assert!(lines.contains(&"stats_counts.a_b-c;x y=z 1 1000".to_string()), "{lines:#?}");
}

#[test]
fn empty_prefixes_drop_their_level() {
    let lines = encode("{ graphite: { legacyNamespace: false, globalPrefix: '', prefixGauge: '' } }", "g:1|g");
    assert!(lines.contains(&"g 1 1000".to_string()), "{lines:#?}");
    assert!(lines.contains(&"statsd.numStats 4 1000".to_string()), "{lines:#?}");
}

#[test]
fn large_flushes_split_into_chunks_at_line_ends() {
    let config = Config::from_text("{}").unwrap();
    let mut aggregator = Aggregator::new(config.agg.clone());
    let mut table = Table::new(true, 8192);
    for start in (0..60_000).step_by(500) {
        let packet: String = (start..start + 500).map(|i| format!("chunked.series.{i}:1|c\n")).collect();
        table.insert_packet(1, packet.as_bytes());
    }
    aggregator.absorb(table);
    let snapshot = aggregator.flush(1_000_000);
    let names = GraphiteNames::new(config.settings::<super::Graphite>(), &config.agg.prefix_stats, true);
    let mut chunks = Vec::new();
    let mut out = Chunked::new(|chunk: String| chunks.push(chunk));
    names.encode(&snapshot, &mut out);
    out.finish();
    assert!(chunks.len() > 1, "{} chunks", chunks.len());
    for chunk in &chunks {
        assert!(chunk.ends_with('\n') && chunk.len() < super::encode::CHUNK_BYTES + 4096);
    }
    assert_eq!(chunks.concat().lines().count(), 2 * 60_003 + 1);
}
