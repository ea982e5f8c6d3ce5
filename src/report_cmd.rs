//! `tpslab report FILE...`: renders saved records again, through the same report layer
//! the commands print with (the terminal output is the one the run printed).

use anyhow::{anyhow, Result};
use clap::{Args, ValueEnum};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use tpslab_analysis::record::Record;
use tpslab_report::Format;

#[derive(Args, Debug)]
pub(crate) struct ReportArgs {
    /// Records written by --json (`-` reads standard input): this release's
    /// `tpslab.record/2` (load, run, watch, diagnose, ramp, sweep, serve udp/tcp, tcp, doctor), or the previous release's
    /// `tpslab.run/1` and `tpslab.diagnose/1`.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// term: the tables the run printed; json: the record in the current schema; svg: a
    /// ramp's plot; csv: a sweep's runs, a ramp's steps, a run's time series, or a TCP
    /// flow's TCP_INFO samples; html: one self-contained page with plots.
    #[arg(long, value_enum, default_value = "term")]
    format: FormatArg,
    /// Show the source counter of every figure (term).
    #[arg(long)]
    explain: bool,
    /// Write one record's report as a self-contained HTML page to FILE (`-`: standard
    /// output) instead of printing it; the same as `--format html` into a file.
    #[arg(long, value_name = "FILE", conflicts_with = "format")]
    html: Option<PathBuf>,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum FormatArg {
    Term,
    Json,
    Svg,
    Csv,
    Html,
    /// Prometheus' text format (node_exporter's textfile collector), as --metrics-file.
    Metrics,
}

/// Reads one record file (`-`: standard input), at most
/// [`tpslab_run::input::RECORD_MAX_BYTES`], and checks it ([`Record::from_json`]). Errors (one
/// line naming the file): see [`tpslab_run::input::read_text`], not a record, a record holding
/// what no run writes.
pub(crate) fn read(p: &std::path::Path) -> Result<Record> {
    read_flag("", p)
}

/// [`read`] of the record named by `flag` (`--server`), the flag named in its errors.
pub(crate) fn read_flag(flag: &str, p: &std::path::Path) -> Result<Record> {
    let text = tpslab_run::input::read_text(flag, p, tpslab_run::input::RECORD_MAX_BYTES, true)?;
    let name = match flag {
        "" => p.display().to_string(),
        f => format!("{f} {}", p.display()),
    };
    Record::from_json(&text).map_err(|e| anyhow!("{name}: {e}"))
}

/// Runs `tpslab report`. Every file is read before anything is printed, so a bad one
/// costs no partial output.
pub(crate) fn run(a: ReportArgs) -> Result<ExitCode> {
    if let Some(p) = &a.html {
        crate::out::check_output("--html", p, true)?;
    }
    let recs = a
        .files
        .iter()
        .map(|p| read(p))
        .collect::<Result<Vec<_>>>()?;
    if a.html.is_some() && recs.len() > 1 {
        anyhow::bail!("--html renders one record; give one FILE");
    }
    if let Some(p) = &a.html {
        let outputs = crate::out::Outputs {
            html: Some(p),
            ..Default::default()
        };
        crate::out::emit(&recs[0], outputs, crate::out::Terminal::Nothing)?;
        return Ok(ExitCode::SUCCESS);
    }
    let format = match a.format {
        FormatArg::Term => Format::Term,
        FormatArg::Json => Format::Json,
        FormatArg::Svg => Format::Svg,
        FormatArg::Csv => Format::Csv,
        FormatArg::Html => Format::Html,
        FormatArg::Metrics => Format::Metrics,
    };
    if matches!(
        format,
        Format::Svg | Format::Csv | Format::Html | Format::Metrics
    ) && recs.len() > 1
    {
        anyhow::bail!("--format svg, csv, html and metrics render one record; give one FILE");
    }
    let mut out = std::io::stdout().lock();
    for (i, rec) in recs.iter().enumerate() {
        if i > 0 && format == Format::Term {
            writeln!(out)?;
        }
        let mut text = Vec::new();
        tpslab_report::render(&mut text, rec, format, a.explain)
            .and_then(|_| {
                // The terminal's report with its control characters escaped (a record may
                // come from another host); the other formats are data, written as made.
                if format == Format::Term {
                    out.write_all(&crate::out::terminal_safe(&text))
                } else {
                    out.write_all(&text)
                }
            })
            .map_err(|e| {
                if e.kind() == std::io::ErrorKind::Unsupported {
                    anyhow!("--format svg: {e}")
                } else {
                    anyhow!("writing the report to standard output: {e}")
                }
            })?;
    }
    Ok(ExitCode::SUCCESS)
}
