//! Datagram readers: OS threads receiving batches with `recvmmsg` into preallocated buffers,
//! one packet per datagram, a batch aggregated under one short lock of the reader's own table.

use std::io::ErrorKind;
use std::net::UdpSocket;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixDatagram;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::allow::AllowView;
use super::recv::{Batch, Received};
use super::{Shard, TapView};
use crate::clock::unix_now_s;
use crate::telemetry::EdgeCounters;

/// How often a blocked reader looks at the stop flag.
const STOP_POLL: Duration = Duration::from_millis(100);
/// After a receive that found the socket nearly empty (at most `NEARLY_EMPTY` datagrams), how
/// long a reader waits before the next: datagrams gather in the socket buffer, so one system
/// call and one wake-up serve many of them. It adds at most this much latency, and never
/// engages when the socket holds more (a busy reader never pauses).
const COALESCE: Duration = Duration::from_micros(50);
/// See [`COALESCE`].
const NEARLY_EMPTY: usize = 2;
/// After the drain's time ran out, how long a reader reads (without parsing) only to count
/// what the socket still held.
const COUNT_LEFTOVERS_FOR: Duration = Duration::from_millis(50);

/// A bound datagram socket, shared by the readers that receive from it.
#[derive(Debug)]
pub enum DatagramSocket {
    /// UDP over IPv4 or IPv6.
    Udp(UdpSocket),
    /// A Unix datagram socket.
    Unix(UnixDatagram),
}

impl DatagramSocket {
    /// The socket's descriptor.
    pub(crate) fn fd(&self) -> RawFd {
        match self {
            DatagramSocket::Udp(socket) => socket.as_raw_fd(),
            DatagramSocket::Unix(socket) => socket.as_raw_fd(),
        }
    }

    fn set_read_timeout(&self, timeout: Option<Duration>) -> std::io::Result<()> {
        match self {
            DatagramSocket::Udp(socket) => socket.set_read_timeout(timeout),
            DatagramSocket::Unix(socket) => socket.set_read_timeout(timeout),
        }
    }
}

/// A socket and the highest value of its kernel drop counter any of its readers has seen, so
/// that readers sharing it count each drop once.
#[derive(Debug)]
pub struct DatagramSource {
    socket: DatagramSocket,
    kernel_drops_seen: AtomicU64,
}

impl DatagramSource {
    /// Wraps a bound socket for its readers.
    pub fn new(socket: DatagramSocket) -> std::io::Result<Arc<DatagramSource>> {
        socket.set_read_timeout(Some(STOP_POLL))?;
        Ok(Arc::new(DatagramSource { socket, kernel_drops_seen: AtomicU64::new(0) }))
    }

    /// The socket.
    pub(crate) fn socket(&self) -> &DatagramSocket {
        &self.socket
    }

    /// The drops new since the last report, from the kernel's cumulative counter.
    pub(crate) fn new_drops(&self, cumulative: u32) -> u64 {
        let cumulative = u64::from(cumulative);
        cumulative.saturating_sub(self.kernel_drops_seen.fetch_max(cumulative, Ordering::Relaxed))
    }
}

/// How a reader receives.
#[derive(Debug, Clone, Copy)]
pub struct BatchShape {
    /// Datagrams per `recvmmsg`.
    pub datagrams: usize,
    /// Bytes per datagram; longer ones are truncated and counted.
    pub datagram_bytes: usize,
}

/// How a reader stops.
#[derive(Debug, Clone)]
pub struct Stopping {
    /// Set at shutdown.
    pub flag: Arc<AtomicBool>,
    /// How long a reader keeps reading what its socket holds after the flag is set
    /// (`shutdownDrainMs`): senders that never pause would otherwise keep it going.
    pub drain_limit: Duration,
    /// Where what was left unread is counted.
    pub edges: Arc<EdgeCounters>,
}

/// Starts a reader thread: it aggregates every datagram into `shard` until the stop flag is
/// set, then reads what is left in the socket buffer (for up to the drain limit; what is
/// still there then is counted and logged) and ends.
pub fn spawn_datagram_reader(
    name: String,
    source: Arc<DatagramSource>,
    shard: Arc<Shard>,
    stopping: Stopping,
    tap: TapView,
    shape: BatchShape,
    allow: AllowView,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new().name(name).spawn(move || {
        let mut batch = Batch::new(shape.datagrams, shape.datagram_bytes);
        let mut reader = Reader { source: &source, shard: &shard, tap, allow, edges: stopping.edges.clone() };
        while !stopping.flag.load(Ordering::Relaxed) {
            let received = reader.receive(&mut batch, false);
            if received > 0 && received <= NEARLY_EMPTY {
                std::thread::sleep(COALESCE);
            }
        }
        reader.drain(&mut batch, &stopping);
        shard.close();
    })
}

struct Reader<'a> {
    source: &'a DatagramSource,
    shard: &'a Shard,
    tap: TapView,
    /// The sources the listener takes (`servers[].allow`).
    allow: AllowView,
    edges: Arc<EdgeCounters>,
}

