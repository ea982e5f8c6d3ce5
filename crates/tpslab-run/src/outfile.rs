//! Output files, created the way a root process on a shared host must: never through a
//! symbolic link another user could have planted, in any component of the path (one in a
//! 1777 or 0777 folder would redirect the write to any file or folder: refused before the
//! run), a regular file always replaced whole by a new one (written to a temporary file of
//! an unpredictable name created with `O_EXCL` beside it, then renamed into place: a hard
//! link or a reader never sees half a file, and nothing is written through another user's
//! inode), mode 0644 (less the umask). A FIFO or a character device (`/dev/null`, a pipe
//! another program reads) is written in place, opened without blocking on a FIFO nobody
//! reads, with SIGPIPE held off so a reader that leaves fails the write, not tpslab. A
//! block device, socket or folder is refused.
//!
//! The path is resolved component by component ([`walk`]): each folder opened
//! `O_PATH|O_NOFOLLOW` relative to the one before, the file then created, renamed and
//! opened relative to the last folder's descriptor (`openat`, `renameat`), so the folder
//! checked is the one written to. A link, in the folders or at the file's name, is
//! followed only when it is the user's own or the system's, in a folder nobody else can
//! write to (`/dev/stdout`, a shell's `/dev/fd/63`, `~/out -> /data/out` or
//! `latest.json -> run-7.json` in one's own folder), and what it names is walked the same
//! way; a link on procfs (a process's descriptor `/proc/self/fd/N`, its working folder
//! `/proc/PID/cwd`) is followed by the kernel, as its text is a path in that process's
//! mounts, not ours. At most [`walk::MAX_LINKS`] links are followed for one path in all.

mod record;

pub use record::{json_stream, json_stream_http, write_files, Extra, Written};

use crate::walk::{self, Folder, How};
use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

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

/// What is at an output path now, reached without a planted link.
enum Dest {
    /// Nothing, or a regular file, at `name` in `dir`: a new file is renamed over it (the
    /// path's own, or what a link of the user's own names).
    Replace { dir: Folder, name: OsString },
    /// A FIFO or character device at `name` in `dir`: written in place (`follow`: through
    /// a process's descriptor, `/proc/self/fd/N`, that the kernel follows).
    InPlace {
        dir: Folder,
        name: OsString,
        follow: bool,
    },
}

const PLANTED: &str = "a symbolic link in a folder others can write to, or not the user's own; \
     tpslab never writes through one (another user may have planted it); give the real path, \
     or - for standard output";

/// The folder a file at `path` is created in.
fn folder(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// The file name of `path` as given: None when what follows its last `/` is empty, `.` or
/// `..` (a folder; [`Path::file_name`] reads `x/.` as `x`).
fn file_name(path: &Path) -> Option<&OsStr> {
    let bytes = path.as_os_str().as_bytes();
    let last = bytes.rsplit(|&b| b == b'/').next().unwrap_or(bytes);
    if matches!(last, b"" | b"." | b"..") {
        return None;
    }
    path.file_name()
}

/// What is at `path`, its folders walked ([`walk::folder`]), refusing a link someone else
/// could have planted, a folder, a block device or a socket.
fn dest(flag: &str, path: &Path) -> Result<Dest, OutError> {
    let Some(name) = file_name(path) else {
        return Err(err(flag, path, "a folder name; give a file name"));
    };
    let mut links = 0;
    let dir = walk::folder_counted(None, folder(path), How::default(), &mut links)
        .map_err(|r| err(flag, path, r))?;
    resolve(flag, path, dir, name.to_owned(), &mut links, true)
}

/// What is at `name` in `dir` (reached for `path`: `first`, the path's own name), a
/// trusted link there followed by a walk of what it names (`links` followed so far).
fn resolve(
    flag: &str,
    path: &Path,
    dir: Folder,
    name: OsString,
    links: &mut usize,
    first: bool,
) -> Result<Dest, OutError> {
    let at = || dir.shown.join(&name);
    let meta = match walk::lstat_in(&dir, &name) {
        Err(Errno::NOENT) => return Ok(Dest::Replace { dir, name }),
        Err(e) => return Err(err(flag, path, std::io::Error::from(e))),
        Ok(m) => m,
    };
    let t = rustix::fs::FileType::from_raw_mode(meta.st_mode);
    if t == rustix::fs::FileType::Symlink {
        let d = rustix::fs::fstat(&dir.fd).map_err(|e| err(flag, path, std::io::Error::from(e)))?;
        let euid = rustix::process::geteuid().as_raw();
        if !walk::trusted(euid, meta.st_uid, d.st_uid, d.st_mode) {
            return Err(if first {
                err(flag, path, PLANTED)
            } else {
                err(flag, path, format_args!("{} is {PLANTED}", at().display()))
            });
        }
        if walk::on_procfs(&dir.fd) {
            // A process's link: what it names, as the kernel follows it.
            let m = rustix::fs::statat(&dir.fd, &name, AtFlags::empty())
                .map_err(|e| err(flag, path, std::io::Error::from(e)))?;
            let t = rustix::fs::FileType::from_raw_mode(m.st_mode);
            return match kind(flag, path, t)? {
                // Replacing the file would leave the shell's descriptor on the old one.
                true => Err(err(
                    flag,
                    path,
                    if dir.shown.file_name() == Some(OsStr::new("fd")) {
                        "a descriptor open on a regular file; give - or the file's own path"
                    } else {
                        "a link in /proc to a regular file; give the file's own path"
                    },
                )),
                false => Ok(Dest::InPlace {
                    dir,
                    name,
                    follow: true,
                }),
            };
        }
        *links += 1;
        if *links > walk::MAX_LINKS {
            return Err(err(flag, path, walk::Refused::Loop(at())));
        }
        let target = rustix::fs::readlinkat(&dir.fd, &name, Vec::new())
            .map_err(|e| err(flag, path, std::io::Error::from(e)))?;
        let target = Path::new(OsStr::from_bytes(target.as_bytes())).to_path_buf();
        let Some(tname) = file_name(&target) else {
            return Err(err(
                flag,
                path,
                format_args!("{} names a folder; give a file name", at().display()),
            ));
        };
        let tdir = walk::folder_counted(Some(&dir), folder(&target), How::default(), links)
            .map_err(|r| err(flag, path, r))?;
        return resolve(flag, path, tdir, tname.to_owned(), links, false);
    }
    match kind(flag, path, t)? {
        true => Ok(Dest::Replace { dir, name }),
        false => Ok(Dest::InPlace {
            dir,
            name,
            follow: false,
        }),
    }
}

/// Whether a file of type `t` is replaced (a regular file: true) or written in place (a
/// FIFO or character device: false); anything else refused.
fn kind(flag: &str, path: &Path, t: rustix::fs::FileType) -> Result<bool, OutError> {
    use rustix::fs::FileType as T;
    match t {
        T::RegularFile => Ok(true),
        T::Fifo | T::CharacterDevice => Ok(false),
        T::Directory => Err(err(flag, path, "a folder; give a file name")),
        _ => Err(err(
            flag,
            path,
            "a block device or socket; allowed a regular file, a FIFO or a character device",
        )),
    }
}

/// A new temporary file in a walked folder (`O_EXCL`, a random name, mode 0644), removed
/// on drop unless [`Temporary::persist`]ed.
struct Temporary<'a> {
    dir: &'a Folder,
    name: OsString,
    file: File,
    kept: bool,
}

