//! A closed-loop ramp's plan and record (`tpslab ramp`), and its judgement as stored
//! ([`RampAnalysis`]: a pure function of the record, `tpslab_analysis::ramp::analyse`).

use crate::stats::LatencySummary;
use crate::usl::{LittleCheck, UslFit};
use crate::waits::ThreadStates;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The plan of a ramp and its protocol: defined with every other plan in `tpslab_plan`
/// (where `RampPlan::validate` checks it), embedded in the record as it ran.
use tpslab_plan::ramp::RampPlan;

/// One step's results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct StepResult {
    /// Concurrent users.
    pub users: usize,
    /// Length of the measured window, seconds.
    pub measured_s: f64,
    /// Replies received in the window.
    pub completed: u64,
    /// completed / measured_s.
    pub tps: f64,
    /// Response time (request written to reply read), ns.
    pub response: LatencySummary,
    /// Failures in the window by kind ("timeout", "connect: ...", "closed by peer", ...).
    pub errors: BTreeMap<String, u64>,
    /// Server CPU over the window, cores: the PID's and its descendants' (a prefork
    /// server's master and workers; utime+stime+cutime+cstime of each /proc/PID/stat,
    /// the tree read at the window's edges: a worker that ended and was waited for in it
    /// counts in its parent's cutime+cstime), per second between the two reads. None
    /// without --pid, or when the two reads were less than half the window apart (the
    /// ramp's own thread late past the window on a busy host).
    pub server_cpu_cores: Option<f64>,
    /// Server thread states over the window: every thread of the PID and its
    /// descendants.
    pub threads: Option<ThreadStates>,
    /// TCP counters of the server's network namespace over the window (/proc/PID/net/snmp
    /// `Tcp:` and .../netstat `TcpExt:` deltas): connection requests dropped at a full
    /// accept queue and the like. None for UDP, or a remote server without --pid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<tpslab_proc::netstat::TcpCounters>,
    /// Most connections seen waiting for accept in the listen socket(s) serving the
    /// target (its port, its address or a wildcard; sock_diag idiag_rqueue of the
    /// listeners together, read with the threads' samples).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accept_queue_max: Option<u64>,
    /// Connections waiting for accept in those listen socket(s) on average over the
    /// step's reads (sock_diag idiag_rqueue at each sampling tick), and the number of
    /// reads: with TPS, the time a request waited to be accepted (Little's law). None
    /// when no listener serving the target was read, or in records written before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accept_queue_mean: Option<AcceptQueueMean>,
    /// Connection requests those listen socket(s) dropped in the window (the growth of
    /// their sk_drops by sock_diag SK_MEMINFO_DROPS, from the window's first read to its
    /// last): the target's own drops at a full accept queue, where the `tcp` counters
    /// are the whole namespace's. None when no listener serving the target was found,
    /// or in records written before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listener_drops: Option<u64>,
    /// Kernel drops by reason over the window (`skb:kfree_skb`, host-wide), with why they
    /// were not read when they were not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drop_reasons: Option<crate::run::DropReasons>,
    /// How long this step's users really sent: from its first request written to its last,
    /// seconds (its warm-up included; planned: warm-up + measured window). None: a record
    /// from before this was measured, or no request was sent in the step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_sent_s: Option<f64>,
    /// When this step's last request was written, seconds after the ramp's planned start
    /// (step k is planned to end at (k + 1) x (warm-up + window)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_end_s: Option<f64>,
    /// The server's threads one by one over the window (with --pid), most CPU first;
    /// empty in records written before per-thread sampling.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_thread: Vec<crate::waits::StepThread>,
    /// How much of the server's process tree the step's thread samples covered (with
    /// --pid): a tree of more threads than the sampler reads per tick is sampled in turns.
    /// None without --pid, or in records written before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tree_sampling: Option<TreeSampling>,
    /// HTTP/2 (`ramp http --http2`): this step's own stream counts, from its warm-up's
    /// start to the next step's (the last step's to the run's end): the connections
    /// whose server's SETTINGS came in it, the requests that began waiting on the client
    /// for a free stream in it, the waits that ended in it (given up or started), and
    /// for the last step (or the one stopped in) those waiting at the end. None: another
    /// protocol, or an older record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http2: Option<crate::load_http::Http2Streams>,
    /// The step's replies by the time from their first byte read to their last, with the
    /// client namespace's delayed ACKs over the window (a stream protocol over HTTP/1.1
    /// or TCP; `tpslab_analysis::nagle` judges it). None: UDP, HTTP/2, or an older record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_gaps: Option<crate::gaps::ReplyGaps>,
    /// Times in the window a user waited before connecting again (1 ms after a connection
    /// that answered, else doubling up to 1 s) after a failed connect or a connection
    /// closed for bytes no request asked for. 0 in records written before it.
    #[serde(default, skip_serializing_if = "crate::is_zero")]
    pub reconnect_backoffs: u64,
}

