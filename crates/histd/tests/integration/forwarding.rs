//! Forwarding with real processes on loopback: three locals → two globals under load, one
//! global killed (SIGKILL) and restarted, both globals stopped for 20 s, a local killed with
//! batches in its spool. What the globals store adds up to what was sent, nothing twice, and
//! their merged histogram is the one a single histd fed every line has (the same bins).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use circllhist::Histogram;

use crate::harness::{eventually, free_port, http, temp_dir, url_encode, wait_until, within, Daemon, WAIT};

const FLUSH_MS: u64 = 300;
/// Latencies and hits per round and local.
pub(crate) const LATENCIES: u64 = 200;
pub(crate) const HITS: u64 = 20;
/// How long both globals stay down (the outage).
const OUTAGE: Duration = Duration::from_secs(20);

/// A global node: its HTTP port and data (store and journal) outlive its processes.
struct Global {
    name: String,
    port: u16,
    data: PathBuf,
    daemon: Option<Daemon>,
}

impl Global {
    fn new(name: &str) -> Global {
        Global { name: name.into(), port: free_port(), data: temp_dir(name), daemon: None }
    }

    fn start(&mut self) {
        let config = format!(
            "{{ address: '127.0.0.1', port: 0, server: './servers/tcp', mgmt_port: 0, http_port: {}, \
               flushInterval: {FLUSH_MS}, backends: ['store'], store: {{ dataDir: '{}' }}, \
               global: {{ accept: true, journalDir: '{}' }} }}",
            self.port,
            self.data.join("store").display(),
            self.data.join("journal").display()
        );
        self.daemon = Some(Daemon::start_process(&self.name, &config));
    }

    fn kill(&mut self) {
        self.daemon.take().expect("running").kill();
    }

