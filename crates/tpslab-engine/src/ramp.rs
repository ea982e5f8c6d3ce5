//! Closed-loop load that ramps up: N users, each sending a request and waiting for its
//! reply (plus optional think time), N stepping up over the run; per step TPS, response
//! times, errors, the server's CPU and its threads' states.
//!
//! Each step starts with `warmup_ns` (new users connect, queues settle; not measured),
//! then `step_ns` measured: a request counts in the step when its reply arrives inside
//! that window. Every request has a timeout, so a server that stops answering or closes
//! connections costs errors, never a hang. A user that fails reconnects (TCP) and goes on.

use std::collections::BTreeMap;
use std::io::{ErrorKind, Write};

use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::Duration;

use hdrhistogram::Histogram;
use tpslab_analysis::stats::{new_ns_histogram, LatencySummary};
use tpslab_net::mono_ns;

use crate::rr::FrameReader;
use crate::EngineError;

pub use tpslab_analysis::ramp::{RampPlan, RampProto, RampRecord, StepResult, ThreadStates};

struct StepAcc {
    hist: Histogram<u64>,
    errors: BTreeMap<String, u64>,
}

struct Shared<'a> {
    plan: &'a RampPlan,
    /// Users allowed to run now.
    active: AtomicUsize,
    /// Set at the end.
    done: AtomicBool,
    /// Measured windows: [start, end) ns per step.
    windows: Vec<(u64, u64)>,
    acc: Vec<Mutex<StepAcc>>,
}

impl Shared<'_> {
    fn step_of(&self, t: u64) -> Option<usize> {
        self.windows.iter().position(|&(a, b)| t >= a && t < b)
    }
    fn ok(&self, t: u64, rt_ns: u64) {
        if let Some(i) = self.step_of(t) {
            let mut a = self.acc[i].lock().unwrap_or_else(|e| e.into_inner());
            // Above the histogram's 100 s bound counts as 100 s, never as nothing.
            a.hist.saturating_record(rt_ns.max(1));
        }
    }
    fn err(&self, t: u64, kind: &str) {
        if let Some(i) = self.step_of(t) {
            let mut a = self.acc[i].lock().unwrap_or_else(|e| e.into_inner());
            *a.errors.entry(kind.to_string()).or_default() += 1;
        }
    }
}

fn io_kind(e: &std::io::Error) -> String {
    match e.kind() {
        ErrorKind::WouldBlock | ErrorKind::TimedOut => "timeout".into(),
        ErrorKind::UnexpectedEof => "closed by peer".into(),
        ErrorKind::ConnectionReset => "connection reset".into(),
        ErrorKind::ConnectionRefused => "connection refused".into(),
        ErrorKind::BrokenPipe => "broken pipe".into(),
        _ => e.to_string(),
    }
}

/// Runs the plan; `stop` ends it early (the steps so far are returned).
pub fn run_ramp(plan: &RampPlan, stop: &AtomicBool) -> Result<RampRecord, EngineError> {
    run_ramp_with(plan, stop, &|_| {})
}

