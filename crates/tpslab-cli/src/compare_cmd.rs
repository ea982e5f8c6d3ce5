//! `tpslab compare A B [C...]`: records of one kind side by side (what differs, what
//! changed, whether it is more than noise; [`tpslab_run::compare`]), through the report
//! layer like any record.

use anyhow::Result;
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// Two or more records of the same kind written by --json (udp_run, watch, diagnose,
    /// sweep, ramp, tcp), or `history:ID` for a run of `tpslab history`; each later one is
    /// compared with the first.
    #[arg(required = true, num_args = 2.., value_name = "RECORD")]
    pub files: Vec<PathBuf>,
    /// Write the comparison's record to FILE (JSON, kind compare; `-`: standard output).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Also write it as one self-contained HTML page to FILE.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

impl CompareArgs {
    /// The records to compare (files, or `history:ID`), the output files checked.
    pub fn plan(&self) -> Result<&[PathBuf]> {
        if let Some(p) = &self.json {
            crate::flags::check_output("--json", p, true)?;
        }
        if let Some(p) = &self.html {
            crate::flags::check_output("--html", p, false)?;
        }
        Ok(&self.files)
    }
}
