//! Config reload through the real binary (issue 20): SIGHUP and `POST /-/reload` under load,
//! exact totals, a bad file keeping the old config, keys that take a restart named.

use std::io::Write;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::harness::{eventually, http, Carbon, Daemon};

fn config(carbon: &Carbon, thresholds: &str, extra: &str) -> String {
    format!(
        "{{ servers: [ {{ server: 'tcp', address: '127.0.0.1', port: 0 }} ], mgmt_port: 0, http_port: 0, \
           graphiteHost: '127.0.0.1', graphitePort: {}, flushInterval: 200, percentThreshold: {thresholds}, {extra} }}",
        carbon.port
    )
}

fn hangup(daemon: &Daemon) {
    let status = Command::new("kill").args(["-HUP", &daemon.pid().to_string()]).status().unwrap();
    assert!(status.success());
}

#[test]
fn reloads_under_load_lose_and_double_nothing() {
    let carbon = Carbon::start();
    let daemon = Daemon::start_process("reload", &config(&carbon, "[90]", ""));
    let path = daemon.dir.join("config.js");
    // A client sends counters and timers the whole time, over one connection.
    let (stop, sent) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)));
    let sender = {
        let (address, stop, sent) = (daemon.address("tcp"), stop.clone(), sent.clone());
        std::thread::spawn(move || {
            let mut stream = std::net::TcpStream::connect(address).unwrap();
            let started = Instant::now();
            while !stop.load(Ordering::Relaxed) && started.elapsed() < Duration::from_secs(30) {
                stream.write_all("reload.c:1|c\nreload.t:5|ms\n".repeat(50).as_bytes()).unwrap();
                sent.fetch_add(50, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(2));
            }
        })
    };
    for reload in 1..=10u64 {
        let thresholds = if reload % 2 == 1 { "[50, 99]" } else { "[90]" };
        std::fs::write(&path, config(&carbon, thresholds, &format!("maxSeriesPerName: {}", 100 + reload))).unwrap();
        hangup(&daemon);
        let done = eventually(|| daemon.stat("messages.config_reloads") == reload as f64);
        assert!(done, "reload {reload}: {}", daemon.admin("stats"));
        std::thread::sleep(Duration::from_millis(150));
    }
    stop.store(true, Ordering::Relaxed);
    sender.join().unwrap();
    let sent = sent.load(Ordering::Relaxed) as f64;
    assert!(
        eventually(|| carbon.total("stats_counts.reload.c") == sent),
        "{} of {sent}",
        carbon.total("stats_counts.reload.c")
    );
    assert_eq!(daemon.stat("messages.config_reload_failures"), 0.0);
    // The last reload's thresholds are the ones flushed: p90, not p50/p99.
    let flushes = carbon.flushes();
    let last = flushes.iter().rev().find(|f| f.get("stats.timers.reload.t.count").is_some()).unwrap();
    assert!(
        last.get("stats.timers.reload.t.upper_90").is_some() && last.get("stats.timers.reload.t.upper_99").is_none()
    );
    assert!(flushes.iter().any(|f| f.get("stats.timers.reload.t.upper_99").is_some()), "reloads took effect");

    // A file that does not parse: the old config runs on, the failure is counted and logged.
    std::fs::write(&path, "{ percentThreshold: [50, 99], flushInterval: ").unwrap();
    hangup(&daemon);
    assert!(eventually(|| daemon.stat("messages.config_reload_failures") == 1.0));
    daemon.send_tcp("reload.after:1|c\n");
    let flush = carbon.wait_flush(|f| f.get("stats_counts.reload.after").is_some());
    assert!(flush.get("stats.timers.reload.t.upper_90").is_some() || flush.get("stats_counts.reload.c").is_some());
    assert!(daemon.stderr().contains("config reload failed"), "logged");
    // POST /-/reload: a bad key is a 400 naming it; a change that takes a restart is named.
    let address = daemon.address("http");
    std::fs::write(&path, config(&carbon, "[90]", "maxSeries: 0")).unwrap();
    let (status, body) = http(&address, "POST", "/-/reload", b"", "");
    assert!(status == 400 && body.contains("maxSeries"), "{status} {body}");
    std::fs::write(&path, config(&carbon, "[75]", "flushInterval: 1000").replace("flushInterval: 200, ", "")).unwrap();
    let (status, body) = http(&address, "POST", "/-/reload", b"", "");
    assert_eq!(status, 200, "{body}");
    let outcome: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(outcome["applied"], serde_json::json!(["maxSeriesPerName", "percentThreshold"]), "{outcome}");
    assert_eq!(outcome["needs_restart"], serde_json::json!(["flushInterval"]), "{outcome}");
    daemon.send_tcp("reload.t:7|ms\n");
    carbon.wait_flush(|f| f.get("stats.timers.reload.t.upper_75").is_some());
    // Issue 32: `config` shows what is in force: the new thresholds, the old flushInterval
    // (it takes a restart); /health names the file and when it was read.
    let shown = daemon.admin("config");
    assert!(shown.contains("percentThreshold > 0: 75") && !shown.contains("percentThreshold > 1: 99"), "{shown}");
    assert!(shown.contains("flushInterval: 200"), "the key that takes a restart keeps its value in force: {shown}");
    let (_, health) = http(&address, "GET", "/health", b"", "");
    let health: serde_json::Value = serde_json::from_str(&health).unwrap();
    assert_eq!(health["config"]["file"], serde_json::json!(path.display().to_string()), "{health}");
    assert!(health["config"]["loaded_unix_s"].as_u64().unwrap() > 1_700_000_000, "{health}");
    let (status, _) = http(&address, "POST", "/-/reload", b"", "Origin: http://elsewhere.example\r\n");
    assert_eq!(status, 403);
    assert!(daemon.terminate());
}

