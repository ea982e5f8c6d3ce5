//! Command line: clap definitions, validation into engine plans, and running them.

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;
use tpslab_analysis::gate;
use tpslab_analysis::record::{Body, Record, RunRecord};

/// Schema of `serve udp --json` (the server's counts; not yet a record kind).
const SERVE_SCHEMA: &str = "tpslab.serve/1";
use tpslab_engine::lab::{run_udp, UdpRunPlan};
use tpslab_engine::load::LoadConfig;
use tpslab_engine::observe::{Observer, ObserverConfig};
use tpslab_engine::server::{Mode, ServerConfig, UdpServer};
use tpslab_net::sched::SchedPolicy;

/// Largest UDP payload over IPv4 (65535 - 8 UDP - 20 IP), bytes.
use tpslab_plan::limits::{self, MAX_UDP_PAYLOAD};
use tpslab_plan::units;

#[derive(Parser, Debug)]
#[command(
    name = "tpslab",
    version,
    about = "Load, serve, observe and explain UDP loss and TPS limits"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Run the reference server (the S1 workload) until Ctrl-C or --duration.
    Serve {
        #[command(subcommand)]
        proto: ServeProto,
    },
    /// Send open-loop load to a server and account for every datagram.
    Load {
        #[command(subcommand)]
        proto: LoadProto,
    },
    /// Reference server + load + observer in one process: the exact ledger.
    Run {
        #[command(subcommand)]
        proto: RunProto,
    },
    /// Sample the kernel's counters for a socket/process over time.
    Watch(WatchArgs),
    /// Render saved records again (any --json of load, run, watch, diagnose): the tables
    /// the run printed, or the record as JSON.
    Report(crate::report_cmd::ReportArgs),
    /// Bandwidth-delay product: the TCP buffers a rate over an RTT needs (and this host's),
    /// or the ceiling a buffer puts on a flow.
    Bdp(BdpArgs),
    /// Experiments over tunables: each setting repeated, in random order, with the spread
    /// and whether each effect is distinguishable from noise.
    Sweep(Box<SweepArgs>),
    /// A bulk TCP flow with its TCP_INFO sampled: throughput and which limit held it
    /// (receiver window, send buffer, congestion window, application); --lab-rtt runs it
    /// across an emulated WAN link between two namespaces.
    Tcp(Box<crate::tcp::TcpArgs>),
    /// Closed-loop load stepping up the users: TPS and response time per step, the knee,
    /// Little's law, a Universal Scalability Law fit, and the server threads' states
    /// (busy, or waiting on a lock or a peer).
    Ramp {
        #[command(subcommand)]
        proto: crate::ramp::RampCmd,
    },
    /// Find where datagrams die, recommend the fix and prove it. Without a target: the
    /// built-in S1 scenario on loopback.
    Diagnose(DiagnoseArgs),
}

#[derive(Args, Debug)]
pub(crate) struct DiagnoseArgs {
    #[command(subcommand)]
    pub(crate) target: Option<DiagProto>,
    /// Apply the recommendation for a second run and show before/after (default for the
    /// built-in scenario; host sysctls are journaled and always restored).
    #[arg(long, global = true)]
    pub(crate) verify: bool,
    /// Built-in scenario: diagnose only, no verification run.
    #[arg(long, global = true)]
    pub(crate) no_verify: bool,
    /// Observer sampling interval (1ms..=60s).
    #[arg(long, global = true, default_value = "10ms", value_parser = humantime::parse_duration)]
    pub(crate) interval: Duration,
    /// Write the diagnosis with the full run records (JSON, schema tpslab.diagnose/1).
    #[arg(long, global = true)]
    pub(crate) json: Option<PathBuf>,
    /// Show the source counter of every figure.
    #[arg(long, global = true)]
    pub(crate) explain: bool,
    /// Exit 1 when the first run ("as is") meets one of these: loss>PCT%, invalid, errors.
    #[arg(long, global = true, value_name = "CONDITIONS")]
    pub(crate) fail_on: Option<String>,
    /// Exit 3 when the first run is not valid evidence (RUN INVALID).
    #[arg(long, global = true)]
    pub(crate) strict: bool,
}

#[derive(Subcommand, Debug)]
pub(crate) enum DiagProto {
    /// A UDP server on this host (yours, found by --pid or its port).
    Udp(DiagUdpArgs),
}

#[derive(Args, Debug)]
pub(crate) struct DiagUdpArgs {
    /// Server address, HOST:PORT (not with --server-cmd).
    pub(crate) target: Option<String>,
    /// Start the user's server for each run: a shell command with {port} (e.g.
    /// 'java UdpServer.java {port}'), stopped by PID after the run; with --verify the
    /// recommended host sysctls are applied before it starts again, so the fix is proven
    /// on the user's own server.
    #[arg(long)]
    pub(crate) server_cmd: Option<String>,
    #[command(flatten)]
    pub(crate) load: LoadFlags,
    /// Sender threads (one socket each).
    #[arg(long, default_value_t = 1)]
    pub(crate) threads: usize,
    /// PID of the server: its network namespace, sockets and threads are watched, and
    /// (root, kernel 6.4+) the UDP datagrams its threads read and send are counted exactly.
    #[arg(long)]
    pub(crate) pid: Option<u32>,
    /// Local port of the server's socket, when it differs from TARGET's port.
    #[arg(long)]
    pub(crate) port: Option<u16>,
}

