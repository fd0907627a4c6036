//! What was written to carbon but may not have been read by it.
//!
//! A successful write only means the kernel took the bytes: up to a send buffer and carbon's
//! receive buffer of them die with a carbon that is killed. Graphite points are idempotent by
//! name and timestamp, so after a broken connection the newest payloads written are sent
//! again. The window keeps what may still be lost and no more: after each write it asks the
//! kernel ([`AtRisk`]) how many bytes carbon's host has not acknowledged (`SIOCOUTQ`) and how
//! many it may hold acknowledged but not read by carbon (bounded by its receive buffer, seen
//! through the window it advertises, `TCP_INFO`), and lets go of older payloads, which carbon
//! has read. A
//! carbon that keeps up leaves little in the window; one that stalls keeps it full up to what
//! `retryBufferBytes` leaves room for (unsent data comes first). What left the window for room
//! while it could still have been in flight is counted as possibly lost when the connection
//! breaks.

use std::collections::VecDeque;

use super::GraphiteProtocol;

/// One encoded chunk as it goes on the wire, and the Graphite points in it.
#[derive(Debug)]
pub struct Payload {
    /// The bytes.
    pub bytes: Vec<u8>,
    /// Graphite points (lines) in it.
    pub lines: usize,
}

impl Payload {
    /// `chunk` (plaintext lines) in `protocol`'s form.
    pub fn new(chunk: String, protocol: GraphiteProtocol) -> Self {
        let lines = chunk.bytes().filter(|&b| b == b'\n').count();
        let bytes = match protocol {
            GraphiteProtocol::Text => chunk.into_bytes(),
            GraphiteProtocol::Pickle => super::pickle::from_lines(&chunk),
        };
        Payload { bytes, lines }
    }
}

/// Payloads written on the current connection, newest last.
#[derive(Debug)]
pub struct SentWindow {
    /// Written payloads kept for a resend, with the connection offset each ends at.
    kept: VecDeque<(Payload, u64)>,
    kept_bytes: u64,
    /// Bytes written on the current connection.
    written: u64,
    /// The most bytes both socket buffers can hold: data written longer ago than this has
    /// reached carbon's process.
    in_flight_capacity: u64,
    /// Payloads let go of while still possibly in flight: (end offset, points).
    let_go: VecDeque<(u64, usize)>,
}

/// What a broken connection means for the window.
#[derive(Debug)]
pub struct Broken {
    /// Payloads to send again, oldest first.
    pub resend: Vec<Payload>,
    /// Points that were let go of while they could still have been in flight.
    pub possibly_lost: usize,
}

impl SentWindow {
    /// An empty window; `in_flight_capacity` bounds what a connection can hold unread.
    pub fn new(in_flight_capacity: u64) -> Self {
        SentWindow { kept: VecDeque::new(), kept_bytes: 0, written: 0, in_flight_capacity, let_go: VecDeque::new() }
    }

    /// Bytes kept for a resend.
    pub fn bytes(&self) -> u64 {
        self.kept_bytes
    }

    /// Records `payload` as written.
    pub fn written(&mut self, payload: Payload) {
        self.written += payload.bytes.len() as u64;
        self.kept_bytes += payload.bytes.len() as u64;
        self.kept.push_back((payload, self.written));
        let settled = self.written.saturating_sub(self.in_flight_capacity);
        while self.let_go.front().is_some_and(|(end, _)| *end <= settled) {
            self.let_go.pop_front();
        }
    }

    /// Lets go of the oldest payloads that lie before the newest `at_risk` bytes written: the
    /// peer has read them.
    pub fn settle(&mut self, at_risk: u64) {
        while let Some((payload, _)) = self.kept.front() {
            let length = payload.bytes.len() as u64;
            if self.kept_bytes - length < at_risk {
                break;
            }
            self.kept_bytes -= length;
            self.kept.pop_front();
        }
    }

