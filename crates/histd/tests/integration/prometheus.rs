//! The prometheus backend against the real systems: VictoriaMetrics merging two daemons'
//! `vmrange` bins, a receiver that is down and comes back, Prometheus scraping `/metrics` and
//! receiving remote write.

use circllhist::{Bucket, Histogram};

use super::external::{own_prometheus, own_victoria_metrics, shared_victoria_metrics};
use super::harness::{free_port, http, wait_until, Daemon};

fn config(remote_write: &str, extra: &str) -> String {
    format!(
        "{{ servers: [ {{ server: 'udp', address: '127.0.0.1', port: 0 }} ], mgmt_port: 0, http_port: 0, \
           flushInterval: 1000, backends: ['prometheus'], prometheus: {{ remoteWrite: [{remote_write}] {extra} }} }}"
    )
}

fn sink_value(daemon: &Daemon, sink: &str, name: &str) -> f64 {
    daemon.http_json("/health")["sinks"][sink][name].as_f64().unwrap_or_else(|| panic!("{sink}.{name}"))
}

/// Timer values in milliseconds: two hosts' worth, spread over four decades.
fn latencies(count: usize, stride: usize, offset: usize) -> Vec<u64> {
    (0..count).map(|i| ((i * stride) % 3000 + offset) as u64).collect()
}

fn send_timer(daemon: &Daemon, name: &str, values: &[u64]) {
    for chunk in values.chunks(20) {
        let lines: Vec<String> = chunk.iter().map(|v| format!("{name}:{v}|ms")).collect();
        daemon.send_udp(&lines.join("\n"));
    }
}

#[test]
fn two_daemons_merge_bin_for_bin_in_victoria_metrics() {
    let vm = shared_victoria_metrics();
    let url = format!("{{ url: 'http://{}/api/v1/write', histograms: 'vmrange' }}", vm.address);
    let a = Daemon::start("vm-a", &config(&url, ", externalLabels: { instance: 'a' }"));
    let b = Daemon::start("vm-b", &config(&url, ", externalLabels: { instance: 'b' }"));
    let (from_a, from_b) = (latencies(600, 7, 0), latencies(400, 13, 1));
    send_timer(&a, "vm_merge.latency", &from_a);
    send_timer(&b, "vm_merge.latency", &from_b);
    for _ in 0..3 {
        a.send_udp("vm_merge.hits:3|c");
        b.send_udp("vm_merge.hits:4|c");
        std::thread::sleep(std::time::Duration::from_millis(1100));
    }
    let total = (from_a.len() + from_b.len()) as f64;
    wait_until(|| vm.scalar("sum(vm_merge_latency_count)") == Some(total), "VictoriaMetrics has every sample");
    wait_until(|| vm.scalar("sum(increase(vm_merge_hits[10m]))") == Some(21.0), "increase() is what was sent");

    // histd's own view of every sample, merged: the same bins, in milliseconds.
    let mut merged = Histogram::new();
    from_a.iter().chain(&from_b).for_each(|&v| {
        merged.insert(v as f64, 1);
    });
    let buckets = "sum by (vmrange) (increase(vm_merge_latency_bucket[10m]))";
    for q in [0.5, 0.9, 0.99] {
        let histd = merged.quantile(q);
        let bin = Bucket::of_f64(histd);
        let vm_ms = vm.scalar(&format!("histogram_quantile({q}, {buckets})")).unwrap() * 1000.0;
        let (low, high) = (bin.left(), bin.left() + bin.width());
        assert!(
            vm_ms >= low - 1e-9 && vm_ms <= high + 1e-9,
            "q={q}: VictoriaMetrics {vm_ms} ms, histd {histd} ms in [{low}, {high})"
        );
    }
    for threshold_s in [0.1, 1.5, 2.2] {
        let histd = merged.count_below(threshold_s * 1000.0, false) as f64 / merged.count() as f64;
        let vm_share = vm.scalar(&format!("histogram_share({threshold_s}, {buckets})")).unwrap();
        assert!(
            (vm_share - histd).abs() < 1e-12,
            "share below {threshold_s}s: VictoriaMetrics {vm_share}, histd {histd}"
        );
    }
    assert!(a.terminate() && b.terminate());
}

