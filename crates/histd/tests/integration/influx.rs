//! The influx backend against a real InfluxDB 1.x (Debian's `influxdb`): the points read back
//! with InfluxQL in Telegraf's statsd schema, a field whose type another writer fixed refused
//! and counted, and an outage of InfluxDB lost nothing within the retry buffer.

use std::time::Duration;

use crate::external::own_influxdb;
use crate::harness::{free_port, http, temp_dir, url_encode, wait_until, Daemon};

/// The rows of an InfluxQL query's first series (`[]` when it has none).
fn select(influx: &str, query: &str) -> Vec<serde_json::Value> {
    let path = format!("/query?db=histd&q={}", url_encode(query));
    let (status, body) = http(influx, "GET", &path, &[], "");
    assert_eq!(status, 200, "{query}: {body}");
    let answer: serde_json::Value = serde_json::from_str(&body).unwrap();
    answer["results"][0]["series"][0]["values"].as_array().cloned().unwrap_or_default()
}

/// The first column after the time of a one-row answer.
fn one(influx: &str, query: &str) -> Option<f64> {
    select(influx, query).first().and_then(|row| row[1].as_f64())
}

#[test]
fn flushes_are_telegrafs_points_in_influxdb_through_a_conflict_and_an_outage() {
    let (dir, port) = (temp_dir("influxdb"), free_port());
    let mut influx = own_influxdb(&dir, port);
    let address = influx.address.clone();
    assert_eq!(http(&address, "POST", &format!("/query?q={}", url_encode("CREATE DATABASE histd")), &[], "").0, 200);
    // Another writer (Telegraf writes counters as integers) fixed `conflict.value` as an integer.
    let (status, body) = http(&address, "POST", "/write?db=histd", b"conflict value=1i", "");
    assert_eq!(status, 204, "{body}");
    let config = format!(
        "{{ address: '127.0.0.1', port: 0, mgmt_port: 0, http_port: 0, flushInterval: 1000, backends: ['influx'], \
           percentThreshold: [90, 99.9], \
           influx: {{ url: 'http://{address}/write?db=histd', tags: {{ host: 'web-1', site: 'web 1,a=b\\\\c' }}, \
                      timeoutMs: 2000 }} }}"
    );
    let daemon = Daemon::start("influx-daemon", &config);
    daemon.send_udp("api.hits:3|c|#route:login\napi.hits:3|c|#route:login\ntemp:21.5|g\nvisitors:a|s\nvisitors:b|s\n");
    daemon.send_udp("api.latency:100|ms\napi.latency:200|ms\napi.latency:300|ms\napi.latency:400|ms\nconflict:5|c\n");
    let hits =
        "SELECT sum(\"value\") FROM api_hits WHERE route = 'login' AND host = 'web-1' AND metric_type = 'counter'";
    wait_until(|| one(&address, hits) == Some(6.0), "the counter in InfluxDB");
    let timer = select(
        &address,
        "SELECT \"count\", \"lower\", \"upper\", \"mean\", \"sum\", \"90_percentile\", \"99.9_percentile\" FROM api_latency",
    );
    let values: Vec<f64> = timer[0].as_array().unwrap()[1..].iter().map(|v| v.as_f64().unwrap()).collect();
    assert_eq!(values, [4.0, 100.0, 400.0, 250.0, 1000.0, 400.0, 400.0], "{timer:?}");
    assert_eq!(one(&address, "SELECT last(\"value\") FROM temp WHERE metric_type = 'gauge'"), Some(21.5));
    // A tag value with a space, a comma, an equal sign and a backslash, as InfluxDB reads it.
    let site = select(&address, "SHOW TAG VALUES FROM api_hits WITH KEY = \"site\"");
    assert_eq!(site.first().and_then(|row| row[1].as_str()), Some("web 1,a=b\\c"), "{site:?}");
    assert_eq!(one(&address, "SELECT max(\"value\") FROM visitors WHERE metric_type = 'set'"), Some(2.0));
    // The conflicting point is refused (400, partial write) and counted, never retried.
    wait_until(|| daemon.stat("influx.dropped_points.rejected") >= 1.0, "the refused write counted");
    assert_eq!(one(&address, "SELECT sum(\"value\") FROM conflict"), Some(1.0), "only the other writer's point");

    // InfluxDB down for a few flushes: the writes wait in the retry buffer.
    drop(influx);
    for _ in 0..3 {
        daemon.send_udp("outage.hits:10|c\n");
        std::thread::sleep(Duration::from_millis(1000));
    }
    influx = own_influxdb(&dir, port);
    let outage = "SELECT sum(\"value\") FROM outage_hits";
    wait_until(|| one(&influx.address, outage) == Some(30.0), "what came during the outage");
    assert!(daemon.stat("influx.retries") >= 1.0);
    assert!(daemon.terminate());
}
