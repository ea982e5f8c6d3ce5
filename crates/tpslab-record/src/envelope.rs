//! The record envelope: [`Record`] (schema, metadata, kind) around each command's body,
//! the bodies that are not a UDP run, and reading records of this release and the
//! previous one.

use crate::run::{Environment, RunRecord, ServerReport};
use serde::{Deserialize, Serialize};

/// Schema of every record this release writes; bump on incompatible changes.
pub const RECORD_SCHEMA: &str = "tpslab.record/2";

/// The run record's schema in the previous release (read, never written).
pub const RUN_SCHEMA_V1: &str = "tpslab.run/1";

/// The diagnose record's schema in the previous release (read, never written).
pub const DIAGNOSE_SCHEMA_V1: &str = "tpslab.diagnose/1";

/// The schemas [`Record::from_json`] reads.
pub const READABLE_SCHEMAS: &[&str] = &[RECORD_SCHEMA, RUN_SCHEMA_V1, DIAGNOSE_SCHEMA_V1];

/// One command's record. In JSON: `schema`, `kind`, `meta`, then the body's fields at the
/// top level (so `generator`, `ledger`, `diagnosis` ... are where they always were).
// Written by serde; read only by `Record::from_json` (read.rs), which reads each part
// straight from the text: no `Deserialize` here, as serde's `flatten` and internally
// tagged enums buffer the whole document.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Record {
    /// Always [`RECORD_SCHEMA`] when written.
    pub schema: String,
    /// Who wrote it, where, when, for how long.
    pub meta: Meta,
    /// What the command found.
    #[serde(flatten)]
    pub body: Body,
}

/// A record's body, by kind.
// Written with its `kind` first; read by `Record::from_json`, without buffering.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "kind", rename_all = "snake_case")]
#[allow(clippy::large_enum_variant)]
pub enum Body {
    /// `load`, `run`: a UDP run.
    UdpRun(RunRecord),
    /// `watch`: the observer alone.
    Watch(RunRecord),
    /// `diagnose`: runs, facts, verdict.
    Diagnose(DiagnoseRecord),
    /// `ramp`: closed-loop steps and their judgement.
    Ramp(RampReport),
    /// `sweep`: the plan, every run's figures, the statistics.
    Sweep(SweepReport),
    /// `serve udp`: the reference server's counts over its life.
    Serve(ServeRecord),
    /// `tcp`: bulk flows and which limit held them, or another process's flows watched.
    Tcp(crate::tcp::TcpRecord),
    /// `serve tcp`: the sink, source or request/response server over its life.
    ServeTcp(crate::tcp::ServeTcpRecord),
    /// `doctor`: the host's sysctl files and what is wrong with them.
    Doctor(crate::doctor::DoctorRecord),
    /// `bdp`: a path's bandwidth-delay product, the buffers a rate needs, a window's ceiling.
    Bdp(crate::bdp::BdpRecord),
    /// `probe idle`: a path's idle timeout, bracketed.
    ProbeIdle(crate::idle::IdleRecord),
    /// `probe pool`: S5 in miniature, a pool's requests through the lab's middlebox.
    ProbePool(crate::idle::PoolRecord),
    /// `load http`: an open loop of HTTP requests at a fixed rate, latency corrected for
    /// coordinated omission and uncorrected.
    LoadHttp(crate::load_http::LoadHttpRecord),
    /// `compare`: records of one kind side by side, what differs and what changed.
    Compare(crate::compare::CompareReport),
    /// `capacity`: the highest rate a server sustains within an objective, the steps
    /// that found it, the layer that gave first.
    Capacity(crate::capacity::CapacityRecord),
}

/// `serve udp`: what the reference server read and answered.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ServeRecord {
    /// The server's settings and counts.
    pub server: ServerReport,
    /// Its life, seconds.
    pub elapsed_s: f64,
    /// Ended by SIGINT/SIGTERM (the usual end without --duration).
    pub interrupted: bool,
}

/// A sweep: its plan, every run's figures and the analysis of them (a pure function of the
/// plan and the runs: `tpslab_analysis::sweep::analyse`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SweepReport {
    /// The plan.
    pub plan: tpslab_plan::sweep::SweepPlan,
    /// Where each run's own record was written.
    pub out: String,
    /// The runs, in the order they ran.
    pub runs: Vec<crate::sweep::SweepRun>,
    /// Estimates per cell, effects against the baseline, findings.
    pub result: crate::sweep::SweepResult,
    /// Notes for the reader (runs interrupted, skipped).
    pub notes: Vec<String>,
}

/// A ramp's record and its judgement (stored for readers of the JSON; a pure function
/// of the record and the host's CPU count in `meta`: `tpslab_analysis::ramp::analyse`).
// Both halves are written at the top level; `Record::from_json` reads each from the text.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RampReport {
    /// The plan, the steps, whether it was interrupted.
    #[serde(flatten)]
    pub run: crate::ramp::RampRecord,
    /// Little's law, the knee, the USL fit, the verdict.
    #[serde(flatten)]
    pub analysis: crate::ramp::RampAnalysis,
}

/// The metadata of every record.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Meta {
    /// tpslab version that wrote the record.
    pub tool_version: String,
    /// The command line.
    pub argv: Vec<String>,
    /// Host name.
    pub hostname: String,
    /// `uname -r`.
    pub kernel: String,
    /// Online CPUs of the host that ran it.
    pub cpus: usize,
    /// Wall-clock start, milliseconds since the Unix epoch.
    pub started_unix_ms: u64,
    /// Length of the whole command, seconds.
    pub elapsed_s: f64,
    /// Ended by SIGINT/SIGTERM before its planned end.
    pub interrupted: bool,
}

