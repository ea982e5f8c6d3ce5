//! The record: one versioned JSON document per command run ([`Record`], schema
//! [`RECORD_SCHEMA`]): the metadata, and a body per kind: a UDP run ([`RunRecord`]: the
//! plan, the environment, the time series, the generator and server counts, the ledger),
//! a watch (the same type), a diagnosis ([`DiagnoseRecord`]: its runs, facts and verdict).
//! Records of the previous release (`tpslab.run/1`, `tpslab.diagnose/1`) are still read.

use crate::{LatencySummary, Ledger, Summary};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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
#[derive(Debug, Clone, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Serialize, Deserialize)]
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
}

/// `serve udp`: what the reference server read and answered.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServeRecord {
    /// The server's settings and counts.
    pub server: ServerReport,
    /// Its life, seconds.
    pub elapsed_s: f64,
    /// Ended by SIGINT/SIGTERM (the usual end without --duration).
    pub interrupted: bool,
}

/// A sweep: its plan, every run's figures and the analysis of them (a pure function of the
/// plan and the runs: [`crate::sweep::analyse`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SweepReport {
    /// The plan.
    pub plan: crate::sweep::SweepPlan,
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
/// of the record and the host's CPU count in `meta`: [`crate::ramp::analyse`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
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
            Body::Sweep(_) | Body::Serve(_) => Meta::default(),
        };
        Record {
            schema: RECORD_SCHEMA.into(),
            meta,
            body,
        }
    }

    /// Reads a record of any schema in [`READABLE_SCHEMAS`]; another schema is an error
    /// naming it and the ones read.
    pub fn from_json(text: &str) -> Result<Record, RecordError> {
        #[derive(Deserialize)]
        struct Head {
            #[serde(default)]
            schema: String,
        }
        let head: Head = serde_json::from_str(text)?;
        let rec = match head.schema.as_str() {
            RECORD_SCHEMA => serde_json::from_str::<Record>(text)?,
            RUN_SCHEMA_V1 => {
                let r = v1_run(serde_json::from_str(text)?)?;
                let watch = r.argv.get(1).is_some_and(|c| c == "watch");
                Record::new(if watch {
                    Body::Watch(r)
                } else {
                    Body::UdpRun(r)
                })
            }
            DIAGNOSE_SCHEMA_V1 => {
                let mut v: serde_json::Value = serde_json::from_str(text)?;
                for k in ["before", "after"] {
                    if let Some(o) = v.get_mut(k).and_then(|r| r.as_object_mut()) {
                        o.remove("plan");
                    }
                }
                Record::new(Body::Diagnose(serde_json::from_value(v)?))
            }
            _ => return Err(RecordError::Schema { found: head.schema }),
        };
        rec.check()?;
        Ok(rec)
    }

    /// Checks what the renderers rely on, so a hand-edited or corrupt record is an error,
    /// never a panic or an endless plot: indices within their lists, every sweep factor
    /// with a level (and at most 10000 cells), ramp user counts within the ramp's limit.
    pub fn check(&self) -> Result<(), RecordError> {
        let bad = |m: String| Err(RecordError::Invalid(m));
        match &self.body {
            Body::Ramp(r) => {
                if let Some(s) = r.run.steps.iter().find(|s| s.users > 10_000) {
                    return bad(format!("a ramp step of {} users (at most 10000)", s.users));
                }
                if r.analysis
                    .knee_index
                    .is_some_and(|k| k >= r.run.steps.len())
                {
                    return bad("the knee is not one of the steps".into());
                }
            }
            Body::Sweep(w) => {
                if w.plan.factors.iter().any(|f| f.levels.is_empty()) {
                    return bad("a sweep factor without levels".into());
                }
                let n = w
                    .plan
                    .factors
                    .iter()
                    .map(|f| f.levels.len())
                    .try_fold(1usize, |a, l| a.checked_mul(l))
                    .filter(|&n| n <= 10_000);
                if n.is_none() {
                    return bad("a sweep of more than 10000 cells".into());
                }
                let cells = w.result.cells.len();
                if w.result.best.is_some_and(|b| b >= cells)
                    || w.result.effects.iter().any(|e| e.cell >= cells)
                {
                    return bad("a sweep result naming a cell it does not have".into());
                }
            }
            Body::UdpRun(_) | Body::Watch(_) | Body::Diagnose(_) | Body::Serve(_) => {}
        }
        Ok(())
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
        }
    }
}

/// A run record of the previous release: its plan was untyped JSON, dropped here (the rest
/// of the record reads as it was).
fn v1_run(mut v: serde_json::Value) -> Result<RunRecord, RecordError> {
    if let Some(o) = v.as_object_mut() {
        o.remove("plan");
    }
    Ok(serde_json::from_value(v)?)
}

/// Everything `diagnose` found: the scenario, the runs before and (when verified) after
/// the fix, the facts read from the first run and the diagnosis drawn from them.
#[derive(Debug, Clone, Serialize, Deserialize)]
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
}

/// A complete run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
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
}

/// A foreign server process, as found at the start of a run.
#[derive(Debug, Clone, Serialize, Deserialize)]
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
}

/// Facts about the host the run happened on.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
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
}

