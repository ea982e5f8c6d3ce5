//! `tpslab compare A B [C...]`: records of one kind side by side (what differs, what
//! changed, whether it is more than noise), through the report layer like any record.

use anyhow::{anyhow, Result};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use tpslab_analysis::record::{Body, Record};

#[derive(Args, Debug)]
pub(crate) struct CompareArgs {
    /// Two or more records of the same kind written by --json (udp_run, watch, diagnose,
    /// sweep); each later one is compared with the first.
    #[arg(required = true, num_args = 2.., value_name = "RECORD")]
    files: Vec<PathBuf>,
    #[command(flatten)]
    record: crate::flags::RecordFlag,
}

/// Runs `tpslab compare`: every record is read and checked before anything is printed.
pub(crate) fn run(a: CompareArgs) -> Result<ExitCode> {
    a.record.check(true)?;
    let started = crate::out::Started::now();
    let recs = a
        .files
        .iter()
        .map(|p| Ok((p.display().to_string(), crate::report_cmd::read(p)?)))
        .collect::<Result<Vec<_>>>()?;
    let report = tpslab_analysis::compare::compare(&recs).map_err(|e| anyhow!(e))?;
    let rec = Record::with_meta(started.meta(false), Body::Compare(report));
    if let Some(p) = &a.record.json {
        crate::out::write_json(p, &rec)?;
    }
    a.record.write_html(&rec)?;
    if a.record.json.as_deref().is_some_and(crate::out::is_stdout) {
        return Ok(ExitCode::SUCCESS);
    }
    crate::out::print_report(&rec, false)?;
    if let Some(p) = &a.record.json {
        println!("record written to {}", p.display());
    }
    Ok(ExitCode::SUCCESS)
}
