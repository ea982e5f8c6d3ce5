//! A UDP run's body ([`RunRecord`], the kinds `udp_run` and `watch`): the plan, the host,
//! the generator's and the server's counts, the observer's series, the ledger, and what a
//! fleet's agent or a merge adds.

use crate::ledger::{Ledger, LedgerInputs};
use crate::stats::{LatencySummary, Summary};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A complete run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RunRecord {
    /// tpslab version that wrote the record.
    pub tool_version: String,
    /// The command line.
    pub argv: Vec<String>,
    /// Wall-clock start, milliseconds since the Unix epoch.
    pub started_unix_ms: u64,
    /// Length of the run, seconds (monotonic clock).
    pub elapsed_s: f64,
    /// True when the run was ended by SIGINT/SIGTERM before its planned end.
    pub interrupted: bool,
    /// The validated plan as run (the load's target is our server's address when the
    /// server is ours). None in records written before plans were typed (read back
    /// leniently: their untyped plan is dropped).
    #[serde(default)]
    pub plan: Option<tpslab_plan::udp::RunPlan>,
    /// Host facts.
    pub environment: Environment,
    /// Reference server counts (when the server is ours and in this process).
    pub server: Option<ServerReport>,
    /// Generator counts and latencies.
    pub generator: Option<GeneratorReport>,
    /// Kernel observations.
    pub observer: Option<ObserverReport>,
    /// Where every datagram went.
    pub ledger: Option<Ledger>,
    /// Notes for the reader (e.g. caveats on derived counts).
    pub notes: Vec<String>,
    /// Peak resident memory of the tpslab process at the end of the run, KiB
    /// (/proc/self/status VmHWM).
    #[serde(default)]
    pub peak_rss_kib: Option<u64>,
    /// The process behind a target that is not tpslab's (load/diagnose --pid).
    #[serde(default)]
    pub target: Option<TargetProcess>,
    /// The kernel's drops by reason during the run (`skb:kfree_skb`), or why they were
    /// not read. Left out of records that do not have them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drop_reasons: Option<DropReasons>,
    /// This run's place in a fleet (`tpslab agent`); left out otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentInfo>,
    /// The ledger's inputs (counter deltas over the run), kept in records meant to be
    /// merged (agents'), so `merge` can add them up; left out otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ledger_inputs: Option<LedgerInputs>,
    /// A record made by `tpslab merge` from agents' records: each agent's figures beside
    /// the total; left out otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged: Option<crate::merge::MergeInfo>,
}

/// An agent's place in a fleet and how its start went.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct AgentInfo {
    /// This agent, 0..of.
    pub index: usize,
    /// Agents in the fleet.
    pub of: usize,
    /// SHA-256 of the fleet plan's settings ([`tpslab_plan::fleet::FleetPlan::hash`]).
    pub plan_hash: String,
    /// The fleet plan.
    pub plan: tpslab_plan::fleet::FleetPlan,
    /// The common start, milliseconds since the Unix epoch (`--start-at`).
    pub start_at_unix_ms: u64,
    /// When this agent's load began, by its wall clock, relative to the common start,
    /// microseconds (the engine starts its first send 5 ms after this).
    pub start_error_us: i64,
    /// What its kernel said of its wall clock at the start (adjtimex); None when unknown.
    pub clock: Option<tpslab_net::ClockStatus>,
}

/// Packets the kernel dropped during a run, by reason: every `skb:kfree_skb` event,
/// sampled on every CPU. Host-wide (the tracepoint sees every network namespace), while
/// the ledger's counters belong to the run's namespaces: a reason's count is at least the
/// ledger row it matches, more when something else on the host dropped for that reason.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DropReasons {
    /// Drops by reason (the kernel's names, `SOCKET_RCVBUFF`), largest first.
    pub by_reason: Vec<(String, u64)>,
    /// Samples the kernel could not write (a ring was full): drops not in `by_reason`.
    pub lost: u64,
    /// Why no reasons were read (not root, no tracefs, a kernel before 5.17), if so.
    pub unavailable: Option<String>,
    /// Where in the kernel the drops happened: (reason, `function+0xoffset` from the
    /// event's `location` named through /proc/kallsyms, drops), largest first, at most
    /// [`DropReasons::MAX_SITES`]. Empty when the addresses are hidden (no CAP_SYSLOG).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub by_site: Vec<(String, String, u64)>,
}

