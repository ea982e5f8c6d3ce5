//! The observer: a thread that samples the kernel's counters at a fixed interval while a
//! run happens, then turns the samples into series, summaries and counter deltas.
//!
//! Sources (per sample): `<net_root>/net/udp` and `udp6` (`rx_queue` and `drops` of the
//! target sockets, then sock_diag lookups between scans), getsockopt(SO_MEMINFO) on the
//! generator's own sockets, `<net_root>/net/snmp` and `snmp6` (`Udp:`/`Udp6`
//! counters), `/proc/net/softnet_stat` (per CPU), `<net_root>/net/dev` (drops),
//! `/proc/stat` (per-CPU time, system context switches), and for each target thread
//! `/proc/PID/task/TID/status` (context switches) and `schedstat` (CPU time, ns).
//!
//! The observe wing: beside the observer, its samplers and what finds what they watch:
//! where threads wait ([`waits`]), a ramp step's threads over a server's process tree
//! ([`step_sampler`], the tree in [`server_tree`]), the kernel's drop reasons
//! ([`dropwatch`]), exact reads by tracepoints ([`sockio`]), listen sockets' queues
//! ([`listen`]), who serves a UDP address ([`owner`], by the holders of a socket:
//! [`fd_holders`]).

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;
use tpslab_net::mono_ns;
use tpslab_proc::{live, KernelStat, UdpCounters, UdpSocket};
use tpslab_record::{ObserverReport, Series};

pub mod dropwatch;
pub mod fd_holders;
pub mod listen;
pub mod owner;
pub mod server_tree;
pub mod sockio;
pub mod step_sampler;
pub mod waits;

mod report;
mod sampler;

use report::build_report;
pub use report::sources;
use sampler::{target_sched, Sampler};

mod sockets;
use sockets::{add_udp, lookup_local, lookup_remote, with_readers, DropTrack};
pub use sockets::{delivery_score, socket_queue, OwnSocket, OwnSockets, SocketMatch};

mod stream;
use stream::give_live;
pub use stream::{IntervalLatency, LatencyProbe, LiveSample, LiveSink};
use tpslab_analysis::waits::LiveThread;

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
    /// The generator's own sockets (tpslab's load), read in place at every sample; None:
    /// no generator of ours.
    pub gen_sockets: Option<OwnSockets>,
    /// Target process (for the record) and its threads to watch.
    pub target_pid: Option<u32>,
    /// Threads whose CPU time and context switches are summed (empty: all of target_pid's).
    pub target_tids: Vec<u32>,
    /// Threads whose UDP reads and sends are counted exactly by tracepoints (with
    /// inheritance when true: threads they create later count too); None: not counted.
    pub count_io: Option<(Vec<u32>, bool)>,
    /// The server's own live read count (tpslab's server), sampled instead of counting.
    pub read_probe: Option<crate::serve::server::ReadProbe>,
    /// The generator's own live count of datagrams the kernel accepted (tpslab's load),
    /// sampled into `gen_sent_per_s`: the offered rate as it happened.
    pub send_probe: Option<crate::serve::server::ReadProbe>,
    /// Inodes of TCP sockets to follow (a watched process's): their queues are summed at
    /// every slow sample (100 ms) from `<net_root>/net/tcp{,6}`.
    pub tcp_inodes: Vec<u64>,
    /// Called with every sample as it is taken (`--json-stream`); None: nothing live.
    pub live: Option<LiveSink>,
    /// The generator's latency of each interval, for the live samples (tpslab's load with
    /// replies).
    pub live_latency: Option<LatencyProbe>,
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
    io: Option<crate::observe::sockio::UdpIo>,
    /// The generator's datagrams sent so far (its own count), when it is ours.
    gen_sent: Option<u64>,
    /// Followed TCP sockets seen, and their rx/tx queues summed (bytes; for listening
    /// sockets rx_queue is the accept queue in connections).
    tcp_sockets: usize,
    tcp_listen_rxq: u64,
    tcp_rxq: u64,
    tcp_txq: u64,
    /// TCP counters of the target's namespace (`Tcp:`/`TcpExt:`), read at slow samples
    /// when TCP sockets are followed.
    tcp_ext: Option<tpslab_proc::netstat::TcpCounters>,
    /// The target's threads as this sample found them (slow samples with a target
    /// process only; for the live stream).
    threads: Vec<LiveThread>,
}

impl Raw {
    /// Frees the per-CPU tables (softnet rows, /proc/stat `cpuN` lines) of a sample that is
    /// neither the first nor the last: only those two are differenced per CPU.
    fn drop_per_cpu(&mut self) {
        self.softnet_per_cpu = Vec::new();
        self.stat.per_cpu = Vec::new();
        self.threads = Vec::new();
    }
}

