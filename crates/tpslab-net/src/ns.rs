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

/// A handle on a network namespace (an open nsfs descriptor keeps it alive even when
/// no process is inside it; it vanishes with the last handle and thread). Threads join
/// it with [`NetNs::run`] or [`NetNs::spawn`]; the rest of the process stays where it is.
#[derive(Debug)]
pub struct NetNs {
    fd: std::os::fd::OwnedFd,
}

impl NetNs {
    /// Creates a fresh, anonymous network namespace (unshare on a short-lived thread)
    /// with its loopback up. Nothing to clean up: it disappears when the last handle
    /// is dropped and no thread is inside. Errors: EPERM without CAP_SYS_ADMIN.
    pub fn create() -> std::io::Result<NetNs> {
        std::thread::scope(|s| {
            s.spawn(|| {
                // SAFETY: unshare changes only this thread's network namespace.
                if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                crate::tun::set_up("lo").map_err(|e| std::io::Error::other(e.to_string()))?;
                let f = std::fs::File::open("/proc/thread-self/ns/net")?;
                Ok(NetNs { fd: f.into() })
            })
            .join()
            .map_err(|_| std::io::Error::other("namespace-creating thread panicked"))?
        })
    }

    /// Opens a named namespace (`ip netns add NAME` makes /run/netns/NAME) or any nsfs
    /// path (e.g. /proc/PID/ns/net). Errors: no such file, not permitted.
    pub fn open(name_or_path: &str) -> std::io::Result<NetNs> {
        let path = if name_or_path.contains('/') {
            name_or_path.to_string()
        } else {
            format!("/run/netns/{name_or_path}")
        };
        let f = std::fs::File::open(&path)
            .map_err(|e| std::io::Error::new(e.kind(), format!("network namespace {path}: {e}")))?;
        Ok(NetNs { fd: f.into() })
    }

    /// Another handle on the same namespace.
    pub fn try_clone(&self) -> std::io::Result<NetNs> {
        Ok(NetNs {
            fd: self.fd.try_clone()?,
        })
    }

    /// Moves the calling thread into this namespace (for threads the caller spawned
    /// itself and keeps there).
    pub fn enter(&self) -> std::io::Result<()> {
        // SAFETY: setns with a valid namespace fd; it changes only this thread.
        if unsafe { libc::setns(self.fd.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    /// Runs `f` on a new thread inside this namespace and returns its result.
    pub fn run<T: Send>(&self, f: impl FnOnce() -> T + Send) -> std::io::Result<T> {
        std::thread::scope(|s| {
            s.spawn(|| {
                self.enter()?;
                Ok(f())
            })
            .join()
            .map_err(|_| std::io::Error::other("thread in the other network namespace panicked"))?
        })
    }

    /// Starts a named thread inside this namespace running `f`.
    pub fn spawn<T: Send + 'static>(
        &self,
        name: &str,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> std::io::Result<std::thread::JoinHandle<std::io::Result<T>>> {
        let me = self.try_clone()?;
        std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                me.enter()?;
                drop(me);
                Ok(f())
            })
    }
}
