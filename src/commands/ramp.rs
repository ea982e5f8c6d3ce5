//! The run of a command whose flags and plan are [`tpslab_cli::ramp`]:
//! `tpslab ramp tcp|udp`: closed-loop load stepping up the users, the knee, Little's law
//! per step, the Universal Scalability Law fit, and the server threads' states.

use crate::out;
use anyhow::{bail, Result};
use std::io::Write;
use std::process::ExitCode;
use tpslab_analysis::gate::applies;
use tpslab_cli::ramp::RampCmd;
use tpslab_record::ramp::StepResult;
use tpslab_record::Body;

/// Runs `tpslab ramp tcp|udp`: flags -> setup -> the server started (without a target)
/// -> the header -> the closed loop ([`tpslab_run::ramp`]) -> the record, its report, SVG
/// and exit code.
pub(crate) fn run(cmd: RampCmd) -> Result<ExitCode> {
    let setup = cmd.plan()?;
    let (RampCmd::Tcp(a)
    | RampCmd::Udp(a)
    | RampCmd::Http(tpslab_cli::ramp::http::RampHttpArgs { ramp: a, .. })) = &cmd;
    let ready = tpslab_run::ramp::prepare(&setup)?;
    out::fitted(|o| tpslab_report::term::ramp_header(o, &ready.plan))?;
    let exporter = crate::metrics::start(&a.metrics, "ramp")?;
    let mut ctx = out::ctx(None)?;
    let (view, to_view) = match a.live {
        true => {
            let header = live_header(&ready);
            let (view, tx, progress) = out::LiveView::start_ramp(header, ctx.stop.clone())?;
            ctx.progress = progress;
            (Some(view), Some(tx))
        }
        false => (None, None),
    };
    // Scraped: every step's TPS and p99 as soon as it is measured; the same steps to the
    // live view.
    let on_steps = |st: &[StepResult]| {
        if let Some(e) = &exporter {
            e.set(tpslab_report::metrics::ramp_steps(st, None));
        }
        if let Some(tx) = &to_view {
            let _ = tx.send(st.to_vec());
        }
    };
    let rec = tpslab_run::ramp::run(ready, &ctx, &on_steps);
    // The terminal is given back before the report prints (or the error is said).
    drop(view);
    let rec = rec?;
    let Body::Ramp(r) = &rec.body else {
        unreachable!("a ramp's record")
    };
    let outputs = out::Outputs::of(&a.record).with("--svg", a.svg.as_deref(), "plot", |w| {
        tpslab_report::svg::ramp(w, r)
    });
    let print = |out: &mut dyn Write| tpslab_report::term::ramp_results(out, r);
    out::emit(&rec, outputs, out::Terminal::With(&print))?;
    // A target that refused every request: nothing was measured, an environment error
    // (exit 2, one line), after the record is kept like any run's.
    if let Some(why) = tpslab_analysis::ramp::unreachable(&r.run) {
        bail!(why);
    }
    a.gate
        .exit(&tpslab_analysis::ramp::outcome(&r.run), applies::RAMP)
}

/// What the live view says of a ramp: its command, target (the built-in server's when
/// tpslab started it), steps and times.
fn live_header(ready: &tpslab_run::ramp::Ready) -> tpslab_report::live::RampHeader {
    let p = &ready.plan;
    let command = format!("ramp {}", p.proto.command());
    let target = match (p.proto.http_request(), p.builtin_server.is_some()) {
        (Some(h), false) => h.url.clone(),
        (_, true) => format!("{} (tpslab's server)", p.target),
        (_, false) => p.target.to_string(),
    };
    tpslab_report::live::RampHeader {
        command,
        target,
        users: p.steps.clone(),
        warmup_s: p.warmup.as_secs_f64(),
        window_s: p.step.as_secs_f64(),
        think_s: p.think.as_secs_f64(),
        knee_gain: p.knee_gain,
    }
}