impl DropReasons {
    /// Drop sites kept in a record.
    pub const MAX_SITES: usize = 12;
}

/// A foreign server process, as found at the start of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TargetProcess {
    /// Its PID.
    pub pid: u32,
    /// Its executable (/proc/PID/exe).
    pub exe: String,
    /// Its runtime (from the executable's name, its mapped libraries, Go's build info).
    pub runtime: crate::runtime::Runtime,
    /// Threads when the run started (/proc/PID/task).
    pub threads: usize,
    /// Whether its reads and sends were counted exactly on its threads (tracepoints).
    pub exact_counts: bool,
    /// How tpslab found it when the user gave no `--pid` ("found by its UDP socket on
    /// 127.0.0.1:9500"), or the other processes that hold its socket; None: the `--pid`
    /// given, alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub found_by: Option<String>,
    /// Other processes holding the target's socket(s) (pre-forked workers, one
    /// SO_REUSEPORT group across processes): their threads are followed too, their reads
    /// counted with this one's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub others: Vec<u32>,
}

/// Facts about the host the run happened on.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Environment {
    /// `uname -r`.
    pub kernel: String,
    /// Host name.
    pub hostname: String,
    /// Online CPUs.
    pub cpus: usize,
    /// Relevant sysctls read from /proc/sys (name -> value).
    pub sysctls: BTreeMap<String, String>,
    /// Network namespace of the run (`readlink /proc/self/ns/net`).
    pub netns: String,
    /// The running kernel's identity (/proc/sys/kernel/random/boot_id): records with the
    /// same one share host-wide counters (softnet), whatever their host names.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub boot_id: String,
}

/// Counts of the reference server over the run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ServerReport {
    /// Bound address.
    pub bind: String,
    /// Mode: replace, echo or sink.
    pub mode: String,
    /// Receive threads (one SO_REUSEPORT socket each).
    pub threads: usize,
    /// recvmmsg batch (1: recvfrom).
    pub batch: usize,
    /// Extra busy work per datagram, ns.
    pub work_ns: u64,
    /// Requested SO_RCVBUF, bytes (None: net.core.rmem_default).
    pub rcvbuf_requested_bytes: Option<u64>,
    /// getsockopt(SO_RCVBUF) of the sockets, bytes (the doubled, capped value).
    pub rcvbuf_granted_bytes: u64,
    /// Whether SO_RCVBUFFORCE was used.
    pub rcvbuf_forced: bool,
    /// CPUs the threads were pinned to (empty: not pinned).
    pub cpus: Vec<usize>,
    /// Scheduling policy of the threads ("other", "fifo:N", "rr:N").
    pub sched: String,
    /// SO_BUSY_POLL of the sockets, us (None: not set).
    #[serde(default)]
    pub busy_poll_us: Option<u32>,
    /// UDP_GRO on the sockets (coalesced datagrams counted one by one).
    #[serde(default)]
    pub gro: bool,
    /// Inodes of the server sockets (as in /proc/net/udp).
    pub socket_inodes: Vec<u64>,
    /// Kernel thread ids of the server threads.
    pub tids: Vec<u32>,
    /// Datagrams read by the application (server's count).
    pub received: u64,
    /// Bytes read.
    pub received_bytes: u64,
    /// Datagrams longer than the receive slot (truncated on read).
    pub truncated: u64,
    /// Replies the kernel accepted.
    pub answered: u64,
    /// Replies the kernel refused, with their errno names.
    pub reply_failed: u64,
    /// errno name -> count of refused replies.
    pub reply_errors: BTreeMap<String, u64>,
    /// Per-thread datagrams read, in thread order.
    pub received_per_thread: Vec<u64>,
    /// How datagrams were spread over the threads' SO_REUSEPORT sockets (absent: hash,
    /// the kernel's per-flow hash).
    #[serde(default, skip_serializing_if = "tpslab_plan::udp::Steer::is_hash")]
    pub reuseport_steer: tpslab_plan::udp::Steer,
}

use tpslab_plan::udp::MatchMode;

