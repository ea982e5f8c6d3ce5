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
    /// sweep, ramp, tcp), or `history:ID` for a run of `tpslab history`; each later one is
    /// compared with the first.
    #[arg(required = true, num_args = 2.., value_name = "RECORD")]
    files: Vec<PathBuf>,
    /// Write the comparison's record to FILE (JSON, kind compare; `-`: standard output).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Also write it as one self-contained HTML page to FILE.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
}

/// Runs `tpslab compare`: every record is read and checked before anything is printed.
pub(crate) fn run(a: CompareArgs) -> Result<ExitCode> {
    if let Some(p) = &a.json {
        crate::out::check_output("--json", p, true)?;
    }
    if let Some(p) = &a.html {
        crate::out::check_output("--html", p, false)?;
    }
    let started = tpslab_run::Started::now();
    let recs = a
        .files
        .iter()
        .map(|p| {
            // `history:ID` is a run from the history.
            match p.to_str().and_then(|s| s.strip_prefix("history:")) {
                Some(id) => {
                    let n: i64 = id.parse().map_err(|_| {
                        anyhow!("{}: allowed history:ID with a number ID", p.display())
                    })?;
                    Ok((p.display().to_string(), tpslab_run::history::get(n)?))
                }
                None => Ok((p.display().to_string(), crate::report_cmd::read(p)?)),
            }
        })
        .collect::<Result<Vec<_>>>()?;
    let report = tpslab_analysis::compare::compare(&recs).map_err(|e| anyhow!(e))?;
    let rec = Record::with_meta(started.meta(false), Body::Compare(report));
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
