//! Datagrams an aggregator's host sends back: with `IP_RECVERR` (`IPV6_RECVERR`) the kernel
//! queues each ICMP "port unreachable" (or "host unreachable") it receives for a datagram this
//! socket sent, on the socket's error queue. A node that stopped before its health check noticed
//! loses the lines sent to it meanwhile; reading the queue after each batch counts them
//! (`datagrams_refused`), where before they vanished uncounted. Kernels rate-limit ICMP, so
//! the count is a lower bound.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;

/// Asks the kernel to queue ICMP errors for `socket`'s datagrams.
pub fn report(socket: &UdpSocket, ipv6: bool) -> io::Result<()> {
    let on: libc::c_int = 1;
    let (level, name) =
        if ipv6 { (libc::IPPROTO_IPV6, libc::IPV6_RECVERR) } else { (libc::IPPROTO_IP, libc::IP_RECVERR) };
    // SAFETY: a valid socket, an int option of the size given.
    let set = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            level,
            name,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if set != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whether a send failed only because an earlier datagram was refused (the kernel reports a
/// queued ICMP error on the next call on the socket, which then sends nothing).
pub fn is_earlier_refusal(error: &io::Error) -> bool {
    matches!(error.raw_os_error(), Some(libc::ECONNREFUSED | libc::EHOSTUNREACH | libc::ENETUNREACH))
}

/// Reads every error waiting on `socket`'s error queue and calls `refused` for each refusal of
/// a datagram it sent (ICMP unreachable), with the address that datagram was sent to when the
/// kernel gives it back.
pub fn drain(socket: &UdpSocket, mut refused: impl FnMut(Option<SocketAddr>)) {
    let mut payload = [0u8; 64];
    let mut control = [0u64; 64];
    loop {
        let mut iov = libc::iovec { iov_base: payload.as_mut_ptr().cast(), iov_len: payload.len() };
        // SAFETY: zero is a valid sockaddr_storage and msghdr; the pointers set below outlive
        // the call.
        let mut destination: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let mut header: libc::msghdr = unsafe { std::mem::zeroed() };
        header.msg_name = (&mut destination as *mut libc::sockaddr_storage).cast();
        header.msg_namelen = std::mem::size_of_val(&destination) as libc::socklen_t;
        header.msg_iov = &mut iov;
        header.msg_iovlen = 1;
        header.msg_control = control.as_mut_ptr().cast();
        header.msg_controllen = std::mem::size_of_val(&control) as _;
        // SAFETY: the header points into live buffers of the sizes it declares.
        let read = unsafe { libc::recvmsg(socket.as_raw_fd(), &mut header, libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT) };
        if read < 0 {
            return;
        }
        let address = address_of(&destination, header.msg_namelen);
        (0..refusals_in(&header)).for_each(|_| refused(address));
    }
}

/// The socket address the kernel wrote, if it is one of IPv4 or IPv6.
fn address_of(storage: &libc::sockaddr_storage, length: libc::socklen_t) -> Option<SocketAddr> {
    let length = length as usize;
    match storage.ss_family as libc::c_int {
        libc::AF_INET if length >= std::mem::size_of::<libc::sockaddr_in>() => {
            // SAFETY: the kernel wrote a sockaddr_in (its family and length say so).
            let v4 = unsafe { &*(storage as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            let ip = std::net::Ipv4Addr::from(u32::from_be(v4.sin_addr.s_addr));
            Some(SocketAddr::from((ip, u16::from_be(v4.sin_port))))
        }
        libc::AF_INET6 if length >= std::mem::size_of::<libc::sockaddr_in6>() => {
            // SAFETY: the kernel wrote a sockaddr_in6 (its family and length say so).
            let v6 = unsafe { &*(storage as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
            let ip = std::net::Ipv6Addr::from(v6.sin6_addr.s6_addr);
            Some(SocketAddr::from((ip, u16::from_be(v6.sin6_port))))
        }
        _ => None,
    }
}

/// The unreachable-port or -host errors among a received error message's control messages.
fn refusals_in(header: &libc::msghdr) -> u64 {
    let mut found = 0;
    // SAFETY: the kernel filled the control buffer; CMSG_* walk it within msg_controllen.
    unsafe {
        let mut message = libc::CMSG_FIRSTHDR(header);
        while !message.is_null() {
            let level = (*message).cmsg_level;
            let kind = (*message).cmsg_type;
            let is_error = (level == libc::IPPROTO_IP && kind == libc::IP_RECVERR)
                || (level == libc::IPPROTO_IPV6 && kind == libc::IPV6_RECVERR);
            if is_error {
                let error = &*(libc::CMSG_DATA(message) as *const libc::sock_extended_err);
                let from_icmp = matches!(error.ee_origin, libc::SO_EE_ORIGIN_ICMP | libc::SO_EE_ORIGIN_ICMP6);
                if from_icmp
                    && matches!(error.ee_errno as i32, libc::ECONNREFUSED | libc::EHOSTUNREACH | libc::ENETUNREACH)
                {
                    found += 1;
                }
            }
            message = libc::CMSG_NXTHDR(header, message);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Datagrams to a closed port on loopback come back refused, and are counted.
    #[test]
    fn datagrams_to_a_closed_port_are_counted() {
        let closed = UdpSocket::bind("127.0.0.1:0").unwrap();
        let target = closed.local_addr().unwrap();
        drop(closed);
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        report(&socket, false).unwrap();
        let mut refused = Vec::new();
        for _ in 0..5 {
            match socket.send_to(b"x:1|c", target) {
                Err(error) if is_earlier_refusal(&error) => {}
                other => {
                    other.unwrap();
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
            drain(&socket, |to| refused.push(to));
        }
        assert!(!refused.is_empty());
        assert!(refused.iter().all(|&to| to == Some(target)), "each refusal names where it was sent: {refused:?}");
        let open = UdpSocket::bind("127.0.0.1:0").unwrap();
        socket.send_to(b"x:1|c", open.local_addr().unwrap()).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let mut more = 0;
        drain(&socket, |_| more += 1);
        assert_eq!(more, 0, "a delivered datagram is not a refusal");
    }
}
