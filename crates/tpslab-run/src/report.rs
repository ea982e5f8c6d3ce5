//! `tpslab report FILE...`: saved records read back and rendered again through the report
//! layer the commands print with.

use anyhow::{anyhow, bail, Result};
use std::io::Write;
use std::path::{Path, PathBuf};
use tpslab_record::Record;
use tpslab_report::Format;

/// The records to render, how, and the HTML page to write instead.
#[derive(Debug)]
pub struct ReportPlan {
    /// The records, in the order given.
    pub records: Vec<Record>,
    /// The format on standard output.
    pub format: Format,
    /// Show the source counter of every figure (the terminal format).
    pub explain: bool,
    /// Write the one record as an HTML page here instead.
    pub html: Option<PathBuf>,
}

impl ReportPlan {
    /// Reads every file (a record each, [`crate::input::read_record`]); `--html` and the
    /// formats that render one record take one file. Errors: one line.
    pub fn read(
        files: &[PathBuf],
        format: Format,
        explain: bool,
        html: Option<&Path>,
    ) -> Result<ReportPlan> {
        let records = files
            .iter()
            .map(|p| crate::input::read_record("", p))
            .collect::<Result<Vec<_>>>()?;
        if html.is_some() && records.len() > 1 {
            bail!("--html renders one record; give one FILE");
        }
        if format.one_record() && records.len() > 1 {
            let one: Vec<&str> = Format::ALL
                .into_iter()
                .filter(|f| f.one_record())
                .map(Format::name)
                .collect();
            let (last, rest) = one.split_last().unwrap_or((&"", &[]));
            bail!(
                "--format {} and {last} render one record; give one FILE",
                rest.join(", ")
            );
        }
        Ok(ReportPlan {
            records,
            format,
            explain,
            html: html.map(Path::to_path_buf),
        })
    }

    /// Renders every record to `out` in the plan's format (terminal reports a blank line
    /// apart, their control characters escaped: a record may come from another host; the
    /// other formats are data, written as made). Errors: a format the record's kind has
    /// not (`--format svg: ...`), or the write.
    pub fn print(&self, out: &mut dyn Write) -> Result<()> {
        let format = self.format;
        for (i, rec) in self.records.iter().enumerate() {
            if i > 0 && format == Format::Term {
                writeln!(out)?;
            }
            let mut text = Vec::new();
            tpslab_report::render(&mut text, rec, format, self.explain)
                .and_then(|_| {
                    if format == Format::Term {
                        out.write_all(&tpslab_report::term::terminal_safe(&text))
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
        Ok(())
    }
}
