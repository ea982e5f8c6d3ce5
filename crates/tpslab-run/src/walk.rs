//! A path resolved one component at a time, without following a link another user could
//! have planted in any of them: from `/` (or the working folder, for a relative path)
//! each folder is opened `O_PATH|O_NOFOLLOW` relative to the descriptor of the one before,
//! so the folder checked is the folder whose descriptor is returned, and what is then
//! created is created relative to that descriptor (no window between the check and the
//! write for another user to swap a folder). A symbolic link on the way is followed only
//! when [`trusted`]: the user's own or the system's, in a folder nobody else can write to
//! (`~/out -> /data/out` in one's own home, `/dev/fd -> /proc/self/fd`, `/proc/self`); its
//! target is walked the same way, except on procfs: there a link (`/proc/PID/cwd`,
//! `/proc/PID/root`, `/proc/self/fd/N`) names an object in that process's mount namespace
//! and root, its text a path only there, so the kernel follows it (the text is for
//! messages). At most [`MAX_LINKS`] links are followed in all, as the kernel: one budget
//! for a path's folders and the links at its file's name ([`folder_counted`]).
//!
//! The kernel's `openat2(RESOLVE_NO_SYMLINKS)` refuses every link, the user's own too, so
//! the walk is done here (it works on every kernel, `openat2` or not).

use rustix::fs::{AtFlags, Mode, OFlags, CWD};
use rustix::io::Errno;
use std::ffi::{OsStr, OsString};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// Links followed at most in resolving one path, its folders and the links at its file's
/// name together (the kernel's limit, ELOOP past it).
pub const MAX_LINKS: usize = 40;

/// A folder reached by a walk: its descriptor (`O_PATH`) and its path as walked (the
/// targets of the links followed in place of the links), for messages.
#[derive(Debug)]
pub struct Folder {
    /// The folder, `O_PATH|O_DIRECTORY`.
    pub fd: OwnedFd,
    /// The path walked to it.
    pub shown: PathBuf,
}

/// Why a walk stopped: one clause naming the component (as walked).
#[derive(Debug)]
pub enum Refused {
    /// A symbolic link that is not [`trusted`].
    Planted(PathBuf),
    /// A component that does not exist.
    Missing(PathBuf),
    /// A component that is neither a folder nor a link.
    NotFolder(PathBuf),
    /// More than [`MAX_LINKS`] links in all.
    Loop(PathBuf),
    /// A folder on the way another user could replace (owner, mode), with `How::chain`.
    Chain(PathBuf, String),
    /// The system's answer at a component.
    Io(PathBuf, std::io::Error),
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::Planted(p) => write!(
                f,
                "{} is a symbolic link in a folder others can write to, or not the user's \
                 own; tpslab never follows one (another user may have planted it); give the \
                 real path",
                p.display()
            ),
            Refused::Missing(p) => write!(f, "folder {} does not exist", p.display()),
            Refused::NotFolder(p) => write!(f, "{} is not a folder", p.display()),
            Refused::Loop(p) => write!(
                f,
                "{}: more than {MAX_LINKS} symbolic links on the way",
                p.display()
            ),
            Refused::Chain(p, why) => write!(f, "folder {}: {why}", p.display()),
            Refused::Io(p, e) => write!(f, "{}: {e}", p.display()),
        }
    }
}

/// How a walk treats what it finds.
#[derive(Debug, Clone, Copy, Default)]
pub struct How {
    /// Missing folders are made with this mode (less the umask), relative to the folder
    /// before them; None: a missing folder is [`Refused::Missing`].
    pub create: Option<u32>,
    /// Every folder on the way must be one only this user or root can change (see
    /// [`chain_ok`]), so the path names the same file later (for a file opened by name,
    /// as SQLite opens the history).
    pub chain: bool,
}

/// Whether a link owned by `link_uid` in a folder owned by `dir_uid` with mode `dir_mode`
/// is one to follow for a process of effective user `euid`: the link owned by that user or
/// by the folder's owner, the folder owned by that user or root and writable by neither
/// group nor others (`/dev/stdout`, `/proc/self`, a link in one's own folder are; any link
/// in /tmp or another 1777 or 0777 folder is not, whoever made it).
pub fn trusted(euid: u32, link_uid: u32, dir_uid: u32, dir_mode: u32) -> bool {
    (link_uid == euid || link_uid == dir_uid)
        && (dir_uid == euid || dir_uid == 0)
        && dir_mode & 0o022 == 0
}

