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
/// attr.read_format: a read returns `{ nr, values[nr] }`, every counter of the group.
const PERF_FORMAT_GROUP: u64 = 1 << 3;
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
        Self::open_in_group(id, pid, cpu, filter, inherit, None)
    }

    /// Opens the counter, in the group of `leader` when given (its values then come with
    /// the leader's in one read: PERF_FORMAT_GROUP).
    fn open_in_group(
        id: u64,
        pid: libc::pid_t,
        cpu: libc::c_int,
        filter: &str,
        inherit: bool,
        leader: Option<&OwnedFd>,
    ) -> Result<Self, NetError> {
        let attr = PerfEventAttr {
            type_: PERF_TYPE_TRACEPOINT,
            size: std::mem::size_of::<PerfEventAttr>() as u32,
            config: id,
            flags: if inherit { FLAG_INHERIT } else { 0 },
            read_format: PERF_FORMAT_GROUP,
            ..Default::default()
        };
        let group_fd = leader.map_or(-1, |l| l.as_raw_fd());
        // SAFETY: attr is a valid, initialised perf_event_attr of the size it states; the
        // kernel only reads it.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                &attr as *const PerfEventAttr,
                pid,
                cpu,
                group_fd as libc::c_int,
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
        let mut v = [0u64; 1];
        read_group(&self.fd, &mut v)?;
        Ok(v[0])
    }
}

/// `read(2)` of a PERF_FORMAT_GROUP counter: `{ nr, values[nr] }`, the leader's value
/// first. Fills `out` (its length must be nr). Errors: the read failed, or the group
/// holds another number of counters.
fn read_group(fd: &OwnedFd, out: &mut [u64]) -> Result<(), NetError> {
    // nr and up to 7 values: the groups opened here have at most 3.
    let mut buf = [0u64; 8];
    if out.len() + 1 > buf.len() {
        return Err(NetError::Invalid(format!(
            "a group of {} counters is read by {} at most",
            out.len(),
            buf.len() - 1
        )));
    }
    let want = 8 * (out.len() + 1);
    // SAFETY: reads at most `want` <= size_of_val(&buf) bytes into buf.
    let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr() as *mut libc::c_void, want) };
    if n < 0 {
        return Err(NetError::last("read perf counter"));
    }
    if n as usize != want || buf[0] as usize != out.len() {
        return Err(NetError::Invalid(format!(
            "perf group read: {n} bytes, {} counters (expected {})",
            buf[0],
            out.len()
        )));
    }
    out.copy_from_slice(&buf[1..=out.len()]);
    Ok(())
}

/// Several tracepoint counters on one thread (and, with `inherit`, on the threads it
/// creates later) read together: one `read(2)` gives every count (PERF_FORMAT_GROUP),
/// where separate counters take one read each.
#[derive(Debug)]
pub struct TracepointGroup {
    /// The leader first; the others in the order given.
    counters: Vec<TracepointCounter>,
}

impl TracepointGroup {
    /// Counts each `(tracepoint id, filter)` of `events` on thread `tid`, as
    /// [`TracepointCounter::open`] does, in one group. Errors: those of
    /// [`TracepointCounter::open`]; none given, or more than 7.
    pub fn open(events: &[(u64, &str)], tid: u32, inherit: bool) -> Result<Self, NetError> {
        if events.is_empty() || events.len() > 7 {
            return Err(NetError::Invalid(format!(
                "a counter group of {} events (1 to 7)",
                events.len()
            )));
        }
        let mut counters: Vec<TracepointCounter> = Vec::with_capacity(events.len());
        for &(id, filter) in events {
            let leader = counters.first().map(|c| &c.fd);
            counters.push(TracepointCounter::open_in_group(
                id,
                tid as libc::pid_t,
                -1,
                filter,
                inherit,
                leader,
            )?);
        }
        Ok(TracepointGroup { counters })
    }

    /// Every counter's events so far (including inherited children's), in the order
    /// opened, into `out` (as long as the group). One read(2).
    pub fn read(&self, out: &mut [u64]) -> Result<(), NetError> {
        if out.len() != self.counters.len() {
            return Err(NetError::Invalid(format!(
                "{} values asked of a group of {}",
                out.len(),
                self.counters.len()
            )));
        }
        read_group(&self.counters[0].fd, out)
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

    #[test]
    fn a_group_reads_its_counters_in_one_read_and_counts_as_they_do() {
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
        let closed = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let gone = closed.local_addr().unwrap();
        drop(closed);
        let tid = crate::gettid();
        let events = [
            (rid, UDP_READ_FILTER),
            (sid, UDP_SENT_FILTER),
            (sid, UDP_SEND_FAILED_FILTER),
        ];
        let g = TracepointGroup::open(&events, tid, true).unwrap();
        assert!(TracepointGroup::open(&[], tid, true).is_err());
        let mut v = [9u64; 3];
        g.read(&mut v).unwrap();
        assert_eq!(v, [0, 0, 0]);
        assert!(g.read(&mut [0u64; 2]).is_err(), "a short buffer is refused");
        for _ in 0..5 {
            a.send_to(b"x", b.local_addr().unwrap()).unwrap();
        }
        let mut buf = [0u8; 16];
        for _ in 0..3 {
            b.recv_from(&mut buf).unwrap();
        }
        // A connected send to a closed port: the ICMP error fails the next send.
        a.connect(gone).unwrap();
        let _ = a.send(b"y");
        let mut failed = 0;
        for _ in 0..20 {
            if a.send(b"y").is_err() {
                failed += 1;
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        // A thread this one starts later counts too (inherit).
        let b2 = b.try_clone().unwrap();
        std::thread::spawn(move || b2.recv_from(&mut [0u8; 16]).unwrap())
            .join()
            .unwrap();
        let mut v = [0u64; 3];
        g.read(&mut v).unwrap();
        assert_eq!(v[0], 4, "reads: 3 here, 1 by the child thread");
        assert_eq!(v[2], failed);
        assert!(v[1] >= 5, "{v:?}");
    }
}