    fn stop(&mut self) {
        assert!(self.daemon.take().expect("running").terminate(), "{} stops cleanly", self.name);
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn daemon(&self) -> &Daemon {
        self.daemon.as_ref().expect("running")
    }
}

fn local_config(source: &str, globals: &[&Global], spool: &Path) -> String {
    let nodes: Vec<String> = globals.iter().map(|g| format!("'{}'", g.url())).collect();
    format!(
        "{{ address: '127.0.0.1', port: 0, server: './servers/tcp', mgmt_port: 0, http_port: 0, \
           flushInterval: {FLUSH_MS}, backends: ['forward'], forward: {{ nodes: [{}], source: '{source}', \
           checkInterval: 200, timeoutMs: 2000, spoolDir: '{}' }} }}",
        nodes.join(", "),
        spool.display()
    )
}

/// One histd with the store, fed every line: the reference.
pub(crate) fn reference() -> Daemon {
    Daemon::start(
        "reference",
        &format!(
            "{{ address: '127.0.0.1', port: 0, server: './servers/tcp', mgmt_port: 0, http_port: 0, \
               flushInterval: {FLUSH_MS}, backends: ['store'], store: {{ dataDir: '$DIR/store' }} }}"
        ),
    )
}

/// Round `round`'s lines for local `host`: 200 latencies (some fractional), 20 hits, and a
/// hit for each of 16 more counters (so that every global, or Kafka partition, owns some series).
pub(crate) fn lines(round: u64, host: u64) -> String {
    let mut out = String::new();
    for i in 0..LATENCIES {
        let x = (round * 7919 + host * 104_729 + i * 1_299_709) % 10_007;
        let value = if i % 4 == 0 { format!("{}.25", x % 3000) } else { (x % 5000).to_string() };
        out.push_str(&format!("api.latency:{value}|ms\n"));
    }
    for _ in 0..HITS {
        out.push_str("api.hits:1|c\n");
    }
    for k in 0..16 {
        out.push_str(&format!("spread.{k}:1|c\n"));
    }
    out
}

/// Sends rounds `rounds` to every local and to the reference.
pub(crate) fn send(rounds: std::ops::Range<u64>, locals: &[Daemon], reference: &Daemon) {
    for round in rounds {
        for (host, local) in locals.iter().enumerate() {
            let text = lines(round, host as u64);
            local.send_tcp(&text);
            reference.send_tcp(&text);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The timer's histogram over the last 10 minutes, from one daemon's store.
pub(crate) fn stored_histogram(address: &str) -> Histogram {
    let path = format!("/api/v1/histogram?name={}&from=-10m", url_encode("api.latency"));
    let (status, body) = http(address, "GET", &path, &[], "");
    assert_eq!(status, 200, "{body}");
    let answer: serde_json::Value = serde_json::from_str(&body).unwrap();
    answer["circllhist"].as_str().map_or_else(Histogram::new, |h| Histogram::from_base64(h).unwrap())
}

/// The counter's stored total over the last 10 minutes.
pub(crate) fn stored_hits(address: &str) -> f64 {
    let path = format!("/api/v1/query?expr={}&from=-10m&to=now&step=1d", url_encode("sum(api.hits)"));
    let (status, body) = http(address, "GET", &path, &[], "");
    assert_eq!(status, 200, "{body}");
    let answer: serde_json::Value = serde_json::from_str(&body).unwrap();
    answer["points"].as_array().unwrap().iter().filter_map(|p| p[1].as_f64()).sum()
}

fn merged(histograms: &[Histogram]) -> Histogram {
    Histogram::merge_all(histograms)
}

/// Every `forward.dropped_points.*` of a local is 0.
pub(crate) fn assert_nothing_dropped(local: &Daemon) {
    let stats = local.admin("stats");
    for line in stats.lines().filter(|l| l.starts_with("forward.dropped_points")) {
        assert!(line.ends_with(": 0"), "{line}");
    }
}

/// Waits until a local's spool is empty.
pub(crate) fn wait_spool_empty(local: &Daemon) {
    wait_spool_empty_within(local, WAIT);
}

/// Waits up to `limit` until a local's spool is empty; if it is not, fails with the local's
/// forward counters.
pub(crate) fn wait_spool_empty_within(local: &Daemon, limit: Duration) {
    if !within(limit, || local.stat("forward.buffered_bytes") == 0.0) {
        let stats = local.admin("stats");
        let forward: Vec<&str> = stats.lines().filter(|l| l.starts_with("forward")).collect();
        panic!("the local's spool did not empty within {limit:?}: {forward:?}");
    }
}

#[test]
fn three_locals_two_globals_lose_nothing_through_a_kill_and_an_outage() {
    let (mut g1, mut g2) = (Global::new("g1"), Global::new("g2"));
    g1.start();
    g2.start();
    let reference = reference();
    let spools: Vec<PathBuf> = (0..3).map(|i| temp_dir(&format!("spool{i}"))).collect();
    let locals: Vec<Daemon> = (0..3)
        .map(|i| Daemon::start(&format!("local{i}"), &local_config(&format!("host-{i}"), &[&g1, &g2], &spools[i])))
        .collect();

    send(0..10, &locals, &reference);
    g1.kill();
    send(10..20, &locals, &reference);
    g1.start();
    send(20..30, &locals, &reference);
    g1.kill();
    g2.stop();
    let outage = Instant::now();
    send(30..40, &locals, &reference);
    std::thread::sleep(OUTAGE.saturating_sub(outage.elapsed()));
    g1.start();
    g2.start();
    send(40..50, &locals, &reference);

    locals.iter().for_each(wait_spool_empty);
    let truth_hits = (50 * 3 * HITS) as f64;
    let addresses = [g1.daemon().address("http"), g2.daemon().address("http")];
    let all_stored = eventually(|| {
        addresses.iter().map(|a| stored_hits(a)).sum::<f64>() == truth_hits
            && stored_hits(&reference.address("http")) == truth_hits
            && merged(&addresses.iter().map(|a| stored_histogram(a)).collect::<Vec<_>>()).count() == 50 * 3 * LATENCIES
            && stored_histogram(&reference.address("http")).count() == 50 * 3 * LATENCIES
    });
    let fleet = merged(&addresses.iter().map(|a| stored_histogram(a)).collect::<Vec<_>>());
    let hits: Vec<f64> = addresses.iter().map(|a| stored_hits(a)).collect();
    let counters = |daemon: &Daemon| {
        let stats = daemon.admin("stats");
        stats.lines().filter(|l| l.contains("forward")).collect::<Vec<_>>().join(", ")
    };
    assert!(
        all_stored,
        "hits per global {hits:?} of {truth_hits}, {} of {} latencies; g1: {}; g2: {}; locals: {:?}",
        fleet.count(),
        50 * 3 * LATENCIES,
        counters(g1.daemon()),
        counters(g2.daemon()),
        locals.iter().map(counters).collect::<Vec<_>>()
    );
    let single = stored_histogram(&reference.address("http"));
    assert_eq!(fleet, single, "the fleet's histogram is the single histd's, bin for bin");
    assert_eq!(fleet.quantile(0.99), single.quantile(0.99));
    for address in &addresses {
        let (_, series) = http(address, "GET", "/api/v1/series?match=spread.*", &[], "");
        assert!(series.contains("spread."), "every global owns some series: {series}");
    }
    locals.iter().for_each(assert_nothing_dropped);
}

#[test]
fn a_local_killed_with_a_full_spool_sends_it_after_its_restart() {
    let mut global = Global::new("g-late");
    let spool = temp_dir("spool-killed");
    let config = local_config("host-killed", &[&global], &spool);
    let local = Daemon::start_process("local-killed", &config);
    let text: String = (0..10).map(|round| lines(round, 0)).collect();
    local.send_tcp(&text);
    wait_until(|| local.stat("forward.buffered_bytes") > 0.0, "a flush to wait in the spool");
    let spooled = local.stat("forward.buffered_bytes");
    local.kill();
    assert!(std::fs::read_dir(&spool).unwrap().count() > 0, "{spooled} bytes were spooled to disk");

    global.start();
    let local = Daemon::start_process("local-killed", &config);
    wait_spool_empty(&local);
    let address = global.daemon().address("http");
    let sent = (10 * HITS) as f64;
    assert!(eventually(|| stored_hits(&address) == sent), "{} of {sent} hits stored", stored_hits(&address));
    assert_eq!(stored_histogram(&address).count(), 10 * LATENCIES);
    assert_nothing_dropped(&local);
}

#[test]
fn a_batch_posted_twice_is_merged_once_and_bad_ones_are_refused() {
    use fleet::format::{compress, BatchId, BatchWriter};
    let mut global = Global::new("g-dedup");
    global.start();
    let address = global.daemon().address("http");
    let now_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
    let id = BatchId {
        source: "h".into(),
        interval_start_ms: now_ms - 1_000,
        interval_ms: 1_000,
        part: "p".into(),
        chunk: 0,
    };
    let mut writer = BatchWriter::new(id);
    writer.counter("api.hits", 7.0);
    let body = compress(&writer.finish());
    let post = |body: &[u8]| {
        http(
            &address,
            "POST",
            "/api/v1/forward",
            body,
            "Content-Type: application/x-histd-forward\r\nContent-Encoding: snappy\r\n",
        )
    };
    let json = |(status, body): (u16, String)| (status, serde_json::from_str::<serde_json::Value>(&body).unwrap());
    assert_eq!(json(post(&body)), (200, serde_json::json!({"merged": 1, "duplicate": false})));
    assert_eq!(json(post(&body)), (200, serde_json::json!({"merged": 0, "duplicate": true})));
    let (status, answer) = post(b"garbage");
    assert_eq!(status, 400, "{answer}");
    assert!(answer.contains("snappy"), "{answer}");
    assert!(eventually(|| stored_hits(&address) == 7.0), "stored {}", stored_hits(&address));
    let stats = global.daemon().admin("stats");
    for want in [
        "messages.forward_batches_merged: 1",
        "messages.forward_batches_duplicate: 1",
        "messages.forward_batches_refused: 1",
    ] {
        assert!(stats.contains(want), "{want} in {stats}");
    }
}

#[test]
fn a_histd_that_does_not_accept_forwarded_batches_says_so() {
    let daemon = Daemon::start("no-global", "{ address: '127.0.0.1', port: 0, mgmt_port: 0, http_port: 0 }");
    let (status, body) = http(&daemon.address("http"), "POST", "/api/v1/forward", b"x", "");
    assert_eq!(status, 503);
    assert!(body.contains("global.accept"), "{body}");
}

/// Issue 36, item 4: `forward.paths` sends every batch to two sets of globals (two
/// datacenters), each with its own spool and counters: while one set is down the other gets
/// every flush on time, and once it is back it gets what it missed; each set is exact alone.
#[test]
fn two_paths_each_get_every_batch_and_one_outage_does_not_hold_the_other() {
    let (mut dc1, mut dc2) = (Global::new("paths-dc1"), Global::new("paths-dc2"));
    dc1.start();
    dc2.start();
    let reference = reference();
    let (spool1, spool2) = (temp_dir("paths-spool1"), temp_dir("paths-spool2"));
    let config = format!(
        "{{ address: '127.0.0.1', port: 0, server: './servers/tcp', mgmt_port: 0, http_port: 0, \
           flushInterval: {FLUSH_MS}, backends: ['forward'], forward: {{ source: 'host-paths', paths: [ \
             {{ name: 'dc1', nodes: ['{}'], spoolDir: '{}', checkInterval: 200, timeoutMs: 2000 }}, \
             {{ name: 'dc2', nodes: ['{}'], spoolDir: '{}', checkInterval: 200, timeoutMs: 2000 }} ] }} }}",
        dc1.url(),
        spool1.display(),
        dc2.url(),
        spool2.display()
    );
    let local = Daemon::start("local-paths", &config);
    let locals = std::slice::from_ref(&local);

    send(0..10, locals, &reference);
    dc2.kill();
    send(10..20, locals, &reference);
    let (hits, latencies) = ((20 * HITS) as f64, 20 * LATENCIES);
    let dc1_address = dc1.daemon().address("http");
    assert!(
        eventually(|| stored_hits(&dc1_address) == hits),
        "dc1 got every flush while dc2 was down: {} of {hits}",
        stored_hits(&dc1_address)
    );
    assert!(local.stat("forward.dc2.buffered_bytes") > 0.0, "dc2's batches wait in its own spool");
    assert_eq!(local.stat("forward.dc1.buffered_bytes"), 0.0);
    dc2.start();
    wait_until(
        || local.stat("forward.dc1.buffered_bytes") == 0.0 && local.stat("forward.dc2.buffered_bytes") == 0.0,
        "both paths' spools to empty",
    );
    let reference_address = reference.address("http");
    assert!(eventually(|| stored_histogram(&reference_address).count() == latencies));
    let single = stored_histogram(&reference_address);
    for global in [&dc1, &dc2] {
        let address = global.daemon().address("http");
        let stored = eventually(|| stored_hits(&address) == hits && stored_histogram(&address).count() == latencies);
        assert!(stored, "{}: {} of {hits} hits", global.name, stored_hits(&address));
        assert_eq!(stored_histogram(&address), single, "{}'s histogram is the single histd's", global.name);
    }
    let stats = local.admin("stats");
    for line in stats.lines().filter(|l| l.starts_with("forward.") && l.contains("dropped_points")) {
        assert!(line.ends_with(": 0"), "{line}");
    }
    assert!(local.stat("forward.dc1.points_out") > 0.0 && local.stat("forward.dc2.points_out") > 0.0);
}