/// [`run_ramp`], with each step's result also given to `on_step` as soon as it is measured
/// (a live exporter's feed).
pub fn run_ramp_with(
    plan: &RampPlan,
    stop: &AtomicBool,
    on_step: &(dyn Fn(&StepResult) + Sync),
) -> Result<RampRecord, EngineError> {
    if plan.steps.is_empty() || plan.steps.windows(2).any(|w| w[1] < w[0]) {
        return Err(EngineError::Other(
            "ramp steps must be non-empty and increasing".into(),
        ));
    }
    let max_users = *plan.steps.last().unwrap_or(&1);
    // One socket per user, plus room for the process's own files.
    let limit = tpslab_net::raise_nofile();
    if (max_users as u64) + 64 > limit {
        return Err(EngineError::Other(format!(
            "{max_users} users need {} file descriptors; the limit (RLIMIT_NOFILE, ulimit -n) is {limit}: raise it or ramp to fewer users",
            max_users + 64
        )));
    }
    let t0 = mono_ns() + 50_000_000;
    let per = plan.warmup_ns + plan.step_ns;
    let windows: Vec<(u64, u64)> = (0..plan.steps.len() as u64)
        .map(|k| (t0 + k * per + plan.warmup_ns, t0 + (k + 1) * per))
        .collect();
    let shared = Shared {
        plan,
        active: AtomicUsize::new(0),
        done: AtomicBool::new(false),
        windows: windows.clone(),
        acc: plan
            .steps
            .iter()
            .map(|_| {
                Mutex::new(StepAcc {
                    hist: new_ns_histogram(),
                    errors: BTreeMap::new(),
                })
            })
            .collect(),
    };
    let mut results = vec![];
    // The server's network namespace (its TCP counters and listen socket): its PID's,
    // or this host's for a local target.
    let tcp_root = match (plan.proto, plan.server_pid) {
        (RampProto::Tcp, Some(pid)) => Some(std::path::PathBuf::from(format!("/proc/{pid}"))),
        (RampProto::Tcp, None) if plan.target.ip().is_loopback() => {
            Some(std::path::PathBuf::from("/proc/self"))
        }
        _ => None,
    };
    let listener = tcp_root
        .as_ref()
        .and_then(|_| listener(plan.server_pid, plan.target.port()));
    let port = plan.target.port();
    std::thread::scope(|s| -> Result<(), EngineError> {
        for id in 0..max_users {
            let sh = &shared;
            let spawned = std::thread::Builder::new()
                .name(format!("ramp-user-{id}"))
                .spawn_scoped(s, move || user(sh, id));
            if let Err(e) = spawned {
                // The users already started must end, or the scope would wait forever.
                shared.done.store(true, Relaxed);
                return Err(EngineError::Other(format!(
                    "starting user {id} of {max_users}: {e}"
                )));
            }
        }
        for (k, &users) in plan.steps.iter().enumerate() {
            let (w0, w1) = windows[k];
            sleep_until(w0 - plan.warmup_ns, stop);
            shared.active.store(users, Relaxed);
            sleep_until(w0, stop);
            if stop.load(Relaxed) {
                break;
            }
            let drops = crate::dropwatch::DropSampler::start();
            let cpu0 = plan.server_pid.and_then(proc_cpu_ticks);
            let sched0 = plan.server_pid.map(task_schedstats).unwrap_or_default();
            let mut states = plan.server_pid.map(|_| ThreadStates::default());
            let tcp0 = tcp_root
                .as_deref()
                .and_then(|r| tpslab_proc::live::tcp_counters(r).ok());
            let mut accept_max = tcp0.map(|_| 0u64);
            let mut next = w0;
            while next < w1 && !stop.load(Relaxed) {
                if let (Some(pid), Some(st)) = (plan.server_pid, states.as_mut()) {
                    crate::waits::sample_process(pid, st);
                }
                if let (Some(r), Some(m)) = (tcp_root.as_deref(), accept_max.as_mut()) {
                    *m = (*m).max(accept_queue(r, port));
                }
                next += plan.sample_ns;
                sleep_until(next.min(w1), stop);
            }
            if stop.load(Relaxed) {
                break;
            }
            let cpu1 = plan.server_pid.and_then(proc_cpu_ticks);
            let drop_reasons = Some(crate::dropwatch::finish(drops));
            let tcp1 = tcp_root
                .as_deref()
                .and_then(|r| tpslab_proc::live::tcp_counters(r).ok());
            if let (Some(pid), Some(st)) = (plan.server_pid, states.as_mut()) {
                for (tid, b) in task_schedstats(pid) {
                    if let Some(a) = sched0.get(&tid) {
                        st.on_cpu_ns += b.run_ns.saturating_sub(a.run_ns);
                        st.runqueue_ns += b.wait_ns.saturating_sub(a.wait_ns);
                    }
                }
            }
            let measured_s = (w1 - w0) as f64 / 1e9;
            // Replies still in flight at w1 land in no window; wait a moment for the
            // accumulator to be complete for replies that arrived before w1.
            let a = shared.acc[k].lock().unwrap_or_else(|e| e.into_inner());
            let response = LatencySummary::from_histogram(&a.hist);
            results.push(StepResult {
                users,
                measured_s,
                completed: a.hist.len(),
                tps: a.hist.len() as f64 / measured_s,
                response,
                errors: a.errors.clone(),
                server_cpu_cores: cpu0.zip(cpu1).map(|(c0, c1)| {
                    c1.saturating_sub(c0) as f64 / tpslab_net::clock_ticks_per_s() / measured_s
                }),
                threads: states,
                tcp: tcp0.zip(tcp1).map(|(a, b)| b.since(&a)),
                accept_queue_max: accept_max,
                drop_reasons,
            });
            if let Some(r) = results.last() {
                on_step(r);
            }
        }
        shared.done.store(true, Relaxed);
        Ok(())
    })?;
    // The CPUs the server may run on: its affinity when it is on this host, else ours
    // (a server tpslab started inherits it).
    let server_cpus = match plan.server_pid {
        Some(pid) => {
            tpslab_proc::live::task_status(std::path::Path::new(&format!("/proc/{pid}/status")))
                .ok()
                .and_then(|st| tpslab_proc::pid::parse_cpu_list(&st.cpus_allowed_list).ok())
                .map(|v| v.len())
                .filter(|&n| n > 0)
        }
        None => std::thread::available_parallelism().ok().map(|n| n.get()),
    };
    Ok(RampRecord {
        plan: plan.clone(),
        interrupted: stop.load(Relaxed) && results.len() < plan.steps.len(),
        steps: results,
        server_cpus,
        listener,
    })
}

