//! `tpslab serve tcp`: the sink, the source, and the request/response server that
//! `ramp tcp` loads (echo or S1's replace, with CPU work, waiting and a global lock).

use crate::out::install_signals;
use anyhow::{anyhow, bail, Result};
use clap::{Args, ValueEnum};
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;
use tpslab_engine::tcpflow::{SinkConfig, SinkServer};
use tpslab_plan::tcp::parse_buffer;

fn size_flag(flag: &str, v: &Option<String>) -> Result<Option<u64>> {
    Ok(match v {
        Some(s) => Some(parse_buffer(flag, s)?),
        None => None,
    })
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ServeMode {
    /// Read and discard everything.
    Sink,
    /// Write a stream to every connection (for `tpslab tcp --reverse`).
    Source,
    /// tpslab's framed request/response: reply with each request unchanged.
    Echo,
    /// Framed request/response, S1's work: replace every "ping" with "pong".
    Replace,
}

#[derive(Args, Debug)]
pub(crate) struct ServeTcpArgs {
    /// Address to listen on, ADDR:PORT.
    #[arg(long, default_value = "127.0.0.1:5001")]
    bind: String,
    /// What to do with the bytes.
    #[arg(long, value_enum, default_value_t = ServeMode::Sink)]
    pub(crate) mode: ServeMode,
    /// SO_RCVBUF of each connection, e.g. 64KiB (default: autotuning; sink only).
    #[arg(long)]
    rcvbuf: Option<String>,
    /// SO_SNDBUF of each connection, e.g. 64KiB (default: autotuning; source only).
    #[arg(long)]
    sndbuf: Option<String>,
    /// Echo/replace: CPU work per request (busy loop, in parallel), e.g. 200us.
    #[arg(long, value_parser = humantime::parse_duration, conflicts_with = "work_ns")]
    work: Option<Duration>,
    /// The same in plain nanoseconds, or a duration (the previous name).
    #[arg(long, hide = true, value_parser = crate::flags::duration_or_ns)]
    work_ns: Option<Duration>,
    /// Echo/replace: waiting per request (a sleep, like a round trip to a database),
    /// e.g. 10ms; under one process-wide lock with --serialize.
    #[arg(long, value_parser = humantime::parse_duration, conflicts_with = "serial_ns")]
    serial: Option<Duration>,
    /// The same in plain nanoseconds, or a duration (the previous name).
    #[arg(long, hide = true, value_parser = crate::flags::duration_or_ns)]
    serial_ns: Option<Duration>,
    /// Echo/replace: run the --serial part of every request under one global lock
    /// (S3's SELECT ... FOR UPDATE in miniature): TPS cannot pass 1 / serial.
    #[arg(long)]
    serialize: bool,
    /// Echo/replace: 0 = one thread per connection; N = N worker threads sharing all
    /// connections through epoll (a request being worked on holds up its worker's
    /// other connections).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Stop after this long (default: until Ctrl-C).
    #[arg(long, value_parser = humantime::parse_duration)]
    duration: Option<Duration>,
}

/// `tpslab serve tcp`.
pub(crate) fn serve(a: ServeTcpArgs) -> Result<ExitCode> {
    // One descriptor per connection: a ramp to thousands of users must not hit EMFILE.
    tpslab_net::raise_nofile();
    let listen: SocketAddr = a.bind.parse().map_err(|_| {
        anyhow!(
            "--bind \"{}\": allowed ADDR:PORT, e.g. 127.0.0.1:5001",
            a.bind
        )
    })?;
    let rcvbuf = size_flag("--rcvbuf", &a.rcvbuf)?;
    let sndbuf = size_flag("--sndbuf", &a.sndbuf)?;
    if !matches!(a.mode, ServeMode::Sink | ServeMode::Source) {
        if a.sndbuf.is_some() {
            bail!("--sndbuf applies to --mode source");
        }
        return serve_rr(a, listen);
    }
    let source = a.mode == ServeMode::Source;
    if source && rcvbuf.is_some() {
        bail!("--rcvbuf applies to --mode sink");
    }
    if !source && sndbuf.is_some() {
        bail!("--sndbuf applies to --mode source");
    }
    for (flag, set) in [
        (
            "--work",
            !a.work.or(a.work_ns).unwrap_or_default().is_zero(),
        ),
        (
            "--serial",
            !a.serial.or(a.serial_ns).unwrap_or_default().is_zero(),
        ),
        ("--serialize", a.serialize),
        ("--threads", a.threads != 0),
    ] {
        if set {
            bail!("{flag} applies to --mode echo or replace, not sink or source");
        }
    }
    let stop = install_signals()?;
    let srv = SinkServer::start(SinkConfig {
        listen,
        rcvbuf,
        source,
        sndbuf,
    })?;
    if source {
        println!(
            "tpslab serve tcp: source on {} (SO_SNDBUF {})",
            srv.local_addr(),
            sndbuf.map_or("autotuned by net.ipv4.tcp_wmem".into(), |b| format!(
                "{b} asked"
            ))
        );
    } else {
        println!(
            "tpslab serve tcp: sink on {} (SO_RCVBUF {})",
            srv.local_addr(),
            match rcvbuf {
                Some(r) => format!("{r} asked, {} granted", srv.rcvbuf_granted),
                None => format!(
                    "{} at start, autotuned by net.ipv4.tcp_rmem",
                    srv.rcvbuf_granted
                ),
            }
        );
    }
    let t0 = std::time::Instant::now();
    while !stop.load(Relaxed) && a.duration.is_none_or(|d| t0.elapsed() < d) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let conns = srv.connections();
    let bytes = srv.stop();
    let s = t0.elapsed().as_secs_f64();
    println!(
        "tpslab serve tcp: {conns} connection(s), {bytes} bytes {} in {s:.1} s ({:.1} Mbit/s on average)",
        if source { "written" } else { "read" },
        bytes as f64 * 8.0 / s / 1e6
    );
    Ok(ExitCode::SUCCESS)
}

fn serve_rr(a: ServeTcpArgs, listen: SocketAddr) -> Result<ExitCode> {
    use tpslab_engine::rr::{RrConfig, RrMode, RrServer};
    if a.rcvbuf.is_some() {
        bail!("--rcvbuf applies to --mode sink");
    }
    let work = a.work.or(a.work_ns).unwrap_or_default();
    let serial = a.serial.or(a.serial_ns).unwrap_or_default();
    tpslab_plan::limits::WORK.check("--work", work)?;
    tpslab_plan::limits::SERIAL.check("--serial", serial)?;
    if a.serialize && serial.is_zero() {
        bail!("--serialize needs --serial DURATION (the part of each request run under the lock)");
    }
    let cfg = RrConfig {
        listen,
        mode: if a.mode == ServeMode::Echo {
            RrMode::Echo
        } else {
            RrMode::Replace
        },
        work_ns: work.as_nanos() as u64,
        serial_ns: serial.as_nanos() as u64,
        serialize: a.serialize,
        threads: a.threads,
    };
    if a.threads > 1024 {
        bail!(
            "--threads {}: allowed 0 (one per connection) to 1024",
            a.threads
        );
    }
    let stop = install_signals()?;
    let srv = RrServer::start(cfg)?;
    println!(
        "tpslab serve tcp: {:?} on {} (length-framed requests; work {:?} per request, then {:?} waiting{}); {}",
        a.mode,
        srv.local_addr(),
        work,
        serial,
        if a.serialize { " under one global lock" } else { "" },
        if a.threads == 0 {
            "thread per connection".to_string()
        } else {
            format!("{} epoll worker(s) sharing the connections", a.threads)
        }
    );
    let t0 = std::time::Instant::now();
    while !stop.load(Relaxed) && a.duration.is_none_or(|d| t0.elapsed() < d) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let r = srv.stop();
    let s = t0.elapsed().as_secs_f64();
    println!(
        "tpslab serve tcp: {} connection(s), {} requests answered in {s:.1} s ({:.1} TPS on average), {} connection errors",
        r.connections,
        r.requests,
        r.requests as f64 / s,
        r.errors
    );
    Ok(ExitCode::SUCCESS)
}
