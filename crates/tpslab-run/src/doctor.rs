//! `doctor`: audits the sysctl files a tree applies at boot, the network settings this host
//! runs with and its NICs, for a workload; reads only. The sysctl.d snippet it proposes is
//! written only where asked ([`write_snippet`]), never over a file.

use crate::Started;
use anyhow::{anyhow, Result};
use std::path::{Path, PathBuf};
use tpslab_analysis::doctor::{self, judged_paths};
use tpslab_engine::host::hostconf;
use tpslab_plan::doctor::Workload;
use tpslab_proc::pool_conf::PoolConf;
use tpslab_record::doctor::DoctorRecord;
use tpslab_record::{Body, Record};

/// A validated audit.
#[derive(Debug, Clone, PartialEq)]
pub struct DoctorSetup {
    /// The tree whose sysctl files are audited (`/`: this host's); an existing folder.
    pub root: PathBuf,
    /// The workload judged against (None: the host alone).
    pub workload: Option<Workload>,
    /// Connection-pool files judged against the workload's idle timeout (`--for pool`).
    pub pools: Vec<PoolConf>,
}

/// Audits: the tree's sysctl files (and those masked), the running value of every key they
/// set and every key judged, the keys of this kernel, a UDP workload's truesize measured
/// on loopback, the NICs; then every finding. Returns the record (kind doctor). Errors:
/// a sysctl file that cannot be read.
pub fn run(setup: &DoctorSetup) -> Result<Record> {
    let started = Started::now();
    let (files, masked) = hostconf::sysctl_files(&setup.root)?;
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
    let truesize = match setup.workload {
        Some(Workload::Udp { size_bytes, .. }) => Some(
            tpslab_engine::host::probe::probe_truesize(size_bytes as usize, None)
                .map_err(|e| e.to_string()),
        ),
        _ => None,
    };
    let mut rec = DoctorRecord {
        root: setup.root.display().to_string(),
        files,
        masked,
        known: hostconf::known(&running),
        running,
        suggested,
        memory_bytes: hostconf::memory_bytes(),
        page_bytes: tpslab_net::page_size(),
        workload: setup.workload,
        truesize,
        host: hostconf::host_facts(),
        pools: setup.pools.clone(),
        findings: vec![],
    };
    rec.findings = doctor::judge(&rec);
    Ok(Record::with_meta(started.meta(false), Body::Doctor(rec)))
}

/// Writes the sysctl.d file that applies every sysctl fix of a doctor record `rec` to
/// `path` (a new file: never over one, nor through a link in any component), headed by what proposed it
/// (the workload, the host, the time). Returns false when no sysctl is to change (nothing
/// written). Errors: `--write-snippet PATH: ...` (it exists, the folder is missing).
pub fn write_snippet(rec: &Record, path: &Path) -> Result<bool> {
    let Body::Doctor(d) = &rec.body else {
        return Err(anyhow!("--write-snippet: not a doctor record"));
    };
    let header = format!(
        "sysctl settings proposed by tpslab doctor{} on {} ({}): review before installing in /etc/sysctl.d/",
        d.workload.map_or(String::new(), |w| format!(" --for {}", w.describe())),
        rec.meta.hostname,
        humantime::format_rfc3339_seconds(std::time::SystemTime::now())
    );
    let Some(text) = doctor::snippet(&d.findings, &header) else {
        return Ok(false);
    };
    crate::outfile::write_new("--write-snippet", path, text.as_bytes())?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s1() -> DoctorSetup {
        DoctorSetup {
            root: Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/doctor/s1"),
            workload: None,
            pools: vec![],
        }
    }

    #[test]
    fn s1s_files_are_audited_and_the_unprefixed_key_is_found() {
        let rec = run(&s1()).unwrap();
        let Body::Doctor(d) = &rec.body else {
            panic!("not a doctor record")
        };
        // Six files, /usr/lib/sysctl.d/60-udp.conf masked by /etc's of the same name.
        assert_eq!((d.files.len(), d.masked.len()), (5, 1), "{:?}", d.masked);
        // `core.rmem_default` in sysctl.conf is not a key: net. is missing.
        assert!(
            d.findings
                .iter()
                .any(|f| f.what.contains("core.rmem_default")),
            "{:?}",
            d.findings
        );
    }

    #[test]
    fn a_snippet_is_a_new_file_with_the_fixes_or_nothing() {
        let rec = run(&s1()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("60-tpslab.conf");
        // S1's `core.rmem_default` is fixed as `net.core.rmem_default`.
        assert!(write_snippet(&rec, &p).unwrap());
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(text.contains("proposed by tpslab doctor on "), "{text}");
        assert!(
            text.contains("\nnet.core.rmem_default = 4608000\n"),
            "{text}"
        );
        let e = write_snippet(&rec, &p).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("--write-snippet {}: ", p.display())),
            "{e}"
        );
        // A record without a sysctl to change writes nothing.
        let mut clean = rec.clone();
        if let Body::Doctor(d) = &mut clean.body {
            d.findings.clear();
        }
        let q = dir.path().join("none.conf");
        assert!(!write_snippet(&clean, &q).unwrap());
        assert!(!q.exists());
    }
}
