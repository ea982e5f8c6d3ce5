//! `tpslab capacity`'s record (kind `capacity`): every open-loop step the search ran (the
//! rate intended and achieved, the latency and loss, the step's call and why), where the
//! search ended ([`Conclusion`]) and the verdict of the first failing rate (the layer that
//! gave first, with its evidence). The search and the calls are
//! `tpslab_analysis::capacity`'s.

use crate::run::Environment;
use crate::verdict::{Case, Diagnosis};
use serde::{Deserialize, Serialize};

use tpslab_plan::capacity::CapacityPlan;

/// A step's call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    /// Every objective held.
    Pass,
    /// An objective did not hold while the generator delivered its rate.
    Fail,
    /// The generator did not deliver its intended rate (or lost replies itself): the step
    /// says nothing of the server and is not counted.
    Invalid,
    /// Stopped before its end (Ctrl-C, the budget): not counted.
    Interrupted,
}

impl StepStatus {
    /// Its word in a table: `pass`, `FAIL`, `INVALID`, `interrupted`.
    pub fn word(self) -> &'static str {
        match self {
            StepStatus::Pass => "pass",
            StepStatus::Fail => "FAIL",
            StepStatus::Invalid => "INVALID",
            StepStatus::Interrupted => "interrupted",
        }
    }
}

/// The verdict rules' call on a failing step, in short.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct StepVerdict {
    /// The case.
    pub case: Case,
    /// The layer, in words.
    pub layer: String,
    /// The verdict's sentence.
    pub headline: String,
}

/// One open-loop step at one rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CapacityStep {
    /// The rate intended, pps.
    pub rate_pps: f64,
    /// What the generator sent, pps.
    pub achieved_pps: f64,
    /// Answered per second in the measured window (0 without replies).
    pub answered_pps: f64,
    /// Latency from the intended send time, ns: p50, p90, p99, p99.9, max (None without
    /// a reply to time).
    pub latency_ns: Option<[u64; 5]>,
    /// Loss in the measured window, % of what was sent in it (None without replies).
    pub loss_pct: Option<f64>,
    /// Sends the kernel refused, % of those attempted.
    pub errors_pct: f64,
    /// The call.
    pub status: StepStatus,
    /// Why: the objectives that did not hold (`p99 31 ms > 20 ms`), or why the generator
    /// is not evidence; empty for a pass.
    pub why: Vec<String>,
    /// The verdict rules' call on a failing step (what gave), None otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<StepVerdict>,
    /// When the step started, seconds since the search started.
    pub started_s: f64,
    /// Its length, seconds (warm-up, window, drain and the observer's start and end).
    pub elapsed_s: f64,
    /// `capacity tcp|http`: the step's response-time ledger (its mean response time,
    /// request written to reply read, split into measured parts by Little's law: the
    /// listener's accept queue, with `--pid` the server's threads sampled every 10 ms in
    /// the window, and the replies' transmission stalls; `users` is the step's
    /// connections, the most requests at once; nothing is outside a request in an open
    /// loop). None: UDP, no reply, neither the listener nor the threads read, or a
    /// record written before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ledger: Option<crate::rt_ledger::RtLedger>,
}

/// Where the search ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "end", rename_all = "snake_case")]
pub enum Conclusion {
    /// The boundary within the resolution: `sustains_pps` passed every time it ran,
    /// `fails_pps` failed at least once.
    Bracket {
        /// The highest rate that passed, pps.
        sustains_pps: f64,
        /// The lowest rate that failed, pps.
        fails_pps: f64,
    },
    /// Passed at `--max-rate`: the server sustains at least it.
    AtLeast {
        /// The max rate, pps.
        sustains_pps: f64,
    },
    /// Failed down to the lowest rate the search tries.
    NothingPasses {
        /// The lowest rate tried, pps.
        fails_pps: f64,
    },
    /// The generator could not deliver `generator_pps` (twice): the limit found is the
    /// generator's, not the server's.
    GeneratorLimited {
        /// The highest rate that passed below it, pps, if any.
        sustains_pps: Option<f64>,
        /// The lowest rate the generator failed to deliver, pps.
        generator_pps: f64,
    },
    /// Ended before the resolution (the budget, Ctrl-C, the step limit): the best bracket
    /// so far.
    Unfinished {
        /// The highest rate that passed, pps, if any.
        sustains_pps: Option<f64>,
        /// The lowest rate that failed, pps, if any.
        fails_pps: Option<f64>,
        /// What ended it (`the budget of 30s`, `interrupted`).
        why: String,
    },
}

