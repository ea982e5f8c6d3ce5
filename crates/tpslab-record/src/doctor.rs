//! `tpslab doctor`'s record: the sysctl files a host applies, what runs, the host below
//! them, and the findings, each with its evidence and fix. Auditing the files and judging
//! them is `tpslab_analysis::doctor`.

use crate::buffer::TruesizeProbe;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use tpslab_plan::doctor::Workload;
use tpslab_proc::sysctl_conf::ConfLine;

/// How much a finding matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// The file does not do what it says (a key this kernel does not have, a malformed
    /// line).
    Error,
    /// Something will differ from what someone expects (a value not running, an
    /// inconsistent pair, a setting short for the stated workload).
    Warn,
    /// Worth knowing (a value set in several files, a host setting that may matter).
    Info,
}

/// What fixes a finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Fix {
    /// A sysctl.d line, full key name (`--write-snippet` collects these).
    Sysctl {
        /// Dotted key (`net.core.rmem_default`).
        key: String,
        /// Value as the kernel reads it (`4096 131072 6291456`).
        value: String,
    },
    /// Anything else: a command or a change in an application's settings.
    Action {
        /// What to run or change.
        line: String,
    },
}

impl Fix {
    /// A sysctl.d line.
    pub fn sysctl(key: impl Into<String>, value: impl ToString) -> Fix {
        Fix::Sysctl {
            key: key.into(),
            value: value.to_string(),
        }
    }
    /// Another action.
    pub fn action(line: impl Into<String>) -> Fix {
        Fix::Action { line: line.into() }
    }
}

impl fmt::Display for Fix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fix::Sysctl { key, value } => write!(f, "{key} = {value}"),
            Fix::Action { line } => f.write_str(line),
        }
    }
}

/// One finding with its evidence and what fixes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Finding {
    /// How much it matters.
    pub severity: Severity,
    /// What is wrong, in one sentence.
    pub what: String,
    /// Where it was seen: `file:line` with the line's setting, a running value, a counter.
    pub evidence: Vec<String>,
    /// What fixes it, when there is one thing that does.
    pub fix: Option<Fix>,
}

/// What the running kernel has for a /proc/sys path (`net/core/rmem_max`): its value
/// (blanks collapsed), or None when this kernel has no such key.
pub type Running = BTreeMap<String, Option<String>>;

/// Whether a sysctl belongs to each network namespace or to the whole host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Each network namespace has its own value (a container can set it).
    Netns,
    /// One value for the host: a namespace other than the first cannot set it (it is
    /// absent there, or read-only).
    Host,
}

/// One of `tpslab_analysis::doctor::KNOWN` as this host runs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct KnownSysctl {
    /// Dotted key (`net.core.rmem_max`).
    pub key: String,
    /// Running value (None: not on this kernel).
    pub value: Option<String>,
    /// Per namespace or host-wide, as checked in a fresh network namespace (None: not
    /// checked, which needs root).
    pub scope: Option<Scope>,
    /// What it governs.
    pub what: String,
}

/// Everything `tpslab doctor` read and found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DoctorRecord {
    /// The tree audited (`/` for this host).
    pub root: String,
    /// The sysctl files, in the order the system applies them (later wins).
    pub files: Vec<ConfFile>,
    /// Files not applied because a file of the same name in a directory that comes
    /// first masks them: (masked, by).
    pub masked: Vec<(String, String)>,
    /// This kernel's values of every key the files set and of the sysctls doctor always
    /// reads (`tpslab_analysis::doctor::KNOWN`; None: no such key), from /proc/sys
    /// (host-wide keys read in an outer namespace when this one lacks them).
    pub running: Running,
    /// For keys this kernel does not have: the key probably meant.
    pub suggested: BTreeMap<String, String>,
    /// `tpslab_analysis::doctor::KNOWN` as this host runs them, with their scope.
    #[serde(default)]
    pub known: Vec<KnownSysctl>,
    /// Physical memory (/proc/meminfo `MemTotal`), bytes; 0 when unknown.
    #[serde(default)]
    pub memory_bytes: u64,
    /// The page size udp_mem and tcp_mem count in, bytes.
    #[serde(default = "page_default")]
    pub page_bytes: u64,
    /// The workload stated with `--for`.
    #[serde(default)]
    pub workload: Option<Workload>,
    /// For `--for udp`: what this kernel charges per datagram of the workload's size
    /// (a probe on loopback), or why it could not be measured.
    #[serde(default)]
    pub truesize: Option<Result<TruesizeProbe, String>>,
    /// NICs, RPS, irqbalance and CPU frequency as this host shows them.
    #[serde(default)]
    pub host: HostFacts,
    /// Connection-pool files given with `--pool-config` (judged with `--for pool`).
    #[serde(default)]
    pub pools: Vec<tpslab_proc::pool_conf::PoolConf>,
    /// The findings (`tpslab_analysis::doctor::judge` of the above), errors first.
    pub findings: Vec<Finding>,
}

fn page_default() -> u64 {
    4096
}

/// One configuration file, as applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ConfFile {
    /// Its path on the audited tree (`/etc/sysctl.d/60-udp.conf`).
    pub path: String,
    /// Its settings and malformed lines.
    pub lines: Vec<ConfLine>,
}

/// A NIC (a network device backed by hardware or a paravirtual device: one with a
/// `device` link in /sys/class/net; lo, veth, bridges and ifb are not NICs).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Nic {
    /// Interface name.
    pub name: String,
    /// Driver (/sys/class/net/IF/device/driver), when known.
    pub driver: Option<String>,
    /// RX ring: (current, pre-set maximum) descriptors, from `ethtool -g`; None when not
    /// reported.
    pub rx_ring: Option<(u64, u64)>,
    /// TX ring: (current, maximum).
    pub tx_ring: Option<(u64, u64)>,
    /// Why the rings are unknown (`ethtool` missing, the driver does not report them).
    pub rings_skipped: Option<String>,
    /// Receive queues (/sys/class/net/IF/queues/rx-N).
    pub rx_queues: u64,
    /// rps_cpus of each receive queue, as written there (hex CPU mask; 0: RPS off).
    pub rps_cpus: Vec<String>,
    /// Non-zero drop counters since boot: /sys/class/net/IF/statistics rx_dropped,
    /// rx_missed_errors, rx_fifo_errors, rx_over_errors, and `ethtool -S` counters whose
    /// name says drop, miss, fifo or no buffer (per queue where the driver has them).
    pub drops: BTreeMap<String, u64>,
}

/// What the host shows below the sysctls.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct HostFacts {
    /// Online CPUs.
    pub cpus: u64,
    /// The NICs of the network namespace doctor ran in.
    pub nics: Vec<Nic>,
    /// PID of a running irqbalance (None: not running, or not checked).
    pub irqbalance_pid: Option<u32>,
    /// CPU frequency governor -> number of CPUs using it (empty: no cpufreq).
    pub governors: BTreeMap<String, u64>,
    /// What could not be read and why (`CPU frequency: no /sys/.../cpufreq (a VM, or
    /// the firmware sets it)`).
    pub skipped: Vec<String>,
}
