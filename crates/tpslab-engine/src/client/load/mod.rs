//! The open-loop UDP generator: datagrams leave at intended times from a plan (evenly
//! paced, or bursts of N back-to-back every interval), independent of replies; replies are
//! matched per packet and latency is measured from the intended send time (coordinated
//! omission corrected) and from the actual send time.

use crate::serve::counters::ErrnoCounts;
use crate::serve::wire::{self, Header, HEADER_LEN};
use crate::EngineError;
use hdrhistogram::Histogram;
use std::net::SocketAddr;
use std::sync::atomic::{
    AtomicBool, AtomicU64, Ordering::Acquire, Ordering::Relaxed, Ordering::Release,
};
use std::sync::Arc;
use std::time::Duration;
use tpslab_analysis::stats::new_ns_histogram;
use tpslab_net::{mono_ns, RecvBatch, SendBatch, UdpSock};
use tpslab_plan::udp::MatchMode;
use tpslab_record::histogram::encode_histogram;
use tpslab_record::ReplyFrames;
use tpslab_record::{GeneratorReport, LatencyHistograms};

use tpslab_plan::udp::{LoadConfig, PacingSlack};

mod finish;
mod frames;
mod receive;
mod schedule;
mod send;

#[cfg(test)]
use finish::validate;
pub use schedule::{auto_pacing_slack, pacing_slack_used, AUTO_SLACK_MAX, AUTO_SLACK_MIN};
use schedule::{stream_plans, StreamPlan};

use receive::receiver;
use send::sender;

/// Send times of recent sequence numbers, for matching replies by an echoed field.
/// One writer (the sender), one reader (the receiver); each slot is a small seqlock:
/// `seq_begin` and `seq_end` bracket the times, and a reader that sees them differ saw a
/// slot being rewritten.
struct SendLog {
    mask: u64,
    seq_begin: Vec<AtomicU64>,
    intended: Vec<AtomicU64>,
    sent: Vec<AtomicU64>,
    seq_end: Vec<AtomicU64>,
}

/// Slots of a SendLog (per stream): replies more than this many sequence numbers late
/// cannot be matched.
const SEND_LOG_SLOTS_MAX_BITS: u32 = 16;

impl SendLog {
    fn new(field_bits: u32) -> SendLog {
        let slots = 1u64 << field_bits.min(SEND_LOG_SLOTS_MAX_BITS);
        let mk = || {
            (0..slots)
                .map(|_| AtomicU64::new(u64::MAX))
                .collect::<Vec<_>>()
        };
        SendLog {
            mask: slots - 1,
            seq_begin: mk(),
            intended: mk(),
            sent: mk(),
            seq_end: mk(),
        }
    }
    #[inline]
    fn record(&self, seq: u64, intended: u64, sent: u64) {
        let i = (seq & self.mask) as usize;
        self.seq_begin[i].store(seq, Relaxed);
        std::sync::atomic::fence(Release);
        self.intended[i].store(intended, Relaxed);
        self.sent[i].store(sent, Relaxed);
        self.seq_end[i].store(seq, Release);
    }
    /// The latest sequence number whose low bits equal `field` (modulo the field width),
    /// with its intended and actual send times; None when unknown or being rewritten.
    #[inline]
    fn lookup(&self, field: u64, field_mask: u64) -> Option<(u64, u64, u64)> {
        let i = (field & self.mask) as usize;
        let seq = self.seq_end[i].load(Acquire);
        let intended = self.intended[i].load(Relaxed);
        let sent = self.sent[i].load(Relaxed);
        std::sync::atomic::fence(Acquire);
        let begin = self.seq_begin[i].load(Relaxed);
        (seq != u64::MAX && begin == seq && seq & field_mask == field)
            .then_some((seq, intended, sent))
    }
}

/// Shared per-stream state between its sender and its reply receiver.
struct Stream {
    /// The stream's flows: one connected socket per source port, sent from in turn (one
    /// send call each); replies come back to each.
    socks: Vec<UdpSock>,
    plan: StreamPlan,
    attempted: AtomicU64,
    sent: AtomicU64,
    failed: AtomicU64,
    window_attempted: AtomicU64,
    /// Planned datagrams never attempted (run interrupted, or the generator fell behind).
    not_sent: AtomicU64,
    /// GSO was on for this stream's socket at the start (whether the path then refused
    /// it is the socket's: `sock.gso_refused()`).
    gso: bool,
    /// Most datagrams one message carried that the kernel took (1 without GSO): a GRO
    /// receiver may queue, and drop, such a message as one buffer.
    max_segments: AtomicU64,
    errors: ErrnoCounts,
    sender_done: AtomicBool,
    /// Monotonic ns of the last send call.
    last_send_ns: AtomicU64,
    log: Option<SendLog>,
    /// Latencies from the intended send time of the replies read since the live stream
    /// last took them (`--json-stream`); None: no stream, nothing recorded.
    live_lat: std::sync::Mutex<Option<Histogram<u64>>>,
}