/// A record that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// Not JSON, or not a record's shape.
    #[error("not a tpslab record: {0}")]
    Parse(#[from] serde_json::Error),
    /// Read, but holding what no run writes (an index out of range, a sweep without
    /// levels): refused rather than rendered.
    #[error("not a record this release wrote: {0}")]
    Invalid(String),
    /// A schema this release does not read.
    #[error("schema \"{found}\" is not read by this release; it reads {}", READABLE_SCHEMAS.join(", "))]
    Schema {
        /// The schema found (empty when none).
        found: String,
    },
}

impl Meta {
    /// The metadata of a command run on the host described by `env`, started at
    /// `started_unix_ms`, with this process's version and command line.
    pub fn new(env: &Environment, started_unix_ms: u64, elapsed_s: f64, interrupted: bool) -> Meta {
        Meta {
            tool_version: env!("CARGO_PKG_VERSION").into(),
            argv: std::env::args_os()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
            hostname: env.hostname.clone(),
            kernel: env.kernel.clone(),
            cpus: env.cpus,
            started_unix_ms,
            elapsed_s,
            interrupted,
        }
    }

    /// The metadata of a UDP run or watch, from its record.
    pub fn of_run(r: &RunRecord) -> Meta {
        Meta {
            tool_version: r.tool_version.clone(),
            argv: r.argv.clone(),
            hostname: r.environment.hostname.clone(),
            kernel: r.environment.kernel.clone(),
            cpus: r.environment.cpus,
            started_unix_ms: r.started_unix_ms,
            elapsed_s: r.elapsed_s,
            interrupted: r.interrupted,
        }
    }
}

impl Record {
    /// A record of `body` with its metadata (a diagnosis: its first run's, with the
    /// length of both runs and the diagnosis's interruption).
    pub fn new(body: Body) -> Record {
        let meta = match &body {
            Body::UdpRun(r) | Body::Watch(r) => Meta::of_run(r),
            Body::Diagnose(d) => Meta {
                elapsed_s: d.before.elapsed_s + d.after.as_ref().map_or(0.0, |a| a.elapsed_s),
                interrupted: d.interrupted,
                ..Meta::of_run(&d.before)
            },
            Body::Ramp(r) => Meta {
                interrupted: r.run.interrupted,
                ..Meta::default()
            },
            Body::Sweep(_)
            | Body::Serve(_)
            | Body::Tcp(_)
            | Body::ServeTcp(_)
            | Body::Doctor(_)
            | Body::Bdp(_)
            | Body::ProbeIdle(_)
            | Body::ProbePool(_)
            | Body::LoadHttp(_)
            | Body::Compare(_)
            | Body::Capacity(_) => Meta::default(),
        };
        Record {
            schema: RECORD_SCHEMA.into(),
            meta,
            body,
        }
    }

    /// A record of `body` with the metadata given (kinds whose body does not carry it).
    pub fn with_meta(meta: Meta, body: Body) -> Record {
        Record {
            schema: RECORD_SCHEMA.into(),
            meta,
            body,
        }
    }

    /// The kind's name as written in `kind`.
    pub fn kind(&self) -> &'static str {
        match self.body {
            Body::UdpRun(_) => "udp_run",
            Body::Watch(_) => "watch",
            Body::Diagnose(_) => "diagnose",
            Body::Ramp(_) => "ramp",
            Body::Sweep(_) => "sweep",
            Body::Serve(_) => "serve",
            Body::Tcp(_) => "tcp",
            Body::ServeTcp(_) => "serve_tcp",
            Body::Doctor(_) => "doctor",
            Body::Bdp(_) => "bdp",
            Body::ProbeIdle(_) => "probe_idle",
            Body::ProbePool(_) => "probe_pool",
            Body::LoadHttp(_) => "load_http",
            Body::Compare(_) => "compare",
            Body::Capacity(_) => "capacity",
        }
    }
}

/// Everything `diagnose` found: the scenario, the runs before and (when verified) after
/// the fix, the facts read from the first run and the diagnosis drawn from them.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DiagnoseRecord {
    /// Ctrl-C/SIGTERM ended the diagnosis early (the figures cover what ran).
    pub interrupted: bool,
    /// What was diagnosed, in words.
    pub scenario: String,
    /// The truesize probe of this kernel for the run's datagram size.
    pub probe: crate::buffer::TruesizeProbe,
    /// The facts of the first run.
    pub facts: crate::verdict::Facts,
    /// The verdict, evidence and recommendations.
    pub diagnosis: crate::verdict::Diagnosis,
    /// The first run, as is.
    pub before: RunRecord,
    /// What the verification run changed (flags and sysctls).
    pub applied: Vec<String>,
    /// The verification run, with the fix.
    pub after: Option<RunRecord>,
    /// Host sysctls restored after the verification run: (name, value).
    pub restored: Vec<(String, String)>,
    /// Notes for the reader.
    pub notes: Vec<String>,
    /// `--verify` was asked and nothing was verified (None: verified, not asked, or
    /// nothing was recommended).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_verified: Option<NotVerified>,
}

/// Why a verification asked for did not run, and what would run it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct NotVerified {
    /// Why nothing was applied or verified, in one sentence.
    pub why: String,
    /// The command to run instead: one sh line quoted by shlex (e.g. the same diagnosis
    /// with `--server-cmd`, so tpslab starts the server and can restart it with the fix).
    pub run: Option<String>,
    /// What to know about `run` (a placeholder in it to fill in), when anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_note: Option<String>,
}

#[cfg(test)]
#[path = "envelope_tests.rs"]
mod tests;
