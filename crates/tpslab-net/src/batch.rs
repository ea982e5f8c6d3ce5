//! Preallocated recvmmsg(2)/sendmmsg(2) batches: nothing is allocated per datagram.

use std::os::fd::RawFd;

fn zeroed_hdrs(n: usize) -> Box<[libc::mmsghdr]> {
    // SAFETY: an all-zero mmsghdr (null pointers, zero lengths) is a valid value.
    (0..n).map(|_| unsafe { std::mem::zeroed() }).collect()
}

/// Outcome of a batched send: messages the kernel accepted and those it refused.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SendOutcome {
    /// Messages accepted by the kernel.
    pub sent: usize,
    /// Messages refused (each refusal is also reported to the error callback).
    pub failed: usize,
    /// The path refused a GSO message (EIO/EINVAL) and the socket's GSO was switched
    /// off: later sends must carry one datagram per message.
    pub gso_turned_off: bool,
}

/// What the kernel said about one received datagram (or GRO-coalesced buffer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecvMeta {
    /// Full length, bytes (recvmmsg with MSG_TRUNC reports the real size, which may exceed
    /// the slot).
    pub len: usize,
    /// Longer than the slot: only the slot's bytes were kept (MSG_TRUNC in msg_flags).
    pub truncated: bool,
    /// Segment size, bytes, when the kernel coalesced several datagrams (UDP_GRO): the
    /// buffer is then `len / segment` datagrams (the last may be shorter).
    pub gro_segment: Option<usize>,
    /// When it reached the socket, CLOCK_REALTIME ns (SO_TIMESTAMPNS on the socket and a
    /// batch made by [`RecvBatch::with_gro`]).
    pub rx_realtime_ns: Option<u64>,
    /// The sender (None for a non-IP family).
    pub peer: Option<std::net::SocketAddr>,
}

/// Sends `hdrs[0..n]` with sendmmsg, resuming after partial sends; a message whose send
/// fails is counted, reported to `on_err(index, errno)` and skipped.
fn sendmmsg_all(
    fd: RawFd,
    hdrs: &mut [libc::mmsghdr],
    n: usize,
    on_err: &mut impl FnMut(usize, i32),
) -> SendOutcome {
    let mut out = SendOutcome::default();
    let mut start = 0;
    while start < n {
        // SAFETY: hdrs[start..n] are initialised mmsghdrs whose pointers reference buffers
        // owned by the batch, alive for the duration of the call.
        let rc = unsafe {
            libc::sendmmsg(
                fd,
                hdrs[start..].as_mut_ptr(),
                (n - start) as libc::c_uint,
                0,
            )
        };
        if rc <= 0 {
            // 0 accepted would loop forever: treat it as a refusal of this datagram.
            let errno = if rc == 0 {
                libc::EIO
            } else {
                std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
            };
            if errno == libc::EINTR {
                continue;
            }
            on_err(start, errno);
            out.failed += 1;
            start += 1;
        } else {
            out.sent += rc as usize;
            start += rc as usize;
        }
    }
    out
}

/// Message `i`'s length, bytes, in a send batch's iovecs: one a message, or two (a head
/// and a shared tail) when `two`.
fn msg_len(iov: &[libc::iovec], two: bool, i: usize) -> usize {
    match two {
        false => iov[i].iov_len,
        true => iov[2 * i].iov_len + iov[2 * i + 1].iov_len,
    }
}

/// `batch` buffers of `slot` bytes in one allocation, an iovec for each and an mmsghdr
/// pointing at its iovec. The pointers stay valid when the boxes move (heap data does not).
type Slots = (Box<[u8]>, Box<[libc::iovec]>, Box<[libc::mmsghdr]>);

fn slots(batch: usize, slot: usize) -> Slots {
    let mut bufs = vec![0u8; batch * slot].into_boxed_slice();
    let base = bufs.as_mut_ptr();
    let mut iov: Box<[libc::iovec]> = (0..batch)
        .map(|i| libc::iovec {
            // SAFETY: i * slot < batch * slot, inside the allocation.
            iov_base: unsafe { base.add(i * slot) } as *mut libc::c_void,
            iov_len: slot,
        })
        .collect();
    let mut hdrs = zeroed_hdrs(batch);
    for (h, v) in hdrs.iter_mut().zip(iov.iter_mut()) {
        h.msg_hdr.msg_iov = v;
        h.msg_hdr.msg_iovlen = 1;
    }
    (bufs, iov, hdrs)
}

