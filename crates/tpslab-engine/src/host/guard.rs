//! Host settings applied for a run and always restored.
//!
//! - Before the first change, the original values are journaled to disk (with the boot id
//!   and the values applied) and an exclusive lock is taken, so two tpslab processes never
//!   change host settings at once.
//! - The guard restores them when it drops (normal end, error, panic), and
//!   [`restore_now`] does it from a signal handler's thread before exiting.
//! - A tpslab that died (SIGKILL, crash) leaves the journal; [`recover`] at the next start
//!   restores each setting that still holds the value tpslab applied, on the same boot,
//!   and leaves alone what someone changed since (e.g. a persisted sysctl.d after reboot).

use crate::EngineError;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::PathBuf;
use std::sync::Mutex;

/// One changed setting.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    /// Sysctl name (dotted).
    pub name: String,
    /// Value before tpslab changed it.
    pub original: String,
    /// Value tpslab applied.
    pub applied: String,
}

/// The journal of changed settings.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Journal {
    /// PID of the tpslab process that changed the settings.
    pub pid: u32,
    /// /proc/sys/kernel/random/boot_id when they were changed.
    pub boot_id: String,
    /// The changes.
    pub changes: Vec<Change>,
}

/// What a restore did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Restored {
    /// (name, value) written back.
    pub restored: Vec<(String, String)>,
    /// Settings left alone or that could not be written, with the reason.
    pub skipped: Vec<String>,
}

use tpslab_plan::sysctl::canonical;

/// Only settings tpslab itself changes are ever written back from a journal.
fn allowed(name: &str, value: &str) -> bool {
    tpslab_plan::sysctl::SYSCTLS.contains(&name) && canonical(value).is_some()
}

/// Directory of the journal and lock: $TPSLAB_STATE_DIR, else /var/lib/tpslab (root) or
/// $XDG_RUNTIME_DIR/tpslab or the temp dir.
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

fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// Takes the exclusive lock of the state directory; None when another process holds it.
fn try_lock() -> Result<Option<File>, EngineError> {
    let dir = state_dir();
    // The user's alone (0700); the lock is never opened through a link.
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .map_err(|e| EngineError::os(format!("create {}", dir.display()), e))?;
    let path = dir.join("lock");
    let f = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .map_err(|e| EngineError::os(format!("open {}", path.display()), e))?;
    match f.try_lock() {
        Ok(()) => Ok(Some(f)),
        Err(std::fs::TryLockError::WouldBlock) => Ok(None),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(EngineError::os(format!("lock {}", path.display()), e))
        }
    }
}

/// How long a change waits for `$TPSLAB_HOST_LOCK` ([`host_lock`]).
pub const HOST_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(600);

/// `$TPSLAB_HOST_LOCK`, when set: the path of a file that a test suite or an orchestrator
/// locks (`flock`, exclusive) while it changes host settings or checks them unchanged.
/// A change waits for its exclusive lock (polled every 20 ms, at most [`HOST_LOCK_WAIT`])
/// before taking tpslab's own; a holder that runs tpslab itself runs it without the
/// variable. `None` when the variable is unset. Errors: the file cannot be opened (never
/// through a link) or locked, or the wait ran out (naming the holders' PIDs from
/// `/proc/locks`).
fn host_lock() -> Result<Option<File>, EngineError> {
    match std::env::var_os("TPSLAB_HOST_LOCK") {
        Some(path) => lock_waiting(&PathBuf::from(path), HOST_LOCK_WAIT).map(Some),
        None => Ok(None),
    }
}

