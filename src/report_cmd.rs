//! `tpslab report FILE...`: renders saved records again, through the same report layer
//! the commands print with (the terminal output is the one the run printed).

use anyhow::{anyhow, Result};
use clap::Args;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
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
    #[arg(long, default_value = "term", value_parser = format_parser())]
    format: Format,
    /// Show the source counter of every figure (term).
    #[arg(long)]
    explain: bool,
    /// Write one record's report as a self-contained HTML page to FILE (`-`: standard
    /// output) instead of printing it; the same as `--format html` into a file.
    #[arg(long, value_name = "FILE", conflicts_with = "format")]
    html: Option<PathBuf>,
}

/// `--format`'s parser: the report layer's formats ([`Format::ALL`], by
/// [`Format::name`]), `metrics` with a note on what it is for.
fn format_parser() -> impl clap::builder::TypedValueParser<Value = Format> {
    use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
    PossibleValuesParser::new(Format::ALL.map(|f| {
        let v = PossibleValue::new(f.name());
        match f {
            Format::Metrics => v.help(
                "Prometheus' text format (node_exporter's textfile collector), as --metrics-file",
            ),
            _ => v,
        }
    }))
    .try_map(|s| s.parse::<Format>())
}

/// What `report` renders: every record read and checked, how, and where (`--html`).
#[derive(Debug)]
pub(crate) struct ReportPlan {
    /// The records, in the order given.
    pub(crate) records: Vec<tpslab_analysis::record::Record>,
    /// Their format on standard output.
    pub(crate) format: Format,
    /// Each figure's source (term).
    pub(crate) explain: bool,
    /// The one record's page goes to this file instead (`-`: standard output).
    pub(crate) html: Option<PathBuf>,
}

impl ReportArgs {
    /// Every record read and checked (so a bad one costs no partial output), and as many
    /// as the format renders. Errors: one line naming the file or the flag.
    pub(crate) fn plan(&self) -> Result<ReportPlan> {
        if let Some(p) = &self.html {
            crate::flags::check_output("--html", p, true)?;
        }
        let records = self
            .files
            .iter()
            .map(|p| tpslab_run::input::read_record("", p))
            .collect::<Result<Vec<_>>>()?;
        if self.html.is_some() && records.len() > 1 {
            anyhow::bail!("--html renders one record; give one FILE");
        }
        if self.format.one_record() && records.len() > 1 {
            let one: Vec<&str> = Format::ALL
                .into_iter()
                .filter(|f| f.one_record())
                .map(Format::name)
                .collect();
            let (last, rest) = one.split_last().unwrap_or((&"", &[]));
            anyhow::bail!(
                "--format {} and {last} render one record; give one FILE",
                rest.join(", ")
            );
        }
        Ok(ReportPlan {
            records,
            format: self.format,
            explain: self.explain,
            html: self.html.clone(),
        })
    }
}

/// Runs `tpslab report`.
pub(crate) fn run(a: ReportArgs) -> Result<ExitCode> {
    let ReportPlan {
        records: recs,
        format,
        explain,
        html,
    } = a.plan()?;
    if let Some(p) = &html {
        let outputs = crate::out::Outputs {
            html: Some(p),
            ..Default::default()
        };
        crate::out::emit(&recs[0], outputs, crate::out::Terminal::Nothing)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut out = std::io::stdout().lock();
    for (i, rec) in recs.iter().enumerate() {
        if i > 0 && format == Format::Term {
            writeln!(out)?;
        }
        let mut text = Vec::new();
        tpslab_report::render(&mut text, rec, format, explain)
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
