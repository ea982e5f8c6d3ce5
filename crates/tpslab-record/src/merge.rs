//! What a record made by `tpslab merge` holds beside the fleet's totals: each agent's own
//! figures and who was missing. Adding the agents' records up is `tpslab_analysis::merge`.

use serde::{Deserialize, Serialize};

/// What a merged record holds beside the totals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct MergeInfo {
    /// The fleet plan every agent ran.
    pub plan: tpslab_plan::fleet::FleetPlan,
    /// Its hash.
    pub plan_hash: String,
    /// The common start, ms since the Unix epoch.
    pub start_at_unix_ms: u64,
    /// Agents in the plan.
    pub of: usize,
    /// Each agent's figures, by index.
    pub agents: Vec<AgentFigures>,
    /// Agents of the plan without a record (only with `--allow-missing`).
    pub missing: Vec<usize>,
    /// The server's record the ledger's server side came from (its name), if any.
    pub server: Option<String>,
}

/// One agent's figures, as in its own record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct AgentFigures {
    /// Its index in the fleet, 0..of.
    pub index: usize,
    /// Its record's name (the file given to merge).
    pub record: String,
    /// Its host's name.
    pub hostname: String,
    /// Datagrams its kernel accepted.
    pub sent: u64,
    /// Replies it read.
    pub replies_read: u64,
    /// Answered per second over its window.
    pub tps: f64,
    /// Its window loss, percent.
    pub window_loss_pct: Option<f64>,
    /// Its latency from the intended send time, ns.
    pub p50_ns: u64,
    /// The same latency's 99th percentile, ns.
    pub p99_ns: u64,
    /// Its start against the common start, us (its wall clock).
    pub start_error_us: i64,
    /// Why its generator was the bottleneck or otherwise not valid evidence (empty: it
    /// kept its schedule).
    pub bottleneck: Vec<String>,
}