#[derive(Subcommand, Debug)]
enum ServeProto {
    /// UDP reference server.
    Udp(ServeArgs),
    /// TCP server (sink: reads and discards).
    Tcp(crate::tcp::ServeTcpArgs),
}
#[derive(Subcommand, Debug)]
enum LoadProto {
    /// UDP open-loop generator.
    Udp(LoadUdpArgs),
}
#[derive(Subcommand, Debug)]
enum RunProto {
    /// UDP: our server and our generator, observed together.
    Udp(RunUdpArgs),
}

#[derive(ValueEnum, Clone, Copy, Debug)]
pub(crate) enum ModeArg {
    Replace,
    Echo,
    Sink,
}

#[derive(Args, Debug, Clone)]
pub(crate) struct ServerFlags {
    /// Address to bind (0.0.0.0 only when given explicitly).
    #[arg(long, default_value = "127.0.0.1:9000")]
    pub(crate) bind: String,
    /// Server threads, one SO_REUSEPORT socket each.
    #[arg(long, default_value_t = 1)]
    pub(crate) threads: usize,
    /// recvmmsg batch size; 1 means plain recvfrom/sendto.
    #[arg(long, default_value_t = 1)]
    pub(crate) batch: usize,
    /// SO_RCVBUF request in bytes (SO_RCVBUFFORCE when root and above net.core.rmem_max).
    #[arg(long)]
    pub(crate) rcvbuf: Option<u64>,
    /// replace: S1 find-and-replace then reply; echo: reply unchanged; sink: no reply.
    #[arg(long, value_enum, default_value = "replace")]
    pub(crate) mode: ModeArg,
    /// Extra busy work per datagram, ns (a slower application).
    #[arg(long, default_value_t = 0)]
    pub(crate) work_ns: u64,
    /// CPUs the server threads may run on, e.g. 1 or 0-1 (like taskset).
    #[arg(long)]
    pub(crate) cpus: Option<String>,
    /// SO_BUSY_POLL in microseconds: busy-poll the device queue before sleeping in a
    /// receive (NAPI devices only; root to raise it).
    #[arg(long)]
    pub(crate) busy_poll: Option<u32>,
    /// UDP_GRO: read datagrams coalesced by GSO senders as one buffer (each still counted
    /// and answered one by one; replies leave as one GSO send).
    #[arg(long)]
    pub(crate) gro: bool,
    /// Scheduling policy: other, fifo:PRIO or rr:PRIO (like chrt).
    #[arg(long, default_value = "other")]
    pub(crate) sched: String,
}

#[derive(Args, Debug, Clone)]
pub(crate) struct LoadFlags {
    /// Mean rate, datagrams per second, or max (as fast as the path allows); default
    /// 10000, or burst / burst-interval when those are given.
    #[arg(long)]
    pub(crate) rate: Option<String>,
    /// Datagram size (UDP payload), bytes; at least 40 to carry tpslab's header.
    #[arg(long, default_value_t = 1024)]
    pub(crate) size: usize,
    /// Measurement window (after warm-up), e.g. 10s, 500ms.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    pub(crate) duration: Duration,
    /// Warm-up excluded from the figures.
    #[arg(long, default_value = "500ms", value_parser = humantime::parse_duration)]
    pub(crate) warmup: Duration,
    /// Datagrams sent back-to-back per burst.
    #[arg(long, default_value_t = 1)]
    pub(crate) burst: u64,
    /// Interval between bursts, e.g. 50ms; the mean rate follows (burst / interval).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub(crate) burst_interval: Option<Duration>,
    /// Send this file's bytes instead of tpslab's header (a real protocol's request).
    #[arg(long)]
    pub(crate) payload_file: Option<PathBuf>,
    /// OFFSET:LEN of a field the server echoes (e.g. 0:2 for the DNS id): the sequence
    /// number is written there to match replies per packet.
    #[arg(long)]
    pub(crate) seq_field: Option<String>,
    /// One-way load: expect no replies.
    #[arg(long)]
    pub(crate) no_replies: bool,
    /// Send with UDP GSO (UDP_SEGMENT): datagrams due together leave in one send (falls
    /// back to plain sends where the kernel refuses).
    #[arg(long)]
    pub(crate) gso: bool,
    /// CPUs the generator's threads may run on, e.g. 0 (default: not pinned).
    #[arg(long)]
    pub(crate) load_cpus: Option<String>,
    /// Wait this long for late replies after the last send.
    #[arg(long, default_value = "500ms", value_parser = humantime::parse_duration)]
    pub(crate) drain: Duration,
}

#[derive(Args, Debug, Clone)]
struct OutputFlags {
    /// Observer sampling interval (1ms..=60s).
    #[arg(long, default_value = "10ms", value_parser = humantime::parse_duration)]
    interval: Duration,
    /// Write the run record (JSON, schema tpslab.run/1) to FILE (- for standard output).
    #[arg(long)]
    json: Option<PathBuf>,
    /// Show the source counter of every figure.
    #[arg(long)]
    explain: bool,
    #[command(flatten)]
    gate: GateFlags,
}

