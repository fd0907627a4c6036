//! UDP sockets for the readers: one `SO_REUSEPORT` socket per reader (the kernel spreads
//! senders over them by source address), or one socket shared by every reader (for traffic
//! from few sources, which reuseport would pin to one reader).

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;

use socket2::{Domain, Protocol, Socket, Type};

use super::recv::{set_option, set_receive_buffer, ReceiveBuffer};

/// How readers share the port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReaderMode {
    /// A socket per reader, `SO_REUSEPORT`.
    ReusePort,
    /// One socket, every reader receiving from it.
    Shared,
}

/// How to open the UDP sockets of one listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpSettings {
    /// Reader threads.
    pub readers: usize,
    /// Sockets per reader or one shared.
    pub mode: ReaderMode,
    /// `SO_RCVBUF` to ask for, bytes.
    pub receive_buffer: usize,
}

/// Opens the sockets for `address`: `readers` of them in reuseport mode, else one. Returns them
/// and the smallest receive buffer the kernel granted.
pub fn open_udp(address: SocketAddr, settings: UdpSettings) -> io::Result<(Vec<UdpSocket>, ReceiveBuffer)> {
    let count = match settings.mode {
        ReaderMode::ReusePort => settings.readers.max(1),
        ReaderMode::Shared => 1,
    };
    let mut sockets = Vec::with_capacity(count);
    let mut bound = address;
    let mut granted: Option<ReceiveBuffer> = None;
    for _ in 0..count {
        let (socket, buffer) = open_one(bound, settings)?;
        bound = socket.local_addr()?; // an ephemeral port (0) is shared by the rest
        granted =
            Some(granted.map_or(buffer, |smallest| if buffer.kernel < smallest.kernel { buffer } else { smallest }));
        sockets.push(socket);
    }
    let granted = granted.ok_or_else(|| io::Error::other("no UDP socket opened"))?;
    Ok((sockets, granted))
}

fn open_one(address: SocketAddr, settings: UdpSettings) -> io::Result<(UdpSocket, ReceiveBuffer)> {
    let socket = Socket::new(Domain::for_address(address), Type::DGRAM, Some(Protocol::UDP))?;
    if settings.mode == ReaderMode::ReusePort {
        socket.set_reuse_port(true)?;
    }
    let fd = socket.as_raw_fd();
    set_option(fd, libc::SOL_SOCKET, libc::SO_RXQ_OVFL, 1)?;
    let granted = set_receive_buffer(fd, settings.receive_buffer)?;
    socket.bind(&address.into())?;
    Ok((socket.into(), granted))
}

/// Logs the receive buffer asked for and what the kernel holds, and how to raise it when the
/// kernel capped the request.
pub fn report_receive_buffer(address: SocketAddr, buffer: ReceiveBuffer) {
    let ReceiveBuffer { asked, kernel, forced } = buffer;
    if buffer.capped() {
        tracing::warn!(
            %address, asked, kernel,
            "the kernel capped the UDP receive buffer (net.core.rmem_max); bursts may be dropped. \
             Raise it with: sysctl -w net.core.rmem_max={asked} (or run histd with CAP_NET_ADMIN)"
        );
    } else {
        let how = if forced { "SO_RCVBUFFORCE, past net.core.rmem_max" } else { "SO_RCVBUF" };
        tracing::info!(
            %address, asked, kernel,
            "UDP receive buffer set with {how}; the kernel doubles what is set (half pays for its bookkeeping), \
             so it reads back as `kernel`: about `asked` bytes of datagrams fit"
        );
    }
}
