//! A diagnosis as a record holds it: the facts read from a run ([`Facts`]), the case the
//! rules named, its evidence, recommendations and the fix to verify ([`Diagnosis`]).
//! Reading the facts and applying the rules is `tpslab_analysis::verdict`.

use crate::buffer::BufferNeed;
use serde::{Deserialize, Serialize};

/// The diagnosed case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Case {
    /// The generator could not keep its schedule or lost replies itself.
    GeneratorInvalid,
    /// The ledger does not balance: a count includes traffic that is not this run's.
    Inconsistent,
    /// Nothing listened on the target port (Udp: NoPorts).
    NoListener,
    /// Nothing was lost.
    NoLoss,
    /// Most datagrams found no socket on the port, while the server answered others: it
    /// closed its socket or exited during the run.
    ListenerGone,
    /// The socket receive buffer overflowed on bursts while the application keeps up on
    /// average.
    SocketBufferBursts,
    /// The application is too slow for the mean rate: the queue is pinned at its limit.
    AppTooSlow,
    /// Drops at some sockets of the server's SO_REUSEPORT group while others had room:
    /// a few flows hashed to a few sockets (uneven hashing: the shares of the datagrams
    /// are uneven), or one socket's reader drains less than the others while its share is
    /// no larger (a slow reader: that worker is the fix). Which one is in the layer and
    /// the evidence (`tpslab_analysis::reuseport::Kind`).
    ReuseportImbalance,
    /// The socket receive buffer overflowed, and the server's reads were not counted:
    /// whether it keeps up on average (bursts or stalls: more buffer helps) or not (too
    /// slow: it does not) cannot be told.
    SocketBufferUnjudged,
    /// The per-CPU softnet backlog overflowed (net.core.netdev_max_backlog).
    SoftnetBacklog,
    /// The NIC dropped (/proc/net/dev).
    NicDrops,
    /// The kernel dropped for a reason no counter covers (a firewall rule, no route, a
    /// bad checksum, a qdisc: `skb:kfree_skb`'s reason).
    KernelDrop,
    /// The server failed to send replies.
    ReplySendFailed,
    /// The server read datagrams and did not answer them.
    NotAnswered,
    /// Loss that no counter explains.
    Unexplained,
    /// A capacity step over TCP or HTTP: connection requests were dropped at the server's
    /// full accept queue (TcpExt ListenOverflows/ListenDrops).
    AcceptQueueFull,
    /// A capacity step over TCP or HTTP: connects were refused.
    ConnectionsRefused,
    /// A capacity step over TCP or HTTP: connections were reset (or written after the
    /// server closed them).
    ConnectionsReset,
    /// A capacity step over TCP or HTTP: a server thread wanted a CPU all the window (on
    /// one, or waiting for one).
    ServerSaturated,
    /// A capacity step over TCP or HTTP: the server's threads were off CPU most of the
    /// window (waiting: a lock, a sleep, I/O).
    ServerWaiting,
    /// A capacity step over HTTP/3: the server's QUIC socket on this host dropped client
    /// datagrams at its receive buffer (each a packet QUIC must detect lost and send
    /// again).
    QuicReceiveBuffer,
}

/// One piece of evidence with its source.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Evidence {
    /// What was seen.
    pub text: String,
    /// Where it comes from.
    pub source: String,
}

/// A concrete change with its reason.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Recommendation {
    /// What to change.
    pub what: String,
    /// Why it helps (or why something else will not).
    pub why: String,
    /// Exact lines to run or write (sysctl -w, setsockopt, sysctl.d snippet, tpslab flags).
    pub lines: Vec<String>,
}

/// Settings to apply in a verification run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Fix {
    /// SO_RCVBUF request for the server socket(s), bytes.
    pub rcvbuf: Option<u64>,
    /// Server threads.
    pub threads: Option<usize>,
    /// recvmmsg batch.
    pub batch: Option<usize>,
    /// Host sysctls (name, value).
    pub sysctls: Vec<(String, String)>,
}

/// The verdict of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Diagnosis {
    /// The case.
    pub case: Case,
    /// The layer in plain words.
    pub layer: String,
    /// One sentence.
    pub headline: String,
    /// Figures behind it.
    pub evidence: Vec<Evidence>,
    /// What to change.
    pub recommendations: Vec<Recommendation>,
    /// The buffer arithmetic, when the socket buffer is involved.
    pub buffer: Option<BufferNeed>,
    /// Explanation of requested / granted / charged sizes from the probe.
    pub buffer_notes: Vec<String>,
    /// What to apply for `--verify` (None: nothing to apply).
    pub fix: Option<Fix>,
    /// Background shown only with `--explain` (e.g. S2's queue riddle for a foreign server).
    #[serde(default)]
    pub explain_notes: Vec<String>,
}

