//! `tpslab load http URL --rate R`: an open loop of HTTP/1.1 requests (wrk2's model):
//! `--connections` keep-alive connections, each on its own schedule at R/C requests a
//! second, latency from each request's intended send time (corrected for coordinated
//! omission) and from its actual send (uncorrected), side by side.

use anyhow::{bail, Result};
use clap::Args;
use std::process::ExitCode;
use std::time::Duration;
use tpslab_analysis::record::Body;
use tpslab_plan::load_http::LoadHttpPlan;

use crate::out;

/// `load http`'s flags.
#[derive(Args, Debug)]
pub(crate) struct LoadHttpArgs {
    /// The URL, http[s]://HOST[:PORT]/PATH.
    url: String,
    /// Requests a second, all connections together, e.g. 2000 or 2k (required).
    #[arg(long, value_name = crate::flags::units::RATE, value_parser = crate::flags::units::rate())]
    rate: Option<f64>,
    /// How long requests are sent; none is sent after it.
    #[arg(long, default_value = "10s", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    duration: Duration,
    #[command(flatten)]
    http: crate::flags::HttpFlags,
    #[command(flatten)]
    record: crate::flags::RecordFlag,
    /// Write one JSON object per 250 ms to FILE while the run goes (NDJSON, one write per
    /// line): intended, achieved and answered requests/s, latency from the intended send
    /// time, replies by status class and errors by kind in the interval, connections open.
    #[arg(long, value_name = "FILE")]
    json_stream: Option<std::path::PathBuf>,
    /// Show the run full screen while it goes, from the same samples --json-stream writes:
    /// intended vs achieved requests/s, latency p50/p99/p99.9 over time, replies by status
    /// class and errors by kind, connections open. Keys: q stops the run as Ctrl-C does, p
    /// freezes the screen, ? help. Standard output must be a terminal.
    #[arg(long)]
    live: bool,
}

impl LoadHttpArgs {
    /// The validated plan: the request checked first (URL, method, headers), then the
    /// rate, connections, duration and timeout, then the URL resolved and the body read.
    /// Errors: one line naming the flag.
    pub(crate) fn plan(&self) -> Result<LoadHttpPlan> {
        self.http.plan(
            &self.url,
            self.rate.unwrap_or(0.0),
            self.duration,
            || {
                if self.rate.is_none() {
                    bail!("load http needs --rate R: requests a second, all connections together, e.g. --rate 2000");
                }
                self.record.check(false)
            },
            |p| Ok(p.validate()?),
        )
    }
}

/// Runs `tpslab load http`: the plan's line, the run, the record and its report. A run
/// in which nothing was answered is an error (exit 2, one line) after its record is kept.
pub(crate) fn run(a: LoadHttpArgs) -> Result<ExitCode> {
    let plan = a.plan()?;
    if a.live {
        out::check_live()?;
    }
    {
        let mut o = std::io::stdout().lock();
        tpslab_report::term::load_http::header(&mut o, &plan)?;
    }
    let mut ctx = out::ctx(None)?;
    ctx.http_live = a
        .json_stream
        .as_deref()
        .map(tpslab_run::outfile::json_stream_http)
        .transpose()?;
    let header = tpslab_report::live::LiveHeader {
        command: "load http".into(),
        target: plan.request.url.clone(),
        planned_s: Some(plan.duration.as_secs_f64()),
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
    let (e, c) = (&l.result.errors, &l.result.connect_errors);
    if l.answered() == 0 && e.total() + c.total() > 0 {
        bail!(
            "{}: no request answered (connects failed: {}; requests failed: {}){}",
            plan.request.url,
            c.summary(),
            e.summary(),
            l.result
                .first_tls_error
                .as_ref()
                .map_or(String::new(), |t| format!("; first TLS failure: {t}"))
        );
    }
    Ok(ExitCode::SUCCESS)
}
