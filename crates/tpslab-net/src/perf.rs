//! Kernel tracepoints counted per thread with `perf_event_open(2)`, for exact per-process
//! counts that no /proc counter gives: datagrams a foreign server's threads read and sent
//! (`sock:sock_recv_length`, `sock:sock_send_length`, kernel 6.4+).
//!
//! A tracepoint's id is read from tracefs (`events/SYSTEM/NAME/id`). When tracefs is not
//! mounted, it is mounted in a private mount namespace of a short-lived thread, read, and
//! gone with that thread: nothing stays mounted on the host.
//!
//! Counting mode only (no ring buffers): each counter is one file descriptor whose value
//! is read with `read(2)`; a filter (ftrace syntax, e.g. `protocol == 17 && ret >= 0`)
//! selects the events counted. Needs CAP_PERFMON/CAP_SYS_ADMIN (root) for tracepoints.

use crate::NetError;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// The first 64 bytes of `struct perf_event_attr` (PERF_ATTR_SIZE_VER0), all a counting
/// tracepoint event needs.
#[repr(C)]
#[derive(Default)]
pub(crate) struct PerfEventAttr {
    pub(crate) type_: u32,
    pub(crate) size: u32,
    pub(crate) config: u64,
    pub(crate) sample_period: u64,
    pub(crate) sample_type: u64,
    pub(crate) read_format: u64,
    pub(crate) flags: u64,
    /// Also `wakeup_watermark` (bytes) when flags has the watermark bit.
    pub(crate) wakeup_events: u32,
    pub(crate) bp_type: u32,
    pub(crate) config1: u64,
}

pub(crate) const PERF_TYPE_TRACEPOINT: u32 = 2;
pub(crate) const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;
/// attr.flags bit: children (threads and processes created later) are counted too.
const FLAG_INHERIT: u64 = 1 << 1;
/// _IOW('$', 6, char *) with the asm-generic ioctl encoding of 64-bit x86 and arm (other
/// architectures encode the direction bits differently).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
const PERF_EVENT_IOC_SET_FILTER: libc::c_ulong = 0x4008_2406;

const TRACEFS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// A file under tracefs (`events/skb/kfree_skb/format`), mounting tracefs privately when
/// it is not mounted (in a private mount namespace of a short-lived thread: nothing stays
/// mounted on the host). Errors: no such file on this kernel, or tracefs cannot be mounted
/// (not root).
pub fn tracefs_read(rel: &str) -> Result<String, NetError> {
    for base in TRACEFS {
        if let Ok(t) = std::fs::read_to_string(format!("{base}/{rel}")) {
            return Ok(t);
        }
    }
    let rel = rel.to_string();
    std::thread::spawn(move || -> Result<String, NetError> {
        // SAFETY: unshare/mount take no pointers we own beyond the NUL-terminated strings
        // below; this thread's mount namespace becomes private to it (CLONE_NEWNS implies
        // CLONE_FS, which a thread may unshare) and disappears when the thread exits.
        unsafe {
            if libc::unshare(libc::CLONE_NEWNS) != 0 {
                return Err(NetError::last("unshare(CLONE_NEWNS) to mount tracefs"));
            }
            let root = c"/";
            if libc::mount(
                std::ptr::null(),
                root.as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ) != 0
            {
                return Err(NetError::last("mount --make-rprivate / (private tracefs)"));
            }
            let target = c"/sys/kernel/tracing";
            let fstype = c"tracefs";
            if libc::mount(
                fstype.as_ptr(),
                target.as_ptr(),
                fstype.as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                std::ptr::null(),
            ) != 0
            {
                return Err(NetError::last("mount tracefs on /sys/kernel/tracing"));
            }
        }
        std::fs::read_to_string(format!("{}/{rel}", TRACEFS[0]))
            .map_err(|_| NetError::Invalid(format!("tracefs {rel}: not on this kernel")))
    })
    .join()
    .map_err(|_| NetError::Invalid("tracefs thread panicked".into()))?
}

/// The id of tracepoint SYSTEM:NAME from tracefs (see [`tracefs_read`]). Errors: the
/// tracepoint does not exist on this kernel, or tracefs cannot be mounted (not root).
pub fn tracepoint_id(system: &str, name: &str) -> Result<u64, NetError> {
    tracefs_read(&format!("events/{system}/{name}/id"))
        .map_err(|_| {
            NetError::Invalid(format!(
                "tracepoint {system}:{name} does not exist on this kernel (or tracefs cannot be read)"
            ))
        })?
        .trim()
        .parse()
        .map_err(|_| NetError::Invalid(format!("tracepoint {system}:{name}: unreadable id")))
}

/// Filter of `sock:sock_recv_length` for datagrams read off UDP sockets: UDP, no error,
/// neither MSG_PEEK (0x2: leaves the datagram queued) nor MSG_ERRQUEUE (0x2000: reads the
/// error queue, not a datagram).
pub const UDP_READ_FILTER: &str = "protocol == 17 && ret >= 0 && !(flags & 0x2002)";
/// Filter of `sock:sock_send_length` for UDP datagrams sent.
pub const UDP_SENT_FILTER: &str = "protocol == 17 && ret >= 0";
/// Filter of `sock:sock_send_length` for UDP sends that failed (the errno is `-ret`).
pub const UDP_SEND_FAILED_FILTER: &str = "protocol == 17 && ret < 0";

