//! The run of a command whose flags and plan are [`tpslab_cli::compare_cmd`]:
//! `tpslab compare A B [C...]`: records of one kind side by side (what differs, what
//! changed, whether it is more than noise; [`tpslab_run::compare`]), through the report
//! layer like any record.

use anyhow::Result;
use std::process::ExitCode;
use tpslab_cli::compare_cmd::CompareArgs;

/// Runs `tpslab compare`: every record is read and checked before anything is printed.
pub(crate) fn run(a: CompareArgs) -> Result<ExitCode> {
    let rec = tpslab_run::compare::compare(a.plan()?)?;
    let outputs = crate::out::Outputs {
        json: a.json.as_deref(),
        html: a.html.as_deref(),
        ..Default::default()
    };
    crate::out::emit(
        &rec,
        outputs,
        crate::out::Terminal::Report { explain: false },
    )?;
    Ok(ExitCode::SUCCESS)
}