/// Generator counts, latencies and self-validation.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct GeneratorReport {
    /// Target address.
    pub target: String,
    /// Mean target rate, datagrams per second (0 with `rate_max`).
    pub rate_pps: f64,
    /// `--rate max`: as fast as the path allows; see `achieved_pps`.
    #[serde(default)]
    pub rate_max: bool,
    /// Sends used UDP GSO (asked for with --gso and accepted by the kernel).
    #[serde(default)]
    pub gso: bool,
    /// A GSO send was refused (EIO/EINVAL) during the run: GSO was turned off for the rest.
    #[serde(default)]
    pub gso_fallback: bool,
    /// Most datagrams one send message carried that the kernel took (GSO: up to 64; 1
    /// without; 0: nothing sent or an older record). A receiver reading with UDP_GRO
    /// gets such a message as one buffer, and its socket counts a drop of it as one in
    /// /proc/net/udp `drops` and `Udp: RcvbufErrors`.
    #[serde(default, skip_serializing_if = "crate::is_zero")]
    pub max_segments_per_send: u64,
    /// Datagram size, bytes (UDP payload).
    pub size_bytes: usize,
    /// Datagrams sent back-to-back per burst (1: evenly paced).
    pub burst: u64,
    /// Interval between burst starts, ns.
    pub burst_interval_ns: u64,
    /// Pacing slack, ns (`--pacing-slack`): the sender woke once per group of datagrams
    /// due within it, each leaving up to this late; 0: once per datagram.
    #[serde(default, skip_serializing_if = "crate::is_zero")]
    pub pacing_slack_ns: u64,
    /// The slack was chosen from the rate (`--pacing-slack auto`, the default since
    /// session 21), not given: `pacing_slack_ns` is what auto chose (0: exact). False in
    /// records written before (their slack was given). The lag it achieved is
    /// `schedule_lag`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pacing_slack_auto: bool,
    /// Sender threads.
    pub threads: usize,
    /// Flows: distinct source ports the load was sent from (one socket each, dealt to
    /// the threads; `--flows`); 0 in records written before flows: one per thread.
    #[serde(default, skip_serializing_if = "crate::is_zero")]
    pub flows: usize,
    /// Planned measurement window after warm-up, s.
    pub duration_s: f64,
    /// Warm-up excluded from the figures, s.
    pub warmup_s: f64,
    /// How replies are matched.
    pub match_mode: MatchMode,
    /// Datagrams in the plan (whole run, warm-up included).
    pub planned: u64,
    /// Planned datagrams never attempted: the run was interrupted, or the generator fell
    /// behind and reached the planned end (plus 100 ms) first.
    pub not_sent: u64,
    /// Datagrams the generator tried to send (whole run, warm-up included).
    pub attempted: u64,
    /// Datagrams the kernel accepted.
    pub sent: u64,
    /// Datagrams the kernel refused.
    pub send_failed: u64,
    /// errno name -> count of refused sends.
    pub send_errors: BTreeMap<String, u64>,
    /// Datagrams read by the reply receivers (all of them).
    pub replies_read: u64,
    /// Replies that matched a request of this run.
    pub replies_matched: u64,
    /// Reply datagrams per answered request (replies read / requests answered); above 1
    /// for a server that answers in several datagrams (frames), or when replies are
    /// duplicated on the way.
    #[serde(default)]
    pub replies_per_request: Option<f64>,
    /// Replies to a request already answered.
    pub duplicates: u64,
    /// Replies that arrived after a reply to a later request.
    pub reordered: u64,
    /// Replies that matched nothing (foreign, corrupt, other run).
    pub unmatched: u64,
    /// Measurement window: datagrams sent whose intended time falls after warm-up.
    pub window_sent: u64,
    /// Measurement window: of those, answered.
    pub window_answered: u64,
    /// Measurement window: loss, % of window_sent not answered (None without replies).
    pub window_loss_pct: Option<f64>,
    /// Achieved send rate, pps: attempted / (last send call - first intended send time).
    pub achieved_pps: f64,
    /// Measurement window: answered per second (TPS).
    pub tps: f64,
    /// Latency from the intended send time (coordinated omission corrected).
    pub latency_intended: LatencySummary,
    /// Latency from the actual send time (what a closed-loop tool would report).
    pub latency_actual: LatencySummary,
    /// Replies timed by the kernel's receive timestamp (SO_TIMESTAMPNS) rather than by
    /// the receiving thread's clock after it woke up; both latencies end there.
    #[serde(default)]
    pub rx_kernel_timestamps: u64,
    /// Latency from the actual send time to the receiving thread's clock after it woke
    /// up: what a tool without kernel timestamps (sockperf, iperf3) reports; the
    /// difference from `latency_actual` is the generator's own wake-up delay.
    #[serde(default)]
    pub latency_wakeup: LatencySummary,
    /// Schedule lag: actual minus intended send time, datagrams of the window.
    pub schedule_lag: LatencySummary,
    /// Inodes of the generator sockets.
    pub socket_inodes: Vec<u64>,
    /// Whether the generator kept its schedule and lost nothing itself.
    pub valid: bool,
    /// Why the run is not valid evidence against the server.
    pub invalid_reasons: Vec<String>,
    /// The latency histograms themselves (kept when asked: an agent's record, or
    /// `--metrics-file`), so they can be merged or bucketed without loss.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub histograms: Option<LatencyHistograms>,
    /// Replies of several datagrams counted by their frame header (memcached's UDP
    /// frames: request id, sequence number, total datagrams); None when the replies carry
    /// no frame header tpslab knows (each datagram read is a reply). With frames,
    /// `replies_matched`, `window_answered` and the latencies count complete replies
    /// only (the latency ends at the last frame).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frames: Option<ReplyFrames>,
}

