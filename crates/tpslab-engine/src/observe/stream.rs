//! The live stream (`--json-stream`): each sampling interval as it is taken, with the
//! generator's latency of the interval, handed to a sink on the observer's thread.

use super::Raw;
use hdrhistogram::Histogram;
use std::sync::Arc;
use tpslab_analysis::waits::LiveThread;

/// Takes the latency histogram (ns) of the replies read since its last call (None: none
/// read).
#[derive(Clone)]
pub struct LatencyProbe(pub Arc<dyn Fn() -> Option<Histogram<u64>> + Send + Sync>);

impl std::fmt::Debug for LatencyProbe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LatencyProbe")
    }
}

/// Latency of the replies read in one interval, from their intended send time, us.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct IntervalLatency {
    /// Replies read in the interval.
    pub replies: u64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
}

/// One sampling interval as it happened, for a live stream (`--json-stream`): what the
/// record's time series will hold, given while the run goes.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LiveSample {
    /// End of the interval, ms since the observer started.
    pub t_ms: f64,
    /// Length of the interval, ms.
    pub interval_ms: f64,
    /// Datagrams the generator sent per second over the interval (its own count; tpslab's
    /// load only).
    pub offered_pps: Option<f64>,
    /// Datagrams the server read per second over the interval: its threads' count (ours,
    /// or a foreign server's counted exactly); else `Udp: InDatagrams` of its namespace at
    /// the samples that read it (every 100 ms), null between.
    pub delivered_pps: Option<f64>,
    /// Drops at the server socket(s) since the start (/proc/net/udp `drops`).
    pub socket_drops: u64,
    /// `Udp: RcvbufErrors` (+ Udp6) since the start, read every 100 ms.
    pub rcvbuf_errors: u64,
    /// softnet backlog drops since the start, all CPUs (host-wide), read every 100 ms.
    pub softnet_drops: u64,
    /// Server socket(s) rx_queue now, bytes (truesize charged).
    pub rx_queue_bytes: u64,
    /// Latency (from the intended send time) of the replies the generator read in the
    /// interval; null without replies in it, or without tpslab's load.
    pub latency: Option<IntervalLatency>,
    /// Datagrams the generator sent since the start (its own count; tpslab's load only).
    #[serde(skip)]
    pub sent: Option<u64>,
    /// Datagrams the server read since the start: its threads' count (ours, or a foreign
    /// server's counted exactly by tracepoints); None when not counted.
    #[serde(skip)]
    pub server_read: Option<u64>,
    /// `Udp: InDatagrams` (+ Udp6) of the target's namespace since the start, read every
    /// 100 ms.
    #[serde(skip)]
    pub udp_in_datagrams: u64,
    /// softnet backlog drops per CPU since the start, (cpu, drops), from
    /// /proc/net/softnet_stat column 2; only in the samples that read it (every 100 ms),
    /// else empty.
    #[serde(skip)]
    pub softnet_dropped_per_cpu: Vec<(u64, u64)>,
    /// The interval's latency histogram (ns from the intended send time), as [`Self::latency`].
    #[serde(skip)]
    pub latency_histogram: Option<Histogram<u64>>,
    /// SO_RCVBUF limits (sk_rcvbuf from sock_diag) of the target sockets found so far,
    /// summed as [`Self::rx_queue_bytes`] is, bytes; None before one is read.
    #[serde(skip)]
    pub rcvbuf_limit_bytes: Option<u64>,
    /// The server's threads as the sample found them (with a target process: `--pid`, or
    /// tpslab's own server); only in the samples that read them (every 100 ms), else
    /// empty.
    #[serde(skip)]
    pub threads: Vec<LiveThread>,
    /// The kernel's drops by reason since the drop sampler started (host-wide,
    /// `skb:kfree_skb`), when one runs beside the observer ([`super::Observer::live_drops`]);
    /// only in the samples that read it (every 100 ms), else None.
    #[serde(skip)]
    pub drop_reasons: Option<crate::observe::dropwatch::LiveDropReasons>,
    /// Each target socket's drops since the start: (inode, local address, /proc/net/udp
    /// `drops` now minus when first seen), in inode order, closed ones kept; only in the
    /// samples that read it (every 100 ms), else empty.
    #[serde(skip)]
    pub socket_drops_by_socket: Vec<(u64, std::net::SocketAddr, u64)>,
}

