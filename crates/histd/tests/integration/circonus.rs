//! The circonus backend (issue 16) to a receiver of the test's, its histograms read by the Go
//! reference library (github.com/circonus-labs/circonusllhist, built by `scripts/test` into
//! `target/tools/bin/circllhist-decode`): what histd sends is, byte for byte, what the
//! reference serializes when it records the same values, and decodes to the same bins (with
//! negative values the port orders bins wrongly, ignoring the sign; the bins still match).

use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::{json, Value};

use crate::harness::{prepared_tool, wait_until, Daemon, HttpCapture};

/// The Go reference's decoder: `HISTD_CIRCLLHIST_DECODE`, else where `scripts/test` builds it.
fn decoder() -> PathBuf {
    prepared_tool(
        "HISTD_CIRCLLHIST_DECODE",
        "target/tools/bin/circllhist-decode",
        "go build in crates/histd/tests/circllhist_go",
    )
}

/// The Go library's answer for each `(histogram as sent, values recorded)`.
fn go_reference(cases: &[(String, Vec<f64>)]) -> Vec<Value> {
    let mut child = Command::new(decoder()).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for (histogram, values) in cases {
        writeln!(stdin, "{}", json!({ "histogram": histogram, "values": values })).unwrap();
    }
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success());
    let answers: Vec<Value> =
        String::from_utf8(output.stdout).unwrap().lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    assert_eq!(answers.len(), cases.len());
    answers
}

fn daemon(name: &str, receiver: &HttpCapture, circonus: &str) -> Daemon {
    let config = format!(
        "{{ servers: [ {{ server: 'tcp', address: '127.0.0.1', port: 0 }} ], mgmt_port: 0, \
           flushInterval: 200, backends: ['circonus'], deleteIdleStats: true, \
           circonus: {{ url: 'http://{}/module/httptrap/0d6a5c3e-6e1f-4b1a-9b8e-1f2e3d4c5b6a/secret', {circonus} }} }}",
        receiver.address
    );
    Daemon::start(name, &config)
}

/// Values on decimal edges, a zero, negatives, sub-millisecond and large ones.
const VALUES: [f64; 10] = [0.0, 1.0, 100.0, 100.0, 250.5, -3.7, 0.00042, 12345.0, 99.9, 1e9];

#[test]
fn httptrap_histograms_are_the_go_references_bytes() {
    let receiver = HttpCapture::start();
    let daemon = daemon("circonus-httptrap", &receiver, "");
    // `ms` timers are never negative (a negative one is a bad line).
    let values: Vec<f64> = VALUES.iter().copied().filter(|v| *v >= 0.0).collect();
    let lines: String = values.iter().map(|v| format!("api.latency;route=/login:{v}|ms\n")).collect();
    daemon.send_tcp(&format!("{lines}api.hits;route=/login:3|c\nheap:42.5|g\nusers:a|s\nusers:b|s\n"));
    daemon.wait_received(13);
    let name = "api.latency|ST[route:-login]";
    wait_until(|| receiver.requests().iter().any(|r| r.json().get(name).is_some()), "the timer at the receiver");
    let request = receiver.requests().into_iter().find(|r| r.json().get(name).is_some()).unwrap();
    assert_eq!((request.method.as_str(), request.header("content-type")), ("PUT", Some("application/json")));
    assert!(request.path.ends_with("/secret"));
    let body = request.json();
    let timer = &body[name];
    assert_eq!(timer["_type"], "h");
    assert!(timer["_ts"].as_u64().unwrap() > 1_600_000_000_000);
    let sent = timer["_value"].as_str().unwrap().to_string();

    let answers = go_reference(&[(sent.clone(), values.clone())]);
    let answer = &answers[0];
    assert!(answer.get("error").is_none(), "{answer}");
    assert_eq!(answer["recorded"], sent.as_str(), "the Go reference records the same values as these bytes");
    assert_eq!(answer["reserialized"], sent.as_str(), "and decodes and re-encodes them unchanged");
    let bins: Vec<&str> = answer["bins"].as_array().unwrap().iter().map(|b| b.as_str().unwrap()).collect();
    assert!(bins.contains(&"H[1.0e+02]=2"), "{bins:?}");
    assert!(bins.contains(&"H[0.0e+00]=1"), "{bins:?}");
    let count: u64 = bins.iter().map(|b| b.rsplit('=').next().unwrap().parse::<u64>().unwrap()).sum();
    assert_eq!(count, values.len() as u64);

    assert_eq!(body["api.hits|ST[route:-login]"], json!({ "_type": "n", "_value": 3, "_ts": timer["_ts"] }));
    assert_eq!(body["heap"]["_value"], 42.5);
    assert_eq!(body["users"], json!({ "_type": "L", "_value": 2, "_ts": timer["_ts"] }));
    assert_eq!(daemon.stat("circonus.errors"), 0.0);
}

#[test]
fn irondb_raw_records_carry_the_same_histogram_bytes() {
    let receiver = HttpCapture::start();
    let daemon = daemon(
        "circonus-irondb",
        &receiver,
        "format: 'irondb', checkUuid: '1B988FD7-D1E1-48EC-848E-55709511D43F', accountId: 123, checkBundleId: 987, target: 'web1'",
    );
    let lines: String = VALUES.iter().map(|v| format!("db.query:{v}|h\n")).collect();
    daemon.send_tcp(&format!("{lines}jobs:2|c\n"));
    daemon.wait_received(11);
    let text = || receiver.requests().iter().map(|r| String::from_utf8(r.body.clone()).unwrap()).collect::<String>();
    wait_until(|| text().contains("\tdb.query\t"), "the histogram record");
    let check = "web1`histd`c_123_987::histd`1b988fd7-d1e1-48ec-848e-55709511d43f";
    let all = text();
    let record = all.lines().find(|l| l.starts_with("H1\t") && l.contains("\tdb.query\t")).unwrap();
    let fields: Vec<&str> = record.split('\t').collect();
    assert_eq!(fields.len(), 5, "{record}");
    assert_eq!((fields[2], fields[3]), (check, "db.query"));
    let (seconds, millis) = fields[1].split_once('.').unwrap();
    assert!(seconds.parse::<u64>().unwrap() > 1_600_000_000 && millis.len() == 3, "{}", fields[1]);
    // The Go library orders bins ignoring their sign (a known bug of the port: C, and histd,
    // put negatives first), so with a negative value the same bins come in another order.
    let answer = &go_reference(&[(fields[4].to_string(), VALUES.to_vec())])[0];
    let sorted = |key: &str| {
        let mut bins: Vec<String> =
            answer[key].as_array().unwrap().iter().map(|b| b.as_str().unwrap().to_string()).collect();
        bins.sort();
        bins
    };
    assert_eq!(sorted("bins"), sorted("recorded_bins"), "the Go reference decodes the bins it records");
    assert!(sorted("bins").contains(&"H[-3.7e+00]=1".to_string()), "{answer}");
    let counter = all.lines().find(|l| l.contains("\tjobs\t")).unwrap();
    assert_eq!(counter.split('\t').collect::<Vec<_>>(), vec!["M", fields[1], check, "jobs", "n", "2"]);
}
