//! A UDP socket with the options tpslab needs, on top of socket2.

use crate::NetError;
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering::Relaxed};
use std::time::Duration;

/// `UDP_SEGMENT` (linux/udp.h): GSO segment size of a send, cmsg or socket option.
pub const UDP_SEGMENT: libc::c_int = 103;
/// `UDP_GRO` (linux/udp.h): deliver coalesced datagrams with their segment size.
pub const UDP_GRO: libc::c_int = 104;

/// What the kernel granted for a receive buffer request.
///
/// The kernel doubles the value passed to SO_RCVBUF (to leave room for its bookkeeping,
/// see socket(7)) after capping it at `net.core.rmem_max`; SO_RCVBUFFORCE (root only)
/// skips the cap. `granted_bytes` is what getsockopt(SO_RCVBUF) reads back: the limit the
/// kernel compares the queued memory (skb truesize, not payload) against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RcvbufGrant {
    /// Bytes the caller asked for (None: left at net.core.rmem_default).
    pub requested_bytes: Option<u64>,
    /// Whether SO_RCVBUFFORCE was used (root and request above rmem_max).
    pub forced: bool,
    /// getsockopt(SO_RCVBUF) after the request, bytes.
    pub granted_bytes: u64,
    /// net.core.rmem_max at the time of the request, bytes (from /proc/sys).
    pub rmem_max_bytes: Option<u64>,
}

/// A socket's receive memory and drops ([`UdpSock::meminfo`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SockMem {
    /// Receive memory charged, bytes (sk_rmem_alloc: each queued datagram's truesize,
    /// plus up to a quarter of the limit already read and not yet uncharged).
    pub rx_queue_bytes: u64,
    /// The receive limit (sk_rcvbuf), bytes.
    pub rcvbuf_bytes: u64,
    /// Datagrams dropped since the socket was created (sk_drops).
    pub drops: u64,
}

/// A UDP socket (IPv4 or IPv6) owning its file descriptor, and what it knows of its
/// path: the GSO segment size it sends with, and whether the path refused GSO (then it was
/// switched off for the rest of the socket's life; see [`crate::SendBatch::send`]).
#[derive(Debug)]
pub struct UdpSock {
    sock: Socket,
    local: SocketAddr,
    /// UDP_SEGMENT in force, bytes; 0 = off.
    gso_segment: AtomicU16,
    /// A GSO send was refused (EIO/EINVAL) and GSO switched off.
    gso_refused: AtomicBool,
}

fn read_sysctl_u64(path: &str) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The socket's descriptor, borrowed (to watch it in an [`crate::poll::Epoll`]).
impl std::os::fd::AsFd for UdpSock {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.sock.as_fd()
    }
}