/// An exclusive flock on `path` (created 0600, never through a link), waited for at most
/// `wait`, polled every 20 ms.
fn lock_waiting(path: &std::path::Path, wait: std::time::Duration) -> Result<File, EngineError> {
    let f = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| EngineError::os(format!("open $TPSLAB_HOST_LOCK {}", path.display()), e))?;
    let start = std::time::Instant::now();
    loop {
        match f.try_lock() {
            Ok(()) => return Ok(f),
            Err(std::fs::TryLockError::WouldBlock) => {}
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(EngineError::os(
                    format!("lock $TPSLAB_HOST_LOCK {}", path.display()),
                    e,
                ))
            }
        }
        if start.elapsed() >= wait {
            return Err(EngineError::Other(format!(
                "waited {:.1} s for $TPSLAB_HOST_LOCK {} (held by PID {:?})",
                wait.as_secs_f64(),
                path.display(),
                lock_holders(&f)
            )));
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The PIDs holding an flock on `f`, from `/proc/locks` (empty when unreadable).
fn lock_holders(f: &File) -> Vec<u32> {
    use std::os::unix::fs::MetadataExt;
    let (Ok(m), Ok(text)) = (f.metadata(), std::fs::read_to_string("/proc/locks")) else {
        return vec![];
    };
    // glibc's dev_t: major in bits 8-19 and 44-63, minor in bits 0-7 and 20-43.
    let dev = m.dev();
    let major = (((dev >> 8) & 0xfff) | ((dev >> 32) & 0xffff_f000)) as u32;
    let minor = ((dev & 0xff) | ((dev >> 12) & 0xffff_ff00)) as u32;
    tpslab_proc::locks::flock_holders(&text, major, minor, m.ino())
}

/// Writes `changes` back to their originals where they still hold the applied value.
fn undo(j: &Journal) -> Restored {
    let mut r = Restored::default();
    let same_boot = j.boot_id == boot_id();
    for c in &j.changes {
        if !allowed(&c.name, &c.original) {
            r.skipped
                .push(format!("{}: not a setting tpslab changes; ignored", c.name));
            continue;
        }
        if !same_boot {
            r.skipped.push(format!(
                "{}: changed before a reboot; left at its current value",
                c.name
            ));
            continue;
        }
        let now = crate::host::env::read_sysctl(&c.name).unwrap_or_default();
        // Compared as numbers, field by field (a journal may hold "020000"-style text).
        if canonical(&now).is_none() || canonical(&now) != canonical(&c.applied) {
            r.skipped.push(format!(
                "{}: now {now}, not the {} tpslab applied (changed since); left alone",
                c.name, c.applied
            ));
            continue;
        }
        match crate::host::env::write_sysctl(&c.name, &c.original) {
            Ok(()) => r.restored.push((c.name.clone(), c.original.clone())),
            Err(e) => r
                .skipped
                .push(format!("{}: could not write {}: {e}", c.name, c.original)),
        }
    }
    r
}

/// Restores settings left by a tpslab that died, unless a live tpslab holds the lock.
/// Never fails a command: problems come back as `skipped` lines.
pub fn recover() -> Restored {
    let path = journal_path();
    if !path.exists() {
        return Restored::default();
    }
    let _lock = match try_lock() {
        Ok(Some(l)) => l,
        Ok(None) => return Restored::default(), // its owner is running
        Err(e) => {
            return Restored {
                skipped: vec![e.to_string()],
                ..Default::default()
            }
        }
    };
    let j: Journal = match std::fs::read_to_string(&path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
    {
        Some(j) => j,
        None => {
            return Restored {
                skipped: vec![format!(
                    "{}: unreadable journal; check the sysctls it names, then remove it",
                    path.display()
                )],
                ..Default::default()
            }
        }
    };
    let r = undo(&j);
    let _ = std::fs::remove_file(&path);
    r
}

/// The live guard of this process, for [`restore_now`].
static LIVE: Mutex<Option<Journal>> = Mutex::new(None);

/// Restores this process's changed settings at once (from a signal-handling thread, before
/// exiting on a second Ctrl-C). The guard's own restore then finds nothing to do.
pub fn restore_now() -> Restored {
    let j = LIVE.lock().unwrap_or_else(|e| e.into_inner()).take();
    match j {
        Some(j) => {
            let r = undo(&j);
            let _ = std::fs::remove_file(journal_path());
            r
        }
        None => Restored::default(),
    }
}

/// Changed host settings; restores the originals on drop.
pub struct HostGuard {
    _lock: File,
    /// `$TPSLAB_HOST_LOCK`'s lock, when the variable is set ([`host_lock`]).
    _host: Option<File>,
}

impl HostGuard {
    /// Journals the current values of `settings`, then applies them (first waiting for
    /// `$TPSLAB_HOST_LOCK` when it is set: [`host_lock`]). Errors: another tpslab is
    /// changing host settings, the host lock's wait ran out, a setting cannot be read or
    /// written (the ones already written are restored).
    pub fn apply(settings: &[(String, String)]) -> Result<HostGuard, EngineError> {
        let host = host_lock()?;
        let lock = try_lock()?.ok_or_else(|| {
            EngineError::Other(format!(
                "another tpslab is changing host settings (lock {} held)",
                state_dir().join("lock").display()
            ))
        })?;
        let mut changes = vec![];
        for (name, value) in settings {
            if !allowed(name, value) {
                return Err(EngineError::Other(format!(
                    "sysctl {name}={value}: allowed {} with numeric values",
                    tpslab_plan::sysctl::SYSCTLS.join(", ")
                )));
            }
            let original = crate::host::env::read_sysctl(name)
                .ok_or_else(|| EngineError::Other(format!("sysctl {name}: cannot read it")))?;
            // Written in canonical decimal: the journal holds exactly what the kernel got.
            changes.push(Change {
                name: name.clone(),
                original,
                applied: canonical(value).unwrap_or_default(),
            });
        }
        let j = Journal {
            pid: std::process::id(),
            boot_id: boot_id(),
            changes,
        };
        let path = journal_path();
        let tmp = path.with_extension(format!("{}.tmp", std::process::id()));
        let write = || -> std::io::Result<()> {
            use std::io::Write;
            // A new file of ours (O_EXCL: never through a name planted in the folder).
            let _ = std::fs::remove_file(&tmp);
            let mut f = File::options()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)?;
            f.write_all(serde_json::to_string_pretty(&j).unwrap().as_bytes())?;
            f.sync_all()?;
            std::fs::rename(&tmp, &path)
        };
        write().map_err(|e| EngineError::os(format!("write journal {}", path.display()), e))?;
        *LIVE.lock().unwrap_or_else(|e| e.into_inner()) = Some(j.clone());
        let guard = HostGuard {
            _lock: lock,
            _host: host,
        };
        for (i, c) in j.changes.iter().enumerate() {
            if let Err(e) = crate::host::env::write_sysctl(&c.name, &c.applied) {
                // Only what was written is restored: the failed one never changed, so it
                // is not "changed since" either.
                if let Some(live) = LIVE.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
                    live.changes.truncate(i);
                }
                let mut g = guard;
                let done = g.restore();
                return Err(EngineError::Other(format!(
                    "sysctl -w {}={}: {e}{}",
                    c.name,
                    c.applied,
                    if done.skipped.is_empty() {
                        String::new()
                    } else {
                        format!("; not restored: {}", done.skipped.join("; "))
                    }
                )));
            }
        }
        Ok(guard)
    }

    /// Checks that the kernel takes `name` = `value` as given, before a run depends on it:
    /// applies it alone as [`HostGuard::apply`] does (journaled, so a crash in between is
    /// recovered), reads it back, and restores the original at once.
    /// Errors: the kernel refuses the write (EINVAL for a value out of its range, say) or
    /// keeps another value (message "the kernel keeps X"); the setting cannot be read;
    /// another tpslab holds the lock. The host is restored in every case.
    pub fn check_accepted(name: &str, value: &str) -> Result<(), EngineError> {
        let mut g = HostGuard::apply(&[(name.to_string(), value.to_string())])?;
        let now = crate::host::env::read_sysctl(name).unwrap_or_default();
        let r = g.restore();
        if canonical(&now) != canonical(value) {
            return Err(EngineError::Other(format!(
                "the kernel keeps {now} when {value} is written"
            )));
        }
        if !r.skipped.is_empty() {
            return Err(EngineError::Other(format!(
                "not restored: {}",
                r.skipped.join("; ")
            )));
        }
        Ok(())
    }

    /// Restores the originals and removes the journal; returns what was done (empty when
    /// already restored).
    pub fn restore(&mut self) -> Restored {
        let r = restore_now();
        for s in &r.skipped {
            eprintln!("tpslab: host setting not restored: {s}");
        }
        r
    }
}