/// A batch of receive slots for recvmmsg, each `slot` bytes, with the senders' addresses
/// kept so the same slots can be sent back as replies (see [`RecvBatch::reply`]).
pub struct RecvBatch {
    bufs: Box<[u8]>,
    slot: usize,
    iov: Box<[libc::iovec]>,
    addrs: Box<[libc::sockaddr_storage]>,
    hdrs: Box<[libc::mmsghdr]>,
    /// Control buffers (64 bytes, aligned) for UDP_GRO sizes, when asked for.
    ctrl: Option<Box<[[u64; 8]]>>,
    /// Whether the kernel writes each sender's address (see [`RecvBatch::without_peers`]).
    peers: bool,
}

// UDP_SEGMENT and UDP_GRO are socket options first (sock.rs sets them); batches use them
// as cmsg types.
pub use crate::sock::{UDP_GRO, UDP_SEGMENT};

// SAFETY: the raw pointers inside `iov` and `hdrs` point into heap buffers owned by the
// same RecvBatch; moving the batch to another thread moves their owner with them.
unsafe impl Send for RecvBatch {}

impl RecvBatch {
    /// `batch` slots (>= 1) of `slot` bytes each (>= 1).
    pub fn new(batch: usize, slot: usize) -> Self {
        let (batch, slot) = (batch.max(1), slot.max(1));
        let (bufs, iov, mut hdrs) = slots(batch, slot);
        // SAFETY: an all-zero sockaddr_storage is valid.
        let mut addrs: Box<[libc::sockaddr_storage]> =
            (0..batch).map(|_| unsafe { std::mem::zeroed() }).collect();
        for (h, a) in hdrs.iter_mut().zip(addrs.iter_mut()) {
            h.msg_hdr.msg_name = a as *mut libc::sockaddr_storage as *mut libc::c_void;
            h.msg_hdr.msg_namelen =
                std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        }
        RecvBatch {
            bufs,
            slot,
            iov,
            addrs,
            hdrs,
            ctrl: None,
            peers: true,
        }
    }

    /// The same slots without the senders' addresses: the kernel copies no address out
    /// per datagram (a receiver that only counts, like a sink, needs none; udprecv of
    /// ../shared/limits asks for none). [`RecvBatch::meta`] then has no `peer`, and
    /// [`RecvBatch::reply`] cannot be used: on an unconnected socket every reply would
    /// fail (EDESTADDRREQ).
    pub fn without_peers(mut self) -> Self {
        for h in self.hdrs.iter_mut() {
            h.msg_hdr.msg_name = std::ptr::null_mut();
            h.msg_hdr.msg_namelen = 0;
        }
        self.peers = false;
        self
    }

    /// Like [`RecvBatch::new`], with room for the segment size the kernel reports for
    /// coalesced datagrams on a UDP_GRO socket and for the
    /// receive timestamp of an SO_TIMESTAMPNS socket (both in [`RecvBatch::meta`]).
    pub fn with_gro(batch: usize, slot: usize) -> Self {
        let mut b = RecvBatch::new(batch, slot);
        let mut ctrl: Box<[[u64; 8]]> = vec![[0u64; 8]; b.hdrs.len()].into_boxed_slice();
        for (h, c) in b.hdrs.iter_mut().zip(ctrl.iter_mut()) {
            h.msg_hdr.msg_control = c.as_mut_ptr() as *mut libc::c_void;
            h.msg_hdr.msg_controllen = 64;
        }
        b.ctrl = Some(ctrl);
        b
    }