    /// Lets go of the oldest payloads until at most `bytes` are kept.
    pub fn shrink_to(&mut self, bytes: u64) {
        let settled = self.written.saturating_sub(self.in_flight_capacity);
        while self.kept_bytes > bytes {
            let Some((payload, end)) = self.kept.pop_front() else { break };
            self.kept_bytes -= payload.bytes.len() as u64;
            if end > settled {
                self.let_go.push_back((end, payload.lines));
            }
        }
    }

    /// The connection broke: everything kept is to be sent again, on a new connection.
    pub fn broken(&mut self) -> Broken {
        let resend = self.kept.drain(..).map(|(payload, _)| payload).collect();
        let possibly_lost = self.let_go.drain(..).map(|(_, lines)| lines).sum();
        self.kept_bytes = 0;
        self.written = 0;
        Broken { resend, possibly_lost }
    }
}

/// What of the bytes written on a connection may still be lost with the peer: those its host
/// has not acknowledged, and those acknowledged that the peer's process may not have read.
/// The peer's kernel advertises the free room of its receive buffer as its window, at least
/// half of it (Linux: `tcp_adv_win_scale`, the skb scaling ratio): so what lies unread is at
/// most twice the window's shrinking from the widest seen on the connection to the one
/// offered now, plus the receive buffer a connection starts with (`tcp_rmem`'s default, 128
/// KiB: early on, the widest window seen is below the room the buffer has; the buffer grows
/// past it only as the peer reads). A peer that keeps up offers its widest window: then only
/// that first buffer's worth is kept.
#[derive(Debug)]
pub struct AtRisk {
    widest_window: u64,
    /// The receive buffer a connection starts with.
    first_buffer: u64,
}

impl Default for AtRisk {
    fn default() -> Self {
        let default =
            |path: &str| -> Option<u64> { std::fs::read_to_string(path).ok()?.split_whitespace().nth(1)?.parse().ok() };
        AtRisk { widest_window: 0, first_buffer: default("/proc/sys/net/ipv4/tcp_rmem").unwrap_or(131_072) }
    }
}

impl AtRisk {
    /// The bytes at risk on `connection` now; `None` when the kernel does not say (then
    /// nothing is let go of).
    pub fn now(&mut self, connection: &impl std::os::fd::AsRawFd) -> Option<u64> {
        let fd = connection.as_raw_fd();
        let window = peer_window(fd)?;
        self.widest_window = self.widest_window.max(window);
        Some(unacknowledged(fd)? + 2 * (self.widest_window - window) + self.first_buffer)
    }

    /// A new connection: its peer's window is learnt again.
    pub fn reset(&mut self) {
        self.widest_window = 0;
    }
}

/// Bytes written on the socket that its peer has not acknowledged (`SIOCOUTQ`).
fn unacknowledged(fd: std::os::fd::RawFd) -> Option<u64> {
    let mut queued: libc::c_int = 0;
    // SAFETY: TIOCOUTQ (SIOCOUTQ) writes one int through the pointer, which is valid.
    let done = unsafe { libc::ioctl(fd, libc::TIOCOUTQ, &mut queued) };
    (done == 0 && queued >= 0).then_some(queued as u64)
}

/// The receive window the peer advertised last (`tcpi_snd_wnd` of `TCP_INFO`, Linux 5.4 on).
fn peer_window(fd: std::os::fd::RawFd) -> Option<u64> {
    /// Where `tcpi_snd_wnd` lies in `struct tcp_info`.
    const SND_WND: usize = 228;
    let mut info = [0u8; 256];
    let mut length = info.len() as libc::socklen_t;
    // SAFETY: the kernel writes at most `length` bytes into `info` and says how many.
    let done =
        unsafe { libc::getsockopt(fd, libc::IPPROTO_TCP, libc::TCP_INFO, info.as_mut_ptr().cast(), &mut length) };
    if done != 0 || (length as usize) < SND_WND + 4 {
        return None;
    }
    let bytes = [info[SND_WND], info[SND_WND + 1], info[SND_WND + 2], info[SND_WND + 3]];
    Some(u32::from_ne_bytes(bytes) as u64)
}