/// Whether a folder owned by `uid` with mode `mode` on the way to a file opened by name
/// cannot be changed by another user than `euid` and root: owned by one of them, writable
/// by neither group nor others unless sticky (then only the owner of an entry renames it,
/// as in /tmp). The rule of OpenSSH's StrictModes. Err: why not, one clause.
pub fn chain_ok(euid: u32, uid: u32, mode: u32) -> Result<(), String> {
    if uid != euid && uid != 0 {
        Err(format!("owned by uid {uid}, neither this user nor root"))
    } else if mode & 0o022 != 0 && mode & 0o1000 == 0 {
        Err(format!(
            "mode {:o}: group or others can write it",
            mode & 0o7777
        ))
    } else {
        Ok(())
    }
}

/// One step of a walk: a name, `..`, or back to `/` (a link's absolute target).
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Start again from `/`.
    Root,
    /// The folder above (the kernel's: above where the walk is, links resolved).
    Up,
    /// A component's name.
    Name(OsString),
}

/// The steps of `path`, in order (`.` and repeated `/` dropped).
pub fn steps(path: &Path) -> Vec<Step> {
    path.components()
        .filter_map(|c| match c {
            Component::RootDir => Some(Step::Root),
            Component::ParentDir => Some(Step::Up),
            Component::Normal(n) => Some(Step::Name(n.to_owned())),
            Component::CurDir | Component::Prefix(_) => None,
        })
        .collect()
}

/// Whether `a` and `b` spell the same path: the same steps ([`steps`]: `.`, repeated and
/// trailing `/` aside), a relative one taken from the working folder.
pub fn same_path(a: &Path, b: &Path) -> bool {
    let abs = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    steps(&abs(a)) == steps(&abs(b))
}

fn open_path(dir: &OwnedFd, name: &OsStr, extra: OFlags) -> rustix::io::Result<OwnedFd> {
    rustix::fs::openat(
        dir,
        name,
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC | extra,
        Mode::empty(),
    )
}

/// A component opened `O_PATH|O_NOFOLLOW`: as a folder first (`O_DIRECTORY`, so an
/// automount point is mounted), and when it is not one (ENOTDIR) again without, to see
/// the link or file there.
fn open_component(dir: &OwnedFd, name: &OsStr) -> rustix::io::Result<OwnedFd> {
    match open_path(dir, name, OFlags::DIRECTORY) {
        Err(Errno::NOTDIR) => open_path(dir, name, OFlags::empty()),
        r => r,
    }
}