/// One tracepoint counter on one thread (and, with `inherit`, on the threads it creates
/// later). Its value is the number of events that passed the filter since it was opened.
#[derive(Debug)]
pub struct TracepointCounter {
    fd: OwnedFd,
}

impl TracepointCounter {
    /// Counts tracepoint `id` on thread `tid` (any CPU), only events that pass `filter`
    /// (ftrace filter syntax over the event's fields; empty: every event).
    /// Errors: ESRCH (thread gone), EACCES/EPERM (not root), EINVAL (bad filter).
    pub fn open(id: u64, tid: u32, filter: &str, inherit: bool) -> Result<Self, NetError> {
        Self::open_event(id, tid as libc::pid_t, -1, filter, inherit)
    }

    /// Counts tracepoint `id` on CPU `cpu` for every process (host-wide), only events that
    /// pass `filter`. Errors: EACCES/EPERM (not root), EINVAL (bad filter), ENODEV (CPU
    /// offline).
    pub fn open_cpu(id: u64, cpu: u32, filter: &str) -> Result<Self, NetError> {
        Self::open_event(id, -1, cpu as libc::c_int, filter, false)
    }

    fn open_event(
        id: u64,
        pid: libc::pid_t,
        cpu: libc::c_int,
        filter: &str,
        inherit: bool,
    ) -> Result<Self, NetError> {
        let attr = PerfEventAttr {
            type_: PERF_TYPE_TRACEPOINT,
            size: std::mem::size_of::<PerfEventAttr>() as u32,
            config: id,
            flags: if inherit { FLAG_INHERIT } else { 0 },
            ..Default::default()
        };
        // SAFETY: attr is a valid, initialised perf_event_attr of the size it states; the
        // kernel only reads it.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                &attr as *const PerfEventAttr,
                pid,
                cpu,
                -1 as libc::c_int,
                PERF_FLAG_FD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(NetError::last(format!(
                "perf_event_open(tracepoint {id}, pid {pid}, cpu {cpu})"
            )));
        }
        // SAFETY: the kernel returned a new descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
        if !filter.is_empty() {
            let c = std::ffi::CString::new(filter)
                .map_err(|_| NetError::Invalid(format!("filter {filter:?} contains NUL")))?;
            // SAFETY: c is a NUL-terminated string that outlives the call.
            let r = unsafe { libc::ioctl(fd.as_raw_fd(), PERF_EVENT_IOC_SET_FILTER, c.as_ptr()) };
            if r != 0 {
                return Err(NetError::last(format!(
                    "PERF_EVENT_IOC_SET_FILTER {filter:?}"
                )));
            }
        }
        Ok(TracepointCounter { fd })
    }

    /// Events counted so far (including inherited children's).
    pub fn read(&self) -> Result<u64, NetError> {
        let mut v = 0u64;
        // SAFETY: reads exactly 8 bytes into v.
        let n = unsafe {
            libc::read(
                self.fd.as_raw_fd(),
                &mut v as *mut u64 as *mut libc::c_void,
                8,
            )
        };
        if n != 8 {
            return Err(NetError::last("read perf counter"));
        }
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> bool {
        // SAFETY: geteuid has no memory effects.
        unsafe { libc::geteuid() == 0 }
    }

    #[test]
    fn counts_this_threads_udp_reads_and_sends_exactly() {
        if !root() {
            eprintln!("skipping: perf tracepoints need root");
            return;
        }
        let (Ok(rid), Ok(sid)) = (
            tracepoint_id("sock", "sock_recv_length"),
            tracepoint_id("sock", "sock_send_length"),
        ) else {
            eprintln!("skipping: sock_recv_length/sock_send_length missing (kernel < 6.4)");
            return;
        };
        let a = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        b.set_read_timeout(Some(std::time::Duration::from_secs(1)))
            .unwrap();
        let tid = crate::gettid();
        let reads = TracepointCounter::open(rid, tid, UDP_READ_FILTER, false).unwrap();
        let sends = TracepointCounter::open(sid, tid, "protocol == 17 && ret >= 0", false).unwrap();
        for _ in 0..37 {
            a.send_to(b"x", b.local_addr().unwrap()).unwrap();
        }
        let mut buf = [0u8; 16];
        // A peek reads nothing off the queue: not counted.
        b.peek_from(&mut buf).unwrap();
        for _ in 0..37 {
            b.recv_from(&mut buf).unwrap();
        }
        // A failed read (EAGAIN) is not counted: ret < 0.
        b.set_nonblocking(true).unwrap();
        assert!(b.recv_from(&mut buf).is_err());
        // Another thread's reads are not counted.
        std::thread::scope(|s| {
            s.spawn(|| {
                a.send_to(b"y", b.local_addr().unwrap()).unwrap();
                b.set_nonblocking(false).unwrap();
                b.recv_from(&mut buf).unwrap();
            });
        });
        assert_eq!(reads.read().unwrap(), 37);
        assert_eq!(sends.read().unwrap(), 37);
    }
}
