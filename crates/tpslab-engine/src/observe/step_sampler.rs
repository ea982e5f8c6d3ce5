//! A ramp step's samples of the server's threads, thread by thread, over its whole
//! process tree: the PID given and its descendants ([`crate::observe::server_tree`]; a prefork
//! server's master and workers), the tree read again during the step so a worker started
//! or restarted in it is followed. Each thread's states at every tick (what
//! [`crate::observe::waits`] reads of it), its CPU time (utime+stime) and schedstat at the step's
//! edges; a thread that ends keeps what its last read showed.
//!
//! The cost on the server's host is bounded: a tree of more than [`THREADS_PER_TICK`]
//! threads (a php-fpm or apache prefork tree of hundreds of workers) is sampled in turns,
//! that many threads a tick, round-robin, its thread list read again only at the tree's
//! reads; and the tree is read again 100 times its last read's own duration later (1 %
//! of the time), within [`TREE_EVERY_NS`]..=[`TREE_EVERY_MAX_NS`]. The step's
//! [`TreeSampling`] says how much was covered.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use tpslab_record::ramp::TreeSampling;
use tpslab_record::waits::{StepThread, ThreadStates};

use crate::observe::waits::{sample_task, schedstat, tids};

/// How often the process tree is read again during a step, ns: a scan of every
/// /proc/PID/stat, too dear for every 10 ms tick; a worker that lives less than this
/// between two reads has its CPU time in the step's server CPU (its parent's
/// cutime+cstime) but no samples.
pub const TREE_EVERY_NS: u64 = 200_000_000;

/// The most time between two tree reads, ns, however long a read takes: a worker
/// forked in the step is followed within it.
pub const TREE_EVERY_MAX_NS: u64 = 1_000_000_000;

/// Threads read at one tick at most. A thread's read is 1 to 4 /proc files (stat, wchan,
/// syscall, an fd link); a tree of 200 sleeping processes read whole every 10 ms tick
/// cost 48 % of a core (`examples/tree_sampler_cost.rs`). Trees up to this size (redis,
/// nginx's master and workers, most thread pools) are read whole at every tick, as
/// before.
pub const THREADS_PER_TICK: usize = 8;

/// One thread over a ramp step, as sampled so far.
#[derive(Debug)]
struct StepAcc {
    /// Its process.
    pid: u32,
    comm: String,
    states: ThreadStates,
    /// utime+stime at the step's start (0 for a thread born in the step), and at the
    /// last read.
    ticks: (u64, u64),
    /// schedstat at the step's start (zero for a thread born in the step: its
    /// schedstat counts from its birth).
    sched0: Option<tpslab_proc::pid::SchedStat>,
    /// When its first read was (monotonic ns); for a thread born in the step, its birth
    /// (not before the step's start).
    t0: u64,
    /// Its process was born in the step.
    born: bool,
    /// Samples in a futex wait with a timeout.
    futex_timed: u64,
    /// Samples blocked on a socket to another peer, by call.
    peer: BTreeMap<String, u64>,
}

impl StepAcc {
    fn new(
        pid: u32,
        comm: String,
        ticks: (u64, u64),
        sched0: Option<tpslab_proc::pid::SchedStat>,
    ) -> StepAcc {
        StepAcc {
            pid,
            comm,
            states: ThreadStates::default(),
            ticks,
            sched0,
            t0: tpslab_net::mono_ns(),
            born: false,
            futex_timed: 0,
            peer: BTreeMap::new(),
        }
    }
}

/// Whose a socket a server thread blocked on is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SocketRole {
    /// A TCP or UDP socket on the target's port: one of the load's connections (or
    /// the datagram socket the load is sent to).
    Load,
    /// Another TCP or UDP socket, or a Unix socket: to another peer (a database, a
    /// backend, a downstream service).
    Peer,
    /// Not in the process's TCP, UDP or Unix tables (netlink, a closed socket).
    Other,
}

