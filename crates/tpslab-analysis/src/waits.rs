//! Where a process's threads spend their time: each thread's state sampled at a fixed
//! interval (/proc/PID/task/TID/stat), and for a sleeping thread the system call it sleeps
//! in (/proc/PID/task/TID/syscall, the file behind a `read`/`write` from its fd link) and
//! the kernel function it waits in (`wchan`); turned into shares by class (on CPU, the
//! network, a lock, a sleep, disk I/O, ...) per thread and for the process. The counts
//! and shares are the record's types ([`tpslab_record::waits`]); sampling into them and
//! reading them is here.

use std::collections::BTreeMap;

/// CPU time below this share of the step is none to speak of (0.5 %: 10 ms of a 2 s
/// step; a parked thread woken by a timer a hundred times a second uses less).
pub const IDLE_CPU_SHARE: f64 = 0.005;
use tpslab_record::waits::{ThreadStates, ThreadWait, ThreadWaits, WaitClass};

/// The system call name [`classify`] reads as "could not be read" ([`WaitClass::Unknown`]):
/// what the sampler passes when a sleeping thread's `syscall` file was refused.
pub const UNREADABLE_SYSCALL: &str = "(unreadable)";

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

/// Adds one sample of a thread to `states`: its state letter (`R`, `S`, `D`, ... from
/// /proc/PID/task/TID/stat), its wchan, the system call it is in (by name) and the kind
/// of descriptor that call waits on; counted by state, wchan, syscall and [`WaitClass`].
pub fn add_sample(
    states: &mut ThreadStates,
    state: char,
    wchan: Option<&str>,
    syscall: Option<&str>,
    fd: FdKind,
) {
    states.samples += 1;
    match state {
        'R' => states.running += 1,
        'S' => {
            let w = wchan.filter(|w| !w.is_empty() && *w != "0").unwrap_or("?");
            *states.sleeping.entry(w.to_string()).or_default() += 1;
        }
        'D' => states.disk += 1,
        _ => states.other += 1,
    }
    let call = syscall.unwrap_or("none");
    if matches!(state, 'S' | 'D') {
        *states.by_syscall.entry(call.to_string()).or_default() += 1;
    }
    if state == 'D' {
        *states.disk_by_syscall.entry(call.to_string()).or_default() += 1;
    }
    *states
        .by_class
        .entry(classify(state, syscall, fd))
        .or_default() += 1;
}

