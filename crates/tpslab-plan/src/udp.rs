//! The UDP plans: the reference server's settings and an open-loop load, each with the one
//! validation every way of making them goes through.

use crate::limits::*;
use crate::units::seq_field_fits;
use crate::PlanError;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::time::Duration;
use tpslab_net::sched::SchedPolicy;

/// What the server does with each datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// S1: replace every "ping" with "pong" in the payload, then reply.
    Replace,
    /// Reply with the datagram unchanged.
    Echo,
    /// Read and discard; no reply.
    Sink,
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Mode::Replace => "replace",
            Mode::Echo => "echo",
            Mode::Sink => "sink",
        })
    }
}

/// A validated server configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ServerConfig {
    /// Address to bind.
    pub bind: SocketAddr,
    /// Threads, one SO_REUSEPORT socket each (>= 1).
    pub threads: usize,
    /// recvmmsg batch (1: plain recvfrom/sendto).
    pub batch: usize,
    /// SO_RCVBUF request, bytes (None: net.core.rmem_default).
    pub rcvbuf: Option<u64>,
    /// Workload.
    pub mode: Mode,
    /// Extra busy work per datagram (JSON: `work_ns`, integer ns).
    #[serde(rename = "work_ns", with = "crate::time::ns")]
    #[cfg_attr(feature = "schema", schemars(with = "u64"))]
    pub work: Duration,
    /// CPUs each thread may run on (empty: not pinned), like taskset.
    pub cpus: Vec<usize>,
    /// Scheduling policy of each thread, like chrt.
    pub sched: SchedPolicy,
    /// SO_BUSY_POLL of each socket, us (None: not set).
    #[serde(default)]
    pub busy_poll_us: Option<u32>,
    /// UDP_GRO: read coalesced datagrams (from GSO senders) as one buffer of segments;
    /// each segment is a datagram for the counts and the workload, and replies leave as
    /// one GSO send. Uses recvmmsg whatever `batch` says.
    #[serde(default)]
    pub gro: bool,
    /// How datagrams are spread over the threads' SO_REUSEPORT sockets (hash: the
    /// kernel's flow hash, the default).
    #[serde(default, skip_serializing_if = "Steer::is_hash")]
    pub steer: Steer,
}

/// How a SO_REUSEPORT group's datagrams are spread over its sockets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Steer {
    /// The kernel's hash of each flow (source and destination address and port): a flow
    /// always reaches one socket; a few flows can leave sockets idle.
    #[default]
    Hash,
    /// A reuseport BPF program: the socket of the CPU that received the datagram (its
    /// number modulo the sockets), so RSS/RPS placement decides.
    Cpu,
    /// A reuseport BPF program: a random socket per datagram (even whatever the flows;
    /// order within a flow is not kept).
    Random,
}

impl Steer {
    /// The names, as flags and plan files take them.
    pub const NAMES: &'static str = "hash, cpu, random";

    /// Whether this is the kernel's default (nothing attached).
    pub fn is_hash(&self) -> bool {
        *self == Steer::Hash
    }

    /// Its name (`hash`, `cpu`, `random`).
    pub fn name(self) -> &'static str {
        match self {
            Steer::Hash => "hash",
            Steer::Cpu => "cpu",
            Steer::Random => "random",
        }
    }
}

impl std::str::FromStr for Steer {
    type Err = String;
    fn from_str(s: &str) -> Result<Steer, String> {
        match s.trim() {
            "hash" => Ok(Steer::Hash),
            "cpu" => Ok(Steer::Cpu),
            "random" => Ok(Steer::Random),
            _ => Err(format!("allowed {}", Steer::NAMES)),
        }
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            bind: SocketAddr::from(([127, 0, 0, 1], 9000)),
            threads: 1,
            batch: 1,
            rcvbuf: None,
            mode: Mode::Replace,
            work: Duration::ZERO,
            cpus: vec![],
            sched: SchedPolicy::Other,
            busy_poll_us: None,
            gro: false,
            steer: Steer::Hash,
        }
    }
}

/// How replies are matched to requests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum MatchMode {
    /// tpslab's header is echoed: exact per-packet matching with intended/actual send times.
    #[default]
    Header,
    /// A sequence field echoed by the protocol (e.g. DNS id): per-packet matching modulo the
    /// field's width.
    SeqField,
    /// No way to match: loss counted in aggregate only.
    Aggregate,
    /// No replies expected (sink).
    None,
}

