//! tpslab's report layer: one module per output format, each rendering a [`Record`] into
//! any `io::Write` (so every output is testable against a byte buffer). A new format is
//! one module here and one arm in [`render`].

use std::io::{self, Write};
use tpslab_record::Record;

pub mod csv;
pub mod html;
pub mod json;
pub mod live;
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

impl Format {
    /// Every format, in the order a command line lists them.
    pub const ALL: [Format; 6] = [
        Format::Term,
        Format::Json,
        Format::Svg,
        Format::Csv,
        Format::Html,
        Format::Metrics,
    ];

    /// Its name (`term`, `json`, `svg`, `csv`, `html`, `metrics`), as `--format` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Format::Term => "term",
            Format::Json => "json",
            Format::Svg => "svg",
            Format::Csv => "csv",
            Format::Html => "html",
            Format::Metrics => "metrics",
        }
    }

    /// Whether it renders one record only (a plot, a table, a page, a scrape), not a
    /// sequence of them one after the other as `term` and `json` do.
    pub fn one_record(self) -> bool {
        !matches!(self, Format::Term | Format::Json)
    }
}

impl std::str::FromStr for Format {
    type Err = String;

    /// The format of a [`Format::name`]; errors naming the names allowed.
    fn from_str(s: &str) -> Result<Format, String> {
        Format::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Format::ALL.iter().map(|f| f.name()).collect();
                format!("format \"{s}\": allowed {}", names.join(", "))
            })
    }
}

/// Renders `rec` in `format` into `w`; `explain` adds each figure's source (terminal).
pub fn render(w: &mut dyn Write, rec: &Record, format: Format, explain: bool) -> io::Result<()> {
    match format {
        Format::Term => term::record(w, rec, explain),
        Format::Json => json::record(w, rec),
        Format::Svg => svg::record(w, rec),
        Format::Csv => csv::record(w, rec),
        Format::Html => html::record(w, rec),
        Format::Metrics => w.write_all(metrics::record_text(rec, None).as_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::Format;

    #[test]
    fn every_format_is_read_back_from_its_name() {
        for f in Format::ALL {
            assert_eq!(f.name().parse::<Format>(), Ok(f));
        }
        assert_eq!(
            "pdf".parse::<Format>().unwrap_err(),
            "format \"pdf\": allowed term, json, svg, csv, html, metrics"
        );
        let one: Vec<&str> = Format::ALL
            .into_iter()
            .filter(|f| f.one_record())
            .map(Format::name)
            .collect();
        assert_eq!(one, ["svg", "csv", "html", "metrics"]);
    }
}
