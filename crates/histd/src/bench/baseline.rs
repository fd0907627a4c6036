//! The machine's ceiling: a bare receiver that reads with `recvmmsg` and counts lines, no
//! parsing, no aggregation, on the same kind of socket histd uses.

use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::ingest::recv::{set_option, set_receive_buffer, Batch};

/// A running bare receiver.
pub struct Baseline {
    /// Where to send.
    pub address: SocketAddr,
    /// Lines counted so far.
    pub lines: Arc<AtomicU64>,
    /// The kernel's drop counter for the socket.
    pub kernel_drops: Arc<AtomicU64>,
    /// CPU time the receiver thread used, nanoseconds, set when it stops.
    pub cpu_ns: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Baseline {
    /// Starts a receiver on 127.0.0.1, optionally pinned to `cpu`.
    pub fn start(receive_buffer: usize, cpu: Option<usize>) -> std::io::Result<Baseline> {
        let socket = std::net::UdpSocket::bind("127.0.0.1:0")?;
        set_option(socket.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RXQ_OVFL, 1)?;
        set_receive_buffer(socket.as_raw_fd(), receive_buffer)?;
        socket.set_read_timeout(Some(std::time::Duration::from_millis(100)))?;
        let address = socket.local_addr()?;
        let (lines, kernel_drops, cpu_ns) =
            (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (lines, kernel_drops, cpu_ns, stop) =
                (lines.clone(), kernel_drops.clone(), cpu_ns.clone(), stop.clone());
            std::thread::spawn(move || {
                if let Some(cpu) = cpu {
                    pin_current_thread(cpu);
                }
                let mut batch = Batch::new(32, 65_536);
                while !stop.load(Ordering::Relaxed) {
                    let Ok(received) = batch.receive(socket.as_raw_fd(), false, false) else { continue };
                    let counted: u64 = batch.datagrams().map(count_lines).sum();
                    lines.fetch_add(counted, Ordering::Relaxed);
                    if let Some(drops) = received.kernel_drops {
                        kernel_drops.store(u64::from(drops), Ordering::Relaxed);
                    }
                }
                cpu_ns.store(thread_cpu_ns(), Ordering::Relaxed);
            })
        };
        Ok(Baseline { address, lines, kernel_drops, cpu_ns, stop, thread: Some(thread) })
    }

    /// Stops the receiver and waits for it.
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Lines in a datagram: newlines, plus a last line without one.
fn count_lines(datagram: &[u8]) -> u64 {
    let newlines = datagram.iter().filter(|&&b| b == b'\n').count() as u64;
    newlines + u64::from(datagram.last().is_some_and(|&b| b != b'\n'))
}

/// Pins the calling thread to one CPU.
pub fn pin_current_thread(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is empty; CPU_SET stays within its bounds for cpu < 1024.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// CPU time of the calling thread, nanoseconds.
fn thread_cpu_ns() -> u64 {
    // SAFETY: a valid clock id and a pointer to a live timespec.
    let mut time: libc::timespec = unsafe { std::mem::zeroed() };
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut time) };
    time.tv_sec as u64 * 1_000_000_000 + time.tv_nsec as u64
}
