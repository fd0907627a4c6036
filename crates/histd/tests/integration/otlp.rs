//! The otlp backend (issue 16) against an OTLP/HTTP receiver that decodes every request with
//! the official OpenTelemetry proto definitions (PyPI `opentelemetry-proto`, in the venv
//! `scripts/test` makes): explicit buckets merged across requests give histd's own quantiles
//! exactly; exponential points carry exact count, sum, min and max; a receiver that answers
//! 503 with `Retry-After` is retried, and a partial success is counted.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use circllhist::{Bucket, Histogram};
use serde_json::Value;

use crate::harness::{free_port, prepared_tool, temp_dir, wait_until, Daemon};

/// The Python with `opentelemetry-proto`: `HISTD_OTLP_PYTHON`, else the venv `scripts/test`
/// makes in `target/tools/otlp-venv`.
fn python() -> PathBuf {
    prepared_tool(
        "HISTD_OTLP_PYTHON",
        "target/tools/otlp-venv/bin/python",
        "python3 -m venv + pip install opentelemetry-proto",
    )
}

/// The receiver script, on its own port, writing a JSON line per request; killed on drop.
struct OtlpReceiver {
    port: u16,
    out: PathBuf,
    child: Child,
}

impl OtlpReceiver {
    fn start(name: &str, flags: &[&str]) -> OtlpReceiver {
        let (port, out) = (free_port(), temp_dir(name).join("requests.jsonl"));
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/integration/otlp_receiver.py");
        let mut child = Command::new(python())
            .arg(script)
            .arg(port.to_string())
            .arg(&out)
            .args(flags)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the OTLP receiver starts");
        let mut ready = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.take().unwrap()), &mut ready).unwrap();
        assert_eq!(ready.trim(), "ready", "the receiver could not start");
        wait_until(|| std::net::TcpStream::connect(("127.0.0.1", port)).is_ok(), "the OTLP receiver to listen");
        OtlpReceiver { port, out, child }
    }

    /// Every request decoded so far (a request that did not decode fails the test); a line the
    /// receiver is still writing (no newline yet) is read next time.
    fn requests(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.out).unwrap_or_default();
        let whole = &text[..text.rfind('\n').map_or(0, |end| end + 1)];
        whole
            .lines()
            .map(|line| {
                let record: Value = serde_json::from_str(line).unwrap();
                assert!(record.get("error").is_none(), "a request did not decode: {record}");
                assert_eq!(record["path"], "/v1/metrics");
                assert_eq!(record["content_type"], "application/x-protobuf");
                record["request"].clone()
            })
            .collect()
    }

    /// Every data point of the metric `name` in every request, with the metric.
    fn points(&self, name: &str) -> Vec<(Value, Value)> {
        let mut found = Vec::new();
        for request in self.requests() {
            for resource in request["resourceMetrics"].as_array().into_iter().flatten() {
                for scope in resource["scopeMetrics"].as_array().into_iter().flatten() {
                    for metric in scope["metrics"].as_array().into_iter().flatten().filter(|m| m["name"] == name) {
                        let data = ["sum", "gauge", "histogram", "exponentialHistogram"]
                            .iter()
                            .find_map(|kind| metric.get(*kind))
                            .unwrap();
                        for point in data["dataPoints"].as_array().into_iter().flatten() {
                            found.push((metric.clone(), point.clone()));
                        }
                    }
                }
            }
        }
        found
    }
}

impl Drop for OtlpReceiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A JSON number or a 64-bit integer as protobuf's JSON mapping writes it (a string).
fn number(value: &Value) -> f64 {
    match value {
        Value::String(text) => text.parse().unwrap(),
        other => other.as_f64().unwrap_or(0.0),
    }
}

/// A daemon flushing every 300 ms to `receiver`, with `otlp` in its section and `top` beside.
fn daemon(name: &str, receiver: &OtlpReceiver, otlp: &str, top: &str) -> Daemon {
    let config = format!(
        "{{ servers: [ {{ server: 'tcp', address: '127.0.0.1', port: 0 }} ], mgmt_port: 0, \
           flushInterval: 300, backends: ['otlp'], {top} \
           otlp: {{ endpoint: 'http://127.0.0.1:{}', {otlp} }} }}",
        receiver.port
    );
    Daemon::start(name, &config)
}

