//! Datagram readers: one OS thread per socket, blocking reads, one packet per datagram.

use std::io::ErrorKind;
use std::net::UdpSocket;
use std::os::unix::net::UnixDatagram;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use super::{unix_now_s, Shard, Tap};

/// How often a blocked reader looks at the stop flag.
const STOP_POLL: Duration = Duration::from_millis(100);
/// Large enough for any UDP payload (65,507 bytes) and typical Unix datagrams.
const BUFFER_BYTES: usize = 65_536;

/// A bound datagram socket.
#[derive(Debug)]
pub enum DatagramSocket {
    /// UDP over IPv4 or IPv6.
    Udp(UdpSocket),
    /// A Unix datagram socket.
    Unix(UnixDatagram),
}

impl DatagramSocket {
    fn recv(&self, buffer: &mut [u8]) -> std::io::Result<usize> {
        match self {
            DatagramSocket::Udp(socket) => socket.recv(buffer),
            DatagramSocket::Unix(socket) => socket.recv(buffer),
        }
    }

    fn set_read_timeout(&self, timeout: Option<Duration>) -> std::io::Result<()> {
        match self {
            DatagramSocket::Udp(socket) => socket.set_read_timeout(timeout),
            DatagramSocket::Unix(socket) => socket.set_read_timeout(timeout),
        }
    }

    fn set_nonblocking(&self) -> std::io::Result<()> {
        match self {
            DatagramSocket::Udp(socket) => socket.set_nonblocking(true),
            DatagramSocket::Unix(socket) => socket.set_nonblocking(true),
        }
    }
}

/// Starts a reader thread: it aggregates every datagram into `shard` until `stop` is set, then
/// reads what is left in the socket buffer and ends.
pub fn spawn_datagram_reader(
    name: String,
    socket: DatagramSocket,
    shard: Arc<Shard>,
    stop: Arc<AtomicBool>,
    tap: Option<Tap>,
) -> std::io::Result<JoinHandle<()>> {
    socket.set_read_timeout(Some(STOP_POLL))?;
    std::thread::Builder::new().name(name).spawn(move || {
        let mut buffer = vec![0u8; BUFFER_BYTES];
        read_until_stopped(&socket, &mut buffer, &shard, &stop, tap.as_ref());
        drain(&socket, &mut buffer, &shard, tap.as_ref());
        shard.close();
    })
}

fn read_until_stopped(socket: &DatagramSocket, buffer: &mut [u8], shard: &Shard, stop: &AtomicBool, tap: Option<&Tap>) {
    while !stop.load(Ordering::Relaxed) {
        match socket.recv(buffer) {
            Ok(length) => accept(&buffer[..length], shard, tap),
            Err(error)
                if matches!(error.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted) => {}
            Err(error) => {
                tracing::warn!(%error, "datagram receive failed");
                std::thread::sleep(STOP_POLL);
            }
        }
    }
}

/// Reads what the kernel still holds, without waiting.
fn drain(socket: &DatagramSocket, buffer: &mut [u8], shard: &Shard, tap: Option<&Tap>) {
    if socket.set_nonblocking().is_err() {
        return;
    }
    while let Ok(length) = socket.recv(buffer) {
        accept(&buffer[..length], shard, tap);
    }
}

fn accept(packet: &[u8], shard: &Shard, tap: Option<&Tap>) {
    if let Some(tap) = tap {
        tap.offer(packet);
    }
    shard.insert_packet(unix_now_s(), packet);
}
