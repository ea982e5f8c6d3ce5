//! The run of a command whose flags and plan are [`tpslab_cli::load_http`]:
//! `tpslab load http URL --rate R`: an open loop of HTTP/1.1 requests (wrk2's model):
//! `--connections` keep-alive connections, each on its own schedule at R/C requests a
//! second, latency from each request's intended send time (corrected for coordinated
//! omission) and from its actual send (uncorrected), side by side.

use anyhow::{bail, Result};
use std::process::ExitCode;
use tpslab_analysis::gate::{self, applies};
use tpslab_cli::load_http::LoadHttpArgs;
use tpslab_record::Body;

use crate::out;

/// Runs `tpslab load http`: the plan's line, the run, the record and its report. A run
/// in which nothing was answered (HTTP/1.1 or HTTP/2 alike) is an error (exit 2, one
/// line naming the failures by kind) after its record is kept; an interrupted one exits
/// 130.
pub(crate) fn run(a: LoadHttpArgs) -> Result<ExitCode> {
    let plan = a.plan()?;
    if a.live {
        tpslab_cli::live::check()?;
    }
    // Bound before the run: a bad address or a port in use is said up front.
    let exporter = crate::metrics::start(&a.metrics, "load http")?;
    out::fitted(|o| tpslab_report::term::load_http::header(o, &plan))?;
    let mut ctx = out::ctx(None)?;
    ctx.http_live = tpslab_run::exporter::both_http(
        a.json_stream
            .as_deref()
            .map(tpslab_run::outfile::json_stream_http)
            .transpose()?,
        exporter.as_ref().map(|e| e.http_sink(plan.max_rate)),
    );
    let header = tpslab_report::live::LiveHeader {
        command: "load http".into(),
        target: plan.request.url.clone(),
        planned_s: Some(plan.duration.as_secs_f64()),
        // A fixed rate's intended requests; a closed loop's `--requests` (a cap).
        planned_requests: match plan.max_rate {
            true => plan.requests,
            false => Some(plan.intended()),
        },
        no_latency: None,
    };
    let view = out::attach_http(a.live, false, header, &mut ctx)?;
    let rec = tpslab_run::load_http::run(&plan, &ctx);
    // The terminal is given back before the report prints (or the error is said).
    drop(view);
    let rec = rec?;
    let Body::LoadHttp(l) = &rec.body else {
        unreachable!("a load http record")
    };
    let print = |o: &mut dyn std::io::Write| {
        tpslab_report::term::load_http::record(o, l, rec.meta.interrupted)
    };
    out::emit(
        &rec,
        out::Outputs::of(&a.record),
        out::Terminal::With(&print),
    )?;
    // Nothing answered (every request failed, or was still waiting at the end): nothing
    // was measured, exit 2 like every command whose target could not be measured.
    if let Some(why) = l.nothing_answered(rec.meta.interrupted) {
        bail!(why);
    }
    // Interrupted (Ctrl-C, `q` in the live view): 130 as every command (docs/ci.md),
    // after the record of what ran was kept; then 1 for a failed --fail-on threshold.
    gate_exit(
        a.fail_on.as_deref(),
        applies::LOAD_HTTP,
        &tpslab_analysis::load_http::outcome(l, rec.meta.interrupted),
        rec.meta.interrupted,
    )
}

/// The exit code of a run judged against `fail_on` (as given, checked before the run):
/// 130 interrupted, 1 a threshold failed (each reason on stderr, `tpslab: exit 1: ...`),
/// else 0 (docs/ci.md).
pub(crate) fn gate_exit(
    fail_on: Option<&str>,
    allowed: &[&str],
    o: &gate::Outcome,
    interrupted: bool,
) -> Result<ExitCode> {
    let conds = match fail_on {
        Some(f) => gate::parse(f, allowed).map_err(anyhow::Error::msg)?,
        None => vec![],
    };
    let (code, why) = gate::exit_code(o, &conds, false);
    if code != 0 && !interrupted {
        for w in why {
            eprintln!("tpslab: exit {code}: {w}");
        }
    }
    Ok(ExitCode::from(code))
}
