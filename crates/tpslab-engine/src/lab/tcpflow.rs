//! Bulk TCP: the sink server (`tpslab serve tcp --mode sink`) and the sender that
//! samples TCP_INFO of its flow (`tpslab tcp`).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, Type};
use tpslab_net::tcp::{self as ntcp, Buf, TcpInfo};
use tpslab_net::{mono_ns, NetError};
use tpslab_record::tcp::TcpSample;

use crate::EngineError;

/// Settings of the sink server.
#[derive(Debug, Clone, Copy)]
pub struct SinkConfig {
    /// Address to listen on.
    pub listen: SocketAddr,
    /// SO_RCVBUF of every accepted connection, bytes (set on the listener before
    /// listen(), so the window scale is negotiated for it); `None` = autotuning.
    pub rcvbuf: Option<u64>,
    /// Source instead of sink: write a stream to every connection instead of reading.
    pub source: bool,
    /// SO_SNDBUF of every accepted connection (source), bytes; `None` = autotuning.
    pub sndbuf: Option<u64>,
}

/// The sink: accepts connections and reads and discards everything, one thread per
/// connection. Stops when dropped or with [`SinkServer::stop`].
pub struct SinkServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    bytes: Arc<AtomicU64>,
    conns: Arc<AtomicU64>,
    accept: Option<JoinHandle<()>>,
    /// SO_RCVBUF granted on the listener, bytes (what accepted sockets inherit).
    pub rcvbuf_granted: u64,
}

impl SinkServer {
    /// Binds and starts accepting. Errors: the address is taken or not local, setsockopt.
    pub fn start(cfg: SinkConfig) -> Result<SinkServer, EngineError> {
        let sock = Socket::new(
            Domain::for_address(cfg.listen),
            Type::STREAM,
            Some(Protocol::TCP),
        )
        .map_err(|e| NetError::io("socket TCP", e))?;
        sock.set_reuse_address(true)
            .map_err(|e| NetError::io("SO_REUSEADDR", e))?;
        if let Some(b) = cfg.rcvbuf {
            ntcp::set_buffer(sock.as_raw_fd(), Buf::Recv, b)?;
        }
        if let Some(b) = cfg.sndbuf {
            ntcp::set_buffer(sock.as_raw_fd(), Buf::Send, b)?;
        }
        let rcvbuf_granted = ntcp::buffer(sock.as_raw_fd(), Buf::Recv)?;
        sock.bind(&cfg.listen.into())
            .map_err(|e| NetError::io(format!("bind {}", cfg.listen), e))?;
        sock.listen(128)
            .map_err(|e| NetError::io(format!("listen {}", cfg.listen), e))?;
        let l: TcpListener = sock.into();
        l.set_nonblocking(true)
            .map_err(|e| NetError::io("O_NONBLOCK", e))?;
        let addr = l.local_addr().map_err(|e| NetError::io("getsockname", e))?;
        let stop = Arc::new(AtomicBool::new(false));
        let bytes = Arc::new(AtomicU64::new(0));
        let conns = Arc::new(AtomicU64::new(0));
        let (st, by, co) = (stop.clone(), bytes.clone(), conns.clone());
        let accept = std::thread::Builder::new()
            .name("tcp-sink-accept".into())
            .spawn(move || accept_loop(l, cfg.source, &st, &by, &co))
            .map_err(|e| EngineError::os("spawning the accept thread", e))?;
        Ok(SinkServer {
            addr,
            stop,
            bytes,
            conns,
            accept: Some(accept),
            rcvbuf_granted,
        })
    }

    /// The address it listens on (with the port the kernel chose for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Bytes read so far, all connections.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Relaxed)
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.conns.load(Relaxed)
    }

    /// Stops accepting and reading (within 100 ms); returns bytes read.
    pub fn stop(mut self) -> u64 {
        self.halt();
        self.bytes()
    }

    fn halt(&mut self) {
        self.stop.store(true, Relaxed);
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
    }
}

impl Drop for SinkServer {
    fn drop(&mut self) {
        self.halt();
    }
}

