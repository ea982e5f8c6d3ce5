//! TCP sockets for the bulk-flow lab: TCP_INFO snapshots, buffer sizes, window clamp.
//!
//! [`tcp_info`] reads `getsockopt(TCP_INFO)` into [`TcpInfo`]; fields newer than the
//! running kernel's struct (it returns its own length) read as `None`, so the caller can
//! tell "zero" from "not reported" (e.g. the limit chronographs need Linux 4.10, the
//! peer's window `tcpi_snd_wnd` 5.4).

use std::mem::{offset_of, size_of};
use std::os::fd::RawFd;

use crate::NetError;

/// The kernel's `struct tcp_info` (include/uapi/linux/tcp.h) up to `tcpi_rcv_wnd`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct RawTcpInfo {
    state: u8,
    ca_state: u8,
    retransmits: u8,
    probes: u8,
    backoff: u8,
    options: u8,
    wscale: u8,
    app_limited: u8,
    rto: u32,
    ato: u32,
    snd_mss: u32,
    rcv_mss: u32,
    unacked: u32,
    sacked: u32,
    lost: u32,
    retrans: u32,
    fackets: u32,
    last_data_sent: u32,
    last_ack_sent: u32,
    last_data_recv: u32,
    last_ack_recv: u32,
    pmtu: u32,
    rcv_ssthresh: u32,
    rtt: u32,
    rttvar: u32,
    snd_ssthresh: u32,
    snd_cwnd: u32,
    advmss: u32,
    reordering: u32,
    rcv_rtt: u32,
    rcv_space: u32,
    total_retrans: u32,
    pacing_rate: u64,
    max_pacing_rate: u64,
    bytes_acked: u64,
    bytes_received: u64,
    segs_out: u32,
    segs_in: u32,
    notsent_bytes: u32,
    min_rtt: u32,
    data_segs_in: u32,
    data_segs_out: u32,
    delivery_rate: u64,
    busy_time: u64,
    rwnd_limited: u64,
    sndbuf_limited: u64,
    delivered: u32,
    delivered_ce: u32,
    bytes_sent: u64,
    bytes_retrans: u64,
    dsack_dups: u32,
    reord_seen: u32,
    rcv_ooopack: u32,
    snd_wnd: u32,
    rcv_wnd: u32,
}

/// One `TCP_INFO` reading of a socket. Times in microseconds, sizes in bytes, windows
/// in segments where named so; `None` when the running kernel's struct is too short to
/// carry the field.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TcpInfo {
    /// TCP state (1 = ESTABLISHED).
    pub state: u8,
    /// Congestion-avoidance state (0 open, 1 disorder, 2 CWR, 3 recovery, 4 loss).
    pub ca_state: u8,
    /// Options negotiated (`tcpi_options`: 1 timestamps, 2 SACK, 4 window scale, ...).
    pub options: u8,
    /// Sender MSS, bytes.
    pub snd_mss: u32,
    /// Segments sent and not yet acknowledged (`tcpi_unacked`): the flight, in segments.
    pub unacked_segs: u32,
    /// Smoothed RTT, us (`tcpi_rtt`).
    pub rtt_us: u32,
    /// RTT variance, us (`tcpi_rttvar`).
    pub rttvar_us: u32,
    /// Congestion window, segments (`tcpi_snd_cwnd`).
    pub cwnd_segs: u32,
    /// Slow-start threshold, segments (`tcpi_snd_ssthresh`; 2^31-1 = not set yet).
    pub ssthresh_segs: u32,
    /// Retransmitted segments over the connection's life (`tcpi_total_retrans`).
    pub total_retrans: u32,
    /// The receiver's RTT estimate, us (`tcpi_rcv_rtt`; 0 until measured).
    pub rcv_rtt_us: u32,
    /// The receive-buffer space autotuning aims for, bytes (`tcpi_rcv_space`).
    pub rcv_space: u32,
    /// Bytes acknowledged by the peer (`tcpi_bytes_acked`, Linux 4.1+); on the side that
    /// connected it includes 1 for the SYN, so use differences.
    pub bytes_acked: Option<u64>,
    /// Bytes received (`tcpi_bytes_received`, Linux 4.1+).
    pub bytes_received: Option<u64>,
    /// Bytes written by the application and not yet sent (`tcpi_notsent_bytes`, 4.6+).
    pub notsent_bytes: Option<u32>,
    /// Minimum RTT seen, us (`tcpi_min_rtt`, 4.6+).
    pub min_rtt_us: Option<u32>,
    /// Latest delivery-rate sample, bytes/s (`tcpi_delivery_rate`, 4.9+).
    pub delivery_rate_bps: Option<u64>,
    /// Whether that sample was limited by the application (4.9+).
    pub delivery_rate_app_limited: bool,
    /// Time with data outstanding, us (`tcpi_busy_time`, 4.10+): includes the two below.
    pub busy_us: Option<u64>,
    /// Time limited by the peer's receive window, us (`tcpi_rwnd_limited`, 4.10+).
    pub rwnd_limited_us: Option<u64>,
    /// Time limited by the local send buffer, us (`tcpi_sndbuf_limited`, 4.10+).
    pub sndbuf_limited_us: Option<u64>,
    /// Bytes sent including retransmissions (`tcpi_bytes_sent`, 4.19+).
    pub bytes_sent: Option<u64>,
    /// Bytes retransmitted (`tcpi_bytes_retrans`, 4.19+).
    pub bytes_retrans: Option<u64>,
    /// The peer's advertised receive window after scaling, bytes (`tcpi_snd_wnd`, 5.4+).
    pub snd_wnd_bytes: Option<u32>,
    /// Our advertised receive window after scaling, bytes (`tcpi_rcv_wnd`, 6.x).
    pub rcv_wnd_bytes: Option<u32>,
}

