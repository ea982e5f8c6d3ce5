//! The UDP commands: `serve udp`, `load udp`, `run udp` and `watch`, each a validated
//! plan, the engine, one record, its report.

use crate::flags::{
    check_interval, gate_exit, load_config, server_config, GateFlags, LoadFlags, OutputFlags,
    ServerFlags,
};
use crate::metrics::{both, ListenFlag};
use crate::out::{check_pid, install_signals, is_stdout, live_sink, resolve, Terminal};
use anyhow::{bail, Result};
use clap::Args;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;
use tpslab_analysis::gate;
use tpslab_analysis::record::{Body, Record, RunRecord, ServeRecord};
use tpslab_engine::observe::{Observer, ObserverConfig};
use tpslab_engine::server::{Mode, UdpServer};
use tpslab_engine::udp_run::{run_udp_streamed, UdpRunPlan};

#[derive(Args, Debug)]
pub(crate) struct ServeArgs {
    #[command(flatten)]
    pub(crate) server: ServerFlags,
    /// Stop after this long (default: until Ctrl-C/SIGTERM).
    #[arg(long, value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub(crate) duration: Option<Duration>,
    #[command(flatten)]
    pub(crate) record: crate::flags::RecordFlag,
    #[command(flatten)]
    pub(crate) metrics: ListenFlag,
}

#[derive(Args, Debug)]
pub(crate) struct LoadUdpArgs {
    /// Server address, HOST:PORT.
    pub(crate) target: String,
    #[command(flatten)]
    pub(crate) load: LoadFlags,
    /// Sender threads (one socket each).
    #[arg(long, default_value_t = 1)]
    pub(crate) threads: usize,
    /// PID of the server process: its network namespace, sockets and threads are watched,
    /// and (root, kernel 6.4+) the UDP datagrams its threads read and send are counted
    /// exactly, whatever else uses UDP on the host.
    #[arg(long)]
    pub(crate) pid: Option<u32>,
    #[command(flatten)]
    pub(crate) out: OutputFlags,
}

#[derive(Args, Debug)]
pub(crate) struct RunUdpArgs {
    #[command(flatten)]
    pub(crate) server: ServerFlags,
    #[command(flatten)]
    pub(crate) load: LoadFlags,
    /// Generator sender threads (one socket each); --threads is the server's.
    #[arg(long, default_value_t = 1)]
    pub(crate) load_threads: usize,
    #[command(flatten)]
    pub(crate) out: OutputFlags,
}

#[derive(Args, Debug)]
pub(crate) struct WatchArgs {
    /// Process whose sockets (UDP and TCP, found through its descriptors), threads and
    /// namespace to watch; its threads' UDP reads and sends are counted (root).
    #[arg(long)]
    pub(crate) pid: Option<u32>,
    /// Local port of the socket(s) to watch: UDP sockets bound to it, and TCP sockets
    /// (a listener and its connections) open on it when the watch starts.
    #[arg(long)]
    pub(crate) port: Option<u16>,
    /// How long to watch.
    #[arg(long, default_value = "10s", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub(crate) duration: Duration,
    /// Write one JSON object per sampling interval to FILE while watching (NDJSON, one
    /// write per line): time, delivered pps, drops so far, rx_queue.
    #[arg(long, value_name = "FILE")]
    pub(crate) json_stream: Option<PathBuf>,
    /// Sampling interval (1ms..=60s).
    #[arg(long, default_value = "10ms", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub(crate) interval: Duration,
    #[command(flatten)]
    pub(crate) record: crate::flags::RecordFlag,
    /// Show the source counter of every figure.
    #[arg(long)]
    pub(crate) explain: bool,
    /// Do not sample the kernel's drop reasons (skb:kfree_skb, root): spares the cost of
    /// one perf sample per dropped packet on the host while watching.
    #[arg(long)]
    pub(crate) no_drop_reasons: bool,
    #[command(flatten)]
    pub(crate) metrics: ListenFlag,
}

