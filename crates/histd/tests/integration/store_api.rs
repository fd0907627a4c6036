//! The embedded store through the real daemon: HTTP API, `histd query`, crash safety.

use std::process::Command;
use std::time::Duration;

use circllhist::Histogram;

use crate::harness::{temp_dir, wait_until, Daemon};

/// The config of a daemon with the store in `data`, flushing every 200 ms.
fn store_config(data: &std::path::Path) -> String {
    format!(
        "{{ address: '127.0.0.1', port: 0, server: './servers/tcp', mgmt_port: 0, http_port: 0, flushInterval: 200, \
           backends: ['store'], store: {{ dataDir: '{}' }} }}",
        data.display()
    )
}

/// A daemon (in this process) with the store in `data`, flushing every 200 ms.
fn store_daemon(name: &str, data: &std::path::Path) -> Daemon {
    Daemon::start(name, &store_config(data))
}

/// The sum of `count(name)` over the last ten minutes.
pub(crate) fn stored_count(daemon: &Daemon, name: &str) -> f64 {
    let points = query(daemon, &format!("count({name})"), "&step=1h");
    points["points"].as_array().unwrap().iter().map(|p| p[1].as_f64().unwrap()).sum()
}

fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

fn query(daemon: &Daemon, expr: &str, extra: &str) -> serde_json::Value {
    daemon.http_json(
        &format!("/api/v1/query?expr={}&from=-10m&to=now%2B0{extra}", encode(expr)).replace("now%2B0", "now"),
    )
}

/// Sends `values` of `name` (a timer) over TCP in several batches, each stored by a flush of
/// its own, so they span flushes.
fn send_timers(daemon: &Daemon, name: &str, tags: &str, values: &[f64]) {
    for chunk in values.chunks(values.len().div_ceil(4)) {
        let received = daemon.stat("messages.metrics_received") as u64;
        let lines: String = chunk.iter().map(|v| format!("{name}:{v}|ms{tags}\n")).collect();
        daemon.send_tcp(&lines);
        daemon.wait_received(received + chunk.len() as u64);
        let stored = daemon.stat("store.delivered");
        wait_until(|| daemon.stat("store.delivered") > stored, "a flush stored the batch");
    }
}

