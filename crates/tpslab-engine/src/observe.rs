//! The observer: a thread that samples the kernel's counters at a fixed interval while a
//! run happens, then turns the samples into series, summaries and counter deltas.
//!
//! Sources (per sample): `<net_root>/net/udp` and `udp6` (`rx_queue` and `drops` of the
//! target and generator sockets), `<net_root>/net/snmp` and `snmp6` (`Udp:`/`Udp6`
//! counters), `/proc/net/softnet_stat` (per CPU), `<net_root>/net/dev` (drops),
//! `/proc/stat` (per-CPU time, system context switches), and for each target thread
//! `/proc/PID/task/TID/status` (context switches) and `schedstat` (CPU time, ns).

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;
use tpslab_analysis::record::{ObserverReport, Series};
use tpslab_analysis::Summary;
use tpslab_net::mono_ns;
use tpslab_proc::{live, KernelStat, UdpCounters, UdpSocket};

/// What to watch.
#[derive(Debug, Clone)]
pub struct ObserverConfig {
    /// Sampling interval (>= 1 ms).
    pub interval: Duration,
    /// procfs directory whose `net/` is read: `/proc/self` or `/proc/PID` (that process's
    /// network namespace).
    pub net_root: PathBuf,
    /// Inodes of the target (server) sockets; when empty, `target_port` finds them.
    pub target_inodes: Vec<u64>,
    /// Local port of the target sockets.
    pub target_port: Option<u16>,
    /// Local address of the target sockets (sockets bound to it or to the wildcard match).
    pub target_addr: Option<std::net::IpAddr>,
    /// Inodes of the generator's sockets.
    pub gen_inodes: Vec<u64>,
    /// procfs directory whose `net/` holds the generator's sockets (`/proc/self`).
    pub gen_root: PathBuf,
    /// Target process (for the record) and its threads to watch.
    pub target_pid: Option<u32>,
    /// Threads whose CPU time and context switches are summed (empty: all of target_pid's).
    pub target_tids: Vec<u32>,
    /// Threads whose UDP reads and sends are counted exactly by tracepoints (with
    /// inheritance when true: threads they create later count too); None: not counted.
    pub count_io: Option<(Vec<u32>, bool)>,
    /// The server's own live read count (tpslab's server), sampled instead of counting.
    pub read_probe: Option<crate::server::ReadProbe>,
    /// Inodes of TCP sockets to follow (a watched process's): their queues are summed at
    /// every slow sample (100 ms) from `<net_root>/net/tcp{,6}`.
    pub tcp_inodes: Vec<u64>,
}

/// One sample of every counter.
#[derive(Debug, Clone, Default)]
struct Raw {
    t_ns: u64,
    /// The host-wide counters were read in this sample (else carried over).
    slow: bool,
    /// Target sockets seen so far (in any sample).
    srv_sockets: usize,
    srv_rxq: u64,
    srv_drops: u64,
    gen_rxq: u64,
    gen_drops: u64,
    udp: UdpCounters,
    softnet_processed: u64,
    softnet_dropped: u64,
    softnet_squeeze: u64,
    /// Per softnet row (CPU): (cpu id, processed, dropped, time_squeeze).
    softnet_per_cpu: Vec<(u64, u64, u64, u64)>,
    dev_rx_drop: u64,
    dev_tx_drop: u64,
    stat: KernelStat,
    task_vol: u64,
    task_invol: u64,
    task_run_ns: u64,
    /// Target threads' time runnable but waiting for a CPU (schedstat column 2), ns.
    task_wait_ns: u64,
    /// The counted threads' UDP reads and sends (tracepoints), when counted.
    io: Option<crate::sockio::UdpIo>,
    /// Followed TCP sockets seen, and their rx/tx queues summed (bytes; for listening
    /// sockets rx_queue is the accept queue in connections).
    tcp_sockets: usize,
    tcp_listen_rxq: u64,
    tcp_rxq: u64,
    tcp_txq: u64,
}

impl Raw {
    /// Frees the per-CPU tables (softnet rows, /proc/stat `cpuN` lines) of a sample that is
    /// neither the first nor the last: only those two are differenced per CPU.
    fn drop_per_cpu(&mut self) {
        self.softnet_per_cpu = Vec::new();
        self.stat.per_cpu = Vec::new();
    }
}

/// Which sockets of /proc/net/udp{,6} are the target's.
#[derive(Debug, Clone, Default)]
pub struct SocketMatch {
    /// Exact inodes (when known, nothing else is used).
    pub inodes: Vec<u64>,
    /// Local port.
    pub port: Option<u16>,
    /// Local address (None: any).
    pub addr: Option<std::net::IpAddr>,
}

impl SocketMatch {
    /// Whether `s` is one of the target's sockets.
    pub fn matches(&self, s: &UdpSocket) -> bool {
        if !self.inodes.is_empty() {
            return self.inodes.contains(&s.inode);
        }
        let ip = s.local.ip();
        let v4_mapped = |a: std::net::IpAddr| match a {
            std::net::IpAddr::V6(v6) => v6.to_ipv4_mapped().map(std::net::IpAddr::V4).unwrap_or(a),
            a => a,
        };
        s.inode != 0
            && self.port == Some(s.local.port())
            && self
                .addr
                .is_none_or(|a| ip.is_unspecified() || v4_mapped(ip) == v4_mapped(a))
    }
}