/// The role of each socket inode in the tables of `root` (`/proc/PID`: its network
/// namespace's `net/tcp`, `tcp6`, `udp`, `udp6`, `unix`), given the load's port.
fn socket_roles(root: &Path, load_port: Option<u16>) -> BTreeMap<u64, SocketRole> {
    let mut roles = BTreeMap::new();
    let inet = [
        tpslab_proc::live::tcp(root).unwrap_or_default(),
        tpslab_proc::live::udp(root).unwrap_or_default(),
        tpslab_proc::live::udp6(root).unwrap_or_default(),
    ];
    for s in inet.iter().flatten() {
        let role = if Some(s.local.port()) == load_port {
            SocketRole::Load
        } else {
            SocketRole::Peer
        };
        roles.insert(s.inode, role);
    }
    // net/unix: "Num RefCount Protocol Flags Type St Inode Path", inode the 7th column.
    if let Ok(text) = std::fs::read_to_string(root.join("net/unix")) {
        for inode in text
            .lines()
            .skip(1)
            .filter_map(|l| l.split_whitespace().nth(6)?.parse::<u64>().ok())
        {
            roles.entry(inode).or_insert(SocketRole::Peer);
        }
    }
    roles
}

/// Samples a server's threads over one ramp step, each thread apart, in every process of
/// its tree: its states at every tick, and its CPU time (utime+stime) and schedstat at
/// the step's edges.
#[derive(Debug)]
pub struct StepSampler {
    /// The PID given (its network namespace's tables tell the sockets' roles).
    pid: u32,
    /// The processes followed now: the PID and its descendants at the last tree read.
    procs: Vec<u32>,
    /// Their threads (process, thread) as last listed: at every tick while they are at
    /// most [`THREADS_PER_TICK`], else at the tree's reads only.
    tasks: Vec<(u32, u32)>,
    /// Where the next tick's turn starts in `tasks` (a big tree, round-robin).
    cursor: usize,
    /// Threads read at one tick at most: [`THREADS_PER_TICK`] (the crate's tests that
    /// sample their own, many-threaded, process lift it to read every thread).
    pub(crate) per_tick: usize,
    /// The least time between two tree reads, ns: 100 times the last read's own
    /// duration, within [`TREE_EVERY_NS`]..=[`TREE_EVERY_MAX_NS`].
    tree_every: u64,
    /// The most processes and threads seen at a read, and the samples taken.
    most_procs: usize,
    most_threads: usize,
    samples: u64,
    /// The processes at the step's start: a thread of another one was born in the step.
    procs0: BTreeSet<u32>,
    /// When the tree was last read (monotonic ns).
    tree_at: u64,
    threads: BTreeMap<u32, StepAcc>,
    /// The target's port: the server's sockets on it carry the load, not a peer's replies.
    load_port: Option<u16>,
    /// Roles of the sockets seen so far (the tables are read again on a new inode, at
    /// most once a tick: a thread-per-connection server with thousands of connections
    /// costs one read of its tables per tick, not one per connection).
    roles: BTreeMap<u64, SocketRole>,
    /// When the step's first read was (monotonic ns).
    started: u64,
    /// Ticks sampled, and the tick the tables were last read at.
    ticks: u64,
    read_at: Option<u64>,
}

/// utime+stime of a task now, USER_HZ ticks.
fn task_ticks(dir: &Path) -> Option<(String, u64)> {
    let s = std::fs::read_to_string(dir.join("stat")).ok()?;
    let t = tpslab_proc::pid::parse_task_stat(&s, "stat").ok()?;
    Some((t.comm, t.utime + t.stime))
}

/// How long ago a task was started, ns: now (/proc/uptime, since boot) less its
/// starttime (field 22 of its stat, USER_HZ ticks since boot); None when unreadable.
fn age_ns(stat: &str) -> Option<u64> {
    let start: f64 = stat
        .rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(19)?
        .parse()
        .ok()?;
    let up: f64 = std::fs::read_to_string("/proc/uptime")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    let age_s = up - start / tpslab_net::clock_ticks_per_s().max(1.0);
    Some((age_s.max(0.0) * 1e9) as u64)
}

/// `/proc/PID/task/TID`.
fn task_dir(pid: u32, tid: u32) -> PathBuf {
    PathBuf::from(format!("/proc/{pid}/task/{tid}"))
}

