//! Where a process's threads spent their time, as a record holds it: samples of each
//! thread's state, system call and wait channel, counted by class ([`WaitClass`]) per
//! thread and for the process, with the shares they give. Sampling and classifying a
//! sample is `tpslab_analysis::waits`.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What a thread was doing in one sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum WaitClass {
    /// State R: running, or runnable and waiting for a CPU (schedstat splits the two:
    /// with a window, this is the time on a CPU alone).
    OnCpu,
    /// Runnable, waiting for a CPU (schedstat's run-queue time; only in time shares).
    Runnable,
    /// On a virtual CPU the hypervisor did not run (steal; only in time shares): an
    /// estimate, see [`ThreadStates::stolen_ns`].
    Stolen,
    /// Blocked in poll/select/epoll, or in a receive, send, accept or connect on a socket.
    Network,
    /// Blocked in futex: a lock or a condition variable.
    Lock,
    /// Sleeping by request (nanosleep, clock_nanosleep, pause).
    Sleep,
    /// State D (uninterruptible: disk I/O, mostly), or blocked in fsync/fdatasync.
    Disk,
    /// Blocked reading or writing a file, pipe or terminal that is not a socket.
    File,
    /// Waiting for a child process (wait4, waitid).
    Child,
    /// Anything else (another system call, or asleep outside one).
    Other,
    /// Asleep in a system call this user could not read (`/proc/PID/task/TID/syscall`
    /// needs ptrace access: root, or the same user where kernel.yama.ptrace_scope allows).
    Unknown,
}

impl WaitClass {
    /// Words for a report.
    pub fn label(self) -> &'static str {
        match self {
            WaitClass::OnCpu => "on CPU",
            WaitClass::Runnable => "waiting for a CPU",
            WaitClass::Stolen => "on a vCPU the hypervisor held (steal)",
            WaitClass::Network => "waiting for the network",
            WaitClass::Lock => "waiting on a lock",
            WaitClass::Sleep => "sleeping",
            WaitClass::Disk => "waiting on disk I/O",
            WaitClass::File => "waiting on a file or pipe",
            WaitClass::Child => "waiting for a child",
            WaitClass::Other => "other",
            WaitClass::Unknown => "in a wait this user cannot read (run as root)",
        }
    }

    /// Every class, in report order.
    pub const ALL: [WaitClass; 11] = [
        WaitClass::OnCpu,
        WaitClass::Runnable,
        WaitClass::Stolen,
        WaitClass::Network,
        WaitClass::Lock,
        WaitClass::Sleep,
        WaitClass::Disk,
        WaitClass::File,
        WaitClass::Child,
        WaitClass::Other,
        WaitClass::Unknown,
    ];
}

/// Server thread states sampled from /proc/PID/task/*/stat, .../syscall and .../wchan
/// over a window (a ramp step, or a whole observed run).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ThreadStates {
    /// Thread samples taken (threads x sampling ticks).
    pub samples: u64,
    /// State R: running or runnable.
    pub running: u64,
    /// State S, by wait channel (the kernel function it sleeps in, from `wchan`):
    /// `futex_wait_queue` = a lock or condition variable, `do_epoll_wait` /
    /// `wait_woken` / `sk_wait_data` = waiting for the network, `hrtimer_nanosleep` = sleep.
    pub sleeping: BTreeMap<String, u64>,
    /// State D: uninterruptible (disk I/O, some locks).
    pub disk: u64,
    /// Any other state.
    pub other: u64,
    /// Time the server's threads ran on a CPU over the window, ns (sum over threads
    /// alive at both ends; from /proc/PID/task/TID/schedstat column 1).
    #[serde(default)]
    pub on_cpu_ns: u64,
    /// Time they were runnable but waiting for a CPU, ns (schedstat column 2): state R
    /// splits into running (on_cpu_ns) and runnable (this).
    #[serde(default)]
    pub runqueue_ns: u64,
    /// Time on a virtual CPU the hypervisor was running something else, ns: neither on
    /// a CPU nor in the run queue by schedstat, nor blocked. An estimate: `on_cpu_ns` x
    /// the host's steal per busy CPU-ns over the window (/proc/stat `steal` over user +
    /// nice + system + irq + softirq, all CPUs); 0 on bare metal.
    #[serde(default, skip_serializing_if = "crate::is_zero")]
    pub stolen_ns: u64,
    /// Samples by class (`tpslab_analysis::waits::classify`); empty in records written before classes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub by_class: BTreeMap<WaitClass, u64>,
    /// Samples blocked (states S and D) by the system call the thread was in
    /// (/proc/PID/task/TID/syscall; "none" outside one, "unknown" when not readable).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub by_syscall: BTreeMap<String, u64>,
    /// The state-D samples among those, by system call (any call can wait on the disk).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub disk_by_syscall: BTreeMap<String, u64>,
    /// The time the samples span, ns (summed over threads, from each one's first sample
    /// to the last): with it, shares are of time: on a CPU and waiting for one exactly
    /// from schedstat, the rest (blocked) split by the blocked samples. 0: shares of
    /// samples (a ramp step's states).
    #[serde(default, skip_serializing_if = "crate::is_zero")]
    pub window_ns: u64,
}