/// The most bytes a TCP connection can hold unread on this host: the largest send buffer plus
/// the largest receive buffer the kernel grants (`net.ipv4.tcp_wmem`, `tcp_rmem`), 16 MiB
/// when they cannot be read.
pub fn in_flight_capacity() -> u64 {
    let largest =
        |path: &str| -> Option<u64> { std::fs::read_to_string(path).ok()?.split_whitespace().nth(2)?.parse().ok() };
    match (largest("/proc/sys/net/ipv4/tcp_wmem"), largest("/proc/sys/net/ipv4/tcp_rmem")) {
        (Some(send), Some(receive)) => send + receive,
        _ => 16 * 1024 * 1024,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload(bytes: usize, lines: usize) -> Payload {
        Payload { bytes: vec![b'x'; bytes], lines }
    }

    #[test]
    fn a_broken_connection_resends_what_was_kept() {
        let mut window = SentWindow::new(1000);
        for _ in 0..3 {
            window.written(payload(100, 2));
        }
        let broken = window.broken();
        assert_eq!((broken.resend.len(), broken.possibly_lost, window.bytes()), (3, 0, 0));
    }

    #[test]
    fn counts_what_it_let_go_of_while_in_flight() {
        let mut window = SentWindow::new(250);
        for _ in 0..3 {
            window.written(payload(100, 2));
        }
        window.shrink_to(100); // lets go of payloads ending at 100 (settled: written 300 - 250 = 50 < 100) and 200
        assert_eq!(window.bytes(), 100);
        let broken = window.broken();
        assert_eq!((broken.resend.len(), broken.possibly_lost), (1, 4));
    }

    #[test]
    fn what_is_older_than_the_buffers_is_settled() {
        let mut window = SentWindow::new(150);
        for _ in 0..2 {
            window.written(payload(100, 2));
        }
        window.shrink_to(0); // the first ended at 100 > 200 - 150: in flight; the second too
        for _ in 0..3 {
            window.written(payload(100, 2));
        }
        window.shrink_to(0);
        // written 500: payloads ending at or before 350 are settled; the last two are not.
        let broken = window.broken();
        assert_eq!((broken.resend.len(), broken.possibly_lost), (0, 4));
    }

    #[test]
    fn settling_keeps_the_newest_payloads_that_cover_what_is_at_risk() {
        // (bytes at risk, payloads kept of five of 100 bytes)
        let cases = [(0, 0), (1, 1), (100, 1), (101, 2), (250, 3), (500, 5), (10_000, 5)];
        for (at_risk, kept) in cases {
            let mut window = SentWindow::new(1000);
            for _ in 0..5 {
                window.written(payload(100, 2));
            }
            window.settle(at_risk);
            assert_eq!(window.bytes(), kept * 100, "{at_risk} at risk");
            let broken = window.broken();
            assert_eq!((broken.resend.len() as u64, broken.possibly_lost), (kept, 0), "settled is not lost");
        }
    }

    /// A peer that reads everything leaves nothing at risk once it acknowledged it; one that
    /// reads nothing leaves everything written at risk.
    #[test]
    fn the_kernel_says_what_a_peer_has_not_read() {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut sender = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut receiver, _) = listener.accept().unwrap();
        let mut at_risk = AtRisk::default();
        let Some(idle) = at_risk.now(&sender) else { return }; // a kernel before 5.4
        assert_eq!(idle, at_risk.first_buffer, "nothing written: the first buffer's worth");
        sender.write_all(&[7u8; 100_000]).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(100));
        let unread = at_risk.now(&sender).unwrap();
        assert!(unread >= 90_000, "written, not read: {unread} at risk");
        let mut read = vec![0u8; 100_000];
        receiver.read_exact(&mut read).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(100));
        let after = at_risk.now(&sender).unwrap();
        assert!(after < at_risk.first_buffer + 10_000, "read: {after} at risk (was {unread})");
    }

    #[test]
    fn reads_the_kernels_buffer_limits() {
        assert!(in_flight_capacity() > 0);
    }
}
