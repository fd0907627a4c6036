//! Flush timing, idle and delete rules over several flushes, carbon outages, shutdown.

use std::collections::BTreeMap;
use std::io::Read;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::harness::{config, eventually, wait_until, Carbon, Daemon};

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

/// A carbon that reads slowly from a small receive buffer, so that a backlog builds up in the
/// socket buffers, and can be killed with that backlog unread.
struct SlowCarbon {
    port: u16,
    read: Arc<AtomicU64>,
    lines: Arc<Mutex<Vec<String>>>,
    killed: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl SlowCarbon {
    fn start() -> SlowCarbon {
        let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        socket.set_recv_buffer_size(8192).unwrap();
        socket.set_reuse_address(true).unwrap();
        socket.bind(&"127.0.0.1:0".parse::<std::net::SocketAddr>().unwrap().into()).unwrap();
        socket.listen(8).unwrap();
        let listener: std::net::TcpListener = socket.into();
        let port = listener.local_addr().unwrap().port();
        let (read, lines, killed) =
            (Arc::new(AtomicU64::new(0)), Arc::new(Mutex::new(Vec::new())), Arc::new(AtomicBool::new(false)));
        let thread = {
            let (read, lines, killed) = (read.clone(), lines.clone(), killed.clone());
            std::thread::spawn(move || {
                let (mut stream, _) = listener.accept().unwrap();
                drop(listener);
                let (mut pending, mut buffer) = (Vec::new(), [0u8; 2048]);
                while !killed.load(Ordering::Relaxed) {
                    let Ok(n) = stream.read(&mut buffer) else { break };
                    read.fetch_add(n as u64, Ordering::Relaxed);
                    pending.extend_from_slice(&buffer[..n]);
                    while let Some(end) = pending.iter().position(|&b| b == b'\n') {
                        let line: Vec<u8> = pending.drain(..=end).collect();
                        lines.lock().unwrap().push(String::from_utf8_lossy(&line[..end]).into_owned());
                    }
                    std::thread::sleep(std::time::Duration::from_millis(20)); // reads ~100 KB/s
                }
                // Dropped with unread data: the kernel resets the connection, the backlog is gone.
            })
        };
        SlowCarbon { port, read, lines, killed, thread: Some(thread) }
    }

    /// Kills it: the lines it read; whatever the socket buffers held is lost.
    fn kill(mut self) -> Vec<String> {
        self.killed.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap();
        self.lines.lock().unwrap().clone()
    }
}

/// The sum of each `stats_counts.<prefix>*` counter over every flush, counting a name and
/// timestamp once (as carbon keeps one value per name and timestamp).
fn totals(lines: &[String], prefix: &str) -> BTreeMap<String, f64> {
    let mut seen = BTreeMap::new();
    for line in lines {
        let parts: Vec<&str> = line.split(' ').collect();
        if let [name, value, ts] = parts[..] {
            if name.starts_with(prefix) {
                seen.insert((name.to_string(), ts.to_string()), value.parse::<f64>().unwrap_or(0.0));
            }
        }
    }
    let mut totals = BTreeMap::new();
    for ((name, _), value) in seen {
        *totals.entry(name).or_insert(0.0) += value;
    }
    totals
}

/// Issue 22 C4: a carbon killed while its socket buffers hold a backlog loses nothing: what
/// may not have been read is sent again to the next carbon.
#[test]
fn c4_a_carbon_killed_with_a_backlog_loses_nothing() {
    let slow = SlowCarbon::start();
    let port = slow.port;
    let daemon = Daemon::start(
        "c4-killed-carbon",
        &format!(
            "{{ address: '127.0.0.1', port: 0, mgmt_port: 0, http_port: 0, flushInterval: 1000, udpReceiveBufferBytes: 33554432, \
               graphiteHost: '127.0.0.1', graphitePort: {port} }}"
        ),
    );
    let datagrams: Vec<String> =
        (0..50).map(|d| (0..200).map(|i| format!("c4.k{}:1|c\n", d * 200 + i)).collect()).collect();
    let (mut rounds, mut polls) = (0u64, 0u64);
    wait_until(
        || {
            polls += 1;
            if polls % 5 == 1 {
                datagrams.iter().for_each(|datagram| daemon.send_udp(datagram));
                rounds += 1;
            }
            daemon.stat("graphite.bytes_out") - slow.read.load(Ordering::Relaxed) as f64 > 1_000_000.0
        },
        "a backlog of a megabyte at the slow carbon",
    );
    let early = slow.kill();
    let carbon = Carbon::start_on_port(port);
    daemon.wait_received(rounds * 10_000);
    wait_until(|| daemon.stat("graphite.resent_points") > 0.0, "what the killed carbon may not have read sent again");
    let wanted: BTreeMap<String, f64> = (0..10_000).map(|k| (format!("stats_counts.c4.k{k}"), rounds as f64)).collect();
    let possibly_lost = daemon.stat("graphite.dropped_points.possibly_lost");
    assert!(daemon.terminate());
    let arrived = || {
        let mut lines = early.clone();
        lines.extend(carbon.lines());
        totals(&lines, "stats_counts.c4.")
    };
    eventually(|| arrived() == wanted);
    let got = arrived();
    let (sum_got, sum_wanted): (f64, f64) = (got.values().sum(), wanted.values().sum());
    let short: Vec<_> = wanted.iter().filter(|(k, v)| got.get(*k) != Some(v)).take(3).collect();
    assert!(
        got == wanted,
        "{sum_got} of {sum_wanted} increments arrived ({} names); e.g. {short:?}; early lines {}, later {}",
        got.len(),
        early.len(),
        carbon.lines().len()
    );
    assert_eq!(possibly_lost, 0.0);
}