    /// What the kernel said about datagram `i` of the last receive: length, truncation,
    /// GRO segment size, kernel timestamp, sender.
    pub fn meta(&self, i: usize) -> RecvMeta {
        let (gro_segment, rx_realtime_ns) = self.cmsgs(i);
        RecvMeta {
            len: self.len(i),
            truncated: self.truncated(i),
            gro_segment,
            rx_realtime_ns,
            peer: self.peer(i),
        }
    }

    /// One walk over datagram `i`'s control messages: (UDP_GRO segment size, SCM_TIMESTAMPNS
    /// as CLOCK_REALTIME ns). Both None without a control buffer; the timestamp None when
    /// the control data was truncated.
    fn cmsgs(&self, i: usize) -> (Option<usize>, Option<u64>) {
        if self.ctrl.is_none() {
            return (None, None);
        }
        let h = &self.hdrs[i].msg_hdr;
        let ts_ok = h.msg_flags & libc::MSG_CTRUNC == 0;
        let need = std::mem::size_of::<libc::timespec>() as u32;
        let (mut gro, mut ts) = (None, None);
        // SAFETY: the kernel wrote msg_controllen bytes of cmsgs into our control buffer;
        // the CMSG macros stay within msg_control .. msg_control + msg_controllen; each
        // payload is read unaligned with its length checked against what is read.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(h);
            while !c.is_null() {
                let len = (*c).cmsg_len as usize;
                match ((*c).cmsg_level, (*c).cmsg_type) {
                    (libc::SOL_UDP, UDP_GRO)
                        if len
                            >= libc::CMSG_LEN(std::mem::size_of::<libc::c_int>() as u32)
                                as usize =>
                    {
                        let v = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::c_int);
                        gro = (v > 0).then_some(v as usize);
                    }
                    (libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS)
                        if ts_ok && len >= libc::CMSG_LEN(need) as usize =>
                    {
                        let t =
                            std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::timespec);
                        ts = Some(t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64);
                    }
                    _ => {}
                }
                c = libc::CMSG_NXTHDR(h, c);
            }
        }
        (gro, ts)
    }

    /// The segment size of datagram `i` when the kernel delivered several coalesced
    /// (UDP_GRO): the datagram is then `len(i) / size` segments (the last may be shorter).
    fn gro_size(&self, i: usize) -> Option<usize> {
        self.cmsgs(i).0
    }

    /// Number of slots.
    pub fn capacity(&self) -> usize {
        self.hdrs.len()
    }

    fn reset(&mut self) {
        let name_len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        for (h, v) in self.hdrs.iter_mut().zip(self.iov.iter_mut()) {
            v.iov_len = self.slot;
            if self.peers {
                h.msg_hdr.msg_namelen = name_len;
            }
            h.msg_hdr.msg_flags = 0;
            h.msg_len = 0;
            if self.ctrl.is_some() {
                h.msg_hdr.msg_controllen = 64;
            }
        }
    }

    /// Receives up to `capacity()` datagrams with recvmmsg(MSG_WAITFORONE): blocks (up to
    /// the socket's SO_RCVTIMEO) for the first, then takes what is queued. Returns the count;
    /// `Ok(0)` on timeout (EAGAIN) or EINTR.
    pub fn recv(&mut self, fd: RawFd) -> std::io::Result<usize> {
        self.reset();
        // SAFETY: hdrs point into buffers owned by self; the kernel writes within them.
        let rc = unsafe {
            libc::recvmmsg(
                fd,
                self.hdrs.as_mut_ptr(),
                self.hdrs.len() as libc::c_uint,
                libc::MSG_WAITFORONE | libc::MSG_TRUNC,
                std::ptr::null_mut(),
            )
        };
        if rc < 0 {
            let e = std::io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(0),
                _ => Err(e),
            };
        }
        Ok(rc as usize)
    }

    /// Full length of datagram `i` (recvmmsg with MSG_TRUNC reports the real size, which may
    /// exceed the slot).
    fn len(&self, i: usize) -> usize {
        self.hdrs[i].msg_len as usize
    }

    /// Whether datagram `i` was longer than the slot (MSG_TRUNC in msg_flags).
    fn truncated(&self, i: usize) -> bool {
        self.hdrs[i].msg_hdr.msg_flags & libc::MSG_TRUNC != 0
    }

    /// The received bytes of datagram `i` (at most one slot).
    pub fn get(&self, i: usize) -> &[u8] {
        let len = self.len(i).min(self.slot);
        &self.bufs[i * self.slot..i * self.slot + len]
    }

    /// Mutable received bytes of datagram `i` (at most one slot), e.g. to edit a reply in place.
    pub fn get_mut(&mut self, i: usize) -> &mut [u8] {
        let len = self.len(i).min(self.slot);
        &mut self.bufs[i * self.slot..i * self.slot + len]
    }

    /// Sends datagrams `0..n` of the last receive back to their senders with sendmmsg,
    /// each with its received length (bytes edited in place go out edited).
    pub fn reply(
        &mut self,
        fd: RawFd,
        n: usize,
        mut on_err: impl FnMut(usize, i32),
    ) -> SendOutcome {
        let n = n.min(self.hdrs.len());
        for i in 0..n {
            self.iov[i].iov_len = (self.hdrs[i].msg_len as usize).min(self.slot);
        }
        if self.ctrl.is_some() {
            // A coalesced datagram goes back as one GSO send of the same segments
            // (UDP_SEGMENT); the received UDP_GRO cmsg is not valid on a send.
            for i in 0..n {
                let seg = self.gro_size(i).filter(|&g| g < self.iov[i].iov_len);
                let h = &mut self.hdrs[i].msg_hdr;
                match seg {
                    None => h.msg_controllen = 0,
                    // SAFETY: the control buffer is 64 bytes, more than CMSG_SPACE(2).
                    Some(g) => unsafe {
                        h.msg_controllen = libc::CMSG_SPACE(2) as _;
                        let c = libc::CMSG_FIRSTHDR(h);
                        (*c).cmsg_level = libc::SOL_UDP;
                        (*c).cmsg_type = UDP_SEGMENT;
                        (*c).cmsg_len = libc::CMSG_LEN(2) as _;
                        std::ptr::write_unaligned(libc::CMSG_DATA(c) as *mut u16, g as u16);
                    },
                }
            }
        }
        sendmmsg_all(fd, &mut self.hdrs, n, &mut on_err)
    }

    /// The sender address of datagram `i` as a std SocketAddr (None for non-IP families).
    fn peer(&self, i: usize) -> Option<std::net::SocketAddr> {
        if !self.peers {
            return None;
        }
        let s = &self.addrs[i];
        // SAFETY: the kernel filled an AF_INET or AF_INET6 address of the sizes checked.
        unsafe {
            match s.ss_family as i32 {
                libc::AF_INET => {
                    let a = &*(s as *const _ as *const libc::sockaddr_in);
                    Some(std::net::SocketAddr::from((
                        u32::from_be(a.sin_addr.s_addr).to_be_bytes(),
                        u16::from_be(a.sin_port),
                    )))
                }
                libc::AF_INET6 => {
                    let a = &*(s as *const _ as *const libc::sockaddr_in6);
                    Some(std::net::SocketAddr::from((
                        a.sin6_addr.s6_addr,
                        u16::from_be(a.sin6_port),
                    )))
                }
                _ => None,
            }
        }
    }
}

