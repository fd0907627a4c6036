//! Routing lines: each line's series key (as the aggregators build it) picks its aggregator by
//! the forward backend's rendezvous hash (`sinks/forward/ring.rs`, docs/forward-format.md), so
//! every line of a series reaches the same aggregator; lines for one aggregator are packed
//! into datagrams of at most `proxyDatagramBytes` and sent when full or when the batch they
//! came in ends. Lines are forwarded unchanged (rates, tags and all).

use std::net::{SocketAddr, UdpSocket};
use std::sync::{Arc, Mutex};

use proto::{Line, Scanned};

use super::refusals;
use crate::telemetry::Counter;
use fleet::ring::Ring;

/// What one router counted (a reader thread's, or a TCP connection's).
#[derive(Debug, Default)]
pub struct RouteCounts {
    /// Non-empty lines received.
    pub lines: Counter,
    /// Lines sent to an aggregator.
    pub forwarded: Counter,
    /// Lines whose first value does not parse (not sent: the aggregator would refuse them).
    pub bad_lines: Counter,
    /// DogStatsD events and service checks (not sent: aggregators do not keep them).
    pub events: Counter,
    /// Lines sent to an aggregator while its health check failed (no other was up).
    pub to_down_nodes: Counter,
    /// Datagrams sent.
    pub datagrams: Counter,
    /// Datagrams the kernel refused to send (their lines are lost).
    pub send_errors: Counter,
    /// Datagrams a node's host sent back as undeliverable (ICMP port or host unreachable: no
    /// aggregator listening, e.g. in the moments before its health check fails): their lines
    /// are lost. A lower bound: kernels rate-limit those messages.
    pub refused: Counter,
    /// Per aggregator (in `nodes` order): lines sent, and what was lost by reason.
    pub per_node: Vec<NodeCounts>,
}

/// One aggregator's lines, and what it lost by reason (the totals' reasons, per node).
#[derive(Debug, Default)]
pub struct NodeCounts {
    /// Lines sent to it.
    pub lines: Counter,
    /// Lines sent to it while its health check failed (no other was up).
    pub to_down: Counter,
    /// Datagrams to it the kernel refused to send.
    pub send_errors: Counter,
    /// Datagrams to it its host sent back as undeliverable (a lower bound).
    pub refused: Counter,
}

impl NodeCounts {
    fn add(&self, other: &NodeCounts) {
        self.lines.add(other.lines.get());
        self.to_down.add(other.to_down.get());
        self.send_errors.add(other.send_errors.get());
        self.refused.add(other.refused.get());
    }
}

impl RouteCounts {
    fn new(nodes: usize) -> Self {
        RouteCounts { per_node: (0..nodes).map(|_| NodeCounts::default()).collect(), ..RouteCounts::default() }
    }

    fn add(&self, other: &RouteCounts) {
        let pairs = [
            (&self.lines, &other.lines),
            (&self.forwarded, &other.forwarded),
            (&self.bad_lines, &other.bad_lines),
            (&self.events, &other.events),
            (&self.to_down_nodes, &other.to_down_nodes),
            (&self.datagrams, &other.datagrams),
            (&self.send_errors, &other.send_errors),
            (&self.refused, &other.refused),
        ];
        pairs.iter().for_each(|(mine, theirs)| mine.add(theirs.get()));
        self.per_node.iter().zip(&other.per_node).for_each(|(mine, theirs)| mine.add(theirs));
    }
}

/// Every router's counts: the live ones, and the sum of those that ended.
#[derive(Debug)]
pub struct CountsRegistry {
    live: Mutex<Vec<Arc<RouteCounts>>>,
    ended: RouteCounts,
    nodes: usize,
}

impl CountsRegistry {
    /// For routers over `nodes` aggregators.
    pub fn new(nodes: usize) -> Self {
        CountsRegistry { live: Mutex::new(Vec::new()), ended: RouteCounts::new(nodes), nodes }
    }

    fn register(&self) -> Arc<RouteCounts> {
        let counts = Arc::new(RouteCounts::new(self.nodes));
        crate::clock::lock(&self.live).push(counts.clone());
        counts
    }

    fn retire(&self, counts: &Arc<RouteCounts>) {
        self.ended.add(counts);
        crate::clock::lock(&self.live).retain(|live| !Arc::ptr_eq(live, counts));
    }

    /// The sum over every router, ended or live.
    pub fn total(&self) -> RouteCounts {
        let total = RouteCounts::new(self.nodes);
        total.add(&self.ended);
        crate::clock::lock(&self.live).iter().for_each(|counts| total.add(counts));
        total
    }
}