#[test]
fn a_receiver_down_for_a_minute_loses_nothing_within_the_buffer() {
    let port = free_port();
    let url = format!("{{ url: 'http://127.0.0.1:{port}/api/v1/write' }}");
    let daemon = Daemon::start("rw-outage", &config(&url, ""));
    // A minute down, a flush a second, the counter moving in every one.
    let down = std::time::Instant::now();
    let mut sent = 0;
    while down.elapsed() < std::time::Duration::from_secs(60) {
        daemon.send_udp("outage.hits:1|c");
        sent += 1;
        std::thread::sleep(std::time::Duration::from_millis(1000));
    }
    let sink = "prometheus.remote_write_0";
    assert!(sink_value(&daemon, sink, "errors") > 0.0, "the receiver was down");
    assert!(sink_value(&daemon, sink, "buffered_bytes") > 0.0, "what it could not take is held");
    let vm = own_victoria_metrics(port);
    let last = Some(f64::from(sent));
    wait_until(|| vm.scalar("max_over_time(outage_hits[10m])") == last, "the last flush arrives");
    // Every flush of the minute arrived: the 0 at the start of the counter's first interval,
    // then one sample a flush, never going back.
    assert_eq!(vm.scalar("min_over_time(outage_hits[10m])"), Some(0.0));
    assert!(vm.scalar("count_over_time(outage_hits[10m])").unwrap() >= 60.0);
    assert_eq!(vm.scalar("resets(outage_hits[10m])"), Some(0.0));
    assert_eq!(vm.scalar("increase(outage_hits[10m])"), last);
    wait_until(|| sink_value(&daemon, sink, "buffered_bytes") == 0.0, "the buffer empties");
    for reason in ["buffer_full", "shutdown", "rejected", "possibly_lost", "corrupt"] {
        assert_eq!(sink_value(&daemon, sink, &format!("dropped_points.{reason}")), 0.0, "{reason}");
    }
    assert!(daemon.terminate());
}

#[test]
fn a_full_retry_buffer_drops_the_oldest_and_counts_them() {
    let url = format!("{{ url: 'http://127.0.0.1:{}/api/v1/write', retryBufferBytes: 1024 }}", free_port());
    let daemon = Daemon::start("rw-full", &config(&url, ""));
    // Enough series that two flushes' requests pass the buffer's 1 KiB (its least).
    daemon.send_udp(&(0..100).map(|i| format!("full.hits.{i}:1|c\n")).collect::<String>());
    let sink = "prometheus.remote_write_0";
    wait_until(|| sink_value(&daemon, sink, "dropped_points.buffer_full") > 0.0, "dropped samples are counted");
    let metrics = daemon.http_get("/metrics").1;
    let dropped = metrics
        .lines()
        .find(|l| l.starts_with(&format!("histd_sink_dropped_points_total{{sink=\"{sink}\",reason=\"buffer_full\"}}")))
        .unwrap_or_else(|| panic!("no drop counter on /metrics:\n{metrics}"));
    assert_ne!(dropped.rsplit(' ').next(), Some("0"), "{dropped}");
    assert!(daemon.terminate());
}

