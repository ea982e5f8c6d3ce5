//! `tpslab doctor` in a terminal: the sysctl files in the order they are applied, the
//! running network settings with their scope, the workload and the host's NICs, then the
//! findings, errors first, each with its evidence and what fixes it.

use std::io::{self, Write};
use tpslab_proc::sysctl_conf::ConfEntry;
use tpslab_record::doctor::{DoctorRecord, Finding, Scope, Severity};

/// The whole record, as `tpslab doctor` printed it.
pub fn record(w: &mut dyn Write, r: &DoctorRecord) -> io::Result<()> {
    files(w, r)?;
    running(w, r)?;
    host(w, r)?;
    writeln!(w)?;
    findings(w, &r.findings)?;
    let count = |s: Severity| r.findings.iter().filter(|f| f.severity == s).count();
    writeln!(
        w,
        "{} error(s), {} warning(s), {} note(s); running values from /proc/sys of this host",
        count(Severity::Error),
        count(Severity::Warn),
        count(Severity::Info)
    )
}

/// Findings, one per paragraph: severity, what, evidence, fix.
pub(crate) fn findings(w: &mut dyn Write, findings: &[Finding]) -> io::Result<()> {
    for f in findings {
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
    Ok(())
}

fn files(w: &mut dyn Write, r: &DoctorRecord) -> io::Result<()> {
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
    Ok(())
}

fn running(w: &mut dyn Write, r: &DoctorRecord) -> io::Result<()> {
    if r.known.is_empty() {
        return Ok(());
    }
    writeln!(
        w,
        "\nNetwork settings running now (netns: each network namespace has its own; host: one for the host):"
    )?;
    let width = r.known.iter().map(|k| k.key.len()).max().unwrap_or(0);
    for k in &r.known {
        let scope = match k.scope {
            Some(Scope::Netns) => "netns",
            Some(Scope::Host) => "host ",
            None => "?    ",
        };
        let value = k.value.as_deref().unwrap_or("(not on this kernel)");
        writeln!(w, "  {:<width$} {scope} {value:<24} {}", k.key, k.what)?;
    }
    if r.known.iter().all(|k| k.scope.is_none()) {
        writeln!(
            w,
            "  (scope not checked: it needs root to look in a fresh network namespace)"
        )?;
    }
    Ok(())
}

fn host(w: &mut dyn Write, r: &DoctorRecord) -> io::Result<()> {
    if let Some(wl) = &r.workload {
        write!(w, "\nWorkload: --for {}", wl.describe())?;
        match &r.truesize {
            Some(Ok(p)) => writeln!(
                w,
                " (this kernel charges {} B per queued {}-byte datagram: probe on loopback)",
                p.truesize_bytes(),
                p.size_bytes
            )?,
            Some(Err(e)) => writeln!(w, " (truesize probe failed: {e})")?,
            None => writeln!(w)?,
        }
    }
    let h = &r.host;
    writeln!(w, "\nHost: {} CPU(s)", h.cpus)?;
    for n in &h.nics {
        let ring =
            |x: Option<(u64, u64)>| x.map_or("?".to_string(), |(c, m)| format!("{c} of {m}"));
        let rps = if n
            .rps_cpus
            .iter()
            .all(|m| m.chars().all(|c| c == '0' || c == ','))
        {
            "RPS off".to_string()
        } else {
            format!("rps_cpus {}", n.rps_cpus.join(" "))
        };
        writeln!(
            w,
            "  {} ({}): RX ring {}, TX ring {}, {} receive queue(s), {rps}, {} drop counter(s) above 0",
            n.name,
            n.driver.as_deref().unwrap_or("driver ?"),
            ring(n.rx_ring),
            ring(n.tx_ring),
            n.rx_queues,
            n.drops.len()
        )?;
    }
    match h.irqbalance_pid {
        Some(pid) => writeln!(w, "  irqbalance running (PID {pid})")?,
        None => writeln!(w, "  irqbalance not running")?,
    }
    for (g, n) in &h.governors {
        writeln!(w, "  CPU frequency governor {g} on {n} CPU(s)")?;
    }
    for s in &h.skipped {
        writeln!(w, "  skipped: {s}")?;
    }
    Ok(())
}
