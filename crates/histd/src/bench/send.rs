//! The sender: `sendmmsg` batches on a connected UDP socket, paced to a target rate, with a
//! progress line.

use std::io::Write;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use super::workload::Pool;

/// Datagrams per `sendmmsg`.
const BATCH: usize = 64;

/// What was sent.
#[derive(Debug, Clone, Copy)]
pub struct Sent {
    /// Lines sent.
    pub lines: u64,
    /// How long sending took.
    pub elapsed: Duration,
}

/// Sends the pool in turn to `target` for `duration`, at `rate` lines per second (0: as fast
/// as possible).
pub fn send(target: SocketAddr, pool: &Pool, rate: f64, duration: Duration, progress: bool) -> std::io::Result<Sent> {
    let socket = UdpSocket::bind(if target.is_ipv6() { "[::]:0" } else { "0.0.0.0:0" })?;
    socket.connect(target)?;
    let fd = socket.as_raw_fd();
    let started = Instant::now();
    let mut datagrams = 0u64;
    let mut next = 0usize;
    let mut last_report = started;
    while started.elapsed() < duration {
        if rate > 0.0 {
            pace(started, datagrams * pool.lines as u64, rate);
        }
        let sent = send_batch(fd, pool, next)?;
        datagrams += sent as u64;
        next = (next + sent) % pool.datagrams.len();
        if progress && last_report.elapsed() > Duration::from_millis(250) {
            last_report = Instant::now();
            show_progress(started, duration, datagrams * pool.lines as u64);
        }
    }
    if progress {
        eprintln!();
    }
    Ok(Sent { lines: datagrams * pool.lines as u64, elapsed: started.elapsed() })
}

/// Sleeps until `lines` are due at `rate` lines per second from `started`.
fn pace(started: Instant, lines: u64, rate: f64) {
    let due = Duration::from_secs_f64(lines as f64 / rate);
    if let Some(wait) = due.checked_sub(started.elapsed()) {
        if wait > Duration::from_micros(200) {
            std::thread::sleep(wait);
        }
    }
}

/// One `sendmmsg` of up to [`BATCH`] datagrams starting at `first`; returns how many went.
fn send_batch(fd: i32, pool: &Pool, first: usize) -> std::io::Result<usize> {
    let count = BATCH.min(pool.datagrams.len() - first);
    let mut iovecs: [libc::iovec; BATCH] = unsafe { std::mem::zeroed() };
    // SAFETY: zero is a valid mmsghdr.
    let mut headers: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
    for slot in 0..count {
        let datagram = &pool.datagrams[first + slot];
        iovecs[slot] = libc::iovec { iov_base: datagram.as_ptr() as *mut _, iov_len: datagram.len() };
        headers[slot].msg_hdr.msg_iov = &mut iovecs[slot];
        headers[slot].msg_hdr.msg_iovlen = 1;
    }
    loop {
        // SAFETY: the headers point at live iovecs, which point at live pool buffers.
        let sent = unsafe { libc::sendmmsg(fd, headers.as_mut_ptr(), count as u32, 0) };
        if sent >= 0 {
            return Ok(sent as usize);
        }
        let error = std::io::Error::last_os_error();
        match error.raw_os_error() {
            // The receiver is not there (yet) or the local queue is full: try again.
            Some(libc::ECONNREFUSED) | Some(libc::ENOBUFS) | Some(libc::EAGAIN) => continue,
            _ => return Err(error),
        }
    }
}

fn show_progress(started: Instant, duration: Duration, lines: u64) {
    let done = (started.elapsed().as_secs_f64() / duration.as_secs_f64()).min(1.0);
    let width = 30;
    let filled = (done * width as f64) as usize;
    let rate = lines as f64 / started.elapsed().as_secs_f64();
    eprint!("\r[{}{}] {:3.0}%  {} lines/s", "=".repeat(filled), " ".repeat(width - filled), done * 100.0, human(rate));
    let _ = std::io::stderr().flush();
}

/// `1.25M`, `830k`.
pub fn human(value: f64) -> String {
    match value {
        v if v >= 1e6 => format!("{:.2}M", v / 1e6),
        v if v >= 1e3 => format!("{:.0}k", v / 1e3),
        v => format!("{v:.0}"),
    }
}
