//! What a `capacity tcp|http` step's window showed beyond its figures, for its verdict
//! ([`tpslab_analysis::capacity_stream`]): the target's listen socket(s)
//! ([`tpslab_engine::observe::listen`]) and the TcpExt listen counters of the server's network
//! namespace, and the server's threads (its PID and its descendants,
//! [`tpslab_engine::observe::server_tree`]; each thread's states sampled every 10 ms,
//! [`tpslab_engine::observe::step_sampler`]), for the step's response-time ledger too.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tpslab_analysis::capacity_stream::{StreamFacts, ThreadFacts};
use tpslab_engine::observe::listen::Listen;
use tpslab_engine::observe::server_tree::ServerTree as Tree;
use tpslab_engine::observe::step_sampler::StepSampler;
use tpslab_net::diag::SockDiag;
use tpslab_net::sched::SchedPolicy;
use tpslab_record::load_http::LoadHttpResult;
use tpslab_record::ramp::StepResult;
use tpslab_record::ramp::TreeSampling;
use tpslab_record::waits::{StepThread, ThreadStates};

/// Watches a TCP or HTTP step's window for its verdict: in the server's network namespace
/// (with its PID; ours when the target is a loopback address; else nothing of it is
/// read) the listen socket(s) serving the target (its port, its address or a wildcard)
/// by a LISTEN-only sock_diag dump every
/// 10 ms (accept queue, backlog, drops) and the TcpExt listen counters first and last;
/// with the PID each thread's schedstat and the CPU time of the PID and its descendants.
pub(crate) struct StreamWatch {
    root: Option<std::path::PathBuf>,
    before: Option<tpslab_proc::netstat::TcpCounters>,
    pid: Option<u32>,
    tree: Option<Tree>,
    t0: Instant,
    done: Arc<AtomicBool>,
    sampler: Option<std::thread::JoinHandle<Window>>,
}

/// What the sampler thread read over the window: the listen socket(s), the server's
/// threads one by one, and the window's length, seconds.
struct Window {
    listen: Option<Listen>,
    threads: Option<(ThreadStates, Vec<StepThread>, TreeSampling)>,
    secs: f64,
}

impl StreamWatch {
    /// Starts the watch of a step's window on `target`, the server `pid` when known. Over
    /// TCP the listen socket(s) and the TcpExt counters too; `tcp` false (HTTP/3 over
    /// UDP): the threads only (the server's QUIC socket is the run's own to watch).
    pub(crate) fn start(target: std::net::SocketAddr, pid: Option<u32>, tcp: bool) -> StreamWatch {
        let root = match pid {
            _ if !tcp => None,
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
        let diag = root.as_ref().and_then(|_| {
            tpslab_engine::host::env::in_netns_of(pid, || SockDiag::open().ok()).flatten()
        });
        let threads = pid.map(|p| StepSampler::start(p, Some(target.port())));
        let sampler = (diag.is_some() || threads.is_some()).then(|| {
            let d = done.clone();
            // The first read before the load starts: the drops' baseline.
            let mut listen = diag.map(|mut diag| {
                let mut l = Listen::new(target);
                l.read(&mut diag, true);
                (l, diag)
            });
            let mut threads = threads;
            let t0 = Instant::now();
            std::thread::spawn(move || {
                // Never ahead of the generator's threads: a run under `chrt -f` would
                // otherwise share its CPU with this reader at the same priority.
                let _ = tpslab_net::sched::set_policy(SchedPolicy::Other);
                loop {
                    let last = d.load(Relaxed);
                    if let Some((l, diag)) = listen.as_mut() {
                        l.read(diag, false);
                    }
                    if let Some(sm) = threads.as_mut() {
                        sm.sample();
                    }
                    if last {
                        let threads = threads.map(|sm| {
                            let cov = sm.coverage();
                            let (st, per) = sm.finish();
                            (st, per, cov)
                        });
                        return Window {
                            listen: listen.map(|(l, _)| l),
                            threads,
                            secs: t0.elapsed().as_secs_f64(),
                        };
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

    /// The facts of the window that ended, with the counts of `r`; and the window as a
    /// step for its response-time ledger (`users`: the requests the step keeps in flight
    /// at once, one per connection or with HTTP/2 one per stream), None when nothing was
    /// sampled.
    pub(crate) fn end(
        mut self,
        r: &LoadHttpResult,
        users: usize,
    ) -> (StreamFacts, Option<StepResult>) {
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
        let window = self.sampler.take().and_then(|h| h.join().ok());
        let step = window.as_ref().map(|w| ledger_step(w, r, users));
        let listen = window.and_then(|w| w.listen).filter(|l| l.seen);
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
        let facts = StreamFacts {
            listen_drops: listen.as_ref().and_then(Listen::dropped),
            namespace_drops,
            accept_queue_max: listen.as_ref().map(|l| l.queue_max),
            backlog: listen.as_ref().map(|l| l.backlog),
            threads,
            ..Default::default()
        }
        .with_failures(r);
        (facts, step)
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

/// The window `w` as a ramp step of `users` for [`tpslab_analysis::rt_ledger::open_loop`]:
/// the replies of `r` (their response time, request written to reply read, and their
/// first-to-last-byte gaps) over the sampler's window, as are the threads' states and
/// the listener's accept queue (so Little's law divides like by like).
fn ledger_step(w: &Window, r: &LoadHttpResult, users: usize) -> StepResult {
    let secs = w.secs.max(1e-9);
    let listen = w.listen.as_ref().filter(|l| l.seen);
    let (threads, per_thread, tree_sampling) = match &w.threads {
        Some((st, per, cov)) => (Some(st.clone()), per.clone(), Some(*cov)),
        None => (None, vec![], None),
    };
    StepResult {
        users,
        measured_s: secs,
        completed: r.uncorrected.count,
        tps: r.uncorrected.count as f64 / secs,
        response: r.uncorrected,
        errors: Default::default(),
        server_cpu_cores: None,
        threads,
        tcp: None,
        accept_queue_max: listen.map(|l| l.queue_max),
        accept_queue_mean: listen.and_then(Listen::queue_mean),
        listener_drops: None,
        drop_reasons: None,
        load_sent_s: None,
        load_end_s: None,
        per_thread,
        tree_sampling,
        http2: None,
        reply_gaps: r.reply_gaps,
        reconnect_backoffs: 0,
    }
}

/// The threads of `pid` and its descendants over `secs` since `t0` was read.
fn thread_facts(pid: u32, t0: &Tree, secs: f64) -> ThreadFacts {
    let now = Tree::read(pid);
    let mut t = ThreadFacts {
        processes: now.cpu.len(),
        threads: now.threads.len(),
        cpus: now.cpus(),
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
    if let Some(cpu_s) = now.cpu_s_since(t0) {
        t.all_wanted_pct = t.all_wanted_pct.max(cpu_s / secs * 100.0);
    }
    t
}
