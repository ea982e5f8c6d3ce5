//! Low-level networking and OS calls for tpslab's hot path.
//!
//! This is the only crate of the workspace with `unsafe` and `libc`. It offers:
//! - [`UdpSock`]: a UDP socket with the options tpslab needs (SO_REUSEPORT, SO_RCVBUF /
//!   SO_RCVBUFFORCE with the granted value read back, receive timeout, socket inode);
//! - [`RecvBatch`] / [`SendBatch`]: preallocated `recvmmsg(2)` / `sendmmsg(2)` batches that
//!   allocate nothing per datagram;
//! - [`mono_ns`]: the monotonic clock in nanoseconds used for every timestamp;
//! - [`sched`]: CPU affinity and scheduling policy of the calling thread;
//! - [`tcp`]: TCP_INFO snapshots, TCP buffer sizes and window clamp;
//! - [`tun`]: TUN devices and interface setup for the user-space delay line;
//! - [`ns::NetNs`]: handles on network namespaces that threads join.

pub mod async_timer;
pub mod batch;
pub mod diag;
pub mod ns;
pub mod perf;
pub mod perf_ring;
pub mod poll;
pub mod process;
pub mod sched;
pub mod sock;
pub mod tcp;
pub mod tun;

pub use batch::{RecvBatch, SendBatch};
pub use sock::{RcvbufGrant, ReuseportSteer, SockMem, UdpSock};

/// Errors of socket and OS calls; each names the call and the value involved.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    /// A system call failed.
    #[error("{call} failed: {error}")]
    Sys {
        /// The call and its argument, e.g. "bind 127.0.0.1:9000".
        call: String,
        /// The OS error (errno); part of the message, so not repeated as a source.
        error: std::io::Error,
    },
    /// A value outside what the kernel or tpslab accepts.
    #[error("{0}")]
    Invalid(String),
}

impl NetError {
    /// Wraps the last OS error with the name of the call.
    pub fn last(call: impl Into<String>) -> Self {
        NetError::Sys {
            call: call.into(),
            error: std::io::Error::last_os_error(),
        }
    }
    /// Wraps an io::Error with the name of the call.
    pub fn io(call: impl Into<String>, error: std::io::Error) -> Self {
        NetError::Sys {
            call: call.into(),
            error,
        }
    }
    /// The errno of a failed system call, if any.
    pub fn errno(&self) -> Option<i32> {
        match self {
            NetError::Sys { error, .. } => error.raw_os_error(),
            NetError::Invalid(_) => None,
        }
    }
}

/// Monotonic clock (CLOCK_MONOTONIC) in nanoseconds. Comparable across threads of one
/// host; used for intended and actual send times and for every sample timestamp.
#[inline]
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the valid timespec we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Sleeps until the monotonic clock reads `deadline_ns` (the [`mono_ns`] scale): one
/// `clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)`, restarted after a signal, no clock
/// read of its own. Returns at once for a deadline already past. How late it wakes is
/// the calling thread's timer slack plus the scheduler's delay.
#[inline]
pub fn sleep_until_mono_ns(deadline_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (deadline_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (deadline_ns % 1_000_000_000) as libc::c_long,
    };
    loop {
        // SAFETY: ts is a valid timespec; with TIMER_ABSTIME the remainder is not written
        // (null is allowed).
        let rc = unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        };
        // clock_nanosleep returns the error number itself; EINTR: sleep again to the
        // same absolute time. Any other error (none for valid input) ends the wait.
        if rc != libc::EINTR {
            return;
        }
    }
}

/// What the kernel says of its wall clock (`adjtimex`, read only): whether it is
/// synchronized (an NTP or PTP daemon disciplines it: STA_UNSYNC clear) and its maximum
/// and estimated error, microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ClockStatus {
    pub synchronized: bool,
    pub maxerror_us: i64,
    pub esterror_us: i64,
}

/// The wall clock's status (see [`ClockStatus`]); None when adjtimex fails.
pub fn clock_status() -> Option<ClockStatus> {
    // SAFETY: an all-zero timex (modes 0: read only) is valid input; adjtimex writes into it.
    let mut t: libc::timex = unsafe { std::mem::zeroed() };
    // SAFETY: t is a valid, writable timex.
    let state = unsafe { libc::adjtimex(&mut t) };
    if state < 0 {
        return None;
    }
    Some(ClockStatus {
        synchronized: state != libc::TIME_ERROR && t.status & libc::STA_UNSYNC == 0,
        maxerror_us: t.maxerror as i64,
        esterror_us: t.esterror as i64,
    })
}

/// Raises the soft limit of open files (RLIMIT_NOFILE) to the hard limit and returns the
/// soft limit now in force (unchanged when raising fails).
pub fn raise_nofile() -> u64 {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a valid struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) != 0 {
            return 1024;
        }
        if r.rlim_cur < r.rlim_max {
            let want = libc::rlimit {
                rlim_cur: r.rlim_max,
                rlim_max: r.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &want) == 0 {
                r.rlim_cur = r.rlim_max;
            }
        }
    }
    r.rlim_cur
}

/// Clock ticks per second of /proc CPU times (sysconf _SC_CLK_TCK; 100 when unknown).
pub fn clock_ticks_per_s() -> f64 {
    // SAFETY: sysconf has no memory effects.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// Wall clock (CLOCK_REALTIME) in nanoseconds since the Unix epoch: to compare with kernel
/// receive timestamps, which use it, and with a fleet's common start time.
#[inline]
pub fn real_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the valid timespec we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The symbolic name of an errno value ("EAGAIN", "ENOBUFS", ...), or "errno N".
pub fn errno_name(errno: i32) -> String {
    let name = match errno {
        libc::EAGAIN => "EAGAIN",
        libc::ENOBUFS => "ENOBUFS",
        libc::ECONNREFUSED => "ECONNREFUSED",
        libc::EMSGSIZE => "EMSGSIZE",
        libc::EINVAL => "EINVAL",
        libc::EPERM => "EPERM",
        libc::ENETUNREACH => "ENETUNREACH",
        libc::EHOSTUNREACH => "EHOSTUNREACH",
        libc::EINTR => "EINTR",
        libc::ENOMEM => "ENOMEM",
        libc::EIO => "EIO",
        libc::EADDRNOTAVAIL => "EADDRNOTAVAIL",
        libc::EACCES => "EACCES",
        _ => return format!("errno {errno}"),
    };
    name.to_string()
}

/// Number of CPUs the kernel has online (sysconf _SC_NPROCESSORS_ONLN).
pub fn online_cpus() -> usize {
    // SAFETY: sysconf has no memory effects.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if n < 1 {
        1
    } else {
        n as usize
    }
}

/// The page size, bytes (udp_mem and tcp_mem count in pages).
pub fn page_size() -> u64 {
    rustix::param::page_size() as u64
}

/// The kernel thread id of the calling thread (gettid), as seen in /proc/PID/task.
pub fn gettid() -> u32 {
    // SAFETY: gettid has no arguments and no memory effects.
    unsafe { libc::syscall(libc::SYS_gettid) as u32 }
}

/// Whether the process runs with effective uid 0.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no memory effects.
    unsafe { libc::geteuid() == 0 }
}