/// Reads the sockets matching `m` under `root` (`<root>/net/udp` and `udp6`): (sockets
/// found, rx_queue bytes summed).
pub fn socket_queue(root: &std::path::Path, m: &SocketMatch) -> (usize, u64) {
    let mut socks = live::udp(root).unwrap_or_default();
    socks.extend(live::udp6(root).unwrap_or_default());
    socks
        .iter()
        .filter(|s| m.matches(s))
        .fold((0, 0), |(n, q), s| (n + 1, q + s.rx_queue))
}

/// Drops of sockets tracked by inode: the first value seen (0 for a socket created during
/// the run) and the last, so a socket that closes keeps its count.
#[derive(Debug, Default)]
struct DropTrack(BTreeMap<u64, (u64, u64)>);

impl DropTrack {
    fn see(&mut self, inode: u64, drops: u64, first_sample: bool) {
        let e = self
            .0
            .entry(inode)
            .or_insert((if first_sample { drops } else { 0 }, drops));
        e.1 = drops;
    }
    fn total(&self) -> u64 {
        self.0.values().map(|(a, b)| b.saturating_sub(*a)).sum()
    }
}

fn add_udp(a: &mut UdpCounters, b: &UdpCounters) {
    a.in_datagrams += b.in_datagrams;
    a.no_ports += b.no_ports;
    a.in_errors += b.in_errors;
    a.out_datagrams += b.out_datagrams;
    a.rcvbuf_errors += b.rcvbuf_errors;
    a.sndbuf_errors += b.sndbuf_errors;
    a.in_csum_errors += b.in_csum_errors;
    a.ignored_multi += b.ignored_multi;
    a.mem_errors += b.mem_errors;
}

/// The local address of the kernel's delivery lookup for `s` (loopback for a wildcard
/// bind).
fn lookup_local(s: &UdpSocket) -> SocketAddr {
    if s.local.ip().is_unspecified() {
        let lo: std::net::IpAddr = if s.local.is_ipv4() {
            std::net::Ipv4Addr::LOCALHOST.into()
        } else {
            std::net::Ipv6Addr::LOCALHOST.into()
        };
        SocketAddr::new(lo, s.local.port())
    } else {
        s.local
    }
}

/// The peer of the delivery lookup: the connected peer, or any (port 1) for an unconnected
/// socket.
fn lookup_remote(s: &UdpSocket) -> SocketAddr {
    if s.remote.port() != 0 {
        s.remote
    } else {
        SocketAddr::new(lookup_local(s).ip(), 1)
    }
}

struct Sampler {
    cfg: ObserverConfig,
    /// Sockets read by sock_diag between scans: (socket as last scanned, is a target,
    /// lives in the generator's namespace rather than the target's).
    /// None: the followed sockets cannot be told apart by a lookup (scan every sample).
    followed: Option<Vec<(UdpSocket, bool, bool)>>,
    /// sock_diag in the target's network namespace.
    diag: Option<tpslab_net::diag::UdpDiag>,
    /// sock_diag in the generator's network namespace (when it differs).
    gen_diag: Option<tpslab_net::diag::UdpDiag>,
    /// Whether IPv6 sockets are watched (udp6 is read only then).
    v6: bool,
    target: SocketMatch,
    srv_track: DropTrack,
    gen_track: DropTrack,
    first: bool,
    tids: Vec<u32>,
    errors: BTreeSet<String>,
    proc_root: PathBuf,
    io: Option<crate::sockio::ProcessUdpIo>,
    /// SO_RCVBUF limit (sk_rcvbuf, bytes) of each target socket by inode, from sock_diag.
    srv_rcvbuf: BTreeMap<u64, u64>,
}

impl Sampler {
    fn note<T>(&mut self, r: Result<T, tpslab_proc::ProcError>) -> Option<T> {
        match r {
            Ok(v) => Some(v),
            Err(e) => {
                self.errors.insert(e.to_string());
                None
            }
        }
    }

    /// Reads the UDP socket tables of `root`, udp6 only when IPv6 sockets are watched.
    fn sockets(&mut self, root: &std::path::Path) -> Vec<UdpSocket> {
        let mut socks: Vec<UdpSocket> = self.note(live::udp(root)).unwrap_or_default();
        if self.v6 {
            socks.extend(self.note(live::udp6(root)).unwrap_or_default());
        }
        socks
    }

