//! A closed-loop ramp's plan and record (`tpslab ramp`), and its judgement as stored
//! ([`RampAnalysis`]: a pure function of the record, `tpslab_analysis::ramp::analyse`).

use crate::stats::LatencySummary;
use crate::usl::{LittleCheck, UslFit};
use crate::waits::ThreadStates;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The plan of a ramp and its protocol: defined with every other plan in `tpslab_plan`
/// (where `RampPlan::validate` checks it), embedded in the record as it ran.
pub use tpslab_plan::ramp::{RampPlan, RampProto};

/// One step's results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    /// Server CPU over the window, cores (utime+stime from /proc/PID/stat).
    pub server_cpu_cores: Option<f64>,
    /// Server thread states over the window.
    pub threads: Option<ThreadStates>,
    /// TCP counters of the server's network namespace over the window (/proc/PID/net/snmp
    /// `Tcp:` and .../netstat `TcpExt:` deltas): connection requests dropped at a full
    /// accept queue and the like. None for UDP, or a remote server without --pid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<tpslab_proc::netstat::TcpCounters>,
    /// Most connections seen waiting in the target port's listen socket(s) for accept
    /// (/proc/PID/net/tcp{,6} rx_queue of the listener, sampled with the threads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accept_queue_max: Option<u64>,
    /// Kernel drops by reason over the window (`skb:kfree_skb`, host-wide), with why they
    /// were not read when they were not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drop_reasons: Option<crate::run::DropReasons>,
    /// The server's threads one by one over the window (with --pid), most CPU first;
    /// empty in records written before per-thread sampling.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_thread: Vec<crate::waits::StepThread>,
}

/// The server's listening socket on the target port, as found when the ramp started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Listener {
    /// Its accept queue limit (sock_diag idiag_wqueue of the listener: min(the backlog
    /// given to listen(), net.core.somaxconn)), connections.
    pub backlog: u32,
    /// net.core.somaxconn of its network namespace, when readable.
    pub somaxconn: Option<u64>,
}

/// The ramp's record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RampRecord {
    /// The plan.
    pub plan: RampPlan,
    /// One per step run (fewer than planned when interrupted).
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
}

/// The judgement of a ramp, from its record alone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
}
