//! What was written to carbon but may not have been read by it.
//!
//! A successful write only means the kernel took the bytes: up to a send buffer and carbon's
//! receive buffer of them die with a carbon that is killed. Graphite points are idempotent by
//! name and timestamp, so after a broken connection the newest payloads written are sent
//! again. The window keeps as many as `retryBufferBytes` leaves room for (unsent data comes
//! first); what left the window while it could still have been in flight is counted as
//! possibly lost when the connection breaks.

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
    fn reads_the_kernels_buffer_limits() {
        assert!(in_flight_capacity() > 0);
    }
}
