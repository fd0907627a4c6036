//! Flush timing, idle and delete rules over several flushes, carbon outages, shutdown.

use crate::harness::{config, wait_until, Carbon, Daemon};

#[test]
fn sigterm_flushes_the_last_interval_and_exits_zero() {
    let carbon = Carbon::start();
    let daemon = Daemon::start_process("sigterm", &config(&carbon, 60_000, "server: './servers/tcp',"));
    daemon.send_tcp("last:40|c\nlast:2|c"); // the last line has no newline
    daemon.wait_received(2);
    assert!(daemon.terminate());
    carbon.wait_flush(|_| true);
    assert_eq!(
        carbon.flushes().last().and_then(|f| f.get("stats_counts.last").map(str::to_string)).as_deref(),
        Some("42")
    );
    assert_eq!(carbon.flushes().len(), 1, "no periodic flush within a minute: the data came with the final one");
}

#[test]
fn idle_metrics_are_zeroed_by_default() {
    let carbon = Carbon::start();
    let daemon = Daemon::start("idle", &config(&carbon, 200, ""));
    daemon.send_udp("c:5|c\nt:3|ms\nu:a|s\ng:7|g");
    let first = carbon.wait_flush(|f| f.get("stats_counts.c") == Some("5"));
    assert_eq!(first.get("stats.timers.t.upper"), Some("3"));
    let after = carbon.wait_flush(|f| f.get("stats_counts.c") == Some("0"));
    assert_eq!(after.get("stats.timers.t.count"), Some("0"));
    assert_eq!(after.get("stats.timers.t.count_ps"), Some("0"));
    assert_eq!(after.get("stats.timers.t.upper"), None, "an idle timer sends only its counts");
    assert_eq!(after.get("stats.sets.u.count"), Some("0"));
    assert_eq!(after.get("stats.gauges.g"), Some("7"), "gauges persist");
    assert!(after.get("stats.gauges.statsd.timestamp_lag").is_some());
}

#[test]
fn delete_idle_stats_removes_idle_metrics_and_expires_gauges() {
    let carbon = Carbon::start();
    let daemon = Daemon::start("delete", &config(&carbon, 200, "deleteIdleStats: true, gaugesMaxTTL: 2,"));
    daemon.send_udp("c:5|c\nt:3|ms\nu:a|s\ng:7|g");
    let flushes = || carbon.flushes();
    wait_until(|| flushes().iter().any(|f| f.get("stats_counts.c").is_some()), "the data flush");
    wait_until(
        || flushes().len() >= flushes().iter().position(|f| f.get("stats_counts.c").is_some()).unwrap() + 3,
        "two more flushes",
    );
    let all = flushes();
    let at = all.iter().position(|f| f.get("stats_counts.c").is_some()).unwrap();
    let (data, next, after) = (&all[at], &all[at + 1], &all[at + 2]);
    assert_eq!(data.get("stats.gauges.g"), Some("7"));
    assert_eq!(next.get("stats_counts.c"), None);
    assert_eq!(next.get("stats.timers.t.count"), None);
    assert_eq!(next.get("stats.sets.u.count"), None);
    assert_eq!(next.get("stats.gauges.g"), Some("7"), "a gauge lives gaugesMaxTTL flushes");
    assert_eq!(after.get("stats.gauges.g"), None);
    assert_eq!(after.get("stats_counts.statsd.packets_received"), Some("0"), "internal counters stay");
}

#[test]
fn flushes_keep_to_the_grid() {
    let carbon = Carbon::start();
    let daemon = Daemon::start("grid", &config(&carbon, 250, ""));
    wait_until(|| carbon.flush_arrivals().len() >= 12, "twelve flushes");
    let arrivals = carbon.flush_arrivals();
    // Measured from the second flush (the first may come early in its interval): flush k is
    // never early, and lateness does not add up (a late flush does not move the next).
    let drifts: Vec<f64> = arrivals[1..12]
        .iter()
        .enumerate()
        .map(|(k, at)| at.duration_since(arrivals[1]).as_secs_f64() - k as f64 * 0.25)
        .collect();
    assert!(drifts.iter().all(|d| *d > -0.1) && drifts[10] < 0.2, "seconds off a 250 ms grid: {drifts:?}");
    let lags: Vec<f64> =
        carbon.flushes()[1..].iter().filter_map(|f| f.get("stats.gauges.statsd.timestamp_lag")?.parse().ok()).collect();
    assert!(lags.len() >= 10 && lags.iter().all(|lag| lag.abs() <= 1.0), "lags within a second: {lags:?}");
    drop(daemon);
}

#[test]
fn a_carbon_outage_loses_nothing() {
    let mut carbon = Carbon::start();
    let daemon = Daemon::start("outage", &config(&carbon, 200, ""));
    carbon.wait_flush(|_| true);
    carbon.stop();
    for batch in 1..=5 {
        daemon.send_udp(&format!("outage.{batch}:1|c"));
        daemon.wait_received(batch);
        let errors = daemon.stat("graphite.errors");
        wait_until(|| daemon.stat("graphite.errors") > errors, "a flush that could not be delivered");
    }
    carbon.restart();
    for batch in 1..=5 {
        let name = format!("stats_counts.outage.{batch}");
        carbon.wait_flush(|f| f.get(&name) == Some("1"));
    }
    assert_eq!(daemon.stat("graphite.dropped_points.buffer_full"), 0.0);
}

#[test]
fn the_retry_buffer_limit_is_enforced_and_counted() {
    let mut carbon = Carbon::start();
    let daemon = Daemon::start(
        "buffer-limit",
        &config(&carbon, 100, "graphite: { retryBufferBytes: 2000 }, histdSelfMetrics: true,"),
    );
    carbon.wait_flush(|_| true);
    carbon.stop();
    wait_until(|| daemon.stat("graphite.dropped_points.buffer_full") > 0.0, "the buffer to overflow");
    assert!(daemon.stat("graphite.buffered_bytes") <= 2000.0);
    carbon.restart();
    let flush = carbon.wait_flush(|f| f.get("stats.statsd.graphiteStats.dropped_lines").is_some_and(|v| v != "0"));
    assert!(flush.get("stats.statsd.graphiteStats.errors").is_some_and(|v| v != "0"));
}
