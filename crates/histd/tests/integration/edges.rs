//! Issue 34: the edges a fleet exposes, each test named after what the third probe
//! (probes-2026-11-27, N1–N14) found broken: a global's intake bounded in memory and time,
//! forwarded batches screened as statsd lines are, roles with tokens, browsers kept out,
//! identities bound to the credential that sent them, silent connections let go.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use fleet::format::{compress, BatchId, BatchWriter};

use crate::harness::{
    eventually, free_port, http, peak_rss_kib, spooled_batches, temp_dir, wait_until, Carbon, Daemon,
};

const BATCH_HEADERS: &str = "Content-Type: application/x-histd-forward\r\nContent-Encoding: snappy\r\n";

/// The sum of the values of a query answer's `points` (0 for anything else).
fn points_total(answer: &str) -> f64 {
    let answer: serde_json::Value = serde_json::from_str(answer).unwrap_or_default();
    answer["points"].as_array().map_or(0.0, |points| points.iter().filter_map(|point| point[1].as_f64()).sum())
}

/// Flips `bit` in the middle byte of the first block (by rowid) of the store file `database`,
/// of `series`' group when given, behind its daemon's back: its checksum no longer holds.
fn flip_a_bit_in_the_first_block(database: &std::path::Path, series: Option<&str>, bit: u8) {
    let database = rusqlite::Connection::open(database).unwrap();
    let (rowid, mut data): (i64, Vec<u8>) = database
        .query_row(
            "SELECT rowid, data FROM blocks WHERE ?1 IS NULL OR grp = (SELECT grp FROM series WHERE name = ?1) \
             ORDER BY rowid LIMIT 1",
            [series],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    let middle = data.len() / 2;
    data[middle] ^= bit;
    database.execute("UPDATE blocks SET data = ?1 WHERE rowid = ?2", rusqlite::params![data, rowid]).unwrap();
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64
}

fn id(source: &str, chunk: u64) -> BatchId {
    BatchId { source: source.into(), interval_start_ms: now_ms() - 1_000, interval_ms: 1_000, part: "p".into(), chunk }
}

/// A global sending its flushes to `carbon`, with `extra` keys.
fn global(name: &str, carbon: &Carbon, extra: &str) -> Daemon {
    global_flushing_every(300, name, carbon, extra)
}

/// A global flushing every `interval_ms` (a second or more where late intervals must not
/// share a second with the flushes: Graphite keeps one value a second).
fn global_flushing_every(interval_ms: u64, name: &str, carbon: &Carbon, extra: &str) -> Daemon {
    let config = format!(
        "{{ address: '127.0.0.1', port: 0, mgmt_port: 0, http_port: 0, graphiteHost: '127.0.0.1', graphitePort: {}, \
           flushInterval: {interval_ms}, global: {{ accept: true, maxBatchBytes: 4194304, maxBytesInFlight: 12582912 }}, {extra} }}",
        carbon.port
    );
    Daemon::start_process(name, &config)
}

fn post(daemon: &Daemon, body: &[u8], headers: &str) -> (u16, String) {
    http(&daemon.address("http"), "POST", "/api/v1/forward", body, &format!("{BATCH_HEADERS}{headers}"))
}

fn varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// A batch of one set with `members` empty members (the probe's set-member bomb).
fn set_member_bomb(members: u64) -> Vec<u8> {
    let mut raw = b"HFWD\x01".to_vec();
    raw.extend_from_slice(b"\x04bomb");
    varint(&mut raw, now_ms() - 1_000);
    varint(&mut raw, 1_000);
    raw.extend_from_slice(b"\x01p\x00");
    raw.extend_from_slice(&[0, 0, 0, 1, 1, b's', 0]);
    varint(&mut raw, members);
    raw.resize(raw.len() + members as usize, 0);
    compress(&raw)
}

/// N1: bombs are refused within `global.maxBatchBytes` (decompressed and decoded), and the
/// daemon's memory stays far from the gigabyte one request took.
#[test]
fn n1_decompression_and_decoding_bombs_are_refused_within_their_budget() {
    let carbon = Carbon::start();
    let daemon = global("n1-bombs", &carbon, "");
    let mut counters = BatchWriter::new(id("bomb", 0));
    for _ in 0..2_000_000 {
        counters.counter("c", 1.0);
    }
    let body = compress(&counters.finish());
    let (status, answer) = post(&daemon, &body, "");
    assert!(status == 400 && answer.contains("over the limit"), "{status} {answer}");
    let body = set_member_bomb(3_000_000);
    assert!(body.len() < 1 << 20, "a small body ({} bytes)", body.len());
    let (status, answer) = post(&daemon, &body, "");
    assert!(status == 400 && answer.contains("decodes to more than"), "{status} {answer}");
    assert!(peak_rss_kib(&daemon) < 200 * 1024, "peak RSS {} KiB", peak_rss_kib(&daemon));
    assert_eq!(daemon.stat("messages.forward_batches_refused"), 2.0);
    assert!(daemon.terminate());
}

/// N1: what requests hold at once is bounded: past `global.maxBytesInFlight` a request is
/// answered 503 with `Retry-After` before its body is read.
#[test]
fn n1_requests_past_the_bytes_in_flight_are_told_to_retry() {
    let carbon = Carbon::start();
    let daemon = global("n1-in-flight", &carbon, "httpBodyTimeoutMs: 5000,");
    let address = daemon.address("http");
    // Three requests that announce large bodies and send none hold the whole budget.
    let mut held = Vec::new();
    for _ in 0..3 {
        let mut stream = TcpStream::connect(&address).unwrap();
        let head = format!(
            "POST /api/v1/forward HTTP/1.1\r\nHost: {address}\r\n{BATCH_HEADERS}Content-Length: 4194304\r\n\r\n"
        );
        stream.write_all(head.as_bytes()).unwrap();
        held.push(stream);
    }
    std::thread::sleep(Duration::from_millis(300));
    let mut small = BatchWriter::new(id("web-1", 0));
    small.counter("n1.hits", 1.0);
    let (status, answer) = post(&daemon, &compress(&small.finish()), "");
    assert!(status == 503 && answer.contains("maxBytesInFlight"), "{status} {answer}");
    assert_eq!(daemon.stat("messages.forward_batches_busy"), 1.0);
    drop(held);
    let again = || {
        let mut small = BatchWriter::new(id("web-1", 1));
        small.counter("n1.hits", 1.0);
        compress(&small.finish())
    };
    assert!(eventually(|| post(&daemon, &again(), "").0 == 200), "taken once the others let go");
    assert!(daemon.terminate());
}

/// P12 (issue 48): what concurrent forwarded requests hold stays within
/// `global.maxBytesInFlight`. Each request reserves, before its body is decoded, the batch
/// decompressed and what its entries may take decoded (up to `global.maxBatchBytes`); the
/// entries' lists are sized once (no doubling). The probe saw 22 requests let in by a budget
/// of 512 MiB hold 786 MB: twice the batch's size was reserved, three times it was held.
#[test]
fn p12_concurrent_batches_hold_no_more_than_the_bytes_in_flight() {
    const IN_FLIGHT_MIB: u64 = 48;
    let carbon = Carbon::start();
    let config = format!(
        "{{ address: '127.0.0.1', port: 0, mgmt_port: 0, http_port: 0, graphiteHost: '127.0.0.1', graphitePort: {}, \
           flushInterval: 60000, global: {{ accept: true, maxBatchBytes: 16777216, maxBytesInFlight: {} }} }}",
        carbon.port,
        IN_FLIGHT_MIB << 20
    );
    let daemon = Daemon::start_process("p12-in-flight", &config);
    // 300,000 counters with short keys: 3 MB decompressed, 9.6 MB decoded.
    let batch = |chunk: u64| {
        let mut writer = BatchWriter::new(id("p12", chunk));
        (0..300_000).for_each(|i| writer.counter(&format!("c{i}"), 1.0));
        compress(&writer.finish())
    };
    let bodies: Vec<Vec<u8>> = (0..=16).map(batch).collect();
    assert_eq!(post(&daemon, &bodies[0], "").0, 200, "the keys are the aggregator's before the peak is measured");
    std::fs::write(format!("/proc/{}/clear_refs", daemon.pid()), "5").expect("the peak RSS is reset");
    let before = crate::harness::rss_kib(&daemon);
    let address = daemon.address("http");
    let statuses: Vec<u16> = std::thread::scope(|scope| {
        let posting: Vec<_> = bodies[1..]
            .iter()
            .map(|body| {
                let address = &address;
                scope.spawn(move || http(address, "POST", "/api/v1/forward", body, BATCH_HEADERS).0)
            })
            .collect();
        posting.into_iter().map(|thread| thread.join().unwrap()).collect()
    });
    let held_kib = peak_rss_kib(&daemon).saturating_sub(before);
    assert!(statuses.iter().all(|&status| status == 200 || status == 503), "{statuses:?}");
    assert!(statuses.contains(&200), "{statuses:?}");
    assert!(
        held_kib <= IN_FLIGHT_MIB * 1024,
        "the requests held {} MiB at once with {IN_FLIGHT_MIB} MiB in flight allowed ({statuses:?})",
        held_kib / 1024
    );
    assert!(daemon.terminate());
}

/// N1: a histd that is not a global reads no body: a 250 MiB announcement is answered at once.
#[test]
fn n1_a_histd_that_is_not_a_global_reads_no_body() {
    let daemon = Daemon::start("n1-not-global", "{ address: '127.0.0.1', port: 0, mgmt_port: 0, http_port: 0 }");
    let address = daemon.address("http");
    let started = Instant::now();
    let mut stream = TcpStream::connect(&address).unwrap();
    let head =
        format!("POST /api/v1/forward HTTP/1.1\r\nHost: {address}\r\n{BATCH_HEADERS}Content-Length: 262144000\r\n\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut answer = [0u8; 512];
    let read = stream.read(&mut answer).unwrap();
    let answer = String::from_utf8_lossy(&answer[..read]);
    assert!(answer.starts_with("HTTP/1.1 503") && answer.contains("global.accept"), "{answer}");
    assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
}

/// N2, N6, N7: a forwarded key cannot write a Graphite line of its own; NaN and infinities do
/// not reach carbon; a gauge stamped in the future does not pin the gauge.
#[test]
fn n2_n6_n7_forwarded_batches_are_screened_like_lines() {
    let carbon = Carbon::start();
    let daemon = global("n2-screened", &carbon, "");
    let mut batch = BatchWriter::new(id("web-1", 0));
    batch.counter("fw.inj 1 1\ninjected.evil.metric 666 1600000000\nfw.x", 1.0);
    batch.counter("fw.term\u{1b}]0;pwned\u{7}", 2.0);
    batch.counter("fw.nan", f64::NAN);
    batch.counter("fw.inf", f64::INFINITY);
    batch.counter("fw.ok", 3.0);
    batch.gauge("fw.pinned", 1.0, 1 << 63);
    batch.gauge("fw.gnan", f64::NAN, now_ms() / 1000);
    let (status, answer) = post(&daemon, &compress(&batch.finish()), "");
    assert_eq!(status, 200, "{answer}");
    let flush = carbon.wait_flush(|f| f.get("stats_counts.fw.ok").is_some());
    assert_eq!(flush.get("stats_counts.fw.inj_1_1_injected.evil.metric_666_1600000000_fw.x"), Some("1"));
    assert_eq!(flush.get("stats_counts.fw.term0;pwned"), Some("2"), "the escape gone, its text kept");
    for line in carbon.lines() {
        assert!(!line.starts_with("injected.") && !line.contains('\u{1b}'), "{line:?}");
        assert!(!line.contains("NaN") && !line.contains("Infinity"), "{line:?}");
        assert!(!line.contains("fw.pinned") && !line.contains("fw.gnan"), "{line:?}");
    }
    let mut later = BatchWriter::new(id("web-1", 1));
    later.gauge("fw.pinned", 42.0, now_ms() / 1000);
    assert_eq!(post(&daemon, &compress(&later.finish()), "").0, 200);
    carbon.wait_flush(|f| f.get("stats.gauges.fw.pinned") == Some("42"));
    let stats = daemon.admin("stats");
    for want in [
        "messages.forward_keys_sanitized: 2",
        "messages.forward_refused_non_finite: 3",
        "messages.forward_refused_future_gauges: 1",
    ] {
        assert!(stats.contains(want), "{want} in {stats}");
    }
    // An interval that is no time at all is refused whole, and counted.
    let ancient = BatchId { interval_start_ms: 0, ..id("web-1", 2) };
    let mut batch = BatchWriter::new(ancient);
    batch.counter("fw.ok", 1.0);
    let (status, answer) = post(&daemon, &compress(&batch.finish()), "");
    assert!(status == 400 && answer.contains("interval start"), "{status} {answer}");
    assert_eq!(daemon.stat("messages.forward_refused_intervals"), 1.0);
    assert!(daemon.terminate());
}

/// Token files for the roles: two locals write, a dashboard reads, an operator administers.
fn token_files(dir: &std::path::Path) -> String {
    std::fs::write(dir.join("write.tokens"), "web-1 web-1-token-0123456789\nweb-2 web-2-token-0123456789\n").unwrap();
    std::fs::write(dir.join("read.tokens"), "dash read-token-0123456789\n").unwrap();
    std::fs::write(dir.join("admin.tokens"), "# operators\nops admin-token-0123456789\n").unwrap();
    format!(
        "http: {{ tokens: {{ write: '{0}/write.tokens', read: '{0}/read.tokens', admin: '{0}/admin.tokens' }} }},",
        dir.display()
    )
}

fn bearer(token: &str) -> String {
    format!("Authorization: Bearer {token}\r\n")
}

/// N3, N5: every role needs its token; a batch's identity is bound to the token that sent it,
/// so a forgery under another local's token cannot make the real batch a "duplicate".
#[test]
fn n3_n5_roles_need_their_tokens_and_identities_are_bound_to_them() {
    let carbon = Carbon::start();
    let dir = temp_dir("n3-tokens-files");
    let extra = format!(
        "backends: ['graphite', 'prometheus', 'store'], store: {{ dataDir: '$DIR/data' }}, {}",
        token_files(&dir)
    );
    let daemon = global("n3-tokens", &carbon, &extra);
    let address = daemon.address("http");
    let request = |method: &str, path: &str, headers: &str| http(&address, method, path, b"", headers).0;
    for (method, path) in [("POST", "/-/reload"), ("POST", "/-/clear"), ("DELETE", "/api/v1/series?match=*")] {
        assert_eq!(request(method, path, ""), 401, "{method} {path} without a token");
        assert_eq!(request(method, path, &bearer("read-token-0123456789")), 403, "{method} {path} with a read token");
        assert_eq!(request(method, path, &bearer("web-1-token-0123456789")), 403, "{method} {path} with a write token");
    }
    assert_eq!(request("POST", "/-/clear", &bearer("admin-token-0123456789")), 200);
    assert_eq!(request("GET", "/metrics", ""), 401);
    assert_eq!(request("GET", "/metrics", &bearer("read-token-0123456789")), 200);
    assert_eq!(request("GET", "/health", &bearer("web-2-token-0123456789")), 200, "a local's health check");
    // The forgery: web-2's token, web-1's identity, a wrong value. The real batch still merges.
    let identity = id("web-1", 7);
    let batch = |value: f64| {
        let mut writer = BatchWriter::new(identity.clone());
        writer.counter("orders.placed", value);
        compress(&writer.finish())
    };
    assert_eq!(post(&daemon, &batch(5000.0), "").0, 401, "no token");
    assert_eq!(post(&daemon, &batch(0.001), &bearer("web-2-token-0123456789")).0, 200);
    let (status, answer) = post(&daemon, &batch(5000.0), &bearer("web-1-token-0123456789"));
    assert_eq!((status, answer.contains("\"duplicate\":false")), (200, true), "{answer}");
    let (_, answer) = post(&daemon, &batch(5000.0), &bearer("web-1-token-0123456789"));
    assert!(answer.contains("\"duplicate\":true"), "the real retry is a duplicate of itself: {answer}");
    assert!(eventually(|| carbon
        .flushes()
        .iter()
        .filter_map(|f| f.get("stats_counts.orders.placed"))
        .any(|v| v.parse::<f64>().unwrap() >= 5000.0)));
    assert!(daemon.stat("messages.refused_http_credentials") >= 9.0);
    // histd query (and histd top) send $HISTD_TOKEN.
    let query = |token: Option<&str>| {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_histd"));
        command.args(["query", "count(orders.placed)", "--url", &format!("http://{address}")]);
        command.env_remove("HISTD_TOKEN");
        if let Some(token) = token {
            command.env("HISTD_TOKEN", token);
        }
        command.output().unwrap()
    };
    let refused = query(None);
    assert!(
        !refused.status.success() && String::from_utf8_lossy(&refused.stderr).contains("needs a token"),
        "{refused:?}"
    );
    let answered = query(Some("read-token-0123456789"));
    assert!(answered.status.success(), "{}", String::from_utf8_lossy(&answered.stderr));
    assert!(daemon.terminate());
}

/// N3: a local sends its token from `forward.tokenFile`, with its batches and health checks.
#[test]
fn n3_a_local_forwards_with_its_token() {
    let carbon = Carbon::start();
    let dir = temp_dir("n3-local-files");
    let tokens = token_files(&dir);
    let port = free_port();
    let config = format!(
        "{{ address: '127.0.0.1', port: 0, mgmt_port: 0, http_port: {port}, graphiteHost: '127.0.0.1', graphitePort: {}, \
           flushInterval: 300, global: {{ accept: true }}, {tokens} }}",
        carbon.port
    );
    let global = Daemon::start_process("n3-global", &config);
    std::fs::write(dir.join("local.token"), "web-1-token-0123456789\n").unwrap();
    let local = Daemon::start(
        "n3-local",
        &format!(
            "{{ address: '127.0.0.1', port: 0, mgmt_port: 0, flushInterval: 300, backends: ['forward'], \
               forward: {{ nodes: ['http://127.0.0.1:{port}'], source: 'web-1', tokenFile: '{}' }} }}",
            dir.join("local.token").display()
        ),
    );
    local.send_udp("tok.hits:3|c\n");
    let arrived = eventually(|| carbon.flushes().iter().any(|f| f.get("stats_counts.tok.hits") == Some("3")));
    assert!(arrived, "global: {}\n{}\nlocal: {}", global.admin("stats"), global.stderr(), local.admin("stats"));
    assert_eq!(global.stat("messages.refused_http_credentials"), 0.0);
    drop(local);
    assert!(global.terminate());
}

/// Issue 49, item 6: a token rotated in place in `forward.tokenFile` is sent from the next
/// request on (the file is read again when it changes; no reload, no restart): a local refused
/// with a wrong token sends its kept batch once the file holds the right one.
#[test]
fn a_local_sends_the_token_rotated_in_its_file_from_the_next_request() {
    let carbon = Carbon::start();
    let dir = temp_dir("rotated-token-files");
    let tokens = token_files(&dir);
    let port = free_port();
    let config = format!(
        "{{ address: '127.0.0.1', port: 0, mgmt_port: 0, http_port: {port}, graphiteHost: '127.0.0.1', graphitePort: {}, \
           flushInterval: 300, global: {{ accept: true }}, {tokens} }}",
        carbon.port
    );
    let global = Daemon::start_process("rotated-token-global", &config);
    let token_file = dir.join("local.token");
    std::fs::write(&token_file, "web-1-token-0000000000-wrong\n").unwrap();
    let local = Daemon::start_process(
        "rotated-token-local",
        &format!(
            "{{ address: '127.0.0.1', port: 0, mgmt_port: 0, http_port: 0, flushInterval: 300, backends: ['forward'], \
               forward: {{ nodes: ['http://127.0.0.1:{port}'], source: 'web-1', tokenFile: '{}', checkInterval: 200, \
               spoolDir: '$DIR/spool' }} }}",
            token_file.display()
        ),
    );
    local.send_udp("rotated.hits:3|c\n");
    assert!(eventually(|| global.stat("messages.refused_http_credentials") > 0.0), "the wrong token is refused");
    std::thread::sleep(Duration::from_secs(1));
    let stored = || carbon.flushes().iter().any(|f| f.get("stats_counts.rotated.hits") == Some("3"));
    assert!(!stored(), "refused while the file holds the wrong token");
    // /health says why the sink fails (issue 49, item 5).
    let said = local.http_json("/health")["sink_last_errors"]["forward"].as_str().unwrap_or("").to_string();
    assert!(said.contains("forward.tokenFile"), "{said}");
    std::fs::write(&token_file, "web-1-token-0123456789\n").unwrap();
    assert!(eventually(stored), "global: {}\nlocal: {}", global.stderr(), local.admin("stats"));
    drop(local);
    assert!(global.terminate());
}

/// N4: a web page can neither post a batch, change state, nor read through a rebound name;
/// the page carries a content security policy and cannot be framed.
#[test]
fn n4_browsers_are_kept_out() {
    let carbon = Carbon::start();
    let daemon = global("n4-browsers", &carbon, "backends: ['graphite', 'store'], store: { dataDir: '$DIR/data' },");
    let address = daemon.address("http");
    let mut batch = BatchWriter::new(id("page", 0));
    batch.counter("n4.hits", 1.0);
    let body = compress(&batch.finish());
    let simple = "Content-Type: text/plain\r\nOrigin: http://evil.example\r\n";
    assert_eq!(http(&address, "POST", "/api/v1/forward", &body, simple).0, 403, "cross-origin");
    assert_eq!(
        http(&address, "POST", "/api/v1/forward", &body, "Content-Type: text/plain\r\n").0,
        415,
        "a simple request"
    );
    assert_eq!(post(&daemon, &body, "Sec-Fetch-Site: cross-site\r\n").0, 403);
    assert_eq!(http(&address, "POST", "/-/reload", b"", "Origin: null\r\n").0, 403);
    let rebound = |path: &str| {
        let mut stream = TcpStream::connect(&address).unwrap();
        write!(stream, "GET {path} HTTP/1.0\r\nHost: attacker.example:{}\r\n\r\n", address.rsplit(':').next().unwrap())
            .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        answer
    };
    for path in ["/api/v1/series", "/metrics", "/api/v1/live", "/health", "/"] {
        assert!(rebound(path).starts_with("HTTP/1.0 403"), "{path} through a rebound name");
    }
    let mut stream = TcpStream::connect(&address).unwrap();
    write!(stream, "GET / HTTP/1.0\r\nHost: {address}\r\n\r\n").unwrap();
    let mut page = String::new();
    stream.read_to_string(&mut page).unwrap();
    let head = page.split("\r\n\r\n").next().unwrap().to_ascii_lowercase();
    assert!(
        head.contains("content-security-policy: default-src 'self'") && head.contains("frame-ancestors 'none'"),
        "{head}"
    );
    assert!(head.contains("x-frame-options: deny"), "{head}");
    assert!(daemon.stat("messages.refused_http_hosts") >= 5.0 && daemon.stat("messages.refused_http_origins") >= 3.0);
    assert!(daemon.terminate());
}

/// N12: a body that never arrives is cut at `httpBodyTimeoutMs`, not held for minutes.
#[test]
fn n12_a_silent_body_is_cut_at_the_body_timeout() {
    let carbon = Carbon::start();
    let daemon = global("n12-body", &carbon, "httpBodyTimeoutMs: 500,");
    let address = daemon.address("http");
    let mut stream = TcpStream::connect(&address).unwrap();
    let head =
        format!("POST /api/v1/forward HTTP/1.1\r\nHost: {address}\r\n{BATCH_HEADERS}Content-Length: 1000000\r\n\r\nab");
    stream.write_all(head.as_bytes()).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let started = Instant::now();
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
    assert_eq!(daemon.stat("messages.http_body_timeouts"), 1.0);
    assert!(daemon.terminate());
}

/// N14: management connections that never send a command give their slot back quickly.
#[test]
fn n14_silent_management_connections_give_their_slots_back() {
    let daemon = Daemon::start(
        "n14-mgmt",
        "{ address: '127.0.0.1', port: 0, mgmt_port: 0, mgmtMaxConnections: 2, mgmtFirstCommandTimeoutMs: 300 }",
    );
    let silent: Vec<TcpStream> = (0..2).map(|_| TcpStream::connect(daemon.address("mgmt")).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(800));
    assert!(daemon.admin("health").contains("health: up"), "a slot is free again");
    drop(silent);
    assert!(daemon.stat("messages.idle_closed_connections") >= 2.0);
}

/// N12 (issue 48): clients that drip a forwarded body a byte at a time hold HTTP slots only
/// until someone needs one: with every slot taken by them, `/health` is served, the slowest
/// body displaced (answered 503 and closed: its local sends it again) and counted.
#[test]
fn n12_slow_bodies_give_their_slots_to_real_clients() {
    let carbon = Carbon::start();
    let daemon = global("n12-slots", &carbon, "httpMaxConnections: 4,");
    let address = daemon.address("http");
    let dripping: Vec<TcpStream> = (0..4)
        .map(|_| {
            let mut stream = TcpStream::connect(&address).unwrap();
            let head = format!(
                "POST /api/v1/forward HTTP/1.1\r\nHost: {address}\r\n{BATCH_HEADERS}Content-Length: 1000000\r\n\r\nab"
            );
            stream.write_all(head.as_bytes()).unwrap();
            stream
        })
        .collect();
    std::thread::sleep(Duration::from_millis(1_500));
    for round in 0..3 {
        let (status, _) = http(&address, "GET", "/health", b"", "");
        assert_eq!(status, 200, "round {round}: /health served past the dripping bodies");
    }
    assert!(daemon.stat("messages.idle_closed_connections") >= 1.0, "a dripping body displaced");
    drop(dripping);
    assert!(daemon.terminate());
}

/// Issue 48 (N12's header slowloris): clients that send their request headers a byte at a
/// time held HTTP slots for `httpHeaderTimeoutMs` (10 s), and with every slot taken by them
/// `/health` was refused. A connection still reading its first request's head after a second
/// now gives its slot to a new one (closed and counted in `idle_closed_connections`).
#[test]
fn n12_slow_headers_give_their_slots_to_real_clients() {
    let daemon = Daemon::start(
        "n12-slow-headers",
        "{ address: '127.0.0.1', port: 0, mgmt_port: 0, http_port: 0, httpMaxConnections: 4 }",
    );
    let address = daemon.address("http");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let dripping: Vec<_> = (0..4)
        .map(|_| {
            let (address, stop) = (address.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut stream = TcpStream::connect(&address).unwrap();
                let _ = stream.write_all(format!("GET /health HTTP/1.1\r\nHost: {address}\r\nX-Slow: ").as_bytes());
                for _ in 0..40 {
                    if stop.load(std::sync::atomic::Ordering::Relaxed) || stream.write_all(b"a").is_err() {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(1_500));
    for round in 0..3 {
        let (status, _) = http(&address, "GET", "/health", b"", "");
        assert_eq!(status, 200, "round {round}: /health served past the slow headers");
    }
    assert!(daemon.stat("messages.idle_closed_connections") >= 1.0, "a slow header displaced");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    dripping.into_iter().for_each(|thread| thread.join().unwrap());
}

/// Issue 48, item 6: one address cannot take every HTTP slot. With
/// `httpMaxConnectionsPerAddress: 3`, three silent connections from 127.0.0.1 hold that
/// address's share: a fourth from it is closed at once and counted, while a client at
/// 127.0.0.2 is served; the share comes back when they close.
#[test]
fn one_address_cannot_take_every_http_slot() {
    let daemon = Daemon::start(
        "per-address-cap",
        "{ address: '127.0.0.1', port: 0, mgmt_port: 0, http_port: 0, httpMaxConnections: 8, \
           httpMaxConnectionsPerAddress: 3 }",
    );
    let port: u16 = daemon.address("http").rsplit(':').next().unwrap().parse().unwrap();
    let from = |source: [u8; 4]| {
        let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        socket.bind(&std::net::SocketAddr::from((source, 0)).into()).unwrap();
        socket.connect(&std::net::SocketAddr::from(([127, 0, 0, 1], port)).into()).unwrap();
        TcpStream::from(socket)
    };
    let health = |mut stream: TcpStream| {
        stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let _ = stream.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
        answer
    };
    let silent: Vec<TcpStream> = (0..3).map(|_| from([127, 0, 0, 1])).collect();
    std::thread::sleep(Duration::from_millis(200));
    let refused = health(from([127, 0, 0, 1]));
    assert!(!refused.starts_with("HTTP/1.1 200"), "a fourth from one address: {refused}");
    assert_eq!(daemon.stat("messages.refused_address_connections"), 1.0);
    assert!(health(from([127, 0, 0, 2])).starts_with("HTTP/1.1 200"), "another address is served");
    drop(silent);
    std::thread::sleep(Duration::from_millis(200));
    assert!(health(from([127, 0, 0, 1])).starts_with("HTTP/1.1 200"), "the share came back");
}

/// N14 (issue 48): management connections that send a command and then stay silent (for up
/// to `connectionIdleTimeoutMs`, ten minutes) give their slot to a new connection once they
/// have been silent for `mgmtFirstCommandTimeoutMs`; the one displaced is closed and counted.
#[test]
fn n14_connections_silent_after_a_command_give_their_slots_to_new_ones() {
    let daemon = Daemon::start(
        "n14-after-a-command",
        "{ address: '127.0.0.1', port: 0, mgmt_port: 0, mgmtMaxConnections: 2, mgmtFirstCommandTimeoutMs: 300 }",
    );
    // Read before the slots fill: a reading made later takes a slot itself, and may be the one
    // that displaces.
    let before = daemon.stat("messages.idle_closed_connections");
    std::thread::sleep(Duration::from_millis(300)); // its slot is given back
    let mut quiet: Vec<TcpStream> = (0..2).map(|_| TcpStream::connect(daemon.address("mgmt")).unwrap()).collect();
    for stream in &mut quiet {
        stream.write_all(b"health\n").unwrap();
        let mut answer = [0u8; 64];
        let read = stream.read(&mut answer).unwrap();
        assert!(answer[..read].starts_with(b"health: up"), "{:?}", String::from_utf8_lossy(&answer[..read]));
    }
    std::thread::sleep(Duration::from_millis(600));
    for round in 0..3 {
        assert!(daemon.admin("health").contains("health: up"), "round {round}: a slot was given");
    }
    // The first displaced the oldest silent one (the next may find a slot free or displace
    // the other: the last one's close is seen a moment after it).
    assert!(daemon.stat("messages.idle_closed_connections") >= before + 1.0, "the oldest silent one displaced");
    quiet[0].set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert_eq!(quiet[0].read(&mut [0u8; 8]).unwrap_or(0), 0, "the displaced connection is closed");
}

/// P6 (issue 48): connections that never send a byte, or never start their TLS handshake,
/// hold HTTP slots only until someone needs one: with every slot taken by such connections
/// (300 of them kept HTTPS answering 5 of 40), a real client displaces the one silent longest
/// and is served; the displaced one is closed and counted.
#[test]
fn p6_silent_connections_give_their_slots_to_real_clients() {
    let dir = temp_dir("p6-pki");
    let ca = crate::harness::TestCa::new(&dir, "p6");
    let (cert, key) = ca.server();
    let tls = format!("http: {{ tls: {{ certFile: '{}', keyFile: '{}' }} }},", cert.display(), key.display());
    for (name, tls) in [("p6-plain", ""), ("p6-tls", tls.as_str())] {
        let port = free_port();
        let daemon = Daemon::start(
            name,
            &format!("{{ address: '127.0.0.1', port: 0, mgmt_port: 0, http_port: {port}, httpMaxConnections: 4, {tls} backends: [] }}"),
        );
        let silent: Vec<TcpStream> = (0..4).map(|_| TcpStream::connect(daemon.address("http")).unwrap()).collect();
        std::thread::sleep(Duration::from_millis(1_500));
        let scheme = if tls.is_empty() { "http" } else { "https" };
        for round in 0..3 {
            let status = curl(&ca.cert, &format!("{scheme}://localhost:{port}/health"), &[]);
            assert_eq!(status, 200, "{name}, round {round}: a real client is served");
        }
        assert!(daemon.stat("messages.idle_closed_connections") >= 1.0, "{name}: a silent one displaced");
        drop(silent);
    }
}

/// P7 (issue 48): `/metrics` answers their clients never read hold at most `httpAnswerBytes`
/// together; past it a scrape is answered 503 and counted, and once the readers go a scrape
/// is served again.
#[test]
fn p7_unread_metrics_answers_hold_at_most_their_budget() {
    let daemon = Daemon::start(
        "p7-answers",
        "{ address: '127.0.0.1', port: 0, server: './servers/tcp', mgmt_port: 0, http_port: 0, flushInterval: 300, \
           httpAnswerBytes: 8388608, backends: ['prometheus'] }",
    );
    // Answers larger than what the kernel's socket buffers take (4 MB on loopback): the rest
    // waits in the daemon.
    let lines: String = (0..100_000).map(|i| format!("p7.counter.number.{i:06}:1|c\n")).collect();
    daemon.send_tcp(&lines);
    let size = || daemon.http_get("/metrics").1.len();
    assert!(eventually(|| size() > 5_000_000), "/metrics of 100,000 series: {} bytes", size());
    let address = daemon.address("http");
    // Clients that ask and never read, with a small receive buffer: the daemon holds the rest.
    let unread: Vec<TcpStream> = (0..4)
        .map(|_| {
            let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
            socket.set_recv_buffer_size(4096).unwrap();
            socket.connect(&address.parse::<std::net::SocketAddr>().unwrap().into()).unwrap();
            let mut stream = TcpStream::from(socket);
            write!(stream, "GET /metrics HTTP/1.1\r\nHost: {address}\r\n\r\n").unwrap();
            std::thread::sleep(Duration::from_millis(1500));
            stream
        })
        .collect();
    assert!(daemon.stat("messages.refused_api_answers") >= 1.0, "scrapes past the budget are refused");
    let (status, _) = daemon.http_get("/metrics");
    assert_eq!(status, 503, "the budget is held");
    drop(unread);
    assert!(eventually(|| daemon.http_get("/metrics").0 == 200), "served again once the readers went");
}

/// N3: histd refuses to start with its admin role open on a network address, naming the key.
#[test]
fn n3_an_open_admin_role_on_a_network_address_is_refused_at_start() {
    let path = temp_dir("n3-open").join("config.js");
    std::fs::write(&path, "{ backends: ['store'], http_address: '0.0.0.0' }").unwrap();
    let output =
        std::process::Command::new(env!("CARGO_BIN_EXE_histd")).arg("check-config").arg(&path).output().unwrap();
    let said = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{said}");
    assert!(said.contains("http.openToNetwork") && said.contains("http.tokens.admin"), "{said}");
}

fn as_str(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// `curl` against an HTTPS histd: the status it answered (0: no HTTP answer at all, the
/// handshake refused).
fn curl(ca: &std::path::Path, url: &str, args: &[&str]) -> u16 {
    let output = std::process::Command::new("curl")
        .args(["--silent", "--output", "/dev/null", "--write-out", "%{http_code}", "--max-time", "10", "--cacert"])
        .arg(ca)
        .args(args)
        .arg(url)
        .output()
        .expect("curl runs");
    String::from_utf8_lossy(&output.stdout).trim().parse().unwrap_or(0)
}

/// Issue 34's "done when": a global serving HTTPS, its locals presenting client certificates
/// (mutual TLS) and its admin and read roles behind tokens. The locals' batches merge exactly;
/// no credential, a wrong token, a certificate of another CA and a browser's origin are refused
/// and counted; a forged identity under another local's certificate cannot displace a real batch.
#[test]
fn a_global_with_tls_mtls_and_tokens_merges_its_locals_and_refuses_the_rest() {
    let dir = temp_dir("mtls-pki");
    let fleet = crate::harness::TestCa::new(&dir, "fleet");
    let other = crate::harness::TestCa::new(&dir, "other");
    let (server_cert, server_key) = fleet.server();
    let (web1_cert, web1_key) = fleet.client("web-1");
    let (web2_cert, web2_key) = fleet.client("web-2");
    let (forged_cert, forged_key) = other.client("web-1");
    std::fs::write(dir.join("admin.tokens"), "ops admin-token-0123456789\n").unwrap();
    std::fs::write(dir.join("read.tokens"), "dash read-token-0123456789\n").unwrap();
    let carbon = Carbon::start();
    let port = free_port();
    let path = |p: &std::path::Path| p.display().to_string();
    let global = Daemon::start_process(
        "mtls-global",
        &format!(
            "{{ address: '127.0.0.1', port: 0, mgmt_port: 0, http_port: {port}, graphiteHost: '127.0.0.1', graphitePort: {}, \
               flushInterval: 300, global: {{ accept: true }}, \
               http: {{ tls: {{ certFile: '{}', keyFile: '{}', clientCAFile: '{}', clientCertRoles: ['write'] }}, \
                        tokens: {{ admin: '{}', read: '{}' }} }} }}",
            carbon.port,
            path(&server_cert),
            path(&server_key),
            path(&fleet.cert),
            path(&dir.join("admin.tokens")),
            path(&dir.join("read.tokens")),
        ),
    );
    let local = |name: &str, cert: &std::path::Path, key: &std::path::Path| {
        Daemon::start(
            &format!("mtls-{name}"),
            &format!(
                "{{ address: '127.0.0.1', port: 0, server: './servers/tcp', mgmt_port: 0, flushInterval: 300, \
                   backends: ['forward'], forward: {{ nodes: ['https://127.0.0.1:{port}'], source: '{name}', \
                               tls: {{ caFile: '{}', certFile: '{}', keyFile: '{}' }} }} }}",
                path(&fleet.cert),
                path(cert),
                path(key)
            ),
        )
    };
    let locals = [local("web-1", &web1_cert, &web1_key), local("web-2", &web2_cert, &web2_key)];
    for round in 0..5 {
        for (index, local) in locals.iter().enumerate() {
            let values: String = (1..=20).map(|v| format!("mtls.latency:{}|ms\n", v * (index + 1) + round)).collect();
            local.send_tcp(&format!("mtls.hits:3|c\n{values}"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let total = |name: &str| carbon.total(name);
    assert!(
        eventually(|| total("stats_counts.mtls.hits") == 30.0 && total("stats.timers.mtls.latency.count") == 200.0),
        "hits {} of 30, timer values {} of 200; global: {}",
        total("stats_counts.mtls.hits"),
        total("stats.timers.mtls.latency.count"),
        global.stderr()
    );
    let url = |route: &str| format!("https://127.0.0.1:{port}{route}");
    let client = |cert: &std::path::Path, key: &std::path::Path| vec![path(cert), path(key)];
    let with_cert = |cert: &[String], extra: &[&str]| -> Vec<String> {
        let mut args = vec!["--cert".to_string(), cert[0].clone(), "--key".to_string(), cert[1].clone()];
        args.extend(extra.iter().map(|s| s.to_string()));
        args
    };
    let web1 = client(&web1_cert, &web1_key);
    let web2 = client(&web2_cert, &web2_key);
    let forged = client(&forged_cert, &forged_key);
    let batch_file = |name: &str, value: f64, identity: &BatchId| {
        let mut writer = BatchWriter::new(identity.clone());
        writer.counter("mtls.orders", value);
        let file = dir.join(name);
        std::fs::write(&file, compress(&writer.finish())).unwrap();
        format!("@{}", file.display())
    };
    let identity = id("web-1", 99);
    let forgery = batch_file("forgery.batch", 0.001, &identity);
    let real = batch_file("real.batch", 5000.0, &identity);
    let post_batch = |body: &str| -> Vec<String> {
        [
            "-X",
            "POST",
            "-H",
            "Content-Type: application/x-histd-forward",
            "-H",
            "Content-Encoding: snappy",
            "--data-binary",
            body,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    // No credential at all: TLS without a client certificate, no token.
    assert_eq!(curl(&fleet.cert, &url("/api/v1/forward"), &as_str(&post_batch(&real))), 401);
    assert_eq!(curl(&fleet.cert, &url("/api/v1/query?expr=count(x)"), &[]), 401);
    // A wrong token; the right ones.
    assert_eq!(
        curl(&fleet.cert, &url("/-/reload"), &["-X", "POST", "-H", "Authorization: Bearer not-the-admin-token"]),
        403
    );
    assert_eq!(curl(&fleet.cert, &url("/metrics"), &["-H", "Authorization: Bearer read-token-0123456789"]), 200);
    // A certificate of another CA: the handshake is refused.
    assert_eq!(curl(&fleet.cert, &url("/health"), &as_str(&with_cert(&forged, &[]))), 0);
    // A browser's origin, even with a good certificate.
    let from_page = with_cert(&web1, &["-H", "Origin: http://evil.example"]);
    let mut from_page = from_page;
    from_page.extend(post_batch(&real));
    assert_eq!(curl(&fleet.cert, &url("/api/v1/forward"), &as_str(&from_page)), 403);
    // The forgery first, under web-2's certificate; the real batch still merges.
    let mut forge = with_cert(&web2, &[]);
    forge.extend(post_batch(&forgery));
    assert_eq!(curl(&fleet.cert, &url("/api/v1/forward"), &as_str(&forge)), 200);
    let mut genuine = with_cert(&web1, &[]);
    genuine.extend(post_batch(&real));
    assert_eq!(curl(&fleet.cert, &url("/api/v1/forward"), &as_str(&genuine)), 200);
    assert!(
        eventually(|| total("stats_counts.mtls.orders") >= 5000.0),
        "the real batch merged: {}",
        total("stats_counts.mtls.orders")
    );
    assert!(global.stat("messages.http_tls_failures") >= 1.0);
    assert!(global.stat("messages.refused_http_credentials") >= 3.0);
    assert!(global.stat("messages.refused_http_origins") >= 1.0);
    drop(locals);
    assert!(global.terminate());
}

/// Issue 34, item 6: a listener's `allow` networks: datagrams and connections from elsewhere
/// are dropped and counted; a reload changes the list of a running listener in place.
#[test]
fn ingest_allowlists_drop_and_count_other_sources_and_reload_in_place() {
    let carbon = Carbon::start();
    let config = |udp_allow: &str| {
        format!(
            "{{ servers: [ {{ server: 'udp', address: '127.0.0.1', port: 0, allow: [{udp_allow}] }}, \
                          {{ server: 'tcp', address: '127.0.0.1', port: 0, allow: ['127.0.0.0/8'] }} ], \
               mgmt_port: 0, http_port: 0, graphiteHost: '127.0.0.1', graphitePort: {}, flushInterval: 200 }}",
            carbon.port
        )
    };
    let daemon = Daemon::start_process("allowlists", &config("'10.0.0.0/8', '::1'"));
    for _ in 0..5 {
        daemon.send_udp("allow.udp:1|c\n");
    }
    daemon.send_tcp("allow.tcp:1|c\n");
    carbon.wait_flush(|f| f.get("stats_counts.allow.tcp") == Some("1"));
    assert!(eventually(|| daemon.stat("messages.refused_ingest_datagrams") == 5.0), "{}", daemon.admin("stats"));
    assert!(carbon.lines().iter().all(|line| !line.contains("allow.udp")), "nothing from outside the list");
    // The list changes in place: the same socket now takes 127.0.0.1.
    std::fs::write(daemon.dir.join("config.js"), config("'127.0.0.1/32'")).unwrap();
    let (status, body) = http(&daemon.address("http"), "POST", "/-/reload", b"", "");
    assert!(status == 200 && body.contains("sources allowed"), "{status} {body}");
    daemon.send_udp("allow.udp:1|c\n");
    carbon.wait_flush(|f| f.get("stats_counts.allow.udp") == Some("1"));
    // A connection from outside the TCP listener's networks is closed unread.
    std::fs::write(
        daemon.dir.join("config.js"),
        config("'127.0.0.1/32'").replace("allow: ['127.0.0.0/8']", "allow: ['192.0.2.0/24']"),
    )
    .unwrap();
    assert_eq!(http(&daemon.address("http"), "POST", "/-/reload", b"", "").0, 200);
    daemon.send_tcp("allow.tcp:1|c\n");
    assert!(eventually(|| daemon.stat("messages.refused_ingest_connections") == 1.0));
    assert!(daemon.terminate());
}

/// N13: big listings at once gave their memory back to nobody (gigabytes stayed resident at
/// 100k series). Here 30,000 series listed 16 times at once: what the answers took is given
/// back by the next flushes (bench/listing-memory.sh measures the 100k case, before and after).
#[test]
fn n13_memory_of_big_answers_is_given_back() {
    let daemon = Daemon::start_process(
        "n13-listings",
        "{ address: '127.0.0.1', port: 0, server: './servers/tcp', mgmt_port: 0, http_port: 0, flushInterval: 300, \
           backends: ['store'], store: { dataDir: '$DIR/data' } }",
    );
    let lines: String = (0..30_000).map(|i| format!("n13.series.{i:05}:1|c\n")).collect();
    daemon.send_tcp(&lines);
    let stored = || daemon.http_json("/api/v1/series?match=n13.*&limit=1")["total"].as_u64().unwrap_or(0);
    assert!(eventually(|| stored() == 30_000), "{} of 30000 series stored", stored());
    std::thread::sleep(Duration::from_secs(1));
    let before = crate::harness::rss_kib(&daemon);
    let address = daemon.address("http");
    let listings: Vec<_> = (0..16)
        .map(|_| {
            let address = address.clone();
            std::thread::spawn(move || {
                // Slow on a debug build with 24 in line for the store: a long read timeout.
                let mut stream = TcpStream::connect(&address).unwrap();
                stream.set_read_timeout(Some(Duration::from_secs(180))).unwrap();
                write!(stream, "GET /api/v1/series?limit=100000 HTTP/1.0\r\nHost: {address}\r\n\r\n").unwrap();
                let mut answer = Vec::new();
                stream.read_to_end(&mut answer).unwrap();
                answer.len()
            })
        })
        .collect();
    let sizes: Vec<usize> = listings.into_iter().map(|listing| listing.join().unwrap()).collect();
    assert!(sizes.iter().all(|&size| size > 1_000_000), "every listing answered whole: {sizes:?}");
    let peak = crate::harness::peak_rss_kib(&daemon);
    let back = eventually(|| crate::harness::rss_kib(&daemon) < before + 40 * 1024);
    assert!(back, "RSS {before} KiB before, {peak} KiB at the peak, {} KiB after", crate::harness::rss_kib(&daemon));
    assert!(daemon.terminate());
}

/// N9 (issue 36): a spooled batch damaged on disk is never sent. A local spools five flushes
/// of 1,000 while its global is down; one bit of one file is flipped; when the global comes
/// up it receives exactly the 4,000 of the four whole files (the probe saw 16,000 for 1,000),
/// and the local counts the damaged one in `forward.dropped_points.corrupt`.
#[test]
fn n9_a_damaged_spool_file_is_never_sent() {
    let dir = temp_dir("n9-spool");
    let spool = dir.join("spool");
    let port = free_port();
    let local_config = format!(
        "{{ address: '127.0.0.1', port: 0, mgmt_port: 0, flushInterval: 200, backends: ['forward'], \
           forward: {{ nodes: ['http://127.0.0.1:{port}'], source: 'web-9', checkInterval: 200, spoolDir: '{}' }} }}",
        spool.display()
    );
    let batch_files = || {
        std::fs::read_dir(&spool).map_or(Vec::new(), |entries| {
            let mut files: Vec<_> = entries
                .flatten()
                .map(|entry| entry.path())
                .filter(|path| path.extension().is_some_and(|e| e == "batch"))
                .collect();
            files.sort();
            files
        })
    };
    let local = Daemon::start_process("n9-local", &local_config);
    for round in 1..=5 {
        local.send_udp("n9.hits:1000|c\n");
        assert!(eventually(|| batch_files().len() >= round), "flush {round} spooled: {:?}", batch_files());
    }
    assert!(local.terminate());
    let files = batch_files();
    assert_eq!(files.len(), 5, "{files:?}");
    let mut damaged = std::fs::read(&files[2]).unwrap();
    let at = damaged.len() - 12; // in the compressed batch, before the checksum trailer
    damaged[at] ^= 0x08;
    std::fs::write(&files[2], damaged).unwrap();

    let carbon = Carbon::start();
    let global = Daemon::start_process(
        "n9-global",
        &format!(
            "{{ address: '127.0.0.1', port: 0, mgmt_port: 0, http_port: {port}, graphiteHost: '127.0.0.1', \
               graphitePort: {}, flushInterval: 200, global: {{ accept: true }} }}",
            carbon.port
        ),
    );
    let local = Daemon::start_process("n9-local-again", &local_config);
    let total = || carbon.total("stats_counts.n9.hits");
    assert!(eventually(|| batch_files().is_empty()), "the whole files sent: {:?}", batch_files());
    assert!(eventually(|| total() >= 4000.0), "arrived {}", total());
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(total(), 4000.0, "exactly the four whole batches, never a damaged value");
    assert_eq!(local.stat("forward.dropped_points.corrupt"), 1.0, "its one series counted");
    assert!(spool.join(files[2].file_name().unwrap()).with_extension("corrupt").exists());
    assert!(local.terminate());
    assert!(global.terminate());
}

/// N8 (issue 36): a spool directory that cannot take batches (the probe filled its disk; here
/// a file stands where the directory was) does not stop forwarding while a global answers:
/// every flush arrives, counted in `forward.errors`, and nothing half-written is left.
#[test]
fn n8_an_unwritable_spool_does_not_stop_forwarding() {
    let carbon = Carbon::start();
    let port = free_port();
    let global = Daemon::start_process(
        "n8-global",
        &format!(
            "{{ address: '127.0.0.1', port: 0, mgmt_port: 0, http_port: {port}, graphiteHost: '127.0.0.1', \
               graphitePort: {}, flushInterval: 200, global: {{ accept: true }} }}",
            carbon.port
        ),
    );
    let spool = temp_dir("n8-spool").join("spool");
    let local = Daemon::start(
        "n8-local",
        &format!(
            "{{ address: '127.0.0.1', port: 0, mgmt_port: 0, flushInterval: 200, backends: ['forward'], \
               forward: {{ nodes: ['http://127.0.0.1:{port}'], source: 'web-8', checkInterval: 200, spoolDir: '{}' }} }}",
            spool.display()
        ),
    );
    let total = || carbon.total("stats_counts.n8.hits");
    local.send_udp("n8.hits:100|c\n");
    assert!(eventually(|| total() >= 100.0), "the first flush, spooled then sent");
    std::fs::rename(&spool, spool.with_extension("moved")).unwrap();
    std::fs::write(&spool, b"not a directory: every write to the spool fails").unwrap();
    for _ in 0..5 {
        local.send_udp("n8.hits:100|c\n");
        std::thread::sleep(Duration::from_millis(250));
    }
    assert!(eventually(|| total() >= 600.0), "every flush arrived: {}", total());
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(total(), 600.0);
    assert!(local.stat("forward.errors") >= 1.0, "the spool's failures counted");
    assert_eq!(local.stat("forward.dropped_points.buffer_full"), 0.0);
    std::fs::remove_file(&spool).unwrap();
    std::fs::rename(spool.with_extension("moved"), &spool).unwrap();
    let leftovers: Vec<_> = std::fs::read_dir(&spool).unwrap().flatten().map(|e| e.file_name()).collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    assert!(local.terminate());
    assert!(global.terminate());
}

/// A local whose global takes its request and never answers (up to `forward.timeoutMs`)
/// spools the flushes that come meanwhile to disk, not to the backend's queue in memory:
/// SIGKILLed then, it sends every one of them to a live global after its restart.
#[test]
fn flushes_that_come_while_a_request_hangs_are_spooled_to_disk() {
    let hanging = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let hanging_port = hanging.local_addr().unwrap().port();
    hanging.set_nonblocking(true).unwrap();
    let held = std::thread::spawn(move || {
        // Takes connections and holds them, reading nothing, for at most 60 s.
        let started = std::time::Instant::now();
        let mut open = Vec::new();
        while started.elapsed() < Duration::from_secs(60) && open.len() < 16 {
            if let Ok((stream, _)) = hanging.accept() {
                open.push(stream);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    let spool = temp_dir("hang-spool").join("spool");
    let config = |address: &str| {
        format!(
            "{{ address: '127.0.0.1', port: 0, server: './servers/tcp', mgmt_port: 0, flushInterval: 200, backends: ['forward'], \
               forward: {{ nodes: ['http://{address}'], source: 'hang', checkInterval: 60000, timeoutMs: 30000, spoolDir: '{}' }} }}",
            spool.display()
        )
    };
    let local = Daemon::start_process("hang-local", &config(&format!("127.0.0.1:{hanging_port}")));
    for round in 1..=3 {
        local.send_tcp(&"hang.hits:10|c\n".repeat(round));
        let spooled = eventually(|| spooled_batches(&spool) >= round);
        assert!(spooled, "flush {round} spooled while the first request hangs: {} files", spooled_batches(&spool));
    }
    local.kill();
    let carbon = Carbon::start();
    let global = global("hang-global", &carbon, "");
    let restarted = Daemon::start_process("hang-local-2", &config(&global.address("http")));
    let total = || carbon.total("stats_counts.hang.hits");
    assert!(eventually(|| total() >= 60.0), "every flush arrived after the restart: {}", total());
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(total(), 60.0);
    assert!(restarted.terminate());
    assert!(global.terminate());
    drop(held);
}

/// N10 (issue 36): a flipped bit in a stored block no longer fails every query of its group:
/// the block is left out of the answer (200), the other groups are served, and it is logged
/// and counted once (`messages.store_corrupt_blocks`) and named in `/health`. The damaged
/// block holds an idle timer, alone in its group (`deleteIdleStats`; histd's own series are
/// counters and gauges), so no write replaces it while the test reads.
#[test]
fn n10_a_damaged_store_block_is_left_out_not_a_failure() {
    let dir = temp_dir("n10-store");
    let daemon = Daemon::start(
        "n10-store",
        &format!(
            "{{ address: '127.0.0.1', port: 0, mgmt_port: 0, http_port: 0, flushInterval: 200, backends: ['store'], \
               deleteIdleStats: true, store: {{ dataDir: '{}' }} }}",
            dir.display()
        ),
    );
    let count = |daemon: &Daemon, name: &str| -> (u16, f64) {
        let (status, body) = daemon.http_get(&format!("/api/v1/query?expr=count({name})&step=3600"));
        (status, points_total(&body))
    };
    for round in 1..=3 {
        daemon.send_udp("n10.latency:5|ms\nn10.hits:1000|c\n");
        assert!(eventually(|| count(&daemon, "n10.hits").1 >= 1000.0 * round as f64), "flush {round} stored");
    }
    assert!(eventually(|| count(&daemon, "n10.latency").1 == 3.0));
    std::thread::sleep(Duration::from_millis(800)); // idle: deleted from the flushes
    flip_a_bit_in_the_first_block(&dir.join("histd.db"), Some("n10.latency"), 0x20);
    let (status, samples) = count(&daemon, "n10.latency");
    assert_eq!(status, 200, "not a failure");
    assert!(samples < 3.0, "the damaged block's rows are left out: {samples}");
    assert_eq!(count(&daemon, "n10.hits"), (200, 3000.0), "the other groups are served");
    assert_eq!(count(&daemon, "n10.latency").0, 200);
    assert_eq!(daemon.stat("messages.store_corrupt_blocks"), 1.0, "counted once, whatever the queries");
    let health = daemon.http_json("/health");
    let named = &health["store_corrupt_blocks"][0];
    assert_eq!(
        (named["resolution"].as_str(), named["reason"].as_str().map(|r| r.contains("checksum"))),
        (Some("raw"), Some(true)),
        "{health}"
    );
    assert!(daemon.terminate());
}

/// P10 (issue 48): a block moved into another group's row passed its checksum, and its
/// points vanished uncounted (`histd scrub`: 0 damaged). A block's checksum now covers its
/// place (resolution, group, start, span): scrub finds the moved block and exits 1.
#[test]
fn p10_a_block_moved_into_another_groups_row_is_found_damaged() {
    let dir = temp_dir("p10-store");
    let daemon = Daemon::start(
        "p10-store",
        &format!(
            "{{ address: '127.0.0.1', port: 0, mgmt_port: 0, http_port: 0, flushInterval: 200, server: './servers/tcp', \
               backends: ['store'], store: {{ dataDir: '{}' }} }}",
            dir.display()
        ),
    );
    let lines: String = (0..2000).map(|i| format!("p10.series.{i}:1|c\n")).collect();
    daemon.send_tcp(&lines);
    let stored = || daemon.http_json("/api/v1/series?match=p10.*&limit=1")["total"].as_u64().unwrap_or(0);
    assert!(eventually(|| stored() == 2000), "{} of 2000 series stored", stored());
    drop(daemon);
    let database = rusqlite::Connection::open(dir.join("histd.db")).unwrap();
    let (from, to): (Vec<u8>, i64) = database
        .query_row(
            "SELECT a.data, b.rowid FROM blocks a JOIN blocks b ON a.resolution = b.resolution \
             AND a.start = b.start AND a.span = b.span AND a.grp < b.grp LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("two groups' blocks of one start");
    database.execute("UPDATE blocks SET data = ?1 WHERE rowid = ?2", rusqlite::params![from, to]).unwrap();
    drop(database);
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_histd"))
        .args(["scrub", "--data-dir"])
        .arg(&dir)
        .output()
        .unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert_eq!(output.status.code(), Some(1), "{said}");
    assert!(said.contains("moved from its row"), "{said}");
}

/// P17 (issue 48): a backup that cannot be written whole (the disk full: here a file size
/// limit, writes past it failing with EFBIG) exits 1 and leaves neither the backup nor an empty
/// `DEST.partial` behind.
#[test]
fn p17_a_backup_onto_a_full_disk_leaves_nothing_behind() {
    let dir = temp_dir("p17-store");
    let daemon = Daemon::start(
        "p17-store",
        &format!(
            "{{ address: '127.0.0.1', port: 0, mgmt_port: 0, http_port: 0, flushInterval: 200, server: './servers/tcp', backends: ['store'], \
               store: {{ dataDir: '{}' }} }}",
            dir.display()
        ),
    );
    let lines: String = (0..2000).map(|i| format!("p17.series.{i}:1|c\n")).collect();
    daemon.send_tcp(&lines);
    let stored = || daemon.http_json("/api/v1/series?match=p17.*&limit=1")["total"].as_u64().unwrap_or(0);
    assert!(eventually(|| stored() == 2000), "{} of 2000 series stored", stored());
    let backup = temp_dir("p17-copy").join("histd-backup.db");
    let output = std::process::Command::new("sh")
        .args(["-c", "trap '' XFSZ; ulimit -f 64 && exec \"$0\" \"$@\"", env!("CARGO_BIN_EXE_histd"), "backup"])
        .arg(&backup)
        .arg("--data-dir")
        .arg(&dir)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{said}");
    assert!(said.contains("cannot write the backup"), "{said}");
    let partial = backup.with_file_name("histd-backup.db.partial");
    assert!(!backup.exists() && !partial.exists(), "nothing left behind: {said}");
}

/// P17 (issue 48): a spooled batch file damaged so badly its header says nothing (emptied, or
/// its series count gone) was set aside and counted as no lost series at all: each damaged file
/// now counts in `forward.corrupt_batches` too, whatever its header still says.
#[test]
fn p17_every_damaged_spool_file_is_counted_even_when_its_header_is_gone() {
    let spool = temp_dir("p17-spool").join("spool");
    std::fs::create_dir_all(&spool).unwrap();
    std::fs::write(spool.join("0000000000000001.batch"), b"").unwrap();
    std::fs::write(spool.join("0000000000000002.batch"), b"HSTD\xff garbage that is no batch").unwrap();
    let closed = crate::harness::free_port();
    let daemon = Daemon::start(
        "p17-spool",
        &format!(
            "{{ address: '127.0.0.1', port: 0, mgmt_port: 0, http_port: 0, flushInterval: 200, backends: ['forward'], \
               forward: {{ nodes: ['http://127.0.0.1:{closed}'], spoolDir: '{}' }} }}",
            spool.display()
        ),
    );
    let health = daemon.http_json("/health");
    assert_eq!(health["sinks"]["forward"]["corrupt_batches"], 2.0, "{}", health["sinks"]);
    assert_eq!(daemon.stat("forward.corrupt_batches"), 2.0);
    let set_aside = std::fs::read_dir(&spool)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().extension() == Some("corrupt".as_ref()));
    assert_eq!(set_aside.count(), 2);
}

/// P16 (issue 48): a timer past its sample limit given one value in each of many decades
/// keeps them in its histogram (10 bytes a bin), not in a decade's 720-byte counts: 600 timers
/// given one value in each of 254 decades grow the daemon by 1-2 MB, where they took 26 MB
/// (the probe's 170 MB for 1,000 timers: 702 bytes a timer-decade).
#[test]
fn p16_one_value_per_decade_costs_a_bin_not_a_decade() {
    const TIMERS: usize = 600;
    let daemon = Daemon::start_process(
        "p16-decades",
        "{ address: '127.0.0.1', port: 0, mgmt_port: 0, http_port: 0, server: './servers/tcp', \
           flushInterval: 600000, timerSampleLimit: 16, backends: [] }",
    );
    let past_the_limit: String = (0..TIMERS).map(|t| format!("p16.t{t}{}|ms\n", ":1.5".repeat(20))).collect();
    daemon.send_tcp(&past_the_limit);
    daemon.wait_received(TIMERS as u64);
    let before = crate::harness::rss_kib(&daemon);
    let decades: String = (-127..127).map(|e| format!(":1.5e{e}")).collect();
    let scattered: String = (0..TIMERS).map(|t| format!("p16.t{t}{decades}|ms\n")).collect();
    daemon.send_tcp(&scattered);
    daemon.wait_received(TIMERS as u64 * 2);
    let grown_kib = crate::harness::rss_kib(&daemon).saturating_sub(before);
    assert!(grown_kib < 4 * 1024, "{TIMERS} timers × 254 decades grew the daemon by {} KiB", grown_kib);
    assert!(daemon.terminate());
}

/// P8 (issue 48): sums past the largest double reach Graphite as the largest double with
/// their sign, never `Infinity` or `NaN` (which carbon stores and no later value mends).
#[test]
fn p8_overflowing_sums_reach_graphite_as_numbers() {
    let carbon = Carbon::start();
    let daemon = Daemon::start("p8-overflow", &crate::harness::config(&carbon, 300, ""));
    daemon.send_udp(
        "ovf.c:1.7e308|c\novf.c:1.7e308|c\novf.t:1.7e308|ms\novf.t:1.7e308|ms\novf.h:-1.7e308|h\novf.h:1.7e308|h",
    );
    let flush = carbon
        .wait_flush(|flush| flush.get("stats_counts.ovf.c").is_some() && flush.get("stats.timers.ovf.t.sum").is_some());
    let ovf: Vec<&String> = flush.lines.iter().filter(|line| line.contains(".ovf.")).collect();
    for line in &ovf {
        let value = line.split_whitespace().nth(1).unwrap_or_default();
        assert!(value.parse::<f64>().is_ok_and(f64::is_finite), "not a finite number: {line}");
    }
    assert_eq!(flush.get("stats_counts.ovf.c").map(|v| v.parse::<f64>().unwrap()), Some(f64::MAX));
    assert_eq!(flush.get("stats.timers.ovf.t.sum").map(|v| v.parse::<f64>().unwrap()), Some(f64::MAX));
    assert!(ovf.len() > 10, "{ovf:?}");
}

/// P9 (issue 48): `histd scrub` exits 1 (damage) for a store file it cannot read at all (a
/// monitor keyed on the code took it for "no store"), 2 only when there is no store file.
#[test]
fn p9_scrub_says_damaged_for_a_file_it_cannot_read_and_no_store_only_for_none() {
    let dir = temp_dir("p9-scrub");
    let scrub = || {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_histd"))
            .args(["scrub", "--data-dir"])
            .arg(&dir)
            .output()
            .unwrap();
        (output.status.code(), String::from_utf8_lossy(&output.stderr).into_owned())
    };
    let (code, said) = scrub();
    assert_eq!(code, Some(2), "{said}");
    assert!(said.contains("no store"), "{said}");
    let random: Vec<u8> = (0..65_536u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    std::fs::write(dir.join("histd.db"), random).unwrap();
    let (code, said) = scrub();
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("damaged"), "{said}");
}

/// Issue 36: a running daemon's store is copied without stopping it (`histd backup`), the copy
/// scrubs clean and restores into another directory with every point (`histd query
/// --data-dir`); `histd scrub` lists a damaged block and exits 1; `histd restore` refuses a
/// directory a daemon holds, and a damaged backup.
#[test]
fn backups_are_consistent_scrub_finds_damage_and_restore_puts_a_store_back() {
    let binary = env!("CARGO_BIN_EXE_histd");
    let dir = temp_dir("backup-store");
    let daemon = Daemon::start(
        "backup-store",
        &format!(
            "{{ address: '127.0.0.1', port: 0, mgmt_port: 0, http_port: 0, flushInterval: 200, backends: ['store'], \
               store: {{ dataDir: '{}' }} }}",
            dir.display()
        ),
    );
    let stored = |daemon: &Daemon| points_total(&daemon.http_get("/api/v1/query?expr=count(bk.hits)&step=3600").1);
    for round in 1..=3 {
        daemon.send_udp("bk.hits:500|c\n");
        assert!(eventually(|| stored(&daemon) >= 500.0 * round as f64), "flush {round} stored");
    }
    let run = |args: &[&str]| std::process::Command::new(binary).args(args).output().unwrap();
    let backup = temp_dir("backup-copy").join("histd-backup.db");
    let made = run(&["backup", backup.to_str().unwrap(), "--data-dir", dir.to_str().unwrap()]);
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    daemon.send_udp("bk.hits:500|c\n"); // the daemon went on writing meanwhile
    assert!(eventually(|| stored(&daemon) >= 2000.0));

    let refused = run(&["restore", backup.to_str().unwrap(), "--data-dir", dir.to_str().unwrap()]);
    assert!(!refused.status.success(), "a directory a daemon holds is not restored into");
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("in use"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );

    let restored = temp_dir("backup-restored");
    let put = run(&["restore", backup.to_str().unwrap(), "--data-dir", restored.to_str().unwrap()]);
    assert!(put.status.success(), "{}", String::from_utf8_lossy(&put.stderr));
    let scrubbed = run(&["scrub", "--data-dir", restored.to_str().unwrap()]);
    assert!(scrubbed.status.success(), "{}", String::from_utf8_lossy(&scrubbed.stdout));
    let query = run(&[
        "query",
        "--data-dir",
        restored.to_str().unwrap(),
        "--from",
        "-1h",
        "--step",
        "1h",
        "--format",
        "json",
        "count(bk.hits)",
    ]);
    let total = points_total(&String::from_utf8_lossy(&query.stdout));
    assert_eq!(total, 1500.0, "the three flushes before the backup: {}", String::from_utf8_lossy(&query.stdout));

    flip_a_bit_in_the_first_block(&restored.join("histd.db"), None, 0x01);
    let found = run(&["scrub", "--data-dir", restored.to_str().unwrap()]);
    assert_eq!(found.status.code(), Some(1));
    let listed = String::from_utf8_lossy(&found.stdout);
    assert!(listed.contains("damaged block") && listed.contains("checksum"), "{listed}");
    let again = run(&[
        "restore",
        restored.join("histd.db").to_str().unwrap(),
        "--data-dir",
        temp_dir("backup-again").to_str().unwrap(),
    ]);
    assert!(!again.status.success(), "a damaged backup is not restored");
    assert!(daemon.terminate());
}

/// Issue 50: a backup can be taken of a store with damage. A block of a running daemon's store
/// damaged (its bytes changed behind the daemon's back): `histd backup` writes a copy of every
/// intact block, names the one it left out, and exits 3; the copy scrubs clean, restores into
/// a fresh directory, and answers exactly what the daemon answers (which leaves the damaged
/// block out too). A store whose first page is damaged is backed up the same way.
#[test]
fn a_backup_of_a_store_with_damage_holds_every_intact_point() {
    let binary = env!("CARGO_BIN_EXE_histd");
    let dir = temp_dir("backup-damaged");
    let daemon = Daemon::start(
        "backup-damaged",
        &format!(
            "{{ address: '127.0.0.1', port: 0, mgmt_port: 0, http_port: 0, flushInterval: 200, backends: ['store'], \
               deleteIdleStats: true, store: {{ dataDir: '{}' }} }}",
            dir.display()
        ),
    );
    let asked = "/api/v1/query?expr=count(bkd.hits)&step=3600";
    for round in 1..=4 {
        daemon.send_udp("bkd.hits:500|c\n");
        assert!(eventually(|| points_total(&daemon.http_get(asked).1) >= 500.0 * round as f64), "flush {round}");
    }
    // The counter is idle now (deleteIdleStats): nothing writes its blocks again.
    std::thread::sleep(Duration::from_millis(800));
    flip_a_bit_in_the_first_block(&dir.join("histd.db"), Some("bkd.hits"), 0x04);
    let live = points_total(&daemon.http_get(asked).1);
    assert!(live < 2000.0, "the daemon leaves the damaged block out: {live}");
    // The read that met it put it in the store's record of damage, shown by /health.
    assert!(
        eventually(|| daemon.stat("store.store_damage_unacknowledged") == 1.0),
        "recorded: {}",
        daemon.admin("stats")
    );
    let health = daemon.http_get("/health").1;
    assert!(health.contains("\"store_damage_record\":[\"damaged block: Raw resolution"), "{health}");

    let run = |args: &[&str]| std::process::Command::new(binary).args(args).output().unwrap();
    let copies = temp_dir("backup-damaged-copy");
    let backup = copies.join("histd-backup.db");
    let made = run(&["backup", backup.to_str().unwrap(), "--data-dir", dir.to_str().unwrap()]);
    let said = String::from_utf8_lossy(&made.stdout).into_owned();
    assert_eq!(made.status.code(), Some(3), "{said}{}", String::from_utf8_lossy(&made.stderr));
    assert!(said.contains("left out: damaged block") && said.contains("checksum"), "{said}");
    assert!(said.contains("1 damaged blocks"), "{said}");
    let restored = temp_dir("backup-damaged-restored");
    let put = run(&["restore", backup.to_str().unwrap(), "--data-dir", restored.to_str().unwrap()]);
    assert!(put.status.success(), "{}", String::from_utf8_lossy(&put.stderr));
    // The running store: the block is damaged now, and recorded.
    let scrubbed = run(&["scrub", "--data-dir", dir.to_str().unwrap()]);
    let said = String::from_utf8_lossy(&scrubbed.stdout).into_owned();
    assert_eq!(scrubbed.status.code(), Some(1), "{said}");
    assert!(said.contains("\ndamaged block:") || said.starts_with("damaged block:"), "{said}");
    assert!(said.contains("recorded: damaged block"), "{said}");
    // The restored backup: whole now, but its record says a block was left out, until an
    // operator acknowledges it.
    let scrubbed = run(&["scrub", "--data-dir", restored.to_str().unwrap()]);
    let said = String::from_utf8_lossy(&scrubbed.stdout).into_owned();
    assert_eq!(scrubbed.status.code(), Some(1), "{said}");
    assert!(!said.starts_with("damaged block") && said.contains("0 damaged"), "{said}");
    assert!(said.contains("recorded: damaged block") && said.contains("1 entries"), "{said}");
    let acknowledged = run(&["scrub", "--data-dir", restored.to_str().unwrap(), "--acknowledge"]);
    assert!(acknowledged.status.success(), "{}", String::from_utf8_lossy(&acknowledged.stdout));
    let scrubbed = run(&["scrub", "--data-dir", restored.to_str().unwrap()]);
    assert!(scrubbed.status.success(), "{}", String::from_utf8_lossy(&scrubbed.stdout));
    let query = |dir: &std::path::Path| {
        let args = ["query", "--data-dir", dir.to_str().unwrap(), "--from", "-1h", "--step", "1h", "--format", "json"];
        let output = run(&[&args[..], &["count(bkd.hits)"]].concat());
        points_total(&String::from_utf8_lossy(&output.stdout))
    };
    assert_eq!(query(&restored), live, "the backup answers what the daemon does");
    assert!(daemon.terminate());

    // The first page zeroed (the daemon stopped): backed up through a rebuilt first page.
    let database = dir.join("histd.db");
    let mut bytes = std::fs::read(&database).unwrap();
    bytes[..4096].fill(0);
    std::fs::write(&database, &bytes).unwrap();
    let second = copies.join("histd-backup-2.db");
    let made = run(&["backup", second.to_str().unwrap(), "--data-dir", dir.to_str().unwrap()]);
    let said = String::from_utf8_lossy(&made.stdout).into_owned();
    assert_eq!(made.status.code(), Some(3), "{said}{}", String::from_utf8_lossy(&made.stderr));
    assert!(said.contains("first page is damaged"), "{said}");
    let again = temp_dir("backup-damaged-restored-2");
    let put = run(&["restore", second.to_str().unwrap(), "--data-dir", again.to_str().unwrap()]);
    assert!(put.status.success(), "{}", String::from_utf8_lossy(&put.stderr));
    assert_eq!(query(&again), live, "every intact point, through the rebuilt first page");
    assert_eq!(std::fs::read(&database).unwrap()[..4096], bytes[..4096], "the store itself is not changed");
}

/// Issue 50: snapshots to roll back to. `store.snapshots` takes a backup of the running store
/// every interval into `<dataDir>/snapshots`, keeps the newest `keep`, and `histd restore
/// --latest` (the daemon stopped) puts the newest back, every point it held.
#[test]
fn snapshots_are_taken_rotated_and_the_latest_restored() {
    let dir = temp_dir("snapshots");
    let config = format!(
        "{{ address: '127.0.0.1', port: 0, mgmt_port: 0, http_port: 0, flushInterval: 200, backends: ['store'], \
           store: {{ dataDir: '{}', snapshots: {{ interval: 1, keep: 2 }} }} }}",
        dir.display()
    );
    let daemon = Daemon::start("snapshots", &config);
    let asked = "/api/v1/query?expr=count(snap.hits)&step=3600";
    daemon.send_udp("snap.hits:300|c\n");
    assert!(eventually(|| points_total(&daemon.http_get(asked).1) == 300.0));
    let taken = daemon.stat("store.store_snapshots_taken");
    assert!(
        eventually(|| daemon.stat("store.store_snapshots_taken") >= taken + 3.0),
        "three more snapshots: {}",
        daemon.admin("stats")
    );
    assert_eq!(daemon.stat("store.store_snapshot_failures"), 0.0);
    let folder = dir.join("snapshots");
    let kept = || {
        std::fs::read_dir(&folder)
            .unwrap()
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "db"))
            .count()
    };
    assert!(eventually(|| kept() == 2), "the two newest kept: {}", kept());
    assert!(daemon.terminate());

    let run = |args: &[&str]| std::process::Command::new(env!("CARGO_BIN_EXE_histd")).args(args).output().unwrap();
    let put = run(&["restore", "--latest", "--data-dir", dir.to_str().unwrap()]);
    let said = String::from_utf8_lossy(&put.stdout).into_owned();
    assert!(put.status.success(), "{said}{}", String::from_utf8_lossy(&put.stderr));
    assert!(said.contains("snapshots/histd-") && said.contains("replaced is kept"), "{said}");
    let query = run(&[
        "query",
        "--data-dir",
        dir.to_str().unwrap(),
        "--from",
        "-1h",
        "--step",
        "1h",
        "--format",
        "json",
        "count(snap.hits)",
    ]);
    assert_eq!(points_total(&String::from_utf8_lossy(&query.stdout)), 300.0, "every point the snapshot held");
    let none = run(&["restore", "--latest", "--data-dir", temp_dir("snapshots-none").to_str().unwrap()]);
    assert_eq!(none.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&none.stderr).contains("no snapshot"), "{}", String::from_utf8_lossy(&none.stderr));
}

/// Issue 36: the daemon's paced scrub (`store.scrubInterval`) finds a block damaged while it
/// runs, logs it and counts it once, and keeps passing over the store.
#[test]
fn the_paced_scrub_finds_a_damaged_block_while_the_daemon_runs() {
    let dir = temp_dir("scrub-store");
    let daemon = Daemon::start(
        "scrub-store",
        &format!(
            "{{ address: '127.0.0.1', port: 0, mgmt_port: 0, http_port: 0, flushInterval: 200, backends: ['store'], \
               deleteIdleStats: true, store: {{ dataDir: '{}', scrubInterval: 1 }} }}",
            dir.display()
        ),
    );
    for _ in 0..3 {
        daemon.send_udp("scrub.latency:7|ms\n");
        std::thread::sleep(Duration::from_millis(250));
    }
    assert!(eventually(|| daemon.stat("store.store_scrub_passes") >= 1.0), "a pass over the store");
    assert_eq!(daemon.stat("store.store_scrub_damaged_blocks"), 0.0);
    // The timer is idle (deleteIdleStats) and alone in its group (histd's own series are
    // counters and gauges): nothing writes its block again, so only the scrub reads it.
    std::thread::sleep(Duration::from_millis(800));
    flip_a_bit_in_the_first_block(&dir.join("histd.db"), Some("scrub.latency"), 0x02);
    assert!(
        eventually(|| daemon.stat("store.store_scrub_damaged_blocks") == 1.0),
        "found by a later pass: {}",
        daemon.admin("stats")
    );
    let passes = daemon.stat("store.store_scrub_passes");
    assert!(eventually(|| daemon.stat("store.store_scrub_passes") > passes), "the passes go on");
    assert_eq!(daemon.stat("store.store_scrub_damaged_blocks"), 1.0, "counted once");
    assert!(daemon.terminate());
}

/// N10/issue 36 item 7: a store file SQLite finds damaged (overwritten header; truncated to
/// half) no longer stops histd at start (a crash loop under the unit): it is moved aside whole
/// and counted, a fresh store begins, and ingest goes on.
#[test]
fn a_damaged_store_file_is_set_aside_and_histd_starts() {
    let config = |dir: &std::path::Path| {
        format!(
            "{{ address: '127.0.0.1', port: 0, mgmt_port: 0, http_port: 0, flushInterval: 200, backends: ['store'], \
               store: {{ dataDir: '{}' }} }}",
            dir.display()
        )
    };
    let stored = |daemon: &Daemon| points_total(&daemon.http_get("/api/v1/query?expr=count(aside.hits)&step=3600").1);
    // A real store, cut to half its length once the daemon stopped; and a file overwritten.
    let truncated = temp_dir("aside-truncated");
    let first = Daemon::start("aside-first", &config(&truncated));
    for round in 1..=3 {
        first.send_udp(&format!("aside.filler{round}:1|c\naside.hits:5|c\n"));
        assert!(eventually(|| stored(&first) >= 5.0 * round as f64));
    }
    assert!(first.terminate());
    let database = truncated.join("histd.db");
    let length = std::fs::metadata(&database).unwrap().len();
    std::fs::OpenOptions::new().write(true).open(&database).unwrap().set_len(length / 2).unwrap();
    let overwritten = temp_dir("aside-overwritten");
    std::fs::write(overwritten.join("histd.db"), vec![0x5au8; 16384]).unwrap();
    // Probe N10's last row: a store emptied to 0 bytes opened as a new store, its loss unsaid.
    let emptied = temp_dir("aside-emptied");
    std::fs::write(emptied.join("histd.db"), b"").unwrap();
    let cases = [(&overwritten, "aside-overwritten"), (&emptied, "aside-emptied"), (&truncated, "aside-truncated")];
    for (dir, name) in cases {
        let daemon = match Daemon::try_start(name, &config(dir)) {
            Ok(daemon) => daemon,
            Err(why) => panic!("{name}: histd did not start: {why}"),
        };
        daemon.send_udp("aside.hits:5|c\n");
        assert!(eventually(|| stored(&daemon) >= 5.0), "{name}: a fresh store takes the flushes");
        let aside: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("histd.db.damaged-"))
            .collect();
        // The truncated file may open and fail only on reading its pages: it is then either
        // set aside at start, or served with the pages that read (never a failed start).
        if name != "aside-truncated" {
            assert_eq!(aside.len(), 1, "{name}: kept aside for recovery");
            assert_eq!(daemon.stat("store.store_damaged_files_set_aside"), 1.0, "{name}");
        }
        assert!(daemon.terminate());
    }
}

/// Issue 36 (N10's page damage): a store file whose pages were damaged while histd was
/// stopped is salvaged when SQLite meets the damage: at start, at a write, or at a query (the
/// reader asks the writer to check the file). Every answer is exact (a series' points are its
/// own), no row is lost where only an index was damaged (its root page zeroed), and new flushes
/// are stored. A series row whose name a flipped bit changed (into another series' name, or
/// into text that is not UTF-8) fails its checksum: the file is salvaged without it, and only
/// that series loses its history. A group row whose rollups a flipped bit said to end far
/// ahead (the probe's N10: its series answered nothing) is rebuilt from its blocks. And the
/// probe's 50 flipped bits: wherever they land, every answer is exact or empty, never a 500.
#[test]
fn a_store_with_damaged_pages_is_salvaged_and_answers_stay_exact() {
    const SERIES: u64 = 1500;
    let dir = temp_dir("salvage-pages");
    let config = format!(
        "{{ address: '127.0.0.1', port: 0, mgmt_port: 0, http_port: 0, flushInterval: 300, backends: ['store'], \
           store: {{ dataDir: '{}' }} }}",
        dir.display()
    );
    let count = |daemon: &Daemon, n: u64| {
        let (status, body) = daemon.http_get(&format!("/api/v1/query?expr=count(salvage.c{n})&step=3600"));
        (status, points_total(&body))
    };
    let first = Daemon::start("salvage-pages-first", &config);
    let lines: Vec<String> = (1..=SERIES).map(|n| format!("salvage.c{n}:{n}|c")).collect();
    for chunk in lines.chunks(50) {
        first.send_udp(&chunk.join("\n"));
    }
    assert!(eventually(|| count(&first, SERIES).1 == SERIES as f64), "every series stored");
    assert!(eventually(|| count(&first, 1).1 == 1.0));
    assert!(first.terminate());
    let database = dir.join("histd.db");
    let pristine = std::fs::read(&database).unwrap();
    let zero_index_root: fn(&mut Vec<u8>) = |bytes| {
        let page_size = usize::from(u16::from_be_bytes([bytes[16], bytes[17]]));
        let root = sqlite_root_page(bytes, "blocks_key");
        bytes[(root - 1) * page_size..root * page_size].fill(0);
    };
    // A flipped bit in a series row's name (table and index alike): salvage.c1 renamed
    // salvage.c3, another series' name; salvage.c21's no longer UTF-8.
    let rename: fn(&mut Vec<u8>) = |bytes| replace_all(bytes, b"salvage.c1counter", b"salvage.c3counter");
    let not_utf8: fn(&mut Vec<u8>) = |bytes| replace_all(bytes, b"salvage.c21counter", b"salvage.\xe321counter");
    // Probe N10: a group's rollups said to end far ahead hid its series' points, new ones too.
    let far_ahead: fn(&mut Vec<u8>) = |bytes| {
        let sql = "UPDATE groups SET compacted_until = 9223372036854775000 WHERE grp = (SELECT min(grp) FROM groups)";
        changed_by_sql(bytes, sql)
    };
    // Issue 50: the first page (SQLite's header and the schema) zeroed, or the schema's page
    // type changed (the probe's byte 100): its rows are elsewhere, and none is lost.
    let zero_first_page: fn(&mut Vec<u8>) = |bytes| bytes[..4096].fill(0);
    let schema_page_type: fn(&mut Vec<u8>) = |bytes| bytes[100] ^= 0x01;
    let asked = (1..=SERIES).step_by(10).count();
    // (what, the damage, series asked that lose their history)
    type Case = (&'static str, fn(&mut Vec<u8>), usize);
    let cases: [Case; 6] = [
        ("the first page zeroed", zero_first_page, 0),
        ("the schema page's type changed", schema_page_type, 0),
        ("blocks_key's root zeroed", zero_index_root, 0),
        ("a series renamed into another's", rename, 1),
        ("a series' name no longer UTF-8", not_utf8, 1),
        ("a group's compacted_until far ahead", far_ahead, 0),
    ];
    for (name, damage, lose) in cases {
        let mut bytes = pristine.clone();
        damage(&mut bytes);
        std::fs::write(&database, &bytes).unwrap();
        let daemon = Daemon::start_process("salvage-pages", &config);
        // Ask every series: answers are exact or 503 (the file is being salvaged), never wrong.
        let mut kept = 0;
        for n in (1..=SERIES).step_by(10) {
            let (status, value) = count(&daemon, n);
            let (status, value) = if status == 503 {
                assert!(eventually(|| count(&daemon, n).0 == 200), "{name}: salvaged, then answered");
                count(&daemon, n)
            } else {
                (status, value)
            };
            assert_eq!(status, 200, "{name}: salvage.c{n}");
            assert!(value == 0.0 || value == n as f64, "{name}: salvage.c{n} reads {value}: another series' points?");
            kept += usize::from(value == n as f64);
        }
        assert_eq!(count(&daemon, 3), (200, 3.0), "{name}: salvage.c3 answers its own points only");
        assert!(daemon.stat("store.store_damaged_files_set_aside") >= 1.0, "{name}: met and set aside");
        // Issue 50: the salvage is in the salvaged store's record of damage.
        assert!(daemon.stat("store.store_damage_unacknowledged") >= 1.0, "{name}: the salvage recorded");
        assert_eq!(kept, asked - lose, "{name}: every other series keeps its history\n{}", daemon.stderr());
        if lose > 0 {
            assert!(daemon.stat("store.store_salvage_unreadable_rows") >= 1.0, "{name}: the damaged row counted");
        }
        daemon.send_udp("salvage.after:7|c\nsalvage.c1:1|c\n");
        let after = || points_total(&daemon.http_get("/api/v1/query?expr=count(salvage.after)&step=3600").1);
        assert!(eventually(|| after() == 7.0), "{name}: new flushes stored");
        let (status, value) = count(&daemon, 1);
        assert_eq!(status, 200);
        assert!(value == 1.0 || value == 2.0, "{name}: salvage.c1: its own points only ({value})");
        assert!(daemon.terminate());
    }
    // The probe's own row: 50 bits flipped anywhere past page 1. Where they land changes with
    // each run's layout, so what is kept is not asserted: only that every answer, once the
    // file is salvaged, is a 200 with the series' own points or none.
    let mut bytes = pristine.clone();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..50 {
        state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        let at = 4096 + (state >> 33) as usize % (bytes.len() - 4096);
        bytes[at] ^= 1 << ((state >> 29) & 7);
    }
    std::fs::write(&database, &bytes).unwrap();
    let daemon = Daemon::start_process("salvage-flips", &config);
    for n in (1..=SERIES).step_by(10) {
        let answered = || {
            let (status, value) = count(&daemon, n);
            (status == 200).then_some(value)
        };
        assert!(eventually(|| answered().is_some()), "50 flips: salvage.c{n} answered\n{}", daemon.stderr());
        let value = answered().unwrap();
        assert!(value == 0.0 || value == n as f64, "50 flips: salvage.c{n} reads {value}: another series' points?");
    }
    daemon.send_udp("salvage.after:7|c\n");
    let after = || points_total(&daemon.http_get("/api/v1/query?expr=count(salvage.after)&step=3600").1);
    assert!(eventually(|| after() == 7.0), "50 flips: new flushes stored");
    assert!(daemon.terminate());
}

/// A SQLite file's bytes changed by a statement (run on a copy).
fn changed_by_sql(bytes: &mut Vec<u8>, sql: &str) {
    let copy = temp_dir("sqlite-changed").join("copy.db");
    std::fs::write(&copy, &bytes).unwrap();
    assert_eq!(rusqlite::Connection::open(&copy).unwrap().execute(sql, []).unwrap(), 1, "{sql}");
    *bytes = std::fs::read(&copy).unwrap();
}

/// Writes `to` over every occurrence of `from` in `bytes` (there must be one).
fn replace_all(bytes: &mut [u8], from: &[u8], to: &[u8]) {
    let places: Vec<usize> =
        (0..bytes.len().saturating_sub(from.len())).filter(|&at| bytes[at..].starts_with(from)).collect();
    assert!(!places.is_empty(), "{} is not in the file", String::from_utf8_lossy(from));
    for at in places {
        bytes[at..at + to.len()].copy_from_slice(to);
    }
}

/// The root page of the table or index `name` in a SQLite file's bytes (read from a copy).
fn sqlite_root_page(bytes: &[u8], name: &str) -> usize {
    let copy = temp_dir("sqlite-root").join("copy.db");
    std::fs::write(&copy, bytes).unwrap();
    let connection = rusqlite::Connection::open(&copy).unwrap();
    let root: i64 =
        connection.query_row("SELECT rootpage FROM sqlite_master WHERE name = ?1", [name], |r| r.get(0)).unwrap();
    root as usize
}

/// Issue 36: `histd backup` SIGKILLed at a range of moments while it copies a running daemon's
/// store: the destination is either absent (a `.partial` at most) or a whole backup that
/// scrubs clean and restores; a backup run again afterwards succeeds.
#[test]
fn a_backup_killed_at_any_moment_leaves_no_file_named_as_the_backup() {
    let binary = env!("CARGO_BIN_EXE_histd");
    let dir = temp_dir("backup-killed-store");
    let daemon = Daemon::start(
        "backup-killed-store",
        &format!(
            "{{ address: '127.0.0.1', port: 0, server: './servers/tcp', mgmt_port: 0, http_port: 0, flushInterval: 200, backends: ['store'], \
               store: {{ dataDir: '{}' }} }}",
            dir.display()
        ),
    );
    // A store of some megabytes, so that the copy takes a while.
    for chunk in 0..40 {
        let lines: String = (0..500).map(|i| format!("bk.series.{chunk}.{i}:{i}|ms\n")).collect();
        daemon.send_tcp(&lines);
    }
    assert!(eventually(|| daemon.stat("budget.series.timers") >= 20_000.0));
    std::thread::sleep(std::time::Duration::from_millis(600)); // flushed to the store
    let out = temp_dir("backup-killed-out");
    let (mut whole, mut absent) = (0, 0);
    for (attempt, delay_ms) in [0u64, 5, 10, 20, 40, 80, 160].into_iter().enumerate() {
        let backup = out.join(format!("b{attempt}.db"));
        let mut child = std::process::Command::new(binary)
            .args(["backup", backup.to_str().unwrap(), "--data-dir", dir.to_str().unwrap()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        let _ = child.kill();
        let _ = child.wait();
        if backup.exists() {
            whole += 1;
            let target = out.join(format!("restored{attempt}"));
            let restored = std::process::Command::new(binary)
                .args(["restore", backup.to_str().unwrap(), "--data-dir", target.to_str().unwrap()])
                .output()
                .unwrap();
            assert!(
                restored.status.success(),
                "a backup named as one restores: {}",
                String::from_utf8_lossy(&restored.stderr)
            );
            let scrubbed = std::process::Command::new(binary)
                .args(["scrub", "--data-dir", target.to_str().unwrap()])
                .output()
                .unwrap();
            assert!(scrubbed.status.success(), "{}", String::from_utf8_lossy(&scrubbed.stdout));
        } else {
            absent += 1;
        }
    }
    assert!(absent > 0, "some kills came before the rename ({whole} whole, {absent} absent)");
    let backup = out.join("after.db");
    let made = std::process::Command::new(binary)
        .args(["backup", backup.to_str().unwrap(), "--data-dir", dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    assert!(!out.join("after.db.partial").exists());
    assert!(daemon.terminate());
}

/// N1 from a local's side: a global past `global.maxBytesInFlight` answers 503 with
/// `Retry-After`. It is busy, not down: the local keeps it up, so the series it owns stay its
/// own while their batches wait, and it gets them once it takes batches again. (Marked down,
/// its series went to the next global until a health check, splitting their intervals.)
#[test]
fn a_busy_global_keeps_its_series_and_gets_their_batches_once_it_takes_them() {
    let (carbon_a, carbon_b) = (Carbon::start(), Carbon::start());
    // The batches a holds back come late (past global.batchWaitMs): their late intervals
    // must not share a second with a's flushes.
    let a = global_flushing_every(1000, "busy-a", &carbon_a, "httpBodyTimeoutMs: 10000,");
    let b = global_flushing_every(1000, "busy-b", &carbon_b, "");
    let local = Daemon::start_process(
        "busy-local",
        &format!(
            "{{ address: '127.0.0.1', port: 0, mgmt_port: 0, http_port: 0, flushInterval: 200, backends: ['forward'], \
               forward: {{ source: 'busy-local', nodes: ['http://{}', 'http://{}'], checkInterval: 60000 }} }}",
            a.address("http"),
            b.address("http")
        ),
    );
    let names: Vec<String> = (0..20).map(|i| format!("busy.s{i}")).collect();
    let send = || local.send_udp(&names.iter().map(|name| format!("{name}:1|c\n")).collect::<String>());
    let count = |name: &str| format!("stats_counts.{name}");
    let seen = |carbon: &Carbon| -> Vec<String> {
        let lines = carbon.lines();
        let line_of = |name: &str| format!("{} ", count(name));
        names.iter().filter(|name| lines.iter().any(|line| line.starts_with(&line_of(name)))).cloned().collect()
    };
    send();
    assert!(eventually(|| seen(&carbon_a).len() + seen(&carbon_b).len() == names.len()), "every series at a global");
    let (owned_by_a, owned_by_b) = (seen(&carbon_a), seen(&carbon_b));
    assert!(!owned_by_a.is_empty() && !owned_by_b.is_empty(), "{owned_by_a:?} {owned_by_b:?}");
    // Three requests that announce large bodies and send none hold a's whole budget.
    let address = a.address("http");
    let held: Vec<TcpStream> = (0..3)
        .map(|_| {
            let mut stream = TcpStream::connect(&address).unwrap();
            let head = format!(
                "POST /api/v1/forward HTTP/1.1\r\nHost: {address}\r\n{BATCH_HEADERS}Content-Length: 4194304\r\n\r\n"
            );
            stream.write_all(head.as_bytes()).unwrap();
            stream
        })
        .collect();
    for _ in 0..5 {
        send();
        std::thread::sleep(Duration::from_millis(300));
    }
    assert!(a.stat("messages.forward_batches_busy") > 0.0, "a answered busy while it was");
    drop(held);
    let all_in = || names.iter().all(|name| carbon_a.total(&count(name)) + carbon_b.total(&count(name)) == 6.0);
    assert!(eventually(all_in), "every increment merged once");
    for name in &owned_by_a {
        assert!(!seen(&carbon_b).contains(name), "{name} stayed a's while a was busy");
        assert_eq!(carbon_a.total(&count(name)), 6.0, "{name}");
    }
    assert_eq!(seen(&carbon_a), owned_by_a, "a received only its own series");
    assert!(local.terminate() && a.terminate() && b.terminate());
}

/// Issue 35: a forwarded batch is merged into the flush of the interval it belongs to. One
/// that comes after that flush (a spool replayed, a partition read again by another global)
/// is flushed in a late interval of its own, stamped with that flush's time: the store's
/// answer for a range holds that range's samples and nothing from outside it, and Graphite
/// gets its points at that time, not in whatever interval was open when it came.
#[test]
fn a_late_batch_is_placed_in_the_interval_it_belongs_to() {
    let carbon = Carbon::start();
    let daemon = global("late-batches", &carbon, "backends: ['graphite', 'store'], store: { dataDir: '$DIR/data' },");
    let late_end_ms = now_ms() / 1000 * 1000 - 60_000;
    let mut late = BatchWriter::new(BatchId { interval_start_ms: late_end_ms - 1_000, ..id("web-1", 0) });
    late.counter("placed.hits", 7.0);
    assert_eq!(post(&daemon, &compress(&late.finish()), "").0, 200);
    let mut on_time = BatchWriter::new(id("web-1", 1));
    on_time.counter("placed.hits", 5.0);
    assert_eq!(post(&daemon, &compress(&on_time.finish()), "").0, 200);
    let stored = |from: u64, to: u64| {
        let query = format!("/api/v1/query?expr=count(placed.hits)&from={from}&to={to}&step=1");
        points_total(&daemon.http_get(&query).1)
    };
    let (late_s, now_s) = (late_end_ms / 1000, now_ms() / 1000);
    wait_until(|| stored(late_s - 30, now_s + 30) == 12.0, "both batches stored");
    // Its flush: the first grid point at or after its end and global.batchWaitMs (2 s).
    assert_eq!(stored(late_s + 1, late_s + 4), 7.0, "the late batch at the time it belongs to");
    assert_eq!(stored(now_s - 20, now_s + 30), 5.0, "the interval open when it came holds none of it");
    let late_lines: Vec<String> =
        carbon.lines().into_iter().filter(|line| line.starts_with("stats_counts.placed.hits 7 ")).collect();
    let [line] = &late_lines[..] else { panic!("one late line: {late_lines:?}") };
    let stamped: u64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    assert!((late_s + 2..=late_s + 3).contains(&stamped), "{line} (the interval ended at {late_s})");
    assert_eq!(daemon.stat("messages.forward_batches_late"), 1.0);
    assert!(daemon.terminate());
}

/// Issue 35: late batches are bounded by `global.maxLateIntervals` held or in the backends'
/// hands, and when they fill it those held go to the backends at once: a local's replayed
/// backlog of eight intervals is taken and stored, each at its own time, in seconds, where
/// waiting for the next flush (a minute away here) would let two in a minute. The last ones,
/// short of the bound, go with the next flush (here the final one, at the stop).
#[test]
fn a_backlog_of_late_batches_goes_as_fast_as_the_backends_take_it() {
    let dir = temp_dir("late-backlog");
    let config = format!(
        "{{ address: '127.0.0.1', port: 0, mgmt_port: 0, http_port: 0, flushInterval: 60000, backends: ['store'], \
           store: {{ dataDir: '{}' }}, global: {{ accept: true, maxLateIntervals: 2 }} }}",
        dir.join("data").display()
    );
    let daemon = Daemon::start_process("late-backlog", &config);
    // Eight of the local's minutes, the last ended ten minutes ago.
    let first_end_ms = now_ms() / 1000 * 1000 - 17 * 60_000;
    let started = Instant::now();
    for minute in 0..8u64 {
        let start = first_end_ms + minute * 60_000 - 60_000;
        let id = BatchId { interval_start_ms: start, interval_ms: 60_000, ..id("web-1", minute) };
        let mut batch = BatchWriter::new(id);
        batch.counter("backlog.hits", (minute + 1) as f64);
        let body = compress(&batch.finish());
        // As a local's spool does: a 503 (the bound is full) is sent again shortly.
        loop {
            let (status, answer) = post(&daemon, &body, "");
            match status {
                200 => break,
                503 if started.elapsed() < Duration::from_secs(30) => std::thread::sleep(Duration::from_millis(100)),
                _ => panic!("minute {minute}: {status} {answer}"),
            }
        }
    }
    let points = |daemon: &Daemon| -> Vec<(u64, f64)> {
        let answer = daemon.http_json("/api/v1/query?expr=count(backlog.hits)&from=-30m&to=now&step=1");
        let points = answer["points"].as_array().cloned().unwrap_or_default();
        points.iter().filter_map(|p| Some((p[0].as_u64()?, p[1].as_f64()?))).filter(|(_, v)| *v != 0.0).collect()
    };
    // Minutes 1 to 7 (1 + ... + 7 = 28) at least: only the last may wait for a flush.
    let total = |daemon: &Daemon| points(daemon).iter().map(|(_, v)| v).sum::<f64>();
    wait_until(|| total(&daemon) >= 28.0, "the backlog stored before the next flush");
    assert!(started.elapsed() < Duration::from_secs(30), "taken in {:?}", started.elapsed());
    assert_eq!(daemon.stat("messages.forward_batches_late"), 8.0);
    assert!(daemon.terminate());
    let again = Daemon::start_process("late-backlog-again", &config);
    let stored = points(&again);
    let values: Vec<f64> = stored.iter().map(|(_, v)| *v).collect();
    assert_eq!(values, (1..=8).map(f64::from).collect::<Vec<_>>(), "one point a minute: {stored:?}");
    for (minute, (at, _)) in stored.iter().enumerate() {
        // Its flush: the global's first grid point at or after its end + 2 s.
        let end = first_end_ms / 1000 + 60 * minute as u64;
        assert!((end + 2..=end + 62).contains(at), "minute {minute} at {at}, ended {end}");
    }
    assert!(again.terminate());
}

/// Issue 49, item 2: the sign-in form is read as every body is, capped (4 KiB) and within
/// `httpBodyTimeoutMs`; a right token is sent to the page with a session, a wrong one refused.
#[test]
fn the_sign_in_form_is_capped_and_checked() {
    let dir = temp_dir("sign-in-form");
    let tokens = token_files(&dir);
    let daemon = Daemon::start(
        "sign-in-form",
        &format!("{{ address: '127.0.0.1', port: 0, mgmt_port: 0, http_port: 0, backends: ['console'], {tokens} }}"),
    );
    let address = daemon.address("http");
    let form = "Content-Type: application/x-www-form-urlencoded\r\n";
    let huge = format!("token={}", "x".repeat(5000));
    assert_eq!(http(&address, "POST", "/-/sign-in", huge.as_bytes(), form).0, 413, "over 4 KiB");
    assert_eq!(http(&address, "POST", "/-/sign-in", b"token=not-a-token-0000", form).0, 401);
    assert_eq!(http(&address, "POST", "/-/sign-in", b"token=read-token-0123456789", form).0, 303);
    let cross = format!("{form}Origin: http://evil.example\r\n");
    assert_eq!(http(&address, "POST", "/-/sign-in", b"token=read-token-0123456789", &cross).0, 403, "another origin");
}