/// The system call most blocked samples were in, among those of `class` (for disk
/// I/O: the state-D samples' calls and the sync calls).
pub fn top_syscall(states: &ThreadStates, class: WaitClass) -> Option<&str> {
    let mut calls: BTreeMap<&str, u64> = BTreeMap::new();
    for (sc, n) in &states.by_syscall {
        if classify('S', Some(sc), FdKind::Unknown) == class {
            *calls.entry(sc).or_default() += n;
        }
    }
    if class == WaitClass::Disk {
        for (sc, n) in &states.disk_by_syscall {
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

/// One sentence of evidence: the classes that took a fifth of the threads' samples
/// or more (at least the largest), most first, each with the system call behind it:
/// "process 42's threads spent 92 % of the run waiting for the network (in poll)";
/// None without samples.
pub fn headline(waits: &ThreadWaits) -> Option<String> {
    let (top, _) = waits.process.dominant()?;
    let mut classes: Vec<(WaitClass, f64)> = WaitClass::ALL
        .into_iter()
        .filter_map(|c| Some((c, waits.process.share_pct(c)?)))
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
                c => crate::waits::top_syscall(&waits.process, c),
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
    // The processes the threads belong to: several for a pre-forked server's
    // workers, each named (not only the first one's PID).
    let mut pids: Vec<u32> = waits
        .threads
        .iter()
        .map(|t| t.pid)
        .filter(|&p| p > 0)
        .collect();
    pids.sort_unstable();
    pids.dedup();
    let who = if pids.len() > 1 {
        let list: Vec<String> = pids.iter().map(|p| p.to_string()).collect();
        format!("the server's threads (in processes {})", list.join(", "))
    } else if waits.subset {
        format!("the server's threads (in process {})", waits.pid)
    } else {
        format!("process {}'s threads", waits.pid)
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

/// Idle over an observed run: its time on a CPU (schedstat) under
/// [`IDLE_CPU_SHARE`] of the time it was sampled over, never seen
/// running or runnable, and every sample in one wait class: parked the whole run (a JVM's
/// compiler, GC and finalizer threads in a futex, a pool's spare threads). Never a
/// thread whose time on a CPU was not read (no schedstat: `window_ns` 0), nor the
/// exited threads' sum (tid 0).
///
/// CPU time below [`IDLE_CPU_SHARE`] of the window is none to speak of.
pub fn is_idle(t: &ThreadWait) -> bool {
    let s = &t.states;
    let classes = s.by_class.values().filter(|&&n| n > 0).count();
    t.tid != 0
        && s.window_ns > 0
        && (s.on_cpu_ns as f64) < IDLE_CPU_SHARE * s.window_ns as f64
        && s.running == 0
        && s.by_class.get(&WaitClass::OnCpu).copied().unwrap_or(0) == 0
        && classes == 1
}

/// Names (`comm`, its first 15 bytes; a prefix of it) of the threads a runtime starts
/// for its own work, beside the threads that read and serve requests: HotSpot's (the
/// JVM's garbage collectors, JIT compilers, VM operations and reference handling) and
/// .NET's, redis's background I/O threads and its allocator's. They run when their
/// runtime has work (a collection, a compilation, a lazy free, an fsync) and wait on a
/// condition variable (a futex, most without a timeout) the rest of the time, as a
/// request's thread waits on a lock; from their samples alone they cannot be told from
/// a pool's threads blocked on a lock (the JDK HttpServer's pool threads were never
/// seen on a socket in 6,400 samples of `ramp_java_http_lock.json`, where only its
/// dispatcher reads), so they are known by their names.
pub const RUNTIME_HELPERS: &[&str] = &[
    "GC Thread#",
    "G1 ",
    "VM Thread",
    "VM Periodic Tas",
    "C1 CompilerThre",
    "C2 CompilerThre",
    "Reference Handl",
    "Finalizer",
    "Signal Dispatch",
    "Service Thread",
    "Monitor Deflati",
    "Sweeper thread",
    "Common-Cleaner",
    "Notification Th",
    "Attach Listener",
    // .NET's own threads by name, never the prefix: its thread pool's workers (".NET TP
    // Worker", ".NET ThreadPool" cut to 15 bytes) serve ASP.NET's requests.
    ".NET Finalizer",
    ".NET Tiered Com",
    ".NET BGC",
    ".NET Server GC",
    ".NET SigHandler",
    ".NET EventPipe",
    ".NET Debugger",
    ".NET Timer",
    "bio_",
    "jemalloc_bg_thd",
];

/// A runtime's helper thread, not one serving requests: named as one of
/// [`RUNTIME_HELPERS`] and never seen in a network wait (`network` samples 0: a thread
/// seen in a receive, accept, poll or epoll wait, or reading or writing a socket, serves
/// whatever its name). Its waits say nothing of where requests wait.
pub fn is_helper(comm: &str, states: &ThreadStates) -> bool {
    RUNTIME_HELPERS.iter().any(|h| comm.starts_with(h))
        && states
            .by_class
            .get(&WaitClass::Network)
            .copied()
            .unwrap_or(0)
            == 0
}

/// A thread's states as a wait verdict reads them: its futex waits with a timeout
/// (`futex_timed`) moved from the lock class to the sleep class (a timed futex is a
/// sleep or a timer, not a wait for a lock: a JVM's compiler threads between their
/// turns).
fn timed_futex_as_sleep(t: &ThreadWait) -> ThreadWait {
    let mut t = t.clone();
    let lock = t
        .states
        .by_class
        .get(&WaitClass::Lock)
        .copied()
        .unwrap_or(0);
    let timed = t.futex_timed.min(lock);
    if timed > 0 {
        t.states.by_class.insert(WaitClass::Lock, lock - timed);
        *t.states.by_class.entry(WaitClass::Sleep).or_default() += timed;
        t.states.by_class.retain(|_, n| *n > 0);
    }
    t
}

/// The threads a wait verdict leaves out of `w`: idle ones ([`is_idle`]) and a
/// runtime's busy helpers ([`is_helper`], not idle).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeftOut {
    /// Idle threads left out.
    pub idle: usize,
    /// Busy helpers left out, by name (`comm`), in the record's thread order.
    pub helpers: Vec<String>,
}

impl LeftOut {
    /// What the headline adds: ` (17 idle threads left out: parked in one wait the whole
    /// run, no CPU time; 3 runtime helper threads left out, not serving requests: C2
    /// CompilerThre, C1 CompilerThre, ...)`, up to 4 helpers named; empty when none.
    pub fn words(&self) -> String {
        let plural = |n: usize| if n == 1 { "" } else { "s" };
        let mut parts = Vec::new();
        if self.idle > 0 {
            parts.push(format!(
                "{} idle thread{} left out: parked in one wait the whole run, no CPU time",
                self.idle,
                plural(self.idle)
            ));
        }
        if !self.helpers.is_empty() {
            let mut names: Vec<&str> = self.helpers.iter().map(String::as_str).take(4).collect();
            if self.helpers.len() > 4 {
                names.push("...");
            }
            parts.push(format!(
                "{} runtime helper thread{} left out, not serving requests: {}",
                self.helpers.len(),
                plural(self.helpers.len()),
                names.join(", ")
            ));
        }
        if parts.is_empty() {
            String::new()
        } else {
            format!(" ({})", parts.join("; "))
        }
    }
}

/// `w` as a wait verdict reads it: its idle threads ([`is_idle`]) and its runtime's busy
/// helpers ([`is_helper`]) left out (unless every thread is one or the other: then there
/// is nothing else to judge by), each other thread's futex waits with a timeout counted
/// as sleeps, the process's samples those of the kept threads added together; with what
/// was left out. `w` as it is (nothing left out) when no thread is idle or a helper and
/// none waited in a timed futex.
pub fn without_idle(w: &ThreadWaits) -> (std::borrow::Cow<'_, ThreadWaits>, LeftOut) {
    use std::borrow::Cow;
    let idle_or_helper = |t: &ThreadWait| is_idle(t) || is_helper(&t.comm, &t.states);
    let out = w.threads.iter().filter(|t| idle_or_helper(t)).count();
    let keep_all = out == w.threads.len();
    let left = if keep_all {
        LeftOut::default()
    } else {
        LeftOut {
            idle: w.threads.iter().filter(|t| is_idle(t)).count(),
            helpers: w
                .threads
                .iter()
                .filter(|t| !is_idle(t) && is_helper(&t.comm, &t.states))
                .map(|t| t.comm.clone())
                .collect(),
        }
    };
    let timed = w.threads.iter().any(|t| t.futex_timed > 0);
    if left == LeftOut::default() && !timed {
        return (Cow::Borrowed(w), left);
    }
    let threads: Vec<ThreadWait> = w
        .threads
        .iter()
        .filter(|t| keep_all || !idle_or_helper(t))
        .map(timed_futex_as_sleep)
        .collect();
    let mut process = ThreadStates::default();
    for t in &threads {
        process.merge(&t.states);
    }
    let kept = ThreadWaits {
        process,
        threads,
        ..w.clone()
    };
    (Cow::Owned(kept), left)
}

/// One thread of the watched server as a slow sample (every 100 ms) found it, for a live
/// view: /proc/TID/task/TID/stat's state and where it waits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveThread {
    /// The thread's id.
    pub tid: u32,
    /// Its name (`comm`).
    pub comm: String,
    /// Its state letter (R running or runnable, S sleeping, D uninterruptible, ...).
    pub state: char,
    /// The system call it is in (`recvfrom`), else its wchan; None when running or not
    /// seen.
    pub wait: Option<String>,
}

#[cfg(test)]
#[path = "waits_tests.rs"]
mod tests;
