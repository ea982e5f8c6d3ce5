//! `tpslab doctor`: audits the sysctl files a host applies at boot against each other and
//! against what runs now. Reads only; changes nothing.

use crate::out::{self, write_json};
use anyhow::{bail, Result};
use clap::Args;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use tpslab_analysis::doctor::{audit, judged_paths, DoctorRecord};
use tpslab_analysis::record::{Body, Record};
use tpslab_engine::hostconf;

#[derive(Args, Debug)]
pub(crate) struct DoctorArgs {
    /// The tree whose sysctl files to audit (a container image, a config repository);
    /// running values always come from this host's /proc/sys.
    #[arg(long, default_value = "/")]
    root: PathBuf,
    #[command(flatten)]
    record: crate::flags::RecordFlag,
}

/// Runs `tpslab doctor`.
pub(crate) fn run(a: DoctorArgs) -> Result<ExitCode> {
    if let Some(p) = &a.record.json {
        out::check_output("--json", p, false)?;
    }
    if !a.root.is_dir() {
        bail!("--root {}: not a folder", a.root.display());
    }
    let started = crate::out::Started::now();
    let (files, masked) = hostconf::sysctl_files(&a.root)?;
    let paths = files
        .iter()
        .flat_map(|f| f.lines.iter().filter_map(|l| l.entry.path()))
        .chain(judged_paths().into_iter().map(String::from));
    let running = hostconf::running(paths);
    let suggested = running
        .iter()
        .filter(|(_, v)| v.is_none())
        .filter_map(|(p, _)| hostconf::suggest(p).map(|k| (p.clone(), k)))
        .collect();
    let findings = audit(&files, &running, &suggested);
    let rec = DoctorRecord {
        root: a.root.display().to_string(),
        files,
        masked,
        running,
        suggested,
        findings,
    };
    let mut stdout = std::io::stdout().lock();
    tpslab_report::term::doctor::record(&mut stdout, &rec)?;
    if let Some(p) = &a.record.json {
        let meta = started.meta(false);
        write_json(p, &Record::with_meta(meta, Body::Doctor(rec)))?;
        writeln!(stdout, "record written to {}", p.display())?;
    }
    Ok(ExitCode::SUCCESS)
}