#[test]
fn prometheus_scrapes_metrics_and_receives_remote_write() {
    let scraped = Daemon::start("prom-scraped", &config("", ""));
    let scraped_native = Daemon::start("prom-scraped-native", &config("", ", scrapeHistograms: 'native'"));
    let prometheus = own_prometheus(&[scraped.address("http"), scraped_native.address("http")]);
    let url = format!("http://{}/api/v1/write", prometheus.address);
    let written = Daemon::start("prom-written", &config(&format!("{{ url: '{url}' }}"), ""));
    let native = Daemon::start("prom-native", &config(&format!("{{ url: '{url}', histograms: 'native' }}"), ""));
    let native_values = latencies(500, 7, 1);
    send_timer(&native, "prom_native.rt", &native_values);
    send_timer(&scraped_native, "prom_native.rt", &native_values);
    scraped_native.send_udp("prom_native.hits:5|c");
    let timer: Vec<u64> = vec![40, 120, 130, 180, 200, 700, 1200];
    for daemon in [&scraped, &written] {
        send_timer(daemon, "prom.rt", &timer);
        daemon.send_udp("prom.hits:2|c|#route:a");
        daemon.send_udp("prom.hits:4|c|#route:a");
    }
    // Scraped: OpenMetrics is negotiated, so the counter's samples are `_total`.
    wait_until(
        || prometheus.scalar("prom_hits_total{job='histd',route='a'}") == Some(6.0),
        "the scrape has the counter",
    );
    wait_until(|| prometheus.scalar("prom_hits{route='a'}") == Some(6.0), "remote write has the counter");
    for selector in ["{job='histd'}", "{job=''}"] {
        let count = format!("prom_rt_count{selector}");
        wait_until(|| prometheus.scalar(&count) == Some(timer.len() as f64), "the timer's count arrives");
        let median = prometheus.scalar(&format!("histogram_quantile(0.5, prom_rt_bucket{selector})")).unwrap();
        // The 4th of 7 values is 180 ms: in the classic bucket (0.1, 0.25].
        assert!(median > 0.1 && median <= 0.25, "{selector}: median {median}");
        let sum = prometheus.scalar(&format!("prom_rt_sum{selector}")).unwrap();
        assert!((sum - 2.57).abs() < 1e-9, "{selector}: sum {sum}");
    }
    let own = format!("histd_lines_received_total{{instance='{}'}}", scraped.address("http"));
    assert!(prometheus.scalar(&own).unwrap() >= 9.0, "histd's own metrics");

    // Native histograms, by remote write and by a protobuf scrape: the count and sum exact,
    // quantiles within the documented bound (the circllhist bin of histd's own quantile,
    // widened by one schema-5 bucket each way).
    let count = native_values.len() as f64;
    let scraped_at = format!("{{instance='{}'}}", scraped_native.address("http"));
    for selector in ["{job=''}".to_string(), scraped_at.clone()] {
        let query = format!("histogram_count(prom_native_rt{selector})");
        wait_until(|| prometheus.scalar(&query) == Some(count), "the native histogram arrives");
    }
    assert_eq!(prometheus.scalar(&format!("prom_native_hits{scraped_at}")), Some(5.0), "protobuf: no _total");
    let sum_s: f64 = native_values.iter().map(|&v| v as f64 / 1000.0).sum();
    let got_sum = prometheus.scalar("histogram_sum(prom_native_rt{job=''})").unwrap();
    assert!((got_sum - sum_s).abs() < 1e-9 * sum_s, "sum {got_sum}, sent {sum_s}");
    let mut own = Histogram::new();
    native_values.iter().for_each(|&v| {
        own.insert(v as f64, 1);
    });
    let growth = (2f64).powf(1.0 / 32.0);
    for q in [0.1, 0.5, 0.9, 0.99] {
        let bin = Bucket::of_f64(own.quantile(q));
        let (low, high) = (bin.left() / 1000.0 / growth, (bin.left() + bin.width()) / 1000.0 * growth);
        for selector in ["{job=''}", scraped_at.as_str()] {
            let got = prometheus.scalar(&format!("histogram_quantile({q}, prom_native_rt{selector})")).unwrap();
            assert!(
                got >= low && got <= high,
                "q={q} {selector}: Prometheus {got} s, histd's bin widened: [{low}, {high}]"
            );
        }
    }
    assert!(scraped.terminate() && written.terminate() && native.terminate() && scraped_native.terminate());
}

#[test]
fn clear_forgets_the_series_and_metrics_has_histds_own() {
    let daemon = Daemon::start("prom-clear", &config("", ""));
    daemon.send_udp("clear.hits:1|c");
    let has = |daemon: &Daemon| daemon.http_get("/metrics").1.lines().any(|l| l == "clear_hits 1");
    wait_until(|| has(&daemon), "the counter is on /metrics");
    let elsewhere = http(&daemon.address("http"), "POST", "/-/clear", &[], "Origin: http://elsewhere.example\r\n");
    assert_eq!(elsewhere.0, 403, "a page of another site cannot clear: {}", elsewhere.1);
    assert!(has(&daemon));
    let (status, body) = http(&daemon.address("http"), "POST", "/-/clear", &[], "");
    assert_eq!(status, 200, "{body}");
    assert!(body.starts_with("forgot "), "{body}");
    assert!(!has(&daemon));
    let (status, text) = http(
        &daemon.address("http"),
        "GET",
        "/metrics",
        &[],
        "Accept: application/openmetrics-text; version=1.0.0\r\n",
    );
    assert_eq!(status, 200);
    assert!(text.ends_with("# EOF\n") && text.contains("\nhistd_lines_received_total 1\n"), "{text}");
    assert!(daemon.terminate());
    let plain = Daemon::start("prom-off", "{ servers: [ { server: 'udp', address: '127.0.0.1', port: 0 } ], mgmt_port: 0, http_port: 0, backends: ['console'] }");
    assert_eq!(http(&plain.address("http"), "POST", "/-/clear", &[], "").0, 404);
    assert!(plain.http_get("/metrics").1.contains("# TYPE histd_packets_received_total counter"));
    assert!(plain.terminate());
}

