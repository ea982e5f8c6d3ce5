//! The run of a command whose flags and plan are [`tpslab_cli::diagnose`]:
//! `tpslab diagnose`: the probe, the runs, the verdict and the verification
//! are [`tpslab_run::diagnose`]'s.

use crate::out;
use anyhow::Result;
use std::process::ExitCode;
use tpslab_cli::diagnose::DiagnoseArgs;
use tpslab_cli::flags::{self, GateFlags};
use tpslab_record::{Body, DiagnoseRecord};
use tpslab_run::diagnose::DiagnosePlan;

/// Runs `tpslab diagnose`.
pub fn run(a: DiagnoseArgs) -> Result<ExitCode> {
    let plan = a.plan()?;
    let mut ctx = out::ctx(None)?;
    let kind = tpslab_report::live::RunsKind::Diagnose;
    let view = out::attach_runs(a.live, kind, live_header(&plan), &mut ctx)?;
    let rec = tpslab_run::diagnose::run(&plan, &ctx);
    // The terminal is given back before the report prints (or the error is said).
    drop(view);
    let rec = rec?;
    let Body::Diagnose(d) = &rec.body else {
        unreachable!("a diagnosis makes a diagnose record")
    };
    out::emit(
        &rec,
        crate::out::Outputs::of(&a.record),
        out::Terminal::Report { explain: a.explain },
    )?;
    diagnose_exit(d, &a.gate)
}

/// What the live view says of each run of a diagnosis: the server, each run's planned
/// length, why there is no latency (a load without replies).
fn live_header(plan: &DiagnosePlan) -> tpslab_report::live::LiveHeader {
    let load = &plan.first.load;
    tpslab_report::live::LiveHeader {
        command: "diagnose".into(),
        target: match &plan.server {
            tpslab_run::diagnose::Server::BuiltIn => "built-in S1 scenario".into(),
            tpslab_run::diagnose::Server::At(t) => t.clone(),
            tpslab_run::diagnose::Server::Started(_) => "the server of --server-cmd".into(),
        },
        planned_s: Some((load.warmup + load.duration).as_secs_f64()),
        planned_requests: None,
        no_latency: (!load.expect_replies).then(|| "the load reads no replies".into()),
    }
}

/// The exit code: the first run's under the gate; 130 when any part was interrupted.
fn diagnose_exit(rec: &DiagnoseRecord, gate: &GateFlags) -> Result<ExitCode> {
    if rec.interrupted {
        eprintln!("tpslab: exit 130: interrupted by a signal");
        return Ok(ExitCode::from(130));
    }
    flags::gate_exit(&rec.before, gate)
}