/// Numbers the rules look at, each from a named source (read from a run record by
/// `tpslab_analysis::verdict::facts_of`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Facts {
    /// Generator valid (kept its schedule, lost nothing itself).
    pub gen_valid: bool,
    /// Why not.
    pub gen_reasons: Vec<String>,
    /// Request path: datagrams attempted.
    pub attempted: u64,
    /// Request path: read by the server.
    pub delivered: u64,
    /// Request path: socket buffer drops (per-socket `drops`).
    pub socket_drops: u64,
    /// Request path: softnet backlog drops.
    pub softnet_drops: u64,
    /// NIC drops (both paths).
    pub nic_drops: u64,
    /// Udp: NoPorts.
    pub no_ports: u64,
    /// Generator send failures.
    pub send_failed: u64,
    /// Request path unattributed (None: unknown).
    pub unattributed: Option<i64>,
    /// Reply path: replies the server failed to send.
    pub reply_failed: u64,
    /// Reply path: softnet drops.
    pub reply_softnet_drops: u64,
    /// Reply path: read by the server but not answered.
    pub not_answered: u64,
    /// Reply path unattributed (None: unknown or no reply path).
    pub reply_unattributed: Option<i64>,
    /// Replies the generator read (all).
    pub replies_read: u64,
    /// Loss in the measurement window, % (None without replies).
    pub window_loss_pct: Option<f64>,
    /// Whether replies were expected.
    pub replies: bool,
    /// Total datagrams lost on both paths (all layers + unattributed).
    pub lost_total: u64,
    /// Socket buffer limit (granted), bytes; None when unknown (a server not ours).
    pub limit_bytes: Option<u64>,
    /// rx_queue of the server socket(s): max, mean, bytes.
    pub rxq_max_bytes: f64,
    /// Mean rx_queue, bytes.
    pub rxq_mean_bytes: f64,
    /// Share of samples with the queue at 75 % of its limit or more (0..1).
    pub rxq_share_full: f64,
    /// Share of samples with the queue below 10 % of its limit (drained) (0..1).
    pub rxq_share_low: f64,
    /// Server threads' CPU, mean % of one CPU (schedstat).
    pub server_cpu_mean_pct: f64,
    /// Datagrams the server can read per second of CPU time, times its usable threads.
    pub capacity_pps: Option<f64>,
    /// What the server's threads read per second of CPU they used, times the threads that
    /// can run at once: its capacity at full CPU, whatever the scheduler gave it (reads
    /// over the run / on-CPU time from /proc/PID/task/TID/schedstat).
    #[serde(default)]
    pub cpu_capacity_pps: Option<f64>,
    /// Mean offered rate, pps.
    pub offered_pps: f64,
    /// Datagrams per burst.
    pub burst: u64,
    /// Seconds between bursts.
    pub burst_interval_s: f64,
    /// Most datagrams dropped at the server socket within one burst interval (or 100 ms
    /// when paced), from the per-sample drops series; at most the burst
    /// (`tpslab_analysis::buffer::peak_burst_drops`).
    pub peak_drops_window: u64,
    /// What the window of samples counted when it was more than the burst (drops of two
    /// bursts), before the cap; None when not capped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_drops_window_uncapped: Option<u64>,
    /// Datagram size, bytes.
    pub size_bytes: u64,
    /// Measured truesize per datagram, bytes (probe).
    pub truesize_bytes: Option<u64>,
    /// The server is tpslab's reference server.
    pub ours: bool,
    /// Server threads.
    pub threads: usize,
    /// Server recvmmsg batch.
    pub batch: usize,
    /// CPUs of the host.
    pub cpus: usize,
    /// net.core.rmem_max, bytes.
    pub rmem_max: Option<u64>,
    /// net.core.rmem_default, bytes.
    pub rmem_default: Option<u64>,
    /// net.core.netdev_max_backlog, packets.
    pub netdev_max_backlog: Option<u64>,
    /// Target port.
    pub port: u16,
    /// The load's target as the generator wrote it (`127.0.0.1:9500`, `[::1]:9500`), for
    /// command lines; empty when unknown.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub target: String,
    /// A foreign server's PID (the record's target process), for command lines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// That process had one thread when the run started (its PID is the thread that
    /// reads: `taskset`/`chrt` lines can name it).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pid_single_thread: bool,
    /// Why the ledger does not balance (None: it does, or its balance is unknown).
    #[serde(default)]
    pub inconsistent: Option<String>,
    /// Datagrams the server read per second while datagrams waited in its queue (the
    /// queue non-empty at both ends of a sampling interval); None when it never
    /// waited long enough (50 ms) or the reads were not counted per interval.
    #[serde(default)]
    pub drain_pps: Option<f64>,
    /// The server threads' CPU, % of one CPU, over those same intervals.
    #[serde(default)]
    pub backlog_cpu_pct: Option<f64>,
    /// The server threads' time runnable but waiting for a CPU (schedstat run-queue
    /// wait), % of one CPU, over those same intervals: other processes took its CPU.
    #[serde(default)]
    pub backlog_runq_pct: Option<f64>,
    /// Seconds during which datagrams waited in the server's queue.
    #[serde(default)]
    pub backlog_s: f64,
    /// A foreign server's runtime (for the line that sets its buffer).
    #[serde(default)]
    pub runtime: Option<crate::runtime::Runtime>,
    /// The server sockets' SO_RCVBUF limits (sk_rcvbuf) from sock_diag, bytes, one per
    /// socket (SO_REUSEPORT servers have several).
    #[serde(default)]
    pub sk_rcvbufs: Vec<u64>,
    /// A foreign server's threads that read UDP datagrams (exact counts only).
    #[serde(default)]
    pub reader_threads: Option<usize>,
    /// A foreign server's reads and replies were counted exactly on its threads.
    #[serde(default)]
    pub exact_server: bool,
    /// Why the server's reads were not counted exactly (a foreign server not found on
    /// this host, its threads not countable as this user or on this kernel); None when
    /// they were (tpslab's own server, or a foreign one counted on its threads). Without
    /// them no verdict says whether the server keeps up with the mean rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reads_unknown: Option<String>,
    /// Datagrams the ledger charged to kernel drop reasons no counter covers (rows
    /// `kernel:REASON`): (reason, on the request path, on the reply path), largest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kernel_drops: Vec<(String, u64, u64)>,
    /// Reply path: datagrams the server attempted (the ledger's reply path `attempted`:
    /// every frame of a multi-datagram reply, resends included).
    #[serde(default, skip_serializing_if = "crate::is_zero")]
    pub reply_attempted: u64,
    /// Replies counted by their frame header (the generator's `frames`); None when each
    /// reply datagram is a reply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frames: Option<crate::run::ReplyFrames>,
    /// A firewall drop reason (`skb:kfree_skb`, host-wide) seen during the run at least
    /// as often as the server's reply sends failed: (reason, drops). A netfilter rule on
    /// the sending side makes the send call fail (EPERM), so these drops are the failed
    /// sends' cause, not loss of their own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sends_refused_by: Option<(String, u64)>,
    /// Where the server's threads spent the run, in one sentence (the observer's thread
    /// samples: `tpslab_analysis::waits::headline`); None when not
    /// sampled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waits_headline: Option<String>,
    /// The blocking wait, other than for the network (where an idle server waits for
    /// datagrams), that took the largest share of the threads' time, when 15 % or more:
    /// (what it waited on, "disk I/O (in fsync)", share %).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocked_on: Option<(String, f64)>,
    /// Sockets on the target's address and port the observer followed during the run
    /// (observer delta `server_sockets_found`): more than one is a SO_REUSEPORT group (our
    /// server's threads, or a server such as named that opens one per worker); 0 when
    /// none was found.
    #[serde(default)]
    pub server_sockets: usize,
    /// The target's SO_REUSEPORT group socket by socket (two or more; empty with one):
    /// what each read (tpslab's own server: its thread's count; a foreign server: its
    /// worker's threads' exact count), dropped and queued, and who read it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub group: Vec<GroupSocket>,
    /// Flows the generator sent (one per sending socket: its source port); None when not
    /// known. SO_REUSEPORT hashes each flow to one socket of a group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flows: Option<usize>,
    /// How tpslab's server spread datagrams over its group (`--reuseport-steer`; hash,
    /// the kernel's, for a foreign server, whose own BPF program tpslab cannot see).
    #[serde(default, skip_serializing_if = "Steer::is_hash")]
    pub steer: Steer,
}