/// Replies counted frame by frame (whole run, warm-up included): a reply is answered
/// when all the datagrams its frame header announces arrived.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ReplyFrames {
    /// The frame header read ("memcached").
    pub header: String,
    /// Requests whose reply arrived whole: every frame of its total.
    pub replies_complete: u64,
    /// Requests of which some frames arrived but not all (by the end of the drain).
    pub replies_incomplete: u64,
    /// Distinct frames read of those replies (a frame read twice counts once; the
    /// second is in `duplicates`).
    pub frames_received: u64,
    /// Frames those replies announced: the sum of their total datagrams.
    pub frames_expected: u64,
    /// Datagrams answering a request whose frame header does not fit: a sequence number
    /// at or past the total (memcached numbers a frame it sends again after a failed
    /// send anew, so its reply cannot be put together), or shorter than the header.
    /// Not in `frames_received`, `duplicates` or `unmatched`.
    #[serde(default)]
    pub frames_misnumbered: u64,
}

/// Latency histograms of a run (ns, 1 ns to 100 s, 3 significant digits), each in
/// HdrHistogram's portable encoding (V2, deflate-compressed, base64: see
/// [`crate::histogram::encode_histogram`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct LatencyHistograms {
    /// From the intended send time.
    pub intended: String,
    /// From the actual send time.
    pub actual: String,
}

/// A time series sampled by the observer: `t_ms[i]` is the time of sample i since the
/// start of observation; every other vector has the same length.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Series {
    /// Milliseconds since the observer started (at most 20 000 samples: a longer list is
    /// refused, `tpslab_plan::limits::OBSERVER_SAMPLES`).
    #[serde(deserialize_with = "crate::read::series_times")]
    pub t_ms: Vec<f64>,
    /// Named series -> values (unit in the name: `_bytes`, `_pps`, `_pct`, `_per_s`); at
    /// most 64 names of at most 20 000 values (`tpslab_plan::limits::OBSERVER_SERIES`,
    /// `OBSERVER_SAMPLES`).
    #[serde(deserialize_with = "crate::read::series_values")]
    pub values: BTreeMap<String, Vec<f64>>,
}

/// A watched TCP server's listen sockets, as the observer saw them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TcpListen {
    /// Each listen socket of the process.
    pub sockets: Vec<ListenSocket>,
    /// net.core.somaxconn in the server's network namespace (the cap on any backlog).
    pub somaxconn: Option<u64>,
}

/// One listen socket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ListenSocket {
    /// Its local address.
    pub local: String,
    /// Its backlog limit, connections (sock_diag `idiag_wqueue` of a listener:
    /// min(listen()'s backlog, somaxconn)); None when sock_diag did not say.
    pub backlog: Option<u32>,
    /// Most connections seen waiting in its accept queue (`<net_root>/net/tcp{,6}`
    /// rx_queue of the listener, every 100 ms).
    pub accept_queue_max: u64,
}

