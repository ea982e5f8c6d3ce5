//! The reference UDP server (the S1 workload): N threads, one SO_REUSEPORT socket each,
//! recvfrom or recvmmsg batches, find-and-replace/echo/sink, optional busy work, affinity
//! and scheduling policy per thread.

use crate::serve::counters::ErrnoCounts;
use crate::serve::wire;
use crate::EngineError;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;
use tpslab_net::sched::{self, SchedPolicy};
use tpslab_net::{mono_ns, RcvbufGrant, RecvBatch, UdpSock};
use tpslab_record::ServerReport;

use tpslab_plan::udp::{Mode, ServerConfig};

/// Per-thread counters, written by one thread with relaxed atomics (read by reporters).
#[derive(Default)]
#[repr(align(128))]
pub struct ThreadCounters {
    /// Datagrams read.
    pub received: AtomicU64,
    /// Bytes read (full datagram lengths).
    pub received_bytes: AtomicU64,
    /// Datagrams longer than the slot.
    pub truncated: AtomicU64,
    /// Replies accepted by the kernel.
    pub answered: AtomicU64,
    /// Replies refused by the kernel.
    pub reply_failed: AtomicU64,
    /// Datagrams fully handled (work done, reply attempted); equals `received` when the
    /// thread holds nothing in flight.
    pub done: AtomicU64,
    /// Refusals by errno.
    pub reply_errors: ErrnoCounts,
}

/// Adds to a counter that only one thread writes: a plain load and store, no locked
/// read-modify-write on the hot path.
#[inline]
fn bump(c: &AtomicU64, n: u64) {
    c.store(c.load(Relaxed) + n, Relaxed);
}

/// How long threads keep draining their socket after a stop request, at most.
const STOP_DRAIN_NS: u64 = 1_000_000_000;

/// A live count of datagrams: read by a server, or sent by the generator.
#[derive(Clone)]
pub struct ReadProbe(std::sync::Arc<dyn Fn() -> u64 + Send + Sync>);

impl ReadProbe {
    /// A probe reading `count` (a live counter of another part of tpslab).
    pub fn new(count: impl Fn() -> u64 + Send + Sync + 'static) -> ReadProbe {
        ReadProbe(std::sync::Arc::new(count))
    }

    /// The count now.
    pub fn get(&self) -> u64 {
        (self.0)()
    }
}

impl std::fmt::Debug for ReadProbe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ReadProbe({})", self.get())
    }
}

/// A running server. Dropping it without [`UdpServer::stop`] detaches the threads.
pub struct UdpServer {
    config: ServerConfig,
    /// 0 while running; the monotonic time of the stop request after.
    stop: Arc<AtomicU64>,
    counters: Arc<Vec<ThreadCounters>>,
    threads: Vec<JoinHandle<()>>,
    grant: RcvbufGrant,
    inodes: Vec<u64>,
    tids: Vec<u32>,
    local: SocketAddr,
}

const SLOT_BYTES: usize = 65536;
const POLL: Duration = Duration::from_millis(20);

fn busy_work(ns: u64) {
    if ns == 0 {
        return;
    }
    let start = mono_ns();
    while mono_ns().wrapping_sub(start) < ns {
        std::hint::spin_loop();
    }
}

