//! Output files, created the way a root process on a shared host must: never through a
//! symbolic link (one planted by another user in a 1777 folder would redirect the write to
//! any file), a regular file always replaced whole by a new one (written to a temporary
//! file of an unpredictable name created with `O_EXCL` beside it, then renamed into
//! place: a hard link or a reader never sees half a file, and nothing is written through
//! another user's inode), mode 0644 (less the umask). A FIFO or a character device
//! (`/dev/null`, a pipe another program reads) is written in place, opened without
//! following links and without blocking on a FIFO nobody reads. A block device, socket or
//! folder is refused.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Why an output file was not written: one line, naming the flag and the path.
#[derive(Debug)]
pub(crate) struct OutError(pub(crate) String);

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
    /// Nothing, or a regular file: a new file is renamed over it.
    Replace,
    /// A FIFO or character device: written in place.
    InPlace,
}

/// What is at `path`, refusing a symbolic link, a folder, a block device or a socket.
fn dest(flag: &str, path: &Path) -> Result<Dest, OutError> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Dest::Replace),
        Err(e) => Err(err(flag, path, e)),
        Ok(m) => {
            let t = m.file_type();
            if t.is_symlink() {
                Err(err(
                    flag,
                    path,
                    "a symbolic link; tpslab never writes through one (another user may have \
                     planted it); give the real path, or - for standard output",
                ))
            } else if t.is_file() {
                Ok(Dest::Replace)
            } else if t.is_fifo() || t.is_char_device() {
                Ok(Dest::InPlace)
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
fn open_in_place(flag: &str, path: &Path) -> Result<File, OutError> {
    let f = OpenOptions::new()
        .write(true)
        .custom_flags((rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK).bits() as i32)
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
pub(crate) fn write(flag: &str, path: &Path, bytes: &[u8]) -> Result<(), OutError> {
    match dest(flag, path)? {
        Dest::InPlace => {
            let mut f = open_in_place(flag, path)?;
            f.write_all(bytes)
                .and_then(|_| f.flush())
                .map_err(|e| err(flag, path, e))
        }
        Dest::Replace => {
            let mut tmp = temporary(flag, path)?;
            tmp.write_all(bytes)
                .and_then(|_| tmp.as_file().sync_data())
                .map_err(|e| err(flag, path, e))?;
            // rename(2) replaces a link or file at `path` itself, never what it points to.
            tmp.persist(path).map_err(|e| err(flag, path, e.error))?;
            Ok(())
        }
    }
}

/// Opens `path` for `flag` to be written while a run goes (`--json-stream`): a new file
/// renamed into place now (followers open it by name from then on), or a FIFO/character
/// device in place.
pub(crate) fn create_stream(flag: &str, path: &Path) -> Result<File, OutError> {
    match dest(flag, path)? {
        Dest::InPlace => open_in_place(flag, path),
        Dest::Replace => temporary(flag, path)?
            .persist(path)
            .map_err(|e| err(flag, path, e.error)),
    }
}

/// Checks before a run that `flag`'s file can be written at the end, so no result is lost
/// for a typo: not a link, folder or block device; its folder exists and takes a new file
/// (a temporary one, removed at once). A FIFO or character device is not opened (opening
/// a FIFO would hand its reader an early end of file).
pub(crate) fn check(flag: &str, path: &Path) -> Result<(), OutError> {
    match dest(flag, path)? {
        Dest::InPlace => Ok(()),
        Dest::Replace => temporary(flag, path).map(drop),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    fn dir() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }

    #[test]
    fn a_planted_symlink_is_refused_and_its_target_untouched() {
        let d = dir();
        let victim = d.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let link = d.path().join("out.json");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let e = write("--json", &link, b"{}").unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("--json {}: a symbolic link", link.display())),
            "{e}"
        );
        assert!(check("--json", &link).is_err());
        assert!(create_stream("--json-stream", &link).is_err());
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        // A dangling link (the target to be created) is refused too.
        let dangling = d.path().join("dangling");
        std::os::unix::fs::symlink(d.path().join("new"), &dangling).unwrap();
        assert!(write("--html", &dangling, b"x").is_err());
        assert!(!d.path().join("new").exists());
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