/// Latencies in ms: decimal edges (100, 250, 1000) among them, where circllhist's and OTLP's
/// inclusivity differ.
const LATENCIES: [f64; 12] = [100.0, 120.5, 250.0, 250.0, 3.2, 47.0, 999.0, 1000.0, 1500.0, 0.0, 73.4, 100.0];

#[test]
fn explicit_buckets_merged_across_requests_give_histds_quantiles_exactly() {
    let receiver = OtlpReceiver::start("otlp-explicit", &[]);
    let daemon = daemon(
        "otlp-explicit",
        &receiver,
        "histograms: 'explicit', compression: 'none', resource: { 'deployment.environment': 'test' }",
        "deleteIdleStats: true,",
    );
    // Two batches in different flushes: the receiver merges their delta points.
    let lines = |values: &[f64]| values.iter().map(|v| format!("api.latency;route=login:{v}|ms\n")).collect::<String>();
    daemon.send_tcp(&format!("{}hits;route=login:3|c\nheap:42|g\nusers:ann|s\nusers:bob|s\n", lines(&LATENCIES[..6])));
    daemon.wait_received(10);
    wait_until(|| !receiver.points("api.latency").is_empty(), "the first batch at the receiver");
    daemon.send_tcp(&lines(&LATENCIES[6..]));
    daemon.wait_received(16);
    wait_until(|| receiver.points("api.latency").len() >= 2, "the second batch at the receiver");

    let mut merged = Histogram::new();
    let (mut count, mut sum) = (0.0, 0.0);
    for (metric, point) in receiver.points("api.latency") {
        assert_eq!(metric["unit"], "ms");
        assert_eq!(metric["histogram"]["aggregationTemporality"], "AGGREGATION_TEMPORALITY_DELTA");
        assert_eq!(point["attributes"][0]["key"], "route");
        assert_eq!(point["attributes"][0]["value"]["stringValue"], "login");
        let bounds: Vec<f64> = point["explicitBounds"].as_array().unwrap().iter().map(number).collect();
        let counts: Vec<f64> = point["bucketCounts"].as_array().unwrap().iter().map(number).collect();
        assert_eq!(counts.len(), bounds.len() + 1);
        assert_eq!(counts.iter().sum::<f64>(), number(&point["count"]));
        // Each non-empty bucket (low, high] is one circllhist bin; the one ending at 0 holds zeros.
        for (index, &n) in counts.iter().enumerate().filter(|(_, &n)| n > 0.0) {
            let high = bounds[index];
            let low = if index == 0 || high == 0.0 { high } else { bounds[index - 1] };
            merged.insert_bucket(Bucket::of_f64((low + high) / 2.0), n as u64);
        }
        count += number(&point["count"]);
        sum += number(&point["sum"]);
    }
    let mut own = Histogram::new();
    LATENCIES.iter().for_each(|&v| {
        own.insert(v, 1);
    });
    assert_eq!(merged, own, "the buckets are histd's bins, every one whole");
    for q in [0.0, 0.25, 0.5, 0.9, 0.99, 1.0] {
        assert_eq!(merged.quantile(q).to_bits(), own.quantile(q).to_bits(), "q={q}");
    }
    assert_eq!(count, 12.0);
    assert!((sum / LATENCIES.iter().sum::<f64>() - 1.0).abs() < 1e-12, "exact sum (two intervals added): {sum}");
    let (min, max): (Vec<f64>, Vec<f64>) =
        receiver.points("api.latency").iter().map(|(_, point)| (number(&point["min"]), number(&point["max"]))).unzip();
    assert_eq!(min.iter().copied().fold(f64::INFINITY, f64::min), 0.0);
    assert_eq!(max.iter().copied().fold(0.0, f64::max), 1500.0);

    // Counters as monotonic delta sums, gauges and sets as gauges; the resource names us.
    let hits = receiver.points("hits");
    assert_eq!(hits[0].0["sum"]["isMonotonic"], true);
    assert_eq!(hits.iter().map(|(_, p)| number(&p["asDouble"])).sum::<f64>(), 3.0);
    assert!(hits.iter().all(|(_, p)| p["attributes"][0]["value"]["stringValue"] == "login"));
    assert_eq!(number(&receiver.points("heap")[0].1["asDouble"]), 42.0);
    assert_eq!(number(&receiver.points("users")[0].1["asDouble"]), 2.0);
    let request = &receiver.requests()[0];
    let attributes = request["resourceMetrics"][0]["resource"]["attributes"].as_array().unwrap();
    let resource: Vec<(&str, &str)> = attributes
        .iter()
        .map(|kv| (kv["key"].as_str().unwrap(), kv["value"]["stringValue"].as_str().unwrap()))
        .collect();
    assert!(resource.contains(&("service.name", "histd")));
    assert!(resource.contains(&("deployment.environment", "test")));
    assert!(resource.iter().any(|(key, _)| *key == "host.name"));
}

