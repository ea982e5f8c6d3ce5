//! The UDP commands: `serve udp`, `load udp`, `run udp` and `watch`: their flags, the
//! validated plan they make ([`tpslab_run::udp`] runs it), the record's epilogue.

use crate::flags::is_stdout;
use crate::flags::{load_config, server_config, GateFlags, LoadFlags, OutputFlags, ServerFlags};
use crate::metrics::ListenFlag;
use crate::out::{self, check_pid, resolve, Terminal};
use anyhow::Result;
use clap::Args;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use tpslab_analysis::record::Body;
use tpslab_engine::server::Mode;
use tpslab_engine::udp_run::UdpRunPlan;
use tpslab_plan::udp::WatchPlan;
use tpslab_run::udp::ServePlan;

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
    /// Sender threads (the --flows sockets dealt among them).
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
    /// Show the watch full screen while it goes, from the same samples --json-stream
    /// writes: delivered pps, this interval's drops by layer, the rx_queue against its
    /// SO_RCVBUF limit, softnet drops per CPU. Keys: q ends the watch as Ctrl-C does, p
    /// freezes the screen, ? help. Standard output must be a terminal.
    #[arg(long)]
    pub(crate) live: bool,
}

impl ServeArgs {
    /// The server's validated settings and how long it serves; the record's files checked.
    pub(crate) fn plan(&self) -> Result<ServePlan> {
        let server = server_config(&self.server)?;
        self.record.check(false)?;
        Ok(ServePlan {
            server,
            duration: self.duration,
        })
    }
}

/// `tpslab serve udp`: the reference server until Ctrl-C or --duration, then its counts.
pub(crate) fn serve(a: ServeArgs) -> Result<ExitCode> {
    let plan = a.plan()?;
    let exporter = a.metrics.start("serve udp")?;
    let ctx = out::ctx(exporter.as_ref().map(|e| e.sink()))?;
    let rec = tpslab_run::udp::serve(&plan, &ctx, &mut |srv| {
        tpslab_report::term::serve_header(&mut std::io::stdout().lock(), srv)
    })?;
    let Body::Serve(s) = &rec.body else {
        unreachable!("serve makes a server's record")
    };
    let print =
        |out: &mut dyn Write| tpslab_report::term::print_server(out, &s.server, s.elapsed_s);
    out::emit(
        &rec,
        crate::out::Outputs::of(&a.record),
        Terminal::With(&print),
    )?;
    // Ctrl-C is how a server without --duration ends: not a failure.
    Ok(ExitCode::SUCCESS)
}

impl LoadUdpArgs {
    /// The run against TARGET: the load (from its flags), the observer's interval, the
    /// server's PID; the gate and the output files checked.
    pub(crate) fn plan(&self) -> Result<UdpRunPlan> {
        let target = resolve(&self.target)?;
        let mut load = load_config(&self.load, self.threads, "--threads", target)?;
        load.keep_histograms = self.out.check()?;
        if self.out.live {
            out::check_live()?;
        }
        if let Some(pid) = self.pid {
            check_pid(pid)?;
        }
        Ok(UdpRunPlan {
            server: None,
            load,
            interval: self.out.interval,
            target_pid: self.pid,
            watch_port: None,
            no_drop_reasons: self.out.no_drop_reasons,
        })
    }
}

/// `tpslab load udp`: open-loop load against any UDP server, observed and accounted.
pub(crate) fn load(a: LoadUdpArgs) -> Result<ExitCode> {
    let plan = a.plan()?;
    run_plan(&plan, &a.out, "load udp")
}

impl RunUdpArgs {
    /// Our server (sink with --no-replies) and the load against it; the gate and the
    /// output files checked.
    pub(crate) fn plan(&self) -> Result<UdpRunPlan> {
        let mut srv = server_config(&self.server)?;
        if self.load.no_replies {
            srv.mode = Mode::Sink;
        }
        let mut load = load_config(&self.load, self.load_threads, "--load-threads", srv.bind)?;
        load.keep_histograms = self.out.check()?;
        if self.out.live {
            out::check_live()?;
        }
        Ok(UdpRunPlan {
            server: Some(srv),
            load,
            interval: self.out.interval,
            target_pid: None,
            watch_port: None,
            no_drop_reasons: self.out.no_drop_reasons,
        })
    }
}

/// `tpslab run udp`: the reference server and the load in one process: the exact ledger.
pub(crate) fn run(a: RunUdpArgs) -> Result<ExitCode> {
    let plan = a.plan()?;
    run_plan(&plan, &a.out, "run udp")
}