/// A batch of send slots for sendmmsg on a connected socket, each `slot` bytes; made by
/// [`SendBatch::with_shared_tail`], each message is its own slot (the head) followed by
/// one body all messages share.
pub struct SendBatch {
    bufs: Box<[u8]>,
    slot: usize,
    /// One iovec a message, or two with a shared tail (message `i`'s at `2i`, `2i + 1`).
    iov: Box<[libc::iovec]>,
    hdrs: Box<[libc::mmsghdr]>,
    /// The body every message ends with ([`SendBatch::with_shared_tail`]), or None.
    tail: Option<Box<[u8]>>,
}

// SAFETY: as for RecvBatch, the raw pointers reference heap buffers owned by the batch.
unsafe impl Send for SendBatch {}

impl SendBatch {
    /// `batch` slots (>= 1) of `slot` bytes (>= 1), all with length `slot`.
    pub fn new(batch: usize, slot: usize) -> Self {
        let (batch, slot) = (batch.max(1), slot.max(1));
        let (bufs, iov, hdrs) = slots(batch, slot);
        SendBatch {
            bufs,
            slot,
            iov,
            hdrs,
            tail: None,
        }
    }

    /// `batch` messages (>= 1), each its own `head` bytes (>= 1, [`SendBatch::slot_mut`])
    /// followed by `tail`, one copy all the messages point at; all with length
    /// `head + tail.len()`. A sender whose datagrams differ only in their first bytes (a
    /// header) gives the kernel one body to copy from instead of one a message: at 1024 B
    /// and 64 messages, 1 KiB of source instead of 64 KiB.
    pub fn with_shared_tail(batch: usize, head: usize, tail: &[u8]) -> Self {
        let (batch, head) = (batch.max(1), head.max(1));
        let mut bufs = vec![0u8; batch * head].into_boxed_slice();
        let mut tail: Box<[u8]> = tail.into();
        let (base, body) = (bufs.as_mut_ptr(), tail.as_mut_ptr());
        let mut iov: Box<[libc::iovec]> = (0..2 * batch)
            .map(|k| match k % 2 {
                0 => libc::iovec {
                    // SAFETY: (k / 2) * head < batch * head, inside the allocation.
                    iov_base: unsafe { base.add(k / 2 * head) } as *mut libc::c_void,
                    iov_len: head,
                },
                _ => libc::iovec {
                    iov_base: body as *mut libc::c_void,
                    iov_len: tail.len(),
                },
            })
            .collect();
        let mut hdrs = zeroed_hdrs(batch);
        for (h, v) in hdrs.iter_mut().zip(iov.chunks_exact_mut(2)) {
            h.msg_hdr.msg_iov = v.as_mut_ptr();
            h.msg_hdr.msg_iovlen = 2;
        }
        SendBatch {
            bufs,
            slot: head,
            iov,
            hdrs,
            tail: Some(tail),
        }
    }