/// `tpslab serve udp`: the reference server until Ctrl-C or --duration, then its counts.
pub(crate) fn serve(a: ServeArgs) -> Result<ExitCode> {
    let cfg = server_config(&a.server)?;
    a.record.check(false)?;
    let exporter = a.metrics.start("serve udp")?;
    let stop = install_signals()?;
    let started = tpslab_run::Started::now();
    let srv = UdpServer::start(cfg)?;
    tpslab_report::term::serve_header(&mut std::io::stdout().lock(), &srv.report())?;
    // Scraped: the observer follows the server's sockets and its own read count.
    let observer = exporter.as_ref().map(|e| {
        Observer::start(ObserverConfig {
            interval: Duration::from_millis(100),
            net_root: PathBuf::from("/proc/self"),
            target_inodes: srv.socket_inodes().to_vec(),
            target_port: Some(srv.local_addr().port()),
            target_addr: None,
            gen_inodes: vec![],
            gen_root: PathBuf::from("/proc/self"),
            target_pid: Some(std::process::id()),
            target_tids: srv.tids().to_vec(),
            count_io: None,
            tcp_inodes: vec![],
            read_probe: Some(srv.read_probe()),
            send_probe: None,
            live: Some(e.sink()),
            live_latency: None,
        })
    });
    let t0 = std::time::Instant::now();
    while !stop.load(Relaxed) && a.duration.is_none_or(|d| t0.elapsed() < d) {
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(observer.map(Observer::stop));
    let server = srv.stop();
    let (elapsed_s, interrupted) = (t0.elapsed().as_secs_f64(), stop.load(Relaxed));
    let rec = Record::with_meta(
        started.meta_for(elapsed_s, interrupted),
        Body::Serve(ServeRecord {
            server,
            elapsed_s,
            interrupted,
        }),
    );
    let Body::Serve(s) = &rec.body else {
        unreachable!("made as a server's record above")
    };
    let print =
        |out: &mut dyn Write| tpslab_report::term::print_server(out, &s.server, s.elapsed_s);
    crate::out::emit(&rec, a.record.outputs(), Terminal::With(&print))?;
    // Ctrl-C is how a server without --duration ends: not a failure.
    Ok(ExitCode::SUCCESS)
}

/// `tpslab load udp`: open-loop load against any UDP server, observed and accounted.
pub(crate) fn load(a: LoadUdpArgs) -> Result<ExitCode> {
    let target = resolve(&a.target)?;
    let mut load = load_config(&a.load, a.threads, "--threads", target)?;
    load.keep_histograms = a.out.record.metrics_file.is_some();
    check_interval(a.out.interval)?;
    a.out.gate.conditions(gate::applies::UDP_RUN)?;
    a.out.record.check(true)?;
    if let Some(pid) = a.pid {
        check_pid(pid)?;
    }
    let exporter = a.out.metrics.start("load udp")?;
    let live = both(
        live_sink(a.out.json_stream.as_deref())?,
        exporter.as_ref().map(|e| e.sink()),
    );
    let stop = install_signals()?;
    let plan = UdpRunPlan {
        server: None,
        load,
        interval: a.out.interval,
        target_pid: a.pid,
        watch_port: None,
        no_drop_reasons: a.out.no_drop_reasons,
    };
    let secs = (plan.load.warmup + plan.load.duration).as_secs_f64();
    let rec = crate::out::with_progress("load", secs, || run_udp_streamed(plan, &stop, live))?;
    finish_record(rec, &a.out)
}

/// `tpslab run udp`: the reference server and the load in one process: the exact ledger.
pub(crate) fn run(a: RunUdpArgs) -> Result<ExitCode> {
    let mut srv = server_config(&a.server)?;
    if a.load.no_replies {
        srv.mode = Mode::Sink;
    }
    let mut load = load_config(&a.load, a.load_threads, "--load-threads", srv.bind)?;
    load.keep_histograms = a.out.record.metrics_file.is_some();
    check_interval(a.out.interval)?;
    a.out.gate.conditions(gate::applies::UDP_RUN)?;
    a.out.record.check(true)?;
    let exporter = a.out.metrics.start("run udp")?;
    let live = both(
        live_sink(a.out.json_stream.as_deref())?,
        exporter.as_ref().map(|e| e.sink()),
    );
    let stop = install_signals()?;
    let plan = UdpRunPlan {
        server: Some(srv),
        load,
        interval: a.out.interval,
        target_pid: None,
        watch_port: None,
        no_drop_reasons: a.out.no_drop_reasons,
    };
    let secs = (plan.load.warmup + plan.load.duration).as_secs_f64();
    let rec = crate::out::with_progress("load", secs, || run_udp_streamed(plan, &stop, live))?;
    finish_record(rec, &a.out)
}

/// `tpslab watch`: the observer alone, on a process or a port.
pub(crate) fn watch(a: WatchArgs) -> Result<ExitCode> {
    let plan = tpslab_plan::udp::WatchPlan {
        pid: a.pid,
        port: a.port,
        interval: a.interval,
        duration: a.duration,
        no_drop_reasons: a.no_drop_reasons,
    };
    plan.validate()?;
    a.record.check(true)?;
    if let Some(pid) = a.pid {
        check_pid(pid)?;
    }
    let exporter = a.metrics.start("watch")?;
    let stop = install_signals()?;
    // The watch's wall-clock start: `merge --server` checks it against the agents' run.
    let started_unix_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let t0 = tpslab_net::mono_ns();
    // The process watched, as it was when the watch started (it may end during it).
    let target = a.pid.and_then(tpslab_engine::env::target_process);
    // A process's sockets are found by the inodes of its open descriptors
    // (narrowed to --port when both are given).
    let net_root = a.pid.map_or(PathBuf::from("/proc/self"), |p| {
        PathBuf::from(format!("/proc/{p}"))
    });
    let (udp_inodes, tcp_inodes) = match (a.pid, a.port) {
        (Some(pid), _) => process_sockets(pid, &net_root, a.port)?,
        // A port alone: UDP sockets are found by it at every scan; TCP ones once, here.
        (None, Some(port)) => (
            vec![],
            tpslab_proc::live::tcp(&net_root)
                .unwrap_or_default()
                .iter()
                .filter(|s| s.local.port() == port && s.inode != 0)
                .map(|s| s.inode)
                .collect(),
        ),
        (None, None) => (vec![], vec![]),
    };
    let obs = Observer::start(ObserverConfig {
        interval: a.interval,
        net_root: net_root.clone(),
        target_inodes: udp_inodes.clone(),
        target_port: a.port,
        target_addr: None,
        gen_inodes: vec![],
        gen_root: PathBuf::from("/proc/self"),
        target_pid: a.pid,
        target_tids: vec![],
        count_io: a.pid.map(|pid| (tpslab_proc::live::task_ids(pid), true)),
        tcp_inodes: tcp_inodes.clone(),
        read_probe: None,
        send_probe: None,
        live: both(
            live_sink(a.json_stream.as_deref())?,
            exporter.as_ref().map(|e| e.sink()),
        ),
        live_latency: None,
    });
    // Kernel drop reasons over the same window (host-wide), or why not.
    let drops = tpslab_engine::dropwatch::DropSampler::start_unless(a.no_drop_reasons);
    if let Some(pid) = a.pid {
        let line = format!(
            "tpslab watch: process {pid}: following {} UDP socket(s) and {} TCP socket(s){}",
            udp_inodes.len(),
            tcp_inodes.len(),
            a.port.map_or(String::new(), |p| format!(" on port {p}"))
        );
        // Standard output may carry the JSON record alone.
        if a.record.json.as_deref().is_some_and(is_stdout) {
            eprintln!("{line}");
        } else {
            println!("{line}");
        }
    }
    // Bounded by WATCH_DURATION (a year): no overflow.
    let end = t0.saturating_add(a.duration.as_nanos() as u64);
    while !stop.load(Relaxed) && tpslab_net::mono_ns() < end {
        std::thread::sleep(Duration::from_millis(100).min(Duration::from_nanos(
            end.saturating_sub(tpslab_net::mono_ns()),
        )));
    }
    let rep = obs.stop();
    let drop_reasons = Some(tpslab_engine::dropwatch::finish(drops));
    // An empty observation is said, not shown as zeros that look real.
    let mut notes = vec![];
    let udp_found = rep.deltas.get("server_sockets_found").copied().unwrap_or(0);
    let tcp_found = rep.deltas.get("tcp_sockets_found").copied().unwrap_or(0);
    if udp_found == 0 && tcp_found == 0 {
        notes.push(match (a.pid, a.port) {
            (Some(pid), Some(port)) => format!(
                "NO SOCKET FOUND: process {pid} has no UDP or TCP socket on port {port}; the socket figures above are not observations"
            ),
            (Some(pid), None) => format!(
                "NO SOCKET FOUND: process {pid} has no UDP or TCP socket; the socket figures above are not observations"
            ),
            (None, Some(port)) => format!(
                "NO SOCKET FOUND: no UDP or TCP socket on port {port} in this network namespace (pass --pid PID for a server in another one); the socket figures above are not observations"
            ),
            (None, None) => unreachable!("checked above"),
        });
    }
    let rec = RunRecord {
        tool_version: env!("CARGO_PKG_VERSION").into(),
        argv: std::env::args_os()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        started_unix_ms,
        elapsed_s: (tpslab_net::mono_ns() - t0) as f64 / 1e9,
        interrupted: stop.load(Relaxed),
        plan: Some(tpslab_plan::udp::RunPlan::Watch(plan)),
        environment: tpslab_engine::env::environment(),
        target: target.map(|t| tpslab_analysis::record::TargetProcess {
            // Its reads and sends counted on its threads (root, tracepoints).
            exact_counts: rep.deltas.contains_key("server_io_read"),
            ..t
        }),
        observer: Some(rep),
        notes,
        drop_reasons,
        ..Default::default()
    };
    finish_record_as(
        rec,
        &OutputFlags {
            interval: a.interval,
            record: a.record,
            json_stream: a.json_stream,
            explain: a.explain,
            no_drop_reasons: a.no_drop_reasons,
            gate: GateFlags::default(),
            metrics: a.metrics.clone(),
        },
        true,
    )
}

/// Writes and prints a run record; the exit code follows `out.gate` (for `watch`, ended
/// by Ctrl-C as a matter of course, `interrupt_is_normal` keeps it 0).
pub(crate) fn finish_record(rec: RunRecord, out: &OutputFlags) -> Result<ExitCode> {
    finish_record_as(rec, out, false)
}

fn finish_record_as(
    rec: RunRecord,
    out: &OutputFlags,
    interrupt_is_normal: bool,
) -> Result<ExitCode> {
    let exit = |rec: &RunRecord| {
        if interrupt_is_normal && rec.interrupted {
            Ok(ExitCode::SUCCESS)
        } else {
            gate_exit(rec, &out.gate)
        }
    };
    let watch = rec
        .plan
        .as_ref()
        .is_some_and(|p| matches!(p, tpslab_plan::udp::RunPlan::Watch(_)));
    let record = Record::new(if watch {
        Body::Watch(rec)
    } else {
        Body::UdpRun(rec)
    });
    let (Body::UdpRun(rec) | Body::Watch(rec)) = &record.body else {
        unreachable!("made as a run above")
    };
    crate::out::emit(
        &record,
        out.record.outputs(),
        Terminal::Report {
            explain: out.explain,
        },
    )?;
    exit(rec)
}

/// The UDP and TCP socket inodes process `pid` holds open (from /proc/PID/fd, matched in
/// its namespace's /proc/PID/net/{udp,udp6,tcp,tcp6}), only those on local `port` when
/// given. Errors when its descriptors cannot be read (another user's process, not root).
fn process_sockets(
    pid: u32,
    net_root: &std::path::Path,
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