/// Runs a UDP run's plan with `out`'s live outputs, then its record's epilogue.
fn run_plan(plan: &UdpRunPlan, o: &OutputFlags, command: &str) -> Result<ExitCode> {
    let exporter = o.metrics.start(command)?;
    let mut ctx = out::live_ctx(o.json_stream.as_deref(), exporter.as_ref())?;
    let view = match o.live {
        true => {
            let (view, sink, progress) =
                out::LiveView::start(live_header(plan, command), ctx.stop.clone())?;
            ctx.live = crate::metrics::both(ctx.live.take(), Some(sink));
            ctx.progress = progress;
            Some(view)
        }
        false => None,
    };
    let rec = tpslab_run::udp::run(plan, &ctx);
    // The terminal is given back before the report prints (or the error is said).
    drop(view);
    let rec = rec?;
    out::emit_run(
        &rec,
        crate::out::Outputs::of(&o.record),
        o.explain,
        &o.gate,
        false,
    )
}

/// What the live view says of a UDP run: its command, target, planned length (warm-up and
/// window), and why there is no latency in a sink run.
fn live_header(plan: &UdpRunPlan, command: &str) -> tpslab_report::live::LiveHeader {
    tpslab_report::live::LiveHeader {
        command: command.to_string(),
        target: match &plan.server {
            // Port 0: the server's port is chosen when it binds.
            Some(_) if plan.load.target.port() == 0 => {
                format!("tpslab's server on {}", plan.load.target.ip())
            }
            Some(_) => format!("tpslab's server on {}", plan.load.target),
            None => plan.load.target.to_string(),
        },
        planned_s: Some((plan.load.warmup + plan.load.duration).as_secs_f64()),
        no_latency: (!plan.load.expect_replies).then(|| "UDP sink mode (--no-replies)".into()),
    }
}

impl WatchArgs {
    /// What to watch, how often and how long (checked against the plan's limits); the
    /// process checked to exist, the output files checked.
    pub(crate) fn plan(&self) -> Result<WatchPlan> {
        let plan = WatchPlan {
            pid: self.pid,
            port: self.port,
            interval: self.interval,
            duration: self.duration,
            no_drop_reasons: self.no_drop_reasons,
        };
        plan.validate()?;
        self.record.check(true)?;
        if let Some(pid) = self.pid {
            check_pid(pid)?;
        }
        if self.live {
            out::check_live()?;
        }
        Ok(plan)
    }
}

/// `tpslab watch`: the observer alone, on a process or a port.
pub(crate) fn watch(a: WatchArgs) -> Result<ExitCode> {
    let plan = a.plan()?;
    let exporter = a.metrics.start("watch")?;
    let mut ctx = out::live_ctx(a.json_stream.as_deref(), exporter.as_ref())?;
    let view = match a.live {
        true => {
            let header = tpslab_report::live::LiveHeader {
                command: "watch".into(),
                target: match (plan.pid, plan.port) {
                    (Some(pid), Some(port)) => format!("pid {pid} port {port}"),
                    (Some(pid), None) => format!("pid {pid}"),
                    (None, Some(port)) => format!("port {port}"),
                    (None, None) => "the host".into(),
                },
                planned_s: Some(plan.duration.as_secs_f64()),
                no_latency: Some("a watch sends no load of its own".into()),
            };
            let (view, sink, progress) = out::LiveView::start(header, ctx.stop.clone())?;
            ctx.live = crate::metrics::both(ctx.live.take(), Some(sink));
            ctx.progress = progress;
            Some(view)
        }
        false => None,
    };
    // Standard output may carry the JSON record alone.
    let json_stdout = a.record.json.as_deref().is_some_and(is_stdout);
    // While the view holds the terminal, what the watch follows is said after it.
    let mut held = vec![];
    let rec = tpslab_run::udp::watch(&plan, &ctx, &mut |f| {
        if view.is_some() {
            held.push(f.line());
        } else if json_stdout {
            eprintln!("{}", f.line());
        } else {
            println!("{}", f.line());
        }
    });
    drop(view);
    for l in held {
        if json_stdout {
            eprintln!("{l}");
        } else {
            println!("{l}");
        }
    }
    let rec = rec?;
    // Ended by Ctrl-C as a matter of course: exit 0.
    out::emit_run(
        &rec,
        crate::out::Outputs::of(&a.record),
        a.explain,
        &GateFlags::default(),
        true,
    )
}