impl Conclusion {
    /// The rate sustained and the lowest rate the server failed, pps, each when the
    /// search found it (a generator's limit is no failing rate).
    pub fn bounds(&self) -> (Option<f64>, Option<f64>) {
        match self {
            Conclusion::Bracket {
                sustains_pps,
                fails_pps,
            } => (Some(*sustains_pps), Some(*fails_pps)),
            Conclusion::AtLeast { sustains_pps } => (Some(*sustains_pps), None),
            Conclusion::NothingPasses { fails_pps } => (None, Some(*fails_pps)),
            Conclusion::GeneratorLimited { sustains_pps, .. } => (*sustains_pps, None),
            Conclusion::Unfinished {
                sustains_pps,
                fails_pps,
                ..
            } => (*sustains_pps, *fails_pps),
        }
    }
}

/// `capacity`: the plan, the steps, the end, the verdict at the boundary.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CapacityRecord {
    /// The plan as validated.
    pub plan: CapacityPlan,
    /// Every step, in the order they ran.
    pub steps: Vec<CapacityStep>,
    /// Where the search ended (a pure function of the plan and the steps, stored for
    /// readers of the JSON).
    pub conclusion: Conclusion,
    /// The verdict of the first failing step at the lowest failing rate: the layer that
    /// gave first and its evidence. None when no step failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boundary: Option<Diagnosis>,
    /// Ended by Ctrl-C/SIGTERM.
    pub interrupted: bool,
    /// The host.
    pub environment: Environment,
    /// Notes for the reader (with `--fix-and-retry`: why there was no second search).
    #[serde(default)]
    pub notes: Vec<String>,
    /// `--fix-and-retry`'s second search, with the fix applied; None without the flag, or
    /// when nothing could be applied (the notes say why).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<Box<CapacityRetry>>,
}

/// `--fix-and-retry`: the fix the verdict recommended at the first search's lowest failing
/// rate, applied; the search run again with it; the host settings put back.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CapacityRetry {
    /// Each change made for the second search, in words (`sysctl net.core.rmem_default=
    /// 4194304 (host-wide; restored afterwards)`, `the server started again after the
    /// change (--server-cmd)`).
    pub applied: Vec<String>,
    /// The host settings put back after it: (sysctl, the value restored).
    #[serde(default)]
    pub restored: Vec<(String, String)>,
    /// The second search: its plan (the fix in it; it starts at the first search's
    /// sustained rate), steps, conclusion and verdict. It has no `retry` of its own.
    pub search: CapacityRecord,
}

impl CapacityRecord {
    /// The rate the second search sustains against the first's, as a change in % (`+38.0`),
    /// when both searches found their boundary (each a [`Conclusion::Bracket`]): an
    /// unfinished, at-least or generator-limited search has no capacity to compare.
    pub fn retry_change_pct(&self) -> Option<f64> {
        let sustains = |c: &Conclusion| match c {
            Conclusion::Bracket { sustains_pps, .. } => Some(*sustains_pps),
            _ => None,
        };
        let before = sustains(&self.conclusion)?;
        let after = sustains(&self.retry.as_ref()?.search.conclusion)?;
        (before > 0.0).then(|| (after / before - 1.0) * 100.0)
    }
}