impl Reader<'_> {
    /// Reads until the socket is empty or `stopping.drain_limit` passes; then counts (and
    /// discards) what the socket still holds.
    fn drain(&mut self, batch: &mut Batch, stopping: &Stopping) {
        let started = Instant::now();
        loop {
            if self.receive(batch, true) == 0 {
                return;
            }
            if started.elapsed() >= stopping.drain_limit {
                break;
            }
        }
        let counting = Instant::now();
        let mut left = 0u64;
        while counting.elapsed() < COUNT_LEFTOVERS_FOR {
            match batch.receive(self.source.socket.fd(), true, false) {
                Ok(received) if received.datagrams > 0 => left += received.datagrams as u64,
                _ => break,
            }
        }
        stopping.edges.shutdown_unread_datagrams.add(left);
        let limit_ms = stopping.drain_limit.as_millis() as u64;
        tracing::warn!(
            left,
            limit_ms,
            "drain time ran out while the listener stopped: datagrams still queued were dropped (shutdownDrainMs)"
        );
    }

    /// One batch; how many datagrams it brought (0 when nothing was there).
    fn receive(&mut self, batch: &mut Batch, dont_wait: bool) -> usize {
        // Every datagram's source is read (the kernel copies 16 or 28 bytes; an A/B run in
        // BENCHMARKS.md found no cost): an allow list filters by it, and a bad line's example
        // names its sender.
        match batch.receive(self.source.socket.fd(), dont_wait, true) {
            Ok(received) => {
                self.accept(batch, received);
                received.datagrams
            }
            Err(error)
                if matches!(error.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted) =>
            {
                0
            }
            Err(error) => {
                tracing::warn!(%error, "datagram receive failed");
                std::thread::sleep(STOP_POLL);
                0
            }
        }
    }

    fn accept(&mut self, batch: &Batch, received: Received) {
        let kernel_drops = received.kernel_drops.map_or(0, |cumulative| self.source.new_drops(cumulative));
        // With an allowlist, datagrams from elsewhere are dropped (and counted) before anything.
        let allow = self.allow.checking();
        let admitted = |index: usize| allow.is_none_or(|allow| batch.source(index).is_some_and(|ip| allow.admits(ip)));
        let refused = if allow.is_some() { (0..received.datagrams).filter(|&i| !admitted(i)).count() } else { 0 };
        self.edges.refused_ingest_datagrams.add(refused as u64);
        if let Some(tap) = self.tap.current() {
            batch.datagrams().enumerate().filter(|(i, _)| admitted(*i)).for_each(|(_, datagram)| tap.offer(datagram));
        }
        let now = unix_now_s();
        self.shard.with_table(|table| {
            for (index, datagram) in batch.datagrams().enumerate() {
                if refused > 0 && !admitted(index) {
                    continue;
                }
                // A bad line's example names its sender.
                table.set_source(batch.source(index));
                if batch.truncated(index) {
                    // The last line was cut off: it is discarded whole, never parsed as a name.
                    let whole = datagram.iter().rposition(|&b| b == b'\n').map_or(0, |newline| newline + 1);
                    table.insert_packet(now, &datagram[..whole]);
                    table.count_rejected_line(proto::ParseError::TooLong, &datagram[whole..]);
                } else {
                    table.insert_packet(now, datagram);
                }
            }
            table.count_socket_losses(received.truncated as u64, kernel_drops);
        });
    }
}

#[cfg(test)]
mod tests {
    use std::net::UdpSocket;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;
    use std::time::Duration;

    use agg::AggConfig;

    use super::{spawn_datagram_reader, BatchShape, DatagramSocket, DatagramSource, Stopping};
    use crate::aggregation::Aggregation;
    use crate::ingest::TapSwitch;
    use crate::telemetry::EdgeCounters;

    /// A reader stopped with `datagrams` queued and `drain_limit` to read them: what it
    /// aggregated, and what it counted as left.
    fn stop_with_queued(datagrams: u64, drain_limit: Duration) -> (u64, u64) {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        let sender = UdpSocket::bind("127.0.0.1:0").unwrap();
        for n in 0..datagrams {
            sender.send_to(format!("c:{n}|c").as_bytes(), socket.local_addr().unwrap()).unwrap();
        }
        let source = DatagramSource::new(DatagramSocket::Udp(socket)).unwrap();
        let edges = Arc::new(EdgeCounters::default());
        let stopping = Stopping { flag: Arc::new(AtomicBool::new(true)), drain_limit, edges: edges.clone() };
        let aggregation = Aggregation::new(AggConfig::default());
        let shape = BatchShape { datagrams: 4, datagram_bytes: 512 };
        let shard = aggregation.shards.register();
        let tap = TapSwitch::new(None).view();
        let allow = crate::ingest::allow::AllowSwitch::new(Default::default()).view();
        let reader = spawn_datagram_reader("test".into(), source, shard, stopping, tap, shape, allow).unwrap();
        reader.join().unwrap();
        let read = aggregation.current().totals().packets;
        (read, edges.shutdown_unread_datagrams.get())
    }

    #[test]
    fn shutdown_reads_what_is_queued_and_counts_what_it_could_not() {
        assert_eq!(stop_with_queued(100, Duration::from_secs(5)), (100, 0));
        assert_eq!(stop_with_queued(100, Duration::ZERO), (4, 96));
    }
}