#[test]
fn the_api_answers_from_the_store() {
    let data = temp_dir("api-data");
    let daemon = store_daemon("api", &data);
    let values: Vec<f64> = (0..2000).map(|i| ((i * 7919) % 4000 + 100) as f64 / 100.0).collect();
    send_timers(&daemon, "api.latency", "|#route:/login", &values);
    send_timers(&daemon, "api.latency", "|#route:/home", &[9000.0]);
    daemon.send_tcp("hits:5|c\nhits:7|c\nusers:a|s\nusers:b|s\ntemp:21.5|g\n");
    wait_until(
        || {
            query(&daemon, "count(api.latency{route=/login})", "&step=1h")["points"]
                .as_array()
                .is_some_and(|p| p.iter().map(|x| x[1].as_f64().unwrap()).sum::<f64>() == 2000.0)
        },
        "2000 samples stored",
    );
    wait_until(
        || !query(&daemon, "value(temp)", "&step=1h")["points"].as_array().unwrap().is_empty(),
        "the gauge stored",
    );

    let mut truth = Histogram::new();
    values.iter().for_each(|&v| {
        truth.insert(v, 1);
    });
    let single = |expr: &str| -> f64 {
        let answer = query(&daemon, expr, "&step=1h");
        let points = answer["points"].as_array().unwrap();
        points.iter().map(|p| p[1].as_f64().unwrap()).sum()
    };
    let p99 = query(&daemon, "quantile(api.latency{route=/login}, 0.99)", "&step=1h");
    let p99 = p99["points"][0][1].as_f64().unwrap();
    assert_eq!(p99, truth.quantile(0.99), "the store's p99 is circllhist's p99 of the same samples");
    assert_eq!(
        single("count_above(api.latency{route=/login}, 25)"),
        values.iter().filter(|&&v| v >= 25.0).count() as f64
    );
    assert_eq!(
        single("count_above(api.latency, 25)"),
        values.iter().filter(|&&v| v >= 25.0).count() as f64 + 1.0,
        "no tags: both routes"
    );
    assert_eq!(single("count(hits)"), 12.0);
    assert!(single("rate(hits)") > 0.0, "counts per second of the flushes that carried them");
    assert_eq!(single("cardinality(users)"), 2.0);

    let histogram =
        daemon.http_json(&format!("/api/v1/histogram?name={}&from=-10m", encode("api.latency{route=/login}")));
    assert_eq!(histogram["count"].as_f64(), Some(2000.0));
    assert_eq!(histogram["min"].as_f64(), values.iter().copied().reduce(f64::min));
    assert_eq!(Histogram::from_base64(histogram["circllhist"].as_str().unwrap()).unwrap(), truth);
    let bins_total: u64 = histogram["bins"].as_array().unwrap().iter().map(|b| b[2].as_u64().unwrap()).sum();
    assert_eq!(bins_total, 2000);
    let heatmap =
        daemon.http_json(&format!("/api/v1/heatmap?name={}&from=-10m&step=10s", encode("api.latency{route=/login}")));
    let heat_total: u64 = heatmap["steps"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["bins"].as_array().unwrap().iter().map(|b| b[2].as_u64().unwrap()))
        .sum();
    assert_eq!(heat_total, 2000);

    let series = daemon.http_json("/api/v1/series?match=api.*");
    assert_eq!(series["series"].as_array().unwrap().len(), 2);
    assert_eq!(series["series"][0]["type"], "timer");
    assert_eq!(
        query(&daemon, "count(no.such.series)", "")["points"],
        serde_json::json!([]),
        "unknown series: empty, not an error"
    );
    let health = daemon.http_json("/health");
    assert_eq!(health["status"], "up");
    assert_eq!(health["kernel_drops"], 0);
    // The store's size, budget and points: in /health, the admin `stats` reply and /metrics.
    let store = &health["sinks"]["store"];
    assert!(store["store_bytes"].as_f64().unwrap() > 0.0, "{store}");
    assert_eq!(store["store_max_bytes"].as_f64(), Some((2u64 << 30) as f64));
    assert!(store["store_points"].as_f64().unwrap() >= 4.0, "{store}");
    assert_eq!(store["store_budget_dropped_points"].as_f64(), Some(0.0));
    let stats = daemon.admin("stats");
    assert!(stats.contains("store.store_bytes: ") && stats.contains("store.store_points: "), "{stats}");
    let (_, metrics) = daemon.http_get("/metrics");
    assert!(metrics.contains("histd_sink_store_bytes{sink=\"store\"} "), "store size as a gauge");
    assert!(metrics.contains("histd_sink_store_budget_dropped_points_total{sink=\"store\"} 0"));
    let openapi = daemon.http_json("/api/v1/openapi.json");
    assert!(openapi["paths"]["/api/v1/query"].is_object());

    for (path, parameter) in [
        ("/api/v1/query", "`expr`"),
        ("/api/v1/query?expr=p99(x)", "`expr`"),
        ("/api/v1/query?expr=count(x)&step=fast", "`step`"),
        ("/api/v1/query?expr=count(x)&from=yesterday", "`from`"),
        ("/api/v1/query?expr=count(x)&from=now&to=-1h", "`from`"),
        ("/api/v1/histogram", "`name`"),
        ("/api/v1/heatmap?name=x&step=1s&from=-1d", "`step`"),
        // Issue 18: answers that used to be empty 200s.
        ("/api/v1/query?expr=quantile(api.latency,%201.5)", "a share from 0 to 1"),
        ("/api/v1/query?expr=value(api.latency)", "value() reads gauges; 'api.latency' is a timer"),
    ] {
        let (status, body) = daemon.http_get(path);
        assert_eq!(status, 400, "{path}: {body}");
        assert!(body.contains(parameter), "{path}: the error names {parameter}: {body}");
    }

    let http = format!("http://{}", daemon.address("http"));
    let cli = Command::new(env!("CARGO_BIN_EXE_histd"))
        .args([
            "query",
            "count(api.latency{route=/login})",
            "--from=-10m",
            "--step",
            "1h",
            "--format",
            "csv",
            "--url",
            &http,
        ])
        .output()
        .unwrap();
    assert!(cli.status.success(), "{}", String::from_utf8_lossy(&cli.stderr));
    let csv = String::from_utf8(cli.stdout).unwrap();
    assert!(csv.starts_with("time,value\n") && csv.trim_end().ends_with(",2000"), "{csv}");
    let wrong_type = Command::new(env!("CARGO_BIN_EXE_histd"))
        .args(["query", "value(api.latency)", "--url", &http])
        .output()
        .unwrap();
    assert_eq!(wrong_type.status.code(), Some(2), "a wrong expression is exit 2");
    assert!(String::from_utf8_lossy(&wrong_type.stderr).contains("reads gauges"), "{wrong_type:?}");
    // Issue 32: a misspelled series is said so (exit 2), not an empty table.
    for expr in ["count(api.latncy)", "cumulative(count(api.latency{route=/nowhere}))"] {
        let misspelled =
            Command::new(env!("CARGO_BIN_EXE_histd")).args(["query", expr, "--url", &http]).output().unwrap();
        let said = String::from_utf8_lossy(&misspelled.stderr);
        assert!(misspelled.status.code() == Some(2) && said.contains("no series named"), "{expr}: {misspelled:?}");
    }
    let unknown =
        Command::new(env!("CARGO_BIN_EXE_histd")).args(["query", "p99(api.latency)", "--url", &http]).output().unwrap();
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("the functions are quantile"), "{unknown:?}");
    let listed = daemon.http_json("/api/v1/series?match=*&limit=2");
    assert_eq!(listed["series"].as_array().unwrap().len(), 2, "{listed}");
    assert!(listed["truncated"] == true && listed["total"].as_u64().unwrap() > 2, "{listed}");
    assert_eq!(daemon.http_get("/api/v1/series?limit=0").0, 400);
    for path in [
        "/health",
        "/api/v1/series",
        "/api/v1/query?expr=count(api.latency)",
        "/api/v1/histogram?name=api.latency",
        "/api/v1/heatmap?name=api.latency",
    ] {
        assert_matches_its_schema(path, &daemon.http_json(path));
    }
    assert!(daemon.terminate());
    let offline = Command::new(env!("CARGO_BIN_EXE_histd"))
        .args([
            "query",
            "count(api.latency)",
            "--from",
            "-10m", // a relative time as its own argument (issue 18)
            "--step",
            "1h",
            "--format",
            "csv",
            "--data-dir",
            data.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(offline.status.success(), "{}", String::from_utf8_lossy(&offline.stderr));
    assert!(
        String::from_utf8(offline.stdout).unwrap().trim_end().ends_with(",2001"),
        "the data directory read directly"
    );
    let _ = std::fs::remove_dir_all(&data);
}

#[test]
fn a_killed_daemon_restarts_with_a_consistent_store() {
    let data = temp_dir("crash-data");
    let daemon = Daemon::start_process("crash-1", &store_config(&data));
    daemon.send_tcp(&"crash:1|c\n".repeat(1000));
    wait_until(|| stored_count(&daemon, "crash") >= 1000.0, "the first 1000 to be stored");
    let mut sent = 1000;
    for _ in 0..40 {
        daemon.send_tcp(&"crash:1|c\n".repeat(25));
        sent += 25;
        std::thread::sleep(Duration::from_millis(5)); // spread over flushes, not a synchronisation
    }
    daemon.kill(); // SIGKILL while flushes are being written
    let database = data.join("histd.db");
    let connection = rusqlite::Connection::open(&database).unwrap();
    let check: String = connection.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(check, "ok");
    drop(connection);
    let reader = store::Store::open_reader(&database).unwrap();
    let expr = store::parse("count(crash)").unwrap();
    let raw: f64 = reader.query(&expr, 0, 4_000_000_000, 4_000_000_000).unwrap().iter().map(|p| p.1).sum();
    drop(reader);
    assert!((1000.0..=sent as f64).contains(&raw), "the store holds {raw} of {sent} right after the kill");
    let daemon = store_daemon("crash-2", &data);
    let stored = stored_count(&daemon, "crash");
    // What was stored before the kill survives it; what was in flight may be lost, never doubled.
    assert!((1000.0..=sent as f64).contains(&stored), "stored {stored} of {sent}");
    daemon.send_tcp("after:1|c\n");
    wait_until(
        || !query(&daemon, "count(after)", "&step=1h")["points"].as_array().unwrap().is_empty(),
        "writes after the restart",
    );
    drop(daemon);
    let _ = std::fs::remove_dir_all(&data);
}

/// The keys of a 200 answer from `path` are those of its schema in `openapi.json`, and the
/// keys each item of its arrays of objects has are those of the item schema.
/// Issue 18 item 3: the list's filters, origins and grouping; forgetting series deletes them
/// from the store and the aggregator (an idle one is not flushed again), refused without a
/// filter or from another web origin; a series sent again starts afresh.
#[test]
fn series_are_listed_by_origin_and_name_and_can_be_forgotten() {
    let data = temp_dir("forget-data");
    let daemon = store_daemon("forget", &data);
    let lines = "old.c:5|c\nkeep.c:1|c\nt:3|ms|#route:a\nt:4|ms|#route:b\nbench.1:1|c\nbench.2:2|ms\n";
    daemon.send_tcp(lines);
    wait_until(|| stored_count(&daemon, "bench.2") == 1.0 && stored_count(&daemon, "t") == 2.0, "the lines stored");
    let names = |path: &str| -> Vec<String> {
        let listed = daemon.http_json(path);
        let entries = listed["series"].as_array().unwrap().iter();
        entries
            .map(|e| {
                format!(
                    "{}{}",
                    e["name"].as_str().unwrap(),
                    e["tag_sets"].as_u64().map_or(String::new(), |n| format!("×{n}"))
                )
            })
            .collect()
    };
    assert_eq!(names("/api/v1/series?origin=user&group=name"), ["keep.c×1", "old.c×1", "t×2"]);
    assert_eq!(names("/api/v1/series?origin=bench"), ["bench.1", "bench.2"]);
    assert_eq!(names("/api/v1/series?contains=ROUTE%3Db"), ["t"], "any case, tags included");
    assert_eq!(names(&format!("/api/v1/series?name={}&exact=1", encode("t{route=a}"))), ["t"]);
    let all = daemon.http_json("/api/v1/series?type=counter");
    assert_eq!(all["origins"]["bench"], 1, "{all}");
    assert!(all["origins"]["histd"].as_u64().unwrap() >= 1, "histd's own counters: {all}");
    assert_matches_its_schema("/api/v1/series", &all);
    for (path, status, says) in [
        ("/api/v1/series?origin=mine", 400, "`origin`"),
        ("/api/v1/series?type=histogram", 400, "`type`"),
        ("/api/v1/series?group=tags", 400, "`group`"),
    ] {
        let (got, body) = daemon.http_get(path);
        assert!(got == status && body.contains(says), "{path}: {got} {body}");
    }

    let http = daemon.address("http");
    let delete = |path: &str, headers: &str| crate::harness::http(&http, "DELETE", path, &[], headers);
    let (status, body) = delete("/api/v1/series", "");
    assert!(status == 400 && body.contains("say which series"), "{status} {body}");
    let (status, body) = delete("/api/v1/series?origin=bench", "Origin: http://evil.example\r\n");
    assert!(status == 403 && body.contains("evil.example"), "{status} {body}");
    assert_eq!(delete("/api/v1/series?name=no.such", "").0, 404);
    let (status, body) = delete("/api/v1/series?origin=bench", &format!("Origin: http://{http}\r\n"));
    assert_eq!(status, 200, "{body}");
    let answer: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!((answer["forgotten"].as_u64(), answer["aggregator_keys"].as_u64()), (Some(2), Some(2)), "{answer}");
    assert!(answer["points"].as_u64().unwrap() >= 2, "{answer}");
    let (status, body) = delete(&format!("/api/v1/series?name={}&exact=1", encode("t{route=a}")), "");
    assert_eq!(status, 200, "{body}");
    assert_eq!(delete("/api/v1/series?match=old.*", "").0, 200);
    // Several flushes later the idle series have not come back (Etsy flushes idle counters
    // and timers as zeros: they were deleted from the aggregator too).
    let delivered = daemon.stat("store.delivered");
    wait_until(|| daemon.stat("store.delivered") >= delivered + 3.0, "three more flushes");
    assert_eq!(names("/api/v1/series?origin=user,bench&group=name"), ["keep.c×1", "t×1"]);
    assert_eq!(stored_count(&daemon, "t"), 1.0, "route b is left");
    assert_eq!(stored_count(&daemon, "bench.2"), 0.0);
    daemon.send_tcp("old.c:7|c\n");
    wait_until(|| stored_count(&daemon, "old.c") == 7.0, "old.c stored afresh");
    assert!(daemon.terminate());
    let _ = std::fs::remove_dir_all(&data);
}

fn assert_matches_its_schema(path: &str, answer: &serde_json::Value) {
    let spec: serde_json::Value = serde_json::from_str(include_str!("../../src/contract/openapi.json")).unwrap();
    let route = path.split('?').next().unwrap();
    let reference = spec["paths"][route]["get"]["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
        .as_str()
        .unwrap_or_else(|| panic!("{route} has no 200 schema"));
    let schema = &spec["components"]["schemas"][reference.rsplit('/').next().unwrap()];
    assert_same_keys(path, answer, schema);
}

fn assert_same_keys(path: &str, value: &serde_json::Value, schema: &serde_json::Value) {
    let Some(properties) = schema["properties"].as_object() else { return };
    let mut want: Vec<&String> = properties.keys().collect();
    let mut got: Vec<&String> = value.as_object().unwrap_or_else(|| panic!("{path}: not an object")).keys().collect();
    want.sort();
    got.sort();
    assert_eq!(got, want, "{path}: the answer's keys against its schema's");
    for (key, property) in properties {
        if let (Some(items), Some(schema)) = (value[key].as_array(), property.get("items")) {
            items.iter().filter(|item| item.is_object()).for_each(|item| assert_same_keys(path, item, schema));
        }
    }
}
