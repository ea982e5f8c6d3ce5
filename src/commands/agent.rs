//! The run of a command whose flags and plan are [`tpslab_cli::agent`]:
//! `tpslab agent` and `tpslab merge`: the wait, the run and the merge are [`tpslab_run::agent`]'s.

use crate::out;
use anyhow::Result;
use std::process::ExitCode;
use tpslab_cli::agent::{AgentArgs, MergeArgs};
use tpslab_cli::flags::GateFlags;

/// Runs `tpslab agent`.
pub(crate) fn agent(a: AgentArgs) -> Result<ExitCode> {
    let plan = a.plan()?;
    let ready = tpslab_run::agent::ready(&plan)?;
    let ctx = out::ctx(None)?;
    eprintln!("{}", ready.line(&plan));
    let Some(rec) = tpslab_run::agent::run(&plan, ready, &ctx)? else {
        eprintln!("tpslab: exit 130: interrupted before the start; nothing was sent");
        return Ok(ExitCode::from(130));
    };
    out::emit_run(
        &rec,
        crate::out::Outputs::of(&a.record),
        false,
        &GateFlags::default(),
        false,
    )
}

/// Runs `tpslab merge`: every record is read and checked before anything is written.
pub(crate) fn merge(a: MergeArgs) -> Result<ExitCode> {
    let rec = tpslab_run::agent::merge(&a.plan()?)?;
    out::emit_run(
        &rec,
        crate::out::Outputs::of(&a.record),
        a.explain,
        &GateFlags::default(),
        false,
    )
}
