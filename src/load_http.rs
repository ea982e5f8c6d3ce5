//! `tpslab load http URL --rate R`: an open loop of HTTP/1.1 requests (wrk2's model):
//! `--connections` keep-alive connections, each on its own schedule at R/C requests a
//! second, latency from each request's intended send time (corrected for coordinated
//! omission) and from its actual send (uncorrected), side by side.

use anyhow::{bail, Result};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use tpslab_analysis::record::Body;
use tpslab_plan::http::{parse_header, HttpRequest};
use tpslab_plan::load_http::LoadHttpPlan;
use tpslab_plan::ramp::HTTP_BODY_BYTES;

use crate::out;

/// `load http`'s flags.
#[derive(Args, Debug)]
pub(crate) struct LoadHttpArgs {
    /// The URL, http[s]://HOST[:PORT]/PATH.
    url: String,
    /// Requests a second, all connections together, e.g. 2000 or 2k (required).
    #[arg(long, value_name = crate::flags::units::RATE, value_parser = crate::flags::units::rate())]
    rate: Option<f64>,
    /// Keep-alive connections, each sending at RATE/CONNECTIONS requests a second on its
    /// own schedule, one request in flight (no pipelining).
    #[arg(long, default_value_t = 10)]
    connections: usize,
    /// How long requests are sent; none is sent after it.
    #[arg(long, default_value = "10s", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    duration: Duration,
    /// How long a request may wait for its reply (and the grace for replies outstanding
    /// at the end, at most 2 s of it).
    #[arg(long, default_value = "2s", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    timeout: Duration,
    /// The request's method.
    #[arg(long, default_value = "GET")]
    method: String,
    /// A request header, 'NAME: VALUE' (repeatable); Host is the URL's unless given.
    #[arg(long = "header", value_name = "'NAME: VALUE'")]
    headers: Vec<String>,
    /// The request's body: this file's bytes (a regular file of at most 1 MiB), sent with
    /// its Content-Length.
    #[arg(long)]
    body: Option<PathBuf>,
    /// https: trust only the certificates in this PEM file (at most 1 MiB), not the
    /// system's.
    #[arg(long, value_name = "FILE")]
    cacert: Option<PathBuf>,
    /// https: do not verify the server's certificate (the report says so).
    #[arg(long)]
    insecure: bool,
    /// Event-loop threads (0: one per CPU, at most one per connection).
    #[arg(long, default_value_t = 0)]
    load_threads: usize,
    #[command(flatten)]
    record: crate::flags::RecordFlag,
}

impl LoadHttpArgs {
    /// The validated plan: the request checked first (URL, method, headers), then the
    /// rate, connections, duration and timeout, then the URL resolved and the body read.
    /// Errors: one line naming the flag.
    pub(crate) fn plan(&self) -> Result<LoadHttpPlan> {
        let headers = self
            .headers
            .iter()
            .map(|h| parse_header(h))
            .collect::<Result<Vec<_>, _>>()?;
        let request = HttpRequest {
            url: self.url.clone(),
            method: self.method.clone(),
            headers,
            tls: tpslab_plan::http::TlsSettings {
                insecure: self.insecure,
                cacert: self.cacert.as_ref().map(|p| p.display().to_string()),
                ca_pem: vec![],
            },
        };
        let u = request.check()?;
        let Some(rate) = self.rate else {
            bail!("load http needs --rate R: requests a second, all connections together, e.g. --rate 2000");
        };
        self.record.check(false)?;
        let mut plan = LoadHttpPlan {
            request,
            body: vec![],
            body_bytes: 0,
            // Checked before the name is resolved: a bad flag never waits on DNS.
            target: ([127, 0, 0, 1], u.port).into(),
            rate,
            connections: self.connections,
            duration: self.duration,
            timeout: self.timeout,
            load_threads: self.load_threads,
        };
        plan.validate()?;
        plan.target = out::resolve(&format!("{}:{}", u.host, u.port))?;
        plan.request.tls = tpslab_run::input::tls_settings(self.insecure, self.cacert.as_deref())?;
        // A --cacert without a usable certificate: one line now, not a run of failures.
        tpslab_engine::proto::tls::client_for(&plan.request, tpslab_engine::proto::http1::ALPN)
            .map_err(anyhow::Error::msg)?;
        if let Some(p) = &self.body {
            plan.body = tpslab_run::input::read_bytes("--body", p, HTTP_BODY_BYTES, false)?;
            plan.body_bytes = plan.body.len() as u64;
        }
        Ok(plan)
    }
}

/// Runs `tpslab load http`: the plan's line, the run, the record and its report. A run
/// in which nothing was answered is an error (exit 2, one line) after its record is kept.
pub(crate) fn run(a: LoadHttpArgs) -> Result<ExitCode> {
    let plan = a.plan()?;
    {
        let mut o = std::io::stdout().lock();
        tpslab_report::term::load_http::header(&mut o, &plan)?;
    }
    let ctx = out::ctx(None)?;
    let rec = tpslab_run::load_http::run(&plan, &ctx)?;
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
            "{}: no request answered (connects failed: {}; requests failed: {})",
            plan.request.url,
            c.summary(),
            e.summary()
        );
    }
    Ok(ExitCode::SUCCESS)
}