/// Exit codes for CI pipelines: 0 ok; 1 a --fail-on condition met; 2 usage or
/// environment; 3 the run was not valid evidence (with --strict); 130 interrupted.
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct GateFlags {
    /// Exit 1 when the run meets one of these, comma-separated: loss>PCT% (load, run,
    /// diagnose: window loss; ramp: requests failed or timed out), invalid (not valid
    /// evidence: the generator was a bottleneck, no reply at all, a run of a sweep),
    /// errors (send or reply failures, ECONNREFUSED from a closed port included; failed
    /// requests; sweep runs with either), target (tcp: --target-rate not reached).
    #[arg(long, value_name = "CONDITIONS")]
    pub(crate) fail_on: Option<String>,
    /// Exit 3 when the run is not valid evidence (RUN INVALID).
    #[arg(long)]
    pub(crate) strict: bool,
}

impl GateFlags {
    /// The parsed conditions, of those this command can judge (checked before the run).
    pub(crate) fn conditions(&self, allowed: &[&str]) -> Result<Vec<gate::FailOn>> {
        match &self.fail_on {
            None => Ok(vec![]),
            Some(s) => gate::parse(s, allowed).map_err(|e| anyhow!(e)),
        }
    }

    /// The exit code of a run's outcome, with its reasons printed to stderr.
    pub(crate) fn exit(&self, o: &gate::Outcome, allowed: &[&str]) -> Result<ExitCode> {
        let (code, why) = gate::exit_code(o, &self.conditions(allowed)?, self.strict);
        if code != 0 {
            for w in why {
                eprintln!("tpslab: exit {code}: {w}");
            }
        }
        Ok(ExitCode::from(code))
    }
}

/// The exit code of a UDP run record under `gate`.
pub(crate) fn gate_exit(rec: &RunRecord, gate: &GateFlags) -> Result<ExitCode> {
    gate.exit(&gate::udp_outcome(rec), gate::applies::UDP_RUN)
}

#[derive(Args, Debug)]
struct ServeArgs {
    #[command(flatten)]
    server: ServerFlags,
    /// Stop after this long (default: until Ctrl-C/SIGTERM).
    #[arg(long, value_parser = humantime::parse_duration)]
    duration: Option<Duration>,
    /// Write the server's counts (JSON) to FILE on exit.
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(Args, Debug)]
struct LoadUdpArgs {
    /// Server address, HOST:PORT.
    target: String,
    #[command(flatten)]
    load: LoadFlags,
    /// Sender threads (one socket each).
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// PID of the server process: its network namespace, sockets and threads are watched,
    /// and (root, kernel 6.4+) the UDP datagrams its threads read and send are counted
    /// exactly, whatever else uses UDP on the host.
    #[arg(long)]
    pid: Option<u32>,
    #[command(flatten)]
    out: OutputFlags,
}

#[derive(Args, Debug)]
struct RunUdpArgs {
    #[command(flatten)]
    server: ServerFlags,
    #[command(flatten)]
    load: LoadFlags,
    /// Generator sender threads (one socket each); --threads is the server's.
    #[arg(long, default_value_t = 1)]
    load_threads: usize,
    #[command(flatten)]
    out: OutputFlags,
}

#[derive(Args, Debug)]
pub(crate) struct SweepArgs {
    /// A factor and its levels, NAME=L1,L2,... (first level = baseline); repeatable.
    /// Names: rcvbuf, cpus (list or all), sched, threads, batch, rate, burst, work_ns,
    /// size, or a sysctl (net.core.rmem_max, net.core.rmem_default,
    /// net.core.netdev_max_backlog, ...; journaled and restored after every run).
    #[arg(long = "factor", value_name = "NAME=L1,L2,...")]
    pub(crate) factors: Vec<String>,
    /// ofat (default): one factor at a time from the baseline; factorial: every combination.
    #[arg(long)]
    pub(crate) design: Option<String>,
    /// Runs per cell, in randomised order (default 3).
    #[arg(long)]
    pub(crate) repeat: Option<usize>,
    /// What the best cell optimises: loss (default), tps or p99.
    #[arg(long)]
    pub(crate) objective: Option<String>,
    /// A plan file (TOML): design, repeat, objective, server_cmd, [server], [load] and
    /// [[factor]] tables (name, levels); flags given as well override it.
    #[arg(long)]
    pub(crate) plan: Option<PathBuf>,
    /// Run the user's server instead of tpslab's: a shell command with {port}, started
    /// for every run and stopped after it; cpus/sched factors apply to its threads.
    #[arg(long)]
    pub(crate) server_cmd: Option<String>,
    /// Built-in study: s2 (affinity x scheduler on an S2-like consumer).
    #[arg(long)]
    pub(crate) scenario: Option<String>,
    /// Folder for the plan and every run's record.
    #[arg(long, default_value = "tpslab-sweep")]
    pub(crate) out: PathBuf,
    /// Continue the sweep in --out: runs whose record is there are not run again.
    #[arg(long)]
    pub(crate) resume: bool,
    /// Seed of the run order (default: from the clock; kept in the plan).
    #[arg(long)]
    pub(crate) seed: Option<u64>,
    /// Write the analysis (JSON) to FILE.
    #[arg(long)]
    pub(crate) json: Option<PathBuf>,
    /// Write one CSV row per run to FILE.
    #[arg(long)]
    pub(crate) csv: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) gate: GateFlags,
    /// Observer sampling interval (1ms..=60s).
    #[arg(long, default_value = "10ms", value_parser = humantime::parse_duration)]
    pub(crate) interval: Duration,
    #[command(flatten)]
    pub(crate) server: ServerFlags,
    #[command(flatten)]
    pub(crate) load: LoadFlags,
    /// Generator sender threads (one socket each); --threads is the server's.
    #[arg(long, default_value_t = 1)]
    pub(crate) load_threads: usize,
}

