//! What the kernel says about a UDP port, whatever daemon listens on it: datagrams dropped
//! because a socket's receive buffer was full, and datagrams still waiting to be read
//! (`/proc/net/udp` and `/proc/net/udp6`, summed over every socket bound to the port, as
//! SO_REUSEPORT daemons bind several). The same measure for histd and for any peer.

use std::time::Duration;

/// The kernel's counts for the sockets bound to one local UDP port.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortCounts {
    /// Datagrams dropped by the kernel, since each socket was opened.
    pub drops: u64,
    /// Bytes queued and not yet read.
    pub queued_bytes: u64,
    /// Sockets found.
    pub sockets: usize,
}

/// The counts of `port` now; an error when no socket is bound to it.
pub fn counts(port: u16) -> anyhow::Result<PortCounts> {
    let mut total = PortCounts::default();
    for table in ["/proc/net/udp", "/proc/net/udp6"] {
        if let Ok(text) = std::fs::read_to_string(table) {
            text.lines().skip(1).filter_map(|line| parse_line(line, port)).for_each(|(drops, queued)| {
                total.drops += drops;
                total.queued_bytes += queued;
                total.sockets += 1;
            });
        }
    }
    anyhow::ensure!(total.sockets > 0, "no UDP socket is bound to port {port} on this machine");
    Ok(total)
}

/// Waits until nothing is queued on `port` (the daemon has read everything sent), at most 15 s.
pub fn drained(port: u16) -> anyhow::Result<PortCounts> {
    for _ in 0..100 {
        let now = counts(port)?;
        if now.queued_bytes == 0 {
            return Ok(now);
        }
        std::thread::sleep(Duration::from_millis(150));
    }
    counts(port)
}

/// `(drops, rx_queue)` of one table line when its local port is `port`.
fn parse_line(line: &str, port: u16) -> Option<(u64, u64)> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    let local_port = u16::from_str_radix(fields.get(1)?.rsplit_once(':')?.1, 16).ok()?;
    if local_port != port {
        return None;
    }
    let queued = u64::from_str_radix(fields.get(4)?.split_once(':')?.1, 16).ok()?;
    let drops = fields.last()?.parse().ok()?;
    Some((drops, queued))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_proc_net_udp_lines() {
        let v4 = "  812: 0100007F:46B5 00000000:0000 07 00000000:00003C00 00:00000000 00000000     0        0 4242 2 0000000000000000 17";
        let v6 = " 1234: 00000000000000000000000001000000:46B5 00000000000000000000000000000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 99 2 0000000000000000 0";
        let cases = [(v4, 18101, Some((17, 0x3C00))), (v4, 18125, None), (v6, 18101, Some((0, 0))), ("", 1, None)];
        for (line, port, want) in cases {
            assert_eq!(parse_line(line, port), want, "{line:?}");
        }
    }

    #[test]
    fn finds_a_socket_it_bound() {
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = socket.local_addr().unwrap().port();
        let counts = counts(port).unwrap();
        assert_eq!((counts.sockets, counts.drops, counts.queued_bytes), (1, 0, 0));
        drop(socket);
        assert!(super::counts(port).is_err());
    }
}
