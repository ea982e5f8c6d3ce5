//! Samples where a process's threads wait: per tick, each thread's state
//! (/proc/PID/task/TID/stat), the system call it is blocked in (.../syscall, and for a
//! read or write the fd's link, to tell a socket from a file) and its wait channel
//! (.../wchan). Pure classification and shares are in `tpslab_analysis::waits`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use tpslab_analysis::ramp_threads::peer_call;
use tpslab_analysis::waits::FdKind;
use tpslab_proc::syscall::{
    is_epoll_wait, parse_epoll_tfds, parse_syscall, parse_syscall_args, syscall_name, SyscallState,
};
use tpslab_record::waits::{ThreadStates, ThreadWait, ThreadWaits};

/// One thread in one sample.
pub(crate) struct TaskSample {
    pub(crate) state: char,
    pub(crate) wchan: Option<String>,
    pub(crate) syscall: Option<String>,
    /// The kind of fd of a read/write.
    pub(crate) fd: FdKind,
    pub(crate) comm: String,
    /// utime+stime, USER_HZ ticks.
    pub(crate) cpu_ticks: u64,
    /// In a futex wait with a timeout ([`futex_timed`]).
    pub(crate) futex_timed: bool,
    /// The socket inode of a receive, read, send or connect blocked on a socket.
    pub(crate) socket: Option<u64>,
    /// The socket the thread waits to read: a receive or read blocked on it, or an
    /// epoll wait whose epoll watches that one socket (its fdinfo's one `tfd`).
    pub(crate) reads_socket: Option<u64>,
}

/// The most epoll instances a [`WaitSampler`] tick looks into (one fdinfo read and one
/// fd link each) to tell which socket a thread blocked in `epoll_wait` waits for: a
/// sample of a process with thousands of threads in epoll waits costs at most this many
/// more reads.
pub const EPOLL_LOOKUPS_PER_TICK: usize = 64;

/// The most threads whose read sockets a [`WaitSampler`] keeps (a few sockets each,
/// [`READ_SOCKETS_PER_THREAD`]); threads past it are not told apart by socket.
pub const READ_SOCKET_THREADS: usize = 1024;

/// The most sockets kept per thread as the ones it was seen waiting to read.
pub const READ_SOCKETS_PER_THREAD: usize = 4;

/// Calls that read from their first argument's descriptor: blocked in one on a socket,
/// a thread waits for that socket's data.
fn reads_fd(name: &str) -> bool {
    matches!(name, "read" | "readv" | "recvfrom" | "recvmsg" | "recvmmsg")
}

/// The one socket the epoll `epfd` of the thread at `dir` watches (its fdinfo lists one
/// target, a socket); None when it watches several, none, or something else.
fn epoll_socket(dir: &Path, epfd: u64) -> Option<u64> {
    let info = std::fs::read_to_string(dir.join("fdinfo").join(epfd.to_string())).ok()?;
    let tfds = parse_epoll_tfds(&info, 2);
    let [fd] = tfds[..] else { return None };
    let link = std::fs::read_link(dir.join("fd").join(fd.to_string())).ok()?;
    socket_inode(&link.to_string_lossy())
}

/// A futex wait given a timeout, from the call's name and its arguments as
/// /proc/PID/task/TID/syscall shows them: `futex(uaddr, op, val, timeout, ..)` for the
/// waiting ops (FUTEX_WAIT, FUTEX_WAIT_BITSET, FUTEX_WAIT_REQUEUE_PI: op & 0x7f is 0, 9
/// or 11) with a timeout pointer set; `futex_waitv(waiters, n, flags, timeout,
/// clockid)`; `futex_wait(uaddr, val, mask, flags, timeout, clockid)`. A timed wait is
/// most often a sleep, a timer or an idle pool's keep-alive (HotSpot's `Thread.sleep`
/// parks so); most lock waiters wait without one, and the PI lock ops (FUTEX_LOCK_PI,
/// FUTEX_LOCK_PI2: 6, 13) are lock waits whatever their timeout. A timed lock
/// (`pthread_mutex_timedlock` on a plain mutex) reads as a sleep here.
pub fn futex_timed(call: &str, args: &[u64; 6]) -> bool {
    match call {
        "futex" => matches!(args[1] & 0x7f, 0 | 9 | 11) && args[3] != 0,
        "futex_waitv" => args[3] != 0,
        "futex_wait" => args[4] != 0,
        _ => false,
    }
}

