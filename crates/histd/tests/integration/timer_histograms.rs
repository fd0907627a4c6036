//! Timers past `timerSampleLimit`: totals stay exact, percentiles come from the histogram within
//! its error bound, and memory does not grow with the number of samples.

use std::io::Write;
use std::net::TcpStream;

use crate::harness::{config, rss_kib, Carbon, Daemon};

fn send_tcp_lines(daemon: &Daemon, name: &str, values: impl Iterator<Item = u64>) {
    let mut stream = TcpStream::connect(daemon.address("tcp")).unwrap();
    let mut batch = String::with_capacity(1 << 16);
    for value in values {
        batch.push_str(&format!("{name}:{value}|ms\n"));
        if batch.len() > 60_000 {
            stream.write_all(batch.as_bytes()).unwrap();
            batch.clear();
        }
    }
    stream.write_all(batch.as_bytes()).unwrap();
}

#[test]
fn timers_past_the_sample_limit() {
    let carbon = Carbon::start();
    let extra = "server: './servers/tcp', timerSampleLimit: 100, percentThreshold: [90], histdSelfMetrics: true,";
    let daemon = Daemon::start_process("timer-limit", &config(&carbon, 60_000, extra));
    send_tcp_lines(&daemon, "t", 1..=5000);
    daemon.wait_received(5000);
    assert_eq!(daemon.admin("timers"), "{ t: [] }\nEND\n\n", "no raw values are kept past the limit");

    send_tcp_lines(&daemon, "load", (0..100_000).map(|i| 1 + i % 5000));
    daemon.wait_received(105_000);
    let before = rss_kib(&daemon);
    send_tcp_lines(&daemon, "load", (0..1_000_000).map(|i| 1 + i % 5000));
    daemon.wait_received(1_105_000);
    let growth = rss_kib(&daemon).saturating_sub(before);
    assert!(growth < 4 * 1024, "a million more samples grew memory by {growth} KiB (raw values would take 7.8 MiB)");

    assert!(daemon.terminate());
    let flush = carbon.wait_flush(|f| f.get("stats.timers.t.count").is_some());
    let value = |name: &str| -> f64 { flush.get(name).unwrap_or_else(|| panic!("{name}")).parse().unwrap() };
    assert_eq!(value("stats.timers.t.count"), 5000.0);
    assert_eq!(value("stats.timers.t.sum"), 12_502_500.0);
    assert_eq!(value("stats.timers.t.lower"), 1.0);
    assert_eq!(value("stats.timers.t.upper"), 5000.0);
    assert_eq!(value("stats.timers.t.mean"), 2500.5);
    assert_eq!(value("stats.timers.t.count_90"), 4500.0);
    let within = |name: &str, truth: f64, bound: f64| {
        let got = value(name);
        assert!((got - truth).abs() / truth <= bound, "{name}: {got}, true value {truth}, bound {bound}");
    };
    within("stats.timers.t.upper_90", 4500.0, 0.10);
    within("stats.timers.t.median", 2500.5, 0.10);
    within("stats.timers.t.mean_90", 2250.5, 0.05);
    within("stats.timers.t.sum_90", 10_127_250.0, 0.05);
    within("stats.timers.t.std", 1443.37, 0.001);
    assert_eq!(value("stats.timers.load.count"), 1_100_000.0);
    assert_eq!(value("stats_counts.statsd.timers_over_sample_limit"), 2.0);
}
