//! Host settings applied for a run and always restored: originals are journaled to disk
//! before the first change, restored when the guard drops (normal end, error, Ctrl-C,
//! panic), and restored at the next start of tpslab if it died (SIGKILL, crash).

use crate::EngineError;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The journal of original values.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Journal {
    /// PID of the tpslab process that changed the settings.
    pub pid: u32,
    /// (sysctl name, original value).
    pub sysctls: Vec<(String, String)>,
}

/// Directory of the journal: $TPSLAB_STATE_DIR, else /var/lib/tpslab (root) or
/// $XDG_RUNTIME_DIR / the temp dir.
pub fn state_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("TPSLAB_STATE_DIR") {
        return PathBuf::from(d);
    }
    if tpslab_net::is_root() {
        PathBuf::from("/var/lib/tpslab")
    } else {
        std::env::var_os("XDG_RUNTIME_DIR")
            .map_or_else(std::env::temp_dir, PathBuf::from)
            .join("tpslab")
    }
}

fn journal_path() -> PathBuf {
    state_dir().join("host-settings-journal.json")
}

/// Writes a sysctl (like `sysctl -w name=value`).
pub fn write_sysctl(name: &str, value: &str) -> Result<(), EngineError> {
    crate::env::write_sysctl(name, value)
        .map_err(|e| EngineError::Other(format!("sysctl -w {name}={value}: {e}")))
}

fn read_sysctl(name: &str) -> Result<String, EngineError> {
    crate::env::read_sysctl(name)
        .ok_or_else(|| EngineError::Other(format!("sysctl {name}: cannot read it")))
}

fn pid_is_tpslab(pid: u32) -> bool {
    pid != std::process::id()
        && std::fs::read_link(format!("/proc/{pid}/exe"))
            .ok()
            .zip(std::env::current_exe().ok())
            .is_some_and(|(a, b)| a == b)
}

/// Restores settings left by a tpslab that died. Returns what was restored (empty when
/// there was no journal, or its owner is still running).
pub fn recover() -> Result<Vec<(String, String)>, EngineError> {
    let path = journal_path();
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Ok(vec![]);
    };
    let j: Journal = serde_json::from_str(&text).map_err(|e| {
        EngineError::Other(format!(
            "{}: {e}; remove it after checking the sysctls it names",
            path.display()
        ))
    })?;
    if pid_is_tpslab(j.pid) {
        return Ok(vec![]);
    }
    for (k, v) in &j.sysctls {
        write_sysctl(k, v)?;
    }
    std::fs::remove_file(&path)
        .map_err(|e| EngineError::Other(format!("remove {}: {e}", path.display())))?;
    Ok(j.sysctls)
}

/// Changed host settings; restores the originals on drop.
pub struct HostGuard {
    originals: Vec<(String, String)>,
    restored: bool,
}

impl HostGuard {
    /// Journals the current values of `settings`, then applies them.
    pub fn apply(settings: &[(String, String)]) -> Result<HostGuard, EngineError> {
        let mut originals = vec![];
        for (k, _) in settings {
            originals.push((k.clone(), read_sysctl(k)?));
        }
        let dir = state_dir();
        std::fs::create_dir_all(&dir)
            .map_err(|e| EngineError::Other(format!("create {}: {e}", dir.display())))?;
        let j = Journal {
            pid: std::process::id(),
            sysctls: originals.clone(),
        };
        let path = journal_path();
        let tmp = path.with_extension("tmp");
        let write = || -> std::io::Result<()> {
            use std::io::Write;
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(serde_json::to_string_pretty(&j).unwrap().as_bytes())?;
            f.sync_all()?;
            std::fs::rename(&tmp, &path)
        };
        write()
            .map_err(|e| EngineError::Other(format!("write journal {}: {e}", path.display())))?;
        let mut guard = HostGuard {
            originals,
            restored: false,
        };
        for (k, v) in settings {
            if let Err(e) = write_sysctl(k, v) {
                guard.restore();
                return Err(e);
            }
        }
        Ok(guard)
    }

    /// The values that will be restored.
    pub fn originals(&self) -> &[(String, String)] {
        &self.originals
    }

    /// Restores the originals and removes the journal (idempotent).
    pub fn restore(&mut self) {
        if self.restored {
            return;
        }
        self.restored = true;
        let mut ok = true;
        for (k, v) in &self.originals {
            if let Err(e) = write_sysctl(k, v) {
                eprintln!(
                    "tpslab: could not restore {k}={v}: {e}; the journal {} keeps it",
                    journal_path().display()
                );
                ok = false;
            }
        }
        if ok {
            let _ = std::fs::remove_file(journal_path());
        }
    }
}

impl Drop for HostGuard {
    fn drop(&mut self) {
        self.restore();
    }
}