    /// Reads the socket tables and rebuilds the list of sockets followed by sock_diag.
    fn scan(&mut self, r: &mut Raw) {
        let root = self.cfg.net_root.clone();
        let socks = self.sockets(&root);
        let gen_root = self.cfg.gen_root.clone();
        let gen_socks: Vec<UdpSocket> = if gen_root == root {
            vec![]
        } else {
            self.sockets(&gen_root)
        };
        let first = std::mem::replace(&mut self.first, false);
        let mut followed = vec![];
        for s in &gen_socks {
            if self.cfg.gen_inodes.contains(&s.inode) {
                r.gen_rxq += s.rx_queue;
                self.gen_track.see(s.inode, s.drops.unwrap_or(0), first);
                followed.push((s.clone(), false, true));
            }
        }
        for s in &socks {
            if self.target.matches(s) && !self.cfg.gen_inodes.contains(&s.inode) {
                if !self.srv_rcvbuf.contains_key(&s.inode) {
                    if let Some(d) = self.diag.as_mut() {
                        if let Ok(Some(m)) = d.lookup(lookup_local(s), lookup_remote(s)) {
                            if m.inode == s.inode {
                                self.srv_rcvbuf.insert(s.inode, m.rcvbuf);
                            }
                        }
                    }
                }
                r.srv_rxq += s.rx_queue;
                self.srv_track.see(s.inode, s.drops.unwrap_or(0), first);
                followed.push((s.clone(), true, false));
            } else if self.cfg.gen_inodes.contains(&s.inode) {
                r.gen_rxq += s.rx_queue;
                self.gen_track.see(s.inode, s.drops.unwrap_or(0), first);
                followed.push((s.clone(), false, false));
            }
        }
        // A socket the scan missed (its listing shifted between two page reads) is kept
        // while a lookup still finds it.
        let previous = self.followed.take().unwrap_or_default();
        for (s, is_target, other_ns) in previous {
            if followed.iter().any(|(f, _, _)| f.inode == s.inode) {
                continue;
            }
            let diag = if other_ns {
                &mut self.gen_diag
            } else {
                &mut self.diag
            };
            let Some(d) = diag.as_mut() else { continue };
            if let Ok(Some(m)) = d.lookup(lookup_local(&s), lookup_remote(&s)) {
                if m.inode == s.inode {
                    if is_target {
                        self.srv_rcvbuf.insert(s.inode, m.rcvbuf);
                        r.srv_rxq += m.rx_queue;
                        self.srv_track.see(s.inode, m.drops, false);
                    } else {
                        r.gen_rxq += m.rx_queue;
                        self.gen_track.see(s.inode, m.drops, false);
                    }
                    followed.push((s, is_target, other_ns));
                }
            }
        }
        // An unconnected socket is found by its local address: sockets sharing one
        // (SO_REUSEPORT) cannot be told apart by a lookup, so those stay on the scan.
        let mut locals: Vec<SocketAddr> = followed
            .iter()
            .filter(|(s, _, _)| s.remote.port() == 0)
            .map(|(s, _, _)| s.local)
            .collect();
        locals.sort();
        let unique = locals.windows(2).all(|w| w[0] != w[1]);
        self.followed = unique.then_some(followed);
    }

    /// Reads the followed sockets by sock_diag; false when that is not possible or a
    /// socket was not found as it was (then the caller scans /proc).
    fn diag_fast(&mut self, r: &mut Raw) -> bool {
        let Some(followed) = self.followed.clone() else {
            return false;
        };
        // Nothing followed (yet): new sockets are found by the next scan.
        for (s, is_target, other_ns) in followed {
            let diag = if other_ns {
                &mut self.gen_diag
            } else {
                &mut self.diag
            };
            let Some(d) = diag.as_mut() else {
                return false;
            };
            match d.lookup(lookup_local(&s), lookup_remote(&s)) {
                Ok(Some(m)) if m.inode == s.inode => {
                    if is_target {
                        self.srv_rcvbuf.insert(s.inode, m.rcvbuf);
                        r.srv_rxq += m.rx_queue;
                        self.srv_track.see(s.inode, m.drops, false);
                    } else {
                        r.gen_rxq += m.rx_queue;
                        self.gen_track.see(s.inode, m.drops, false);
                    }
                }
                _ => return false,
            }
        }
        true
    }