/// A step's coverage of the server's process tree by the thread sampler. A tree of more
/// threads than `per_tick` (a prefork server's hundreds of workers) is sampled in turns,
/// round-robin, `per_tick` threads a tick, and its thread list is read again only at
/// the tree's reads: each thread is sampled at about `per_tick / threads` of the ticks,
/// so the sampler's cost on the server's host stays bounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TreeSampling {
    /// Processes in the tree (the PID and its descendants), the most at one of the
    /// step's tree reads.
    pub processes: u32,
    /// Threads of those processes, the most at one of the step's tree reads.
    pub threads: u32,
    /// Threads read at one tick at most (the cap).
    pub per_tick: u32,
    /// Ticks in the step.
    pub ticks: u64,
    /// Threads with at least one sample in the step.
    pub sampled: u32,
    /// Thread samples taken in the step, all threads together.
    pub samples: u64,
}

impl TreeSampling {
    /// Whether some ticks read only part of the tree (more threads than the cap).
    pub fn partial(&self) -> bool {
        self.threads > self.per_tick
    }
}

/// The mean length of a listen socket's accept queue over a step's reads.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct AcceptQueueMean {
    /// Connections waiting for accept, the mean of the reads.
    pub connections: f64,
    /// Reads the mean is of.
    pub reads: u64,
}

/// The server's listening socket on the target port, as found when the ramp started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Listener {
    /// Its accept queue limit (sock_diag idiag_wqueue of the listener: min(the backlog
    /// given to listen(), net.core.somaxconn)), connections.
    pub backlog: u32,
    /// net.core.somaxconn of its network namespace, when readable.
    pub somaxconn: Option<u64>,
}

/// The ramp's record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RampRecord {
    /// The plan.
    pub plan: RampPlan,
    /// One per step run (fewer than planned when interrupted; at most 200: more are
    /// refused, `tpslab_plan::limits::RAMP_STEPS`).
    #[serde(deserialize_with = "crate::read::ramp_steps")]
    pub steps: Vec<StepResult>,
    /// Whether it was stopped early.
    pub interrupted: bool,
    /// CPUs the server's threads may run on (its affinity, /proc/PID/status
    /// `Cpus_allowed_list`; tpslab's own when it started the server), when known: what its
    /// CPU use is judged against.
    #[serde(default)]
    pub server_cpus: Option<usize>,
    /// The server's listening socket on the target port (TCP, when its namespace is
    /// readable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listener: Option<Listener>,
    /// Peak resident memory of the generator (the tpslab process running the users; a
    /// built-in server is a process of its own) at the end, KiB (/proc/self/status VmHWM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generator_peak_rss_kib: Option<u64>,
    /// How long the users really sent over the whole ramp: from the first request written
    /// to the last, seconds. None: a record from before this was measured, or nothing sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_sent_s: Option<f64>,
    /// Set when load was still being sent past the plan's end (by more than
    /// [`Overrun::TOLERANCE_S`]): the plan is a promise of how long a server is loaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overrun: Option<Overrun>,
    /// HTTP/2 (`ramp http --http2`): the streams at once the server allowed on each
    /// connection and the users' requests that waited on the client for one, over the
    /// whole run (the steps' [`StepResult::http2`] added together). None: another
    /// protocol, or an older record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http2: Option<crate::load_http::Http2Streams>,
    /// HTTP/3 (`ramp http --http3`): the QUIC connections' figures over the whole run
    /// (round-trip time, congestion window, packets sent and lost; datagrams and UDP bytes
    /// counted at the client's sockets), as `load http --http3` keeps them. None: another
    /// protocol, or an older record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http3: Option<crate::quic::QuicPaths>,
}

