//! The UDP commands' workflows: `serve udp` (the reference server until stopped), `load
//! udp` and `run udp` (one UDP run, [`run`]), and `watch` (the observer alone on a process
//! or a port, [`watch`]); and how a UDP run's record is made ([`record`]).

use crate::{Ctx, Started};
use anyhow::{bail, Result};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tpslab_engine::client::udp_run::run_udp_streamed;
use tpslab_engine::observe::{Observer, ObserverConfig};
use tpslab_engine::serve::server::UdpServer;
use tpslab_plan::udp::ServerConfig;
use tpslab_plan::udp::UdpRunPlan;
use tpslab_plan::udp::{RunPlan, WatchPlan};
use tpslab_record::{Body, Record, RunRecord, ServeRecord, ServerReport};

/// `serve udp`: the reference server's settings, and how long it serves (None: until
/// stopped).
#[derive(Debug, Clone, PartialEq)]
pub struct ServePlan {
    /// The server (validated).
    pub server: ServerConfig,
    /// Stop after this long (None: until `ctx.stop`).
    pub duration: Option<Duration>,
}

/// Runs the reference server until `ctx.stop` or the plan's duration; `started` is given
/// its settings (address, buffer granted) once it listens (a terminal prints them then).
/// With `ctx.live`, an observer follows its sockets and read count every 100 ms.
///
/// Returns the serve record (counts, elapsed seconds, interrupted when stopped). Errors:
/// the server cannot start (address in use, ...), or `started` failed (the server is
/// stopped first).
pub fn serve(
    plan: &ServePlan,
    ctx: &Ctx,
    started: &mut dyn FnMut(&ServerReport) -> std::io::Result<()>,
) -> Result<Record> {
    let when = Started::now();
    let srv = UdpServer::start(plan.server.clone())?;
    started(&srv.report())?;
    // Followed when someone listens: the server's sockets and its own read count.
    let observer = ctx.live.as_ref().map(|live| {
        Observer::start(ObserverConfig {
            interval: Duration::from_millis(100),
            net_root: PathBuf::from("/proc/self"),
            target_inodes: srv.socket_inodes().to_vec(),
            target_port: Some(srv.local_addr().port()),
            target_addr: None,
            gen_sockets: None,
            target_pid: Some(std::process::id()),
            target_tids: srv.tids().to_vec(),
            count_io: None,
            tcp_inodes: vec![],
            read_probe: Some(srv.read_probe()),
            send_probe: None,
            live: Some(live.clone()),
            live_latency: None,
        })
    });
    let t0 = std::time::Instant::now();
    while !ctx.stopped() && plan.duration.is_none_or(|d| t0.elapsed() < d) {
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(observer.map(Observer::stop));
    let server = srv.stop();
    let (elapsed_s, interrupted) = (t0.elapsed().as_secs_f64(), ctx.stopped());
    Ok(Record::with_meta(
        when.meta_for(elapsed_s, interrupted),
        Body::Serve(ServeRecord {
            server,
            elapsed_s,
            interrupted,
        }),
    ))
}

/// One UDP run (`load udp`, `run udp`): the plan's load against its server (ours when
/// `plan.server` is set), observed, as the phase "load"; every sample goes to `ctx.live`.
/// Returns the run's record (kind udp_run). Errors: the engine's (the server cannot
/// start, the target cannot be reached or found).
pub fn run(plan: &UdpRunPlan, ctx: &Ctx) -> Result<Record> {
    let secs = (plan.load.warmup + plan.load.duration).as_secs_f64();
    let rec = ctx.phase("load", secs, || {
        run_udp_streamed(plan.clone(), &ctx.stop, ctx.live.clone())
    })?;
    Ok(record(rec))
}

/// A UDP run's or a watch's record as the record it is written as: kind `watch` when its
/// plan is a watch, `udp_run` otherwise (a load, an agent's share, a merge).
pub fn record(rec: RunRecord) -> Record {
    let watch = matches!(rec.plan, Some(RunPlan::Watch(_)));
    Record::new(if watch {
        Body::Watch(rec)
    } else {
        Body::UdpRun(rec)
    })
}

/// The run inside a UDP run's or a watch's record; None for a record of another kind.
pub fn run_of(rec: &Record) -> Option<&RunRecord> {
    match &rec.body {
        Body::UdpRun(r) | Body::Watch(r) => Some(r),
        _ => None,
    }
}

/// What a watch of a process follows, found when it starts.
#[derive(Debug, Clone, PartialEq)]
pub struct Following {
    /// The process.
    pub pid: u32,
    /// Its UDP sockets found (on `port` when given).
    pub udp: usize,
    /// Its TCP sockets found (on `port` when given).
    pub tcp: usize,
    /// The port the sockets were narrowed to.
    pub port: Option<u16>,
}

impl Following {
    /// The line a terminal shows: `tpslab watch: process PID: following N UDP socket(s)
    /// and M TCP socket(s) [on port P]`.
    pub fn line(&self) -> String {
        format!(
            "tpslab watch: process {}: following {} UDP socket(s) and {} TCP socket(s){}",
            self.pid,
            self.udp,
            self.tcp,
            self.port.map_or(String::new(), |p| format!(" on port {p}"))
        )
    }
}

/// `watch`: the observer alone on a process's sockets (found through its descriptors, in
/// its network namespace) or a port's, for the plan's duration or until `ctx.stop`, with
/// the kernel's drop reasons over the same window (unless the plan says not). `following`
/// is told what a watch of a process found, once it starts. Every sample goes to
/// `ctx.live`.
///
/// Returns the watch's record: an observation that found no socket says so in a note.
/// Errors: the process's descriptors cannot be read (another user's process, not root).
pub fn watch(plan: &WatchPlan, ctx: &Ctx, following: &mut dyn FnMut(&Following)) -> Result<Record> {
    // The watch's wall-clock start: `merge --server` checks it against the agents' run.
    let started_unix_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let t0 = tpslab_net::mono_ns();
    // The process watched, as it was when the watch started (it may end during it).
    let target = plan.pid.and_then(tpslab_engine::host::env::target_process);
    // A process's sockets are found by the inodes of its open descriptors
    // (narrowed to --port when both are given).
    let net_root = plan.pid.map_or(PathBuf::from("/proc/self"), |p| {
        PathBuf::from(format!("/proc/{p}"))
    });
    let (udp_inodes, tcp_inodes) = match (plan.pid, plan.port) {
        (Some(pid), _) => process_sockets(pid, &net_root, plan.port)?,
        // A port alone: UDP sockets are found by it at every scan; TCP ones once, here.
        (None, Some(port)) => (vec![], port_tcp_sockets(&net_root, port)),
        (None, None) => (vec![], vec![]),
    };
    let obs = Observer::start(ObserverConfig {
        interval: plan.interval,
        net_root: net_root.clone(),
        target_inodes: udp_inodes.clone(),
        target_port: plan.port,
        target_addr: None,
        gen_sockets: None,
        target_pid: plan.pid,
        target_tids: vec![],
        count_io: plan.pid.map(|pid| (tpslab_proc::live::task_ids(pid), true)),
        tcp_inodes: tcp_inodes.clone(),
        read_probe: None,
        send_probe: None,
        live: ctx.live.clone(),
        live_latency: None,
    });
    // Kernel drop reasons over the same window (host-wide), or why not.
    let drops = tpslab_engine::observe::dropwatch::DropSampler::start_unless(plan.no_drop_reasons);
    // The live samples (--metrics-listen) carry them too.
    if let Ok(d) = &drops {
        obs.live_drops(d);
    }
    if let Some(pid) = plan.pid {
        following(&Following {
            pid,
            udp: udp_inodes.len(),
            tcp: tcp_inodes.len(),
            port: plan.port,
        });
    }
    // Bounded by WATCH_DURATION (a year): no overflow.
    let end = t0.saturating_add(plan.duration.as_nanos() as u64);
    while !ctx.stopped() && tpslab_net::mono_ns() < end {
        std::thread::sleep(Duration::from_millis(100).min(Duration::from_nanos(
            end.saturating_sub(tpslab_net::mono_ns()),
        )));
    }
    let rep = obs.stop();
    let drop_reasons = Some(tpslab_engine::observe::dropwatch::finish(drops));
    // An empty observation is said, not shown as zeros that look real.
    let udp_found = rep.deltas.get("server_sockets_found").copied().unwrap_or(0);
    let tcp_found = rep.deltas.get("tcp_sockets_found").copied().unwrap_or(0);
    let notes = if udp_found == 0 && tcp_found == 0 {
        vec![no_socket_note(plan.pid, plan.port)]
    } else {
        vec![]
    };
    let rec = RunRecord {
        tool_version: env!("CARGO_PKG_VERSION").into(),
        argv: std::env::args_os()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        started_unix_ms,
        elapsed_s: (tpslab_net::mono_ns() - t0) as f64 / 1e9,
        interrupted: ctx.stopped(),
        plan: Some(RunPlan::Watch(plan.clone())),
        environment: tpslab_engine::host::env::environment(),
        target: target.map(|t| tpslab_record::TargetProcess {
            // Its reads and sends counted on its threads (root, tracepoints).
            exact_counts: rep.deltas.contains_key("server_io_read"),
            ..t
        }),
        observer: Some(rep),
        notes,
        drop_reasons,
        ..Default::default()
    };
    Ok(record(rec))
}

/// The note of a watch that found no socket, naming what was watched.
fn no_socket_note(pid: Option<u32>, port: Option<u16>) -> String {
    match (pid, port) {
        (Some(pid), Some(port)) => format!(
            "NO SOCKET FOUND: process {pid} has no UDP or TCP socket on port {port}; the socket figures above are not observations"
        ),
        (Some(pid), None) => format!(
            "NO SOCKET FOUND: process {pid} has no UDP or TCP socket; the socket figures above are not observations"
        ),
        (None, Some(port)) => format!(
            "NO SOCKET FOUND: no UDP or TCP socket on port {port} in this network namespace (pass --pid PID for a server in another one); the socket figures above are not observations"
        ),
        (None, None) => "NO SOCKET FOUND: nothing was watched (no process, no port)".into(),
    }
}

/// The inodes of the TCP sockets open on local `port` in `net_root`'s namespace.
fn port_tcp_sockets(net_root: &Path, port: u16) -> Vec<u64> {
    tpslab_proc::live::tcp(net_root)
        .unwrap_or_default()
        .iter()
        .filter(|s| s.local.port() == port && s.inode != 0)
        .map(|s| s.inode)
        .collect()
}

/// The UDP and TCP socket inodes process `pid` holds open (from /proc/PID/fd, matched in
/// its namespace's /proc/PID/net/{udp,udp6,tcp,tcp6}), only those on local `port` when
/// given. Errors when its descriptors cannot be read (another user's process, not root).
pub fn process_sockets(
    pid: u32,
    net_root: &Path,
    port: Option<u16>,
) -> Result<(Vec<u64>, Vec<u64>)> {
    if std::fs::read_dir(format!("/proc/{pid}/fd")).is_err() {
        bail!("--pid {pid}: cannot read /proc/{pid}/fd to find its sockets (run as root or as its user)");
    }
    let fds = tpslab_proc::live::socket_inodes(pid);
    let on_port = |s: &tpslab_proc::UdpSocket| port.is_none_or(|p| s.local.port() == p);
    let mut udp = tpslab_proc::live::udp(net_root).unwrap_or_default();
    udp.extend(tpslab_proc::live::udp6(net_root).unwrap_or_default());
    let udp: Vec<u64> = udp
        .iter()
        .filter(|s| fds.binary_search(&s.inode).is_ok() && on_port(s))
        .map(|s| s.inode)
        .collect();
    let tcp: Vec<u64> = tpslab_proc::live::tcp(net_root)
        .unwrap_or_default()
        .iter()
        .filter(|s| fds.binary_search(&s.inode).is_ok() && on_port(s))
        .map(|s| s.inode)
        .collect();
    Ok((udp, tcp))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watch_record_is_kind_watch_and_a_run_is_udp_run() {
        let watch = RunRecord {
            plan: Some(RunPlan::Watch(WatchPlan {
                pid: None,
                port: Some(9),
                interval: Duration::from_millis(10),
                duration: Duration::from_secs(1),
                no_drop_reasons: true,
            })),
            ..Default::default()
        };
        assert_eq!(record(watch).kind(), "watch");
        let run = record(RunRecord::default());
        assert_eq!(run.kind(), "udp_run");
        assert!(run_of(&run).is_some());
    }

    #[test]
    fn the_sockets_of_this_process_are_found_on_their_port() {
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let pid = std::process::id();
        let root = PathBuf::from(format!("/proc/{pid}"));
        let (u, t) = process_sockets(pid, &root, Some(udp.local_addr().unwrap().port())).unwrap();
        assert_eq!((u.len(), t.len()), (1, 0));
        let (u, t) = process_sockets(pid, &root, Some(tcp.local_addr().unwrap().port())).unwrap();
        assert_eq!((u.len(), t.len()), (0, 1));
        assert_eq!(
            port_tcp_sockets(&root, tcp.local_addr().unwrap().port()).len(),
            1
        );
        assert!(process_sockets(u32::MAX, &root, None)
            .unwrap_err()
            .to_string()
            .contains("cannot read /proc/4294967295/fd"));
    }

    #[test]
    fn a_watch_of_a_port_with_no_socket_notes_it() {
        let free = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = free.local_addr().unwrap().port();
        drop(free);
        let plan = WatchPlan {
            pid: None,
            port: Some(port),
            interval: Duration::from_millis(10),
            duration: Duration::from_millis(50),
            no_drop_reasons: true,
        };
        let mut told = vec![];
        let rec = watch(&plan, &Ctx::silent(), &mut |f| told.push(f.line())).unwrap();
        assert!(told.is_empty(), "a watch of a port follows no process");
        let r = run_of(&rec).unwrap();
        assert_eq!(rec.kind(), "watch");
        assert!(
            r.notes[0].contains(&format!(
                "NO SOCKET FOUND: no UDP or TCP socket on port {port}"
            )),
            "{:?}",
            r.notes
        );
        assert!(!r.interrupted);
    }

    #[test]
    fn a_watch_of_a_process_says_what_it_follows() {
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = udp.local_addr().unwrap().port();
        let plan = WatchPlan {
            pid: Some(std::process::id()),
            port: Some(port),
            interval: Duration::from_millis(10),
            duration: Duration::from_millis(30),
            no_drop_reasons: true,
        };
        let mut told = vec![];
        watch(&plan, &Ctx::silent(), &mut |f| told.push(f.line())).unwrap();
        assert_eq!(
            told,
            vec![format!(
                "tpslab watch: process {}: following 1 UDP socket(s) and 0 TCP socket(s) on port {port}",
                std::process::id()
            )]
        );
    }
}