/// One socket of a target's SO_REUSEPORT group over a run (the kernel hashes each flow to
/// one socket of the group: a few flows can leave sockets idle while others drop).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TargetSocket {
    /// Its inode (as in /proc/net/udp).
    pub inode: u64,
    /// Its local address (/proc/net/udp `local_address`: `0.0.0.0:5300`, `[::]:5300`);
    /// None in records written before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local: Option<String>,
    /// Datagrams it dropped during the run (its `drops` column, last minus first sample).
    pub drops: u64,
    /// The deepest receive queue sampled, bytes (`rx_queue`).
    pub rx_queue_max_bytes: u64,
    /// Its own SO_RCVBUF limit (sock_diag SK_MEMINFO_RCVBUF), bytes: by a lookup for a
    /// socket alone on its address, from a UDP dump for each member of a group (they
    /// share their address); None when sock_diag could not be used (no netlink access)
    /// or did not list it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rcvbuf_bytes: Option<u64>,
    /// The processes holding it (PIDs whose `/proc/PID/fd` links to `socket:[INODE]`,
    /// scanned at the run's end); empty when not searched (tpslab's own server, or a
    /// server whose reads were not counted).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub holders: Vec<u32>,
    /// Its readers: the threads of the processes that hold this socket and no other of
    /// the group (a pre-forked worker's), each with the UDP datagrams it read (the
    /// exact per-thread tracepoint counts); threads that read nothing are left out. For a
    /// process holding several of the group's sockets (a thread per socket), the
    /// threads seen waiting to read this one ([`SocketReader::seen`]). Empty when its
    /// readers cannot be told apart (a reading thread of such a process whose socket
    /// was never seen, beside others) or reads were not counted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub readers: Vec<SocketReader>,
}

/// A thread that read one socket of a SO_REUSEPORT group, and what it read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SocketReader {
    /// Its process (the PID holding the socket).
    pub pid: u32,
    /// The thread.
    pub tid: u32,
    /// UDP datagrams it read over the run (tracepoint `sock:sock_recv_length`, UDP,
    /// counted on the thread with perf_event_open).
    pub reads: u64,
    /// How it is known to read this socket when its process holds several of the
    /// group's: the thread samples that saw it waiting to read this socket (blocked in a
    /// receive or read on it, or in an epoll wait on an epoll watching it alone); 0 for
    /// a process holding this socket alone, or for the one reading thread left with no
    /// socket seen, given the one socket of its process left with no reader.
    #[serde(default, skip_serializing_if = "crate::is_zero")]
    pub seen: u64,
}

/// Observations of the kernel over the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ObserverReport {
    /// Sampling interval, ms.
    pub interval_ms: f64,
    /// Samples taken.
    pub samples: usize,
    /// Where each series comes from (series name -> source).
    pub sources: BTreeMap<String, String>,
    /// The sampled series.
    pub series: Series,
    /// Summary of each series.
    pub summaries: BTreeMap<String, Summary>,
    /// Counter deltas first -> last sample (name -> delta).
    pub deltas: BTreeMap<String, u64>,
    /// Per-CPU utilisation over the run, % of that CPU: cpuN -> {user, system, softirq, busy}.
    pub cpu_pct: BTreeMap<String, BTreeMap<String, f64>>,
    /// Target process: scheduling policy per thread ("tid:policy") and affinity list.
    pub target_sched: Vec<String>,
    /// SO_RCVBUF limit of each target socket (sk_rcvbuf from sock_diag), bytes.
    #[serde(default)]
    pub target_rcvbuf_bytes: Vec<u64>,
    /// Threads of the target that read UDP datagrams during the run (exact counts only).
    #[serde(default)]
    pub target_reader_threads: Option<usize>,
    /// Each socket of the target's SO_REUSEPORT group (two or more sockets on the port;
    /// empty with one): its drops and deepest receive queue over the run, by inode, in
    /// inode order (`<net_root>/net/udp{,6}` `drops` and `rx_queue` at every sample).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub target_sockets: Vec<TargetSocket>,
    /// Where the target process's threads spent the run (each thread's state, system call
    /// and wait channel, sampled with the host-wide counters: every 100 ms or the
    /// interval when longer); None without a target process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_waits: Option<crate::waits::ThreadWaits>,
    /// The watched process's TCP listen sockets and their limits; None without TCP
    /// sockets to follow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_listen: Option<TcpListen>,
    /// How the sampling was bounded or otherwise qualified (e.g. thinned on a long run).
    #[serde(default)]
    pub notes: Vec<String>,
    /// Sample errors (file that could not be read and why), deduplicated.
    pub errors: Vec<String>,
}