impl UdpServer {
    /// Binds the sockets and starts the threads. Errors: the port in use, a bad address,
    /// affinity or policy refused (e.g. EPERM for fifo without root).
    pub fn start(config: ServerConfig) -> Result<UdpServer, EngineError> {
        // Probe without SO_REUSEPORT: fails with EADDRINUSE when anyone holds the port, even
        // a socket that set SO_REUSEPORT itself (we must not silently share its traffic).
        let probe = UdpSock::bind(config.bind, false).map_err(EngineError::Net)?;
        let bind = probe.local_addr();
        drop(probe);
        let mut socks = Vec::with_capacity(config.threads);
        for _ in 0..config.threads {
            let s = UdpSock::bind(bind, true).map_err(EngineError::Net)?;
            s.set_read_timeout(POLL).map_err(EngineError::Net)?;
            socks.push(s);
        }
        let mut grant = socks[0].default_grant().map_err(EngineError::Net)?;
        let steer = match config.steer {
            tpslab_plan::udp::Steer::Hash => None,
            tpslab_plan::udp::Steer::Cpu => Some(tpslab_net::ReuseportSteer::Cpu),
            tpslab_plan::udp::Steer::Random => Some(tpslab_net::ReuseportSteer::Random),
        };
        if let Some(steer) = steer {
            // One socket's program steers the whole group; index i is socks[i] (the
            // order they joined it), read by thread i.
            socks[0]
                .attach_reuseport_steer(steer, socks.len() as u32)
                .map_err(EngineError::Net)?;
        }
        if config.gro {
            for s in &socks {
                s.set_gro(true).map_err(EngineError::Net)?;
            }
        }
        if let Some(us) = config.busy_poll_us {
            for s in &socks {
                s.set_busy_poll(us).map_err(EngineError::Net)?;
            }
        }
        if let Some(bytes) = config.rcvbuf {
            for s in &socks {
                grant = s.set_rcvbuf(bytes).map_err(EngineError::Net)?;
            }
        }
        let inodes = socks
            .iter()
            .map(|s| s.inode())
            .collect::<Result<Vec<_>, _>>()
            .map_err(EngineError::Net)?;
        let stop = Arc::new(AtomicU64::new(0));
        let counters: Arc<Vec<ThreadCounters>> = Arc::new(
            (0..config.threads)
                .map(|_| ThreadCounters::default())
                .collect(),
        );
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<u32, String>>();
        let mut threads = vec![];
        for (idx, sock) in socks.into_iter().enumerate() {
            let cfg = config.clone();
            let stop = stop.clone();
            let counters = counters.clone();
            let ready = ready_tx.clone();
            let h = std::thread::Builder::new()
                .name(format!("tpslab-srv{idx}"))
                .spawn(move || {
                    let setup = (|| {
                        if !cfg.cpus.is_empty() {
                            sched::set_affinity(&cfg.cpus).map_err(|e| e.to_string())?;
                        }
                        if cfg.sched != SchedPolicy::Other {
                            sched::set_policy(cfg.sched).map_err(|e| e.to_string())?;
                        }
                        Ok(tpslab_net::gettid())
                    })();
                    let ok = setup.is_ok();
                    let _ = ready.send(setup);
                    if ok {
                        serve_loop(&cfg, &sock, &counters[idx], &stop);
                    }
                })
                .map_err(|e| EngineError::os("spawn server thread", e))?;
            threads.push(h);
        }
        drop(ready_tx);
        let mut tids = vec![];
        let mut first_err = None;
        for _ in 0..config.threads {
            match ready_rx.recv() {
                Ok(Ok(tid)) => tids.push(tid),
                Ok(Err(e)) => {
                    first_err.get_or_insert(e);
                }
                Err(_) => {
                    first_err.get_or_insert("server thread died during setup".into());
                }
            }
        }
        let server = UdpServer {
            config,
            stop,
            counters,
            threads,
            grant,
            inodes,
            tids,
            local: bind,
        };
        if let Some(e) = first_err {
            server.stop();
            return Err(EngineError::Other(format!("server thread setup: {e}")));
        }
        Ok(server)
    }

    /// The bound address (with the real port when 0 was asked).
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Inodes of the server sockets, as in /proc/net/udp.
    pub fn socket_inodes(&self) -> &[u64] {
        &self.inodes
    }

    /// Kernel thread ids of the server threads.
    pub fn tids(&self) -> &[u32] {
        &self.tids
    }

    /// A live view of the datagrams read so far (all threads), for an observer thread:
    /// reading it costs the server nothing.
    pub fn read_probe(&self) -> ReadProbe {
        let c = self.counters.clone();
        ReadProbe(std::sync::Arc::new(move || {
            c.iter().map(|t| t.received.load(Relaxed)).sum()
        }))
    }

    /// Datagrams read so far, all threads.
    pub fn received(&self) -> u64 {
        self.counters.iter().map(|c| c.received.load(Relaxed)).sum()
    }