/// Receives each [`LiveSample`] on the observer's thread (keep it short: a line written).
#[derive(Clone)]
pub struct LiveSink(pub Arc<dyn Fn(&LiveSample) + Send + Sync>);

impl std::fmt::Debug for LiveSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LiveSink")
    }
}

pub(super) fn live_sample(first: &Raw, prev: &Raw, cur: &Raw) -> LiveSample {
    let dt = (cur.t_ns.saturating_sub(prev.t_ns) as f64 / 1e9).max(1e-9);
    let rate = |a: u64, b: u64| b.saturating_sub(a) as f64 / dt;
    let delivered = match (prev.io, cur.io) {
        (Some(a), Some(b)) => Some(rate(a.read, b.read)),
        _ => cur.slow.then(|| {
            // Udp: counters are read at slow samples: the rate since the last one.
            rate(prev.udp.in_datagrams, cur.udp.in_datagrams)
        }),
    };
    LiveSample {
        t_ms: cur.t_ns.saturating_sub(first.t_ns) as f64 / 1e6,
        interval_ms: dt * 1e3,
        offered_pps: prev.gen_sent.zip(cur.gen_sent).map(|(a, b)| rate(a, b)),
        delivered_pps: delivered,
        socket_drops: cur.srv_drops.saturating_sub(first.srv_drops),
        rcvbuf_errors: cur
            .udp
            .rcvbuf_errors
            .saturating_sub(first.udp.rcvbuf_errors),
        softnet_drops: cur.softnet_dropped.saturating_sub(first.softnet_dropped),
        rx_queue_bytes: cur.srv_rxq,
        latency: None,
        sent: first
            .gen_sent
            .zip(cur.gen_sent)
            .map(|(a, b)| b.saturating_sub(a)),
        server_read: first
            .io
            .zip(cur.io)
            .map(|(a, b)| b.read.saturating_sub(a.read)),
        udp_in_datagrams: cur.udp.in_datagrams.saturating_sub(first.udp.in_datagrams),
        softnet_dropped_per_cpu: cur
            .softnet_per_cpu
            .iter()
            .map(|&(cpu, _, dropped, _)| {
                let was = first
                    .softnet_per_cpu
                    .iter()
                    .find(|r| r.0 == cpu)
                    .map_or(0, |r| r.2);
                (cpu, dropped.saturating_sub(was))
            })
            .collect(),
        latency_histogram: None,
        rcvbuf_limit_bytes: None,
        threads: cur.threads.clone(),
        drop_reasons: None,
        socket_drops_by_socket: vec![],
    }
}

/// Gives a live sample to the sink, with the interval's latency when there is a probe,
/// the target sockets' SO_RCVBUF limits (sk_rcvbuf by inode) summed, and at a slow
/// sample each target socket's drops and the kernel's drop reasons (when counted).
pub(super) fn give_live(sampler: &super::sampler::Sampler, first: &Raw, prev: &Raw, cur: &Raw) {
    let cfg = &sampler.cfg;
    let rcvbuf = &sampler.srv_rcvbuf;
    let Some(live) = &cfg.live else { return };
    let mut s = live_sample(first, prev, cur);
    s.rcvbuf_limit_bytes = (!rcvbuf.is_empty()).then(|| rcvbuf.values().sum());
    if cur.slow {
        s.socket_drops_by_socket = sampler.srv_track.by_socket();
        s.drop_reasons = sampler.live_drops.get().map(|d| d.read());
    }
    s.latency_histogram = cfg.live_latency.as_ref().and_then(|p| (p.0)());
    s.latency = s
        .latency_histogram
        .as_ref()
        .map(tpslab_analysis::stats::latency_summary)
        .map(|l| IntervalLatency {
            replies: l.count,
            p50_us: l.p50_ns as f64 / 1e3,
            p99_us: l.p99_ns as f64 / 1e3,
            p999_us: l.p999_ns as f64 / 1e3,
            max_us: l.max_ns as f64 / 1e3,
        });
    (live.0)(&s);
}
