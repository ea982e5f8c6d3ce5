//! `tpslab tcp` (a bulk flow with TCP_INFO sampled, and which limit held it) and
//! `tpslab serve tcp` (the sink).

use crate::flags;
use crate::out::{self, install_signals, resolve, write_json};
use anyhow::{anyhow, bail, Result};
use clap::{Args, ValueEnum};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;
use tpslab_analysis::bdp;
use tpslab_analysis::gate::applies;
use tpslab_analysis::tcp::{analyse, flow_outcome, verdict, FlowAnalysis, Limit, TcpSample};
use tpslab_engine::link::LinkConfig;
use tpslab_engine::tcpflow::{self, FlowPlan, FlowRecord, LabRecord, SinkConfig, SinkServer};
use tpslab_report::term::table;

/// JSON schema of `tpslab tcp --json`.
pub const TCP_SCHEMA: &str = "tpslab.tcp/1";

#[derive(Args, Debug)]
pub(crate) struct TcpArgs {
    /// The sink, HOST:PORT (`tpslab serve tcp` or anything that reads and discards).
    /// Leave out with --lab-rtt.
    target: Option<String>,
    /// How long to send.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    duration: Duration,
    /// TCP_INFO sampling interval (1ms..=60s; at most 360000 samples over --duration).
    #[arg(long, default_value = "100ms", value_parser = humantime::parse_duration)]
    interval: Duration,
    /// Leave the first part of the flow (slow start) out of the analysis.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    skip: Duration,
    /// The sender's SO_SNDBUF, e.g. 64KiB (the kernel doubles it; default: autotuning by
    /// net.ipv4.tcp_wmem).
    #[arg(long)]
    sndbuf: Option<String>,
    /// Bytes per write() call.
    #[arg(long, default_value = "128KiB")]
    write_size: String,
    /// Receive instead of send: TARGET is a source (e.g. `tpslab serve tcp --mode
    /// source`); this side's receive window is judged from its own TCP_INFO.
    #[arg(long)]
    reverse: bool,
    /// This side's SO_RCVBUF with --reverse, e.g. 64KiB (default: autotuning).
    #[arg(long)]
    rcvbuf: Option<String>,
    /// Watch the established TCP flows of this process instead (no TARGET): its
    /// TCP_INFO through sock_diag, in its network namespace, as `ss -tmi` shows it.
    #[arg(long)]
    watch_pid: Option<u32>,
    /// Watch the established TCP flows with this port at either end (with or without
    /// --watch-pid).
    #[arg(long)]
    watch_port: Option<u16>,
    /// The rate the flow should reach, e.g. 80mbit: the buffers it needs are computed
    /// from the measured RTT (and, in the lab, tried in a second run).
    #[arg(long)]
    target_rate: Option<String>,
    #[command(flatten)]
    gate: flags::GateFlags,
    /// Lab: no TARGET; run sender and sink in two new network namespaces joined by
    /// tpslab's user-space delay line with this RTT (e.g. 30ms). Needs root.
    #[arg(long, value_parser = humantime::parse_duration)]
    lab_rtt: Option<Duration>,
    /// Lab: the link's rate each way, e.g. 622mbit (default: as fast as the delay line
    /// forwards).
    #[arg(long)]
    lab_rate: Option<String>,
    /// Lab: share of packets lost each way, e.g. 0.1% or 0.001.
    #[arg(long, default_value = "0")]
    lab_loss: String,
    /// Lab: packets the link queues before tail drop.
    #[arg(long, default_value_t = 1000)]
    lab_queue: usize,
    /// Lab: the sink's SO_RCVBUF, e.g. 64KiB (default: autotuning by net.ipv4.tcp_rmem
    /// of the lab namespace, which starts at the kernel's defaults).
    #[arg(long)]
    sink_rcvbuf: Option<String>,
    /// Lab with --target-rate: do not re-run with the recommended buffers.
    #[arg(long)]
    no_verify: bool,
    /// Write the samples, the analysis and the verdict (JSON, schema tpslab.tcp/1).
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TcpMode {
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
    #[arg(long, value_enum, default_value_t = TcpMode::Sink)]
    pub(crate) mode: TcpMode,
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

fn size_flag(flag: &str, v: &Option<String>) -> Result<Option<u64>> {
    let Some(s) = v else { return Ok(None) };
    let b = bdp::parse_size(s).map_err(|e| anyhow!("{flag} {e}"))?;
    if !(1024..=(i32::MAX as u64 / 2)).contains(&b) {
        bail!("{flag} {s}: allowed 1KiB to 1023MiB");
    }
    Ok(Some(b))
}

fn parse_loss(s: &str) -> Result<f64> {
    let bad = || {
        anyhow!("--lab-loss {s}: allowed a share from 0 up to (not including) 1, or a percentage such as 0.1%")
    };
    let v = match s.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map_err(|_| bad())? / 100.0,
        None => s.trim().parse::<f64>().map_err(|_| bad())?,
    };
    if !(0.0..1.0).contains(&v) {
        return Err(bad());
    }
    Ok(v)
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
    if !matches!(a.mode, TcpMode::Sink | TcpMode::Source) {
        if a.sndbuf.is_some() {
            bail!("--sndbuf applies to --mode source");
        }
        return serve_rr(a, listen);
    }
    let source = a.mode == TcpMode::Source;
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
        mode: if a.mode == TcpMode::Echo {
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

/// One run's result, as written to JSON.
#[derive(serde::Serialize)]
struct RunOut<'a> {
    flow: &'a FlowRecord,
    lab: Option<LabSummary>,
    analysis: Option<FlowAnalysis>,
    verdict: Option<String>,
}

#[derive(serde::Serialize)]
struct LabSummary {
    link: LinkConfig,
    link_stats: [tpslab_engine::link::DirStats; 2],
    sink_rcvbuf: Option<u64>,
    sink_rcvbuf_granted: u64,
    sink_bytes: u64,
}

fn lab_summary(r: &LabRecord) -> LabSummary {
    LabSummary {
        link: r.link,
        link_stats: r.link_stats,
        sink_rcvbuf: r.sink_rcvbuf,
        sink_rcvbuf_granted: r.sink_rcvbuf_granted,
        sink_bytes: r.sink_bytes,
    }
}

fn mbit(bps: f64) -> String {
    format!("{:.1}", bps / 1e6)
}

fn describe_buf(asked: Option<u64>, granted: u64) -> String {
    match asked {
        Some(a) => format!("{a} (granted {granted})"),
        None => format!("autotuned ({granted} at start)"),
    }
}

fn print_run(
    title: &str,
    flow: &FlowRecord,
    a: Option<&FlowAnalysis>,
    skip_ns: u64,
    target_bps: Option<f64>,
) {
    if !title.is_empty() {
        println!("{title}");
    }
    let Some(a) = a else {
        println!(
            "  too short to analyse: {} samples after --skip; lengthen --duration",
            flow.samples.iter().filter(|s| s.t_ns >= skip_ns).count()
        );
        return;
    };
    match target_bps {
        Some(t) if a.throughput_bps >= t => println!(
            "VERDICT: {} Mbit/s meets the {} Mbit/s target. What holds it now: {}",
            mbit(a.throughput_bps),
            mbit(t),
            verdict(a)
        ),
        Some(t) => println!(
            "VERDICT: {} Mbit/s, short of the {} Mbit/s target: {}",
            mbit(a.throughput_bps),
            mbit(t),
            verdict(a)
        ),
        None => println!("VERDICT: {}", verdict(a)),
    }
    // Timeline, about ten rows.
    let s: Vec<&TcpSample> = flow.samples.iter().collect();
    let step = (s.len() / 10).max(1);
    let mut t = table(&[
        "t (s)",
        "Mbit/s",
        "RTT ms",
        "cwnd KiB",
        "peer window KiB",
        "in flight KiB",
        "retrans",
        "limit",
    ]);
    let mut i = 0;
    while i + step < s.len() {
        let (p, c) = (s[i], s[i + step]);
        let dt = (c.t_ns - p.t_ns) as f64 / 1e9;
        let lim = tpslab_analysis::tcp::classify(s[i + step - 1], c, Some(flow.sndbuf_granted));
        t.add_row(vec![
            format!("{:.1}", c.t_ns as f64 / 1e9),
            mbit(c.bytes_acked.saturating_sub(p.bytes_acked) as f64 * 8.0 / dt),
            format!("{:.1}", c.rtt_us as f64 / 1e3),
            format!("{:.0}", c.cwnd_segs as f64 * c.mss as f64 / 1024.0),
            format!("{:.0}", c.peer_window_bytes as f64 / 1024.0),
            format!("{:.0}", c.in_flight_bytes as f64 / 1024.0),
            c.retrans_segs.saturating_sub(p.retrans_segs).to_string(),
            match lim {
                Limit::ReceiveWindow => "rwnd",
                Limit::SendBuffer => "sndbuf",
                Limit::CongestionWindow => "cwnd",
                Limit::Application => "app",
            }
            .into(),
        ]);
        i += step;
    }
    println!("{t}");
    let mut t = table(&["limit", "share of time", "kernel chronograph"]);
    let names = [
        Limit::ReceiveWindow,
        Limit::SendBuffer,
        Limit::CongestionWindow,
        Limit::Application,
    ];
    for (k, l) in names.iter().enumerate() {
        t.add_row(vec![
            l.name().to_string(),
            format!("{:.1} %", a.shares[k] * 100.0),
            a.kernel_chronos
                .map_or("n/a".into(), |c| format!("{:.1} %", c[k] * 100.0)),
        ]);
    }
    println!("{t}");
    println!(
        "  {} Mbit/s: {} bytes acknowledged in {:.2} s (after the first {:.1} s); RTT mean {:.2} ms, min {:.2} ms; peer window mean {:.0} B; in flight mean {:.0} B; cwnd mean {:.0} B; {} bytes retransmitted",
        mbit(a.throughput_bps),
        a.bytes,
        a.seconds,
        skip_ns as f64 / 1e9,
        a.rtt_mean_us / 1e3,
        a.min_rtt_us as f64 / 1e3,
        a.peer_window_mean_bytes,
        a.in_flight_mean_bytes,
        a.cwnd_mean_bytes,
        a.bytes_retrans
    );
    println!(
        "  ceilings: peer window / RTT = {} Mbit/s; bytes in flight / RTT = {} Mbit/s",
        mbit(a.window_ceiling_bps),
        mbit(a.flight_rate_bps)
    );
    println!("  sources: TCP_INFO of the sending socket every {:.0} ms (tcpi_bytes_acked, tcpi_rtt, tcpi_snd_cwnd x tcpi_snd_mss, tcpi_snd_wnd, tcpi_unacked x tcpi_snd_mss, tcpi_busy_time / tcpi_rwnd_limited / tcpi_sndbuf_limited)",
        flow.plan.interval_ns as f64 / 1e6);
    if let Some(e) = &flow.error {
        println!("  the flow ended early: {e}");
    }
    if flow.interrupted {
        println!("  interrupted before its duration");
    }
}

/// `tpslab tcp`.
pub(crate) fn run(a: TcpArgs) -> Result<ExitCode> {
    if let Some(p) = &a.json {
        out::check_output("--json", p, false)?;
    }
    a.gate.conditions(applies::TCP)?;
    tpslab_plan::limits::TCP_DURATION.check("--duration", a.duration)?;
    tpslab_plan::limits::SAMPLE_INTERVAL.check("--interval", a.interval)?;
    // Every TCP_INFO sample is kept for the analysis and the record.
    tpslab_plan::limits::check_kept_samples(a.duration, a.interval)?;
    if a.skip + 2 * a.interval >= a.duration {
        bail!(
            "--skip {} leaves less than two samples of --duration {}: shorten --skip or lengthen --duration",
            humantime::format_duration(a.skip),
            humantime::format_duration(a.duration)
        );
    }
    let sndbuf = size_flag("--sndbuf", &a.sndbuf)?;
    let write_bytes = bdp::parse_size(&a.write_size).map_err(|e| anyhow!("--write-size {e}"))?;
    if write_bytes > 16 << 20 {
        bail!("--write-size {}: allowed 1 byte to 16MiB", a.write_size);
    }
    let target_rate = match &a.target_rate {
        Some(r) => Some(bdp::parse_rate(r).map_err(|e| anyhow!("--target-rate {e}"))?),
        None => None,
    };
    let rcvbuf = size_flag("--rcvbuf", &a.rcvbuf)?;
    let plan = |target: SocketAddr, sndbuf: Option<u64>| FlowPlan {
        target,
        duration_ns: a.duration.as_nanos() as u64,
        interval_ns: a.interval.as_nanos() as u64,
        sndbuf,
        write_bytes: write_bytes as usize,
        reverse: a.reverse,
        rcvbuf,
    };
    let skip_ns = a.skip.as_nanos() as u64;
    let lab_only = [
        ("--lab-rate", a.lab_rate.is_some()),
        ("--sink-rcvbuf", a.sink_rcvbuf.is_some()),
        ("--lab-loss", a.lab_loss != "0"),
        ("--lab-queue", a.lab_queue != 1000),
        ("--no-verify", a.no_verify),
    ];
    if a.watch_pid.is_some() || a.watch_port.is_some() {
        return watch(&a, skip_ns);
    }
    let Some(rtt) = a.lab_rtt else {
        let Some(t) = &a.target else {
            bail!("tcp needs TARGET (HOST:PORT of a sink) or --lab-rtt RTT (a lab between two namespaces)");
        };
        if let Some((f, _)) = lab_only.iter().find(|x| x.1) {
            bail!("{f} applies only with --lab-rtt");
        }
        let target = resolve(t)?;
        if a.reverse {
            return reverse(&a, plan(target, None), skip_ns);
        }
        if a.rcvbuf.is_some() {
            bail!("--rcvbuf applies with --reverse (this side receiving); the sink's buffer is set on the sink");
        }
        let stop = install_signals()?;
        let t0 = tpslab_net::mono_ns();
        let s = tcpflow::connect(target, sndbuf, None, Duration::from_secs(5))?;
        let connect_ns = tpslab_net::mono_ns() - t0;
        let flow = tcpflow::run_flow(s, plan(target, sndbuf), connect_ns, &stop)?;
        let an = analyse(&flow.samples, skip_ns, Some(flow.sndbuf_granted));
        if let Some(p) = &a.json {
            write_json(
                p,
                &serde_json::json!({"schema": TCP_SCHEMA, "runs": [RunOut { flow: &flow, lab: None, verdict: an.as_ref().map(verdict), analysis: an.clone() }]}),
            )?;
        }
        println!(
            "tpslab tcp: {} s to {target}; SO_SNDBUF {}",
            a.duration.as_secs_f64(),
            describe_buf(sndbuf, flow.sndbuf_granted)
        );
        print_run("", &flow, an.as_ref(), skip_ns, target_rate);
        if let (Some(r), Some(an)) = (target_rate, &an) {
            if an.throughput_bps < r {
                recommend(r, an);
            }
        }
        return a.gate.exit(
            &flow_outcome(flow.interrupted, an.as_ref(), target_rate),
            applies::TCP,
        );
    };
    if a.target.is_some() {
        bail!("give TARGET or --lab-rtt, not both: the lab runs its own sink");
    }
    if a.reverse || a.rcvbuf.is_some() {
        bail!("--reverse and --rcvbuf apply with a TARGET, not in the lab yet");
    }
    if !(Duration::from_millis(1)..=Duration::from_secs(10)).contains(&rtt) {
        bail!(
            "--lab-rtt {}: allowed 1ms to 10s",
            humantime::format_duration(rtt)
        );
    }
    let link = LinkConfig {
        delay_ns: rtt.as_nanos() as u64 / 2,
        rate_bps: match &a.lab_rate {
            Some(r) => Some(bdp::parse_rate(r).map_err(|e| anyhow!("--lab-rate {e}"))?),
            None => None,
        },
        loss: parse_loss(&a.lab_loss)?,
        queue_packets: a.lab_queue,
        ..Default::default()
    };
    link.check()
        .map_err(|e| anyhow!("lab link: {e} (--lab-rate, --lab-queue)"))?;
    let sink_rcvbuf = size_flag("--sink-rcvbuf", &a.sink_rcvbuf)?;
    let stop = install_signals()?;
    let port: SocketAddr = SocketAddr::from(([0, 0, 0, 0], 5001));
    let lab = |snd: Option<u64>, rcv: Option<u64>| -> Result<LabRecord> {
        tcpflow::run_lab_flow(link, rcv, plan(port, snd), &stop).map_err(|e| {
            if e.io_kind() == Some(std::io::ErrorKind::PermissionDenied) {
                anyhow!("tcp --lab-rtt needs root (network namespaces and TUN devices): {e}")
            } else {
                anyhow!("{e}")
            }
        })
    };
    let link_text = format!(
        "RTT {} ms, rate {}, loss {} %, queue {} packets",
        rtt.as_secs_f64() * 1e3,
        link.rate_bps
            .map_or("unlimited".into(), |r| format!("{} Mbit/s", mbit(r))),
        link.loss * 100.0,
        link.queue_packets
    );
    let before = lab(sndbuf, sink_rcvbuf)?;
    let an = analyse(
        &before.flow.samples,
        skip_ns,
        Some(before.flow.sndbuf_granted),
    );
    let mut runs = vec![RunOut {
        flow: &before.flow,
        lab: Some(lab_summary(&before)),
        verdict: an.as_ref().map(verdict),
        analysis: an.clone(),
    }];
    println!(
        "tpslab tcp: lab between two network namespaces over tpslab's delay line ({link_text}); {} s; sender SO_SNDBUF {}, sink SO_RCVBUF {}",
        a.duration.as_secs_f64(),
        describe_buf(sndbuf, before.flow.sndbuf_granted),
        describe_buf(sink_rcvbuf, before.sink_rcvbuf_granted)
    );
    print_lab_line(&before);
    if let Some(an) = &an {
        print_window_arithmetic(sink_rcvbuf, &before, an, rtt);
    }
    print_run("", &before.flow, an.as_ref(), skip_ns, target_rate);
    let mut after = None;
    let short = target_rate
        .zip(an.as_ref())
        .filter(|(r, an)| an.throughput_bps < *r);
    if let Some((r, an)) = short {
        let buf = recommend(r, an);
        let buffer_bound = matches!(an.held_by, Limit::ReceiveWindow | Limit::SendBuffer);
        if !a.no_verify && !stop.load(Relaxed) && buffer_bound && an.throughput_bps < r {
            println!();
            let rec = lab(Some(buf), Some(buf))?;
            after = Some(rec);
        }
    }
    if let Some(rec) = &after {
        let an2 = analyse(&rec.flow.samples, skip_ns, Some(rec.flow.sndbuf_granted));
        print_run(
            &format!(
                "AFTER: the same lab with both buffers at the recommended size (sender SO_SNDBUF {}, sink SO_RCVBUF {})",
                describe_buf(rec.flow.plan.sndbuf, rec.flow.sndbuf_granted),
                describe_buf(rec.sink_rcvbuf, rec.sink_rcvbuf_granted)
            ),
            &rec.flow,
            an2.as_ref(),
            skip_ns,
            target_rate,
        );
        print_lab_line(rec);
        if let (Some(b), Some(x)) = (&an, &an2) {
            let mut t = table(&[
                "",
                "Mbit/s",
                "RTT ms",
                "peer window KiB",
                "in flight KiB",
                "held by",
            ]);
            for (name, y) in [("before", b), ("after", x)] {
                t.add_row(vec![
                    name.to_string(),
                    mbit(y.throughput_bps),
                    format!("{:.1}", y.rtt_mean_us / 1e3),
                    format!("{:.0}", y.peer_window_mean_bytes / 1024.0),
                    format!("{:.0}", y.in_flight_mean_bytes / 1024.0),
                    y.held_by.name().to_string(),
                ]);
            }
            println!("{t}");
            if let Some(r) = target_rate {
                println!(
                    "  target {} Mbit/s: {}",
                    mbit(r),
                    if x.throughput_bps >= r {
                        "reached"
                    } else {
                        "NOT reached"
                    }
                );
            }
        }
        runs.push(RunOut {
            flow: &rec.flow,
            lab: Some(lab_summary(rec)),
            verdict: an2.as_ref().map(verdict),
            analysis: an2,
        });
    }
    if let Some(p) = &a.json {
        write_json(p, &serde_json::json!({"schema": TCP_SCHEMA, "runs": runs}))?;
    }
    // The gate judges the first run: the buffers as given (the second run shows the fix).
    a.gate.exit(
        &flow_outcome(
            before.flow.interrupted || stop.load(Relaxed),
            an.as_ref(),
            target_rate,
        ),
        applies::TCP,
    )
}

/// `tpslab tcp TARGET --reverse`: receive from a source, judge this side's window.
fn reverse(a: &TcpArgs, plan: FlowPlan, skip_ns: u64) -> Result<ExitCode> {
    use tpslab_analysis::tcp::{analyse_receiver, verdict_receiver};
    if a.sndbuf.is_some() {
        bail!("--sndbuf is the sender's: with --reverse the sender is the source (tpslab serve tcp --mode source --sndbuf SIZE)");
    }
    if a.target_rate.is_some() {
        bail!("--target-rate applies to sending; with --reverse only this side's receive window is judged");
    }
    if a.gate
        .conditions(applies::TCP)?
        .contains(&tpslab_analysis::gate::FailOn::Target)
    {
        bail!("--fail-on target: with --reverse no target rate is judged; allowed invalid");
    }
    let stop = install_signals()?;
    let t0 = tpslab_net::mono_ns();
    let s = tcpflow::connect(plan.target, None, plan.rcvbuf, Duration::from_secs(5))?;
    let connect_ns = tpslab_net::mono_ns() - t0;
    let flow = tcpflow::run_flow(s, plan, connect_ns, &stop)?;
    let an = analyse_receiver(&flow.samples, skip_ns);
    if let Some(p) = &a.json {
        write_json(
            p,
            &serde_json::json!({"schema": TCP_SCHEMA, "runs": [{"flow": &flow, "receiver_analysis": &an, "verdict": an.as_ref().map(verdict_receiver)}]}),
        )?;
    }
    println!(
        "tpslab tcp --reverse: {} s from {}; this side's SO_RCVBUF {}",
        a.duration.as_secs_f64(),
        plan.target,
        describe_buf(plan.rcvbuf, flow.rcvbuf_granted)
    );
    let outcome = tpslab_analysis::gate::Outcome {
        interrupted: flow.interrupted,
        invalid: match &an {
            None => {
                vec!["too few samples after --skip, or no tcpi_rcv_wnd from this kernel".into()]
            }
            Some(_) => vec![],
        },
        ..Default::default()
    };
    let Some(an) = an else {
        println!("  too short to analyse, or this kernel does not report the advertised window (tcpi_rcv_wnd)");
        return a.gate.exit(&outcome, applies::TCP);
    };
    println!("VERDICT: {}", verdict_receiver(&an));
    let s = &flow.samples;
    let step = (s.len() / 10).max(1);
    let mut t = table(&[
        "t (s)",
        "Mbit/s",
        "receiver RTT ms",
        "advertised window KiB",
    ]);
    let mut i = 0;
    while i + step < s.len() {
        let (p, c) = (&s[i], &s[i + step]);
        let dt = (c.t_ns - p.t_ns) as f64 / 1e9;
        t.add_row(vec![
            format!("{:.1}", c.t_ns as f64 / 1e9),
            mbit(c.bytes_received.saturating_sub(p.bytes_received) as f64 * 8.0 / dt),
            format!("{:.1}", c.rcv_rtt_us as f64 / 1e3),
            format!("{:.0}", c.rcv_wnd_bytes as f64 / 1024.0),
        ]);
        i += step;
    }
    println!("{t}");
    println!(
        "  {} Mbit/s: {} bytes received in {:.2} s (after the first {:.1} s); receiver RTT mean {:.2} ms; advertised window mean {:.0} B; window / RTT = {} Mbit/s",
        mbit(an.throughput_bps),
        an.bytes,
        an.seconds,
        skip_ns as f64 / 1e9,
        an.rcv_rtt_mean_us / 1e3,
        an.rcv_wnd_mean_bytes,
        an.window_ceiling_bps.map_or("unknown".to_string(), mbit)
    );
    println!("  sources: TCP_INFO of the receiving socket (tcpi_bytes_received, tcpi_rcv_rtt, tcpi_rcv_wnd); the sender's limits are not visible from here");
    if let Some(e) = &flow.error {
        println!("  the flow ended early: {e}");
    }
    a.gate.exit(&outcome, applies::TCP)
}

/// `tpslab tcp --watch-pid PID | --watch-port PORT`: another process's flows.
fn watch(a: &TcpArgs, skip_ns: u64) -> Result<ExitCode> {
    use tpslab_analysis::tcp::{analyse_receiver, verdict_receiver};
    if a.target.is_some() || a.lab_rtt.is_some() {
        bail!("--watch-pid/--watch-port watch existing flows: leave out TARGET and --lab-rtt");
    }
    for (flag, set) in [
        ("--sndbuf", a.sndbuf.is_some()),
        ("--rcvbuf", a.rcvbuf.is_some()),
        ("--reverse", a.reverse),
        ("--target-rate", a.target_rate.is_some()),
        ("--lab-rate", a.lab_rate.is_some()),
        ("--sink-rcvbuf", a.sink_rcvbuf.is_some()),
        ("--lab-loss", a.lab_loss != "0"),
        ("--lab-queue", a.lab_queue != 1000),
        ("--no-verify", a.no_verify),
        ("--fail-on", a.gate.fail_on.is_some()),
        ("--strict", a.gate.strict),
        ("--write-size", a.write_size != "128KiB"),
    ] {
        if set {
            bail!("{flag} does not apply when watching flows of another process");
        }
    }
    if let Some(p) = a.watch_pid {
        if !std::path::Path::new(&format!("/proc/{p}")).exists() {
            bail!("--watch-pid {p}: no such process");
        }
    }
    let stop = install_signals()?;
    let flows = tcpflow::watch_flows(
        a.watch_pid,
        a.watch_port,
        a.duration.as_nanos() as u64,
        a.interval.as_nanos() as u64,
        &stop,
    )?;
    let what = match (a.watch_pid, a.watch_port) {
        (Some(p), Some(port)) => format!("PID {p}, port {port}"),
        (Some(p), None) => format!("PID {p}"),
        (None, Some(port)) => format!("port {port}"),
        (None, None) => unreachable!(),
    };
    println!(
        "tpslab tcp --watch: {} established flow(s) of {what} over {:.1} s, TCP_INFO every {:.0} ms through sock_diag (INET_DIAG_INFO, INET_DIAG_SKMEMINFO)",
        flows.len(),
        a.duration.as_secs_f64(),
        a.interval.as_secs_f64() * 1e3
    );
    let mut t = table(&[
        "flow",
        "direction",
        "Mbit/s",
        "RTT ms",
        "SO_SNDBUF",
        "SO_RCVBUF",
    ]);
    let mut verdicts = vec![];
    let mut out = vec![];
    let mut idle = 0;
    for f in &flows {
        let (first, last) = match (f.samples.first(), f.samples.last()) {
            (Some(x), Some(y)) => (x, y),
            _ => continue,
        };
        let sent = last.bytes_acked.saturating_sub(first.bytes_acked);
        let got = last.bytes_received.saturating_sub(first.bytes_received);
        let flow = format!("{} -> {}", f.local, f.remote);
        if sent == 0 && got == 0 {
            idle += 1;
            continue;
        }
        let (dir, mbps, rtt, verdict, analysis) = if sent >= got {
            let an = analyse(&f.samples, skip_ns, Some(f.sndbuf));
            let v = an
                .as_ref()
                .map_or("too few samples after --skip".into(), verdict);
            (
                "sending",
                an.as_ref().map_or(0.0, |x| x.throughput_bps),
                an.as_ref().map_or(0.0, |x| x.rtt_mean_us / 1e3),
                v,
                serde_json::to_value(&an).unwrap_or_default(),
            )
        } else {
            let an = analyse_receiver(&f.samples, skip_ns);
            let v = an.as_ref().map_or(
                "too few samples, or no advertised window reported".into(),
                verdict_receiver,
            );
            (
                "receiving",
                an.as_ref().map_or(0.0, |x| x.throughput_bps),
                an.as_ref().map_or(0.0, |x| x.rcv_rtt_mean_us / 1e3),
                v,
                serde_json::to_value(&an).unwrap_or_default(),
            )
        };
        t.add_row(vec![
            flow,
            dir.into(),
            mbit(mbps),
            format!("{rtt:.2}"),
            f.sndbuf.to_string(),
            f.rcvbuf.to_string(),
        ]);
        verdicts.push(format!("{} -> {}: {verdict}", f.local, f.remote));
        out.push(serde_json::json!({"flow": f, "direction": dir, "analysis": analysis, "verdict": verdict}));
    }
    println!("{t}");
    for v in &verdicts {
        println!("VERDICT {v}");
    }
    if idle > 0 {
        println!("  {idle} more flow(s) moved no data while watched");
    }
    println!("  SO_SNDBUF / SO_RCVBUF: the sockets' limits now (sk_sndbuf / sk_rcvbuf; doubled from what setsockopt asked, or autotuned)");
    if let Some(p) = &a.json {
        write_json(
            p,
            &serde_json::json!({"schema": TCP_SCHEMA, "watched": out}),
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

fn print_lab_line(r: &LabRecord) {
    let [ab, ba] = r.link_stats;
    println!(
        "  delay line: sender->sink {} packets ({} dropped by loss, {} by the full queue), sink->sender {} packets ({} / {}); the sink read {} bytes",
        ab.packets_in, ab.dropped_loss, ab.dropped_queue, ba.packets_in, ba.dropped_loss, ba.dropped_queue, r.sink_bytes
    );
}

/// S4's arithmetic: the buffer asked for, granted, and the window it turned into.
fn print_window_arithmetic(asked: Option<u64>, r: &LabRecord, a: &FlowAnalysis, rtt: Duration) {
    let Some(asked) = asked else { return };
    let rtt_s = rtt.as_secs_f64();
    println!(
        "  window arithmetic: sink SO_RCVBUF {asked} asked -> {} granted (doubled for overhead) -> {:.0} bytes advertised ({:.0} % of granted); {asked} / {:.0} ms = {} Mbit/s, {:.0} / {:.0} ms = {} Mbit/s",
        r.sink_rcvbuf_granted,
        a.peer_window_mean_bytes,
        a.peer_window_mean_bytes * 100.0 / r.sink_rcvbuf_granted.max(1) as f64,
        rtt_s * 1e3,
        mbit(bdp::window_ceiling_bps(asked, rtt_s)),
        a.peer_window_mean_bytes,
        rtt_s * 1e3,
        mbit(a.peer_window_mean_bytes * 8.0 / rtt_s)
    );
}

/// Prints the buffers `rate_bps` needs over the measured RTT; returns what to ask of
/// setsockopt, bytes (half the buffer: the kernel doubles it).
fn recommend(rate_bps: f64, a: &FlowAnalysis) -> u64 {
    let rtt_s = a.rtt_mean_us / 1e6;
    let p = bdp::buffer_plan(rate_bps, rtt_s);
    // setsockopt asks for half: the kernel doubles what it is given.
    let ask = p.buffer_bytes / 2;
    println!(
        "Recommendation for {} Mbit/s over the measured {:.1} ms RTT: {} bytes in flight (bandwidth-delay product); socket buffers of {} bytes on both ends (the kernel advertises only part of a buffer as window):",
        mbit(rate_bps),
        rtt_s * 1e3,
        p.bdp_bytes,
        p.buffer_bytes
    );
    println!(
        "  in code: setsockopt(fd, SOL_SOCKET, SO_SNDBUF, {ask}) on the sender and SO_RCVBUF {ask} on the receiver, before connect()/listen(); the kernel doubles it to {}",
        p.buffer_bytes
    );
    println!(
        "  or, for applications that set no buffer, let autotuning reach it: the last value of net.ipv4.tcp_rmem (receiver) and net.ipv4.tcp_wmem (sender) >= {0}; applications that set their own are capped by net.core.rmem_max / wmem_max",
        p.buffer_bytes
    );
    println!(
        "  (tpslab bdp --rate {}mbit --rtt {}us compares with this host's settings)",
        rate_bps / 1e6,
        (rtt_s * 1e6).round()
    );
    ask
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loss_accepts_shares_and_percentages() {
        assert_eq!(parse_loss("0").unwrap(), 0.0);
        assert!((parse_loss("0.1%").unwrap() - 0.001).abs() < 1e-12);
        assert_eq!(parse_loss("0.25").unwrap(), 0.25);
        for bad in ["1", "100%", "-0.1", "lots"] {
            let e = parse_loss(bad).unwrap_err().to_string();
            assert!(e.contains(&format!("--lab-loss {bad}")), "{e}");
        }
    }
}