/// One thread's (or connection's) router: its own sending socket and per-aggregator buffers.
pub struct Router {
    ring: Arc<Ring>,
    targets: Arc<[SocketAddr]>,
    socket: UdpSocket,
    buffers: Vec<Vec<u8>>,
    datagram_bytes: usize,
    sanitize: bool,
    key: String,
    counts: Arc<RouteCounts>,
    registry: Arc<CountsRegistry>,
    /// This batch's counts, published to `counts` by [`Router::flush`] (one atomic add per
    /// counter per batch, not per line).
    pending: Pending,
}

#[derive(Default)]
struct Pending {
    lines: u64,
    forwarded: u64,
    bad_lines: u64,
    events: u64,
    to_down_nodes: u64,
    /// Per node: lines sent, and those sent while it was down.
    per_node: Vec<(u64, u64)>,
}

impl Router {
    /// A router sending to `targets` (in the ring's order), counted in `registry`.
    pub fn new(
        ring: Arc<Ring>,
        targets: Arc<[SocketAddr]>,
        datagram_bytes: usize,
        sanitize: bool,
        registry: Arc<CountsRegistry>,
    ) -> std::io::Result<Router> {
        let any_ipv6 = targets.iter().any(SocketAddr::is_ipv6);
        let socket = UdpSocket::bind(if any_ipv6 { "[::]:0" } else { "0.0.0.0:0" })?;
        refusals::report(&socket, any_ipv6)?;
        let buffers = targets.iter().map(|_| Vec::with_capacity(datagram_bytes)).collect();
        let counts = registry.register();
        let targets_len = targets.len();
        Ok(Router {
            ring,
            targets,
            socket,
            buffers,
            datagram_bytes,
            sanitize,
            key: String::new(),
            counts,
            registry,
            pending: Pending { per_node: vec![(0, 0); targets_len], ..Pending::default() },
        })
    }

    /// Routes every line of a packet (a datagram, or whole lines of a stream).
    pub fn route(&mut self, packet: &[u8]) {
        for line in proto::lines(packet) {
            self.pending.lines += 1;
            if let Some(node) = self.owner_of(line) {
                self.push(node, line);
            }
        }
    }

    /// The aggregator that owns the line's series, or `None` for a line not to send.
    fn owner_of(&mut self, line: &[u8]) -> Option<usize> {
        self.key.clear();
        match proto::scan_lines(line).next()? {
            Scanned::Simple(metric) if metric.tags.is_empty() => self.key.push_str(metric.name),
            Scanned::Simple(metric) => metric.push_key(&mut self.key),
            Scanned::Other(line) => match proto::parse_line(line) {
                Line::Metrics(mut values) => match values.next() {
                    Some(Ok(metric)) => {
                        proto::key::push_series_key(&mut self.key, metric.name, metric.tags, self.sanitize)
                    }
                    _ => {
                        self.pending.bad_lines += 1;
                        return None;
                    }
                },
                Line::Event | Line::ServiceCheck => {
                    self.pending.events += 1;
                    return None;
                }
            },
        }
        if self.key.is_empty() {
            self.pending.bad_lines += 1;
            return None;
        }
        let node = self.ring.owner(self.key.as_bytes());
        if !self.ring.nodes()[node].is_up() {
            self.pending.to_down_nodes += 1;
            self.pending.per_node[node].1 += 1;
        }
        Some(node)
    }

    fn push(&mut self, node: usize, line: &[u8]) {
        if !self.buffers[node].is_empty() && self.buffers[node].len() + line.len() + 1 > self.datagram_bytes {
            self.send(node);
        }
        let buffer = &mut self.buffers[node];
        buffer.extend_from_slice(line);
        buffer.push(b'\n');
        self.pending.forwarded += 1;
        self.pending.per_node[node].0 += 1;
    }

    fn send(&mut self, node: usize) {
        let buffer = &mut self.buffers[node];
        // The last newline is left off, as clients send datagrams.
        let payload = &buffer[..buffer.len().saturating_sub(1)];
        let mut sent = self.socket.send_to(payload, self.targets[node]);
        if sent.as_ref().is_err_and(refusals::is_earlier_refusal) {
            // The error was an earlier datagram's (queued by the kernel for this socket);
            // this one was not sent yet.
            sent = self.socket.send_to(payload, self.targets[node]);
        }
        match sent {
            Ok(_) => self.counts.datagrams.add(1),
            Err(_) => {
                self.counts.send_errors.add(1);
                self.counts.per_node[node].send_errors.add(1);
            }
        }
        buffer.clear();
    }

    /// Counts a line refused before routing (longer than a stream allows).
    pub fn count_bad_line(&mut self) {
        self.pending.lines += 1;
        self.pending.bad_lines += 1;
    }

