//! The open-loop UDP generator: datagrams leave at intended times from a plan (evenly
//! paced, or bursts of N back-to-back every interval), independent of replies; replies are
//! matched per packet and latency is measured from the intended send time (coordinated
//! omission corrected) and from the actual send time.

use crate::counters::ErrnoCounts;
use crate::wire::{self, Header, HEADER_LEN};
use crate::EngineError;
use hdrhistogram::Histogram;
use std::net::SocketAddr;
use std::sync::atomic::{
    AtomicBool, AtomicU64, Ordering::Acquire, Ordering::Relaxed, Ordering::Release,
};
use std::sync::Arc;
use std::time::Duration;
use tpslab_analysis::record::{GeneratorReport, LatencyHistograms, MatchMode};
use tpslab_analysis::stats::{encode_histogram, new_ns_histogram, LatencySummaryExt};
use tpslab_analysis::LatencySummary;
use tpslab_net::{mono_ns, RecvBatch, SendBatch, UdpSock};

pub use tpslab_plan::udp::{LoadConfig, PacingSlack};

mod receive;
mod send;

use receive::receiver;
use send::sender;

/// One sender thread's share of the plan.
#[derive(Debug, Clone, Copy)]
struct StreamPlan {
    /// Datagrams per burst for this stream.
    burst: u64,
    /// ns between bursts.
    interval_ns: f64,
    /// Offset of this stream's first burst, ns.
    phase_ns: f64,
    /// Datagrams in the whole run (warm-up + window).
    total: u64,
}

impl StreamPlan {
    #[inline]
    fn intended(&self, start: u64, seq: u64) -> u64 {
        start + (self.phase_ns + (seq / self.burst) as f64 * self.interval_ns) as u64
    }
}

/// The shortest window `--pacing-slack auto` groups datagrams in: at 10 k pps per sender
/// and above, one wake-up per 100 us (groups of two at 10 k pps, eleven at 100 k pps).
pub const AUTO_SLACK_MIN: Duration = Duration::from_micros(100);
/// The longest inter-arrival gap `auto` groups over: a sender below 1000 pps paces
/// exactly (at most 1000 wake-ups a second; a group would hold a datagram over 1 ms).
pub const AUTO_SLACK_MAX: Duration = Duration::from_millis(1);

/// The pacing slack `--pacing-slack auto` chooses for one sender of `stream_rate_pps`
/// datagrams per second (the load's rate divided by its threads) sending bursts of
/// `burst`: the larger of one inter-arrival gap and [`AUTO_SLACK_MIN`], so each wake-up
/// sends at least two datagrams and none leaves later than that bound (plus the
/// wake-up's own delay) after its intended time; zero (exact) for a gap above
/// [`AUTO_SLACK_MAX`], for bursts (their start is the shape under test) and for `max`
/// (no schedule). Never early either way.
pub fn auto_pacing_slack(stream_rate_pps: f64, burst: u64) -> Duration {
    if burst > 1 || !stream_rate_pps.is_finite() || stream_rate_pps <= 0.0 {
        return Duration::ZERO;
    }
    // Rounded up: a slack a fraction of a nanosecond short of the gap would wake before
    // the next datagram is due and group nothing.
    let gap = Duration::from_nanos((1e9 / stream_rate_pps).ceil() as u64);
    if gap > AUTO_SLACK_MAX {
        Duration::ZERO
    } else {
        gap.max(AUTO_SLACK_MIN)
    }
}

/// The slack each sender of `cfg` paces with: the one given, or [`auto_pacing_slack`]
/// of its share of the rate.
pub fn pacing_slack_used(cfg: &LoadConfig) -> Duration {
    match cfg.pacing_slack {
        PacingSlack::Given(d) => d,
        PacingSlack::Auto => auto_pacing_slack(cfg.rate_pps / cfg.threads.max(1) as f64, cfg.burst),
    }
}

