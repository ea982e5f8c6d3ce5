//! The run of a command whose flags and plan are [`tpslab_cli::bdp`]:
//! `tpslab bdp`: the bandwidth-delay product of a path, the buffers a rate needs and the
//! ceiling a buffer puts on a flow, against this host's settings.

use anyhow::Result;
use std::process::ExitCode;
use tpslab_cli::bdp::BdpArgs;

/// Runs `tpslab bdp`: the ceiling of `--buffer`, then what `--rate` needs (a rate beyond
/// the largest TCP window is an error, before anything is printed), then the record.
pub(crate) fn run(a: &BdpArgs) -> Result<ExitCode> {
    let plan = a.plan()?;
    let rec = tpslab_run::bdp::run(&plan, tpslab_run::bdp::host_buffers)?;
    crate::out::emit(
        &rec,
        crate::out::Outputs::of(&a.record),
        crate::out::Terminal::Report { explain: false },
    )?;
    Ok(ExitCode::SUCCESS)
}