/// A validated load plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct LoadConfig {
    /// Where to send.
    pub target: SocketAddr,
    /// Mean rate, datagrams per second (> 0); infinite for `max` (back to back), written
    /// `"max"` in JSON.
    #[serde(with = "rate_or_max")]
    #[cfg_attr(feature = "schema", schemars(schema_with = "rate_or_max::schema"))]
    pub rate_pps: f64,
    /// UDP payload size, bytes (ignored with a payload file: its length is used).
    pub size_bytes: usize,
    /// Measurement window after warm-up.
    pub duration: Duration,
    /// Warm-up before the window, excluded from the figures.
    pub warmup: Duration,
    /// Datagrams per burst (1: evenly paced).
    pub burst: u64,
    /// Sender threads.
    pub threads: usize,
    /// Flows: source ports (one connected socket each) the load is spread over, dealt to
    /// the sender threads in turn (each thread sends from its sockets in turn, one send
    /// call each); at least one per thread. 0: one per thread, as plans written before
    /// `--flows` ran.
    #[serde(default, skip_serializing_if = "is_zero_usize")]
    pub flows: usize,
    /// Bytes to send instead of tpslab's header (a real protocol's request); hex in JSON.
    #[serde(default, with = "hex_bytes")]
    #[cfg_attr(feature = "schema", schemars(schema_with = "hex_bytes::schema"))]
    pub payload: Option<Vec<u8>>,
    /// (offset, len) of a field the server echoes, where the sequence number is written.
    pub seq_field: Option<(usize, usize)>,
    /// Whether replies are expected (false: one-way load into a sink).
    pub expect_replies: bool,
    /// How long to wait for late replies after the last send, when some are missing.
    pub drain: Duration,
    /// Run identifier written in every header.
    pub run_id: u64,
    /// CPUs the generator's threads may run on (empty: not pinned).
    #[serde(default)]
    pub cpus: Vec<usize>,
    /// Send with UDP GSO (UDP_SEGMENT): datagrams due together leave in one send of up
    /// to 64 segments, split by the kernel. Falls back to plain sends when refused.
    #[serde(default)]
    pub gso: bool,
    /// Pacing slack: how late past its intended time a datagram may leave so that the
    /// sender wakes once per group of datagrams due within it, not once per datagram
    /// (0: each datagram leaves at its time, within microseconds, at the cost of one
    /// wake-up each). Never early: every datagram leaves at or after its intended time,
    /// and its lag is measured either way.
    /// `auto` (the command line's default): chosen from the rate when the load starts
    /// (see `tpslab_engine::client::load::auto_pacing_slack`). Absent in plans written before
    /// `auto` existed: exact pacing (0), as they ran.
    #[serde(
        default = "PacingSlack::exact",
        skip_serializing_if = "PacingSlack::is_exact",
        with = "pacing_slack"
    )]
    #[cfg_attr(feature = "schema", schemars(schema_with = "pacing_slack::schema"))]
    pub pacing_slack: PacingSlack,
    /// Offset of the first send from the start (an agent's place among the fleet's, so
    /// paced agents interleave instead of sending at the same instants); zero by default.
    #[serde(default, skip_serializing_if = "Duration::is_zero")]
    pub phase: Duration,
    /// Keep the latency histograms (HdrHistogram V2) and the ledger's inputs in the
    /// record: what `merge` adds up and `--metrics-file` buckets exactly.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub keep_histograms: bool,
}

impl Default for LoadConfig {
    /// The command line's defaults: 10000 pps of 1024-byte datagrams to 127.0.0.1:9000 for
    /// 5 s after a 500 ms warm-up, one thread, replies expected, 500 ms drain.
    fn default() -> Self {
        LoadConfig {
            target: SocketAddr::from(([127, 0, 0, 1], 9000)),
            rate_pps: 10_000.0,
            size_bytes: 1024,
            duration: Duration::from_secs(5),
            warmup: Duration::from_millis(500),
            burst: 1,
            threads: 1,
            flows: 0,
            payload: None,
            seq_field: None,
            expect_replies: true,
            drain: Duration::from_millis(500),
            run_id: 0,
            cpus: vec![],
            gso: false,
            pacing_slack: PacingSlack::Auto,

            phase: Duration::ZERO,

            keep_histograms: false,
        }
    }
}