#[derive(Args, Debug)]
struct BdpArgs {
    /// Round-trip time, e.g. 30ms.
    #[arg(long, value_parser = humantime::parse_duration)]
    rtt: Duration,
    /// Target rate, e.g. 80mbit, 1gbit, 10mbps (bytes/s).
    #[arg(long)]
    rate: Option<String>,
    /// A buffer (window) size, e.g. 64KiB: the most a flow limited by it can carry.
    #[arg(long)]
    buffer: Option<String>,
}

fn bdp_cmd(a: &BdpArgs) -> Result<ExitCode> {
    use tpslab_analysis::bdp;
    let rtt = a.rtt.as_secs_f64();
    if !(rtt > 0.0 && rtt <= 60.0) {
        bail!(
            "--rtt {}: allowed above 0 up to 60s",
            humantime::format_duration(a.rtt)
        );
    }
    if a.rate.is_none() && a.buffer.is_none() {
        bail!("bdp needs --rate RATE (the buffers it needs) or --buffer SIZE (the rate it allows)");
    }
    let ms = rtt * 1e3;
    if let Some(b) = &a.buffer {
        let bytes = bdp::parse_size(b).map_err(|e| anyhow!("--buffer {e}"))?;
        let c = bdp::window_ceiling_bps(bytes, rtt);
        println!(
            "A window of {bytes} bytes over a {ms:.1} ms RTT carries at most {:.1} Mbit/s ({:.0} KiB/s): window / RTT, whatever the link.",
            c / 1e6,
            c / 8.0 / 1024.0
        );
        println!(
            "As a socket buffer the window differs: as the last value of tcp_rmem ({bytes} bytes used as is) about half to two thirds is advertised, {:.1}-{:.1} Mbit/s; as setsockopt SO_RCVBUF {bytes} the kernel doubles it and advertises about 1 to 1.3 x {bytes}, {:.1}-{:.1} Mbit/s (`tpslab tcp --lab-rtt` measures it).",
            c / 2e6,
            c / 1.5e6,
            c / 1e6,
            c * 1.3 / 1e6
        );
    }
    if let Some(r) = &a.rate {
        let rate = bdp::parse_rate(r).map_err(|e| anyhow!("--rate {e}"))?;
        let p = bdp::buffer_plan(rate, rtt);
        if p.bdp_bytes > bdp::MAX_TCP_WINDOW {
            bail!(
                "--rate {r} over --rtt {}: {} bytes in flight, more than the largest TCP window ({} bytes): use several flows",
                humantime::format_duration(a.rtt),
                p.bdp_bytes,
                bdp::MAX_TCP_WINDOW
            );
        }
        println!(
            "{:.1} Mbit/s over a {ms:.1} ms RTT needs {} bytes in flight (the bandwidth-delay product); the kernel advertises only part of a buffer as window, so give it a {} byte buffer: the last value of tcp_rmem/tcp_wmem, or setsockopt SO_RCVBUF/SO_SNDBUF {} (the kernel doubles what setsockopt asks).",
            rate / 1e6,
            p.bdp_bytes,
            p.buffer_bytes,
            p.buffer_bytes / 2
        );
        let read = |k: &str| tpslab_engine::env::read_sysctl(k);
        let third = |v: &Option<String>| {
            v.as_ref()
                .and_then(|v| v.split_whitespace().nth(2)?.parse::<u64>().ok())
        };
        let (rmem, wmem) = (read("net.ipv4.tcp_rmem"), read("net.ipv4.tcp_wmem"));
        let core = |k: &str| read(k).and_then(|v| v.parse::<u64>().ok());
        let (rmax, wmax) = (core("net.core.rmem_max"), core("net.core.wmem_max"));
        println!("This host:");
        println!(
            "  net.ipv4.tcp_rmem = {} (autotuning may grow a receive buffer to the last value)",
            rmem.clone().unwrap_or("?".into())
        );
        println!(
            "  net.ipv4.tcp_wmem = {}",
            wmem.clone().unwrap_or("?".into())
        );
        println!("  net.core.rmem_max = {}, net.core.wmem_max = {} (caps for applications that set SO_RCVBUF/SO_SNDBUF, which turns autotuning off)",
            rmax.map_or("?".into(), |v| v.to_string()), wmax.map_or("?".into(), |v| v.to_string()));
        let mut lines = vec![];
        let fix3 = |v: &Option<String>| -> Option<String> {
            let parts: Vec<&str> = v.as_ref()?.split_whitespace().collect();
            (parts.len() == 3).then(|| format!("{} {} {}", parts[0], parts[1], p.buffer_bytes))
        };
        if third(&rmem).is_some_and(|m| m < p.buffer_bytes) {
            if let Some(v) = fix3(&rmem) {
                lines.push(("net.ipv4.tcp_rmem", v));
            }
        }
        if third(&wmem).is_some_and(|m| m < p.buffer_bytes) {
            if let Some(v) = fix3(&wmem) {
                lines.push(("net.ipv4.tcp_wmem", v));
            }
        }
        // rmem_max / wmem_max cap what setsockopt asks (before the kernel doubles it).
        let ask = p.buffer_bytes / 2;
        if rmax.is_some_and(|m| m < ask) {
            lines.push(("net.core.rmem_max", ask.to_string()));
        }
        if wmax.is_some_and(|m| m < ask) {
            lines.push(("net.core.wmem_max", ask.to_string()));
        }
        if lines.is_empty() {
            println!("Enough already: autotuning can reach {} bytes; an application that sets its own SO_RCVBUF/SO_SNDBUF must ask for at least {} (doubled by the kernel).", p.buffer_bytes, p.buffer_bytes / 2);
        } else {
            println!("Raise:");
            for (k, v) in &lines {
                println!("  sysctl -w {k}=\"{v}\"");
            }
            println!("  # persist, with the full key names:");
            println!("  cat > /etc/sysctl.d/60-tcp-buffers.conf <<'EOF'");
            for (k, v) in &lines {
                println!("  {k} = {v}");
            }
            println!("  EOF");
        }
        println!("In code that sets its own buffers: setsockopt(fd, SOL_SOCKET, SO_RCVBUF and SO_SNDBUF, {}) before connect/listen (the kernel doubles it).", p.buffer_bytes / 2);
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Args, Debug)]
struct WatchArgs {
    /// Process whose sockets (UDP and TCP, found through its descriptors), threads and
    /// namespace to watch; its threads' UDP reads and sends are counted (root).
    #[arg(long)]
    pid: Option<u32>,
    /// Local UDP port of the socket(s) to watch.
    #[arg(long)]
    port: Option<u16>,
    /// How long to watch.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    duration: Duration,
    /// Sampling interval (1ms..=60s).
    #[arg(long, default_value = "10ms", value_parser = humantime::parse_duration)]
    interval: Duration,
    /// Write the observations (JSON run record) to FILE.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Show the source counter of every figure.
    #[arg(long)]
    explain: bool,
}