/// Splits the plan over `threads` streams: with bursts, every stream sends its share of
/// each burst at the same instants (the bursts add up at the server); when paced, streams
/// interleave evenly.
fn stream_plans(cfg: &LoadConfig) -> Vec<StreamPlan> {
    let t = cfg.threads as u64;
    let run_ns = (cfg.warmup + cfg.duration).as_nanos() as f64;
    (0..t)
        .map(|i| {
            if cfg.is_max() {
                StreamPlan {
                    burst: 1,
                    interval_ns: 0.0,
                    phase_ns: 0.0,
                    total: u64::MAX,
                }
            } else if cfg.burst > 1 {
                let interval = cfg.burst_interval_ns();
                let share = cfg.burst / t + u64::from(i < cfg.burst % t);
                let bursts = (run_ns / interval).ceil() as u64;
                StreamPlan {
                    burst: share.max(1),
                    interval_ns: interval,
                    phase_ns: cfg.phase.as_nanos() as f64,
                    total: if share == 0 { 0 } else { bursts * share },
                }
            } else {
                let interval = t as f64 * 1e9 / cfg.rate_pps;
                let phase = i as f64 * 1e9 / cfg.rate_pps + cfg.phase.as_nanos() as f64;
                let total = ((run_ns - phase) / interval).ceil().max(0.0) as u64;
                StreamPlan {
                    burst: 1,
                    interval_ns: interval,
                    phase_ns: phase,
                    total,
                }
            }
        })
        .collect()
}

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

    /// A live count of the datagrams the kernel accepted so far, all streams (for the
    /// observer's `gen_sent_per_s`); the senders add to it once per batch.
    pub fn send_probe(&self) -> crate::server::ReadProbe {
        let streams = self.streams.clone();
        crate::server::ReadProbe::new(move || streams.iter().map(|s| s.sent.load(Relaxed)).sum())
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

    fn finish(
        &self,
        start: u64,
        window_start: u64,
        lag: Histogram<u64>,
        burst_lag: Histogram<u64>,
        rr: Vec<RecvResult>,
        interrupted: bool,
    ) -> LoadResult {
        let cfg = &self.cfg;
        let sum = |f: fn(&Stream) -> u64| self.streams.iter().map(|s| f(s)).sum::<u64>();
        let attempted = sum(|s| s.attempted.load(Relaxed));
        let sent = sum(|s| s.sent.load(Relaxed));
        let failed = sum(|s| s.failed.load(Relaxed));
        let window_sent = sum(|s| s.window_attempted.load(Relaxed));
        let not_sent = sum(|s| s.not_sent.load(Relaxed));
        let mut send_errors = std::collections::BTreeMap::new();
        for s in &self.streams {
            s.errors.merge_into(&mut send_errors);
        }
        let (r, [lat_i, lat_a, lat_w]) = merge_receivers(rr);
        let last_send = self
            .streams
            .iter()
            .map(|s| s.last_send_ns.load(Relaxed))
            .max()
            .unwrap_or(start);
        // From the first intended send to the last send call: the rate the generator
        // actually reached (the plan's rate when it kept up).
        let planned = attempted + not_sent;
        let run_s = (cfg.warmup + cfg.duration).as_secs_f64();
        // The plan's share that was attempted takes that share of the run when on time
        // (this covers the last burst interval); longer when the generator fell behind.
        let sending_s = (last_send.saturating_sub(start) as f64 / 1e9)
            .max(attempted as f64 / planned.max(1) as f64 * run_s)
            .max(1e-9);
        let planned_window_s = cfg.duration.as_secs_f64();
        // An interrupted run's window ends where sending stopped.
        let window_s = if interrupted {
            let ran =
                last_send.saturating_sub(window_start) as f64 / 1e9 + cfg.burst_interval_ns() / 1e9;
            ran.clamp(1e-9, planned_window_s)
        } else {
            planned_window_s
        };
        let mode = cfg.match_mode();
        // Without a matchable field, replies cannot be tied to the window: in aggregate
        // mode the "window" figures cover the whole run.
        let (window_sent, window_answered) = if mode == MatchMode::Aggregate {
            (attempted, r.read)
        } else {
            (window_sent, r.window_answered)
        };
        let mut report = GeneratorReport {
            target: cfg.target.to_string(),
            rate_pps: if cfg.is_max() { 0.0 } else { cfg.rate_pps },
            rate_max: cfg.is_max(),
            gso: !self.streams.is_empty() && self.streams.iter().all(|s| s.gso),
            gso_fallback: self
                .streams
                .iter()
                .any(|s| s.socks.iter().any(|k| k.gso_refused())),
            max_segments_per_send: self
                .streams
                .iter()
                .map(|s| s.max_segments.load(Relaxed))
                .max()
                .unwrap_or(0),
            size_bytes: cfg.datagram_len(),
            burst: cfg.burst,
            burst_interval_ns: cfg.burst_interval_ns() as u64,
            pacing_slack_ns: pacing_slack_used(cfg).as_nanos() as u64,
            pacing_slack_auto: cfg.pacing_slack == PacingSlack::Auto,
            threads: cfg.threads,
            flows: self.source_ports(),
            duration_s: planned_window_s,
            warmup_s: cfg.warmup.as_secs_f64(),
            match_mode: mode,
            planned,
            not_sent,
            attempted,
            sent,
            send_failed: failed,
            send_errors,
            replies_read: r.read,
            replies_matched: r.matched,
            replies_per_request: (mode != MatchMode::Aggregate && r.matched > 0)
                .then(|| (r.matched + r.duplicates) as f64 / r.matched as f64),
            duplicates: r.duplicates,
            reordered: r.reordered,
            unmatched: r.unmatched,
            window_sent,
            window_answered,
            window_loss_pct: (mode != MatchMode::None && window_sent > 0).then(|| {
                100.0 * window_sent.saturating_sub(window_answered) as f64 / window_sent as f64
            }),
            achieved_pps: if attempted > 1 {
                attempted as f64 / sending_s
            } else {
                0.0
            },
            tps: if mode == MatchMode::None {
                0.0
            } else {
                window_answered as f64 / window_s.max(1e-9)
            },
            latency_intended: LatencySummary::from_histogram(&lat_i),
            latency_actual: LatencySummary::from_histogram(&lat_a),
            rx_kernel_timestamps: r.rx_timestamped,
            latency_wakeup: LatencySummary::from_histogram(&lat_w),
            schedule_lag: LatencySummary::from_histogram(&lag),
            socket_inodes: self.socket_inodes(),
            valid: true,
            invalid_reasons: vec![],
            histograms: cfg.keep_histograms.then(|| LatencyHistograms {
                intended: encode_histogram(&lat_i),
                actual: encode_histogram(&lat_a),
            }),
        };
        validate(&mut report, cfg, &burst_lag, interrupted);
        LoadResult { report }
    }
}