impl LoadConfig {
    /// Whether the generator sends as fast as the path allows (`--rate max`: rate_pps is
    /// infinite): no schedule, intended = actual send time, bounded by the run's time.
    #[inline]
    pub fn is_max(&self) -> bool {
        self.rate_pps.is_infinite()
    }
    /// Interval between burst starts, ns (burst / rate).
    pub fn burst_interval_ns(&self) -> f64 {
        self.burst as f64 * 1e9 / self.rate_pps
    }
    /// Flows (sockets) over all threads: `flows`, or one per thread when 0.
    pub fn flow_count(&self) -> usize {
        if self.flows == 0 {
            self.threads
        } else {
            self.flows
        }
    }
    /// Bytes of each datagram.
    pub fn datagram_len(&self) -> usize {
        self.payload.as_ref().map_or(self.size_bytes, |p| p.len())
    }
    /// How replies are framed: memcached's UDP frame header when the payload is a
    /// memcached UDP request and the sequence field is its request id (`0:2`); None:
    /// each reply datagram is a reply.
    pub fn frame_header(&self) -> Option<FrameHeader> {
        (self.match_mode() == MatchMode::SeqField
            && self.seq_field == Some((0, 2))
            && self.payload.as_deref().is_some_and(is_memcached_request))
        .then_some(FrameHeader::Memcached)
    }
    /// How replies will be matched.
    pub fn match_mode(&self) -> MatchMode {
        match (self.expect_replies, &self.payload, self.seq_field) {
            (false, _, _) => MatchMode::None,
            (true, None, _) => MatchMode::Header,
            (true, Some(_), Some(_)) => MatchMode::SeqField,
            (true, Some(_), None) => MatchMode::Aggregate,
        }
    }
}

/// A reply framing the generator knows: how the datagrams of one reply say which reply
/// they belong to and how many there are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameHeader {
    /// memcached's UDP frame header, 8 bytes at the start of every datagram: request id,
    /// sequence number, total datagrams, reserved (16 bits each, network order). A reply
    /// is answered when all its total datagrams arrived.
    Memcached,
}

impl FrameHeader {
    /// The name records use ("memcached").
    pub fn name(self) -> &'static str {
        match self {
            FrameHeader::Memcached => "memcached",
        }
    }
}

/// The commands of memcached's text protocol a UDP request may carry (retrievals,
/// storage, the meta commands, and the rest of the text protocol).
const MEMCACHED_COMMANDS: &[&str] = &[
    "get",
    "gets",
    "gat",
    "gats",
    "mg",
    "ms",
    "md",
    "ma",
    "mn",
    "me",
    "set",
    "add",
    "replace",
    "append",
    "prepend",
    "cas",
    "delete",
    "incr",
    "decr",
    "touch",
    "stats",
    "version",
    "verbosity",
    "flush_all",
];

/// Whether `payload` is one memcached UDP request: a frame header with sequence number
/// 0 of 1 datagram and reserved 0, then a text command of memcached's protocol followed
/// by a space or CRLF. (A DNS query with flags 0, one question and no answers has the
/// same first 8 bytes; its next bytes are counts and labels, never a command word.)
pub fn is_memcached_request(payload: &[u8]) -> bool {
    let Some((head, text)) = payload.split_at_checked(8) else {
        return false;
    };
    head[2..8] == [0, 0, 0, 1, 0, 0]
        && MEMCACHED_COMMANDS.iter().any(|c| {
            text.strip_prefix(c.as_bytes())
                .is_some_and(|rest| rest.starts_with(b" ") || rest.starts_with(b"\r\n"))
        })
}

/// How a paced load's sender waits for its datagrams' intended times
/// (`--pacing-slack auto|0|DUR`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PacingSlack {
    /// Chosen from each sender's rate when the load starts: one wake-up per group of
    /// datagrams due within max(one inter-arrival gap, 100 us), exact below 1000 pps
    /// per sender, with bursts and at `--rate max` (the engine's `auto_pacing_slack`).
    Auto,
    /// As given: 0 is exact pacing (one wake-up per datagram, each within microseconds
    /// of its time); above 0, one wake-up per group of datagrams due within it, each up
    /// to that late, never early.
    Given(Duration),
}

/// What `--pacing-slack` takes: `auto`, `0` (exact) or a duration.
pub const PACING_SLACK_FORMS: &str = "auto, 0 (exact) or a duration (200us, 1ms)";