/// SIGINT, SIGTERM and SIGHUP set the returned flag (the run ends early, its record is
/// written, host settings are restored); a second signal restores host settings at once
/// and exits with 130.
pub(crate) fn install_signals() -> Result<Arc<AtomicBool>> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let flag = Arc::new(AtomicBool::new(false));
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])?;
    let f = flag.clone();
    std::thread::Builder::new()
        .name("tpslab-signals".into())
        .spawn(move || {
            for _ in signals.forever() {
                if f.swap(true, Relaxed) {
                    let r = tpslab_engine::guard::restore_now();
                    for (k, v) in r.restored {
                        eprintln!("tpslab: restored {k}={v}");
                    }
                    std::process::exit(130);
                }
                eprintln!("tpslab: stopping (the record is still written; again to quit at once)");
            }
        })?;
    Ok(flag)
}

pub(crate) fn resolve(target: &str) -> Result<SocketAddr> {
    let mut addrs = target
        .to_socket_addrs()
        .map_err(|e| anyhow!("target \"{target}\": {e}; allowed HOST:PORT, e.g. 127.0.0.1:9000"))?;
    let addr = addrs
        .next()
        .ok_or_else(|| anyhow!("target \"{target}\" resolves to no address"))?;
    if addr.port() == 0 {
        bail!("target \"{target}\": port 0 is not a port a server listens on; allowed 1..=65535");
    }
    Ok(addr)
}

pub(crate) fn server_config(f: &ServerFlags) -> Result<ServerConfig> {
    let bind: SocketAddr = f.bind.parse().map_err(|_| {
        anyhow!(
            "--bind \"{}\": allowed ADDR:PORT, e.g. 127.0.0.1:9000",
            f.bind
        )
    })?;
    let cpus = match &f.cpus {
        None => vec![],
        Some(s) => parse_cpus("--cpus", s)?,
    };
    let sched: SchedPolicy = f
        .sched
        .parse()
        .map_err(|e: String| anyhow!("--sched: {e}"))?;
    let cfg = ServerConfig {
        bind,
        threads: f.threads,
        batch: f.batch,
        rcvbuf: f.rcvbuf,
        mode: match f.mode {
            ModeArg::Replace => Mode::Replace,
            ModeArg::Echo => Mode::Echo,
            ModeArg::Sink => Mode::Sink,
        },
        work_ns: f.work_ns,
        cpus,
        sched,
        busy_poll_us: f.busy_poll,
        gro: f.gro,
    };
    cfg.validate()?;
    Ok(cfg)
}

