//! What a statsd daemon says about itself: its management `stats` counters, and from /proc its
//! CPU time and memory when it runs on this machine.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// Counters from the management `stats` command.
#[derive(Debug, Clone, Copy, Default)]
pub struct Counters {
    /// `messages.metrics_received`: lines received.
    pub lines: u64,
    /// `messages.kernel_drops` (histd only; 0 elsewhere).
    pub kernel_drops: u64,
}

/// Reads `stats` from a management port (Etsy's format: `name: value` lines, then `END`).
pub fn counters(admin: SocketAddr) -> std::io::Result<Counters> {
    let mut stream = TcpStream::connect_timeout(&admin, Duration::from_secs(2))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    stream.write_all(b"stats\n")?;
    let mut reply = String::new();
    let mut buffer = [0u8; 4096];
    while !reply.contains("END") {
        let read = stream.read(&mut buffer)?;
        if read == 0 {
            break;
        }
        reply.push_str(&String::from_utf8_lossy(&buffer[..read]));
    }
    let value = |name: &str| {
        reply.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(": ")?.trim().parse::<f64>().ok()).unwrap_or(0.0)
            as u64
    };
    Ok(Counters { lines: value("messages.metrics_received"), kernel_drops: value("messages.kernel_drops") })
}

/// Waits until the lines count stops moving (the daemon has read its socket buffers).
pub fn settled(admin: SocketAddr) -> std::io::Result<Counters> {
    let mut last = counters(admin)?;
    for _ in 0..100 {
        std::thread::sleep(Duration::from_millis(150));
        let now = counters(admin)?;
        if now.lines == last.lines {
            return Ok(now);
        }
        last = now;
    }
    Ok(last)
}

/// User plus system CPU time of process `pid`, nanoseconds.
pub fn cpu_ns(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf has no preconditions.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Some(ticks * 1_000_000_000 / per_second)
}

/// Current and peak resident memory of process `pid`, bytes.
pub fn memory(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib = |name: &str| -> Option<u64> {
        status.lines().find(|l| l.starts_with(name))?.split_whitespace().nth(1)?.parse().ok()
    };
    Some((kib("VmRSS:")? * 1024, kib("VmHWM:")? * 1024))
}