    /// One sample. The followed sockets' queues and drops are read every time; the
    /// host-wide counters (snmp, softnet, dev, stat) and the target threads' CPU time and
    /// context switches only when `slow` (the first and last samples always are): they
    /// change slowly and cost most.
    fn sample(&mut self, prev: Option<&Raw>, slow: bool) -> Raw {
        let mut r = match (prev, slow) {
            (Some(p), false) => Raw {
                // Fast samples carry the scalars of the last slow one; the per-CPU tables
                // are read from the first and last samples only, so they are not copied.
                slow: false,
                softnet_per_cpu: Vec::new(),
                stat: KernelStat {
                    per_cpu: Vec::new(),
                    ..p.stat.clone()
                },
                ..p.clone()
            },
            _ => Raw {
                slow: true,
                ..Default::default()
            },
        };
        r.t_ns = mono_ns();
        (r.srv_sockets, r.srv_rxq, r.gen_rxq) = (0, 0, 0);
        // Between slow samples the followed sockets are read by exact sock_diag lookups;
        // the full /proc scan (which also finds new sockets) runs at slow samples, and
        // whenever a lookup does not find what it followed.
        if slow || !self.diag_fast(&mut r) {
            (r.srv_rxq, r.gen_rxq) = (0, 0);
            self.scan(&mut r);
        }
        if let Some(io) = self.io.as_mut() {
            // Every thread is read while datagrams wait: the drain rate must not miss a
            // thread that had been idle.
            let backlog = r.srv_rxq > 0 || prev.is_some_and(|p| p.srv_rxq > 0);
            r.io = Some(io.read(slow || backlog));
        } else if let Some(p) = &self.cfg.read_probe {
            r.io = Some(crate::sockio::UdpIo {
                read: p.get(),
                ..Default::default()
            });
        }
        let root = self.cfg.net_root.clone();
        r.srv_drops = self.srv_track.total();
        r.gen_drops = self.gen_track.total();
        r.srv_sockets = self.srv_track.0.len();
        let proc_root = self.proc_root.clone();
        if !r.slow {
            return r;
        }
        if !self.cfg.tcp_inodes.is_empty() {
            (r.tcp_sockets, r.tcp_listen_rxq, r.tcp_rxq, r.tcp_txq) = (0, 0, 0, 0);
            for s in self.note(live::tcp(&root)).unwrap_or_default() {
                if self.cfg.tcp_inodes.contains(&s.inode) {
                    r.tcp_sockets += 1;
                    // State 0x0A = TCP_LISTEN: rx_queue is the accept queue.
                    if s.state == 0x0A {
                        r.tcp_listen_rxq += s.rx_queue;
                    } else {
                        r.tcp_rxq += s.rx_queue;
                        r.tcp_txq += s.tx_queue;
                    }
                }
            }
        }
        if let Some(s) = self.note(live::snmp(&root)) {
            if let Some(u) = s.udp {
                add_udp(&mut r.udp, &u);
            }
        }
        if let Some(Some(s6)) = self.note(live::snmp6(&root)) {
            if let Some(u) = s6.udp6 {
                add_udp(&mut r.udp, &u);
            }
        }
        for c in self.note(live::softnet(&proc_root)).unwrap_or_default() {
            r.softnet_processed += c.processed;
            r.softnet_dropped += c.dropped;
            r.softnet_squeeze += c.time_squeeze;
            r.softnet_per_cpu.push((
                c.cpu.unwrap_or(c.row as u64),
                c.processed,
                c.dropped,
                c.time_squeeze,
            ));
        }
        for d in self.note(live::dev(&root)).unwrap_or_default() {
            r.dev_rx_drop += d.rx_drop;
            r.dev_tx_drop += d.tx_drop;
        }
        if let Some(st) = self.note(live::stat(&proc_root)) {
            r.stat = st;
        }
        if let Some(pid) = self.cfg.target_pid {
            for tid in self.tids.clone() {
                let dir = proc_root
                    .join(pid.to_string())
                    .join("task")
                    .join(tid.to_string());
                if let Ok(s) = live::task_status(&dir.join("status")) {
                    r.task_vol += s.voluntary_ctxt_switches;
                    r.task_invol += s.nonvoluntary_ctxt_switches;
                }
                if let Ok(s) = live::schedstat(&dir.join("schedstat")) {
                    r.task_run_ns += s.run_ns;
                    r.task_wait_ns += s.wait_ns;
                }
            }
        }
        r
    }
}

/// Interval of the host-wide counters, ns.
const SLOW_NS: u64 = 100_000_000;

/// What the observer thread hands back: the samples, read errors, the target threads'
/// scheduling, each target socket's SO_RCVBUF limit (bytes), and the number of threads
/// that read UDP datagrams (when counted), and how the samples were bounded.
type Sampled = (
    Vec<Raw>,
    BTreeSet<String>,
    Vec<String>,
    Vec<u64>,
    Option<usize>,
    Bounded,
);

/// Samples kept in memory at most: a long run (`load --duration 24h`) keeps a bounded,
/// coarser series and exact totals. 20000 samples are about 200 s at 10 ms.
const MAX_SAMPLES: usize = 20_000;

/// What the bounding of the samples changed.
#[derive(Debug, Clone, Copy, Default)]
struct Bounded {
    /// Samples were thinned out.
    decimated: bool,
    /// The largest target rx_queue over every sample taken (thinned or not), bytes.
    rxq_max: u64,
}

/// Thins the samples to at most half of [`MAX_SAMPLES`]: keeps the first and the last,
/// and the slow ones (each holds fresh host-wide readings, so rates between them stay
/// exact), then every other one while still too many. Counter deltas over the run use
/// the first and last samples and stay exact; series lose resolution.
fn decimate(raws: &mut Vec<Raw>) {
    let last = raws.len().saturating_sub(1);
    let mut kept: Vec<Raw> = std::mem::take(raws)
        .into_iter()
        .enumerate()
        .filter(|(i, r)| *i == 0 || *i == last || r.slow)
        .map(|(_, r)| r)
        .collect();
    while kept.len() > MAX_SAMPLES / 2 {
        let last = kept.len() - 1;
        kept = kept
            .into_iter()
            .enumerate()
            .filter(|(i, _)| i % 2 == 0 || *i == last)
            .map(|(_, r)| r)
            .collect();
    }
    *raws = kept;
}

/// A running observer.
pub struct Observer {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<Sampled>,
    interval: Duration,
    io_source: Option<String>,
}

