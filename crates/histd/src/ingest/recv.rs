//! Batched datagram receive: `recvmmsg` into preallocated buffers, with the kernel's
//! per-socket drop counter (`SO_RXQ_OVFL`) and truncation (`MSG_TRUNC`) read per datagram.

use std::io;
use std::os::fd::RawFd;

/// A reusable batch of receive buffers and the kernel structures that point into them.
pub struct Batch {
    /// One buffer per datagram slot, `slot_bytes` each, back to back.
    buffers: Vec<u8>,
    slot_bytes: usize,
    iovecs: Vec<libc::iovec>,
    headers: Vec<libc::mmsghdr>,
    controls: Vec<u8>,
    /// Each datagram's source address, when the last receive asked for them.
    names: Vec<libc::sockaddr_storage>,
    received: usize,
}

/// Room for one `SO_RXQ_OVFL` control message (a `u32`), generously aligned.
const CONTROL_BYTES: usize = 64;

// The raw pointers inside point into the batch's own heap buffers, which never move or grow.
unsafe impl Send for Batch {}

/// What one receive call brought.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Received {
    /// Datagrams received.
    pub datagrams: usize,
    /// Of those, datagrams longer than a slot (the excess was lost).
    pub truncated: usize,
    /// The socket's cumulative kernel drop counter, when the kernel reported it.
    pub kernel_drops: Option<u32>,
}

impl Batch {
    /// `slots` buffers of `slot_bytes` each.
    pub fn new(slots: usize, slot_bytes: usize) -> Batch {
        let slots = slots.max(1);
        let mut batch = Batch {
            buffers: vec![0; slots * slot_bytes],
            slot_bytes,
            // SAFETY: iovec, mmsghdr are plain C structs for which all-zero is a valid value.
            iovecs: vec![unsafe { std::mem::zeroed() }; slots],
            headers: vec![unsafe { std::mem::zeroed() }; slots],
            controls: vec![0; slots * CONTROL_BYTES],
            // SAFETY: sockaddr_storage is a plain C struct for which all-zero is valid.
            names: vec![unsafe { std::mem::zeroed() }; slots],
            received: 0,
        };
        for slot in 0..slots {
            batch.iovecs[slot] =
                libc::iovec { iov_base: batch.buffers[slot * slot_bytes..].as_mut_ptr().cast(), iov_len: slot_bytes };
        }
        batch
    }

    /// Receives up to a batch: waits for the first datagram (up to the socket's receive
    /// timeout) unless `dont_wait`, then takes whatever else is already queued. With
    /// `sources`, each datagram's source address is kept ([`Batch::source`]).
    pub fn receive(&mut self, fd: RawFd, dont_wait: bool, sources: bool) -> io::Result<Received> {
        self.reset_headers(sources);
        let flags = if dont_wait { libc::MSG_DONTWAIT } else { libc::MSG_WAITFORONE };
        // SAFETY: every header points into this batch's live buffers, sized as declared.
        let count = unsafe {
            libc::recvmmsg(fd, self.headers.as_mut_ptr(), self.headers.len() as u32, flags, std::ptr::null_mut())
        };
        if count < 0 {
            self.received = 0;
            return Err(io::Error::last_os_error());
        }
        self.received = count as usize;
        let headers = &self.headers[..self.received];
        let truncated = headers.iter().filter(|h| h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0).count();
        let kernel_drops = headers.iter().rev().find_map(drop_counter);
        Ok(Received { datagrams: self.received, truncated, kernel_drops })
    }

    /// The datagrams of the last receive.
    pub fn datagrams(&self) -> impl Iterator<Item = &[u8]> {
        self.headers[..self.received].iter().enumerate().map(|(slot, header)| {
            let length = (header.msg_len as usize).min(self.slot_bytes);
            &self.buffers[slot * self.slot_bytes..slot * self.slot_bytes + length]
        })
    }

    /// Whether datagram `index` of the last receive was longer than its buffer (cut short).
    pub fn truncated(&self, index: usize) -> bool {
        self.headers[..self.received].get(index).is_some_and(|h| h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0)
    }