/// Parses `--pacing-slack`: `auto` (chosen from the rate), or a duration (`0`: exact;
/// its range is checked by the plan's `validate()`). The error is `LABEL VALUE: allowed`
/// [`PACING_SLACK_FORMS`].
pub fn parse_pacing_slack(label: &str, s: &str) -> Result<PacingSlack, PlanError> {
    if s.trim() == "auto" {
        return Ok(PacingSlack::Auto);
    }
    humantime::parse_duration(s.trim())
        .map(PacingSlack::Given)
        .map_err(|_| PlanError::value(label, s, PACING_SLACK_FORMS))
}

impl PacingSlack {
    /// Exact pacing: `Given(0)`, what plans without the field ran with.
    pub fn exact() -> Self {
        PacingSlack::Given(Duration::ZERO)
    }
    /// Whether this is exact pacing (`Given(0)`).
    pub fn is_exact(&self) -> bool {
        *self == PacingSlack::exact()
    }
}

impl std::fmt::Display for PacingSlack {
    /// `auto`, `0`, or the slack given (`1ms`), as `--pacing-slack` takes it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PacingSlack::Auto => f.write_str("auto"),
            PacingSlack::Given(d) if d.is_zero() => f.write_str("0"),
            PacingSlack::Given(d) => write!(f, "{}", humantime::format_duration(*d)),
        }
    }
}

/// A UDP run: our server or someone else's, the load, and the observer's sampling.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct UdpRunPlan {
    /// Our server, started in this process (None: the target is someone else's).
    pub server: Option<ServerConfig>,
    /// The load (its target is replaced by the server's address when the server is ours).
    pub load: LoadConfig,
    /// Observer sampling interval.
    pub interval: Duration,
    /// A foreign target's process, for its network namespace, sockets and threads.
    pub target_pid: Option<u32>,
    /// Local port of the target's socket(s), when it differs from the target's port.
    pub watch_port: Option<u16>,
    /// Do not sample the kernel's drop reasons (`skb:kfree_skb`) during the run.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_drop_reasons: bool,
}

/// What a run record's run was: a UDP run (`load`, `run`, `diagnose`) or a watch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RunPlan {
    /// A UDP load, with or without our server.
    Udp(Box<UdpRunPlan>),
    /// `watch`: the observer alone.
    Watch(WatchPlan),
}

/// `watch`: which process or port, how often, how long.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct WatchPlan {
    /// The process watched (its sockets, threads and namespace).
    pub pid: Option<u32>,
    /// The local port watched.
    pub port: Option<u16>,
    /// Sampling interval.
    pub interval: Duration,
    /// How long to watch (Ctrl-C ends it earlier).
    pub duration: Duration,
    /// Do not sample the kernel's drop reasons (`skb:kfree_skb`) while watching.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_drop_reasons: bool,
}

impl WatchPlan {
    /// Checks the sampling interval and the length against [`crate::limits`] (labelled
    /// `--interval`, `--duration`), and that there is something to watch.
    pub fn validate(&self) -> Result<(), PlanError> {
        if self.pid.is_none() && self.port.is_none() {
            return Err(PlanError::Conflict(
                "watch needs --pid PID or --port PORT".into(),
            ));
        }
        SAMPLE_INTERVAL.check("--interval", self.interval)?;
        WATCH_DURATION.check("--duration", self.duration)?;
        Ok(())
    }
}

/// The mean rate of a load, datagrams per second, from `--rate` (None: not given, infinite
/// for `max`), `--burst` and `--burst-interval`: with an interval, `burst / interval`
/// (a `--rate` given as well must agree within half a datagram per second, else it would
/// be silently replaced); without, the rate given, or 10000. Errors: `--burst` out of
/// its limit, a zero interval, a mean above the rate limit, a rate that disagrees.
pub fn mean_rate(
    rate: Option<f64>,
    burst: u64,
    burst_interval: Option<Duration>,
) -> Result<f64, PlanError> {
    BURST.check("--burst", burst)?;
    let Some(iv) = burst_interval else {
        return Ok(rate.unwrap_or(10_000.0));
    };
    if iv.is_zero() {
        return Err(PlanError::Conflict(
            "--burst-interval 0: allowed a positive duration, e.g. 50ms".into(),
        ));
    }
    let implied = burst as f64 / iv.as_secs_f64();
    let iv_shown = humantime::format_duration(iv);
    if !implied.is_finite() || implied > MAX_RATE_PPS {
        return Err(PlanError::Conflict(format!(
            "--burst {burst} --burst-interval {iv_shown}: {implied:.0} pps mean; allowed up to {MAX_RATE_PPS:.0} pps"
        )));
    }
    // Within half a datagram per second: --rate 3333 agrees with 100 per 30ms.
    if let Some(r) = rate.filter(|r| (r - implied).abs() > 0.5f64.max(1e-6 * implied)) {
        return Err(PlanError::Conflict(format!(
            "--rate {} disagrees with --burst {burst} --burst-interval {iv_shown} ({} pps mean); give --rate with --burst, or --burst with --burst-interval",
            if r.is_infinite() { "max".to_string() } else { format!("{r}") },
            if implied.fract() == 0.0 {
                format!("{implied:.0}")
            } else {
                format!("{implied:.3}")
            }
        )));
    }
    Ok(implied)
}