/// The threads of processes `procs`, as (process, thread).
fn list_tasks(procs: &[u32]) -> Vec<(u32, u32)> {
    procs
        .iter()
        .flat_map(|&p| tids(p).into_iter().map(move |t| (p, t)))
        .collect()
}

/// The PID and its descendants now; the PID alone when its tree cannot be read.
fn tree_pids(pid: u32) -> Vec<u32> {
    let pids: Vec<u32> = tpslab_proc::tree::read_tree(pid)
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    if pids.is_empty() {
        vec![pid]
    } else {
        pids
    }
}

impl StepSampler {
    /// Reads every thread of `pid` and of its descendants: its CPU time and schedstat at
    /// the step's start. `load_port` is the target's port (the server's sockets on it are
    /// the load's).
    pub fn start(pid: u32, load_port: Option<u16>) -> StepSampler {
        let t0 = tpslab_net::mono_ns();
        let procs = tree_pids(pid);
        let tasks = list_tasks(&procs);
        let took = tpslab_net::mono_ns().saturating_sub(t0);
        let mut threads = BTreeMap::new();
        for &(p, tid) in &tasks {
            let dir = task_dir(p, tid);
            if let Some((comm, t)) = task_ticks(&dir) {
                threads.insert(tid, StepAcc::new(p, comm, (t, t), schedstat(&dir)));
            }
        }
        StepSampler {
            pid,
            procs0: procs.iter().copied().collect(),
            most_procs: procs.len(),
            most_threads: tasks.len(),
            procs,
            tasks,
            cursor: 0,
            per_tick: THREADS_PER_TICK,
            tree_every: (100 * took).clamp(TREE_EVERY_NS, TREE_EVERY_MAX_NS),
            samples: 0,
            started: t0,
            tree_at: tpslab_net::mono_ns(),
            threads,
            load_port,
            roles: BTreeMap::new(),
            ticks: 0,
            read_at: None,
        }
    }

    /// The role of socket `inode`, reading the process's tables again when it is new.
    fn role(&mut self, inode: u64) -> SocketRole {
        if !self.roles.contains_key(&inode) && self.read_at != Some(self.ticks) {
            let root = PathBuf::from(format!("/proc/{}", self.pid));
            self.roles = socket_roles(&root, self.load_port);
            self.read_at = Some(self.ticks);
        }
        // Not listed (netlink, or opened after this tick's read): other, asked again
        // next tick.
        self.roles.get(&inode).copied().unwrap_or(SocketRole::Other)
    }

    /// One tick: the state now of every thread of the tree, or of the next
    /// [`THREADS_PER_TICK`] in turn when it has more (the tree read again, with its
    /// threads listed, when its interval has passed).
    pub fn sample(&mut self) {
        self.ticks += 1;
        let now = tpslab_net::mono_ns();
        if now.saturating_sub(self.tree_at) >= self.tree_every {
            self.procs = tree_pids(self.pid);
            self.tasks = list_tasks(&self.procs);
            let took = tpslab_net::mono_ns().saturating_sub(now);
            self.tree_every = (100 * took).clamp(TREE_EVERY_NS, TREE_EVERY_MAX_NS);
            self.tree_at = now;
        } else if self.tasks.len() <= self.per_tick {
            // A small tree: its threads listed again at every tick (a thread started or
            // ended is seen at once).
            self.tasks = list_tasks(&self.procs);
        }
        self.most_procs = self.most_procs.max(self.procs.len());
        self.most_threads = self.most_threads.max(self.tasks.len());
        let n = self.tasks.len();
        let turn: Vec<(u32, u32)> = if n <= self.per_tick {
            self.tasks.clone()
        } else {
            let from = self.cursor % n;
            self.cursor = (from + self.per_tick) % n;
            (0..self.per_tick)
                .map(|k| self.tasks[(from + k) % n])
                .collect()
        };
        for (p, tid) in turn {
            self.sample_one(p, tid);
        }
    }

