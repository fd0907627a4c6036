//! The file backend's output parsed back (both formats, from snapshots of the real
//! aggregator), rotation by size, reopening after logrotate moved the file, and a write that
//! fails counted.

use std::collections::BTreeMap;
use std::path::PathBuf;

use agg::{AggConfig, Snapshot};
use circllhist::Histogram;

use super::config::{FileConfig, FileFormat};
use super::encode::encode;
use super::sink::{rotate, Writer};
use crate::telemetry::{DropReason, EtsyStatus, SinkTelemetry};

/// One flush of `packet` through an aggregator that keeps sets' members (as the config does
/// with the file backend).
fn snapshot(packet: &str) -> Snapshot {
    let config = AggConfig { keep_mergeable: true, ..AggConfig::default() };
    crate::sinks::test_flushes(&[packet], 1_700_000_000_000, config).remove(0)
}

const PACKET: &str =
    "hits:3|c\nhits;route=a:1|c|@0.5\nheap:1024.5|g\nusers:bob|s\nusers:ann|s\nlat:100|ms\nlat:200|ms\nlat:600|ms";

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("histd-file-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn statsd_lines_are_net_statsd_servers_and_parse_back() {
    let (text, series) = encode(&snapshot(PACKET), FileFormat::Statsd, "statsd");
    let lines: BTreeMap<(String, String), String> = text
        .lines()
        .map(|line| {
            let fields: Vec<&str> = line.split('\t').collect();
            assert_eq!(fields.len(), 3, "{line}");
            ((fields[0].to_string(), fields[1].to_string()), fields[2].to_string())
        })
        .collect();
    let get = |kind: &str, name: &str| lines.get(&(kind.to_string(), name.to_string())).map(String::as_str);
    let cases = [
        ("c", "hits", Some("3")),
        ("c", "hits;route=a", Some("2")),
        ("g", "heap", Some("1024.5")),
        ("s", "users", Some("ann;bob")),
        ("t", "lat.count", Some("3")),
        ("t", "lat.upper", Some("600")),
        ("t", "lat.mean", Some("300")),
        ("t", "lat.upper_90", Some("600")),
        ("c", "statsd.metrics_received", None),
    ];
    for (kind, name, want) in cases {
        assert_eq!(get(kind, name), want, "{kind} {name}");
    }
    assert_eq!(series, 5, "2 counters, a gauge, a set, a timer (histd's own left out)");
}

#[test]
fn jsonl_objects_parse_back_with_the_timers_histogram() {
    let (text, series) = encode(&snapshot(PACKET), FileFormat::Jsonl, "statsd");
    let objects: Vec<serde_json::Value> = text.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    assert_eq!(objects.len() as u64, series);
    let find = |key: &str| objects.iter().find(|o| o["key"] == key).unwrap_or_else(|| panic!("{key}"));
    let hits = find("hits;route=a");
    assert_eq!(
        (hits["type"].as_str(), hits["name"].as_str(), hits["tags"]["route"].as_str()),
        (Some("counter"), Some("hits"), Some("a"))
    );
    assert_eq!((hits["count"].as_f64(), hits["time"].as_u64()), (Some(2.0), Some(1_700_000_000)));
    assert_eq!(find("heap")["value"].as_f64(), Some(1024.5));
    assert_eq!(find("users")["members"], serde_json::json!(["ann", "bob"]));
    let lat = find("lat");
    assert_eq!(
        (lat["unit"].as_str(), lat["count"].as_f64(), lat["sum"].as_f64()),
        (Some("ms"), Some(3.0), Some(900.0))
    );
    assert_eq!(lat["stats"]["upper_90"].as_f64(), Some(600.0));
    let histogram = Histogram::from_base64(lat["circllhist"].as_str().unwrap()).unwrap();
    let mut want = Histogram::new();
    [100.0, 200.0, 600.0].iter().for_each(|&v| {
        want.insert(v, 1);
    });
    assert_eq!(histogram, want);
    assert!(objects.iter().any(|o| o["key"] == "statsd.metrics_received"), "jsonl keeps every series");
}

#[test]
fn rotation_keeps_the_newest_files() {
    let dir = temp("rotate");
    let path = dir.join("flush.log");
    for round in 1..=5 {
        std::fs::write(&path, format!("{round}")).unwrap();
        rotate(&path, 3).unwrap();
    }
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).ok();
    assert_eq!(
        (read("flush.log"), read("flush.log.1"), read("flush.log.2"), read("flush.log.3")),
        (None, Some("5".into()), Some("4".into()), Some("3".into()))
    );
    assert_eq!(read("flush.log.4"), None);
    std::fs::write(&path, "x").unwrap();
    rotate(&path, 0).unwrap();
    assert!(!path.exists());
}

#[test]
fn the_writer_rotates_by_size_and_reopens_a_moved_file() {
    let dir = temp("writer");
    let path = dir.join("sub/flush.log");
    let config = FileConfig { path: path.clone(), format: FileFormat::Statsd, max_bytes: 4096, keep: 2 };
    let telemetry = SinkTelemetry::new("file", EtsyStatus::None, 0);
    let mut writer = Writer::new(config);
    let flush = snapshot(&(0..100).map(|i| format!("counter.number.{i}:1|c\n")).collect::<String>());
    let size = encode(&flush, FileFormat::Statsd, "statsd").0.len() as u64;
    assert!(size < 4096 && size * 2 > 4096, "{size}");
    writer.write_flush(&flush, "statsd", &telemetry);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), size);
    // The second flush does not fit: the first goes to flush.log.1.
    writer.write_flush(&flush, "statsd", &telemetry);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), size);
    assert_eq!(std::fs::metadata(dir.join("sub/flush.log.1")).unwrap().len(), size);
    // logrotate moves the file away: the next flush opens a new one at the path.
    std::fs::rename(&path, dir.join("moved")).unwrap();
    writer.write_flush(&flush, "statsd", &telemetry);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), size);
    assert_eq!(std::fs::metadata(dir.join("moved")).unwrap().len(), size);
    assert_eq!(telemetry.points_out.get(), 300);
    assert_eq!(telemetry.errors.get(), 0);
}

#[test]
fn a_write_that_fails_is_counted_and_the_next_one_works() {
    let dir = temp("fails");
    let path = dir.join("flush.log");
    std::fs::create_dir_all(&path).unwrap();
    let config = FileConfig { path: path.clone(), format: FileFormat::Jsonl, max_bytes: 0, keep: 0 };
    let telemetry = SinkTelemetry::new("file", EtsyStatus::None, 0);
    let mut writer = Writer::new(config);
    let flush = snapshot("a:1|c\nb:2|g");
    writer.write_flush(&flush, "statsd", &telemetry);
    assert_eq!(telemetry.errors.get(), 1);
    assert!(telemetry.dropped(DropReason::Rejected) >= 2);
    std::fs::remove_dir(&path).unwrap();
    writer.write_flush(&flush, "statsd", &telemetry);
    assert_eq!(telemetry.errors.get(), 1);
    assert!(std::fs::read_to_string(&path).unwrap().lines().count() >= 2);
}