/// A config of the listeners/backends test: `servers` and `rest` as given.
fn edges_config(servers: &str, rest: &str) -> String {
    format!("{{ servers: [ {servers} ], mgmt_port: 0, http_port: 0, flushInterval: 200, {rest} }}")
}

fn udp_server(port: u16) -> String {
    format!("{{ server: 'udp', address: '127.0.0.1', port: {port} }}")
}

fn tcp_server(port: u16) -> String {
    format!("{{ server: 'tcp', address: '127.0.0.1', port: {port} }}")
}

fn graphite_at(carbon: &Carbon) -> String {
    format!("backends: ['graphite'], graphiteHost: '127.0.0.1', graphitePort: {}", carbon.port)
}

/// POSTs `/-/reload` after writing `config`; the answer's JSON (status 200 asserted).
fn reload_with(daemon: &Daemon, config: &str) -> serde_json::Value {
    std::fs::write(daemon.dir.join("config.js"), config).unwrap();
    let (status, body) = http(&daemon.address("http"), "POST", "/-/reload", b"", "");
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

/// Issue 20, item 1: a reload opens and closes listeners and starts, restarts and stops
/// backends while a client sends the whole time; every counter increment reaches exactly one
/// carbon (the one graphite pointed at when its interval was flushed).
#[test]
fn reloads_open_and_close_listeners_and_backends() {
    let (carbon_a, carbon_b) = (Carbon::start(), Carbon::start());
    let (udp, tcp) = (crate::harness::free_port(), crate::harness::free_port());
    let daemon = Daemon::start_process("reload-edges", &edges_config(&udp_server(udp), &graphite_at(&carbon_a)));
    let (stop, sent) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)));
    let sender = {
        let (stop, sent) = (stop.clone(), sent.clone());
        std::thread::spawn(move || {
            let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            let started = Instant::now();
            while !stop.load(Ordering::Relaxed) && started.elapsed() < Duration::from_secs(30) {
                socket.send_to("edges.c:1|c\n".repeat(20).as_bytes(), ("127.0.0.1", udp)).unwrap();
                sent.fetch_add(20, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(3));
            }
        })
    };
    carbon_a.wait_flush(|f| f.get("stats_counts.edges.c").is_some());
    // A TCP listener added, graphite pointed at another carbon: opened and restarted.
    let both = format!("{}, {}", udp_server(udp), tcp_server(tcp));
    let outcome = reload_with(&daemon, &edges_config(&both, &graphite_at(&carbon_b)));
    assert_eq!(outcome["applied"], serde_json::json!(["graphite", "servers"]), "{outcome}");
    let changes = outcome["changes"].to_string();
    assert!(
        changes.contains("restarted graphite") && changes.contains(&format!("opened tcp 127.0.0.1:{tcp}")),
        "{outcome}"
    );
    std::net::TcpStream::connect(("127.0.0.1", tcp)).unwrap().write_all(b"edges.tcp:3|c\n").unwrap();
    carbon_b.wait_flush(|f| f.get("stats_counts.edges.tcp") == Some("3"));
    carbon_b.wait_flush(|f| f.get("stats_counts.edges.c").is_some());
    // A reload that cannot open a port changes nothing: a port another process holds.
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = format!("{both}, {}", tcp_server(held.local_addr().unwrap().port()));
    std::fs::write(daemon.dir.join("config.js"), edges_config(&taken, "backends: ['console']")).unwrap();
    let (status, body) = http(&daemon.address("http"), "POST", "/-/reload", b"", "");
    assert!(status == 400 && body.contains("servers[2]"), "{status} {body}");
    drop(held);
    stop.store(true, Ordering::Relaxed);
    sender.join().unwrap();
    let sent = sent.load(Ordering::Relaxed) as f64;
    let both_carbons = || carbon_a.total("stats_counts.edges.c") + carbon_b.total("stats_counts.edges.c");
    assert!(
        eventually(|| both_carbons() == sent),
        "{} of {sent} (graphite kept after the failed reload)",
        both_carbons()
    );
    assert!(carbon_a.total("stats_counts.edges.c") > 0.0 && carbon_b.total("stats_counts.edges.c") > 0.0);
    // The UDP listener dropped and the store added: the port is free again, the API answers.
    let store = format!("backends: ['graphite', 'store'], graphiteHost: '127.0.0.1', graphitePort: {}", carbon_b.port);
    let outcome = reload_with(
        &daemon,
        &edges_config(
            &tcp_server(tcp),
            &format!("{store}, store: {{ dataDir: '{}' }}", daemon.dir.join("data").display()),
        ),
    );
    let changes = outcome["changes"].to_string();
    assert!(changes.contains(&format!("closed udp 127.0.0.1:{udp}")) && changes.contains("started store"), "{outcome}");
    std::net::UdpSocket::bind(("127.0.0.1", udp)).expect("the dropped UDP port is free");
    std::net::TcpStream::connect(("127.0.0.1", tcp)).unwrap().write_all(b"edges.stored:4|c\n").unwrap();
    let stored = || daemon.http_json("/api/v1/series?match=edges.stored")["total"].as_u64() == Some(1);
    assert!(eventually(stored), "{}", daemon.http_json("/api/v1/series"));
    // The store dropped again: its API says it is off.
    reload_with(&daemon, &edges_config(&tcp_server(tcp), &graphite_at(&carbon_b)));
    assert_eq!(daemon.http_get("/api/v1/series").0, 503);
    assert_eq!(daemon.stat("messages.config_reload_failures"), 1.0);
    assert!(daemon.terminate());
}