/// What a reply receiver found.
#[derive(Default)]
struct RecvResult {
    read: u64,
    matched: u64,
    duplicates: u64,
    reordered: u64,
    unmatched: u64,
    window_answered: u64,
    /// Replies whose receive time is the kernel's (SO_TIMESTAMPNS).
    rx_timestamped: u64,
    lat_intended: Option<Histogram<u64>>,
    lat_actual: Option<Histogram<u64>>,
    /// From the actual send to this thread's clock after waking (what a tool without
    /// kernel timestamps reports).
    lat_wakeup: Option<Histogram<u64>>,
    /// With a frame header: replies complete, incomplete, frames received, expected.
    /// and datagrams of a request with a frame header that does not fit.
    frames: Option<[u64; 5]>,
}

/// The generator's result: the report and the sockets' inodes.
pub struct LoadResult {
    /// Counts, latencies and validity (validity is refined by the caller with the
    /// observer's view of the generator's own socket drops).
    pub report: GeneratorReport,
}

/// Handle to sockets created before the run, so an observer can watch them from the start.
pub struct UdpLoad {
    cfg: LoadConfig,
    streams: Vec<Arc<Stream>>,
}

impl UdpLoad {
    /// Creates the sockets (one per thread, connected to the target).
    pub fn prepare(cfg: LoadConfig) -> Result<UdpLoad, EngineError> {
        // Plans come from flags, plan files and saved records: the field must lie inside
        // the payload (checked, so an offset near the integer limit cannot wrap).
        if let Some((off, len)) = cfg.seq_field {
            let inside = cfg.payload.as_ref().is_some_and(|p| {
                (1..=8).contains(&len) && off.checked_add(len).is_some_and(|e| e <= p.len())
            });
            if !inside {
                return Err(EngineError::Other(format!(
                    "seq field {off}:{len}: allowed LEN 1..=8 inside the payload ({} bytes)",
                    cfg.payload.as_ref().map_or(0, |p| p.len())
                )));
            }
        }
        let local: SocketAddr = if cfg.target.is_ipv4() {
            "0.0.0.0:0".parse().unwrap()
        } else {
            "[::]:0".parse().unwrap()
        };
        let field_bits = cfg.seq_field.map(|(_, len)| (len * 8) as u32);
        let mut streams = vec![];
        let (flows, threads) = (cfg.flow_count().max(1), cfg.threads.max(1));
        for (i, plan) in stream_plans(&cfg).into_iter().enumerate() {
            // The flows dealt to the threads: thread i has every threads-th one.
            let mine = flows / threads + usize::from(i < flows % threads);
            let mut socks = Vec::with_capacity(mine.max(1));
            let mut gso = cfg.gso && cfg.datagram_len() <= u16::MAX as usize;
            for _ in 0..mine.max(1) {
                let sock = UdpSock::bind(local, false).map_err(EngineError::Net)?;
                sock.connect(cfg.target).map_err(EngineError::Net)?;
                sock.set_read_timeout(Duration::from_millis(20))
                    .map_err(EngineError::Net)?;
                // Kernel receive timestamps for the replies (refused: our own clock).
                let _ = sock.set_timestampns(true);
                // Room for replies to a whole burst: the generator must not be the
                // bottleneck.
                let _ = sock.set_rcvbuf(64 << 20);
                // GSO where the kernel takes it (probed once per socket; refused by any:
                // plain sends on all).
                gso = gso && sock.enable_gso(cfg.datagram_len() as u16);
                socks.push(sock);
            }
            streams.push(Arc::new(Stream {
                socks,
                plan,
                attempted: AtomicU64::new(0),
                sent: AtomicU64::new(0),
                failed: AtomicU64::new(0),
                window_attempted: AtomicU64::new(0),
                not_sent: AtomicU64::new(0),
                gso,
                max_segments: AtomicU64::new(0),
                errors: ErrnoCounts::default(),
                sender_done: AtomicBool::new(false),
                last_send_ns: AtomicU64::new(0),
                log: (cfg.match_mode() == MatchMode::SeqField)
                    .then(|| SendLog::new(field_bits.unwrap())),
                live_lat: std::sync::Mutex::new(None),
            }));
        }
        Ok(UdpLoad { cfg, streams })
    }

    /// Distinct source ports the generator's sockets have (its flows).
    pub fn source_ports(&self) -> usize {
        let ports: std::collections::BTreeSet<u16> = self
            .streams
            .iter()
            .flat_map(|s| s.socks.iter().map(|k| k.local_addr().port()))
            .collect();
        ports.len()
    }

