//! What a `capacity tcp|http` step's window showed beyond its figures, for its verdict
//! ([`tpslab_analysis::capacity_stream`]): the listen socket on the target's port and the
//! TcpExt listen counters of the server's network namespace, and the server's threads
//! (its PID and its descendants).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tpslab_analysis::capacity_stream::{LoadHttpResult, StreamFacts, ThreadFacts};
use tpslab_net::diag::SockDiag;
use tpslab_net::sched::SchedPolicy;

/// What the listen socket(s) on the target's port showed over a window, by sock_diag.
#[derive(Debug, Default)]
struct Listen {
    /// The most connections waiting for accept at one read (all listeners on the port
    /// together: SO_REUSEPORT's group).
    queue_max: u64,
    /// Each listener's drops (sk_drops) at its first read and its last, by inode; 0 at
    /// the first for a listener first seen after the window's first read (made in it).
    drops: BTreeMap<u64, (u64, u64)>,
    /// The largest backlog limit seen.
    backlog: u64,
    /// A dump found a listener on the port.
    seen: bool,
    /// The window's first read succeeded: the drops have a baseline (without it a
    /// listener's lifetime drops would count as the window's).
    based: bool,
}

impl Listen {
    /// Adds one LISTEN-only dump of the namespace; `first`: the window's first read.
    fn read(&mut self, d: &mut SockDiag, port: u16, first: bool) {
        // 1 << 10: TCP_LISTEN (the kernel filters: the dump holds no connection).
        let Ok(socks) = d.tcp_dump(1 << 10) else {
            return;
        };
        self.based |= first;
        let mut queue = 0;
        for s in socks.iter().filter(|s| s.local.port() == port) {
            self.seen = true;
            queue += s.rqueue as u64;
            self.backlog = self.backlog.max(s.wqueue as u64);
            let base = if first { s.drops } else { 0 };
            self.drops.entry(s.inode).or_insert((base, s.drops)).1 = s.drops;
        }
        self.queue_max = self.queue_max.max(queue);
    }
}

/// The server's processes (the PID and its descendants) and their threads at a moment.
struct Tree {
    /// Each process's CPU time with its waited-for children's, ticks.
    cpu: Vec<(u32, u64)>,
    /// Each thread of each process with its schedstat.
    threads: Vec<(u32, tpslab_proc::pid::SchedStat)>,
}

impl Tree {
    fn read(pid: u32) -> Tree {
        let procs = tpslab_proc::tree::read_tree(pid);
        let threads = procs.iter().flat_map(|(p, _)| schedstats(*p)).collect();
        Tree {
            cpu: procs.iter().map(|(p, t)| (*p, t.with_children())).collect(),
            threads,
        }
    }

    fn cpu_ticks(&self) -> u64 {
        self.cpu.iter().map(|(_, c)| c).sum()
    }
}

/// Watches a TCP or HTTP step's window for its verdict: in the server's network namespace
/// (with its PID; ours when the target is a loopback address; else nothing of it is
/// read) the listen socket(s) on the target's port by a LISTEN-only sock_diag dump every
/// 10 ms (accept queue, backlog, drops) and the TcpExt listen counters first and last;
/// with the PID each thread's schedstat and the CPU time of the PID and its descendants.
pub(super) struct StreamWatch {
    root: Option<std::path::PathBuf>,
    before: Option<tpslab_proc::netstat::TcpCounters>,
    pid: Option<u32>,
    tree: Option<Tree>,
    t0: Instant,
    done: Arc<AtomicBool>,
    sampler: Option<std::thread::JoinHandle<Listen>>,
}