impl Observer {
    /// Takes the first sample now, then samples every `interval` on its own thread.
    pub fn start(cfg: ObserverConfig) -> Observer {
        let stop = Arc::new(AtomicBool::new(false));
        let interval = cfg.interval.max(Duration::from_millis(1));
        let tids = match (cfg.target_tids.is_empty(), cfg.target_pid) {
            (true, Some(pid)) => live::task_ids(pid),
            _ => cfg.target_tids.clone(),
        };
        let target = SocketMatch {
            inodes: cfg.target_inodes.clone(),
            port: cfg.target_port,
            addr: cfg.target_addr,
        };
        // IPv4 traffic also reaches dual-stack [::] sockets, listed in udp6: read both.
        let v6 = true;
        let open_in = |root: &std::path::Path| -> Option<tpslab_net::diag::UdpDiag> {
            let pid = root
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.parse::<u32>().ok());
            match pid {
                Some(pid) if crate::env::netns(Some(pid)) != crate::env::netns(None) => {
                    tpslab_net::ns::in_netns_of(pid, tpslab_net::diag::UdpDiag::open)
                        .ok()?
                        .ok()
                }
                _ => tpslab_net::diag::UdpDiag::open().ok(),
            }
        };
        let diag = open_in(&cfg.net_root);
        let mut io_errors = BTreeSet::new();
        let io = cfg.count_io.as_ref().and_then(|(tids, inherit)| {
            match crate::sockio::ProcessUdpIo::attach(tids, *inherit) {
                Ok(c) => Some(c),
                Err(e) => {
                    io_errors.insert(format!(
                        "exact per-thread UDP read/send counts unavailable: {e}"
                    ));
                    None
                }
            }
        });
        let io_source = io.as_ref().map(|c| c.source.clone());
        let gen_diag = if cfg.gen_root == cfg.net_root {
            None
        } else {
            open_in(&cfg.gen_root)
        };
        let mut sampler = Sampler {
            followed: None,
            diag,
            gen_diag,
            v6,
            cfg,
            target,
            srv_track: DropTrack::default(),
            gen_track: DropTrack::default(),
            first: true,
            tids,
            errors: io_errors,
            proc_root: PathBuf::from("/proc"),
            io,
            srv_rcvbuf: BTreeMap::new(),
        };
        // Host-wide counters, the full socket scan and the target threads' CPU time every
        // 100 ms at most: they cost most of the observer's CPU time and change slowly; the
        // followed sockets' queues and drops keep the full sampling rate.
        let slow_every = (SLOW_NS / interval.as_nanos().max(1) as u64).max(1) as usize;
        let s2 = stop.clone();
        // The first sample is taken on the observer thread too (its /proc file handles live
        // and die with that thread); start() returns once it is taken.
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
        let handle = std::thread::Builder::new()
            .name("tpslab-observer".into())
            .spawn(move || {
                let first = sampler.sample(None, true);
                let _ = ready_tx.send(());
                let mut raws = vec![first];
                let step = interval.as_nanos() as u64;
                // Each tick is moved by up to +-1/4 interval at random: a load whose period
                // is a multiple of the interval (bursts every 50 ms, samples every 10 ms)
                // would otherwise always be sampled at the same phase and, for example,
                // never see the queue full. Timestamps are kept, so rates stay exact.
                let mut rng = raws[0].t_ns | 1;
                let mut jitter = move || {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    (rng % (step / 2 + 1)) as i64 - (step / 4) as i64
                };
                let mut base = raws[0].t_ns + step;
                let mut ticks = 0usize;
                let mut rxq_max = raws[0].srv_rxq;
                let mut decimated = false;
                let mut next = base.saturating_add_signed(jitter());
                while !s2.load(Relaxed) {
                    let now = mono_ns();
                    if now < next {
                        std::thread::sleep(Duration::from_nanos((next - now).min(20_000_000)));
                        continue;
                    }
                    ticks += 1;
                    let slow = ticks.is_multiple_of(slow_every);
                    let mut r = sampler.sample(raws.last(), slow);
                    rxq_max = rxq_max.max(r.srv_rxq);
                    // Per-CPU tables serve only the deltas between the first and the last
                    // sample (pushed after this loop): kept in every sample, their heap
                    // would grow with the run (10 slow samples a second) past the bound.
                    r.drop_per_cpu();
                    raws.push(r);
                    if raws.len() >= MAX_SAMPLES {
                        decimate(&mut raws);
                        decimated = true;
                    }
                    base += step;
                    if base < mono_ns() {
                        // Fell behind (the machine is saturated): skip missed ticks.
                        base = mono_ns() + step;
                    }
                    next = base.saturating_add_signed(jitter());
                }
                let last = sampler.sample(raws.last(), true);
                rxq_max = rxq_max.max(last.srv_rxq);
                raws.push(last);
                let sched = target_sched(&sampler);
                let rcvbuf = sampler.srv_rcvbuf.values().copied().collect();
                let readers = sampler.io.as_ref().map(|c| c.reader_threads());
                let bounded = Bounded { decimated, rxq_max };
                (raws, sampler.errors, sched, rcvbuf, readers, bounded)
            })
            .expect("spawn observer thread");
        let _ = ready_rx.recv();
        Observer {
            stop,
            handle,
            interval,
            io_source,
        }
    }

    /// Takes a final sample, stops the thread and builds the report.
    pub fn stop(self) -> ObserverReport {
        self.stop.store(true, Relaxed);
        let (raws, errors, sched, rcvbuf, readers, bounded) =
            self.handle.join().expect("observer thread");
        let mut rep = build_report(&raws, self.interval, errors.into_iter().collect(), sched);
        if bounded.decimated {
            rep.notes.push(format!(
                "a long run: samples were thinned to at most {MAX_SAMPLES} in memory (one per 100 ms or coarser); counter totals are exact, series coarser; the rx_queue maximum is over every sample"
            ));
        }
        // The maximum over every sample taken, thinned or not.
        if let Some(sm) = rep.summaries.get_mut("server_rx_queue_bytes") {
            sm.max = sm.max.max(bounded.rxq_max as f64);
        }
        if !rcvbuf.is_empty() {
            rep.target_rcvbuf_bytes = rcvbuf;
            rep.sources.insert(
                "target_rcvbuf_bytes".into(),
                "sock_diag SK_MEMINFO_RCVBUF of each target socket: the limit its rx_queue is held to".into(),
            );
        }
        rep.target_reader_threads = readers;
        if self.io_source.is_none() {
            // A server's own count (read_probe) gives the per-sample read rate only.
            for k in ["server_io_read", "server_io_sent", "server_io_send_failed"] {
                rep.deltas.remove(k);
            }
            if rep.series.values.contains_key("server_reads_per_s") {
                rep.sources.insert(
                    "server_reads_per_s".into(),
                    "tpslab server's own read count, per sample".into(),
                );
            }
        }
        if let Some(src) = self.io_source {
            for k in ["server_io_read", "server_io_sent", "server_io_send_failed"] {
                rep.sources.insert(k.to_string(), src.clone());
            }
            rep.sources
                .insert("server_reads_per_s".to_string(), src.clone());
        }
        rep
    }
}