/// The inode of an fd link `socket:[INODE]`; None for anything else (a pipe, an
/// eventfd, a file).
fn socket_inode(link: &str) -> Option<u64> {
    link.strip_prefix("socket:[")?
        .strip_suffix(']')?
        .parse()
        .ok()
}

/// One thread's state now; None when the thread is gone. `read` gives the text of one
/// of the thread's files (`stat`, `wchan`, `syscall`).
/// `epolls`: how many more epoll instances may be looked into ([`epoll_socket`]); one
/// taken per lookup.
pub(crate) fn sample_task(
    dir: &Path,
    read: &mut dyn FnMut(&'static str) -> Option<String>,
    epolls: &mut usize,
) -> Option<TaskSample> {
    let s = read("stat")?;
    let t = tpslab_proc::pid::parse_task_stat(&s, "stat").ok()?;
    if t.state == 'R' {
        return Some(TaskSample {
            state: t.state,
            wchan: None,
            syscall: None,
            fd: FdKind::Unknown,
            comm: t.comm,
            cpu_ticks: t.utime + t.stime,
            futex_timed: false,
            socket: None,
            reads_socket: None,
        });
    }
    let wchan = read("wchan");
    let raw = read("syscall");
    if raw.is_none() && read("stat").is_some() {
        // Alive but its syscall file refused (ptrace access): a wait that cannot be seen.
        return Some(TaskSample {
            state: t.state,
            wchan,
            syscall: Some(tpslab_analysis::waits::UNREADABLE_SYSCALL.to_string()),
            fd: FdKind::Unknown,
            comm: t.comm,
            cpu_ticks: t.utime + t.stime,
            futex_timed: false,
            socket: None,
            reads_socket: None,
        });
    }
    let args = raw.as_deref().and_then(parse_syscall_args);
    let sc = raw.and_then(|s| parse_syscall(&s));
    let (mut syscall, mut fd, mut futex, mut socket) = (None, FdKind::Unknown, false, None);
    let mut reads_socket = None;
    // Woken between the two reads (no call): counted by its state alone.
    if let Some(SyscallState::In { nr, arg1 }) = sc {
        let name = syscall_name(nr);
        futex = args.is_some_and(|(_, a)| futex_timed(&name, &a));
        if peer_call(&name) {
            let link = std::fs::read_link(dir.join("fd").join(arg1.to_string()));
            let inode = link
                .as_ref()
                .ok()
                .and_then(|l| socket_inode(&l.to_string_lossy()));
            // Whether a read or write is on a socket decides its class; the other
            // socket calls are the network's whatever the link says.
            if matches!(
                name.as_str(),
                "read" | "write" | "readv" | "writev" | "pread64" | "pwrite64"
            ) {
                fd = match (&link, inode) {
                    (Ok(_), Some(_)) => FdKind::Socket,
                    (Ok(_), None) => FdKind::NotSocket,
                    (Err(_), _) => FdKind::Unknown,
                };
            }
            socket = inode;
            if reads_fd(&name) {
                reads_socket = inode;
            }
        } else if is_epoll_wait(&name) && *epolls > 0 {
            *epolls -= 1;
            reads_socket = epoll_socket(dir, arg1);
        }
        syscall = Some(name);
    }
    Some(TaskSample {
        state: t.state,
        wchan,
        syscall,
        fd,
        comm: t.comm,
        cpu_ticks: t.utime + t.stime,
        futex_timed: futex,
        socket,
        reads_socket,
    })
}

/// A task's schedstat, read afresh (no cached handle of another process's files).
pub(crate) fn schedstat(dir: &Path) -> Option<tpslab_proc::pid::SchedStat> {
    let s = std::fs::read_to_string(dir.join("schedstat")).ok()?;
    tpslab_proc::pid::parse_schedstat(s.as_bytes(), "schedstat").ok()
}

/// The process a thread belongs to (`Tgid:` of /proc/TID/status); None when gone.
fn tgid(tid: u32) -> Option<u32> {
    std::fs::read_to_string(format!("/proc/{tid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))?
        .trim()
        .parse()
        .ok()
}

/// The thread ids of `pid` (/proc/PID/task).
pub(crate) fn tids(pid: u32) -> Vec<u32> {
    tpslab_proc::live::task_ids(pid)
}

/// A thread's /proc files kept open between ticks: each is one record, generated anew
/// by a read from offset 0, so a tick costs one pread per file instead of std's open,
/// statx, a 32-byte probe read and more reads, and close (a watch of a server's threads
/// spent 7 % of its CPU time there).
#[derive(Debug, Default)]
struct TaskFiles {
    open: BTreeMap<&'static str, std::fs::File>,
}

impl TaskFiles {
    fn read(&mut self, dir: &Path, name: &'static str) -> Option<String> {
        use std::os::unix::fs::FileExt;
        if !self.open.contains_key(name) {
            self.open
                .insert(name, std::fs::File::open(dir.join(name)).ok()?);
        }
        let f = &self.open[name];
        let mut buf = vec![0u8; 4096];
        let mut len = 0;
        loop {
            match f.read_at(&mut buf[len..], len as u64) {
                Ok(n) => len += n,
                Err(_) => {
                    // The thread exited (ESRCH): open afresh if it is listed again.
                    self.open.remove(name);
                    return None;
                }
            }
            // A one-record file came whole when the buffer was not filled.
            if len < buf.len() {
                break;
            }
            buf.resize(buf.len() * 2, 0);
        }
        buf.truncate(len);
        String::from_utf8(buf).ok()
    }
}

/// Samples a watched process's threads over a run, thread by thread.
#[derive(Debug)]
pub struct WaitSampler {
    pid: u32,
    /// Only these threads (tpslab's own server inside tpslab's process); None: all.
    only: Option<Vec<u32>>,
    interval_ms: u64,
    ticks: u64,
    threads: BTreeMap<u32, ThreadWait>,
    /// schedstat of each thread at its first sample, and when that was (monotonic ns).
    sched0: BTreeMap<u32, (tpslab_proc::pid::SchedStat, u64)>,
    /// The samples of threads that have exited, folded together (their schedstat is gone
    /// with them), and how many there were: memory follows the live threads, not every
    /// thread a long watch ever saw.
    exited: (ThreadStates, usize),
    /// Open files of the live threads (closed with the thread's last listing), for at
    /// most KEEP_OPEN_THREADS of them: the others are opened and closed at each read.
    files: BTreeMap<u32, TaskFiles>,
    /// The host's CPU times at the first sample (/proc/stat, all CPUs), for the steal
    /// estimate; None when unreadable.
    cpu0: Option<tpslab_proc::CpuTimes>,
    /// Every thread as the last tick found it (for the live stream).
    now: Vec<tpslab_analysis::waits::LiveThread>,
    /// Per thread, the sockets it was seen waiting to read and in how many samples
    /// (bounded: [`READ_SOCKET_THREADS`], [`READ_SOCKETS_PER_THREAD`]).
    read_sockets: BTreeMap<u32, BTreeMap<u64, u64>>,
}

/// The host's CPU times now (/proc/stat `cpu` line).
fn host_cpu() -> Option<tpslab_proc::CpuTimes> {
    tpslab_proc::live::stat(std::path::Path::new("/proc"))
        .ok()
        .map(|s| s.total)
}

/// Stolen CPU time per busy CPU time between two readings (steal over user + nice +
/// system + irq + softirq, all CPUs); 0 when nothing ran or the host has no steal.
fn steal_per_busy(a: &tpslab_proc::CpuTimes, b: &tpslab_proc::CpuTimes) -> f64 {
    // `busy()` includes steal: what ran is the rest.
    let ran_ticks = |c: &tpslab_proc::CpuTimes| c.busy().saturating_sub(c.steal);
    let steal = b.steal.saturating_sub(a.steal) as f64;
    let ran = ran_ticks(b).saturating_sub(ran_ticks(a)) as f64;
    if ran > 0.0 {
        steal / ran
    } else {
        0.0
    }
}

/// Threads whose stat/wchan/syscall files stay open between samples (3 descriptors
/// each): a watch of a process with thousands of threads must not run out of
/// descriptors (EMFILE would look like an exited thread).
const KEEP_OPEN_THREADS: usize = 256;

impl WaitSampler {
    /// A sampler of `pid`'s threads (or only `only`), sampled every `interval_ms`.
    pub fn new(pid: u32, only: Option<Vec<u32>>, interval_ms: u64) -> WaitSampler {
        // Room for the kept-open files beside the run's own sockets.
        tpslab_net::raise_nofile();
        WaitSampler {
            pid,
            only,
            interval_ms,
            ticks: 0,
            threads: BTreeMap::new(),
            sched0: BTreeMap::new(),
            exited: (ThreadStates::default(), 0),
            files: BTreeMap::new(),
            cpu0: None,
            now: Vec::new(),
            read_sockets: BTreeMap::new(),
        }
    }

    /// Per thread (TID), the sockets (inodes) it was seen waiting to read over the run
    /// and in how many samples each: blocked in a receive or read on it, or in an epoll
    /// wait on an epoll that watches it alone.
    pub fn read_sockets(&self) -> &BTreeMap<u32, BTreeMap<u64, u64>> {
        &self.read_sockets
    }

    /// Every thread as the last tick found it: its state and where it waits.
    pub fn now(&self) -> &[tpslab_analysis::waits::LiveThread] {
        &self.now
    }

    /// `/proc/TID/task/TID`: reaches a listed thread of another process too (the
    /// processes of one pre-forked server).
    fn task_dir(&self, tid: u32) -> PathBuf {
        PathBuf::from(format!("/proc/{tid}/task/{tid}"))
    }

    /// One tick: every thread's state now.
    pub fn sample(&mut self) {
        self.ticks += 1;
        if self.cpu0.is_none() {
            self.cpu0 = host_cpu();
        }
        let mut tids = self.only.clone().unwrap_or_else(|| tids(self.pid));
        // Sorted for the lookups below (a process may have thousands of threads).
        tids.sort_unstable();
        let listed = |t: &u32| tids.binary_search(t).is_ok();
        // Threads no longer listed have exited: their samples join the exited ones.
        let gone: Vec<u32> = self
            .threads
            .keys()
            .filter(|t| !listed(t))
            .copied()
            .collect();
        for tid in gone {
            if let Some(t) = self.threads.remove(&tid) {
                self.exited.0.merge(&t.states);
                self.exited.1 += 1;
            }
            self.sched0.remove(&tid);
        }
        self.files.retain(|t, _| listed(t));
        self.now.clear();
        let mut epolls = EPOLL_LOOKUPS_PER_TICK;
        for tid in tids {
            let dir = self.task_dir(tid);
            let keep = self.files.len() < KEEP_OPEN_THREADS || self.files.contains_key(&tid);
            let s = if keep {
                let files = self.files.entry(tid).or_default();
                sample_task(&dir, &mut |n| files.read(&dir, n), &mut epolls)
            } else {
                sample_task(
                    &dir,
                    &mut |n| std::fs::read_to_string(dir.join(n)).ok(),
                    &mut epolls,
                )
            };
            let Some(s) = s else {
                // Gone (or unreadable): its kept files are closed; opened afresh if it
                // is listed again.
                self.files.remove(&tid);
                continue;
            };
            if let std::collections::btree_map::Entry::Vacant(e) = self.sched0.entry(tid) {
                if let Some(st) = schedstat(&dir) {
                    e.insert((st, tpslab_net::mono_ns()));
                }
            }
            self.now.push(tpslab_analysis::waits::LiveThread {
                tid,
                comm: s.comm.clone(),
                state: s.state,
                wait: s.syscall.clone().or_else(|| s.wchan.clone()),
            });
            let pid = if self.only.is_some() {
                tgid(tid).unwrap_or(0)
            } else {
                self.pid
            };
            let t = self.threads.entry(tid).or_insert_with(|| ThreadWait {
                tid,
                comm: s.comm.clone(),
                states: ThreadStates::default(),
                pid,
                futex_timed: 0,
            });
            tpslab_analysis::waits::add_sample(
                &mut t.states,
                s.state,
                s.wchan.as_deref(),
                s.syscall.as_deref(),
                s.fd,
            );
            if s.state == 'S' && s.futex_timed {
                t.futex_timed += 1;
            }
            if let Some(inode) = s.reads_socket {
                let room = self.read_sockets.len() < READ_SOCKET_THREADS
                    || self.read_sockets.contains_key(&tid);
                if room {
                    let seen = self.read_sockets.entry(tid).or_default();
                    if seen.len() < READ_SOCKETS_PER_THREAD || seen.contains_key(&inode) {
                        *seen.entry(inode).or_default() += 1;
                    }
                }
            }
        }
    }

    /// The threads' states over the run (a last schedstat read gives each thread's time
    /// on a CPU and in the run queue since its first sample).
    pub fn finish(mut self) -> ThreadWaits {
        let mut process = ThreadStates::default();
        // schedstat's time on a CPU leaves out the time the hypervisor held that vCPU
        // (paravirt steal accounting): that is estimated from the host's steal.
        let steal = match (&self.cpu0, host_cpu()) {
            (Some(a), Some(b)) => steal_per_busy(a, &b),
            _ => 0.0,
        };
        for (tid, t) in &mut self.threads {
            // Through the thread's own id: a listed thread of another process (a
            // pre-forked worker) is not under /proc/PID/task.
            let dir = PathBuf::from(format!("/proc/{tid}/task/{tid}"));
            if let (Some((a, t0)), Some(b)) = (self.sched0.get(tid), schedstat(&dir)) {
                t.states.on_cpu_ns = b.run_ns.saturating_sub(a.run_ns);
                t.states.stolen_ns = (t.states.on_cpu_ns as f64 * steal) as u64;
                t.states.runqueue_ns = b.wait_ns.saturating_sub(a.wait_ns);
                t.states.window_ns = tpslab_net::mono_ns().saturating_sub(*t0);
            }
            process.merge(&t.states);
        }
        let mut threads: Vec<ThreadWait> = self.threads.into_values().collect();
        if self.exited.1 > 0 {
            process.merge(&self.exited.0);
            threads.push(ThreadWait {
                tid: 0,
                comm: format!("({} exited threads)", self.exited.1),
                states: self.exited.0,
                pid: 0,
                futex_timed: 0,
            });
        }
        threads.sort_by(|a, b| {
            b.states
                .samples
                .cmp(&a.states.samples)
                .then(a.tid.cmp(&b.tid))
        });
        ThreadWaits {
            subset: self.only.is_some(),
            pid: self.pid,
            interval_ms: self.interval_ms,
            ticks: self.ticks,
            process,
            threads,
        }
    }
}

#[cfg(test)]
#[path = "waits_tests.rs"]
mod tests;