/// Interval of the host-wide counters, ns.
const SLOW_NS: u64 = 100_000_000;

/// What the observer thread hands back: the samples, read errors, the target threads'
/// scheduling, each target socket's SO_RCVBUF limit (bytes), and the number of threads
/// that read UDP datagrams (when counted), how the samples were bounded, and where the
/// target process's threads waited.
struct Sampled {
    raws: Vec<Raw>,
    errors: BTreeSet<String>,
    sched: Vec<String>,
    rcvbuf: Vec<u64>,
    /// The target's SO_REUSEPORT group, socket by socket (empty with one socket).
    group: Vec<tpslab_record::TargetSocket>,
    readers: Option<usize>,
    bounded: Bounded,
    waits: Option<tpslab_record::waits::ThreadWaits>,
    tcp_listen: Option<tpslab_record::TcpListen>,
}

/// Samples kept in memory at most: a long run (`load --duration 24h`) keeps a bounded,
/// coarser series and exact totals. 20000 samples are about 200 s at 10 ms (a record read
/// back holds no longer series).
const MAX_SAMPLES: usize = tpslab_plan::limits::OBSERVER_SAMPLES;

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

/// The sampler for `cfg`: the target's threads and sockets, sock_diag in the target's
/// (and the generator's) network namespace, the exact per-thread UDP counts where they can
/// be attached (their source returned; an error noted when not).
fn new_sampler(cfg: ObserverConfig) -> (Sampler, Option<String>) {
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
    let open_in = |root: &std::path::Path| -> Option<tpslab_net::diag::SockDiag> {
        let pid = root
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.parse::<u32>().ok());
        match pid {
            Some(pid) if crate::host::env::netns(Some(pid)) != crate::host::env::netns(None) => {
                tpslab_net::ns::in_netns_of(pid, tpslab_net::diag::SockDiag::open)
                    .ok()?
                    .ok()
            }
            _ => tpslab_net::diag::SockDiag::open().ok(),
        }
    };
    let diag = open_in(&cfg.net_root);
    let somaxconn = (!cfg.tcp_inodes.is_empty())
        .then(|| {
            let pid = cfg
                .net_root
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.parse::<u32>().ok());
            crate::host::env::somaxconn(pid)
        })
        .flatten();
    let mut io_errors = BTreeSet::new();
    let io = cfg.count_io.as_ref().and_then(|(tids, inherit)| {
        match crate::observe::sockio::ProcessUdpIo::attach(tids, *inherit) {
            Ok(c) => Some(c),
            Err(e) => {
                // Not root: that is the reason, whatever the attach call reported
                // (tracefs unreadable reads as "no such tracepoint").
                let why = if tpslab_net::is_root() {
                    e.to_string()
                } else {
                    format!("not root (perf tracepoints on a server's threads need root; {e})")
                };
                io_errors.insert(format!(
                    "exact per-thread UDP read/send counts unavailable: {why}"
                ));
                None
            }
        }
    });
    let io_source = io.as_ref().map(|c| c.source.clone());
    let gen_inodes = cfg
        .gen_sockets
        .as_ref()
        .map(|p| p.inodes().iter().copied().collect())
        .unwrap_or_default();
    // Where the watched process's threads wait (tpslab's own server: its threads only),
    // sampled with the host-wide counters.
    let waits = cfg.target_pid.map(|pid| {
        let only = (!cfg.target_tids.is_empty()).then(|| cfg.target_tids.clone());
        let every = (cfg.interval.as_millis() as u64).max(SLOW_NS / 1_000_000);
        crate::observe::waits::WaitSampler::new(pid, only, every)
    });
    let sampler = Sampler {
        followed: None,
        diag,
        gen_inodes,
        own: vec![],
        v6,
        cfg,
        target,
        srv_track: DropTrack::default(),
        gen_track: DropTrack::default(),
        first: true,
        last_scan_ns: 0,
        last_group_ns: 0,
        scan_now: false,
        tids,
        errors: io_errors,
        proc_root: PathBuf::from("/proc"),
        io,
        srv_rcvbuf: BTreeMap::new(),
        waits,
        listeners: BTreeMap::new(),
        somaxconn,
        live_drops: Arc::default(),
    };
    (sampler, io_source)
}

