//! `tpslab report FILE...`: renders saved records again, through the same report layer
//! the commands print with (the terminal output is the one the run printed).

use anyhow::Result;
use clap::Args;
use std::path::PathBuf;
use tpslab_report::Format;

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// Records written by --json (`-` reads standard input): this release's
    /// `tpslab.record/2` (load, run, watch, diagnose, ramp, sweep, serve udp/tcp, tcp, doctor), or the previous release's
    /// `tpslab.run/1` and `tpslab.diagnose/1`.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// term: the tables the run printed; json: the record in the current schema; svg: a
    /// ramp's plot; csv: a sweep's runs, a ramp's steps, a run's time series, or a TCP
    /// flow's TCP_INFO samples; html: one self-contained page with plots.
    #[arg(long, default_value = "term", value_parser = format_parser())]
    pub format: Format,
    /// Show the source counter of every figure (term).
    #[arg(long)]
    pub explain: bool,
    /// Write one record's report as a self-contained HTML page to FILE (`-`: standard
    /// output) instead of printing it; the same as `--format html` into a file.
    #[arg(long, value_name = "FILE", conflicts_with = "format")]
    pub html: Option<PathBuf>,
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

use tpslab_run::report::ReportPlan;

impl ReportArgs {
    /// The records read ([`ReportPlan::read`]); the HTML file checked first.
    pub fn plan(&self) -> Result<ReportPlan> {
        if let Some(p) = &self.html {
            crate::flags::check_output("--html", p, true)?;
        }
        ReportPlan::read(&self.files, self.format, self.explain, self.html.as_deref())
    }
}
