//! A flush cut, decoded and merged elsewhere gives the statistics one histd that saw every
//! line gives; bad bodies are refused with the field at fault.

use agg::{AggConfig, Aggregator, Snapshot, Table, TimerStat};

use fleet::cut::{cut, CutSettings};
use fleet::format::{self, FormatError};
use fleet::ring::{Node, Ring};

fn ring(names: &[&str]) -> Ring {
    Ring::new(names.iter().map(|n| Node::new(n.to_string())).collect())
}

fn settings(source: &str) -> CutSettings {
    CutSettings {
        source: source.into(),
        prefix_stats: "statsd".into(),
        set_members_limit: 100,
        raw_values_limit: 8192,
        max_batch_bytes: 1 << 20,
    }
}

fn aggregator(keep_mergeable: bool) -> Aggregator {
    Aggregator::new(AggConfig { keep_mergeable, ..AggConfig::default() })
}

fn feed(aggregator: &mut Aggregator, at_unix_s: u64, packet: &str) {
    let mut table = Table::new(true, aggregator.config().timer_sample_limit);
    table.insert_packet(at_unix_s, packet.as_bytes());
    aggregator.absorb(table);
}

/// Lines of one host: timers, counters, a gauge set at `at`, a set.
fn host_lines(host: u32) -> String {
    let mut lines = String::new();
    for i in 0..300 {
        lines.push_str(&format!("api.latency:{}|ms\n", (i * 7 + host * 13) % 997));
        lines.push_str(&format!("api.hits;route=r{}:1|c\n", i % 5));
    }
    lines.push_str(&format!("pool.size:{}|g\n", 10 + host));
    for user in 0..(40 + host * 300) {
        lines.push_str(&format!("users:u{user}|s\n"));
    }
    lines
}

fn stats(snapshot: &Snapshot, key: &str) -> Vec<(TimerStat, f64)> {
    snapshot.timers.iter().find(|t| t.key == key).unwrap().stats.iter().collect()
}

fn forward_into(global: &mut Aggregator, host: u32, nodes: &Ring) {
    let mut local = aggregator(true);
    feed(&mut local, 1000 + u64::from(host), &host_lines(host));
    let snapshot = local.flush(1_010_000);
    for part in cut(&snapshot, &settings(&format!("host-{host}")), nodes, 0) {
        let batch = format::decode(&part.body, 1 << 26).expect("a batch we wrote reads back");
        assert_eq!(batch.id.part, nodes.nodes()[part.node].name);
        global.absorb_mergeable(batch.interval);
    }
}

#[test]
fn three_hosts_forwarded_give_what_one_histd_fed_every_line_gives() {
    let nodes = ring(&["http://127.0.0.1:1"]);
    let mut global = aggregator(false);
    let mut single = aggregator(false);
    for host in 0..3 {
        forward_into(&mut global, host, &nodes);
        feed(&mut single, 1000 + u64::from(host), &host_lines(host));
    }
    let (global, single) = (global.flush(1_020_000), single.flush(1_020_000));
    assert_eq!(stats(&global, "api.latency"), stats(&single, "api.latency"), "Etsy-exact from forwarded raw values");
    let distribution = |s: &Snapshot| s.timers.iter().find(|t| t.key == "api.latency").unwrap().histogram.clone();
    assert_eq!(distribution(&global), distribution(&single), "the same circllhist bins");
    let counters = |s: &Snapshot| s.counters.iter().map(|c| (c.key.to_string(), c.count)).collect::<Vec<_>>();
    assert_eq!(counters(&global).iter().filter(|(k, _)| k.starts_with("api")).count(), 5);
    for (key, count) in counters(&single).into_iter().filter(|(k, _)| k.starts_with("api")) {
        assert!(counters(&global).contains(&(key, count)));
    }
    let gauge = global.gauges.iter().find(|g| g.key == "pool.size").unwrap();
    assert_eq!(gauge.value, 12.0, "the latest update (host 2, at 1002 s) wins");
    let set = |s: &Snapshot| s.sets.iter().find(|p| p.key == "users").map(|p| (p.count, p.estimated)).unwrap();
    let (count, estimated) = set(&global);
    assert!(estimated, "host 1 and 2 sent sketches (over 100 members)");
    assert!((count as f64 - 640.0).abs() < 640.0 * 0.03, "{count} of 640 distinct users");
    assert_eq!(set(&single), (640, false));
}

#[test]
fn series_are_cut_by_owner_and_internal_metrics_stay_home() {
    let nodes = ring(&["http://10.0.0.1:8127", "http://10.0.0.2:8127", "http://10.0.0.3:8127"]);
    let mut local = aggregator(true);
    let lines: String = (0..600).map(|i| format!("k{i}:1|c\nt{i}:{i}|ms\n")).collect();
    feed(&mut local, 5, &lines);
    let snapshot = local.flush(10_000);
    let parts = cut(&snapshot, &settings("h"), &nodes, 0);
    assert_eq!(parts.len(), 3);
    let mut total = 0;
    for part in &parts {
        let batch = format::decode(&part.body, 1 << 26).unwrap();
        for (key, _) in &batch.interval.counters {
            assert_eq!(nodes.owner(key.as_bytes()), part.node, "{key}");
            assert!(!key.starts_with("statsd."), "{key} is histd's own");
        }
        assert_eq!(batch.interval.len() as u64, part.series);
        assert_eq!((batch.id.interval_start_ms, batch.id.interval_ms), (1, 10_000), "after the previous cut's 0");
        total += part.series;
    }
    assert_eq!(total, 1200);
}