/// Parses a CPU list ("0-1,3") or "all" (every online CPU) and checks the CPUs exist.
pub(crate) fn parse_cpus(flag: &str, s: &str) -> Result<Vec<usize>> {
    let ncpu = tpslab_net::online_cpus();
    if s == "all" {
        return Ok((0..ncpu).collect());
    }
    let v = tpslab_proc::pid::parse_cpu_list(s).map_err(|e| anyhow!("{flag} \"{s}\": {e}"))?;
    if let Some(c) = v.iter().find(|&&c| c >= ncpu) {
        bail!(
            "{flag} \"{s}\": CPU {c} does not exist; allowed 0..={} or all",
            ncpu - 1
        );
    }
    Ok(v)
}

/// The load plan from `load`'s flags; `threads_flag` names the generator-threads flag of
/// the calling command (`--threads` for `load`, `--load-threads` for `run`).
pub(crate) fn load_config(
    f: &LoadFlags,
    threads: usize,
    threads_flag: &str,
    target: SocketAddr,
) -> Result<LoadConfig> {
    let given = match f.rate.as_deref() {
        None => None,
        Some(r) => Some(units::parse_pps("--rate", r)?),
    };
    let rate = match (f.burst_interval, given) {
        (Some(iv), given) => {
            if iv.is_zero() {
                bail!("--burst-interval 0: allowed a positive duration, e.g. 50ms");
            }
            let implied = f.burst as f64 / iv.as_secs_f64();
            if !implied.is_finite() || implied > limits::MAX_RATE_PPS {
                bail!(
                    "--burst {} --burst-interval {}: {implied:.0} pps mean; allowed up to {:.0} pps",
                    f.burst,
                    humantime::format_duration(iv),
                    limits::MAX_RATE_PPS
                );
            }
            // A --rate that disagrees with what the bursts imply would be silently replaced.
            // Within half a datagram per second: --rate 3333 agrees with 100 per 30ms.
            if let Some(r) = given.filter(|r| (r - implied).abs() > 0.5f64.max(1e-6 * implied)) {
                bail!(
                    "--rate {} disagrees with --burst {} --burst-interval {} ({} pps mean); give --rate with --burst, or --burst with --burst-interval",
                    if r.is_infinite() { "max".to_string() } else { format!("{r}") },
                    f.burst,
                    humantime::format_duration(iv),
                    if implied.fract() == 0.0 {
                        format!("{implied:.0}")
                    } else {
                        format!("{implied:.3}")
                    }
                );
            }
            implied
        }
        (None, Some(r)) => r,
        (None, None) => 10_000.0,
    };
    let payload = match &f.payload_file {
        None => None,
        Some(p) => Some(read_payload_file(p)?),
    };
    let seq_field = match (&f.seq_field, &payload) {
        (None, _) => None,
        (Some(s), Some(p)) => Some(units::parse_seq_field("--seq-field", s, p.len())?),
        // Refused by the validation below, naming both flags.
        (Some(_), None) => Some((0, 1)),
    };
    let run_id = tpslab_net::mono_ns() ^ ((std::process::id() as u64) << 32);
    let cpus = match &f.load_cpus {
        None => vec![],
        Some(s) => parse_cpus("--load-cpus", s)?,
    };
    let cfg = LoadConfig {
        target,
        rate_pps: rate,
        size_bytes: f.size,
        duration: f.duration,
        warmup: f.warmup,
        burst: f.burst,
        threads,
        payload,
        seq_field,
        expect_replies: !f.no_replies,
        drain: f.drain,
        run_id,
        cpus,
        gso: f.gso,
    };
    cfg.validate().map_err(|e| {
        e.relabel(|l| match l {
            "--load-threads" => threads_flag.to_string(),
            l => l.to_string(),
        })
    })?;
    Ok(cfg)
}

/// Reads a `--payload-file`: a regular file (not a device or pipe, which could be endless)
/// of 1..=65507 bytes (the largest UDP payload), read with that cap.
pub(crate) fn read_payload_file(p: &std::path::Path) -> Result<Vec<u8>> {
    let meta = std::fs::metadata(p).map_err(|e| anyhow!("--payload-file {}: {e}", p.display()))?;
    if !meta.is_file() {
        bail!(
            "--payload-file {}: not a regular file; allowed a file of 1..={MAX_UDP_PAYLOAD} bytes",
            p.display()
        );
    }
    let f = std::fs::File::open(p).map_err(|e| anyhow!("--payload-file {}: {e}", p.display()))?;
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(
        &mut std::io::Read::take(f, MAX_UDP_PAYLOAD as u64 + 1),
        &mut bytes,
    )
    .map_err(|e| anyhow!("--payload-file {}: {e}", p.display()))?;
    if bytes.is_empty() || bytes.len() > MAX_UDP_PAYLOAD {
        bail!(
            "--payload-file {}: {} bytes; allowed 1..={MAX_UDP_PAYLOAD}",
            p.display(),
            if bytes.len() > MAX_UDP_PAYLOAD {
                format!("more than {MAX_UDP_PAYLOAD}")
            } else {
                "0".to_string()
            }
        );
    }
    Ok(bytes)
}