use tpslab_plan::udp::Steer;

/// One socket of a SO_REUSEPORT group, as the verdict sees it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct GroupSocket {
    /// Datagrams its reader read (tpslab's server counts per thread, one socket each);
    /// None for a foreign server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reads: Option<u64>,
    /// Datagrams it dropped (its `drops` column over the run).
    pub drops: u64,
    /// Its deepest receive queue sampled, bytes.
    pub rx_queue_max_bytes: u64,
    /// Its SO_RCVBUF limit, bytes, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rcvbuf_bytes: Option<u64>,
    /// Its inode (as in /proc/net/udp); 0 in records written before it.
    #[serde(default, skip_serializing_if = "crate::is_zero")]
    pub inode: u64,
    /// Who read it and where that reader waited: a foreign server's worker process that
    /// holds this socket alone (its threads' exact reads and sampled waits); None when
    /// its readers could not be told apart (tpslab's own server: its threads are alike
    /// by construction).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reader: Option<GroupReader>,
}

/// The reader of one socket of a SO_REUSEPORT group: the process (or processes) holding
/// it alone, and their threads' states over the run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct GroupReader {
    /// The processes whose threads read it (PIDs).
    pub pids: Vec<u32>,
    /// Their name (`comm` of the first reading thread).
    pub comm: String,
    /// The reading threads' samples together (the observer's thread samples: state,
    /// system call and wchan every 100 ms; schedstat's time on a CPU and runnable);
    /// None when the threads were not sampled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub states: Option<crate::waits::ThreadStates>,
    /// The reading threads (TIDs) when their process holds other sockets of the group
    /// too (one process, a thread per socket): the reader is those threads, not the
    /// process. Empty for a process holding this socket alone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tids: Vec<u32>,
    /// The socket they read (its inode), with `tids`.
    #[serde(default, skip_serializing_if = "crate::is_zero")]
    pub inode: u64,
}
