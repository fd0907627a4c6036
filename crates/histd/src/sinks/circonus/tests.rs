//! The encoder on snapshots of the real aggregator: HTTPTrap bodies parsed back as JSON,
//! IRONdb records split on tabs, stream tags, and large flushes split into requests.

use agg::{AggConfig, Aggregator, Snapshot, Table};
use circllhist::Histogram;

use super::config::CirconusFormat;
use super::encode::{circonus_name, encode};

fn snapshot(packet: &str) -> Snapshot {
    crate::sinks::test_flushes(&[packet], 1_700_000_000_250, AggConfig::default()).remove(0)
}

#[test]
fn names_carry_tags_as_stream_tags() {
    let cases = [
        ("api.hits", "api.hits"),
        ("api.hits;route=login", "api.hits|ST[route:login]"),
        ("lat;env=prod;url=a:b=c", "lat|ST[env:prod,url:a:b=c]"),
        ("lat;odd key=x y", "lat|ST[b\"b2RkIGtleQ==\":b\"eCB5\"]"),
        ("lat;a:b=v", "lat|ST[b\"YTpi\":v]"),
        ("lat;flag=", "lat|ST[flag:b\"\"]"),
    ];
    for (key, want) in cases {
        let mut name = String::new();
        circonus_name(&mut name, key);
        assert_eq!(name, want, "{key}");
    }
}

#[test]
fn httptrap_json_has_each_type_and_the_histograms_bytes() {
    let flush = snapshot("hits:3|c|@0.5\nheap:-2.5|g\nusers:a|s\nusers:b|s\nlat:100|ms\nlat:250|ms");
    let requests = encode(&flush, &CirconusFormat::HttpTrap, 1 << 20);
    assert_eq!(requests.len(), 1);
    let body: serde_json::Value = serde_json::from_slice(&requests[0].body).unwrap();
    let typed = |kind: &str, value: serde_json::Value| serde_json::json!({ "_type": kind, "_value": value, "_ts": 1_700_000_000_250u64 });
    assert_eq!(body["hits"], typed("n", 6.into()));
    assert_eq!(body["heap"], typed("n", (-2.5).into()));
    assert_eq!(body["users"], typed("L", 2.into()));
    let histogram = Histogram::from_base64(body["lat"]["_value"].as_str().unwrap()).unwrap();
    assert_eq!(histogram, flush.timers[0].histogram);
    assert_eq!(body["lat"]["_type"], "h");
    assert_eq!(requests[0].points as usize, body.as_object().unwrap().len());
}

#[test]
fn irondb_records_and_an_idle_timer_left_out() {
    let config = AggConfig::default();
    let mut aggregator = Aggregator::new(config.clone());
    let mut table = Table::new(config.key_name_sanitize, config.timer_sample_limit);
    table.insert_packet(1, b"lat:5|ms\nn:1|c");
    aggregator.absorb(table);
    aggregator.flush(1_700_000_000_000);
    // The next interval has no values: Etsy flushes the timer empty, Circonus gets nothing.
    let idle = aggregator.flush(1_700_000_010_007);
    let check = CirconusFormat::Irondb { check: "h`histd`c_1_1::histd`0d6a5c3e-6e1f-4b1a-9b8e-1f2e3d4c5b6a".into() };
    let text = String::from_utf8(encode(&idle, &check, 1 << 20)[0].body.to_vec()).unwrap();
    assert!(!text.contains("\tlat\t"), "{text}");
    let counter = text.lines().find(|l| l.contains("\tn\t")).unwrap();
    assert_eq!(
        counter.split('\t').collect::<Vec<_>>(),
        vec!["M", "1700000010.007", "h`histd`c_1_1::histd`0d6a5c3e-6e1f-4b1a-9b8e-1f2e3d4c5b6a", "n", "n", "0"]
    );
}

#[test]
fn a_large_flush_is_split_into_whole_records() {
    let packet: String = (0..300).map(|i| format!("counter.number.{i}:1|c\n")).collect();
    let flush = snapshot(&packet);
    for format in [CirconusFormat::HttpTrap, CirconusFormat::Irondb { check: "c".into() }] {
        let requests = encode(&flush, &format, 4096);
        assert!(requests.len() > 2, "{format:?}");
        let mut records = 0;
        for request in &requests {
            assert!(request.body.len() <= 4096, "{}", request.body.len());
            let text = std::str::from_utf8(&request.body).unwrap();
            records += match format {
                CirconusFormat::HttpTrap => {
                    serde_json::from_str::<serde_json::Value>(text).unwrap().as_object().unwrap().len()
                }
                CirconusFormat::Irondb { .. } => text.lines().count(),
            };
        }
        assert_eq!(records, flush.counters.len());
        assert_eq!(requests.iter().map(|r| r.points as usize).sum::<usize>(), records);
    }
}