impl Temporary<'_> {
    /// Renames the file to `name` in its folder (replacing a link or file there, never
    /// writing through it).
    fn persist(mut self, name: &OsStr) -> std::io::Result<File> {
        rustix::fs::renameat(&self.dir.fd, &self.name, &self.dir.fd, name)?;
        self.kept = true;
        self.file.try_clone()
    }
}

impl Drop for Temporary<'_> {
    fn drop(&mut self) {
        if !self.kept {
            let _ = rustix::fs::unlinkat(&self.dir.fd, &self.name, AtFlags::empty());
        }
    }
}

/// A name no other process guesses: `.tpslab-` and 16 hex digits of the standard
/// library's randomly keyed hash of the PID, the time and a count.
fn random_name() -> OsString {
    use std::hash::BuildHasher;
    static COUNT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let h = std::collections::hash_map::RandomState::new().hash_one((
        std::process::id(),
        std::time::SystemTime::now(),
        n,
    ));
    OsString::from(format!(".tpslab-{h:016x}.tmp"))
}

fn temporary<'a>(flag: &str, path: &Path, dir: &'a Folder) -> Result<Temporary<'a>, OutError> {
    for _ in 0..100 {
        let name = random_name();
        match rustix::fs::openat(
            &dir.fd,
            &name,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o644),
        ) {
            Ok(fd) => {
                return Ok(Temporary {
                    dir,
                    name,
                    file: File::from(fd),
                    kept: false,
                })
            }
            Err(Errno::EXIST) => continue,
            Err(e) => return Err(err(flag, path, std::io::Error::from(e))),
        }
    }
    Err(err(flag, path, "no free temporary name in 100 tries"))
}

/// Opens a FIFO or character device for writing in place: not through a link (unless
/// `follow`: a process's descriptor), not blocking on a FIFO without a reader (ENXIO:
/// said as such), then blocking again.
fn open_in_place(
    flag: &str,
    path: &Path,
    dir: &Folder,
    name: &OsStr,
    follow: bool,
) -> Result<File, OutError> {
    let mut flags = OFlags::WRONLY | OFlags::NONBLOCK | OFlags::CLOEXEC;
    if !follow {
        flags |= OFlags::NOFOLLOW;
    }
    let f = rustix::fs::openat(&dir.fd, name, flags, Mode::empty())
        .map(File::from)
        .map_err(|e| {
            if e == Errno::NXIO {
                err(flag, path, "a FIFO that nobody reads")
            } else {
                err(flag, path, std::io::Error::from(e))
            }
        })?;
    use std::os::unix::fs::FileTypeExt;
    let t = f.metadata().map_err(|e| err(flag, path, e))?.file_type();
    if !(t.is_fifo() || t.is_char_device()) {
        return Err(err(flag, path, "changed while being opened; not written"));
    }
    rustix::fs::fcntl_setfl(&f, OFlags::empty())
        .map_err(|e| err(flag, path, std::io::Error::from(e)))?;
    Ok(f)
}