/// Samples of a text exposition: `name{labels}` (sorted, `le` kept) → value, without the
/// exporters' own metrics.
fn user_samples(text: &str) -> std::collections::BTreeMap<String, f64> {
    let own = [
        "statsd_exporter_",
        "statsd_metric_mapper_",
        "go_",
        "process_",
        "promhttp_",
        "histd_",
        "statsd_bad_lines_seen",
        "statsd_metrics_received",
        "statsd_packets_received",
        "statsd_timestamp_lag",
    ];
    let mut samples = std::collections::BTreeMap::new();
    for line in text.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
        if own.iter().any(|prefix| line.starts_with(prefix)) {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap();
        let (name, labels) = series.split_once('{').unwrap_or((series, "}"));
        let mut labels: Vec<&str> = labels.trim_end_matches('}').split(',').filter(|l| !l.is_empty()).collect();
        labels.sort_unstable();
        samples.insert(format!("{name}{{{}}}", labels.join(",")), value.parse().unwrap());
    }
    samples
}

#[test]
fn the_same_mapping_file_gives_statsd_exporters_names_labels_and_values() {
    let mapping = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/statsd_exporter_mapping.yml");
    let (exporter, exporter_udp) = super::external::own_statsd_exporter(&mapping);
    let extra = format!(", mappingFile: '{}'", mapping.display());
    let daemon = Daemon::start("prom-mapping", &config("", &extra));
    // Values off every bucket boundary: the two put each in the same classic bucket.
    let lines = [
        "test.dispatcher.FooProcessor.send.success:1|c",
        "test.dispatcher.FooProcessor.send.success:2|c",
        "foo_product.signup.facebook.failure:1|c",
        "foo-node.bar-exec--http.status.200.count:3|c",
        "api.login.latency:120|ms|#env:prod",
        "api.login.latency:7|ms|#env:prod",
        "api.login.latency:3300|ms|#env:prod",
        "noisy.thing:1|c",
        "jobs.backup.duration:2000|ms",
        "jobs.backup.duration:5|g",
        "queue.depth:7|g|#fixed:no",
        "plain.unmapped.counter:2|c",
        "with_tags:1|c|#a:b,c:d",
        "5xx.errors:1|c",
        "sized.histogram:42|h",
        "rpc.get.time:123|ms",
        "rpc.get.time:234|ms",
        "rpc.get.time:345|ms",
    ];
    let sender = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    for line in lines {
        sender.send_to(line.as_bytes(), ("127.0.0.1", exporter_udp)).unwrap();
        daemon.send_udp(line);
    }
    let exporter_samples = || user_samples(&http(&exporter.address, "GET", "/metrics", &[], "").1);
    let histd_samples = || user_samples(&daemon.http_get("/metrics").1);
    let arrived = |samples: &std::collections::BTreeMap<String, f64>| {
        samples.keys().any(|k| k.starts_with("sized_histogram_count"))
    };
    wait_until(|| arrived(&exporter_samples()) && arrived(&histd_samples()), "both have every line");
    let (theirs, ours) = (exporter_samples(), histd_samples());
    let names = |samples: &std::collections::BTreeMap<String, f64>| samples.keys().cloned().collect::<Vec<_>>();
    assert_eq!(names(&ours), names(&theirs), "the same series");
    for (series, value) in &theirs {
        // Quantiles: statsd_exporter's from the raw values, histd's from circllhist bins
        // (two significant digits: within 10%).
        let tolerance = if series.contains("quantile=") { 0.1 * value.abs() } else { 1e-9 * value.abs().max(1.0) };
        let close = (ours[series] - value).abs() <= tolerance;
        assert!(close, "{series}: histd {}, statsd_exporter {value}", ours[series]);
    }
    assert!(theirs.contains_key("rpc_seconds{method=\"get\",quantile=\"0.5\"}"), "{theirs:?}");
    assert!(theirs.contains_key("queue_depth{fixed=\"yes\"}"), "{theirs:?}");
    assert!(daemon.terminate());
}