#[test]
fn exponential_points_gzipped_retried_after_503_and_partial_success_counted() {
    // The first two requests are answered 503 with Retry-After: 1; every 200 reports one
    // point rejected.
    let receiver = OtlpReceiver::start("otlp-exponential", &["--fail-first", "2", "--reject-points", "1"]);
    let daemon = daemon("otlp-exponential", &receiver, "temporality: 'cumulative'", "");
    let lines: String = LATENCIES.iter().map(|v| format!("db.query:{v}|ms\n")).collect();
    daemon.send_tcp(&format!("{lines}jobs:5|c\n"));
    daemon.wait_received(13);
    wait_until(|| !receiver.points("db.query").is_empty(), "a request after the 503s");
    assert!(daemon.stat("otlp.retries") >= 1.0);
    wait_until(|| daemon.stat("otlp.dropped_points.rejected") >= 1.0, "the partial success counted");

    let (metric, point) = receiver.points("db.query").remove(0);
    let histogram = &metric["exponentialHistogram"];
    assert_eq!(histogram["aggregationTemporality"], "AGGREGATION_TEMPORALITY_CUMULATIVE");
    assert_eq!(number(&point["scale"]), 5.0);
    assert_eq!(number(&point["count"]), 12.0);
    assert_eq!(number(&point["sum"]), LATENCIES.iter().sum::<f64>());
    assert_eq!((number(&point["min"]), number(&point["max"])), (0.0, 1500.0));
    assert_eq!(number(&point["zeroCount"]), 1.0);
    let counts: f64 = point["positive"]["bucketCounts"].as_array().unwrap().iter().map(number).sum();
    assert_eq!(counts + number(&point["zeroCount"]), 12.0);
    // Every positive sample lies in a bucket that overlaps its circllhist bin: the lowest
    // bucket overlaps 3.2's bin [3.2, 3.3), the highest 1500's bin [1500, 1600).
    let offset = number(&point["positive"]["offset"]);
    let buckets = point["positive"]["bucketCounts"].as_array().unwrap().len() as f64;
    let base = 2f64.powf(2f64.powi(-5));
    assert!(base.powf(offset) < 3.3 && base.powf(offset + 1.0) > 3.2, "lowest bucket at {offset}");
    let top = (base.powf(offset + buckets - 1.0), base.powf(offset + buckets));
    assert!(top.0 < 1600.0 && top.1 > 1500.0, "highest bucket {top:?}");
    // Cumulative: the counter keeps its total across flushes while it is sent.
    wait_until(|| receiver.points("jobs").len() >= 2, "two flushes of the counter");
    let jobs = receiver.points("jobs");
    assert!(jobs.iter().all(|(_, p)| number(&p["asDouble"]) == 5.0), "{jobs:?}");
    let starts: Vec<&Value> = jobs.iter().map(|(_, p)| &p["startTimeUnixNano"]).collect();
    assert!(starts.windows(2).all(|pair| pair[0] == pair[1]), "one start time: {starts:?}");
}