/// Issue 51: a reload that rotates a Prometheus remote-write header (a credential) restarts
/// the sink, and the new header is the one sent from then on (the sink's identity compared the
/// header names only, so the old credential stayed in use).
#[test]
fn a_rotated_remote_write_header_is_sent_after_a_reload() {
    let receiver = crate::harness::HttpCapture::start();
    let config = |token: &str| {
        format!(
            "{{ address: '127.0.0.1', port: 0, server: './servers/tcp', mgmt_port: 0, http_port: 0, flushInterval: 200, \
               backends: ['prometheus'], prometheus: {{ remoteWrite: [ {{ url: 'http://{}/api/v1/write', \
               headers: {{ Authorization: 'Bearer {token}' }} }} ] }} }}",
            receiver.address
        )
    };
    let daemon = Daemon::start_process("reload-remote-write", &config("old-token"));
    let path = daemon.dir.join("config.js");
    let sent_with = |token: &str| {
        let wanted = format!("Bearer {token}");
        receiver.requests().iter().filter(|r| r.header("authorization") == Some(wanted.as_str())).count()
    };
    daemon.send_tcp("rw.hits:1|c\n");
    assert!(eventually(|| sent_with("old-token") > 0), "the first header sent");
    std::fs::write(&path, config("new-token")).unwrap();
    hangup(&daemon);
    assert!(eventually(|| daemon.stat("messages.config_reloads") == 1.0), "{}", daemon.admin("stats"));
    daemon.send_tcp("rw.hits:1|c\n");
    assert!(eventually(|| sent_with("new-token") > 0), "the rotated header sent: {}", daemon.stderr());
    let first_new =
        receiver.requests().iter().position(|r| r.header("authorization") == Some("Bearer new-token")).unwrap();
    let after = receiver.requests().into_iter().skip(first_new).collect::<Vec<_>>();
    assert!(
        after.iter().all(|r| r.header("authorization") == Some("Bearer new-token")),
        "the old credential is no longer sent"
    );
    assert!(daemon.stderr().contains("prometheus"), "the restart is said: {}", daemon.stderr());
}