    /// How much of the tree the step's samples have covered so far.
    pub fn coverage(&self) -> TreeSampling {
        let sat = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        TreeSampling {
            processes: sat(self.most_procs),
            threads: sat(self.most_threads),
            per_tick: sat(self.per_tick),
            ticks: self.ticks,
            sampled: sat(self
                .threads
                .values()
                .filter(|a| a.states.samples > 0)
                .count()),
            samples: self.samples,
        }
    }

    fn sample_one(&mut self, p: u32, tid: u32) {
        let dir = task_dir(p, tid);
        // No epoll looked into: a ramp's waits need the call, not the socket read.
        let Some(t) = sample_task(
            &dir,
            &mut |n| std::fs::read_to_string(dir.join(n)).ok(),
            &mut 0,
        ) else {
            return;
        };
        self.samples += 1;
        let peer = t.state == 'S' && t.socket.is_some_and(|i| self.role(i) == SocketRole::Peer);
        let born = !self.procs0.contains(&p);
        let started = self.started;
        let acc = self.threads.entry(tid).or_insert_with(|| {
            // A thread not there at the step's start (those were read by `start`): born
            // in it, in a process started in the step (a worker forked or restarted) or
            // in one that was there (a thread started per connection). All its CPU time
            // and schedstat are the step's, over the time since its birth (its own
            // starttime; first seen up to a tree read or a round later): without it a
            // thread-per-connection server's new threads' time before their first sample
            // is missing from the step.
            let mut a = StepAcc::new(
                p,
                t.comm.clone(),
                (0, t.cpu_ticks),
                Some(Default::default()),
            );
            let age = std::fs::read_to_string(dir.join("stat"))
                .ok()
                .and_then(|s| age_ns(&s))
                .unwrap_or(0);
            a.t0 = a.t0.saturating_sub(age).max(started);
            a.born = born;
            a
        });
        acc.ticks.1 = t.cpu_ticks;
        tpslab_analysis::waits::add_sample(
            &mut acc.states,
            t.state,
            t.wchan.as_deref(),
            t.syscall.as_deref(),
            t.fd,
        );
        if t.state == 'S' && t.futex_timed {
            acc.futex_timed += 1;
        }
        if let (true, Some(call)) = (peer, t.syscall) {
            *acc.peer.entry(call).or_default() += 1;
        }
    }