    /// The source address of datagram `index` of the last receive, when it asked for them.
    pub fn source(&self, index: usize) -> Option<std::net::IpAddr> {
        let header = self.headers[..self.received].get(index)?;
        if header.msg_hdr.msg_name.is_null() {
            return None;
        }
        let name = &self.names[index];
        // SAFETY: the kernel wrote a sockaddr of the family it names into the storage, which is
        // large and aligned enough for every sockaddr type.
        unsafe {
            match i32::from(name.ss_family) {
                libc::AF_INET => {
                    let v4 = &*(name as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>();
                    Some(std::net::Ipv4Addr::from(u32::from_be(v4.sin_addr.s_addr)).into())
                }
                libc::AF_INET6 => {
                    let v6 = &*(name as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>();
                    Some(std::net::Ipv6Addr::from(v6.sin6_addr.s6_addr).into())
                }
                _ => None,
            }
        }
    }

    fn reset_headers(&mut self, sources: bool) {
        let controls = self.controls.as_mut_ptr();
        let names = self.names.as_mut_ptr();
        for (slot, header) in self.headers.iter_mut().enumerate() {
            // SAFETY: zero is a valid msghdr; the pointers set below stay valid for the batch.
            header.msg_hdr = unsafe { std::mem::zeroed() };
            header.msg_hdr.msg_iov = &mut self.iovecs[slot];
            header.msg_hdr.msg_iovlen = 1;
            header.msg_hdr.msg_control = unsafe { controls.add(slot * CONTROL_BYTES) }.cast();
            header.msg_hdr.msg_controllen = CONTROL_BYTES as _;
            if sources {
                header.msg_hdr.msg_name = unsafe { names.add(slot) }.cast();
                header.msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as _;
            }
            header.msg_len = 0;
        }
    }
}

/// The `SO_RXQ_OVFL` value attached to one received datagram.
fn drop_counter(header: &libc::mmsghdr) -> Option<u32> {
    let message = &header.msg_hdr;
    // SAFETY: the kernel filled the control buffer the header points to; CMSG_* walk it within
    // msg_controllen.
    unsafe {
        let mut control = libc::CMSG_FIRSTHDR(message);
        while !control.is_null() {
            if (*control).cmsg_level == libc::SOL_SOCKET && (*control).cmsg_type == libc::SO_RXQ_OVFL {
                return Some(std::ptr::read_unaligned(libc::CMSG_DATA(control).cast::<u32>()));
            }
            control = libc::CMSG_NXTHDR(message, control);
        }
    }
    None
}

/// Sets an integer socket option.
pub fn set_option(fd: RawFd, level: libc::c_int, name: libc::c_int, value: libc::c_int) -> io::Result<()> {
    // SAFETY: a valid fd and a pointer to a live c_int of the declared size.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as _,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Reads an integer socket option.
pub fn get_option(fd: RawFd, level: libc::c_int, name: libc::c_int) -> io::Result<libc::c_int> {
    let mut value: libc::c_int = 0;
    let mut length = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: a valid fd and pointers to live values of the declared sizes.
    let rc = unsafe { libc::getsockopt(fd, level, name, (&mut value as *mut libc::c_int).cast(), &mut length) };
    if rc == 0 {
        Ok(value)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// A socket's receive buffer: what was asked for and what the kernel holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReceiveBuffer {
    /// Bytes asked for (`udpReceiveBufferBytes` or `recvBufferSize`).
    pub asked: usize,
    /// What `SO_RCVBUF` reads back: the kernel doubles the value set (half of it pays for its
    /// own bookkeeping), so this is up to twice `asked`; the payload a socket holds before it
    /// drops is about `asked`.
    pub kernel: usize,
    /// Set with `SO_RCVBUFFORCE` (privileged: past `net.core.rmem_max`); otherwise with
    /// `SO_RCVBUF`, capped at `net.core.rmem_max`.
    pub forced: bool,
}

impl ReceiveBuffer {
    /// Whether the kernel gave less than asked.
    pub fn capped(&self) -> bool {
        self.kernel / 2 < self.asked
    }
}

/// Sets the receive buffer to `bytes` (forcing past `net.core.rmem_max` when privileged).
pub fn set_receive_buffer(fd: RawFd, bytes: usize) -> io::Result<ReceiveBuffer> {
    let wanted = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    let forced = set_option(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, wanted).is_ok();
    if !forced {
        set_option(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, wanted)?;
    }
    let kernel = get_option(fd, libc::SOL_SOCKET, libc::SO_RCVBUF)? as usize;
    Ok(ReceiveBuffer { asked: bytes, kernel, forced })
}
