//! The run of a command whose flags and plan are [`tpslab_cli::doctor`]:
//! `tpslab doctor`: audits the sysctl files a host applies at boot, the network settings
//! it runs with and its NICs, for the workload stated with `--for`. Reads only; changes
//! nothing (`--write-snippet` writes a sysctl.d file for a person to review).

use crate::out;
use anyhow::Result;
use std::io::Write;
use std::process::ExitCode;
use tpslab_cli::doctor::DoctorArgs;
use tpslab_record::Body;

/// Runs `tpslab doctor`: the audit, its report, the snippet, the record, the gate.
pub(crate) fn run(a: DoctorArgs) -> Result<ExitCode> {
    let plan = a.plan()?;
    let rec = tpslab_run::doctor::run(&plan.setup)?;
    let Body::Doctor(d) = &rec.body else {
        unreachable!("a doctor record")
    };
    let mut stdout = std::io::stdout().lock();
    crate::out::fitted(|o| tpslab_report::term::doctor::record(o, d))?;
    if let Some(p) = &a.write_snippet {
        if tpslab_run::doctor::write_snippet(&rec, p)? {
            writeln!(stdout, "sysctl.d snippet written to {}", p.display())?;
        } else {
            writeln!(stdout, "no sysctl to change: no snippet written")?;
        }
    }
    let failing = tpslab_analysis::doctor::failing(&d.findings, plan.fail_on);
    drop(stdout);
    out::emit_files(&rec, &a.record)?;
    if failing > 0 {
        let name = a.fail_on.as_deref().unwrap_or_default();
        eprintln!("tpslab: doctor: {failing} finding(s) at --fail-on {name} or above");
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}