/// Issue 51: a forward backend on a spool directory it keeps is replaced by a reload, not kept
/// as it was: the old sink stops first, the new one starts on the directory, and the rotated
/// credential (here its token file) is the one sent from then on; every increment is sent once,
/// before or after.
#[test]
fn a_forward_credential_rotated_with_its_spool_is_sent_after_a_reload() {
    let node = crate::harness::HttpCapture::start();
    let dir = std::env::temp_dir().join(format!("histd-forward-rotation-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let token = |name: &str| {
        let path = dir.join(name);
        std::fs::write(&path, format!("{name}-0123456789abcdef\n")).unwrap();
        path
    };
    let (old, new) = (token("old"), token("new"));
    let spool = dir.join("spool");
    let config = |token: &std::path::Path| {
        format!(
            "{{ address: '127.0.0.1', port: 0, server: './servers/tcp', mgmt_port: 0, http_port: 0, flushInterval: 200, \
               backends: ['forward'], forward: {{ nodes: ['http://{}'], source: 'rotating', spoolDir: '{}', \
               tokenFile: '{}' }} }}",
            node.address,
            spool.display(),
            token.display()
        )
    };
    let daemon = Daemon::start_process("reload-forward-spool", &config(&old));
    let batches = |bearer: &str| {
        let wanted = format!("Bearer {bearer}-0123456789abcdef");
        let posted = node.requests().into_iter().filter(|r| r.method == "POST");
        posted.filter(|r| r.header("authorization") == Some(wanted.as_str())).collect::<Vec<_>>()
    };
    daemon.send_tcp("rotation.c:1|c\n".repeat(10).as_str());
    assert!(eventually(|| !batches("old").is_empty()), "sent with the first token: {}", daemon.stderr());
    let outcome = reload_with(&daemon, &config(&new));
    assert_eq!(outcome["needs_restart"], serde_json::json!([]), "{outcome}");
    assert!(outcome["changes"].to_string().contains("replaced forward"), "{outcome}");
    daemon.send_tcp("rotation.c:1|c\n".repeat(5).as_str());
    assert!(eventually(|| !batches("new").is_empty()), "sent with the rotated token: {}", daemon.stderr());
    let first_new =
        node.requests().iter().position(|r| r.header("authorization").is_some_and(|a| a.contains("new-"))).unwrap();
    let after = node.requests().into_iter().skip(first_new).filter(|r| r.method == "POST").collect::<Vec<_>>();
    assert!(
        after.iter().all(|r| r.header("authorization").is_some_and(|a| a.contains("new-"))),
        "the old token is no longer sent"
    );
    let counted = |batches: Vec<crate::harness::Captured>| -> f64 {
        let decoded = batches.iter().map(|r| fleet::format::decode(&r.body, 1 << 24).expect("a forward batch"));
        let mut seen = std::collections::HashSet::new();
        decoded
            .filter(|batch| seen.insert(batch.id.clone()))
            .flat_map(|batch| batch.interval.counters)
            .filter(|(key, _)| key.as_str() == "rotation.c")
            .map(|(_, value)| value)
            .sum()
    };
    let all = || {
        let posted = node.requests().into_iter().filter(|r| r.method == "POST").collect::<Vec<_>>();
        counted(posted)
    };
    assert!(eventually(|| all() == 15.0), "every increment sent once: {}", all());
    assert!(daemon.terminate());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Issue 51: the store's retention and disk budget changed by a reload are handed to the
/// running writer (named as changed in place), its data directory kept and still written.
#[test]
fn a_store_reload_changes_retention_in_place() {
    let dir = std::env::temp_dir().join(format!("histd-store-in-place-{}", std::process::id()));
    let config = |raw: &str| {
        format!(
            "{{ address: '127.0.0.1', port: 0, server: './servers/tcp', mgmt_port: 0, http_port: 0, flushInterval: 200, \
               backends: ['store'], store: {{ dataDir: '{}', retention: {{ raw: '{raw}' }}, maxBytes: '1GiB' }} }}",
            dir.display()
        )
    };
    let daemon = Daemon::start_process("reload-store-in-place", &config("2h"));
    daemon.send_tcp("inplace.c:1|c\n");
    let delivered = daemon.stat("store.delivered");
    assert!(eventually(|| daemon.stat("store.delivered") > delivered));
    let outcome = reload_with(&daemon, &config("3h"));
    assert_eq!(outcome["applied"], serde_json::json!(["store"]), "{outcome}");
    let changes = outcome["changes"].to_string();
    assert!(changes.contains("changed store in place") && !changes.contains("restarted store"), "{outcome}");
    let after = daemon.stat("store.delivered");
    assert!(after > 0.0, "the writer's counters go on (no new sink)");
    assert!(eventually(|| daemon.stat("store.delivered") > after), "the same writer keeps writing");
    assert!(daemon.terminate());
    let _ = std::fs::remove_dir_all(&dir);
}
