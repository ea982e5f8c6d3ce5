//! `tpslab history`: lists the runs in the history (`tpslab_run::history`, the SQLite
//! store every record is appended to), renders one again, or prints where it is kept.

use anyhow::{anyhow, Result};
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

/// A run's start as listed (UTC, to the second), or "not recorded" for a record that
/// did not carry it (0: a watch of an older release), never 1970-01-01.
fn started(ms: i64) -> String {
    if ms <= 0 {
        "not recorded".into()
    } else {
        tpslab_report::html::utc(ms as u64)
            .trim_end_matches(" UTC")
            .to_string()
    }
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
    let since_ms = match &a.since {
        None => 0,
        Some(s) => {
            history::day(s)
                .ok_or_else(|| anyhow!("--since {s}: allowed a day as YYYY-MM-DD"))?
                .max(0)
                * 86_400_000
        }
    };
    let (rows, p) = history::list(&Query {
        kind: a.kind,
        target: a.target,
        since_unix_ms: since_ms,
        limit: a.limit,
    })?;
    let mut t = tpslab_report::term::table(&["id", "started (UTC)", "kind", "target", "found"]);
    for i in 1..5 {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(comfy_table::CellAlignment::Left);
        }
    }
    for r in &rows {
        t.add_row(vec![
            r.id.to_string(),
            started(r.started_unix_ms),
            r.kind.clone(),
            if r.target.is_empty() {
                "-".into()
            } else {
                r.target.clone()
            },
            format!(
                "{}{}",
                if r.interrupted { "(interrupted) " } else { "" },
                r.headline
            ),
        ]);
    }
    println!("{t}");
    println!("{} run(s) from {}", rows.len(), p.display());
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_start_not_recorded_is_said_not_dated_1970() {
        assert_eq!(super::started(0), "not recorded");
        assert_eq!(super::started(1_795_470_158_000), "2026-11-23 21:42:38");
    }
}