    /// Whether every datagram read so far has been fully handled (nothing in flight in
    /// the threads; the sockets' queues are checked separately).
    pub fn idle(&self) -> bool {
        self.counters
            .iter()
            .all(|c| c.done.load(Relaxed) == c.received.load(Relaxed))
    }

    /// The counts so far, as they go into the run record.
    pub fn report(&self) -> ServerReport {
        let c = &self.counters;
        let sum = |f: fn(&ThreadCounters) -> &AtomicU64| c.iter().map(|t| f(t).load(Relaxed)).sum();
        let mut errors = std::collections::BTreeMap::new();
        for t in c.iter() {
            t.reply_errors.merge_into(&mut errors);
        }
        ServerReport {
            bind: self.local.to_string(),
            mode: self.config.mode.to_string(),
            threads: self.config.threads,
            batch: self.config.batch,
            work_ns: tpslab_plan::time::nanos(&self.config.work),
            rcvbuf_requested_bytes: self.grant.requested_bytes,
            rcvbuf_granted_bytes: self.grant.granted_bytes,
            rcvbuf_forced: self.grant.forced,
            cpus: self.config.cpus.clone(),
            sched: self.config.sched.to_string(),
            busy_poll_us: self.config.busy_poll_us,
            gro: self.config.gro,
            socket_inodes: self.inodes.clone(),
            tids: self.tids.clone(),
            received: sum(|t| &t.received),
            received_bytes: sum(|t| &t.received_bytes),
            truncated: sum(|t| &t.truncated),
            answered: sum(|t| &t.answered),
            reply_failed: sum(|t| &t.reply_failed),
            reply_errors: errors,
            received_per_thread: c.iter().map(|t| t.received.load(Relaxed)).collect(),
            reuseport_steer: self.config.steer,
        }
    }

    /// Asks the threads to stop once their sockets are empty (or after draining for at
    /// most 1 s under endless load), waits for them and returns the final counts.
    pub fn stop(mut self) -> ServerReport {
        self.stop.store(mono_ns().max(1), Relaxed);
        for h in self.threads.drain(..) {
            let _ = h.join();
        }
        self.report()
    }
}

/// Whether the thread should exit: a stop was requested and the socket was just found
/// empty, or the drain deadline passed.
#[inline]
fn should_exit(stop: &AtomicU64, empty: bool) -> bool {
    let at = stop.load(Relaxed);
    at != 0 && (empty || mono_ns() > at + STOP_DRAIN_NS)
}