/// The receivers' counts summed, and their latencies merged: (intended-time,
/// actual-send, wake-up) histograms, ns.
fn merge_receivers(rr: Vec<RecvResult>) -> (RecvResult, [Histogram<u64>; 3]) {
    let mut lat = [new_ns_histogram(), new_ns_histogram(), new_ns_histogram()];
    let mut r = RecvResult::default();
    for x in rr {
        r.read += x.read;
        r.matched += x.matched;
        r.duplicates += x.duplicates;
        r.reordered += x.reordered;
        r.unmatched += x.unmatched;
        r.window_answered += x.window_answered;
        r.rx_timestamped += x.rx_timestamped;
        for (h, x) in lat
            .iter_mut()
            .zip([x.lat_intended, x.lat_actual, x.lat_wakeup])
        {
            if let Some(x) = x {
                h.add(&x).ok();
            }
        }
    }
    (r, lat)
}

/// Marks the run invalid when the generator, not the server, limited it.
fn validate(
    r: &mut GeneratorReport,
    cfg: &LoadConfig,
    burst_lag: &Histogram<u64>,
    interrupted: bool,
) {
    let tool_errors: u64 = r
        .send_errors
        .iter()
        .filter(|(k, _)| k.as_str() != "ECONNREFUSED")
        .map(|(_, v)| v)
        .sum();
    if tool_errors > 0 {
        r.invalid_reasons.push(format!(
            "the generator failed to send {tool_errors} datagrams ({})",
            r.send_errors
                .iter()
                .map(|(k, v)| format!("{k} x{v}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if !interrupted && r.not_sent > 0 {
        r.invalid_reasons.push(format!(
            "the generator fell behind its schedule and did not send {} of {} planned datagrams by the planned end",
            r.not_sent, r.planned
        ));
    }
    if !interrupted && r.window_sent > 0 && !cfg.is_max() {
        let target = cfg.rate_pps;
        if r.achieved_pps < 0.95 * target {
            r.invalid_reasons.push(format!(
                "the generator reached {:.0} pps of the {:.0} pps planned (< 95 %)",
                r.achieved_pps, target
            ));
        }
    }
    // Bursts that start late by more than half an interval (their shape is what is being
    // tested), or paced datagrams late by more than 10 intervals or 1 % of the run (a
    // short stall relative to the plan, at most 50 ms), and at least 5 ms either way (a scheduler
    // preemption on a busy host is not a broken schedule), count as off schedule; the run
    // is invalid when more than 1 % of them were: a few late datagrams in a run that
    // otherwise kept its plan do not make it the tool's measurement.
    let interval = cfg.burst_interval_ns() / cfg.threads as f64;
    let run_ns = (cfg.warmup + cfg.duration).as_nanos() as f64;
    let limit_ns = if cfg.burst > 1 {
        cfg.burst_interval_ns() / 2.0
    } else {
        // 1 % of the run, but never above 50 ms: a longer stall sends its backlog as one
        // burst, which is not the plan the server was meant to see.
        (10.0 * interval).max((run_ns / 100.0).min(50e6))
    }
    .max(5e6) as u64;
    if let Some((late, total)) = late_share(burst_lag, limit_ns) {
        if late as f64 > 0.01 * total as f64 {
            r.invalid_reasons.push(format!(
                "{} of {} {} ({:.2} %) left more than {} us after their intended time (allowed: 1 %)",
                late,
                total,
                if cfg.burst > 1 { "bursts" } else { "datagrams" },
                100.0 * late as f64 / total as f64,
                limit_ns / 1000
            ));
        }
    }
    r.valid = r.invalid_reasons.is_empty();
}

/// The message of a thread's panic.
fn panic_text(e: &(dyn std::any::Any + Send)) -> String {
    e.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| e.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panicked".into())
}

/// (late, total): entries of `h` above `limit_ns`, and all entries; None when empty.
fn late_share(h: &Histogram<u64>, limit_ns: u64) -> Option<(u64, u64)> {
    let total = h.len();
    (total > 0).then(|| {
        let on_time = h.count_between(0, limit_ns);
        (total.saturating_sub(on_time), total)
    })
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