/// Writes `bytes` to `path` for `flag` as the module says. The path is walked again here
/// (what [`check`] saw before the run may have changed).
pub fn write(flag: &str, path: &Path, bytes: &[u8]) -> Result<(), OutError> {
    match dest(flag, path)? {
        Dest::InPlace { dir, name, follow } => {
            let mut f = open_in_place(flag, path, &dir, &name, follow)?;
            // A reader that goes away fails this write (EPIPE), not the whole process.
            tpslab_net::process::without_sigpipe(|| f.write_all(bytes).and_then(|_| f.flush()))
                .map_err(|e| err(flag, path, e))
        }
        Dest::Replace { dir, name } => {
            let mut tmp = temporary(flag, path, &dir)?;
            tmp.file
                .write_all(bytes)
                .and_then(|_| tmp.file.sync_data())
                .map_err(|e| err(flag, path, e))?;
            tmp.persist(&name).map_err(|e| err(flag, path, e))?;
            Ok(())
        }
    }
}

/// Writes `bytes` to a new file at `path` for `flag` (`O_EXCL`, mode 0644 less the umask),
/// never over a file or link already there, its folders walked as [`write`]'s are.
/// Errors: one line naming the flag and path; `exists` when something is at the name.
pub fn write_new(flag: &str, path: &Path, bytes: &[u8]) -> Result<(), OutError> {
    let Some(name) = file_name(path) else {
        return Err(err(flag, path, "a folder name; give a file name"));
    };
    let dir = walk::folder(None, folder(path), How::default()).map_err(|r| err(flag, path, r))?;
    let fd = rustix::fs::openat(
        &dir.fd,
        name,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o644),
    )
    .map_err(|e| match e {
        Errno::EXIST => err(flag, path, "exists"),
        e => err(flag, path, std::io::Error::from(e)),
    })?;
    File::from(fd)
        .write_all(bytes)
        .map_err(|e| err(flag, path, e))
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
        Dest::InPlace { dir, name, follow } => open_in_place(flag, path, &dir, &name, follow),
        Dest::Replace { dir, name } => temporary(flag, path, &dir)?
            .persist(&name)
            .map_err(|e| err(flag, path, e)),
    }
}

/// Checks before a run that `flag`'s file can be written at the end, so no result is lost
/// for a typo: no planted link in any component, not a folder or block device; its folder
/// exists and takes a new file (a temporary one, removed at once). A FIFO or character
/// device is not opened (opening a FIFO would hand its reader an early end of file).
/// Errors: one line, `FLAG PATH: why`, naming the component that is a planted link.
pub fn check(flag: &str, path: &Path) -> Result<(), OutError> {
    match dest(flag, path)? {
        Dest::InPlace { .. } => Ok(()),
        Dest::Replace { dir, .. } => temporary(flag, path, &dir).map(drop),
    }
}

/// The walk of a sweep's folder: every folder on the way one only this user or root can
/// change ([`walk::chain_ok`]), as its plan and records are read back by name.
const CHAIN: How = How {
    create: None,
    chain: true,
};

/// The walk of a sweep's folder `path` with `how` (chained): the folder itself is left to
/// its caller to judge (the sweep's own rule, said in its own words), the folders above
/// it not (the walk is done again without the chain rule when only the folder itself
/// fails it).
fn walk_out(path: &Path, how: How) -> Result<Folder, walk::Refused> {
    match walk::folder(None, path, how) {
        Err(walk::Refused::Chain(p, _)) if walk::same_path(&p, path) => walk::folder(
            None,
            path,
            How {
                chain: false,
                ..how
            },
        ),
        r => r,
    }
}

/// Checks before a run that the folder `path` (for `flag`, a sweep's `--out`) can be
/// reached without a planted link, every folder above it one only this user or root can
/// change ([`walk::chain_ok`]): as far as it exists (what is missing is made later by
/// [`make_folder`]). Errors: one line naming the component.
pub fn check_folder(flag: &str, path: &Path) -> Result<(), OutError> {
    match walk_out(path, CHAIN) {
        Ok(_) | Err(walk::Refused::Missing(_)) => Ok(()),
        Err(r) => Err(err(flag, path, r)),
    }
}

/// The folder `path` for `flag`, walked as [`check_folder`] walks it (every folder above
/// it one only this user or root can change), each folder missing made with `mode` (less
/// the umask) relative to the one before. Returns the folder reached. Errors: one line
/// naming the component.
pub fn make_folder(flag: &str, path: &Path, mode: u32) -> Result<Folder, OutError> {
    let how = How {
        create: Some(mode),
        ..CHAIN
    };
    walk_out(path, how).map_err(|r| err(flag, path, r))
}

#[cfg(test)]
#[path = "outfile_tests.rs"]
mod tests;