/// Reads until a stop is requested and the socket has been empty for one poll interval.
fn serve_loop(cfg: &ServerConfig, sock: &UdpSock, c: &ThreadCounters, stop: &AtomicU64) {
    let finder = memchr::memmem::Finder::new(wire::FIND);
    let fd = sock.fd();
    let work_ns = tpslab_plan::time::nanos(&cfg.work);
    let process = |data: &mut [u8]| {
        if cfg.mode == Mode::Replace {
            wire::find_and_replace(&finder, data);
        }
        busy_work(work_ns);
    };
    if cfg.batch <= 1 && !cfg.gro {
        let mut buf = vec![0u8; SLOT_BYTES];
        let mut peer = tpslab_net::sock::PeerAddr::default();
        loop {
            let len = match sock.recv_from(&mut buf, &mut peer) {
                Ok(n) => n,
                Err(_) => {
                    // EAGAIN after SO_RCVTIMEO: the socket was empty for a whole poll.
                    if should_exit(stop, true) {
                        return;
                    }
                    continue;
                }
            };
            bump(&c.received, 1);
            bump(&c.received_bytes, len as u64);
            let kept = len.min(SLOT_BYTES);
            if len > SLOT_BYTES {
                bump(&c.truncated, 1);
            }
            process(&mut buf[..kept]);
            if cfg.mode != Mode::Sink {
                match sock.send_to(&buf[..kept], &peer) {
                    Ok(_) => bump(&c.answered, 1),
                    Err(e) => {
                        bump(&c.reply_failed, 1);
                        c.reply_errors.add(e.raw_os_error().unwrap_or(0), 1);
                    }
                }
            }
            bump(&c.done, 1);
            if should_exit(stop, false) {
                return;
            }
        }
    }
    let mut rb = if cfg.gro {
        RecvBatch::with_gro(cfg.batch, SLOT_BYTES)
    } else {
        RecvBatch::new(cfg.batch, SLOT_BYTES)
    };
    if cfg.mode == Mode::Sink {
        // Nothing is sent back: the kernel need not copy out each sender's address.
        rb = rb.without_peers();
    }
    // Datagrams in each received buffer (more than 1 when coalesced by GRO).
    let mut segs = vec![1u64; rb.capacity()];
    loop {
        let n = rb.recv(fd).unwrap_or(0);
        if n == 0 {
            if should_exit(stop, true) {
                return;
            }
            continue;
        }
        // A coalesced (GRO) buffer holds several datagrams: count and process each.
        let mut datagrams = 0u64;
        let mut bytes = 0u64;
        let mut trunc = 0u64;
        for (i, s) in segs.iter_mut().enumerate().take(n) {
            let m = rb.meta(i);
            bytes += m.len as u64;
            trunc += m.truncated as u64;
            // One send per buffer: a refused GSO reply refuses all its segments.
            *s = m
                .gro_segment
                .map_or(1, |g| m.len.min(SLOT_BYTES).div_ceil(g) as u64);
            let data = rb.get_mut(i);
            match m.gro_segment {
                Some(g) => {
                    for s in data.chunks_mut(g) {
                        process(s);
                        datagrams += 1;
                    }
                }
                None => {
                    process(data);
                    datagrams += 1;
                }
            }
        }
        bump(&c.received, datagrams);
        bump(&c.received_bytes, bytes);
        if trunc > 0 {
            bump(&c.truncated, trunc);
        }
        if cfg.mode != Mode::Sink {
            let mut failed = 0u64;
            rb.reply(fd, n, |i, errno| {
                failed += segs[i];
                c.reply_errors.add(errno, segs[i]);
            });
            bump(&c.answered, datagrams - failed);
            if failed > 0 {
                bump(&c.reply_failed, failed);
            }
        }
        bump(&c.done, datagrams);
        if should_exit(stop, false) {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tpslab_net::UdpSock;

    #[test]
    fn gro_server_counts_and_answers_each_coalesced_datagram() {
        let srv = match UdpServer::start(ServerConfig {
            bind: "127.0.0.1:0".parse().unwrap(),
            gro: true,
            mode: Mode::Replace,
            ..ServerConfig::default()
        }) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("skipping: {e}");
                return;
            }
        };
        let c = UdpSock::bind("127.0.0.1:0".parse().unwrap(), false).unwrap();
        c.connect(srv.local_addr()).unwrap();
        c.set_read_timeout(Duration::from_millis(500)).unwrap();
        if c.set_gso(100).is_err() {
            eprintln!("skipping: no UDP GSO");
            return;
        }
        // One GSO send of 8 datagrams of 100 bytes, each with "ping" in it.
        let mut buf = vec![b'.'; 800];
        for seg in buf.chunks_mut(100) {
            seg[10..14].copy_from_slice(b"ping");
        }
        c.send(&buf).unwrap();
        c.set_gso(0).unwrap();
        let mut rb = tpslab_net::RecvBatch::new(16, 2048);
        let mut got = vec![];
        while got.len() < 8 {
            let n = rb.recv(c.fd()).unwrap();
            assert!(n > 0, "{} of 8 replies", got.len());
            for i in 0..n {
                got.push(rb.get(i).to_vec());
            }
        }
        let rep = srv.stop();
        assert_eq!((rep.received, rep.answered, rep.reply_failed), (8, 8, 0));
        assert!(rep.gro);
        // Every segment was processed on its own: each reply says pong.
        for g in &got {
            assert_eq!(g.len(), 100);
            assert_eq!(&g[10..14], b"pong");
        }
    }
}
