//! The run of a command whose flags and plan are [`tpslab_cli::history_cmd`]:
//! `tpslab history`: lists the runs in the history (`tpslab_run::history`, the SQLite
//! store every record is appended to), renders one again, or prints where it is kept.

use anyhow::Result;
use std::process::ExitCode;
use tpslab_cli::history_cmd::{HistoryArgs, HistoryCmd};
use tpslab_run::history::{self, Query};

/// `tpslab history`.
pub(crate) fn run(a: HistoryArgs) -> Result<ExitCode> {
    match a.cmd {
        Some(HistoryCmd::Path) => {
            println!("{}", history::path()?.display());
            return Ok(ExitCode::SUCCESS);
        }
        Some(HistoryCmd::Show { id, html, json }) => {
            if let Some(p) = &html {
                tpslab_cli::flags::check_output("--html", p, false)?;
            }
            if let Some(p) = &json {
                tpslab_cli::flags::check_output("--json", p, true)?;
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
