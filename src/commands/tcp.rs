//! The run of a command whose flags and plan are [`tpslab_cli::tcp`]:
//! `tpslab tcp`: a bulk flow with TCP_INFO sampled and which limit held it, to a sink,
//! from a source (`--reverse`), across tpslab's delay line between two namespaces
//! (`--lab-rtt`, with the recommended buffers tried), or another process's flows watched.
//! Flags -> [`tpslab_plan::tcp::TcpPlan`] -> [`tpslab_run::tcp`] -> the record -> the report layer.

use anyhow::Result;
use std::process::ExitCode;
use tpslab_analysis::gate::applies;
use tpslab_cli::tcp::TcpArgs;
use tpslab_plan::tcp::TcpMode;
use tpslab_record::Body;
use tpslab_report::term::tcp as render;

pub(crate) fn run(a: TcpArgs) -> Result<ExitCode> {
    let plan = a.plan()?;
    let ctx = crate::out::ctx(None)?;
    // Each part as its run ends, fitted to the terminal's width as every report is
    // (whole lines in a pipe).
    let rec = tpslab_run::tcp::run(&plan, &ctx, &mut |r, i| {
        crate::out::fitted(|out| render::run_part(out, r, i))?;
        Ok(())
    })?;
    let Body::Tcp(r) = &rec.body else {
        unreachable!("a tcp record")
    };
    if !matches!(plan.mode, TcpMode::Lab { .. }) {
        crate::out::fitted(|out| render::record(out, r))?;
    }
    let outcome = tpslab_analysis::tcp::outcome(r);
    crate::out::emit_files(&rec, &a.record)?;
    if matches!(plan.mode, TcpMode::Watch { .. }) {
        return Ok(ExitCode::SUCCESS);
    }
    a.gate.exit(&outcome, applies::TCP)
}
