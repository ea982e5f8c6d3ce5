//! CPU affinity and scheduling policy of the calling thread (like taskset and chrt).

use crate::NetError;
use serde::{Deserialize, Serialize};

/// A scheduling policy: SCHED_OTHER, or a real-time policy with its priority (1..=99).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "policy", content = "priority", rename_all = "lowercase")]
pub enum SchedPolicy {
    /// SCHED_OTHER (CFS/EEVDF), the default.
    Other,
    /// SCHED_FIFO with a priority 1..=99.
    Fifo(u8),
    /// SCHED_RR with a priority 1..=99.
    Rr(u8),
}

impl std::fmt::Display for SchedPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SchedPolicy::Other => write!(f, "other"),
            SchedPolicy::Fifo(p) => write!(f, "fifo:{p}"),
            SchedPolicy::Rr(p) => write!(f, "rr:{p}"),
        }
    }
}

impl std::str::FromStr for SchedPolicy {
    type Err = String;
    /// Parses `other`, `fifo:PRIO` or `rr:PRIO` with PRIO in 1..=99.
    fn from_str(s: &str) -> Result<Self, String> {
        let bad =
            || format!("scheduler \"{s}\": allowed other, fifo:PRIO, rr:PRIO with PRIO 1..=99");
        if s == "other" {
            return Ok(SchedPolicy::Other);
        }
        let (kind, prio) = s.split_once(':').ok_or_else(bad)?;
        let prio: u8 = prio.parse().map_err(|_| bad())?;
        if !(1..=99).contains(&prio) {
            return Err(bad());
        }
        match kind {
            "fifo" => Ok(SchedPolicy::Fifo(prio)),
            "rr" => Ok(SchedPolicy::Rr(prio)),
            _ => Err(bad()),
        }
    }
}

/// Sets the calling thread's timer slack, ns (PR_SET_TIMERSLACK). The default 50 us
/// makes every sleep overshoot; 1 ns keeps hrtimer sleeps at their time.
pub fn set_timer_slack_ns(ns: u64) {
    // SAFETY: prctl(PR_SET_TIMERSLACK) only changes this thread's timer slack.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns.max(1) as libc::c_ulong, 0, 0, 0) };
}

/// Pins the calling thread to `cpus` (sched_setaffinity on tid 0).
pub fn set_affinity(cpus: &[usize]) -> Result<(), NetError> {
    set_affinity_of(0, cpus)
}

/// Pins thread `tid` (0: the caller) to `cpus`, like `taskset -p`.
pub fn set_affinity_of(tid: u32, cpus: &[usize]) -> Result<(), NetError> {
    // SAFETY: cpu_set_t is plain data; CPU_SET writes within it for ids < CPU_SETSIZE.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        if c >= libc::CPU_SETSIZE as usize {
            return Err(NetError::Invalid(format!("CPU {c} above CPU_SETSIZE")));
        }
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    let rc = unsafe {
        libc::sched_setaffinity(
            tid as libc::pid_t,
            std::mem::size_of::<libc::cpu_set_t>(),
            &set,
        )
    };
    if rc != 0 {
        return Err(NetError::last(format!("sched_setaffinity {tid} {cpus:?}")));
    }
    Ok(())
}

/// The CPUs the calling thread may run on (sched_getaffinity).
pub fn get_affinity() -> Result<Vec<usize>, NetError> {
    // SAFETY: as in set_affinity.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Err(NetError::last("sched_getaffinity"));
    }
    Ok((0..libc::CPU_SETSIZE as usize)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect())
}

/// Sets the calling thread's scheduling policy (sched_setscheduler on tid 0).
/// Real-time policies need root or CAP_SYS_NICE (EPERM otherwise).
pub fn set_policy(policy: SchedPolicy) -> Result<(), NetError> {
    set_policy_of(0, policy)
}

/// Sets thread `tid`'s (0: the caller's) scheduling policy, like `chrt -p`.
pub fn set_policy_of(tid: u32, policy: SchedPolicy) -> Result<(), NetError> {
    let (pol, prio) = match policy {
        SchedPolicy::Other => (libc::SCHED_OTHER, 0),
        SchedPolicy::Fifo(p) => (libc::SCHED_FIFO, p as i32),
        SchedPolicy::Rr(p) => (libc::SCHED_RR, p as i32),
    };
    let param = libc::sched_param {
        sched_priority: prio,
    };
    // SAFETY: param is a valid sched_param.
    let rc = unsafe { libc::sched_setscheduler(tid as libc::pid_t, pol, &param) };
    if rc != 0 {
        return Err(NetError::last(format!("sched_setscheduler {tid} {policy}")));
    }
    Ok(())
}

/// Asks the kernel for a short time slice, `ns` (clamped by the kernel to 100 us..100 ms),
/// for the calling thread if it runs under SCHED_OTHER (sched_setattr with
/// `sched_runtime`, EEVDF's custom slice, Linux 6.12 and later). A thread that sleeps
/// between short bursts of work (a paced sender) then gets an earlier virtual deadline
/// on each wake-up and preempts a CPU-bound task instead of waiting out that task's
/// slice (several ms late on a busy host). Nice and policy are kept; a real-time
/// thread is left alone. Returns false when the kernel refuses (older kernels: EINVAL)
/// or the thread is not SCHED_OTHER.
pub fn request_short_slice(ns: u64) -> bool {
    /// struct sched_attr (include/uapi/linux/sched/types.h), size 56.
    #[repr(C)]
    struct SchedAttr {
        size: u32,
        policy: u32,
        flags: u64,
        nice: i32,
        priority: u32,
        runtime: u64,
        deadline: u64,
        period: u64,
        util_min: u32,
        util_max: u32,
    }
    // SAFETY: sched_getscheduler(0) only reads the caller's policy.
    if unsafe { libc::sched_getscheduler(0) } != libc::SCHED_OTHER {
        return false;
    }
    // The thread's nice value (getpriority on its tid), kept as it was.
    // SAFETY: gettid and getpriority read the caller's own attributes.
    let nice = unsafe {
        *libc::__errno_location() = 0;
        libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t)
    };
    // SAFETY: as above; errno set by a failed getpriority.
    if nice == -1 && unsafe { *libc::__errno_location() } != 0 {
        return false;
    }
    let attr = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        policy: libc::SCHED_OTHER as u32,
        flags: 0,
        nice,
        priority: 0,
        runtime: ns,
        deadline: 0,
        period: 0,
        util_min: 0,
        util_max: 0,
    };
    // SAFETY: attr is a valid, fully initialised sched_attr of the size it states; the
    // call changes only the calling thread's (pid 0) scheduling attributes.
    let rc = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const SchedAttr, 0) };
    rc == 0
}