impl Drop for HostGuard {
    fn drop(&mut self) {
        self.restore();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lock this process holds is found in /proc/locks under its PID (the device
    /// number decoded as the kernel prints it).
    #[test]
    fn a_lock_is_found_with_its_holder() {
        let path = std::env::temp_dir().join(format!("tpslab-guard-lock-{}", std::process::id()));
        let f = File::create(&path).unwrap();
        f.lock().unwrap();
        assert_eq!(lock_holders(&f), vec![std::process::id()]);
        // Held (by another open file, as another process would): the wait runs out and
        // names the holder; released, it is taken.
        let e = lock_waiting(&path, std::time::Duration::from_millis(100))
            .unwrap_err()
            .to_string();
        let me = std::process::id();
        assert!(e.contains(&format!("held by PID [{me}]")), "{e}");
        assert!(e.contains("waited 0.1 s"), "{e}");
        let t = std::time::Instant::now();
        let waiter = std::thread::spawn({
            let path = path.clone();
            move || lock_waiting(&path, std::time::Duration::from_secs(5)).map(|_| t.elapsed())
        });
        std::thread::sleep(std::time::Duration::from_millis(150));
        drop(f);
        let took = waiter.join().unwrap().unwrap();
        assert!(took >= std::time::Duration::from_millis(150), "{took:?}");
        // A link in its place is never followed.
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", &path).unwrap();
        assert!(lock_waiting(&path, std::time::Duration::ZERO).is_err());
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn values_are_read_as_the_kernel_reads_them() {
        assert_eq!(canonical("020000").as_deref(), Some("8192"));
        assert_eq!(canonical("0x10").as_deref(), Some("16"));
        assert_eq!(canonical("0").as_deref(), Some("0"));
        assert_eq!(
            canonical("4096\t131072  6291456").as_deref(),
            Some("4096 131072 6291456")
        );
        assert_eq!(canonical(""), None);
        assert_eq!(canonical("12abc"), None);
        assert_eq!(canonical("09"), None); // not octal
        assert_eq!(canonical("-1"), None);
        assert_eq!(canonical("+5"), None);
        assert_eq!(canonical("0x+5"), None);
        assert_eq!(canonical("0x"), None);
    }

    fn write_journal(j: &Journal) {
        std::fs::create_dir_all(state_dir()).unwrap();
        std::fs::write(journal_path(), serde_json::to_string(j).unwrap()).unwrap();
    }

    /// One test: the state directory comes from an environment variable.
    #[test]
    fn recovery_only_undoes_what_tpslab_applied_and_respects_the_lock() {
        let dir = std::env::temp_dir().join(format!("tpslab-guard-test-{}", std::process::id()));
        std::env::set_var("TPSLAB_STATE_DIR", &dir);
        let name = "net.core.rmem_default";
        let Some(now) = crate::host::env::read_sysctl(name) else {
            eprintln!("skipping: {name} not readable here");
            return;
        };
        let change = |applied: &str| Change {
            name: name.into(),
            original: "1".into(),
            applied: applied.into(),
        };
        // Someone changed it since tpslab applied "999": left alone, never written.
        write_journal(&Journal {
            pid: 1,
            boot_id: boot_id(),
            changes: vec![change("999")],
        });
        let r = recover();
        assert!(r.restored.is_empty());
        assert!(r.skipped[0].contains("changed since"), "{:?}", r.skipped);
        assert!(!journal_path().exists());
        // Another boot: left alone.
        write_journal(&Journal {
            pid: 1,
            boot_id: "other-boot".into(),
            changes: vec![change(&now)],
        });
        let r = recover();
        assert!(
            r.restored.is_empty() && r.skipped[0].contains("reboot"),
            "{:?}",
            r.skipped
        );
        // A name tpslab never sets: ignored.
        write_journal(&Journal {
            pid: 1,
            boot_id: boot_id(),
            changes: vec![Change {
                name: "kernel.panic".into(),
                original: "1".into(),
                applied: "0".into(),
            }],
        });
        let r = recover();
        assert!(
            r.restored.is_empty() && r.skipped[0].contains("not a setting"),
            "{:?}",
            r.skipped
        );
        assert_eq!(
            crate::host::env::read_sysctl(name).unwrap(),
            now,
            "nothing was written"
        );
        // While another process holds the lock, apply refuses and recover waits.
        let held = try_lock().unwrap().expect("free lock");
        let e = HostGuard::apply(&[(name.to_string(), now.clone())])
            .err()
            .expect("refused");
        assert!(e.to_string().contains("another tpslab"), "{e}");
        write_journal(&Journal {
            pid: 1,
            boot_id: boot_id(),
            changes: vec![change(&now)],
        });
        assert_eq!(recover(), Restored::default());
        assert!(journal_path().exists(), "a live owner's journal is kept");
        drop(held);
        std::fs::remove_file(journal_path()).unwrap();
        // A link planted at the lock's name is not opened (nor its target created).
        std::fs::remove_file(dir.join("lock")).unwrap();
        let victim = dir.join("victim");
        std::os::unix::fs::symlink(&victim, dir.join("lock")).unwrap();
        assert!(try_lock().is_err());
        assert!(!victim.exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
