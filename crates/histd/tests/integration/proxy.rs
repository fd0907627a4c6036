//! `histd proxy` in front of two aggregators: the same totals and the same merged histogram
//! as one histd fed directly, through an aggregator going down (its series move to the other)
//! and coming back (they return).

use std::time::Duration;

use circllhist::Histogram;

use crate::harness::{eventually, free_port, http, temp_dir, url_encode, wait_until, Daemon};

const FLUSH_MS: u64 = 200;

fn aggregator(name: &str, ports: (u16, u16), data: &std::path::Path) -> Daemon {
    Daemon::start(
        name,
        &format!(
            "{{ address: '127.0.0.1', port: {}, mgmt_port: {}, http_port: 0, flushInterval: {FLUSH_MS}, \
               backends: ['store'], store: {{ dataDir: '{}' }} }}",
            ports.0,
            ports.1,
            data.display()
        ),
    )
}

struct Proxy {
    runtime: tokio::runtime::Runtime,
    running: Option<histd::proxy::RunningProxy>,
}

impl Proxy {
    fn start(config: &str) -> Proxy {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let config = histd::proxy::ProxyConfig::from_text(config).unwrap();
        let running = runtime.block_on(histd::proxy::start(config)).unwrap();
        Proxy { runtime, running: Some(running) }
    }

    fn bound(&self) -> histd::proxy::ProxyBound {
        self.running.as_ref().unwrap().bound
    }

    fn admin(&self, command: &str) -> String {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(self.bound().mgmt).unwrap();
        stream.write_all(format!("{command}\nquit\n").as_bytes()).unwrap();
        let mut reply = String::new();
        stream.read_to_string(&mut reply).unwrap();
        reply
    }