#[test]
fn flushes_in_the_same_second_have_identities_of_their_own() {
    let nodes = ring(&["http://10.0.0.1:8127"]);
    let mut local = Aggregator::new(AggConfig {
        keep_mergeable: true,
        flush_interval: std::time::Duration::from_millis(300),
        ..AggConfig::default()
    });
    let mut previous = 0;
    for flush_ms in [5_000_100, 5_000_400, 5_000_400, 5_000_700] {
        feed(&mut local, 5000, "c:1|c");
        let snapshot = local.flush(flush_ms);
        let part = cut(&snapshot, &settings("h"), &nodes, previous).remove(0);
        assert!(part.interval_start_ms > previous, "{flush_ms}: {} after {previous}", part.interval_start_ms);
        previous = part.interval_start_ms;
    }
}

#[test]
fn a_big_part_goes_in_numbered_chunks() {
    let nodes = ring(&["http://10.0.0.1:8127"]);
    let mut local = aggregator(true);
    let lines: String = (0..5000).map(|i| format!("a.rather.long.counter.name.number.{i}:1|c\n")).collect();
    feed(&mut local, 5, &lines);
    let snapshot = local.flush(10_000);
    let parts = cut(&snapshot, &CutSettings { max_batch_bytes: 65_536, ..settings("h") }, &nodes, 0);
    assert!(parts.len() > 2, "{} parts", parts.len());
    let chunks: Vec<u64> = parts.iter().map(|p| format::decode(&p.body, 1 << 26).unwrap().id.chunk).collect();
    assert_eq!(chunks, (0..parts.len() as u64).collect::<Vec<_>>());
    assert_eq!(parts.iter().map(|p| p.series).sum::<u64>(), 5000);
}

#[test]
fn bad_bodies_are_refused_with_the_reason() {
    let nodes = ring(&["http://10.0.0.1:8127"]);
    let mut local = aggregator(true);
    feed(&mut local, 5, "t:1|ms\nt:2|ms\nc:1|c\ng:1|g\ns:x|s");
    let snapshot = local.flush(10_000);
    let body = cut(&snapshot, &settings("h"), &nodes, 0).remove(0).body;
    let raw = snap::raw::Decoder::new().decompress_vec(&body).unwrap();
    let compress = |raw: &[u8]| format::compress(raw);
    assert!(matches!(format::decode(b"not snappy at all", 1 << 20), Err(FormatError::Compression(_))));
    assert!(matches!(format::decode(&body, 10), Err(FormatError::Compression(_))), "over the size limit");
    let mut wrong_version = raw.clone();
    wrong_version[4] = 9;
    assert!(matches!(format::decode(&compress(&wrong_version), 1 << 20), Err(FormatError::Header(_))));
    for cut_at in 5..raw.len() {
        let result = format::decode(&compress(&raw[..cut_at]), 1 << 20);
        assert!(matches!(result, Err(FormatError::Field { .. })), "cut at {cut_at}: {result:?}");
    }
    let mut trailing = raw.clone();
    trailing.push(0);
    assert!(format::decode(&compress(&trailing), 1 << 20).is_err());
}

/// Version 1's bytes for a fixed interval: a change to the format shows here (rewrite the file
/// with HISTD_BLESS=1 only with a new version number). The file is also the decoder's fuzz seed.
#[test]
fn version_1_bytes_are_stable() {
    let nodes = ring(&["http://10.0.0.1:8127"]);
    let mut local = aggregator(true);
    let users: String = (0..150).map(|u| format!("big:u{u}|s\n")).collect();
    feed(&mut local, 7, &format!("t:1|ms\nt:2.5|ms\nh:3|h|@0.5\nc:4|c\ng:5|g\ns:a|s\ns:b|s\n{users}"));
    let snapshot = local.flush(10_000);
    let body = cut(&snapshot, &settings("golden"), &nodes, 0).remove(0).body;
    let raw = snap::raw::Decoder::new().decompress_vec(&body).unwrap();
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus-seeds/forward_batch/v1.batch");
    if std::env::var_os("HISTD_BLESS").is_some() {
        std::fs::write(&path, &raw).unwrap();
    }
    let golden = std::fs::read(&path).expect("the golden batch (HISTD_BLESS=1 writes it)");
    assert!(golden == raw, "forward format version 1 changed: {} bytes, golden {}", raw.len(), golden.len());
    let batch = format::read_batch(&golden).unwrap();
    assert_eq!((batch.interval.counters.len(), batch.interval.timers.len()), (1, 2));
    assert_eq!((batch.interval.gauges.len(), batch.interval.sets.len()), (1, 2));
}

/// docs/forward-format.md's Kafka example: the partition a key goes to, by the documented
/// hash over the partitions' numbers.
#[test]
fn kafka_partition_of_a_key() {
    let partitions = Ring::new((0..6).map(|p| Node::new(p.to_string())).collect());
    let by_hand = (0..6u64)
        .max_by_key(|p| {
            (
                agg::distinct::fmix64(
                    agg::distinct::fnv1a64(b"api.latency") ^ agg::distinct::fnv1a64(p.to_string().as_bytes()),
                ),
                std::cmp::Reverse(*p),
            )
        })
        .unwrap();
    assert_eq!(partitions.owner(b"api.latency"), by_hand as usize);
    assert_eq!(partitions.owner(b"api.latency"), 0, "the documented example");
}
