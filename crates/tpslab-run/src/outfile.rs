//! Output files, created the way a root process on a shared host must: never through a
//! symbolic link another user could have planted (one in a 1777 or 0777 folder would
//! redirect the write to any file: refused before the run), a regular file always replaced
//! whole by a new one (written to a temporary file of an unpredictable name created with
//! `O_EXCL` beside it, then renamed into place: a hard link or a reader never sees half a
//! file, and nothing is written through another user's inode), mode 0644 (less the umask).
//! A FIFO or a character device (`/dev/null`, a pipe another program reads) is written in
//! place, opened without blocking on a FIFO nobody reads, with SIGPIPE held off so a reader
//! that leaves fails the write, not tpslab. A block device, socket or folder is refused.
//!
//! A link is followed only when it is the user's own or the system's, in a folder nobody
//! else can write to (`/dev/stdout`, a shell's `/dev/fd/63`, `latest.json -> run-7.json`
//! in one's own folder). Only the last component is checked: a folder on the path that is
//! itself a planted link is not detected (the kernel's fs.protected_symlinks covers the
//! sticky folders such as /tmp).

mod record;
pub use record::{json_stream, json_stream_http, write_files, Extra, Written};

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Why an output file was not written: one line, naming the flag and the path.
#[derive(Debug)]
pub struct OutError(pub String);

impl std::fmt::Display for OutError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for OutError {}

fn err(flag: &str, path: &Path, why: impl std::fmt::Display) -> OutError {
    OutError(format!("{flag} {}: {why}", path.display()))
}

/// What is at an output path now.
enum Dest {
    /// Nothing, or a regular file: a new file is renamed over it (at this path, or at the
    /// target of a link of the user's own).
    Replace(PathBuf),
    /// A FIFO or character device: written in place (at this path, or through a link of
    /// the user's own such as `/dev/stdout` or a shell's `/dev/fd/63`).
    InPlace { follow: bool },
}

/// Whether the link at `path` is one the user made or the system owns, in a folder no
/// one else can write to: owned by this user or by the folder's owner, the folder owned by
/// this user or root and writable by neither group nor others (`/dev/stdout`, `/dev/fd/N`
/// and a link in the user's own folder are; any link in /tmp or another 1777 or 0777
/// folder is not, whoever planted it).
fn trusted_link(path: &Path, link: &std::fs::Metadata) -> bool {
    let euid = rustix::process::geteuid().as_raw();
    let Ok(dir) = std::fs::metadata(folder(path)) else {
        return false;
    };
    (link.uid() == euid || link.uid() == dir.uid())
        && (dir.uid() == euid || dir.uid() == 0)
        && dir.mode() & 0o022 == 0
}

/// Whether `path` names an open descriptor (`/dev/stdout`, `/dev/fd/N`, `/proc/self/fd/N`).
fn through_descriptor(path: &Path) -> bool {
    path.starts_with("/dev")
        || path.starts_with("/proc")
        || std::fs::read_link(path).is_ok_and(|t| t.starts_with("/proc") || t.starts_with("/dev"))
}

/// What is at `path`, refusing a link someone else could have planted, a folder, a block
/// device or a socket.
fn dest(flag: &str, path: &Path) -> Result<Dest, OutError> {
    if path.file_name().is_none() || path.as_os_str().as_bytes().ends_with(b"/") {
        return Err(err(flag, path, "a folder name; give a file name"));
    }
    let meta = match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Dest::Replace(path.to_path_buf()))
        }
        Err(e) => return Err(err(flag, path, e)),
        Ok(m) => m,
    };
    let (t, follow) = if meta.file_type().is_symlink() {
        if !trusted_link(path, &meta) {
            return Err(err(
                flag,
                path,
                "a symbolic link in a folder others can write to, or not the user's own; \
                 tpslab never writes through one (another user may have planted it); give \
                 the real path, or - for standard output",
            ));
        }
        match std::fs::metadata(path) {
            // /dev/stdout or /dev/fd/N of a redirection to a file: replacing the file would
            // leave the shell's descriptor on the old one.
            Ok(m) if m.is_file() && through_descriptor(path) => {
                return Err(err(
                    flag,
                    path,
                    "a descriptor open on a regular file; give - or the file's own path",
                ))
            }
            // A link of the user's own to a file (or to nothing yet): the file it names.
            Ok(m) if m.is_file() => {
                return std::fs::canonicalize(path)
                    .map(Dest::Replace)
                    .map_err(|e| err(flag, path, e))
            }
            Ok(m) => (m.file_type(), true),
            Err(e) => return Err(err(flag, path, e)),
        }
    } else {
        (meta.file_type(), false)
    };
    if t.is_file() {
        Ok(Dest::Replace(path.to_path_buf()))
    } else if t.is_fifo() || t.is_char_device() {
        Ok(Dest::InPlace { follow })
    } else if t.is_dir() {
        Err(err(flag, path, "a folder; give a file name"))
    } else {
        Err(err(
            flag,
            path,
            "a block device or socket; allowed a regular file, a FIFO or a character device",
        ))
    }
}

