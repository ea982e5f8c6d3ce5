//! The JSON format: the record as written by `--json` (pretty-printed, one trailing
//! newline).

use std::io::{self, Write};
use tpslab_record::Record;

/// Writes `rec` as pretty-printed JSON and a newline.
pub fn record(w: &mut dyn Write, rec: &Record) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *w, rec)?;
    writeln!(w)
}
