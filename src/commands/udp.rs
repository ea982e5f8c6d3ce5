//! The run of a command whose flags and plan are [`tpslab_cli::udp`]:
//! The UDP commands: `serve udp`, `load udp`, `run udp` and `watch`: the run
//! ([`tpslab_run::udp`]) and the record's epilogue.

use crate::out::{self, Terminal};
use anyhow::Result;
use std::io::Write;
use std::process::ExitCode;
use tpslab_cli::flags::is_stdout;
use tpslab_cli::flags::{GateFlags, OutputFlags};
use tpslab_cli::udp::{LoadUdpArgs, RunUdpArgs, ServeArgs, WatchArgs};
use tpslab_plan::udp::UdpRunPlan;
use tpslab_record::Body;

/// `tpslab serve udp`: the reference server until Ctrl-C or --duration, then its counts.
pub(crate) fn serve(a: ServeArgs) -> Result<ExitCode> {
    let plan = a.plan()?;
    let exporter = crate::metrics::start(&a.metrics, "serve udp")?;
    let ctx = out::ctx(exporter.as_ref().map(|e| e.sink()))?;
    let rec = tpslab_run::udp::serve(&plan, &ctx, &mut |srv| {
        crate::out::fitted(|o| tpslab_report::term::serve_header(o, srv))
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

/// `tpslab load udp`: open-loop load against any UDP server, observed and accounted.
pub(crate) fn load(a: LoadUdpArgs) -> Result<ExitCode> {
    let plan = a.plan()?;
    run_plan(&plan, &a.out, "load udp")
}

/// `tpslab run udp`: the reference server and the load in one process: the exact ledger.
pub(crate) fn run(a: RunUdpArgs) -> Result<ExitCode> {
    let plan = a.plan()?;
    run_plan(&plan, &a.out, "run udp")
}

/// Runs a UDP run's plan with `out`'s live outputs, then its record's epilogue.
fn run_plan(plan: &UdpRunPlan, o: &OutputFlags, command: &str) -> Result<ExitCode> {
    let exporter = crate::metrics::start(&o.metrics, command)?;
    let mut ctx = out::live_ctx(o.json_stream.as_deref(), exporter.as_ref())?;
    let view = match o.live {
        true => {
            let (view, sink, progress) =
                out::LiveView::start(live_header(plan, command), ctx.stop.clone())?;
            ctx.live = tpslab_run::exporter::both(ctx.live.take(), Some(sink));
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
        planned_requests: None,
        no_latency: (!plan.load.expect_replies).then(|| "UDP sink mode (--no-replies)".into()),
    }
}

/// `tpslab watch`: the observer alone, on a process or a port.
pub(crate) fn watch(a: WatchArgs) -> Result<ExitCode> {
    let plan = a.plan()?;
    let exporter = crate::metrics::start(&a.metrics, "watch")?;
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
                planned_requests: None,
                no_latency: Some("a watch sends no load of its own".into()),
            };
            let (view, sink, progress) = out::LiveView::start(header, ctx.stop.clone())?;
            ctx.live = tpslab_run::exporter::both(ctx.live.take(), Some(sink));
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
