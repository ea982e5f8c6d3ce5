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

/// `w` as a wait verdict reads it: its idle threads ([`is_idle`]) left out (unless every
/// thread is: then there is nothing else to judge by), each other thread's futex waits
/// with a timeout counted as sleeps, the process's samples those of the kept threads
/// added together; with the count of idle threads left out. `w` as it is (0 left out)
/// when no thread is idle and none waited in a timed futex.
pub fn without_idle(w: &ThreadWaits) -> (std::borrow::Cow<'_, ThreadWaits>, usize) {
    use std::borrow::Cow;
    let idle = w.threads.iter().filter(|t| is_idle(t)).count();
    let idle = if idle == w.threads.len() { 0 } else { idle };
    let timed = w.threads.iter().any(|t| t.futex_timed > 0);
    if idle == 0 && !timed {
        return (Cow::Borrowed(w), 0);
    }
    let threads: Vec<ThreadWait> = w
        .threads
        .iter()
        .filter(|t| idle == 0 || !is_idle(t))
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
    (Cow::Owned(kept), idle)
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
            crate::waits::add_sample(
                &mut w.process,
                'S',
                Some("do_sys_poll"),
                Some("poll"),
                FdKind::Unknown,
            );
        }
        for _ in 0..3 {
            crate::waits::add_sample(&mut w.process, 'R', None, None, FdKind::Unknown);
        }
        crate::waits::add_sample(
            &mut w.process,
            'S',
            Some("futex_wait_queue"),
            Some("futex"),
            FdKind::Unknown,
        );
        assert_eq!(w.process.share_pct(WaitClass::Network), Some(92.0));
        assert_eq!(w.process.share_pct(WaitClass::OnCpu), Some(6.0));
        assert_eq!(w.process.by_syscall["poll"], 46);
        assert_eq!(
            crate::waits::headline(&w).unwrap(),
            "process 42's threads spent 92 % of the run waiting for the network (in poll)"
        );
        // A second class with a fifth of the samples or more is named too.
        for _ in 0..25 {
            crate::waits::add_sample(
                &mut w.process,
                'D',
                Some("jbd2_log_wait_commit"),
                Some("fsync"),
                FdKind::Unknown,
            );
        }
        assert_eq!(
            crate::waits::headline(&w).unwrap(),
            "process 42's threads spent 61 % of the run waiting for the network (in poll), 33 % waiting on disk I/O (in fsync)"
        );
        let mut m = ThreadStates::default();
        m.merge(&w.process);
        m.merge(&w.process);
        assert_eq!(m.samples, 150);
        assert_eq!(m.sleeping["do_sys_poll"], 92);
        assert_eq!(m.by_class[&WaitClass::Disk], 50);
        assert_eq!(crate::waits::headline(&ThreadWaits::default()), None);
    }

    #[test]
    fn with_a_window_cpu_time_is_exact_and_the_blocked_time_split_by_samples() {
        // The busy-host bias: 25 of 31 samples saw the thread runnable, but schedstat
        // says it ran 0.7 s and waited for a CPU 0.14 s of 3 s; its 6 blocked samples
        // were all in fsync, in state D.
        let mut s = ThreadStates::default();
        for _ in 0..25 {
            crate::waits::add_sample(&mut s, 'R', None, None, FdKind::Unknown);
        }
        for _ in 0..6 {
            crate::waits::add_sample(
                &mut s,
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
        crate::waits::add_sample(&mut r, 'R', None, None, FdKind::Unknown);
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

    /// S1 against a JVM (`diagnose udp` of tests/servers/UdpServer.java, docs/waits.md):
    /// after 16 idle threads were left out, its C1 and C2 compiler threads and Monitor
    /// Deflation, which ran a little and waited in a futex with a timeout the rest of
    /// the run, still made the run read "72 % of the run waiting on a lock (in futex),
    /// 22 % waiting for the network (in poll)" beside its one reader. Their timed
    /// futex waits are sleeps: no lock is named.
    #[test]
    fn a_jvms_helpers_in_a_timed_futex_are_asleep_not_on_a_lock() {
        let thread = |tid: u32, samples: &[(char, &str, u64)], cpu_ms: u64, timed: u64| {
            let mut states = ThreadStates::default();
            for &(state, call, n) in samples {
                for _ in 0..n {
                    crate::waits::add_sample(&mut states, state, None, Some(call), FdKind::Unknown);
                }
            }
            states.on_cpu_ns = cpu_ms * 1_000_000;
            states.window_ns = 3_000_000_000;
            ThreadWait {
                tid,
                comm: format!("t{tid}"),
                states,
                pid: 9,
                futex_timed: timed,
            }
        };
        // The reader: in poll, on a CPU a fifth of the run.
        let mut threads = vec![thread(1, &[('S', "poll", 240), ('R', "none", 60)], 600, 0)];
        // C1, C2, Monitor Deflation: a little CPU, the rest in a timed futex.
        threads.push(thread(2, &[('S', "futex", 299), ('R', "none", 1)], 80, 299));
        threads.push(thread(3, &[('S', "futex", 300)], 30, 300));
        threads.push(thread(4, &[('S', "futex", 300)], 20, 300));
        // Sixteen parked helpers (main, GC, VM Thread, ...): idle, left out.
        for tid in 10..26 {
            threads.push(thread(tid, &[('S', "futex", 300)], 0, 0));
        }
        let mut process = ThreadStates::default();
        for t in &threads {
            process.merge(&t.states);
        }
        let w = ThreadWaits {
            pid: 9,
            interval_ms: 10,
            process,
            threads,
            ..Default::default()
        };
        let (kept, idle) = without_idle(&w);
        assert_eq!((idle, kept.threads.len()), (16, 4));
        let lock = kept.process.share_pct(WaitClass::Lock).unwrap();
        let sleep = kept.process.share_pct(WaitClass::Sleep).unwrap();
        assert_eq!(lock, 0.0, "{:?}", kept.process.by_class);
        assert!(sleep > 50.0, "{sleep}");
        let h = crate::waits::headline(&kept).unwrap();
        assert!(!h.contains("lock"), "{h}");
        // Without the timeouts (a record from before them), the helpers read as a lock.
        let mut old = w.clone();
        old.threads.iter_mut().for_each(|t| t.futex_timed = 0);
        let (kept, _) = without_idle(&old);
        assert!(
            crate::waits::headline(&kept).unwrap().contains("a lock"),
            "{:?}",
            crate::waits::headline(&kept)
        );
        // A thread that waits in an untimed futex is still on a lock.
        let mut untimed = w.clone();
        untimed.threads[2].futex_timed = 0;
        let (kept, _) = without_idle(&untimed);
        assert!(kept.process.share_pct(WaitClass::Lock).unwrap() > 0.0);
    }
}