    /// Sends every buffer holding lines and publishes the counts (at the end of each batch).
    pub fn flush(&mut self) {
        for node in 0..self.buffers.len() {
            if !self.buffers[node].is_empty() {
                self.send(node);
            }
        }
        let (counts, pending) = (&self.counts, &mut self.pending);
        for (node, (lines, to_down)) in counts.per_node.iter().zip(pending.per_node.iter_mut()) {
            node.lines.add(std::mem::take(lines));
            node.to_down.add(std::mem::take(to_down));
        }
        counts.lines.add(std::mem::take(&mut pending.lines));
        counts.forwarded.add(std::mem::take(&mut pending.forwarded));
        counts.bad_lines.add(std::mem::take(&mut pending.bad_lines));
        counts.events.add(std::mem::take(&mut pending.events));
        counts.to_down_nodes.add(std::mem::take(&mut pending.to_down_nodes));
        let targets = &self.targets;
        refusals::drain(&self.socket, |destination| {
            counts.refused.add(1);
            if let Some(node) = destination.and_then(|to| targets.iter().position(|&target| target == to)) {
                counts.per_node[node].refused.add(1);
            }
        });
    }
}

impl Drop for Router {
    fn drop(&mut self) {
        self.flush();
        self.registry.retire(&self.counts);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fleet::ring::Node;
    use std::time::Duration;

    /// Two receiving sockets as aggregators and a router to them.
    fn setup(datagram_bytes: usize) -> (Router, Vec<UdpSocket>, Arc<CountsRegistry>) {
        let sockets: Vec<UdpSocket> = (0..2).map(|_| UdpSocket::bind("127.0.0.1:0").unwrap()).collect();
        let targets: Arc<[SocketAddr]> = sockets.iter().map(|s| s.local_addr().unwrap()).collect();
        let ring = Arc::new(Ring::new(targets.iter().map(|t| Node::new(t.to_string())).collect()));
        let registry = Arc::new(CountsRegistry::new(2));
        let router = Router::new(ring, targets, datagram_bytes, true, registry.clone()).unwrap();
        sockets.iter().for_each(|s| s.set_read_timeout(Some(Duration::from_millis(200))).unwrap());
        (router, sockets, registry)
    }

    fn received(socket: &UdpSocket) -> Vec<String> {
        let mut datagrams = Vec::new();
        let mut buffer = [0u8; 65_536];
        while let Ok(n) = socket.recv(&mut buffer) {
            datagrams.push(String::from_utf8_lossy(&buffer[..n]).into_owned());
        }
        datagrams
    }

    #[test]
    fn a_series_goes_to_one_aggregator_whatever_its_tag_order_or_spelling() {
        let (mut router, sockets, registry) = setup(1472);
        let lines = [
            "api.latency:12|ms|#route:/a,env:prod",
            "api.latency:13|ms|@0.5|#env:prod,route:/a",
            "api.latency:14|ms|#env:prod,route:/a",
            "odd name/with spaces:1|c",
            "odd_name-with_spaces:2|c",
            "bad line",
            "_e{1,1}:a|b",
            "",
        ];
        router.route(lines.join("\n").as_bytes());
        router.flush();
        let got: Vec<Vec<String>> = sockets.iter().map(received).collect();
        let all: Vec<&str> = got.iter().flatten().flat_map(|d| d.split('\n')).collect();
        assert_eq!(all.len(), 5, "{got:?}");
        let holder = |needle: &str| got.iter().position(|d| d.iter().any(|d| d.contains(needle))).unwrap();
        assert_eq!(holder("api.latency:12"), holder("api.latency:13"));
        assert_eq!(holder("api.latency:12"), holder("api.latency:14"));
        assert_eq!(holder("odd name"), holder("odd_name-with"), "the sanitised key decides");
        let total = registry.total();
        let counts = [total.lines.get(), total.forwarded.get(), total.bad_lines.get(), total.events.get()];
        assert_eq!(counts, [7, 5, 1, 1]);
        assert_eq!(total.per_node.iter().map(|node| node.lines.get()).sum::<u64>(), 5);
    }

    #[test]
    fn lines_are_packed_into_datagrams_within_the_size() {
        let (mut router, sockets, registry) = setup(512);
        let packet: String = (0..400).map(|i| format!("c.{}:1|c\n", i % 7)).collect();
        router.route(packet.as_bytes());
        router.flush();
        drop(router);
        let datagrams: Vec<String> = sockets.iter().flat_map(received).collect();
        assert!(datagrams.iter().all(|d| d.len() <= 512 && !d.ends_with('\n')));
        assert_eq!(datagrams.iter().map(|d| d.split('\n').count()).sum::<usize>(), 400);
        assert_eq!(registry.total().datagrams.get(), datagrams.len() as u64);
        assert_eq!(registry.total().forwarded.get(), 400, "an ended router's counts stay");
    }
}
