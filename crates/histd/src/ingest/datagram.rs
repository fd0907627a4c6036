//! Datagram readers: OS threads receiving batches with `recvmmsg` into preallocated buffers,
//! one packet per datagram, a batch aggregated under one short lock of the reader's own table.

use std::io::ErrorKind;
use std::net::UdpSocket;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixDatagram;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use super::recv::{Batch, Received};
use super::{unix_now_s, Shard, Tap};

/// How often a blocked reader looks at the stop flag.
const STOP_POLL: Duration = Duration::from_millis(100);
/// After a receive that found the socket nearly empty (at most `NEARLY_EMPTY` datagrams), how
/// long a reader waits before the next: datagrams gather in the socket buffer, so one system
/// call and one wake-up serve many of them. It adds at most this much latency, and never
/// engages when the socket holds more (a busy reader never pauses).
const COALESCE: Duration = Duration::from_micros(50);
/// See [`COALESCE`].
const NEARLY_EMPTY: usize = 2;
/// At shutdown, how long a reader keeps reading what is queued (bounded: senders that never
/// pause would otherwise keep it going).
const DRAIN_LIMIT: Duration = Duration::from_secs(1);

/// A bound datagram socket, shared by the readers that receive from it.
#[derive(Debug)]
pub enum DatagramSocket {
    /// UDP over IPv4 or IPv6.
    Udp(UdpSocket),
    /// A Unix datagram socket.
    Unix(UnixDatagram),
}

impl DatagramSocket {
    fn fd(&self) -> RawFd {
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

    /// The drops new since the last report, from the kernel's cumulative counter.
    fn new_drops(&self, cumulative: u32) -> u64 {
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

/// Starts a reader thread: it aggregates every datagram into `shard` until `stop` is set, then
/// reads what is left in the socket buffer and ends.
pub fn spawn_datagram_reader(
    name: String,
    source: Arc<DatagramSource>,
    shard: Arc<Shard>,
    stop: Arc<AtomicBool>,
    tap: Option<Tap>,
    shape: BatchShape,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new().name(name).spawn(move || {
        let mut batch = Batch::new(shape.datagrams, shape.datagram_bytes);
        let reader = Reader { source: &source, shard: &shard, tap: tap.as_ref() };
        while !stop.load(Ordering::Relaxed) {
            let received = reader.receive(&mut batch, false);
            if received > 0 && received <= NEARLY_EMPTY {
                std::thread::sleep(COALESCE);
            }
        }
        let draining = std::time::Instant::now();
        while draining.elapsed() < DRAIN_LIMIT && reader.receive(&mut batch, true) > 0 {}
        shard.close();
    })
}

struct Reader<'a> {
    source: &'a DatagramSource,
    shard: &'a Shard,
    tap: Option<&'a Tap>,
}

impl Reader<'_> {
    /// One batch; how many datagrams it brought (0 when nothing was there).
    fn receive(&self, batch: &mut Batch, dont_wait: bool) -> usize {
        match batch.receive(self.source.socket.fd(), dont_wait) {
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

    fn accept(&self, batch: &Batch, received: Received) {
        let kernel_drops = received.kernel_drops.map_or(0, |cumulative| self.source.new_drops(cumulative));
        if let Some(tap) = self.tap {
            batch.datagrams().for_each(|datagram| tap.offer(datagram));
        }
        let now = unix_now_s();
        self.shard.with_table(|table| {
            for datagram in batch.datagrams() {
                table.insert_packet(now, datagram);
            }
            table.count_socket_losses(received.truncated as u64, kernel_drops);
        });
    }
}