/// Checks a sampling `--interval` against [`limits::SAMPLE_INTERVAL`].
pub(crate) fn check_interval(iv: Duration) -> Result<()> {
    limits::SAMPLE_INTERVAL.check("--interval", iv)?;
    Ok(())
}

/// Whether an output path means standard output.
pub(crate) fn is_stdout(p: &std::path::Path) -> bool {
    p.as_os_str() == "-"
}

/// Checks before a run that `flag`'s output file can be written, so no result is lost at
/// the end: its folder exists and the file can be created (a file created by the check is
/// removed again). `-` (standard output) only where `stdout_ok`.
pub(crate) fn check_output(flag: &str, p: &std::path::Path, stdout_ok: bool) -> Result<()> {
    if is_stdout(p) {
        if stdout_ok {
            return Ok(());
        }
        bail!("{flag} -: standard output is taken by the report here; give a file");
    }
    if p.is_dir() {
        bail!("{flag} {}: a folder; give a file name", p.display());
    }
    if let Some(dir) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
        if !dir.is_dir() {
            bail!(
                "{flag} {}: folder {} does not exist",
                p.display(),
                dir.display()
            );
        }
    }
    match std::fs::symlink_metadata(p) {
        // A symlink, FIFO or device: opening it to test could create a link's target or
        // hand a pipe's reader an early end of file; the write at the end will tell.
        Ok(m) if !m.file_type().is_file() => Ok(()),
        // An existing file: writable? (not truncated by the check)
        Ok(_) => std::fs::OpenOptions::new()
            .write(true)
            .open(p)
            .map(|_| ())
            .map_err(|e| anyhow!("{flag} {}: {e}", p.display())),
        // A new file: created only by the check itself (never someone else's), removed.
        Err(_) => {
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(p)
                .map_err(|e| anyhow!("{flag} {}: {e}", p.display()))?;
            let _ = std::fs::remove_file(p);
            Ok(())
        }
    }
}