/// The observer thread: the first sample (then `ready` is signalled), one every
/// `interval` with random jitter (host-wide readings every `slow_every`-th), a last one
/// when `stop` is set; samples bounded by decimation.
fn sample_loop(
    sampler: &mut Sampler,
    interval: Duration,
    slow_every: usize,
    stop: &AtomicBool,
    ready: std::sync::mpsc::Sender<()>,
) -> Sampled {
    let first = sampler.sample(None, true);
    let _ = ready.send(());
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
    while !stop.load(Relaxed) {
        let now = mono_ns();
        if now < next {
            std::thread::sleep(Duration::from_nanos((next - now).min(20_000_000)));
            continue;
        }
        ticks += 1;
        let slow = ticks.is_multiple_of(slow_every);
        let mut r = sampler.sample(raws.last(), slow);
        rxq_max = rxq_max.max(r.srv_rxq);
        if let Some(prev) = raws.last() {
            give_live(sampler, &raws[0], prev, &r);
        }
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
    sampler.scan_now = true;
    let last = sampler.sample(raws.last(), true);
    if let Some(prev) = raws.last() {
        give_live(sampler, &raws[0], prev, &last);
    }
    rxq_max = rxq_max.max(last.srv_rxq);
    raws.push(last);
    let sched = target_sched(sampler);
    let rcvbuf = sampler.srv_rcvbuf.values().copied().collect();
    let group = with_readers(
        sampler.srv_track.group(&sampler.srv_rcvbuf),
        sampler.io.as_ref(),
        sampler.waits.as_ref().map(|w| w.read_sockets()),
    );
    let readers = sampler.io.as_ref().map(|c| c.reader_threads());
    let bounded = Bounded { decimated, rxq_max };
    Sampled {
        raws,
        errors: std::mem::take(&mut sampler.errors),
        sched,
        rcvbuf,
        group,
        readers,
        bounded,
        waits: sampler.waits.take().map(|w| w.finish()),
        tcp_listen: sampler.tcp_listen(),
    }
}

/// A running observer.
pub struct Observer {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<Sampled>,
    interval: Duration,
    io_source: Option<String>,
    /// The drop reasons the live samples carry, once given ([`Observer::live_drops`]).
    live_drops: Arc<std::sync::OnceLock<crate::observe::dropwatch::DropCounts>>,
}

impl Observer {
    /// Has the live samples (`ObserverConfig::live`) carry `drops`' counts by reason from
    /// now on, read at the slow samples (a drop sampler started beside the observer over
    /// the same window). Only the first call counts.
    pub fn live_drops(&self, drops: &crate::observe::dropwatch::DropSampler) {
        let _ = self.live_drops.set(drops.live());
    }

    /// Takes the first sample now, then samples every `interval` on its own thread.
    pub fn start(cfg: ObserverConfig) -> Observer {
        let stop = Arc::new(AtomicBool::new(false));
        let interval = cfg.interval.max(Duration::from_millis(1));
        let (mut sampler, io_source) = new_sampler(cfg);
        let live_drops = sampler.live_drops.clone();
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
            .spawn(move || sample_loop(&mut sampler, interval, slow_every, &s2, ready_tx))
            .expect("spawn observer thread");
        let _ = ready_rx.recv();
        Observer {
            stop,
            handle,
            interval,
            io_source,
            live_drops,
        }
    }

    /// Takes a final sample, stops the thread and builds the report.
    pub fn stop(self) -> ObserverReport {
        self.stop.store(true, Relaxed);
        let Sampled {
            raws,
            errors,
            sched,
            rcvbuf,
            group,
            readers,
            bounded,
            waits,
            tcp_listen,
        } = self.handle.join().expect("observer thread");
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
        if !group.is_empty() {
            rep.target_sockets = group;
            rep.sources.insert(
                "target_sockets".into(),
                "<net_root>/net/udp{,6} drops (last minus first sample) and deepest rx_queue of each socket of the target's SO_REUSEPORT group; each socket's own rcvbuf from sock_diag SK_MEMINFO_RCVBUF (a UDP dump: the members share their address); holders: /proc/*/fd at the run's end; readers: the threads of the process holding it alone, with their exact UDP reads (tracepoint sock:sock_recv_length)".into(),
            );
        }
        rep.target_reader_threads = readers;
        rep.thread_waits = waits;
        rep.tcp_listen = tcp_listen;
        if self.io_source.is_none() {
            // A server's own count (read_probe) gives the per-sample read rate only.
            for k in ["server_io_read", "server_io_sent", "server_io_send_failed"] {
                rep.deltas.remove(k);
            }
            if rep.series.values.contains_key("gen_sent_per_s") {
                rep.sources.insert(
                    "gen_sent_per_s".into(),
                    "tpslab generator's own count of datagrams the kernel accepted, per sample"
                        .into(),
                );
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