/// Reads `TCP_INFO` of the TCP socket `fd`. Errors: not a TCP socket, bad fd.
pub fn tcp_info(fd: RawFd) -> Result<TcpInfo, NetError> {
    let (raw, len) = raw_tcp_info(fd)?;
    Ok(convert(&raw, len))
}

/// Milliseconds since the socket last received an acknowledgement (`tcpi_last_ack_recv`,
/// from `tp->rcv_tstamp`, which every acceptable ACK moves, a keepalive probe's answer
/// included). Errors: not a TCP socket, bad fd.
pub fn last_ack_recv_ms(fd: RawFd) -> Result<u32, NetError> {
    Ok(raw_tcp_info(fd)?.0.last_ack_recv)
}

/// The kernel's `struct tcp_info` of `fd` and how many bytes of it the kernel wrote (an
/// older kernel's is shorter). Errors: not a TCP socket, bad fd.
fn raw_tcp_info(fd: RawFd) -> Result<(RawTcpInfo, usize), NetError> {
    let mut raw = RawTcpInfo::default();
    let mut len = size_of::<RawTcpInfo>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `raw`, a plain-old-data struct.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut raw as *mut RawTcpInfo).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(NetError::last("getsockopt TCP_INFO"));
    }
    Ok((raw, len as usize))
}

/// Converts the first `len` valid bytes of a raw `struct tcp_info`.
fn convert(raw: &RawTcpInfo, len: usize) -> TcpInfo {
    let has = |off: usize, sz: usize| off + sz <= len;
    macro_rules! opt {
        ($f:ident) => {
            has(offset_of!(RawTcpInfo, $f), std::mem::size_of_val(&raw.$f)).then_some(raw.$f)
        };
    }
    TcpInfo {
        state: raw.state,
        ca_state: raw.ca_state,
        options: raw.options,
        snd_mss: raw.snd_mss,
        unacked_segs: raw.unacked,
        rtt_us: raw.rtt,
        rttvar_us: raw.rttvar,
        cwnd_segs: raw.snd_cwnd,
        ssthresh_segs: raw.snd_ssthresh,
        total_retrans: raw.total_retrans,
        rcv_rtt_us: raw.rcv_rtt,
        rcv_space: raw.rcv_space,
        bytes_acked: opt!(bytes_acked),
        bytes_received: opt!(bytes_received),
        notsent_bytes: opt!(notsent_bytes),
        min_rtt_us: opt!(min_rtt),
        delivery_rate_bps: opt!(delivery_rate),
        delivery_rate_app_limited: raw.app_limited & 1 == 1,
        busy_us: opt!(busy_time),
        rwnd_limited_us: opt!(rwnd_limited),
        sndbuf_limited_us: opt!(sndbuf_limited),
        bytes_sent: opt!(bytes_sent),
        bytes_retrans: opt!(bytes_retrans),
        snd_wnd_bytes: opt!(snd_wnd),
        rcv_wnd_bytes: opt!(rcv_wnd),
    }
}

/// Parses a `struct tcp_info` as the kernel sends it in an INET_DIAG_INFO attribute
/// (sock_diag): fields beyond `bytes` read as `None`, extra bytes are ignored.
pub fn tcp_info_from_bytes(bytes: &[u8]) -> TcpInfo {
    let mut raw = RawTcpInfo::default();
    let n = bytes.len().min(size_of::<RawTcpInfo>());
    // SAFETY: copies n <= size_of::<RawTcpInfo>() bytes into a plain-old-data struct.
    unsafe {
        std::ptr::copy_nonoverlapping(
            bytes.as_ptr(),
            (&mut raw as *mut RawTcpInfo).cast::<u8>(),
            n,
        )
    };
    convert(&raw, n)
}

fn setsockopt_int(fd: RawFd, level: i32, name: i32, v: i32, what: &str) -> Result<(), NetError> {
    // SAFETY: passes a valid int and its size.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&v as *const i32).cast(),
            size_of::<i32>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(NetError::last(format!("setsockopt {what} {v}")));
    }
    Ok(())
}