fn root() -> rustix::io::Result<OwnedFd> {
    rustix::fs::openat(
        CWD,
        "/",
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

fn io(p: &Path, e: Errno) -> Refused {
    Refused::Io(p.to_path_buf(), e.into())
}

fn file_type(st: &rustix::fs::Stat) -> rustix::fs::FileType {
    rustix::fs::FileType::from_raw_mode(st.st_mode)
}

/// Checks a folder reached under `how.chain`.
fn check_chain(how: How, euid: u32, fd: &OwnedFd, shown: &Path) -> Result<(), Refused> {
    if how.chain {
        let shown = if shown.as_os_str().is_empty() {
            Path::new(".")
        } else {
            shown
        };
        let st = rustix::fs::fstat(fd).map_err(|e| io(shown, e))?;
        chain_ok(euid, st.st_uid, st.st_mode).map_err(|why| Refused::Chain(shown.into(), why))?;
    }
    Ok(())
}

/// The folder `path` names, walked as the module says from `from` (None: the working
/// folder) for a relative path, from `/` for an absolute one. With `how.chain` and no
/// `from`, a relative path is walked from `/` through the working folder's path, so the
/// folders above it are checked too.
pub fn folder(from: Option<&Folder>, path: &Path, how: How) -> Result<Folder, Refused> {
    folder_counted(from, path, how, &mut 0)
}

/// [`folder`], the links followed added to `links` (those followed before in resolving
/// the same path): [`Refused::Loop`] past [`MAX_LINKS`] in all.
pub fn folder_counted(
    from: Option<&Folder>,
    path: &Path,
    how: How,
    links: &mut usize,
) -> Result<Folder, Refused> {
    let euid = rustix::process::geteuid().as_raw();
    let abs;
    let path = if how.chain && from.is_none() && path.is_relative() {
        abs = std::env::current_dir()
            .map_err(|e| Refused::Io(PathBuf::from("."), e))?
            .join(path);
        abs.as_path()
    } else {
        path
    };
    let (mut cur, mut shown) = match from {
        Some(f) => (
            rustix::fs::openat(
                &f.fd,
                ".",
                OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| io(&f.shown, e))?,
            f.shown.clone(),
        ),
        None => (
            rustix::fs::openat(
                CWD,
                ".",
                OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| io(Path::new("."), e))?,
            PathBuf::new(),
        ),
    };
    // What is left to walk, the next step last (a link's target goes in front of the rest).
    let mut todo: Vec<Step> = steps(path);
    todo.reverse();
    if !matches!(todo.last(), Some(Step::Root)) {
        check_chain(how, euid, &cur, &shown)?;
    }
    while let Some(step) = todo.pop() {
        let name = match step {
            Step::Root => {
                shown = PathBuf::from("/");
                cur = root().map_err(|e| io(&shown, e))?;
                check_chain(how, euid, &cur, &shown)?;
                continue;
            }
            Step::Up => {
                shown.push("..");
                cur = open_path(&cur, OsStr::new(".."), OFlags::DIRECTORY)
                    .map_err(|e| io(&shown, e))?;
                check_chain(how, euid, &cur, &shown)?;
                continue;
            }
            Step::Name(n) => n,
        };
        let here = shown.join(&name);
        let fd = match open_component(&cur, &name) {
            Err(Errno::NOENT) => match how.create {
                None => return Err(Refused::Missing(here)),
                Some(mode) => {
                    match rustix::fs::mkdirat(&cur, &name, Mode::from_raw_mode(mode)) {
                        Ok(()) | Err(Errno::EXIST) => {}
                        Err(e) => return Err(io(&here, e)),
                    }
                    open_component(&cur, &name).map_err(|e| io(&here, e))?
                }
            },
            Err(e) => return Err(io(&here, e)),
            Ok(fd) => fd,
        };
        let st = rustix::fs::fstat(&fd).map_err(|e| io(&here, e))?;
        let t = file_type(&st);
        if t == rustix::fs::FileType::Directory {
            check_chain(how, euid, &fd, &here)?;
            cur = fd;
            shown = here;
        } else if t == rustix::fs::FileType::Symlink {
            let dir = rustix::fs::fstat(&cur).map_err(|e| io(&shown, e))?;
            if !trusted(euid, st.st_uid, dir.st_uid, dir.st_mode) {
                return Err(Refused::Planted(here));
            }
            *links += 1;
            if *links > MAX_LINKS {
                return Err(Refused::Loop(here));
            }
            if on_procfs(&cur) {
                // A process's link: what the kernel reaches, in that process's mounts.
                let fd = rustix::fs::openat(
                    &cur,
                    &name,
                    OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                    Mode::empty(),
                )
                .map_err(|e| match e {
                    Errno::NOTDIR => Refused::NotFolder(here.clone()),
                    e => io(&here, e),
                })?;
                check_chain(how, euid, &fd, &here)?;
                cur = fd;
                shown = here;
                continue;
            }
            // The link itself (an O_PATH|O_NOFOLLOW descriptor on it): what it says.
            let target = rustix::fs::readlinkat(&fd, "", Vec::new()).map_err(|e| io(&here, e))?;
            let target = Path::new(OsStr::from_bytes(target.as_bytes()));
            // Walked from the link's folder (`cur`, `shown` stay) or from `/`.
            todo.extend(steps(target).into_iter().rev());
        } else {
            return Err(Refused::NotFolder(here));
        }
    }
    Ok(Folder { fd: cur, shown })
}

/// What is at `name` in `dir`, not following a link there.
pub fn lstat_in(dir: &Folder, name: &OsStr) -> rustix::io::Result<rustix::fs::Stat> {
    rustix::fs::statat(&dir.fd, name, AtFlags::SYMLINK_NOFOLLOW)
}

/// Whether the folder `dir` is on procfs (its links are a process's descriptors, working
/// folder or root, `/proc/self/fd/N`, `/proc/PID/cwd`: what they name is for the kernel
/// to follow, not a path).
pub fn on_procfs(dir: &OwnedFd) -> bool {
    rustix::fs::fstatfs(dir).is_ok_and(|s| s.f_type == rustix::fs::PROC_SUPER_MAGIC)
}

#[cfg(test)]
#[path = "walk_tests.rs"]
mod tests;
