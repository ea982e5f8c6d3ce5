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
