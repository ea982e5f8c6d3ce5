//! Running a closure in another network namespace (setns on a short-lived thread).
//!
//! Some sysctls exist only in the initial network namespace (e.g.
//! net.core.netdev_max_backlog): a process inside a namespace reads and writes them
//! from a thread that joined the namespace of PID 1.

use std::os::fd::AsRawFd;

/// Runs `f` on a new thread that joined the network namespace of `pid` (setns
/// CLONE_NEWNET affects only that thread). Errors: the namespace cannot be opened or
/// joined (EPERM without CAP_SYS_ADMIN).
pub fn in_netns_of<T: Send>(pid: u32, f: impl FnOnce() -> T + Send) -> std::io::Result<T> {
    let ns = std::fs::File::open(format!("/proc/{pid}/ns/net"))?;
    std::thread::scope(|s| {
        s.spawn(|| {
            // SAFETY: setns with a valid namespace fd; it changes only this thread.
            let rc = unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) };
            if rc != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(f())
        })
        .join()
        .map_err(|_| std::io::Error::other("thread in the other network namespace panicked"))?
    })
}