/// Connections waiting in the accept queue of the listen socket(s) on `port` now (rx_queue
/// of listeners in <root>/net/tcp{,6}).
fn accept_queue(root: &std::path::Path, port: u16) -> u64 {
    ["tcp", "tcp6"]
        .iter()
        .filter_map(|f| std::fs::read_to_string(root.join("net").join(f)).ok())
        .filter_map(|t| tpslab_proc::parse_udp(t.as_bytes(), "tcp").ok())
        .flatten()
        // State 0x0A = TCP_LISTEN: rx_queue is the accept queue.
        .filter(|s| s.state == 0x0A && s.local.port() == port)
        .map(|s| s.rx_queue)
        .sum()
}

/// The listen socket on `port` in the server's namespace (`pid`'s, else this one), by
/// sock_diag: its backlog limit, and net.core.somaxconn there.
fn listener(pid: Option<u32>, port: u16) -> Option<tpslab_analysis::ramp::Listener> {
    let backlog = crate::env::in_netns_of(pid, move || -> Option<u32> {
        let mut d = tpslab_net::diag::UdpDiag::open().ok()?;
        // 1 << 10: TCP_LISTEN.
        let l = d
            .tcp_dump(1 << 10)
            .ok()?
            .into_iter()
            .find(|s| s.local.port() == port)?;
        Some(l.wqueue)
    })
    .flatten()?;
    Some(tpslab_analysis::ramp::Listener {
        backlog,
        somaxconn: crate::env::somaxconn(pid),
    })
}

fn sleep_until(t: u64, stop: &AtomicBool) {
    loop {
        let now = mono_ns();
        if now >= t || stop.load(Relaxed) {
            return;
        }
        std::thread::sleep(Duration::from_nanos((t - now).min(50_000_000)));
    }
}

fn proc_cpu_ticks(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let st = tpslab_proc::pid::parse_task_stat(&s, "stat").ok()?;
    Some(st.utime + st.stime)
}

/// schedstat of every thread of `pid`, by TID.
fn task_schedstats(pid: u32) -> BTreeMap<u32, tpslab_proc::pid::SchedStat> {
    let mut out = BTreeMap::new();
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for e in dir.flatten() {
        let Some(tid) = e.file_name().to_str().and_then(|t| t.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(s) = std::fs::read_to_string(e.path().join("schedstat")) else {
            continue;
        };
        if let Ok(v) = tpslab_proc::pid::parse_schedstat(s.as_bytes(), "schedstat") {
            out.insert(tid, v);
        }
    }
    out
}

/// A stream whose reads share one deadline: a reply that trickles in still times out
/// `timeout` after its request, not after each read.
struct Deadline<'a> {
    s: &'a mut TcpStream,
    deadline: u64,
}

