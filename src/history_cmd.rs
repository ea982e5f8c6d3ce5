//! `tpslab history`: lists the runs in the history (`tpslab_run::history`, the SQLite
//! store every record is appended to), renders one again, or prints where it is kept.

use anyhow::Result;
use clap::{Args, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use tpslab_run::history::{self, Query};

#[derive(Args, Debug)]
pub(crate) struct HistoryArgs {
    #[command(subcommand)]
    cmd: Option<HistoryCmd>,
    /// Only runs of this kind (udp_run, diagnose, ramp, sweep, tcp, ...).
    #[arg(long)]
    kind: Option<String>,
    /// Only runs whose target contains this text.
    #[arg(long)]
    target: Option<String>,
    /// Only runs started on or after this day (YYYY-MM-DD, UTC).
    #[arg(long, value_name = "DATE")]
    since: Option<String>,
    /// At most this many runs, the latest.
    #[arg(long, default_value_t = 50)]
    limit: u32,
}

#[derive(Subcommand, Debug)]
enum HistoryCmd {
    /// Render one stored run again, as `tpslab report` does.
    Show {
        /// Its id (the first column of `tpslab history`).
        id: i64,
        /// Write it as an HTML page to FILE instead.
        #[arg(long, value_name = "FILE")]
        html: Option<PathBuf>,
        /// Write the stored record to FILE (`-`: standard output).
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
    },
    /// Print where the history is kept.
    Path,
}

/// `tpslab history`.
pub(crate) fn run(a: HistoryArgs) -> Result<ExitCode> {
    match a.cmd {
        Some(HistoryCmd::Path) => {
            println!("{}", history::path()?.display());
            return Ok(ExitCode::SUCCESS);
        }
        Some(HistoryCmd::Show { id, html, json }) => {
            if let Some(p) = &html {
                crate::flags::check_output("--html", p, false)?;
            }
            if let Some(p) = &json {
                crate::flags::check_output("--json", p, true)?;
            }
            let rec = history::get(id)?;
            let terminal = if html.is_none() && json.is_none() {
                crate::out::Terminal::Report { explain: false }
            } else {
                crate::out::Terminal::Nothing
            };
            let outputs = crate::out::Outputs {
                json: json.as_deref(),
                html: html.as_deref(),
                ..Default::default()
            };
            crate::out::emit(&rec, outputs, terminal)?;
            return Ok(ExitCode::SUCCESS);
        }
        None => {}
    }
    let (rows, p) = history::list(&Query {
        kind: a.kind,
        target: a.target,
        since_unix_ms: history::since_ms(a.since.as_deref())?,
        limit: a.limit,
    })?;
    history::print_list(&mut std::io::stdout().lock(), &rows, &p)?;
    Ok(ExitCode::SUCCESS)
}