    /// The step's end: a last read of each thread's CPU time and schedstat. Returns the
    /// tree-wide states (every thread's samples, schedstat sums over the threads alive
    /// at both edges) and each thread's with its process, most CPU time first.
    pub fn finish(mut self) -> (ThreadStates, Vec<StepThread>) {
        let hz = tpslab_net::clock_ticks_per_s().max(1.0);
        let mut process = ThreadStates::default();
        let mut out = vec![];
        for (tid, mut acc) in std::mem::take(&mut self.threads) {
            let dir = task_dir(acc.pid, tid);
            if let Some((_, t)) = task_ticks(&dir) {
                acc.ticks.1 = t;
            }
            if let (Some(a), Some(b)) = (acc.sched0, schedstat(&dir)) {
                acc.states.on_cpu_ns = b.run_ns.saturating_sub(a.run_ns);
                acc.states.runqueue_ns = b.wait_ns.saturating_sub(a.wait_ns);
            }
            process.merge(&acc.states);
            out.push(StepThread {
                tid,
                comm: acc.comm,
                cpu_ns: (acc.ticks.1.saturating_sub(acc.ticks.0) as f64 / hz * 1e9) as u64,
                states: acc.states,
                span_ns: tpslab_net::mono_ns().saturating_sub(acc.t0).max(1),
                futex_timed: acc.futex_timed,
                peer_by_syscall: Some(acc.peer),
                pid: acc.pid,
                born: acc.born,
            });
        }
        out.sort_by(|a, b| {
            (b.cpu_ns, b.states.on_cpu_ns)
                .cmp(&(a.cpu_ns, a.states.on_cpu_ns))
                .then(a.tid.cmp(&b.tid))
        });
        (process, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tests sample this process's tree: one at a time, or one's children would be
    /// the other's.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

    /// A child process that burns CPU, started after the step's first read: sampled
    /// once the tree is read again, in its own process, with its CPU time from birth.
    #[test]
    fn a_child_process_started_in_the_step_is_followed() {
        let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        let me = std::process::id();
        let mut sm = StepSampler::start(me, None);
        let mut child = std::process::Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 3000000 ]; do i=$((i+1)); done"])
            .spawn()
            .expect("spawn sh");
        let t0 = std::time::Instant::now();
        // Past a tree read, with the child busy (1.2 s).
        while t0.elapsed() < std::time::Duration::from_millis(1200) {
            sm.sample();
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let (_, per) = sm.finish();
        let _ = child.kill();
        let _ = child.wait();
        let sh = per
            .iter()
            .find(|t| t.pid == child.id())
            .unwrap_or_else(|| panic!("the child {} not sampled: {per:?}", child.id()));
        assert_eq!(sh.tid, child.id());
        assert!(sh.states.samples > 0, "{sh:?}");
        assert!(sh.born, "{sh:?}");
        // Its span is from its birth (about 1.2 s ago), not from its first sample (a
        // tree read, 200 ms or more, later): its time on a CPU or waiting for one (schedstat,
        // from its birth) fits in it, within the 10 ms ticks birth is read in.
        assert!(
            sh.span_ns + 20_000_000 >= sh.states.on_cpu_ns + sh.states.runqueue_ns,
            "{sh:?}"
        );
        assert!(!per.iter().find(|t| t.tid == me).unwrap().born);
        // Busy since its birth, about 1.2 s ago: its CPU time on both counts (schedstat
        // from 0, utime+stime from 0).
        assert!(sh.cpu_ns > 0 && sh.states.on_cpu_ns > 50_000_000, "{sh:?}");
        assert!(per.iter().any(|t| t.pid == me && t.tid == me));
    }

    /// A python parent that forks `n` `sleep` children and, when its stdin closes
    /// (this test ends, even by a panic: the pipe is dropped), kills them by PID and
    /// waits for them.
    pub(crate) fn sleeping_tree(n: usize) -> std::process::Child {
        use std::io::BufRead;
        let script = "import os, sys\nkids = []\nfor _ in range(int(sys.argv[1])):\n    p = os.fork()\n    if p == 0:\n        os.execvp('sleep', ['sleep', '600'])\n    kids.append(p)\nprint('ready', flush=True)\nsys.stdin.read()\nfor p in kids:\n    os.kill(p, 9)\nfor p in kids:\n    os.waitpid(p, 0)\n";
        let mut parent = std::process::Command::new("python3")
            .args(["-c", script, &n.to_string()])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3");
        let mut line = String::new();
        std::io::BufReader::new(parent.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), "ready");
        parent
    }

    /// A tree of 41 processes (a parent and 40 sleeping children): each tick reads
    /// THREADS_PER_TICK of them in turn, not all 41; over 10 ticks every one is sampled
    /// (80 reads cover 41), and the coverage says the sampling was partial.
    #[test]
    fn a_big_tree_is_sampled_in_turns_a_few_threads_a_tick() {
        let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        let mut parent = sleeping_tree(40);
        let mut sm = StepSampler::start(parent.id(), None);
        for _ in 0..10 {
            sm.sample();
        }
        let cov = sm.coverage();
        let (_, per) = sm.finish();
        drop(parent.stdin.take());
        let _ = parent.wait();
        assert_eq!(cov.processes, 41, "{cov:?}");
        assert_eq!(cov.threads, 41, "{cov:?}");
        assert_eq!(cov.ticks, 10);
        assert!(cov.partial(), "{cov:?}");
        // Not every thread at every tick (410 reads): at most the cap a tick.
        assert!(cov.samples <= 10 * THREADS_PER_TICK as u64, "{cov:?}");
        assert!(cov.samples >= 41, "{cov:?}");
        assert_eq!(cov.sampled, 41, "{cov:?}");
        // Round-robin: no thread sampled more than once more than another.
        let counts: Vec<u64> = per.iter().map(|t| t.states.samples).collect();
        let (lo, hi) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
        assert!(hi - lo <= 1, "{counts:?}");
    }
}
