//! tpslab's report layer: one module per output format, each rendering a [`Record`] into
//! any `io::Write` (so every output is testable against a byte buffer). A new format is
//! one module here and one arm in [`render`].

use std::io::{self, Write};
use tpslab_analysis::record::Record;

pub mod csv;
pub mod html;
pub mod json;
pub mod metrics;
pub mod svg;
pub mod term;
pub mod units;

/// The output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Tables for a terminal ([`term`]).
    Term,
    /// The record itself, pretty-printed JSON ([`json`]).
    Json,
    /// A plot ([`svg`]; ramp records).
    Svg,
    /// A table for a spreadsheet ([`csv`]).
    Csv,
    /// One self-contained page with plots, for people ([`html`]).
    Html,
    /// Prometheus' text format, for node_exporter's textfile collector ([`metrics`]).
    Metrics,
}

/// Renders `rec` in `format` into `w`; `explain` adds each figure's source (terminal).
pub fn render(w: &mut dyn Write, rec: &Record, format: Format, explain: bool) -> io::Result<()> {
    match format {
        Format::Term => term::record(w, rec, explain),
        Format::Json => json::record(w, rec),
        Format::Svg => svg::record(w, rec),
        Format::Csv => csv::record(w, rec),
        Format::Html => html::record(w, rec),
        Format::Metrics => w.write_all(
            metrics::prometheus_text(&metrics::openmetrics(&metrics::of_record(rec))).as_bytes(),
        ),
    }
}