impl std::io::Read for Deadline<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = self.deadline.saturating_sub(mono_ns());
        if left == 0 {
            return Err(std::io::Error::new(ErrorKind::TimedOut, "reply timeout"));
        }
        self.s
            .set_read_timeout(Some(Duration::from_nanos(left.max(1_000))))?;
        std::io::Read::read(self.s, buf)
    }
}

/// One user's loop until the ramp ends.
fn user(sh: &Shared, id: usize) {
    let plan = sh.plan;
    let timeout = Duration::from_nanos(plan.timeout_ns.max(1_000_000));
    let mut seq: u32 = 0;
    let mut req = plan.request.clone();
    let mut reader = FrameReader::default();
    let mut conn: Option<TcpStream> = None;
    let mut udp: Option<UdpSocket> = None;
    let mut buf = vec![0u8; 65536];
    while !sh.done.load(Relaxed) {
        if id >= sh.active.load(Relaxed) {
            std::thread::sleep(Duration::from_millis(1));
            continue;
        }
        let res: Result<(), String> = match plan.proto {
            RampProto::Tcp => {
                if conn.is_none() {
                    match TcpStream::connect_timeout(&plan.target, timeout) {
                        Ok(s) => {
                            let _ = s.set_nodelay(true);
                            let _ = s.set_read_timeout(Some(timeout));
                            let _ = s.set_write_timeout(Some(timeout));
                            reader = FrameReader::default();
                            conn = Some(s);
                        }
                        Err(e) => {
                            sh.err(mono_ns(), &format!("connect: {}", io_kind(&e)));
                            // Do not spin on a dead server.
                            std::thread::sleep(timeout.min(Duration::from_millis(100)));
                            continue;
                        }
                    }
                }
                let Some(s) = conn.as_mut() else { continue };
                let t = mono_ns();
                let deadline = t + timeout.as_nanos() as u64;
                let r = s.write_all(&req).and_then(|_| {
                    let mut d = Deadline { s, deadline };
                    reader.read(&mut d, &plan.framing).map(|n| {
                        reader.take(n);
                    })
                });
                match r {
                    Ok(()) => {
                        let now = mono_ns();
                        sh.ok(now, now - t);
                        Ok(())
                    }
                    Err(e) => {
                        conn = None;
                        Err(io_kind(&e))
                    }
                }
            }
            RampProto::Udp => {
                if udp.is_none() {
                    let bind: SocketAddr = if plan.target.is_ipv4() {
                        "0.0.0.0:0".parse().unwrap_or(plan.target)
                    } else {
                        "[::]:0".parse().unwrap_or(plan.target)
                    };
                    match UdpSocket::bind(bind).and_then(|u| {
                        u.connect(plan.target)?;
                        u.set_read_timeout(Some(timeout))?;
                        Ok(u)
                    }) {
                        Ok(u) => udp = Some(u),
                        Err(e) => {
                            sh.err(mono_ns(), &format!("socket: {e}"));
                            std::thread::sleep(Duration::from_millis(100));
                            continue;
                        }
                    }
                }
                let Some(u) = udp.as_ref() else { continue };
                seq = seq.wrapping_add(1);
                let (off, len) = plan.seq_field.unwrap_or((0, 8));
                let mut tag = [0u8; 8];
                if plan.seq_field.is_none() {
                    tag[..4].copy_from_slice(&(id as u32).to_be_bytes());
                    tag[4..].copy_from_slice(&seq.to_be_bytes());
                } else {
                    let v = (seq as u64).to_be_bytes();
                    tag[8 - len..].copy_from_slice(&v[8 - len..]);
                }
                let tag = if plan.seq_field.is_none() {
                    &tag[..]
                } else {
                    &tag[8 - len..]
                };
                req[off..off + len].copy_from_slice(tag);
                let t = mono_ns();
                let deadline = t + timeout.as_nanos() as u64;
                match u.send(&req) {
                    Err(e) => Err(format!("send: {}", io_kind(&e))),
                    Ok(_) => loop {
                        let now = mono_ns();
                        if now >= deadline {
                            break Err("timeout".into());
                        }
                        let _ = u.set_read_timeout(Some(Duration::from_nanos(deadline - now)));
                        match u.recv(&mut buf) {
                            Ok(n) if n >= off + len && &buf[off..off + len] == tag => {
                                let now = mono_ns();
                                sh.ok(now, now - t);
                                break Ok(());
                            }
                            // A late reply to an earlier request: not this one.
                            Ok(_) => continue,
                            Err(e) => break Err(io_kind(&e)),
                        }
                    },
                }
            }
        };
        if let Err(kind) = res {
            sh.err(mono_ns(), &kind);
        }
        if plan.think_ns > 0 {
            std::thread::sleep(Duration::from_nanos(plan.think_ns));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rr::{frame, Framing, RrConfig, RrMode, RrServer};

    #[test]
    fn tcp_ramp_counts_every_step_and_littles_law_holds() {
        let srv = RrServer::start(RrConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            mode: RrMode::Echo,
            work_ns: 0,
            serial_ns: 2_000_000,
            serialize: false,
            threads: 0,
        })
        .unwrap();
        let plan = RampPlan {
            proto: RampProto::Tcp,
            target: srv.local_addr(),
            steps: vec![1, 4],
            step_ns: 400_000_000,
            warmup_ns: 100_000_000,
            think_ns: 0,
            timeout_ns: 1_000_000_000,
            request: frame(b"hello"),
            framing: Framing::Length,
            seq_field: None,
            knee_gain: 0.2,
            builtin_server: None,
            server_pid: Some(std::process::id()),
            sample_ns: 10_000_000,
        };
        let r = run_ramp(&plan, &AtomicBool::new(false)).unwrap();
        assert_eq!(r.steps.len(), 2);
        for s in &r.steps {
            assert!(s.errors.is_empty(), "{:?}", s.errors);
            // Each request sleeps 2 ms on the server: X ~= N / 2 ms; Little: N = X R.
            let n = s.tps * s.response.mean_ns / 1e9;
            assert!(
                (n / s.users as f64 - 1.0).abs() < 0.1,
                "N {n} for {} users",
                s.users
            );
            assert!(s.response.p50_ns >= 2_000_000);
            let th = s.threads.as_ref().unwrap();
            assert!(th.samples > 0);
            // The users and the server run here; on-CPU time was measured.
            assert!(th.on_cpu_ns > 0, "{th:?}");
        }
        // Four users in parallel (no lock): about four times the TPS of one.
        let gain = r.steps[1].tps / r.steps[0].tps;
        assert!(gain > 3.0, "{gain}");
    }

    #[test]
    fn dead_server_gives_errors_not_a_hang() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let target = l.local_addr().unwrap();
        // Accepts, reads nothing, closes each connection at once.
        let h = std::thread::spawn(move || {
            l.set_nonblocking(true).unwrap();
            let end = std::time::Instant::now() + Duration::from_millis(900);
            while std::time::Instant::now() < end {
                if let Ok((s, _)) = l.accept() {
                    drop(s);
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        let plan = RampPlan {
            proto: RampProto::Tcp,
            target,
            steps: vec![2],
            step_ns: 500_000_000,
            warmup_ns: 0,
            think_ns: 0,
            timeout_ns: 200_000_000,
            request: frame(b"x"),
            framing: Framing::Length,
            seq_field: None,
            knee_gain: 0.2,
            builtin_server: None,
            server_pid: None,
            sample_ns: 10_000_000,
        };
        let t = std::time::Instant::now();
        let r = run_ramp(&plan, &AtomicBool::new(false)).unwrap();
        assert!(t.elapsed() < Duration::from_secs(3));
        h.join().unwrap();
        let s = &r.steps[0];
        assert_eq!(s.completed, 0);
        let errs: u64 = s.errors.values().sum();
        assert!(errs > 0, "{:?}", s.errors);
    }
}
