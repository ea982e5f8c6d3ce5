//! The run of a command whose flags and plan are [`tpslab_cli::report_cmd`]:
//! `tpslab report FILE...`: renders saved records again, through the same report layer
//! the commands print with (the terminal output is the one the run printed).

use anyhow::Result;
use std::process::ExitCode;
use tpslab_cli::report_cmd::ReportArgs;

/// Runs `tpslab report`: the HTML page of one record, or every record in the format.
pub(crate) fn run(a: ReportArgs) -> Result<ExitCode> {
    let plan = a.plan()?;
    if let Some(p) = &plan.html {
        let outputs = crate::out::Outputs {
            html: Some(p),
            ..Default::default()
        };
        crate::out::emit(&plan.records[0], outputs, crate::out::Terminal::Nothing)?;
        return Ok(ExitCode::SUCCESS);
    }
    plan.print(&mut std::io::stdout().lock())?;
    Ok(ExitCode::SUCCESS)
}