fn accept_loop(
    l: TcpListener,
    source: bool,
    stop: &Arc<AtomicBool>,
    bytes: &Arc<AtomicU64>,
    conns: &AtomicU64,
) {
    let mut readers = vec![];
    while !stop.load(Relaxed) {
        match l.accept() {
            Ok((s, _)) => {
                conns.fetch_add(1, Relaxed);
                let (stop, bytes) = (stop.clone(), bytes.clone());
                readers.push(std::thread::spawn(move || {
                    stream_conn(s, source, &stop, &bytes)
                }));
                readers.retain(|h| !h.is_finished());
            }
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
    for r in readers {
        let _ = r.join();
    }
}

/// Reads and discards (sink) or writes a stream (`source`) on one connection until the
/// peer leaves or `stop`; counts the bytes.
fn stream_conn(mut s: TcpStream, source: bool, stop: &AtomicBool, bytes: &AtomicU64) {
    let _ = s.set_nonblocking(false);
    let tick = Some(Duration::from_millis(100));
    let _ = s.set_read_timeout(tick);
    let _ = s.set_write_timeout(tick);
    let mut buf = vec![0x5au8; 128 * 1024];
    while !stop.load(Relaxed) {
        let r = if source {
            s.write(&buf)
        } else {
            s.read(&mut buf)
        };
        match r {
            Ok(0) => break,
            Ok(n) => {
                bytes.fetch_add(n as u64, Relaxed);
            }
            Err(e) if crate::retryable(&e) => {}
            Err(_) => break,
        }
    }
}

use tpslab_plan::tcp::FlowPlan;
use tpslab_record::tcp::{FlowRecord, LabStats, WatchedFlow};

fn to_sample(t_ns: u64, i: &TcpInfo) -> TcpSample {
    TcpSample {
        t_ns,
        bytes_acked: i.bytes_acked.unwrap_or(0).saturating_sub(1),
        bytes_retrans: i.bytes_retrans.unwrap_or(0),
        retrans_segs: i.total_retrans,
        rtt_us: i.rtt_us,
        rttvar_us: i.rttvar_us,
        min_rtt_us: i.min_rtt_us.unwrap_or(0),
        cwnd_segs: i.cwnd_segs,
        mss: i.snd_mss,
        in_flight_bytes: i.unacked_segs as u64 * i.snd_mss as u64,
        peer_window_bytes: i.snd_wnd_bytes.unwrap_or(0),
        notsent_bytes: i.notsent_bytes.unwrap_or(0),
        delivery_rate_bps: i.delivery_rate_bps.unwrap_or(0),
        busy_us: i.busy_us.unwrap_or(0),
        rwnd_limited_us: i.rwnd_limited_us.unwrap_or(0),
        sndbuf_limited_us: i.sndbuf_limited_us.unwrap_or(0),
        chronos: i.busy_us.is_some(),
        bytes_received: i.bytes_received.unwrap_or(0),
        rcv_rtt_us: i.rcv_rtt_us,
        rcv_wnd_bytes: i.rcv_wnd_bytes.unwrap_or(0),
        timestamps: i.options & 1 == 1,
    }
}

/// Connects a TCP socket to `target` with SO_SNDBUF / SO_RCVBUF set first (so the window
/// scale suits them), in the calling thread's network namespace. Errors: refused,
/// unreachable, no answer within `timeout`.
pub fn connect(
    target: SocketAddr,
    sndbuf: Option<u64>,
    rcvbuf: Option<u64>,
    timeout: Duration,
) -> Result<TcpStream, EngineError> {
    let sock = Socket::new(
        Domain::for_address(target),
        Type::STREAM,
        Some(Protocol::TCP),
    )
    .map_err(|e| NetError::io("socket TCP", e))?;
    if let Some(b) = sndbuf {
        ntcp::set_buffer(sock.as_raw_fd(), Buf::Send, b)?;
    }
    if let Some(b) = rcvbuf {
        ntcp::set_buffer(sock.as_raw_fd(), Buf::Recv, b)?;
    }
    sock.connect_timeout(&target.into(), timeout)
        .map_err(|e| NetError::io(format!("connect {target}"), e))?;
    Ok(sock.into())
}

/// Sends a bulk stream on `stream` (connected by [`connect`]) for the plan's duration
/// while sampling its TCP_INFO every interval on the calling thread. Stops early when
/// `stop` is set. Errors: TCP_INFO cannot be read.
pub fn run_flow(
    stream: TcpStream,
    plan: FlowPlan,
    connect_ns: u64,
    stop: &AtomicBool,
) -> Result<FlowRecord, EngineError> {
    let fd = stream.as_raw_fd();
    let sndbuf_granted = ntcp::buffer(fd, Buf::Send)?;
    let t0 = mono_ns();
    let end = t0 + tpslab_plan::time::nanos(&plan.duration);
    let mut samples = vec![to_sample(0, &ntcp::tcp_info(fd)?)];
    let done = AtomicBool::new(false);
    let written = AtomicU64::new(0);
    let read = AtomicU64::new(0);
    let stream = Arc::new(stream);
    let error = std::thread::scope(|s| {
        let w = s.spawn(|| {
            let mut st: &TcpStream = &stream;
            let _ = st.set_write_timeout(Some(Duration::from_millis(50)));
            let _ = st.set_read_timeout(Some(Duration::from_millis(50)));
            let mut buf = vec![0x5au8; plan.write_bytes.max(1)];
            let mut err = None;
            while !done.load(Relaxed) && !stop.load(Relaxed) && mono_ns() < end {
                let r = if plan.reverse {
                    st.read(&mut buf)
                } else {
                    st.write(&buf)
                };
                match r {
                    Ok(0) if plan.reverse => {
                        err = Some("read: the source closed the connection".into());
                        break;
                    }
                    Ok(n) => {
                        if plan.reverse { &read } else { &written }.fetch_add(n as u64, Relaxed);
                    }
                    Err(e) if crate::retryable(&e) => {}
                    Err(e) => {
                        err = Some(format!(
                            "{}: {e}",
                            if plan.reverse { "read" } else { "write" }
                        ));
                        break;
                    }
                }
            }
            err
        });
        let mut next = t0 + tpslab_plan::time::nanos(&plan.interval);
        loop {
            let now = mono_ns();
            if now >= end || stop.load(Relaxed) || w.is_finished() {
                break;
            }
            std::thread::sleep(Duration::from_nanos(next.min(end).saturating_sub(now)));
            if let Ok(i) = ntcp::tcp_info(fd) {
                samples.push(to_sample(mono_ns() - t0, &i));
            }
            next += tpslab_plan::time::nanos(&plan.interval);
        }
        done.store(true, Relaxed);
        w.join()
            .unwrap_or_else(|_| Some("writer thread panicked".into()))
    });
    if let Ok(i) = ntcp::tcp_info(fd) {
        samples.push(to_sample(mono_ns() - t0, &i));
    }
    Ok(FlowRecord {
        plan,
        sndbuf_granted,
        rcvbuf_granted: ntcp::buffer(fd, Buf::Recv).unwrap_or(0),
        connect_ns,
        bytes_written: written.load(Relaxed),
        bytes_read: read.load(Relaxed),
        samples,
        error,
        interrupted: stop.load(Relaxed),
    })
}

/// Runs a flow between two fresh network namespaces joined by the delay line: the sink
/// listens on link::ADDR_B in one, the sender connects from the other. Nothing on the
/// host changes; both namespaces vanish at the end. `plan.target`'s port is used, its
/// address replaced by ADDR_B. Errors: no CAP_SYS_ADMIN/CAP_NET_ADMIN, connect fails.
/// With `plan.reverse` the far end is a source (its SO_SNDBUF `far_buf`) and this side
/// receives; otherwise the far end is a sink (its SO_RCVBUF `far_buf`).
pub fn run_lab_flow(
    link: tpslab_plan::tcp::LinkConfig,
    sink_rcvbuf: Option<u64>,
    mut plan: FlowPlan,
    stop: &AtomicBool,
) -> Result<(FlowRecord, LabStats), EngineError> {
    use tpslab_net::ns::NetNs;
    let ns = |w: &str| {
        NetNs::create().map_err(|e| EngineError::os(format!("creating network namespace {w}"), e))
    };
    let (a, b) = (ns("A (sender)")?, ns("B (sink)")?);
    let l = crate::lab::link::Link::start(&a, &b, link)?;
    plan.target = SocketAddr::from((crate::lab::link::ADDR_B, plan.target.port()));
    let listen = plan.target;
    let sink = b
        .run(|| {
            SinkServer::start(SinkConfig {
                listen,
                rcvbuf: (!plan.reverse).then_some(sink_rcvbuf).flatten(),
                source: plan.reverse,
                sndbuf: plan.reverse.then_some(sink_rcvbuf).flatten(),
            })
        })
        .map_err(|e| EngineError::os("entering namespace B", e))??;
    let t = mono_ns();
    let stream = a
        .run(|| {
            connect(
                plan.target,
                plan.sndbuf,
                plan.rcvbuf,
                Duration::from_secs(5),
            )
        })
        .map_err(|e| EngineError::os("entering namespace A", e))??;
    let connect_ns = mono_ns() - t;
    let flow = run_flow(stream, plan, connect_ns, stop)?;
    let sink_rcvbuf_granted = sink.rcvbuf_granted;
    let sink_bytes = sink.stop();
    let link_stats = l.stop();
    Ok((
        flow,
        LabStats {
            link,
            link_stats,
            sink_rcvbuf,
            sink_rcvbuf_granted,
            sink_bytes,
        },
    ))
}

/// Socket inodes of `pid` (its /proc/PID/fd links `socket:[N]`). Errors: the fd
/// directory cannot be read (another user's process without root).
fn socket_inodes(pid: u32) -> std::io::Result<std::collections::HashSet<u64>> {
    let mut out = std::collections::HashSet::new();
    {
        let dir = std::fs::read_dir(format!("/proc/{pid}/fd"))?;
        for e in dir.flatten() {
            if let Ok(l) = std::fs::read_link(e.path()) {
                let l = l.to_string_lossy();
                if let Some(n) = l.strip_prefix("socket:[").and_then(|r| r.strip_suffix(']')) {
                    if let Ok(n) = n.parse() {
                        out.insert(n);
                    }
                }
            }
        }
    }
    Ok(out)
}

/// Whether `pid` lives in the caller's network namespace (then no setns, which needs
/// CAP_SYS_ADMIN even for one's own namespace, is needed).
fn same_netns(pid: u32) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (
        std::fs::metadata(format!("/proc/{pid}/ns/net")),
        std::fs::metadata("/proc/self/ns/net"),
    ) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// Samples the established TCP flows of process `pid` (in its network namespace) and/or
/// with `port` at either end, every `interval_ns` for `duration_ns` (or until `stop`);
/// `waits`, when given, samples the process's threads at the same ticks (at most every
/// 100 ms). Errors: the namespace cannot be entered (no such PID, not permitted),
/// netlink fails.
pub fn watch_flows(
    pid: Option<u32>,
    port: Option<u16>,
    duration_ns: u64,
    interval_ns: u64,
    stop: &AtomicBool,
    mut waits: Option<&mut crate::observe::waits::WaitSampler>,
) -> Result<Vec<WatchedFlow>, EngineError> {
    use tpslab_net::diag::SockDiag;
    let mut diag = match pid {
        Some(p) if !same_netns(p) => tpslab_net::ns::NetNs::open(&format!("/proc/{p}/ns/net"))
            .and_then(|ns| ns.run(SockDiag::open))
            .map_err(|e| EngineError::os(format!("network namespace of PID {p}"), e))?
            .map_err(|e| {
                EngineError::Other(format!("sock_diag in the namespace of PID {p}: {e}"))
            })?,
        _ => SockDiag::open().map_err(|e| EngineError::os("sock_diag", e))?,
    };
    let mut flows: Vec<WatchedFlow> = vec![];
    let t0 = mono_ns();
    let mut next = t0;
    let mut waited = None::<u64>;
    loop {
        if let Some(w) = waits.as_deref_mut() {
            let now = mono_ns();
            // Ticks of 100 ms land a little early or late: 95 ms apart is the next one.
            if waited.is_none_or(|t| now >= t + 95_000_000) {
                w.sample();
                waited = Some(now);
            }
        }
        let inodes = match pid {
            Some(p) => Some(socket_inodes(p).map_err(|e| {
                EngineError::Other(format!("the sockets of PID {p} (/proc/{p}/fd): {e}"))
            })?),
            None => None,
        };
        let now = mono_ns();
        let dump = diag
            .tcp_dump(1 << 1)
            .map_err(|e| EngineError::os("sock_diag TCP dump", e))?;
        for f in dump {
            if inodes.as_ref().is_some_and(|set| !set.contains(&f.inode)) {
                continue;
            }
            if port.is_some_and(|p| f.local.port() != p && f.remote.port() != p) {
                continue;
            }
            let Some(info) = f.info else { continue };
            let i = match flows
                .iter()
                .position(|w| w.inode == f.inode && w.local == f.local)
            {
                Some(i) => i,
                None => {
                    flows.push(WatchedFlow {
                        local: f.local,
                        remote: f.remote,
                        inode: f.inode,
                        sndbuf: 0,
                        rcvbuf: 0,
                        samples: vec![],
                    });
                    flows.len() - 1
                }
            };
            let w = &mut flows[i];
            w.sndbuf = f.sndbuf;
            w.rcvbuf = f.rcvbuf;
            w.samples.push(to_sample(now - t0, &info));
        }
        next += interval_ns;
        if next > t0 + duration_ns || stop.load(Relaxed) {
            break;
        }
        while mono_ns() < next && !stop.load(Relaxed) {
            std::thread::sleep(Duration::from_nanos(
                next.saturating_sub(mono_ns()).min(50_000_000),
            ));
        }
    }
    Ok(flows)
}

#[cfg(test)]
#[path = "tcpflow_tests.rs"]
mod tests;
