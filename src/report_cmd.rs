//! `tpslab report FILE...`: renders saved records again, through the same report layer
//! the commands print with (the terminal output is the one the run printed).

use anyhow::Result;
use clap::Args;
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

pub(crate) use tpslab_run::report::ReportPlan;

impl ReportArgs {
    /// The records read ([`ReportPlan::read`]); the HTML file checked first.
    pub(crate) fn plan(&self) -> Result<ReportPlan> {
        if let Some(p) = &self.html {
            crate::flags::check_output("--html", p, true)?;
        }
        ReportPlan::read(&self.files, self.format, self.explain, self.html.as_deref())
    }
}

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