/// The folder a file at `path` is created in.
fn folder(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// A new temporary file beside `path` (`O_EXCL`, a random name, mode 0644).
fn temporary(flag: &str, path: &Path) -> Result<tempfile::NamedTempFile, OutError> {
    let dir = folder(path);
    if !dir.is_dir() {
        return Err(err(
            flag,
            path,
            format_args!("folder {} does not exist", dir.display()),
        ));
    }
    tempfile::Builder::new()
        .prefix(".tpslab-")
        .suffix(".tmp")
        .permissions(std::fs::Permissions::from_mode(0o644))
        .tempfile_in(dir)
        .map_err(|e| err(flag, path, e))
}

/// Opens a FIFO or character device for writing in place: not through a link, not
/// blocking on a FIFO without a reader (ENXIO: said as such), then blocking again.
fn open_in_place(flag: &str, path: &Path, follow: bool) -> Result<File, OutError> {
    let flags = if follow {
        rustix::fs::OFlags::NONBLOCK
    } else {
        rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK
    };
    let f = OpenOptions::new()
        .write(true)
        .custom_flags(flags.bits() as i32)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(rustix::io::Errno::NXIO.raw_os_error()) {
                err(flag, path, "a FIFO that nobody reads")
            } else {
                err(flag, path, e)
            }
        })?;
    let t = f.metadata().map_err(|e| err(flag, path, e))?.file_type();
    if !(t.is_fifo() || t.is_char_device()) {
        return Err(err(flag, path, "changed while being opened; not written"));
    }
    rustix::fs::fcntl_setfl(&f, rustix::fs::OFlags::empty()).map_err(|e| err(flag, path, e))?;
    Ok(f)
}

/// Writes `bytes` to `path` for `flag` as the module says. The path is checked again here
/// (what [`check`] saw before the run may have changed).
pub fn write(flag: &str, path: &Path, bytes: &[u8]) -> Result<(), OutError> {
    match dest(flag, path)? {
        Dest::InPlace { follow } => {
            let mut f = open_in_place(flag, path, follow)?;
            // A reader that goes away fails this write (EPIPE), not the whole process.
            tpslab_net::process::without_sigpipe(|| f.write_all(bytes).and_then(|_| f.flush()))
                .map_err(|e| err(flag, path, e))
        }
        Dest::Replace(at) => {
            let mut tmp = temporary(flag, &at)?;
            tmp.write_all(bytes)
                .and_then(|_| tmp.as_file().sync_data())
                .map_err(|e| err(flag, path, e))?;
            // rename(2) replaces a link or file at `at` itself, never what it points to.
            tmp.persist(&at).map_err(|e| err(flag, path, e.error))?;
            Ok(())
        }
    }
}

/// A value (a record, a plan) as the bytes of its file: pretty JSON and a final newline.
/// Errors: the value cannot be encoded ("encoding JSON").
pub fn json_bytes(value: &impl serde::Serialize) -> anyhow::Result<Vec<u8>> {
    use anyhow::Context;
    let mut v = serde_json::to_vec_pretty(value).context("encoding JSON")?;
    v.push(b'\n');
    Ok(v)
}

/// Writes `value` as JSON ([`json_bytes`]) to `path` for `flag`, as [`write()`] does.
pub fn write_json(flag: &str, path: &Path, value: &impl serde::Serialize) -> anyhow::Result<()> {
    Ok(write(flag, path, &json_bytes(value)?)?)
}

/// Opens `path` for `flag` to be written while a run goes (`--json-stream`): a new file
/// renamed into place now (followers open it by name from then on), or a FIFO/character
/// device in place.
pub fn create_stream(flag: &str, path: &Path) -> Result<File, OutError> {
    match dest(flag, path)? {
        Dest::InPlace { follow } => open_in_place(flag, path, follow),
        Dest::Replace(at) => temporary(flag, &at)?
            .persist(&at)
            .map_err(|e| err(flag, path, e.error)),
    }
}