impl StreamWatch {
    pub(super) fn start(target: std::net::SocketAddr, pid: Option<u32>) -> StreamWatch {
        let root = match pid {
            Some(p) => Some(std::path::PathBuf::from(format!("/proc/{p}"))),
            None if target.ip().is_loopback() => Some("/proc/self".into()),
            None => None,
        };
        let before = root
            .as_deref()
            .and_then(|r| tpslab_proc::live::tcp_counters(r).ok());
        let tree = pid.map(Tree::read);
        let done = Arc::new(AtomicBool::new(false));
        // A sock_diag socket opened once in the server's namespace (entered for the
        // open only): each read asks for the listen sockets alone, where /proc/net/tcp
        // would list every one of thousands of connections.
        let diag = root
            .as_ref()
            .and_then(|_| tpslab_engine::env::in_netns_of(pid, || SockDiag::open().ok()).flatten());
        let port = target.port();
        let sampler = diag.map(|mut diag| {
            let d = done.clone();
            // The first read before the load starts: the drops' baseline.
            let mut l = Listen::default();
            l.read(&mut diag, port, true);
            std::thread::spawn(move || {
                // Never ahead of the generator's threads: a run under `chrt -f` would
                // otherwise share its CPU with this reader at the same priority.
                let _ = tpslab_net::sched::set_policy(SchedPolicy::Other);
                loop {
                    let last = d.load(Relaxed);
                    l.read(&mut diag, port, false);
                    if last {
                        return l;
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
            })
        });
        StreamWatch {
            root,
            before,
            pid,
            tree,
            t0: Instant::now(),
            done,
            sampler,
        }
    }

    /// The facts of the window that ended, with the counts of `r`.
    pub(super) fn end(mut self, r: &LoadHttpResult) -> StreamFacts {
        // The threads' shares are of the time load was sent (first to last request
        // written), not of the watch's: that also holds the loop's lead before its first
        // send, the connects and the grace after the last (a thread busy all the window
        // would show 83 % of a 500 ms one). Without a send, the watch's whole time.
        let sending = r.last_sent_s - r.first_sent_s;
        let secs = if r.sent > 1 && sending > 0.0 {
            sending
        } else {
            self.t0.elapsed().as_secs_f64()
        }
        .max(1e-9);
        self.done.store(true, Relaxed);
        let listen = self
            .sampler
            .take()
            .and_then(|h| h.join().ok())
            .filter(|l| l.seen);
        let after = self
            .root
            .as_deref()
            .and_then(|r| tpslab_proc::live::tcp_counters(r).ok());
        let namespace_drops = match (self.before, after) {
            (Some(a), Some(b)) => Some(
                b.listen_overflows
                    .saturating_sub(a.listen_overflows)
                    .max(b.listen_drops.saturating_sub(a.listen_drops)),
            ),
            _ => None,
        };
        let threads = match (self.pid, self.tree.take()) {
            (Some(pid), Some(t0)) => Some(thread_facts(pid, &t0, secs)),
            _ => None,
        };
        StreamFacts {
            listen_drops: listen.as_ref().filter(|l| l.based).map(|l| {
                l.drops
                    .values()
                    .map(|(a, b)| b.saturating_sub(*a))
                    .sum::<u64>()
            }),
            namespace_drops,
            accept_queue_max: listen.as_ref().map(|l| l.queue_max),
            backlog: listen.as_ref().map(|l| l.backlog),
            threads,
            ..Default::default()
        }
        .with_failures(r)
    }
}

impl Drop for StreamWatch {
    fn drop(&mut self) {
        self.done.store(true, Relaxed);
        if let Some(h) = self.sampler.take() {
            let _ = h.join();
        }
    }
}

/// The threads of `pid` and its descendants over `secs` since `t0` was read.
fn thread_facts(pid: u32, t0: &Tree, secs: f64) -> ThreadFacts {
    let now = Tree::read(pid);
    let mut cpus: Vec<usize> = now
        .cpu
        .iter()
        .filter_map(|(p, _)| allowed_cpus(*p))
        .flatten()
        .collect();
    cpus.sort_unstable();
    cpus.dedup();
    let mut t = ThreadFacts {
        processes: now.cpu.len(),
        threads: now.threads.len(),
        cpus: (!cpus.is_empty()).then_some(cpus.len()),
        ..Default::default()
    };
    for (tid, s) in &now.threads {
        // A thread started in the window (a thread per connection, made again each
        // run; a worker process forked) counts from its birth: schedstat starts at 0
        // then.
        let b = t0
            .threads
            .iter()
            .find(|(x, _)| x == tid)
            .map(|(_, b)| *b)
            .unwrap_or_default();
        let run = s.run_ns.saturating_sub(b.run_ns) as f64 / 1e9 / secs * 100.0;
        let wait = s.wait_ns.saturating_sub(b.wait_ns) as f64 / 1e9 / secs * 100.0;
        t.all_wanted_pct += run + wait;
        if run + wait > t.busiest_run_pct + t.busiest_wait_pct {
            (t.busiest_run_pct, t.busiest_wait_pct) = (run.min(100.0), wait.min(100.0));
        }
    }
    // The processes' CPU time counts threads that ended in the window too (a thread per
    // connection, gone by now), and processes that ended and were waited for (their
    // parent's cutime+cstime): all threads' share is at least it.
    if !now.cpu.is_empty() {
        let all = now.cpu_ticks().saturating_sub(t0.cpu_ticks()) as f64
            / tpslab_net::clock_ticks_per_s()
            / secs
            * 100.0;
        t.all_wanted_pct = t.all_wanted_pct.max(all);
    }
    t
}

/// The CPUs `pid` may run on (its Cpus_allowed_list), when readable.
fn allowed_cpus(pid: u32) -> Option<Vec<usize>> {
    let st = tpslab_proc::live::task_status(std::path::Path::new(&format!("/proc/{pid}/status")))
        .ok()?;
    tpslab_proc::pid::parse_cpu_list(&st.cpus_allowed_list).ok()
}

/// Each thread of `pid` with its schedstat (those readable).
fn schedstats(pid: u32) -> Vec<(u32, tpslab_proc::pid::SchedStat)> {
    tpslab_proc::live::task_ids(pid)
        .into_iter()
        .filter_map(|tid| {
            tpslab_proc::live::schedstat(std::path::Path::new(&format!("/proc/{pid}/task/{tid}")))
                .ok()
                .map(|s| (tid, s))
        })
        .collect()
}