impl ThreadStates {
    /// Adds another window's (or thread's) samples.
    pub fn merge(&mut self, o: &ThreadStates) {
        self.samples += o.samples;
        self.running += o.running;
        self.disk += o.disk;
        self.other += o.other;
        self.on_cpu_ns += o.on_cpu_ns;
        self.runqueue_ns += o.runqueue_ns;
        self.stolen_ns += o.stolen_ns;
        for (k, v) in &o.sleeping {
            *self.sleeping.entry(k.clone()).or_default() += v;
        }
        for (k, v) in &o.by_class {
            *self.by_class.entry(*k).or_default() += v;
        }
        for (k, v) in &o.by_syscall {
            *self.by_syscall.entry(k.clone()).or_default() += v;
        }
        for (k, v) in &o.disk_by_syscall {
            *self.disk_by_syscall.entry(k.clone()).or_default() += v;
        }
        self.window_ns += o.window_ns;
    }

    /// Share of `class`, percent (None without samples). With a window: of time (on a
    /// CPU and runnable from schedstat, exact; each wait class its share of the blocked
    /// samples times the time blocked), since a sampler on a busy host tends to run just
    /// after its target woke and sees it runnable more often than it is. Without: of
    /// samples (state R counted as on a CPU).
    pub fn share_pct(&self, class: WaitClass) -> Option<f64> {
        if self.samples == 0 {
            return None;
        }
        let n = |c: WaitClass| self.by_class.get(&c).copied().unwrap_or(0);
        if self.window_ns == 0 {
            return Some(match class {
                WaitClass::Runnable | WaitClass::Stolen => 0.0,
                c => 100.0 * n(c) as f64 / self.samples as f64,
            });
        }
        let w = self.window_ns as f64;
        let cpu = (self.on_cpu_ns as f64).min(w);
        let runq = (self.runqueue_ns as f64).min(w - cpu);
        let stolen = (self.stolen_ns as f64).min(w - cpu - runq);
        let blocked_time = w - cpu - runq - stolen;
        let blocked_samples = self.samples - n(WaitClass::OnCpu);
        Some(match class {
            WaitClass::OnCpu => 100.0 * cpu / w,
            WaitClass::Runnable => 100.0 * runq / w,
            WaitClass::Stolen => 100.0 * stolen / w,
            // Blocked time no blocked sample saw: "other".
            WaitClass::Other if blocked_samples == 0 => 100.0 * blocked_time / w,
            _ if blocked_samples == 0 => 0.0,
            c => 100.0 * blocked_time / w * n(c) as f64 / blocked_samples as f64,
        })
    }

    /// The class with the largest share, and that share (percent); None without samples.
    pub fn dominant(&self) -> Option<(WaitClass, f64)> {
        WaitClass::ALL
            .into_iter()
            .filter_map(|c| Some((c, self.share_pct(c)?)))
            .fold(None, |best: Option<(WaitClass, f64)>, x| match best {
                Some(b) if b.1 >= x.1 => Some(b),
                _ => Some(x),
            })
    }
}

