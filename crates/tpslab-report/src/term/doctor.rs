//! `tpslab doctor` in a terminal: the sysctl files in the order they are applied, then
//! the findings, errors first, each with its evidence and the line that fixes it.

use std::io::{self, Write};
use tpslab_analysis::doctor::{DoctorRecord, Severity};
use tpslab_proc::sysctl_conf::ConfEntry;

/// The whole record, as `tpslab doctor` printed it.
pub fn record(w: &mut dyn Write, r: &DoctorRecord) -> io::Result<()> {
    writeln!(
        w,
        "tpslab doctor: {} sysctl file(s) under {}, in the order they are applied at boot (later wins):",
        r.files.len(),
        r.root
    )?;
    for f in &r.files {
        let n = f
            .lines
            .iter()
            .filter(|l| matches!(l.entry, ConfEntry::Set { .. }))
            .count();
        writeln!(w, "  {} ({n} setting(s))", f.path)?;
    }
    for (masked, by) in &r.masked {
        writeln!(w, "  {masked}: not applied, masked by {by}")?;
    }
    let count = |s: Severity| r.findings.iter().filter(|f| f.severity == s).count();
    writeln!(w)?;
    for f in &r.findings {
        let tag = match f.severity {
            Severity::Error => "ERROR",
            Severity::Warn => "WARN ",
            Severity::Info => "NOTE ",
        };
        writeln!(w, "{tag} {}", f.what)?;
        for e in &f.evidence {
            writeln!(w, "      {e}")?;
        }
        if let Some(x) = &f.fix {
            writeln!(w, "      fix: {x}")?;
        }
    }
    writeln!(
        w,
        "{} error(s), {} warning(s), {} note(s); running values from /proc/sys of this host",
        count(Severity::Error),
        count(Severity::Warn),
        count(Severity::Info)
    )
}