#[test]
fn the_last_flush_is_sent_at_sigterm() {
    let receiver = OtlpReceiver::start("otlp-sigterm", &[]);
    let config = format!(
        "{{ servers: [ {{ server: 'tcp', address: '127.0.0.1', port: 0 }} ], mgmt_port: 0, http_port: 0, \
           flushInterval: 600000, backends: ['otlp'], otlp: {{ endpoint: 'http://127.0.0.1:{}' }} }}",
        receiver.port
    );
    let daemon = Daemon::start_process("otlp-sigterm", &config);
    daemon.send_tcp("last.words:4|c\n");
    daemon.wait_received(1);
    assert!(receiver.points("last.words").is_empty(), "nothing before the flush");
    assert!(daemon.terminate(), "a clean exit");
    let points = receiver.points("last.words");
    assert_eq!(points.len(), 1, "the final flush, delivered before exit");
    assert_eq!(number(&points[0].1["asDouble"]), 4.0);
}

/// A certificate authority and a server certificate it signed for `localhost` and 127.0.0.1
/// (P-256 keys, made with Debian's `openssl`), in `dir`: (CA certificate, server certificate,
/// server key).
fn certificates(dir: &Path, name: &str) -> (PathBuf, PathBuf, PathBuf) {
    let ca = crate::harness::TestCa::new(dir, name);
    let (cert, key) = ca.server();
    (ca.cert, cert, key)
}

/// https: a receiver whose certificate chains to a CA the daemon trusts (`SSL_CERT_FILE`, as
/// for OpenSSL) gets every flush over TLS, by host name and by address; a daemon trusting
/// another CA refuses the handshake, sends nothing and says why.
#[test]
fn otlp_over_https_checks_the_receivers_certificate() {
    let dir = temp_dir("otlp-https");
    let (ca, cert, key) = certificates(&dir, "trusted");
    let (other_ca, _, _) = certificates(&dir, "other");
    let tls = ["--tls", cert.to_str().unwrap(), key.to_str().unwrap()];
    let config = |host: &str, port: u16| {
        format!(
            "{{ servers: [ {{ server: 'tcp', address: '127.0.0.1', port: 0 }} ], mgmt_port: 0, http_port: 0, \
               flushInterval: 300, backends: ['otlp'], otlp: {{ endpoint: 'https://{host}:{port}' }} }}"
        )
    };
    for host in ["localhost", "127.0.0.1"] {
        let receiver = OtlpReceiver::start(&format!("otlp-https-{host}"), &tls);
        let trusting = [("SSL_CERT_FILE", ca.to_str().unwrap())];
        let daemon = Daemon::start_process_with_environment("otlp-https", &config(host, receiver.port), &trusting);
        daemon.send_tcp("secure.latency:12|ms\nsecure.latency:30|ms\n");
        daemon.wait_received(2);
        wait_until(|| !receiver.points("secure.latency").is_empty(), "a flush over https");
        assert_eq!(number(&receiver.points("secure.latency")[0].1["count"]), 2.0, "{host}");
    }

    // Issue 51: the destination's own CA (`otlp.tls.caFile`, in place of the system's roots),
    // with another CA in the environment: trusted without touching the process's trust store.
    let receiver = OtlpReceiver::start("otlp-https-own-ca", &tls);
    let own_ca =
        config("localhost", receiver.port).replace("' } }", &format!("', tls: {{ caFile: '{}' }} }} }}", ca.display()));
    let distrusting = [("SSL_CERT_FILE", other_ca.to_str().unwrap())];
    let daemon = Daemon::start_process_with_environment("otlp-https-own-ca", &own_ca, &distrusting);
    daemon.send_tcp("secure.latency:12|ms\n");
    daemon.wait_received(1);
    wait_until(|| !receiver.points("secure.latency").is_empty(), "a flush over https to the section's own CA");

    let receiver = OtlpReceiver::start("otlp-https-untrusted", &tls);
    let distrusting = [("SSL_CERT_FILE", other_ca.to_str().unwrap())];
    let daemon = Daemon::start_process_with_environment(
        "otlp-https-untrusted",
        &config("localhost", receiver.port),
        &distrusting,
    );
    daemon.send_tcp("secure.latency:12|ms\n");
    daemon.wait_received(1);
    wait_until(|| daemon.stat("otlp.retries") >= 2.0, "the refused handshakes retried");
    assert!(receiver.requests().is_empty(), "nothing sent to a server the daemon does not trust");
    wait_until(|| daemon.stderr().contains("TLS with localhost:"), "the reason in the log");
    assert!(daemon.stderr().contains("UnknownIssuer"), "{}", daemon.stderr());
}