fn target_sched(s: &Sampler) -> Vec<String> {
    let Some(pid) = s.cfg.target_pid else {
        return vec![];
    };
    let policy_name = |p: u64| match p {
        0 => "other".to_string(),
        1 => "fifo".into(),
        2 => "rr".into(),
        3 => "batch".into(),
        5 => "idle".into(),
        6 => "deadline".into(),
        p => format!("policy{p}"),
    };
    s.tids
        .iter()
        .filter_map(|tid| {
            let dir = s
                .proc_root
                .join(pid.to_string())
                .join("task")
                .join(tid.to_string());
            let st = live::task_stat(&dir).ok()?;
            let status = live::task_status(&dir).ok()?;
            let prio = if st.rt_priority > 0 {
                format!(":{}", st.rt_priority)
            } else {
                String::new()
            };
            Some(format!(
                "{tid} {} {}{} cpus {}",
                st.comm,
                policy_name(st.policy),
                prio,
                status.cpus_allowed_list
            ))
        })
        .collect()
}

/// Sources of the series and deltas, for `--explain` and the JSON record.
pub fn sources() -> BTreeMap<String, String> {
    [
        ("server_rx_queue_bytes", "/proc/PID/net/udp{,6} rx_queue of the target socket(s), summed (bytes charged: skb truesize)"),
        ("server_drops", "/proc/PID/net/udp{,6} drops of the target socket(s), summed"),
        ("gen_rx_queue_bytes", "/proc/self/net/udp{,6} rx_queue of the generator's socket(s)"),
        ("gen_drops", "/proc/self/net/udp{,6} drops of the generator's socket(s)"),
        ("udp_in_datagrams", "/proc/PID/net/snmp Udp: InDatagrams + snmp6 Udp6InDatagrams (datagrams read by applications)"),
        ("udp_rcvbuf_errors", "/proc/PID/net/snmp Udp: RcvbufErrors + snmp6 Udp6RcvbufErrors"),
        ("udp_in_errors", "/proc/PID/net/snmp Udp: InErrors + Udp6InErrors"),
        ("udp_no_ports", "/proc/PID/net/snmp Udp: NoPorts + Udp6NoPorts"),
        ("udp_out_datagrams", "/proc/PID/net/snmp Udp: OutDatagrams + Udp6OutDatagrams"),
        ("udp_sndbuf_errors", "/proc/PID/net/snmp Udp: SndbufErrors + Udp6SndbufErrors"),
        ("udp_mem_errors", "/proc/PID/net/snmp Udp: MemErrors + Udp6MemErrors"),
        ("udp_in_csum_errors", "/proc/PID/net/snmp Udp: InCsumErrors + Udp6InCsumErrors"),
        ("softnet_dropped", "/proc/net/softnet_stat column 2, all CPUs (host-wide)"),
        ("tcp_rx_queue_bytes", "/proc/PID/net/tcp{,6} rx_queue of the process's connected TCP sockets, summed, every 100 ms"),
        ("tcp_tx_queue_bytes", "/proc/PID/net/tcp{,6} tx_queue of the process's connected TCP sockets, summed, every 100 ms"),
        ("tcp_accept_queue", "/proc/PID/net/tcp{,6} rx_queue of the process's listening TCP sockets (connections waiting for accept), every 100 ms"),
        ("softnet_processed", "/proc/net/softnet_stat column 1, all CPUs (host-wide)"),
        ("softnet_time_squeeze", "/proc/net/softnet_stat column 3, all CPUs (host-wide)"),
        ("dev_rx_drop", "/proc/PID/net/dev rx drop, all interfaces"),
        ("dev_tx_drop", "/proc/PID/net/dev tx drop, all interfaces"),
        ("ctxt", "/proc/stat ctxt (system-wide context switches)"),
        ("target_vol_ctxt", "/proc/PID/task/TID/status voluntary_ctxt_switches, target threads"),
        ("target_invol_ctxt", "/proc/PID/task/TID/status nonvoluntary_ctxt_switches, target threads"),
        ("target_cpu_pct", "/proc/PID/task/TID/schedstat run time, target threads, % of one CPU"),
        ("target_runq_wait_pct", "/proc/PID/task/TID/schedstat run-queue wait (runnable, no CPU), target threads, % of one CPU"),
        ("cpuN_busy_pct", "/proc/stat cpuN: (total - idle - iowait) / total"),
        ("softnet_cpuN_dropped", "/proc/net/softnet_stat row of CPU N (column 13, else row order): column 2"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

fn build_report(
    raws: &[Raw],
    interval: Duration,
    errors: Vec<String>,
    sched: Vec<String>,
) -> ObserverReport {
    let mut series = Series::default();
    let t0 = raws.first().map_or(0, |r| r.t_ns);
    let mut push = |name: &str, v: f64| series.values.entry(name.to_string()).or_default().push(v);
    // Host-wide counters were read only in slow samples: the rate of sample i is that of
    // the slow interval containing it (a step function at the slow resolution).
    let slow: Vec<usize> = (0..raws.len()).filter(|&i| raws[i].slow).collect();
    let bracket = |i: usize| -> (usize, usize) {
        let k = slow.partition_point(|&s| s < i);
        let b = slow.get(k).copied().unwrap_or(raws.len() - 1);
        let mut a = if k == 0 { 0 } else { slow[k - 1] };
        // The final sample is forced: a last interval much shorter than the slow period
        // would turn tick-sized counters (CPU time) into absurd rates; merge it.
        let short = raws[b].t_ns.saturating_sub(raws[a].t_ns) < SLOW_NS / 2;
        if b == raws.len() - 1 && short && k >= 2 {
            a = slow[k - 2];
        }
        (a, b)
    };
    let tcp = raws.iter().any(|r| r.tcp_sockets > 0);
    for (i, r) in raws.iter().enumerate() {
        push("server_rx_queue_bytes", r.srv_rxq as f64);
        push("gen_rx_queue_bytes", r.gen_rxq as f64);
        if tcp {
            push("tcp_rx_queue_bytes", r.tcp_rxq as f64);
            push("tcp_tx_queue_bytes", r.tcp_txq as f64);
            push("tcp_accept_queue", r.tcp_listen_rxq as f64);
        }
        if i == 0 {
            continue;
        }
        let p = &raws[i - 1];
        let dt = (r.t_ns.saturating_sub(p.t_ns) as f64 / 1e9).max(1e-9);
        let rate = |a: u64, b: u64| a.saturating_sub(b) as f64 / dt;
        push("server_drops_per_s", rate(r.srv_drops, p.srv_drops));
        if let (Some(a), Some(b)) = (p.io, r.io) {
            push("server_reads_per_s", rate(b.read, a.read));
        }
        let (a, b) = bracket(i);
        let (ra, rb) = (&raws[a], &raws[b]);
        let sdt = (rb.t_ns.saturating_sub(ra.t_ns) as f64 / 1e9).max(1e-9);
        let srate = |x: u64, y: u64| y.saturating_sub(x) as f64 / sdt;
        push(
            "udp_in_datagrams_per_s",
            srate(ra.udp.in_datagrams, rb.udp.in_datagrams),
        );
        push(
            "udp_rcvbuf_errors_per_s",
            srate(ra.udp.rcvbuf_errors, rb.udp.rcvbuf_errors),
        );
        push(
            "softnet_dropped_per_s",
            srate(ra.softnet_dropped, rb.softnet_dropped),
        );
        push("ctxt_per_s", srate(ra.stat.ctxt, rb.stat.ctxt));
        push("target_vol_ctxt_per_s", srate(ra.task_vol, rb.task_vol));
        push(
            "target_invol_ctxt_per_s",
            srate(ra.task_invol, rb.task_invol),
        );
        push(
            "target_cpu_pct",
            100.0 * rb.task_run_ns.saturating_sub(ra.task_run_ns) as f64 / 1e9 / sdt,
        );
        push(
            "target_runq_wait_pct",
            100.0 * rb.task_wait_ns.saturating_sub(ra.task_wait_ns) as f64 / 1e9 / sdt,
        );
    }
    // Rates start at the second sample; the queue series start at the first.
    series.t_ms = raws.iter().map(|r| (r.t_ns - t0) as f64 / 1e6).collect();
    let summaries = series
        .values
        .iter()
        .map(|(k, v)| (k.clone(), Summary::of(v)))
        .collect();
    let mut deltas = BTreeMap::new();
    let mut cpu_pct = BTreeMap::new();
    if let (Some(a), Some(b)) = (raws.first(), raws.last()) {
        let d = |x: u64, y: u64| y.saturating_sub(x);
        for (k, v) in [
            ("server_drops", d(a.srv_drops, b.srv_drops)),
            ("gen_drops", d(a.gen_drops, b.gen_drops)),
            (
                "udp_in_datagrams",
                d(a.udp.in_datagrams, b.udp.in_datagrams),
            ),
            (
                "udp_out_datagrams",
                d(a.udp.out_datagrams, b.udp.out_datagrams),
            ),
            (
                "udp_rcvbuf_errors",
                d(a.udp.rcvbuf_errors, b.udp.rcvbuf_errors),
            ),
            (
                "udp_sndbuf_errors",
                d(a.udp.sndbuf_errors, b.udp.sndbuf_errors),
            ),
            ("udp_in_errors", d(a.udp.in_errors, b.udp.in_errors)),
            ("udp_no_ports", d(a.udp.no_ports, b.udp.no_ports)),
            ("udp_mem_errors", d(a.udp.mem_errors, b.udp.mem_errors)),
            (
                "udp_in_csum_errors",
                d(a.udp.in_csum_errors, b.udp.in_csum_errors),
            ),
            ("softnet_dropped", d(a.softnet_dropped, b.softnet_dropped)),
            (
                "softnet_processed",
                d(a.softnet_processed, b.softnet_processed),
            ),
            (
                "softnet_time_squeeze",
                d(a.softnet_squeeze, b.softnet_squeeze),
            ),
            ("dev_rx_drop", d(a.dev_rx_drop, b.dev_rx_drop)),
            ("dev_tx_drop", d(a.dev_tx_drop, b.dev_tx_drop)),
            ("ctxt", d(a.stat.ctxt, b.stat.ctxt)),
            ("target_vol_ctxt", d(a.task_vol, b.task_vol)),
            ("target_invol_ctxt", d(a.task_invol, b.task_invol)),
            ("target_run_ns", d(a.task_run_ns, b.task_run_ns)),
            ("target_runq_wait_ns", d(a.task_wait_ns, b.task_wait_ns)),
            ("server_sockets_found", b.srv_sockets as u64),
            ("tcp_sockets_found", b.tcp_sockets as u64),
        ] {
            deltas.insert(k.to_string(), v);
        }
        if let (Some(x), Some(y)) = (a.io, b.io) {
            deltas.insert("server_io_read".into(), d(x.read, y.read));
            deltas.insert("server_io_sent".into(), d(x.sent, y.sent));
            deltas.insert(
                "server_io_send_failed".into(),
                d(x.send_failed, y.send_failed),
            );
        }
        for (x, y) in a.softnet_per_cpu.iter().zip(&b.softnet_per_cpu) {
            let cpu = x.0;
            deltas.insert(format!("softnet_cpu{cpu}_processed"), d(x.1, y.1));
            deltas.insert(format!("softnet_cpu{cpu}_dropped"), d(x.2, y.2));
            deltas.insert(format!("softnet_cpu{cpu}_time_squeeze"), d(x.3, y.3));
        }
        for ((cpu, ta), (_, tb)) in a.stat.per_cpu.iter().zip(b.stat.per_cpu.iter()) {
            let total = tb.total().saturating_sub(ta.total()).max(1) as f64;
            let pct = |x: u64, y: u64| 100.0 * y.saturating_sub(x) as f64 / total;
            let mut m = BTreeMap::new();
            m.insert(
                "user".to_string(),
                pct(ta.user + ta.nice, tb.user + tb.nice),
            );
            m.insert("system".to_string(), pct(ta.system, tb.system));
            m.insert(
                "softirq".to_string(),
                pct(ta.softirq + ta.irq, tb.softirq + tb.irq),
            );
            m.insert("busy".to_string(), pct(ta.busy(), tb.busy()));
            cpu_pct.insert(format!("cpu{cpu}"), m);
        }
    }
    ObserverReport {
        interval_ms: interval.as_secs_f64() * 1e3,
        samples: raws.len(),
        sources: sources(),
        series,
        summaries,
        deltas,
        cpu_pct,
        target_sched: sched,
        target_rcvbuf_bytes: vec![],
        target_reader_threads: None,
        notes: vec![],
        errors,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run of `n` samples 10 ms apart, every 10th slow, with counters that grow by one
    /// drop and 100 datagrams read per sample.
    fn run(n: usize) -> Vec<Raw> {
        (0..n)
            .map(|i| Raw {
                t_ns: i as u64 * 10_000_000,
                slow: i % 10 == 0 || i == n - 1,
                srv_drops: i as u64,
                srv_rxq: if i == 4321 { 999_999 } else { 1000 },
                udp: UdpCounters {
                    in_datagrams: 100 * (i as u64 / 10 * 10),
                    ..Default::default()
                },
                ..Default::default()
            })
            .collect()
    }

    #[test]
    fn thinning_keeps_totals_exact_and_memory_bounded() {
        let full = run(MAX_SAMPLES);
        let mut thin = full.clone();
        decimate(&mut thin);
        assert!(thin.len() <= MAX_SAMPLES / 2, "{}", thin.len());
        assert_eq!(thin.first().unwrap().t_ns, 0);
        assert_eq!(thin.last().unwrap().t_ns, full.last().unwrap().t_ns);
        assert!(thin.iter().all(|r| r.slow), "only slow samples kept");
        let iv = Duration::from_millis(10);
        let a = build_report(&full, iv, vec![], vec![]);
        let b = build_report(&thin, iv, vec![], vec![]);
        // Totals over the run: exact either way.
        assert_eq!(a.deltas["server_drops"], b.deltas["server_drops"]);
        assert_eq!(a.deltas["udp_in_datagrams"], b.deltas["udp_in_datagrams"]);
        // Rates stay rates: the mean drop rate is the same 100 per second.
        let mean = |r: &ObserverReport| r.summaries["server_drops_per_s"].mean;
        assert!((mean(&a) - 100.0).abs() < 1.0 && (mean(&b) - 100.0).abs() < 1.0);
        // Thinned again and again (a 24 h run): still bounded.
        let mut long = run(MAX_SAMPLES);
        for _ in 0..5 {
            let t_end = long.last().unwrap().t_ns;
            long.extend(run(MAX_SAMPLES).into_iter().skip(1).map(|mut r| {
                r.t_ns += t_end;
                r
            }));
            decimate(&mut long);
            assert!(long.len() <= MAX_SAMPLES / 2);
        }
    }
}