impl UdpSock {
    /// Creates a socket bound to `addr` (port 0 picks an ephemeral port).
    /// `reuseport` sets SO_REUSEPORT so several threads can bind the same address.
    ///
    /// Errors: `EADDRINUSE` when the port is taken (and not shared by SO_REUSEPORT),
    /// `EADDRNOTAVAIL` for an address that is not local.
    pub fn bind(addr: SocketAddr, reuseport: bool) -> Result<Self, NetError> {
        let sock = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))
            .map_err(|e| NetError::io("socket(AF_INET, SOCK_DGRAM)", e))?;
        if reuseport {
            sock.set_reuse_port(true)
                .map_err(|e| NetError::io("setsockopt SO_REUSEPORT", e))?;
        }
        sock.bind(&SockAddr::from(addr))
            .map_err(|e| NetError::io(format!("bind {addr}"), e))?;
        let local = sock
            .local_addr()
            .ok()
            .and_then(|a| a.as_socket())
            .unwrap_or(addr);
        Ok(UdpSock {
            sock,
            local,
            gso_segment: AtomicU16::new(0),
            gso_refused: AtomicBool::new(false),
        })
    }

    /// Connects the socket to `peer`, so that `send` and batched sends need no address and
    /// only datagrams from `peer` are received.
    pub fn connect(&self, peer: SocketAddr) -> Result<(), NetError> {
        self.sock
            .connect(&SockAddr::from(peer))
            .map_err(|e| NetError::io(format!("connect {peer}"), e))
    }

    /// The bound local address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The raw file descriptor (valid while `self` lives).
    pub fn fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }

    /// Sets the receive buffer. With `bytes` above net.core.rmem_max and root, uses
    /// SO_RCVBUFFORCE; otherwise SO_RCVBUF (silently capped by the kernel). Returns what was
    /// granted (read back with getsockopt, i.e. doubled).
    pub fn set_rcvbuf(&self, bytes: u64) -> Result<RcvbufGrant, NetError> {
        if bytes == 0 || bytes > i32::MAX as u64 / 2 {
            return Err(NetError::Invalid(format!(
                "receive buffer {bytes} bytes: allowed 1..={} bytes",
                i32::MAX / 2
            )));
        }
        let rmem_max = read_sysctl_u64("/proc/sys/net/core/rmem_max");
        let forced = crate::is_root() && rmem_max.is_some_and(|m| bytes > m);
        let v = bytes as libc::c_int;
        let opt = if forced {
            libc::SO_RCVBUFFORCE
        } else {
            libc::SO_RCVBUF
        };
        // SAFETY: setsockopt reads sizeof(c_int) bytes from &v, a valid c_int.
        let rc = unsafe {
            libc::setsockopt(
                self.fd(),
                libc::SOL_SOCKET,
                opt,
                &v as *const libc::c_int as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(NetError::last(format!(
                "setsockopt {} {bytes}",
                if forced {
                    "SO_RCVBUFFORCE"
                } else {
                    "SO_RCVBUF"
                }
            )));
        }
        Ok(RcvbufGrant {
            requested_bytes: Some(bytes),
            forced,
            granted_bytes: self.rcvbuf_bytes()?,
            rmem_max_bytes: rmem_max,
        })
    }

    /// The current receive buffer limit as getsockopt(SO_RCVBUF) reports it, bytes.
    pub fn rcvbuf_bytes(&self) -> Result<u64, NetError> {
        self.sock
            .recv_buffer_size()
            .map(|v| v as u64)
            .map_err(|e| NetError::io("getsockopt SO_RCVBUF", e))
    }

    /// The grant when no buffer was requested: the kernel default (net.core.rmem_default).
    pub fn default_grant(&self) -> Result<RcvbufGrant, NetError> {
        Ok(RcvbufGrant {
            requested_bytes: None,
            forced: false,
            granted_bytes: self.rcvbuf_bytes()?,
            rmem_max_bytes: read_sysctl_u64("/proc/sys/net/core/rmem_max"),
        })
    }

    /// Sets SO_SNDBUF (capped by net.core.wmem_max), bytes.
    pub fn set_sndbuf(&self, bytes: usize) -> Result<(), NetError> {
        self.sock
            .set_send_buffer_size(bytes)
            .map_err(|e| NetError::io(format!("setsockopt SO_SNDBUF {bytes}"), e))
    }

    /// Sets SO_BUSY_POLL: a blocking receive busy-polls the device queue for up to `usec`
    /// microseconds before sleeping (NIC queues with NAPI; raising it needs CAP_NET_ADMIN).
    pub fn set_busy_poll(&self, usec: u32) -> Result<(), NetError> {
        let v = usec as libc::c_int;
        // SAFETY: setsockopt reads one c_int.
        let rc = unsafe {
            libc::setsockopt(
                self.fd(),
                libc::SOL_SOCKET,
                libc::SO_BUSY_POLL,
                &v as *const libc::c_int as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(NetError::last(format!("setsockopt SO_BUSY_POLL {usec}")));
        }
        Ok(())
    }

    /// Attaches a classic BPF program to this socket's SO_REUSEPORT group
    /// (SO_ATTACH_REUSEPORT_CBPF; one socket's call steers the whole group): the kernel
    /// sends each datagram to the socket whose index in the group (the order the sockets
    /// joined it) the program returns, `steer`'s number modulo `sockets`. Errors: the
    /// kernel refuses (no SO_REUSEPORT on the socket, `sockets` 0).
    pub fn attach_reuseport_steer(
        &self,
        steer: ReuseportSteer,
        sockets: u32,
    ) -> Result<(), NetError> {
        if sockets == 0 {
            return Err(NetError::Invalid(
                "reuseport steering over 0 sockets".into(),
            ));
        }
        // A = the ancillary value (SKF_AD_OFF + SKF_AD_CPU or SKF_AD_RANDOM);
        // A %= sockets; return A.
        let ad = match steer {
            ReuseportSteer::Cpu => libc::SKF_AD_CPU,
            ReuseportSteer::Random => libc::SKF_AD_RANDOM,
        };
        let mut prog = [
            libc::sock_filter {
                code: (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16,
                jt: 0,
                jf: 0,
                k: (libc::SKF_AD_OFF + ad) as u32,
            },
            libc::sock_filter {
                code: (libc::BPF_ALU | libc::BPF_MOD | libc::BPF_K) as u16,
                jt: 0,
                jf: 0,
                k: sockets,
            },
            libc::sock_filter {
                code: (libc::BPF_RET | libc::BPF_A) as u16,
                jt: 0,
                jf: 0,
                k: 0,
            },
        ];
        let fprog = libc::sock_fprog {
            len: prog.len() as u16,
            filter: prog.as_mut_ptr(),
        };
        // SAFETY: setsockopt reads one sock_fprog whose `filter` points at `prog`'s
        // `len` instructions, alive for the call (the kernel copies them).
        let rc = unsafe {
            libc::setsockopt(
                self.fd(),
                libc::SOL_SOCKET,
                libc::SO_ATTACH_REUSEPORT_CBPF,
                &fprog as *const libc::sock_fprog as *const libc::c_void,
                std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(NetError::last(format!(
                "setsockopt SO_ATTACH_REUSEPORT_CBPF ({steer:?} mod {sockets})"
            )));
        }
        Ok(())
    }

    /// Sets UDP_GRO: the kernel may deliver several datagrams of one flow coalesced, with
    /// their segment size in a cmsg (read with [`crate::RecvBatch::with_gro`]).
    pub fn set_gro(&self, on: bool) -> Result<(), NetError> {
        self.set_int(libc::SOL_UDP, UDP_GRO, on as libc::c_int, "UDP_GRO")
    }

    /// Asks for kernel receive timestamps (SO_TIMESTAMPNS): each datagram then carries
    /// the CLOCK_REALTIME time it reached the socket (read with
    /// [`crate::RecvBatch::meta`]).
    pub fn set_timestampns(&self, on: bool) -> Result<(), NetError> {
        self.set_int(
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            on as libc::c_int,
            "SO_TIMESTAMPNS",
        )
    }

    /// Sets UDP_SEGMENT: every send of more than `size` bytes leaves as segments of `size`
    /// bytes (GSO). 0 turns it off. Errors: the kernel has no UDP GSO.
    pub fn set_gso(&self, size: u16) -> Result<(), NetError> {
        self.set_int(
            libc::SOL_UDP,
            UDP_SEGMENT,
            size as libc::c_int,
            "UDP_SEGMENT",
        )?;
        self.gso_segment.store(size, Relaxed);
        Ok(())
    }

    /// Turns GSO on with segments of `size` bytes where the kernel takes it (probed once,
    /// by setting the option); whether it is on.
    pub fn enable_gso(&self, size: u16) -> bool {
        size > 0 && self.set_gso(size).is_ok()
    }

    /// The GSO segment size in force, bytes (0: off).
    pub fn gso_segment(&self) -> u16 {
        self.gso_segment.load(Relaxed)
    }

    /// Whether the path refused a GSO send (EIO: no checksum offload on the device;
    /// EINVAL) and GSO was switched off for the rest of the socket's life.
    pub fn gso_refused(&self) -> bool {
        self.gso_refused.load(Relaxed)
    }

    /// SO_NO_CHECK: IPv4 datagrams leave without a UDP checksum. The kernel then refuses
    /// GSO sends (EINVAL), as a path without checksum offload refuses them (EIO): how
    /// the fallback is tested.
    pub fn set_no_check(&self, on: bool) -> Result<(), NetError> {
        self.set_int(
            libc::SOL_SOCKET,
            libc::SO_NO_CHECK,
            on as libc::c_int,
            "SO_NO_CHECK",
        )
    }

    /// Switches GSO off after the path refused it.
    pub(crate) fn refuse_gso(&self) {
        let _ = self.set_gso(0);
        self.gso_refused.store(true, Relaxed);
    }

    fn set_int(
        &self,
        level: libc::c_int,
        opt: libc::c_int,
        v: libc::c_int,
        name: &str,
    ) -> Result<(), NetError> {
        // SAFETY: setsockopt reads one c_int.
        let rc = unsafe {
            libc::setsockopt(
                self.fd(),
                level,
                opt,
                &v as *const libc::c_int as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(NetError::last(format!("setsockopt {name} {v}")));
        }
        Ok(())
    }

    /// Sets SO_RCVTIMEO: blocking receives return EAGAIN after `timeout`.
    pub fn set_read_timeout(&self, timeout: Duration) -> Result<(), NetError> {
        self.sock
            .set_read_timeout(Some(timeout))
            .map_err(|e| NetError::io("setsockopt SO_RCVTIMEO", e))
    }

    /// The socket's memory and drops as getsockopt(SO_MEMINFO) reads them (one system
    /// call, no netlink message and no socket-table walk): the receive memory charged
    /// (`SK_MEMINFO_RMEM_ALLOC`, sk_rmem_alloc: /proc/net/udp's `rx_queue` plus what UDP
    /// has read but not yet uncharged, its forward deficit, at most a quarter of the
    /// limit; equal when nothing was read since the queue last emptied), the receive
    /// limit (`SK_MEMINFO_RCVBUF`, bytes) and the datagrams the socket dropped since it
    /// was created (`SK_MEMINFO_DROPS`).
    pub fn meminfo(&self) -> Result<SockMem, NetError> {
        let mut m = [0u32; libc::SK_MEMINFO_DROPS as usize + 1];
        let mut len = std::mem::size_of_val(&m) as libc::socklen_t;
        // SAFETY: getsockopt writes at most `len` bytes into `m`, which has them; fd is valid.
        let rc = unsafe {
            libc::getsockopt(
                self.fd(),
                libc::SOL_SOCKET,
                libc::SO_MEMINFO,
                m.as_mut_ptr().cast(),
                &mut len,
            )
        };
        if rc != 0 {
            return Err(NetError::last("getsockopt SO_MEMINFO"));
        }
        Ok(SockMem {
            rx_queue_bytes: u64::from(m[libc::SK_MEMINFO_RMEM_ALLOC as usize]),
            rcvbuf_bytes: u64::from(m[libc::SK_MEMINFO_RCVBUF as usize]),
            drops: u64::from(m[libc::SK_MEMINFO_DROPS as usize]),
        })
    }

    /// The socket's inode number, as in the `inode` column of /proc/net/udp.
    pub fn inode(&self) -> Result<u64, NetError> {
        // SAFETY: fstat writes into the zeroed stat we pass; fd is valid.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        let rc = unsafe { libc::fstat(self.fd(), &mut st) };
        if rc != 0 {
            return Err(NetError::last("fstat socket"));
        }
        Ok(st.st_ino)
    }

    /// Sends one datagram on a connected socket. Returns bytes sent or the OS error.
    #[inline]
    pub fn send(&self, buf: &[u8]) -> std::io::Result<usize> {
        // SAFETY: buf is a valid readable slice for its length.
        let n = unsafe { libc::send(self.fd(), buf.as_ptr() as *const libc::c_void, buf.len(), 0) };
        if n < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }

    /// Receives one datagram into `buf`, keeping the sender's address in `peer`.
    /// Returns the datagram's full length (may exceed `buf.len()` when truncated).
    #[inline]
    pub fn recv_from(&self, buf: &mut [u8], peer: &mut PeerAddr) -> std::io::Result<usize> {
        peer.len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        // SAFETY: buf is writable for its length; peer.storage is a sockaddr_storage with
        // its size in peer.len.
        let n = unsafe {
            libc::recvfrom(
                self.fd(),
                buf.as_mut_ptr() as *mut libc::c_void,
                buf.len(),
                libc::MSG_TRUNC,
                &mut peer.storage as *mut libc::sockaddr_storage as *mut libc::sockaddr,
                &mut peer.len,
            )
        };
        if n < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }

    /// Sends one datagram to `peer` (an address filled by [`UdpSock::recv_from`]).
    #[inline]
    pub fn send_to(&self, buf: &[u8], peer: &PeerAddr) -> std::io::Result<usize> {
        // SAFETY: buf is readable; peer.storage holds peer.len valid bytes of address.
        let n = unsafe {
            libc::sendto(
                self.fd(),
                buf.as_ptr() as *const libc::c_void,
                buf.len(),
                0,
                &peer.storage as *const libc::sockaddr_storage as *const libc::sockaddr,
                peer.len,
            )
        };
        if n < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }
}

/// A peer address in kernel form, reused across receives so nothing is allocated.
pub struct PeerAddr {
    storage: libc::sockaddr_storage,
    len: libc::socklen_t,
}

impl Default for PeerAddr {
    fn default() -> Self {
        PeerAddr {
            // SAFETY: an all-zero sockaddr_storage is a valid (AF_UNSPEC) value.
            storage: unsafe { std::mem::zeroed() },
            len: 0,
        }
    }
}

/// How a reuseport BPF program picks a socket of the group for each datagram
/// ([`UdpSock::attach_reuseport_steer`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReuseportSteer {
    /// The CPU that received it (modulo the group's size): one socket per CPU, spread by
    /// RSS/RPS.
    Cpu,
    /// A random socket per datagram: even whatever the flows (order within a flow is no
    /// longer kept).
    Random,
}

#[cfg(test)]
mod meminfo_tests {
    use super::*;

    /// (rx_queue, drops) of the socket with `inode` in /proc/self/net/udp.
    fn proc_row(inode: u64) -> (u64, u64) {
        let text = std::fs::read_to_string("/proc/self/net/udp").unwrap();
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.get(9).and_then(|i| i.parse::<u64>().ok()) == Some(inode) {
                let rxq = u64::from_str_radix(f[4].split(':').nth(1).unwrap(), 16).unwrap();
                return (rxq, f[12].parse().unwrap());
            }
        }
        panic!("inode {inode} not in /proc/self/net/udp");
    }

    #[test]
    fn meminfo_reads_the_queue_and_drops_proc_lists() {
        let rx = UdpSock::bind("127.0.0.1:0".parse().unwrap(), false).unwrap();
        let tx = UdpSock::bind("127.0.0.1:0".parse().unwrap(), false).unwrap();
        tx.connect(rx.local_addr()).unwrap();
        let before = rx.meminfo().unwrap();
        assert_eq!((before.rx_queue_bytes, before.drops), (0, 0));
        assert_eq!(before.rcvbuf_bytes, rx.rcvbuf_bytes().unwrap());
        // Far more than the default buffer holds (about 92 datagrams of 1024 B): the
        // rest are dropped at the socket, and nobody reads.
        for _ in 0..2000 {
            let _ = tx.send(&[7u8; 1024]);
        }
        let m = rx.meminfo().unwrap();
        assert!(m.drops > 0, "{m:?}");
        assert!(
            m.rx_queue_bytes > 0 && m.rx_queue_bytes <= 2 * m.rcvbuf_bytes,
            "{m:?}"
        );
        assert_eq!(proc_row(rx.inode().unwrap()), (m.rx_queue_bytes, m.drops));
        // Read part of the queue: UDP uncharges what was read in bulk (its forward
        // deficit, up to a quarter of the limit), so the charge may exceed /proc's
        // rx_queue by that much; drained, both are 0.
        rx.set_read_timeout(std::time::Duration::from_millis(100))
            .unwrap();
        let (mut buf, mut peer) = ([0u8; 2048], PeerAddr::default());
        for _ in 0..30 {
            rx.recv_from(&mut buf, &mut peer).unwrap();
        }
        let part = rx.meminfo().unwrap();
        let (rxq, _) = proc_row(rx.inode().unwrap());
        assert!(
            part.rx_queue_bytes >= rxq && part.rx_queue_bytes - rxq <= part.rcvbuf_bytes / 4,
            "{part:?} against rx_queue {rxq}"
        );
        while rx.recv_from(&mut buf, &mut peer).is_ok() {}
        assert_eq!(rx.meminfo().unwrap().rx_queue_bytes, 0);
        assert_eq!(proc_row(rx.inode().unwrap()).0, 0);
    }
}