/// Checks before a run that `flag`'s file can be written at the end, so no result is lost
/// for a typo: not a link, folder or block device; its folder exists and takes a new file
/// (a temporary one, removed at once). A FIFO or character device is not opened (opening
/// a FIFO would hand its reader an early end of file).
pub fn check(flag: &str, path: &Path) -> Result<(), OutError> {
    match dest(flag, path)? {
        Dest::InPlace { .. } => Ok(()),
        Dest::Replace(at) => temporary(flag, &at).map(drop),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    fn dir() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }

    /// A folder like /tmp (1777) with a link in it owned by another user (nobody).
    fn planted(d: &Path, name: &str, to: &Path) -> PathBuf {
        let shared = d.join("shared");
        let _ = std::fs::create_dir(&shared);
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let link = shared.join(name);
        std::os::unix::fs::symlink(to, &link).unwrap();
        let _ = std::os::unix::fs::lchown(&link, Some(65534), Some(65534));
        link
    }

    #[test]
    fn a_planted_symlink_is_refused_and_its_target_untouched() {
        let d = dir();
        let victim = d.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let link = planted(d.path(), "out.json", &victim);
        let e = write("--json", &link, b"{}").unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("--json {}: a symbolic link", link.display())),
            "{e}"
        );
        assert!(check("--json", &link).is_err());
        assert!(create_stream("--json-stream", &link).is_err());
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        // A dangling link (the target to be created) is refused too.
        let dangling = planted(d.path(), "dangling", &d.path().join("new"));
        assert!(write("--html", &dangling, b"x").is_err());
        assert!(!d.path().join("new").exists());
        // Even one of the user's own, in a folder others can write to.
        let shared = d.path().join("shared");
        let own = shared.join("own");
        std::os::unix::fs::symlink(&victim, &own).unwrap();
        assert!(write("--json", &own, b"{}").is_err());
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    }

    #[test]
    fn the_users_own_links_are_followed() {
        let d = dir();
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        let real = d.path().join("run-7.json");
        std::fs::write(&real, "old").unwrap();
        let latest = d.path().join("latest.json");
        std::os::unix::fs::symlink(&real, &latest).unwrap();
        write("--json", &latest, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&real).unwrap(), "new");
        assert!(std::fs::symlink_metadata(&latest).unwrap().is_symlink());
        // /dev/stdout-like: a link to a character device, written in place.
        let null = d.path().join("null");
        std::os::unix::fs::symlink("/dev/null", &null).unwrap();
        write("--json", &null, b"x").unwrap();
    }

    #[test]
    fn a_folder_name_is_refused_before_the_run() {
        let d = dir();
        let p = d.path().join("newdir/");
        let e = check("--json", &p).unwrap_err();
        assert!(e.0.contains("a folder name"), "{e}");
    }

    #[test]
    fn a_hard_link_is_replaced_not_written_through() {
        let d = dir();
        let victim = d.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let out = d.path().join("out.json");
        std::fs::hard_link(&victim, &out).unwrap();
        write("--json", &out, b"record").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "record");
        assert_eq!(std::fs::metadata(&out).unwrap().nlink(), 1);
    }

    #[test]
    fn a_new_file_is_0644_and_no_temporary_file_is_left() {
        let d = dir();
        let out = d.path().join("r.json");
        check("--json", &out).unwrap();
        write("--json", &out, b"one").unwrap();
        write("--json", &out, b"two").unwrap();
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "two");
        let mode = std::fs::metadata(&out).unwrap().mode() & 0o7777;
        assert_eq!(mode & !0o644, 0, "mode {mode:o}");
        let names: Vec<_> = std::fs::read_dir(d.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "{names:?}");
    }

    #[test]
    fn a_full_device_fails_with_the_flag_and_path() {
        let e = write("--json", Path::new("/dev/full"), &[b'x'; 10000]).unwrap_err();
        assert!(e.0.starts_with("--json /dev/full: "), "{e}");
        write("--json", Path::new("/dev/null"), b"x").unwrap();
    }

    #[test]
    fn a_fifo_without_a_reader_fails_at_once() {
        let d = dir();
        let fifo = d.path().join("f");
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
        )
        .unwrap();
        let t0 = std::time::Instant::now();
        let e = write("--json", &fifo, b"x").unwrap_err();
        assert!(e.0.ends_with("a FIFO that nobody reads"), "{e}");
        assert!(t0.elapsed() < std::time::Duration::from_secs(1));
        // With a reader it is written in place.
        let reader = std::thread::spawn({
            let fifo = fifo.clone();
            move || std::fs::read(fifo).unwrap()
        });
        let t0 = std::time::Instant::now();
        loop {
            match write("--json", &fifo, b"through the pipe") {
                Ok(()) => break,
                // The reader thread has not opened it yet.
                Err(_) if t0.elapsed() < std::time::Duration::from_secs(5) => {
                    std::thread::sleep(std::time::Duration::from_millis(5))
                }
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(reader.join().unwrap(), b"through the pipe");
    }

    #[test]
    fn folders_and_missing_folders_are_refused() {
        let d = dir();
        assert!(write("--json", d.path(), b"x")
            .unwrap_err()
            .0
            .contains("a folder"));
        let missing = d.path().join("no/such/r.json");
        let e = check("--json", &missing).unwrap_err();
        assert!(e.0.contains("does not exist"), "{e}");
    }

    #[test]
    fn a_stream_is_a_new_file_in_place_at_once() {
        let d = dir();
        let out = d.path().join("s.ndjson");
        std::fs::write(&out, "old run's lines\n").unwrap();
        let mut f = create_stream("--json-stream", &out).unwrap();
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "");
        f.write_all(b"{}\n").unwrap();
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "{}\n");
    }
}