    /// Inodes of the generator's sockets (to find them in /proc/net/udp).
    pub fn socket_inodes(&self) -> Vec<u64> {
        self.streams
            .iter()
            .flat_map(|s| s.socks.iter().filter_map(|k| k.inode().ok()))
            .collect()
    }

    /// The generator's sockets read in place for the observer (each flow's socket by
    /// getsockopt(SO_MEMINFO); inodes read once, here).
    pub fn own_sockets(&self) -> crate::observe::OwnSockets {
        let socks: Vec<(Arc<Stream>, usize, u64)> = self
            .streams
            .iter()
            .flat_map(|s| {
                s.socks
                    .iter()
                    .enumerate()
                    .filter_map(|(i, k)| Some((s.clone(), i, k.inode().ok()?)))
            })
            .collect();
        let inodes = socks.iter().map(|s| s.2).collect();
        crate::observe::OwnSockets::new(inodes, move |into| {
            let mut first = Ok(());
            for (s, i, inode) in &socks {
                match s.socks[*i].meminfo() {
                    Ok(mem) => into.push(crate::observe::OwnSocket {
                        inode: *inode,
                        connected: true,
                        mem,
                    }),
                    Err(e) if first.is_ok() => first = Err(e.to_string()),
                    Err(_) => {}
                }
            }
            first
        })
    }

    /// A live count of the datagrams the kernel accepted so far, all streams (for the
    /// observer's `gen_sent_per_s`); the senders add to it once per batch.
    pub fn send_probe(&self) -> crate::serve::server::ReadProbe {
        let streams = self.streams.clone();
        crate::serve::server::ReadProbe::new(move || {
            streams.iter().map(|s| s.sent.load(Relaxed)).sum()
        })
    }

    /// Turns on per-interval latency for a live stream and returns what takes it: each call
    /// gives the latency histogram (from the intended send time, ns) of the replies read
    /// since the previous call, all streams, and starts a new interval; None when none was
    /// read.
    pub fn live_latency(&self) -> crate::observe::LatencyProbe {
        for s in &self.streams {
            *s.live_lat.lock().unwrap_or_else(|e| e.into_inner()) = Some(new_ns_histogram());
        }
        let streams = self.streams.clone();
        crate::observe::LatencyProbe(Arc::new(move || {
            let mut all = new_ns_histogram();
            for s in &streams {
                let mut g = s.live_lat.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(h) = g.as_mut() {
                    all.add(&*h).ok();
                    h.reset();
                }
            }
            (!all.is_empty()).then_some(all)
        }))
    }

    /// Runs the plan to its end (or until `stop` is set) and waits for late replies: until
    /// every datagram sent is answered, or no reply came for the drain period and
    /// `target_idle()` says the target holds nothing more (at most 10 s beyond the drain).
    /// The sockets stay open until `self` is dropped, so an observer can take its final
    /// sample of them first.
    pub fn run(&self, stop: &AtomicBool, target_idle: &(dyn Fn() -> bool + Sync)) -> LoadResult {
        let cfg = &self.cfg;
        // Start a little in the future so every thread is ready before the first send.
        let start = mono_ns() + 5_000_000;
        let window_start = start + cfg.warmup.as_nanos() as u64;
        let mode = cfg.match_mode();
        let mut lag = new_ns_histogram();
        let mut burst_lag = new_ns_histogram();
        let mut recv_results = vec![];
        let mut failures: Vec<String> = vec![];
        std::thread::scope(|scope| {
            let mut senders = vec![];
            let mut receivers = vec![];
            for (idx, st) in self.streams.iter().enumerate() {
                let st = st.clone();
                senders.push(
                    scope.spawn(move || sender(cfg, &st, idx as u16, start, window_start, stop)),
                );
            }
            if mode != MatchMode::None {
                for (idx, st) in self.streams.iter().enumerate() {
                    let st = st.clone();
                    receivers.push(scope.spawn(move || {
                        receiver(cfg, &st, idx as u16, window_start, stop, target_idle)
                    }));
                }
            }
            for s in senders {
                match s.join() {
                    Ok((l, b)) => {
                        lag.add(&l).ok();
                        burst_lag.add(&b).ok();
                    }
                    Err(e) => failures.push(format!("a sender thread failed: {}", panic_text(&e))),
                }
            }
            for r in receivers {
                match r.join() {
                    Ok(x) => recv_results.push(x),
                    Err(e) => failures.push(format!(
                        "a reply receiver thread failed: {}",
                        panic_text(&e)
                    )),
                }
            }
        });
        let mut r = self.finish(
            start,
            window_start,
            lag,
            burst_lag,
            recv_results,
            stop.load(Relaxed),
        );
        if !failures.is_empty() {
            r.report.invalid_reasons.extend(failures);
            r.report.valid = false;
        }
        r
    }
}

/// The message of a thread's panic.
fn panic_text(e: &(dyn std::any::Any + Send)) -> String {
    e.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| e.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panicked".into())
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