impl ServerConfig {
    /// Checks every setting against [`crate::limits`]; errors are labelled with the
    /// command-line flag (`--threads`, `--batch`, `--rcvbuf`, `--work`, `--busy-poll`).
    pub fn validate(&self) -> Result<(), PlanError> {
        SERVER_THREADS.check("--threads", self.threads as u64)?;
        BATCH.check("--batch", self.batch as u64)?;
        if let Some(b) = self.rcvbuf {
            RCVBUF_BYTES.check("--rcvbuf", b)?;
        }
        WORK.check("--work", self.work)?;
        if let Some(us) = self.busy_poll_us {
            BUSY_POLL_US.check("--busy-poll", us as u64)?;
        }
        Ok(())
    }
}

impl LoadConfig {
    /// Checks every setting against [`crate::limits`] and against each other; errors are
    /// labelled with the command-line flag (`--rate`, `--burst`, `--size`, `--payload-file`,
    /// `--seq-field`, `--duration`, `--warmup`, `--drain`, `--load-threads`).
    pub fn validate(&self) -> Result<(), PlanError> {
        let r = self.rate_pps;
        let ok = r > 0.0 && (r.is_infinite() || r <= MAX_RATE_PPS);
        if !ok {
            return Err(PlanError::value(
                "--rate",
                r,
                format!("a rate above 0 up to {MAX_RATE_PPS:.0} pps, or max"),
            ));
        }
        BURST.check("--burst", self.burst)?;
        if self.is_max() && self.burst > 1 {
            return Err(PlanError::Conflict(
                "--rate max sends back to back: --burst does not apply".into(),
            ));
        }
        let given = match self.pacing_slack {
            PacingSlack::Auto => Duration::ZERO,
            PacingSlack::Given(d) => d,
        };
        PACING_SLACK.check("--pacing-slack", given)?;
        if self.is_max() && !given.is_zero() {
            return Err(PlanError::Conflict(
                "--rate max sends back to back: --pacing-slack does not apply".into(),
            ));
        }
        match &self.payload {
            None => {
                SIZE_BYTES.check("--size", self.size_bytes as u64)?;
            }
            Some(p) => {
                PAYLOAD_BYTES.check("--payload-file", p.len() as u64)?;
            }
        }
        if let Some((o, l)) = self.seq_field {
            let Some(p) = &self.payload else {
                return Err(PlanError::Conflict(
                    "--seq-field needs --payload-file (with tpslab's header, replies match by header)"
                        .into(),
                ));
            };
            if !seq_field_fits(o, l, p.len()) {
                return Err(PlanError::value(
                    "--seq-field",
                    format!("{o}:{l}"),
                    format!(
                        "OFFSET:LEN with LEN {}..={} inside the {}-byte payload",
                        SEQ_FIELD_BYTES.min,
                        SEQ_FIELD_BYTES.max,
                        p.len()
                    ),
                ));
            }
        }
        LOAD_DURATION.check("--duration", self.duration)?;
        WARMUP.check("--warmup", self.warmup)?;
        DRAIN.check("--drain", self.drain)?;
        LOAD_THREADS.check("--load-threads", self.threads as u64)?;
        if self.flows != 0 {
            FLOWS.check("--flows", self.flows as u64)?;
            if self.flows < self.threads {
                return Err(PlanError::Conflict(format!(
                    "--flows {} is fewer than the {} sender threads: each thread sends from at least one source port",
                    self.flows, self.threads
                )));
            }
        }
        Ok(())
    }
}

mod json_forms;
use json_forms::{hex_bytes, is_zero_usize, pacing_slack, rate_or_max};

#[cfg(test)]
#[path = "udp_tests.rs"]
mod tests;