/// Counts of the reference server over the run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
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
}

pub use tpslab_plan::udp::MatchMode;

/// Generator counts, latencies and self-validation.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
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
    /// Datagram size, bytes (UDP payload).
    pub size_bytes: usize,
    /// Datagrams sent back-to-back per burst (1: evenly paced).
    pub burst: u64,
    /// Interval between burst starts, ns.
    pub burst_interval_ns: u64,
    /// Sender threads (one socket each).
    pub threads: usize,
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
}

/// A time series sampled by the observer: `t_ms[i]` is the time of sample i since the
/// start of observation; every other vector has the same length.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Series {
    /// Milliseconds since the observer started.
    pub t_ms: Vec<f64>,
    /// Named series -> values (unit in the name: `_bytes`, `_pps`, `_pct`, `_per_s`).
    pub values: BTreeMap<String, Vec<f64>>,
}

/// Observations of the kernel over the run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
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
    /// How the sampling was bounded or otherwise qualified (e.g. thinned on a long run).
    #[serde(default)]
    pub notes: Vec<String>,
    /// Sample errors (file that could not be read and why), deduplicated.
    pub errors: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run() -> RunRecord {
        RunRecord {
            tool_version: "0.1.0".into(),
            argv: vec!["tpslab".into(), "run".into(), "udp".into()],
            started_unix_ms: 1,
            elapsed_s: 2.5,
            environment: Environment {
                kernel: "6.18.0".into(),
                hostname: "h".into(),
                cpus: 2,
                ..Default::default()
            },
            generator: Some(GeneratorReport {
                sent: 7,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_record_round_trips_with_its_body_fields_at_the_top_level() {
        let rec = Record::new(Body::UdpRun(run()));
        let text = serde_json::to_string_pretty(&rec).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["schema"], RECORD_SCHEMA);
        assert_eq!(v["kind"], "udp_run");
        assert_eq!(v["meta"]["cpus"], 2);
        assert_eq!(v["generator"]["sent"], 7);
        let back = Record::from_json(&text).unwrap();
        assert_eq!(back.kind(), "udp_run");
        assert_eq!(back.meta, rec.meta);
        assert_eq!(serde_json::to_string_pretty(&back).unwrap(), text);
    }

    #[test]
    fn the_previous_releases_records_are_read() {
        let mut v = serde_json::to_value(run()).unwrap();
        v["schema"] = RUN_SCHEMA_V1.into();
        let rec = Record::from_json(&v.to_string()).unwrap();
        assert_eq!(rec.kind(), "udp_run");
        assert_eq!(rec.meta.kernel, "6.18.0");
        v["argv"] = serde_json::json!(["tpslab", "watch", "--port", "53"]);
        assert_eq!(Record::from_json(&v.to_string()).unwrap().kind(), "watch");
        // An untyped plan of the previous release does not stop the rest from reading.
        v["plan"] = serde_json::json!({"kind": "udp", "load": {"rate_pps": 5}});
        let rec = Record::from_json(&v.to_string()).unwrap();
        let Body::Watch(r) = rec.body else {
            panic!("watch")
        };
        assert!(r.plan.is_none());
        assert_eq!(r.generator.unwrap().sent, 7);
    }

    #[test]
    fn a_record_holding_what_no_run_writes_is_refused() {
        let mut v = serde_json::to_value(Record::new(Body::UdpRun(run()))).unwrap();
        v["plan"] = serde_json::json!({"kind": "udp", "load": {"rate_pps": 5}});
        let e = Record::from_json(&v.to_string()).unwrap_err().to_string();
        assert!(
            e.starts_with("not a tpslab record"),
            "a bad plan in this release's record: {e}"
        );
        let sweep = include_str!("../../tpslab-report/tests/fixtures/ramp.json");
        let mut v: serde_json::Value = serde_json::from_str(sweep).unwrap();
        v["steps"][0]["users"] = 1_000_000_000.into();
        let e = Record::from_json(&v.to_string()).unwrap_err().to_string();
        assert!(e.contains("at most 10000"), "{e}");
    }

    #[test]
    fn an_unread_schema_is_named_with_the_ones_read() {
        let e = Record::from_json(r#"{"schema": "tpslab.ramp/1"}"#)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "schema \"tpslab.ramp/1\" is not read by this release; it reads tpslab.record/2, tpslab.run/1, tpslab.diagnose/1"
        );
        assert!(Record::from_json("{}")
            .unwrap_err()
            .to_string()
            .contains("schema \"\""));
        assert!(Record::from_json("not json")
            .unwrap_err()
            .to_string()
            .starts_with("not a tpslab record"));
    }

    #[test]
    fn figures_not_measured_round_trip_as_null() {
        let e = crate::experiment::Estimate::of(&[5.0]);
        assert!(e.ci_lo.is_nan());
        let text = serde_json::to_string(&e).unwrap();
        assert!(text.contains("\"ci_lo\":null"), "{text}");
        let back: crate::experiment::Estimate = serde_json::from_str(&text).unwrap();
        assert!(back.ci_lo.is_nan() && back.ci_hi.is_nan());
        assert_eq!(back.mean, 5.0);
    }
}