/// One thread's states over an observed run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ThreadWait {
    /// Thread id.
    pub tid: u32,
    /// Its name (/proc/PID/task/TID/comm).
    pub comm: String,
    /// Its samples.
    pub states: ThreadStates,
    /// The process it is a thread of (`Tgid` of /proc/TID/status): the watched PID, or
    /// another process of the same server (a pre-forked worker holding the target's
    /// socket). 0 when not known (records written before it, the exited threads' row).
    #[serde(default, skip_serializing_if = "crate::is_zero")]
    pub pid: u32,
    /// Of its samples in a futex (the `Lock` class of `states`), those waiting with a
    /// timeout (a futex wait op whose timeout argument was set, from
    /// /proc/TID/task/TID/syscall): a timed sleep (a JVM's compiler threads and
    /// Monitor Deflation between their turns, `Thread.sleep`, a pool's keep-alive), not
    /// a wait for a lock. 0 in records written before it.
    #[serde(default, skip_serializing_if = "crate::is_zero")]
    pub futex_timed: u64,
}

/// Where a watched process's threads spent an observed run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ThreadWaits {
    /// PID of the process.
    pub pid: u32,
    /// Sampling interval, ms.
    pub interval_ms: u64,
    /// Sampling ticks.
    pub ticks: u64,
    /// All its threads' samples together.
    pub process: ThreadStates,
    /// Each thread's, most samples first.
    pub threads: Vec<ThreadWait>,
    /// Only some of the process's threads were sampled (tpslab's own server threads
    /// inside tpslab's process).
    #[serde(default)]
    pub subset: bool,
}

/// One thread of a watched server over one ramp step: the CPU time it used and its
/// sampled states, to tell the threads that served the load from idle helpers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct StepThread {
    /// Thread id.
    pub tid: u32,
    /// Its name (/proc/PID/task/TID/stat field 2).
    pub comm: String,
    /// CPU time it used in the step, ns: the growth of utime+stime
    /// (/proc/PID/task/TID/stat fields 14 and 15, USER_HZ ticks, so 10 ms steps at
    /// USER_HZ 100) from the step's first read to its last.
    pub cpu_ns: u64,
    /// Its samples in the step; `on_cpu_ns` and `runqueue_ns` are its schedstat deltas
    /// (exact time on a CPU and waiting for one, ns), `window_ns` is 0 (shares of samples).
    pub states: ThreadStates,
    /// The time its CPU time and schedstat deltas cover, ns: from the step's first read
    /// (or the thread's birth, for one born in the step: its own starttime) to the last read at the
    /// step's end; shares of the step are of this. 0 in records written before it: the
    /// step's planned window stands in.
    #[serde(default, skip_serializing_if = "crate::is_zero")]
    pub span_ns: u64,
    /// Of its samples in a futex (the `Lock` class of `states`), those waiting with a
    /// timeout (a futex wait op whose timeout argument was set, from
    /// /proc/PID/task/TID/syscall): a timed sleep (Java's `Thread.sleep`, a timer, a
    /// pool's keep-alive), not a wait for a lock. 0 in records written before it.
    #[serde(default, skip_serializing_if = "crate::is_zero")]
    pub futex_timed: u64,
    /// Samples blocked in a receive, read, send or connect on a socket to another peer
    /// (not one of the load's connections to the target's port, nor a pipe, an eventfd
    /// or a file), by system call. None in records written before it (then its blocked
    /// socket calls stand in).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_by_syscall: Option<BTreeMap<String, u64>>,
    /// The process it is a thread of (its thread group id): the server's PID (`--pid`)
    /// or one of its descendants (a prefork server's worker). 0 in records written
    /// before the descendants were sampled (then the PID's own threads only).
    #[serde(default, skip_serializing_if = "crate::is_zero")]
    pub pid: u32,
    /// Its process was started during the step (a worker forked on demand or
    /// restarted): `span_ns` runs from its birth (/proc/PID/task/TID/stat starttime),
    /// not from the step's start, and its CPU time and schedstat count from 0. False in
    /// records written before it.
    #[serde(default, skip_serializing_if = "is_false")]
    pub born: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}