    /// Number of slots.
    pub fn capacity(&self) -> usize {
        self.hdrs.len()
    }

    /// The whole slot `i`, to write a datagram into.
    pub fn slot_mut(&mut self, i: usize) -> &mut [u8] {
        &mut self.bufs[i * self.slot..(i + 1) * self.slot]
    }

    /// Sets the length of datagram `i`: at most the slot size, or with a shared tail at
    /// most the head and the tail (a length within the head leaves the tail out).
    pub fn set_len(&mut self, i: usize, len: usize) {
        match &self.tail {
            None => self.iov[i].iov_len = len.min(self.slot),
            Some(t) => {
                self.iov[2 * i].iov_len = len.min(self.slot);
                self.iov[2 * i + 1].iov_len = len.saturating_sub(self.slot).min(t.len());
            }
        }
    }

    /// Sends messages `0..n` on the connected socket `sock` with sendmmsg; a message the
    /// kernel refuses is reported to `on_err(index, errno)` and skipped. A message longer
    /// than the socket's GSO segment refused with EIO or EINVAL means the path cannot
    /// segment (no checksum offload on the device, say): the socket's GSO is switched off
    /// ([`crate::UdpSock::gso_refused`]) and the outcome says so; the refused datagrams
    /// stay refused.
    pub fn send(
        &mut self,
        sock: &crate::UdpSock,
        n: usize,
        mut on_err: impl FnMut(usize, i32),
    ) -> SendOutcome {
        let n = n.min(self.hdrs.len());
        let seg = sock.gso_segment() as usize;
        let (iov, two) = (&self.iov, self.tail.is_some());
        let mut gso_refused = false;
        let mut out = sendmmsg_all(sock.fd(), &mut self.hdrs, n, &mut |i, errno| {
            gso_refused |= seg > 0
                && msg_len(iov, two, i) > seg
                && (errno == libc::EIO || errno == libc::EINVAL);
            on_err(i, errno)
        });
        if gso_refused {
            sock.refuse_gso();
            out.gso_turned_off = true;
        }
        out
    }
}

#[cfg(test)]
#[path = "batch_tests.rs"]
mod tests;
