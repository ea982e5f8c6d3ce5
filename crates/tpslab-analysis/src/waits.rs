//! Where a process's threads spend their time: each thread's state sampled at a fixed
//! interval (/proc/PID/task/TID/stat), and for a sleeping thread the system call it sleeps
//! in (/proc/PID/task/TID/syscall, the file behind a `read`/`write` from its fd link) and
//! the kernel function it waits in (`wchan`); turned into shares by class (on CPU, the
//! network, a lock, a sleep, disk I/O, ...) per thread and for the process.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What a thread was doing in one sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
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

/// The system call name [`classify`] reads as "could not be read" ([`WaitClass::Unknown`]):
/// what the sampler passes when a sleeping thread's `syscall` file was refused.
pub const UNREADABLE_SYSCALL: &str = "(unreadable)";

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

/// What the fd of a `read`/`write` is (from /proc/PID/task/TID/fd/N).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FdKind {
    /// `socket:[inode]`.
    Socket,
    /// Anything else (a file, `pipe:[..]`, a terminal, `anon_inode:..`).
    NotSocket,
    /// Not known (no fd argument, or the link could not be read).
    Unknown,
}

/// The class of one sample: the thread's state letter, the system call it is in (its
/// name, None when not in one or unknown), the kind of the fd a read/write works on.
pub fn classify(state: char, syscall: Option<&str>, fd: FdKind) -> WaitClass {
    match state {
        'R' => return WaitClass::OnCpu,
        'D' => return WaitClass::Disk,
        _ => {}
    }
    let Some(sc) = syscall else {
        return WaitClass::Other;
    };
    match sc {
        UNREADABLE_SYSCALL => WaitClass::Unknown,
        "poll" | "ppoll" | "select" | "pselect6" | "epoll_wait" | "epoll_pwait"
        | "epoll_pwait2" | "recvfrom" | "recvmsg" | "recvmmsg" | "accept" | "accept4"
        | "connect" | "sendto" | "sendmsg" | "sendmmsg" => WaitClass::Network,
        "futex" | "futex_wait" | "futex_waitv" => WaitClass::Lock,
        "nanosleep" | "clock_nanosleep" | "pause" => WaitClass::Sleep,
        "fsync" | "fdatasync" | "sync_file_range" | "sync" | "syncfs" | "io_getevents"
        | "io_uring_enter" => WaitClass::Disk,
        "read" | "readv" | "write" | "writev" | "pread64" | "pwrite64" => match fd {
            FdKind::Socket => WaitClass::Network,
            _ => WaitClass::File,
        },
        "wait4" | "waitid" => WaitClass::Child,
        _ => WaitClass::Other,
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Server thread states sampled from /proc/PID/task/*/stat, .../syscall and .../wchan
/// over a window (a ramp step, or a whole observed run).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
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
    #[serde(default, skip_serializing_if = "is_zero")]
    pub stolen_ns: u64,
    /// Samples by class ([`classify`]); empty in records written before classes.
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
    #[serde(default, skip_serializing_if = "is_zero")]
    pub window_ns: u64,
}

impl ThreadStates {
    /// Adds one sample.
    pub fn add(&mut self, state: char, wchan: Option<&str>, syscall: Option<&str>, fd: FdKind) {
        self.samples += 1;
        match state {
            'R' => self.running += 1,
            'S' => {
                let w = wchan.filter(|w| !w.is_empty() && *w != "0").unwrap_or("?");
                *self.sleeping.entry(w.to_string()).or_default() += 1;
            }
            'D' => self.disk += 1,
            _ => self.other += 1,
        }
        let call = syscall.unwrap_or("none");
        if matches!(state, 'S' | 'D') {
            *self.by_syscall.entry(call.to_string()).or_default() += 1;
        }
        if state == 'D' {
            *self.disk_by_syscall.entry(call.to_string()).or_default() += 1;
        }
        *self
            .by_class
            .entry(classify(state, syscall, fd))
            .or_default() += 1;
    }

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

    /// The system call most blocked samples were in, among those of `class` (for disk
    /// I/O: the state-D samples' calls and the sync calls).
    pub fn top_syscall(&self, class: WaitClass) -> Option<&str> {
        let mut calls: BTreeMap<&str, u64> = BTreeMap::new();
        for (sc, n) in &self.by_syscall {
            if classify('S', Some(sc), FdKind::Unknown) == class {
                *calls.entry(sc).or_default() += n;
            }
        }
        if class == WaitClass::Disk {
            for (sc, n) in &self.disk_by_syscall {
                // Not twice: a sync call in state D is in both maps.
                if classify('S', Some(sc), FdKind::Unknown) != WaitClass::Disk {
                    *calls.entry(sc).or_default() += n;
                }
            }
        }
        calls
            .into_iter()
            .filter(|(sc, _)| *sc != "none")
            .max_by_key(|(_, n)| *n)
            .map(|(sc, _)| sc)
    }
}

/// One thread's states over an observed run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadWait {
    /// Thread id.
    pub tid: u32,
    /// Its name (/proc/PID/task/TID/comm).
    pub comm: String,
    /// Its samples.
    pub states: ThreadStates,
}

/// Where a watched process's threads spent an observed run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
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

impl ThreadWaits {
    /// One sentence of evidence: the classes that took a fifth of the threads' samples
    /// or more (at least the largest), most first, each with the system call behind it:
    /// "process 42's threads spent 92 % of the run waiting for the network (in poll)";
    /// None without samples.
    pub fn headline(&self) -> Option<String> {
        let (top, _) = self.process.dominant()?;
        let mut classes: Vec<(WaitClass, f64)> = WaitClass::ALL
            .into_iter()
            .filter_map(|c| Some((c, self.process.share_pct(c)?)))
            .filter(|&(c, p)| c == top || p >= 20.0)
            .collect();
        classes.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let parts: Vec<String> = classes
            .iter()
            .enumerate()
            .map(|(i, &(c, share))| {
                let syscall = match c {
                    WaitClass::OnCpu
                    | WaitClass::Runnable
                    | WaitClass::Stolen
                    | WaitClass::Other
                    | WaitClass::Unknown => None,
                    c => self.process.top_syscall(c),
                };
                format!(
                    "{share:.0} %{} {}{}",
                    if i == 0 { " of the run" } else { "" },
                    c.label(),
                    syscall.map_or(String::new(), |s| format!(" (in {s})"))
                )
            })
            .collect();
        let mut it = parts.into_iter();
        let first = it.next()?;
        let rest: Vec<String> = it.collect();
        let who = if self.subset {
            format!("the server's threads (in process {})", self.pid)
        } else {
            format!("process {}'s threads", self.pid)
        };
        Some(format!(
            "{who} spent {first}{}",
            if rest.is_empty() {
                String::new()
            } else {
                format!(", {}", rest.join(", "))
            }
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_are_classed_by_state_syscall_and_fd() {
        use FdKind::*;
        assert_eq!(classify('R', Some("poll"), Unknown), WaitClass::OnCpu);
        assert_eq!(classify('D', Some("write"), NotSocket), WaitClass::Disk);
        assert_eq!(classify('S', Some("poll"), Unknown), WaitClass::Network);
        assert_eq!(
            classify('S', Some("epoll_wait"), Unknown),
            WaitClass::Network
        );
        assert_eq!(classify('S', Some("read"), Socket), WaitClass::Network);
        assert_eq!(classify('S', Some("read"), NotSocket), WaitClass::File);
        assert_eq!(classify('S', Some("futex"), Unknown), WaitClass::Lock);
        assert_eq!(
            classify('S', Some("clock_nanosleep"), Unknown),
            WaitClass::Sleep
        );
        assert_eq!(classify('S', Some("fdatasync"), Unknown), WaitClass::Disk);
        assert_eq!(classify('S', None, Unknown), WaitClass::Other);
        assert_eq!(classify('S', Some("ioctl"), Unknown), WaitClass::Other);
        // A refused syscall file is not "other": the reader says it could not see.
        assert_eq!(
            classify('S', Some(UNREADABLE_SYSCALL), Unknown),
            WaitClass::Unknown
        );
    }

    #[test]
    fn shares_and_the_headline_name_the_class_and_its_syscall() {
        let mut w = ThreadWaits {
            pid: 42,
            interval_ms: 100,
            ..Default::default()
        };
        for _ in 0..46 {
            w.process
                .add('S', Some("do_sys_poll"), Some("poll"), FdKind::Unknown);
        }
        for _ in 0..3 {
            w.process.add('R', None, None, FdKind::Unknown);
        }
        w.process.add(
            'S',
            Some("futex_wait_queue"),
            Some("futex"),
            FdKind::Unknown,
        );
        assert_eq!(w.process.share_pct(WaitClass::Network), Some(92.0));
        assert_eq!(w.process.share_pct(WaitClass::OnCpu), Some(6.0));
        assert_eq!(w.process.by_syscall["poll"], 46);
        assert_eq!(
            w.headline().unwrap(),
            "process 42's threads spent 92 % of the run waiting for the network (in poll)"
        );
        // A second class with a fifth of the samples or more is named too.
        for _ in 0..25 {
            w.process.add(
                'D',
                Some("jbd2_log_wait_commit"),
                Some("fsync"),
                FdKind::Unknown,
            );
        }
        assert_eq!(
            w.headline().unwrap(),
            "process 42's threads spent 61 % of the run waiting for the network (in poll), 33 % waiting on disk I/O (in fsync)"
        );
        let mut m = ThreadStates::default();
        m.merge(&w.process);
        m.merge(&w.process);
        assert_eq!(m.samples, 150);
        assert_eq!(m.sleeping["do_sys_poll"], 92);
        assert_eq!(m.by_class[&WaitClass::Disk], 50);
        assert_eq!(ThreadWaits::default().headline(), None);
    }

    #[test]
    fn with_a_window_cpu_time_is_exact_and_the_blocked_time_split_by_samples() {
        // The busy-host bias: 25 of 31 samples saw the thread runnable, but schedstat
        // says it ran 0.7 s and waited for a CPU 0.14 s of 3 s; its 6 blocked samples
        // were all in fsync, in state D.
        let mut s = ThreadStates::default();
        for _ in 0..25 {
            s.add('R', None, None, FdKind::Unknown);
        }
        for _ in 0..6 {
            s.add(
                'D',
                Some("jbd2_log_wait_commit"),
                Some("fsync"),
                FdKind::Unknown,
            );
        }
        s.on_cpu_ns = 700_000_000;
        s.runqueue_ns = 140_000_000;
        s.window_ns = 3_000_000_000;
        let pct = |c| (s.share_pct(c).unwrap() * 10.0).round() / 10.0;
        assert_eq!(pct(WaitClass::OnCpu), 23.3);
        assert_eq!(pct(WaitClass::Runnable), 4.7);
        assert_eq!(pct(WaitClass::Disk), 72.0);
        assert_eq!(s.dominant().unwrap().0, WaitClass::Disk);
        let total: f64 = WaitClass::ALL
            .iter()
            .map(|&c| s.share_pct(c).unwrap())
            .sum();
        assert!((total - 100.0).abs() < 1e-9, "{total}");
        // Without samples of a blocked thread, its blocked time is "other".
        let mut r = ThreadStates::default();
        r.add('R', None, None, FdKind::Unknown);
        r.on_cpu_ns = 500;
        r.window_ns = 1000;
        assert_eq!(r.share_pct(WaitClass::Other), Some(50.0));
        // On a guest, time the hypervisor held the vCPU comes out of that unseen time
        // first (never more than is left after the CPU and run-queue time).
        r.stolen_ns = 300;
        assert_eq!(r.share_pct(WaitClass::Stolen), Some(30.0));
        assert_eq!(r.share_pct(WaitClass::Other), Some(20.0));
        r.stolen_ns = 900;
        assert_eq!(r.share_pct(WaitClass::Stolen), Some(50.0));
        assert_eq!(r.share_pct(WaitClass::Other), Some(0.0));
        // A blocked thread's stolen time is taken from its blocked time, the rest split
        // by its blocked samples.
        s.stolen_ns = 60_000_000;
        let pct = |c| (s.share_pct(c).unwrap() * 10.0).round() / 10.0;
        assert_eq!(pct(WaitClass::Stolen), 2.0);
        assert_eq!(pct(WaitClass::Disk), 70.0);
    }

    #[test]
    fn a_record_without_classes_still_reads() {
        let old = r#"{"samples":10,"running":10,"sleeping":{},"disk":0,"other":0}"#;
        let s: ThreadStates = serde_json::from_str(old).unwrap();
        assert_eq!(s.samples, 10);
        assert!(s.by_class.is_empty());
    }
}
