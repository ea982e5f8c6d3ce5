//! `--fail-on`'s thresholds at the top of a report (k6's summary): each condition as
//! given with a pass or fail mark and the figure it was judged on, from the record alone
//! (`tpslab_analysis::gate::marks`), so `tpslab report FILE` prints them again.

use std::io::{self, Write};
use tpslab_analysis::gate::{self, Outcome};

/// The thresholds block for `fail_on` (as given, None: nothing printed) judged on `o`,
/// the conditions parsed against `allowed` (a record read back whose text does not parse
/// says so in one line).
pub fn block(
    w: &mut dyn Write,
    fail_on: Option<&str>,
    allowed: &[&str],
    o: &Outcome,
) -> io::Result<()> {
    let Some(text) = fail_on else {
        return Ok(());
    };
    let conds = match gate::parse(text, allowed) {
        Ok(c) => c,
        Err(e) => return writeln!(w, "THRESHOLDS: not judged: {e}"),
    };
    let marks = gate::marks(o, &conds);
    let failed = marks.iter().filter(|m| !m.0).count();
    writeln!(
        w,
        "THRESHOLDS ({}): {}",
        gate::shown(text),
        match failed {
            0 => "all passed".to_string(),
            n => format!("{n} of {} FAILED", marks.len()),
        }
    )?;
    let width = marks.iter().map(|m| m.1.chars().count()).max().unwrap_or(0);
    for (pass, cond, read) in marks {
        writeln!(
            w,
            "  {} {cond:<width$}  {read}",
            if pass { "✓ pass" } else { "✗ FAIL" }
        )?;
    }
    Ok(())
}