/// Writes JSON to `path` (`-`: standard output).
pub(crate) fn write_json(path: &PathBuf, value: &impl serde::Serialize) -> Result<()> {
    if is_stdout(path) {
        let out = std::io::stdout().lock();
        serde_json::to_writer_pretty(out, value).context("writing JSON to standard output")?;
        println!();
        return Ok(());
    }
    let f = std::fs::File::create(path).with_context(|| format!("--json {}", path.display()))?;
    let mut w = std::io::BufWriter::new(f);
    serde_json::to_writer_pretty(&mut w, value)
        .map_err(std::io::Error::from)
        .and_then(|_| std::io::Write::write_all(&mut w, b"\n"))
        .and_then(|_| std::io::Write::flush(&mut w))
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// Writes and prints a run record; the exit code follows `out.gate` (for `watch`, ended
/// by Ctrl-C as a matter of course, `interrupt_is_normal` keeps it 0).
fn finish_record(rec: RunRecord, out: &OutputFlags) -> Result<ExitCode> {
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
    // Write the record first: it is never lost, even if printing fails.
    if let Some(p) = &out.json {
        write_json(p, &record)?;
        if is_stdout(p) {
            // Standard output carries the record alone.
            return exit(rec);
        }
    }
    print_report(&record, out.explain)?;
    if let Some(p) = &out.json {
        println!("record written to {}", p.display());
    }
    exit(rec)
}

/// Prints a record's terminal report on standard output.
pub(crate) fn print_report(rec: &Record, explain: bool) -> Result<()> {
    let mut out = std::io::stdout().lock();
    tpslab_report::term::record(&mut out, rec, explain)
        .context("writing the report to standard output")
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

pub(crate) fn check_pid(pid: u32) -> Result<()> {
    if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
        bail!("--pid {pid}: no such process");
    }
    Ok(())
}

/// Parses the command line and runs it.
pub fn main() -> Result<ExitCode> {
    let cli = Cli::parse();
    // Settings a killed tpslab left changed are restored before anything else runs.
    let rec = tpslab_engine::guard::recover();
    for (k, v) in &rec.restored {
        eprintln!("tpslab: restored {k}={v}, left changed by an interrupted tpslab run");
    }
    for s in &rec.skipped {
        eprintln!("tpslab: host setting from an interrupted run not restored: {s}");
    }
    match cli.cmd {
        Cmd::Serve {
            proto: ServeProto::Udp(a),
        } => {
            let cfg = server_config(&a.server)?;
            if let Some(p) = &a.json {
                check_output("--json", p, false)?;
            }
            let stop = install_signals()?;
            let srv = UdpServer::start(cfg)?;
            println!(
                "tpslab serve udp: listening on {} ({} thread(s), batch {}, SO_RCVBUF granted {} bytes)",
                srv.local_addr(),
                a.server.threads,
                a.server.batch,
                srv.report().rcvbuf_granted_bytes
            );
            let t0 = std::time::Instant::now();
            while !stop.load(Relaxed) && a.duration.is_none_or(|d| t0.elapsed() < d) {
                std::thread::sleep(Duration::from_millis(50));
            }
            let rep = srv.stop();
            if let Some(p) = &a.json {
                write_json(
                    p,
                    &serde_json::json!({ "schema": SERVE_SCHEMA, "server": rep, "elapsed_s": t0.elapsed().as_secs_f64(), "interrupted": stop.load(Relaxed) }),
                )?;
            }
            tpslab_report::term::print_server(
                &mut std::io::stdout().lock(),
                &rep,
                t0.elapsed().as_secs_f64(),
            )?;
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Load {
            proto: LoadProto::Udp(a),
        } => {
            let target = resolve(&a.target)?;
            let load = load_config(&a.load, a.threads, "--threads", target)?;
            check_interval(a.out.interval)?;
            a.out.gate.conditions(gate::applies::UDP_RUN)?;
            if let Some(p) = &a.out.json {
                check_output("--json", p, true)?;
            }
            if let Some(pid) = a.pid {
                check_pid(pid)?;
            }
            let stop = install_signals()?;
            let rec = run_udp(
                UdpRunPlan {
                    server: None,
                    load,
                    interval: a.out.interval,
                    target_pid: a.pid,
                    watch_port: None,
                },
                &stop,
            )?;
            finish_record(rec, &a.out)
        }
        Cmd::Run {
            proto: RunProto::Udp(a),
        } => {
            let mut srv = server_config(&a.server)?;
            if a.load.no_replies {
                srv.mode = Mode::Sink;
            }
            let load = load_config(&a.load, a.load_threads, "--load-threads", srv.bind)?;
            check_interval(a.out.interval)?;
            a.out.gate.conditions(gate::applies::UDP_RUN)?;
            if let Some(p) = &a.out.json {
                check_output("--json", p, true)?;
            }
            let stop = install_signals()?;
            let rec = run_udp(
                UdpRunPlan {
                    server: Some(srv),
                    load,
                    interval: a.out.interval,
                    target_pid: None,
                    watch_port: None,
                },
                &stop,
            )?;
            finish_record(rec, &a.out)
        }
        Cmd::Serve {
            proto: ServeProto::Tcp(a),
        } => crate::tcp::serve(a),
        Cmd::Tcp(a) => crate::tcp::run(*a),
        Cmd::Ramp { proto } => crate::ramp::run(proto),
        Cmd::Diagnose(a) => crate::diagnose::run(a),
        Cmd::Bdp(a) => bdp_cmd(&a),
        Cmd::Report(a) => crate::report_cmd::run(a),
        Cmd::Sweep(a) => crate::sweep::run(*a),
        Cmd::Watch(a) => {
            check_interval(a.interval)?;
            if let Some(p) = &a.json {
                check_output("--json", p, true)?;
            }
            if let Some(pid) = a.pid {
                check_pid(pid)?;
            }
            if a.pid.is_none() && a.port.is_none() {
                bail!("watch needs --pid PID or --port PORT");
            }
            let stop = install_signals()?;
            let t0 = tpslab_net::mono_ns();
            // A process's sockets are found by the inodes of its open descriptors
            // (narrowed to --port when both are given).
            let net_root = a.pid.map_or(PathBuf::from("/proc/self"), |p| {
                PathBuf::from(format!("/proc/{p}"))
            });
            let (udp_inodes, tcp_inodes) = match a.pid {
                Some(pid) => process_sockets(pid, &net_root, a.port)?,
                None => (vec![], vec![]),
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
            });
            if let Some(pid) = a.pid {
                let line = format!(
                    "tpslab watch: process {pid}: following {} UDP socket(s) and {} TCP socket(s){}",
                    udp_inodes.len(),
                    tcp_inodes.len(),
                    a.port.map_or(String::new(), |p| format!(" on port {p}"))
                );
                // Standard output may carry the JSON record alone.
                if a.json.as_deref().is_some_and(is_stdout) {
                    eprintln!("{line}");
                } else {
                    println!("{line}");
                }
            }
            let end = t0 + a.duration.as_nanos() as u64;
            while !stop.load(Relaxed) && tpslab_net::mono_ns() < end {
                std::thread::sleep(Duration::from_millis(100).min(Duration::from_nanos(
                    end.saturating_sub(tpslab_net::mono_ns()),
                )));
            }
            let rep = obs.stop();
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
                        "NO SOCKET FOUND: no UDP socket on port {port} in this network namespace (pass --pid PID for a server in another one); the socket figures above are not observations"
                    ),
                    (None, None) => unreachable!("checked above"),
                });
            }
            let rec = RunRecord {
                tool_version: env!("CARGO_PKG_VERSION").into(),
                argv: std::env::args().collect(),
                elapsed_s: (tpslab_net::mono_ns() - t0) as f64 / 1e9,
                interrupted: stop.load(Relaxed),
                plan: Some(tpslab_plan::udp::RunPlan::Watch(
                    tpslab_plan::udp::WatchPlan {
                        pid: a.pid,
                        port: a.port,
                        interval: a.interval,
                        duration: a.duration,
                    },
                )),
                environment: tpslab_engine::env::environment(),
                observer: Some(rep),
                notes,
                ..Default::default()
            };
            finish_record_as(
                rec,
                &OutputFlags {
                    interval: a.interval,
                    json: a.json,
                    explain: a.explain,
                    gate: GateFlags::default(),
                },
                true,
            )
        }
    }
}
