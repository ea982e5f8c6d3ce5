//! A sweep's runs and results as its record holds them: each run's figures
//! ([`RunMetrics`]), each cell's estimates and effects against the baseline
//! ([`SweepResult`]). Taking the figures from a run record and analysing the runs is
//! `tpslab_analysis::sweep`.

use crate::estimate::{Effect, Estimate};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use tpslab_plan::sweep::{Cell, Objective};

/// One run of a sweep: its cell, its repetition, its figures, and the cell's settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SweepRun {
    /// Cell index.
    pub cell: usize,
    /// Repetition of the cell.
    pub rep: usize,
    /// The run's figures.
    pub metrics: RunMetrics,
}

/// The figures of one run that a sweep compares. Rates and queue figures cover the
/// measurement window only (warm-up and the drain after the load are trimmed).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RunMetrics {
    /// Answered per second in the window.
    #[serde(deserialize_with = "crate::nan::de")]
    #[cfg_attr(feature = "schema", schemars(with = "crate::schema::NanF64"))]
    pub tps: f64,
    /// % of the window's datagrams not answered (one-way: not read by the server).
    #[serde(deserialize_with = "crate::nan::de")]
    #[cfg_attr(feature = "schema", schemars(with = "crate::schema::NanF64"))]
    pub loss_pct: f64,
    /// Server socket rx_queue mean over the window, bytes.
    #[serde(deserialize_with = "crate::nan::de")]
    #[cfg_attr(feature = "schema", schemars(with = "crate::schema::NanF64"))]
    pub rxq_mean_bytes: f64,
    /// Server socket rx_queue stddev over the window, bytes.
    #[serde(deserialize_with = "crate::nan::de")]
    #[cfg_attr(feature = "schema", schemars(with = "crate::schema::NanF64"))]
    pub rxq_stddev_bytes: f64,
    /// Server threads' CPU, % of one CPU (schedstat), window mean.
    #[serde(deserialize_with = "crate::nan::de")]
    #[cfg_attr(feature = "schema", schemars(with = "crate::schema::NanF64"))]
    pub server_cpu_pct: f64,
    /// Busy % of each CPU over the run (/proc/stat): cpuN -> %.
    pub cpu_busy_pct: BTreeMap<String, f64>,
    /// System context switches per second (/proc/stat ctxt), window mean.
    #[serde(deserialize_with = "crate::nan::de")]
    #[cfg_attr(feature = "schema", schemars(with = "crate::schema::NanF64"))]
    pub ctxt_per_s: f64,
    /// Server threads' context switches per second (voluntary + involuntary), window mean.
    #[serde(deserialize_with = "crate::nan::de")]
    #[cfg_attr(feature = "schema", schemars(with = "crate::schema::NanF64"))]
    pub server_ctxt_per_s: f64,
    /// RTT p50 from the intended send time, us (None without replies).
    pub p50_us: Option<f64>,
    /// RTT p99, us.
    pub p99_us: Option<f64>,
    /// The generator kept its schedule.
    pub valid: bool,
    /// Datagrams the generator failed to send plus replies the server failed to send.
    #[serde(default)]
    pub errors: u64,
    /// Kernel drops by reason during the run (`skb:kfree_skb`, host-wide), reasons that
    /// can be a UDP datagram's fate only; `None` when the reasons were not read (a reason
    /// missing from a read map is 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_drops: Option<BTreeMap<String, u64>>,
}

/// The prefix of a figure that counts kernel drops of one reason per run (`drops:NAME`).
pub const DROPS: &str = "drops:";

impl RunMetrics {
    /// The named figures compared across cells (name -> value), NaN when absent.
    pub fn figures(&self) -> BTreeMap<String, f64> {
        let mut f: BTreeMap<String, f64> = [
            ("tps", self.tps),
            ("loss_pct", self.loss_pct),
            ("rxq_mean_bytes", self.rxq_mean_bytes),
            ("rxq_stddev_bytes", self.rxq_stddev_bytes),
            ("server_cpu_pct", self.server_cpu_pct),
            ("ctxt_per_s", self.ctxt_per_s),
            ("server_ctxt_per_s", self.server_ctxt_per_s),
            ("p50_us", self.p50_us.unwrap_or(f64::NAN)),
            ("p99_us", self.p99_us.unwrap_or(f64::NAN)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        for (cpu, v) in &self.cpu_busy_pct {
            f.insert(format!("{cpu}_busy_pct"), *v);
        }
        for (r, n) in self.kernel_drops.iter().flatten() {
            f.insert(format!("{DROPS}{r}"), *n as f64);
        }
        f
    }

    /// Figure `name` of this run: NaN when absent, except a drop reason this run read
    /// and did not see, which is 0.
    pub fn figure(&self, name: &str) -> f64 {
        match self.figures().get(name) {
            Some(v) => *v,
            None if name.starts_with(DROPS) && self.kernel_drops.is_some() => 0.0,
            None => f64::NAN,
        }
    }
}

/// Estimates of one cell.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CellResult {
    /// The cell.
    pub cell: Cell,
    /// Figure -> estimate over the cell's runs.
    pub figures: BTreeMap<String, Estimate>,
    /// Runs whose generator did not keep its schedule.
    pub invalid_runs: usize,
}

/// A cell's effect on the objective and loss against the baseline.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CellEffect {
    /// The cell.
    pub cell: usize,
    /// What differs from the baseline ("sched=fifo:99").
    pub change: String,
    /// Figure -> effect against the baseline.
    pub effects: BTreeMap<String, Effect>,
}

/// The analysed sweep.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SweepResult {
    /// Per cell.
    pub cells: Vec<CellResult>,
    /// Each non-baseline cell against the baseline.
    pub effects: Vec<CellEffect>,
    /// Best cell for the objective (by mean).
    pub best: Option<usize>,
    /// The objective.
    pub objective: Objective,
    /// Plain statements: which settings helped, by how much, and caveats.
    pub findings: Vec<String>,
    /// Warnings (a setting that helped by starving something else, invalid runs).
    pub warnings: Vec<String>,
}