/// A ramp whose users sent load past the plan's end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Overrun {
    /// The plan's length: steps x (warm-up + window), seconds.
    pub planned_s: f64,
    /// When the last request was written, seconds after the plan's start.
    pub load_end_s: f64,
    /// The host's 1-minute load average when the ramp ended (/proc/loadavg), when readable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_average: Option<f64>,
    /// Online CPUs of the host, to judge the load average against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<usize>,
}

impl Overrun {
    /// How far past the plan's end the last request may be written before the run says it
    /// overran, seconds: a loop thread descheduled between its deadline check and its
    /// write (a busy host's time slices are milliseconds) stays well inside it.
    pub const TOLERANCE_S: f64 = 0.5;

    /// The overrun of a ramp planned for `planned_s` whose last request was written
    /// `load_end_s` after its start, with the host's load average and CPUs at the end;
    /// None when it ended within [`Overrun::TOLERANCE_S`] of the plan.
    pub fn judge(
        planned_s: f64,
        load_end_s: Option<f64>,
        load_average: Option<f64>,
        cpus: Option<usize>,
    ) -> Option<Overrun> {
        let end = load_end_s?;
        (end > planned_s + Self::TOLERANCE_S).then_some(Overrun {
            planned_s,
            load_end_s: end,
            load_average,
            cpus,
        })
    }

    /// The report's line: how long load ran against the plan, and why when the host was
    /// busy (a load average above its CPUs).
    pub fn line(&self) -> String {
        let why = match (self.load_average, self.cpus) {
            (Some(l), Some(c)) if l > c as f64 => {
                format!("the host was busy (load average {l:.1} on {c} CPUs)")
            }
            (Some(l), _) => format!("the generator fell behind its plan (load average {l:.1})"),
            (None, _) => "the generator fell behind its plan".to_string(),
        };
        format!(
            "OVERRUN: load ran {:.1} s, planned {:.1} s: {why}",
            self.load_end_s, self.planned_s
        )
    }
}

/// The judgement of a ramp, from its record alone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RampAnalysis {
    /// Little's law per step: N = X (R + Z), as a ratio of users (1.00: every user always
    /// had a request out).
    pub little: Vec<LittleCheck>,
    /// Index of the knee step (None: no knee).
    pub knee_index: Option<usize>,
    /// Users at the knee.
    pub knee_users: Option<usize>,
    /// The Universal Scalability Law fit of TPS against users.
    pub usl: Option<UslFit>,
    /// Why there is no fit.
    pub usl_error: Option<String>,
    /// The findings under the verdict, in order (knee, Little's law, USL, thread states).
    pub lines: Vec<String>,
    /// One line: what limits TPS.
    pub verdict: String,
    /// Each step's response-time ledger (a step without replies has none; at most one
    /// per step). Empty in records written before it.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "crate::read::ramp_ledgers"
    )]
    pub ledger: Vec<crate::rt_ledger::RtLedger>,
}

#[cfg(test)]
mod tests {
    use super::Overrun;

    #[test]
    fn an_end_within_the_tolerance_is_no_overrun() {
        assert_eq!(Overrun::judge(11.0, Some(11.0), Some(20.0), Some(2)), None);
        assert_eq!(Overrun::judge(11.0, Some(11.49), None, None), None);
        assert_eq!(Overrun::judge(11.0, None, Some(20.0), Some(2)), None);
        let o = Overrun::judge(11.0, Some(11.51), Some(3.0), Some(2)).expect("overrun");
        assert_eq!((o.planned_s, o.load_end_s), (11.0, 11.51));
    }

    #[test]
    fn the_line_names_a_busy_host_only_when_its_load_exceeds_its_cpus() {
        let o = |la, cpus| Overrun::judge(11.0, Some(12.4), la, cpus).expect("overrun");
        assert_eq!(
            o(Some(17.25), Some(2)).line(),
            "OVERRUN: load ran 12.4 s, planned 11.0 s: the host was busy (load average 17.2 on 2 CPUs)"
        );
        assert_eq!(
            o(Some(1.5), Some(2)).line(),
            "OVERRUN: load ran 12.4 s, planned 11.0 s: the generator fell behind its plan (load average 1.5)"
        );
        assert_eq!(
            o(None, Some(2)).line(),
            "OVERRUN: load ran 12.4 s, planned 11.0 s: the generator fell behind its plan"
        );
    }
}