    fn stat(&self, name: &str) -> u64 {
        let stats = self.admin("stats");
        let line = stats.lines().find(|l| l.starts_with(&format!("{name}: "))).unwrap_or_else(|| panic!("{stats}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if let Some(running) = self.running.take() {
            self.runtime.block_on(running.stop());
        }
    }
}

/// Packet `n`: 10 hits and 10 latencies over 10 tagged series.
fn packet(n: u64) -> String {
    (0..10)
        .map(|k| format!("p.hits:1|c|#k:{k}\np.lat:{}|ms|#k:{k}", (n * 31 + k * 7) % 900 + 1))
        .collect::<Vec<_>>()
        .join("\n")
}

fn send(range: std::ops::Range<u64>, proxy: &Proxy, reference: &Daemon) {
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    for n in range {
        socket.send_to(packet(n).as_bytes(), proxy.bound().udp).unwrap();
        reference.send_udp(&packet(n));
        if n % 20 == 0 {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

fn received(daemon: &Daemon) -> u64 {
    daemon.stat("messages.metrics_received") as u64
}

fn stored(daemon: &Daemon) -> (f64, Histogram) {
    let address = daemon.address("http");
    let query = format!("/api/v1/query?expr={}&from=-10m&to=now&step=1d", url_encode("sum(p.hits)"));
    let (_, body) = http(&address, "GET", &query, &[], "");
    let answer: serde_json::Value = serde_json::from_str(&body).unwrap();
    let hits = answer["points"].as_array().unwrap().iter().filter_map(|p| p[1].as_f64()).sum();
    let (_, body) = http(&address, "GET", "/api/v1/histogram?name=p.lat&from=-10m", &[], "");
    let answer: serde_json::Value = serde_json::from_str(&body).unwrap();
    let histogram = answer["circllhist"].as_str().map_or_else(Histogram::new, |h| Histogram::from_base64(h).unwrap());
    (hits, histogram)
}

#[test]
fn the_proxy_gives_the_totals_of_one_histd_through_a_node_going_down_and_back() {
    let (a_data, b_data) = (temp_dir("proxy-a"), temp_dir("proxy-b"));
    let (a_ports, b_ports) = ((free_port(), free_port()), (free_port(), free_port()));
    let a = aggregator("proxy-a", a_ports, &a_data);
    let mut b = Some(aggregator("proxy-b", b_ports, &b_data));
    let reference = aggregator("proxy-reference", (0, 0), &temp_dir("proxy-ref"));
    let proxy = Proxy::start(&format!(
        "{{ nodes: [ {{host: '127.0.0.1', port: {}, adminport: {}}}, {{host: '127.0.0.1', port: {}, adminport: {}}} ], \
           host: '127.0.0.1', port: 0, mgmt_port: 0, checkInterval: 100, cacheSize: 10000, udpReaders: 1 }}",
        a_ports.0, a_ports.1, b_ports.0, b_ports.1
    ));
    let lines_sent = |packets: u64| packets * 20;
    let both = |a: &Daemon, b: &Daemon| received(a) + received(b);

    send(0..200, &proxy, &reference);
    wait_until(|| both(&a, b.as_ref().unwrap()) == lines_sent(200), "both aggregators to get the first lines");
    assert!(received(&a) > 0 && received(b.as_ref().unwrap()) > 0, "the series spread over both");

    drop(b.take()); // a clean stop: its final flush keeps what it had in its store
    wait_until(
        || proxy.admin("hashring").contains(&format!("127.0.0.1:{} down", b_ports.0)),
        "b to be out of the ring",
    );
    let a_before = received(&a);
    send(200..400, &proxy, &reference);
    wait_until(|| received(&a) == a_before + lines_sent(200), "a to get every line while b is down");

    let b = aggregator("proxy-b", b_ports, &b_data);
    wait_until(|| proxy.admin("hashring").contains(&format!("127.0.0.1:{} up", b_ports.0)), "b to be back");
    let a_before = received(&a);
    send(400..600, &proxy, &reference);
    wait_until(|| received(&a) - a_before + received(&b) == lines_sent(200), "the last lines");
    assert!(received(&b) > 0, "b's series came back to it");
    wait_until(|| received(&reference) == lines_sent(600), "the reference to get every line");

    let all_stored = eventually(|| {
        let ((a_hits, a_lat), (b_hits, b_lat), (r_hits, r_lat)) = (stored(&a), stored(&b), stored(&reference));
        a_hits + b_hits == 6000.0 && r_hits == 6000.0 && Histogram::merge_all([&a_lat, &b_lat]) == r_lat
    });
    let ((a_hits, _), (b_hits, _), (r_hits, r_lat)) = (stored(&a), stored(&b), stored(&reference));
    assert!(all_stored, "hits a {a_hits} + b {b_hits}, reference {r_hits}");
    assert_eq!(r_lat.count(), 6000);
    assert_eq!(proxy.stat("proxy.lines_forwarded"), lines_sent(600));
    assert_eq!(proxy.stat("proxy.bad_lines"), 0);
}

/// N11 (issue 36): lines sent to an aggregator that is not there (stopped before its health
/// check noticed; here never started) were lost uncounted. The node's host refuses each
/// datagram (ICMP port unreachable) and the proxy counts it in `datagrams_refused`.
#[test]
fn n11_datagrams_a_stopped_node_refuses_are_counted() {
    let (closed, admin) = (free_port(), free_port());
    let proxy = Proxy::start(&format!(
        "{{ nodes: [ {{host: '127.0.0.1', port: {closed}, adminport: {admin}}} ], \
           host: '127.0.0.1', port: 0, mgmt_port: 0, checkInterval: 100, udpReaders: 1 }}"
    ));
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    for n in 0..20 {
        socket.send_to(packet(n).as_bytes(), proxy.bound().udp).unwrap();
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(eventually(|| proxy.stat("proxy.datagrams_refused") > 0), "{}", proxy.admin("stats"));
    assert!(proxy.stat("proxy.datagrams_refused") <= proxy.stat("proxy.datagrams_sent"));
    let node = format!("node.127.0.0.1:{closed}.datagrams_refused");
    assert!(proxy.stat(&node) > 0, "the refusals are the node's: {}", proxy.admin("stats"));
}