fn getsockopt_int(fd: RawFd, level: i32, name: i32, what: &str) -> Result<i32, NetError> {
    let mut v: i32 = 0;
    let mut len = size_of::<i32>() as libc::socklen_t;
    // SAFETY: the kernel writes an int into `v`.
    let rc = unsafe { libc::getsockopt(fd, level, name, (&mut v as *mut i32).cast(), &mut len) };
    if rc != 0 {
        return Err(NetError::last(format!("getsockopt {what}")));
    }
    Ok(v)
}

/// Which socket buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Buf {
    /// SO_SNDBUF (SO_SNDBUFFORCE when permitted).
    Send,
    /// SO_RCVBUF (SO_RCVBUFFORCE when permitted).
    Recv,
}

/// Sets a socket buffer to `bytes` (the kernel doubles it for overhead and turns off
/// autotuning of that buffer for this socket) and returns what it granted, bytes (the
/// getsockopt value, 2x the request unless capped). Tries the FORCE variant first so
/// root is not capped at net.core.{r,w}mem_max; falls back on EPERM. Errors: the
/// request does not fit an int, or setsockopt fails otherwise.
pub fn set_buffer(fd: RawFd, which: Buf, bytes: u64) -> Result<u64, NetError> {
    let v = i32::try_from(bytes)
        .map_err(|_| NetError::Invalid(format!("buffer {bytes} bytes: at most {}", i32::MAX)))?;
    let (force, plain, name) = match which {
        Buf::Send => (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF, "SO_SNDBUF"),
        Buf::Recv => (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF, "SO_RCVBUF"),
    };
    if setsockopt_int(fd, libc::SOL_SOCKET, force, v, name).is_err() {
        setsockopt_int(fd, libc::SOL_SOCKET, plain, v, name)?;
    }
    buffer(fd, which)
}

/// The socket buffer limit the kernel applies now, bytes (getsockopt SO_SNDBUF /
/// SO_RCVBUF: the doubled value, or the autotuned one).
pub fn buffer(fd: RawFd, which: Buf) -> Result<u64, NetError> {
    let (name, what) = match which {
        Buf::Send => (libc::SO_SNDBUF, "SO_SNDBUF"),
        Buf::Recv => (libc::SO_RCVBUF, "SO_RCVBUF"),
    };
    Ok(getsockopt_int(fd, libc::SOL_SOCKET, name, what)?.max(0) as u64)
}

/// Asks the kernel to acknowledge at once (TCP_QUICKACK 1): an ACK it was delaying is
/// sent now, and the connection leaves delayed-ACK (pingpong) mode until the kernel
/// enters it again on its own (it does as the connection goes on: set it before each
/// read to keep it). Errors: setsockopt fails (not a TCP socket).
pub fn set_quickack(fd: RawFd) -> Result<(), NetError> {
    setsockopt_int(fd, libc::IPPROTO_TCP, libc::TCP_QUICKACK, 1, "TCP_QUICKACK")
}

/// Clamps the receive window this socket advertises to `bytes` (TCP_WINDOW_CLAMP; the
/// kernel raises values below SOCK_MIN_RCVBUF / 2).
pub fn set_window_clamp(fd: RawFd, bytes: u32) -> Result<(), NetError> {
    let v = i32::try_from(bytes).map_err(|_| NetError::Invalid(format!("clamp {bytes}")))?;
    setsockopt_int(
        fd,
        libc::IPPROTO_TCP,
        libc::TCP_WINDOW_CLAMP,
        v,
        "TCP_WINDOW_CLAMP",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;

    #[test]
    fn tcp_info_counts_bytes_on_loopback() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let t = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut buf = vec![0u8; 65536];
            let mut n = 0;
            while n < 1_000_000 {
                n += s.read(&mut buf).unwrap();
            }
            s // kept open, so the connection stays ESTABLISHED
        });
        let mut c = std::net::TcpStream::connect(addr).unwrap();
        let granted = set_buffer(c.as_raw_fd(), Buf::Send, 100_000).unwrap();
        assert!(granted >= 100_000, "{granted}");
        c.write_all(&vec![7u8; 1_000_000]).unwrap();
        let _peer = t.join().unwrap();
        let i = tcp_info(c.as_raw_fd()).unwrap();
        assert_eq!(i.state, 1, "ESTABLISHED");
        // All 1 MB acked once the reader had it (plus nothing else).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        let mut acked = i.bytes_acked.unwrap();
        while acked < 1_000_001 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
            acked = tcp_info(c.as_raw_fd()).unwrap().bytes_acked.unwrap();
        }
        // tcpi_bytes_acked counts the SYN's sequence number too: 1 + the payload.
        assert_eq!(acked, 1_000_001);
        assert!(i.snd_mss > 0 && i.cwnd_segs > 0 && i.rtt_us > 0, "{i:?}");
        assert!(i.busy_us.is_some() && i.snd_wnd_bytes.is_some(), "{i:?}");
        assert!(tcp_info(-1).is_err());
    }
}
