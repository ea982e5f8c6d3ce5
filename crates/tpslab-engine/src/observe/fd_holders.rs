//! Which processes hold a socket: the `socket:[INODE]` links in every `/proc/PID/fd`
//! (socket inodes are unique on the host, so a process in any namespace is found).
//! Used by the owner of a target's sockets ([`crate::observe::owner`]) and by the observer's
//! SO_REUSEPORT group readers.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Every process (but this one) holding one of `inodes`, by a scan of /proc/*/fd: PID ->
/// the inodes it holds.
pub fn holders_of(inodes: &BTreeSet<u64>) -> BTreeMap<u32, Vec<u64>> {
    scan_holders(Path::new("/proc"), inodes).0
}

/// Every process (but this one) holding one of `inodes`, by a scan of `proc`/*/fd.
pub(crate) fn scan_holders(
    proc: &Path,
    inodes: &BTreeSet<u64>,
) -> (BTreeMap<u32, Vec<u64>>, usize) {
    let mut by_pid: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    let mut unreadable = 0;
    if inodes.is_empty() {
        return (by_pid, 0);
    }
    let me = std::process::id();
    let Ok(rd) = std::fs::read_dir(proc) else {
        return (by_pid, 0);
    };
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(e.path().join("fd")) else {
            // Gone, or another user's: counted only while it still exists.
            if e.path().exists() {
                unreadable += 1;
            }
            continue;
        };
        for fd in fds.flatten() {
            let Ok(link) = std::fs::read_link(fd.path()) else {
                continue;
            };
            let Some(ino) = link
                .to_str()
                .and_then(|t| t.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok())
            else {
                continue;
            };
            if inodes.contains(&ino) {
                let v = by_pid.entry(pid).or_default();
                if !v.contains(&ino) {
                    v.push(ino);
                }
            }
        }
    }
    (by_pid, unreadable)
}
