//! An HTTP open loop's flags beside its URL, rate and duration (`load http`, `capacity
//! http`): connections, timeout, the request (method, headers, body), TLS trust and loop
//! threads; with their conversion into a validated [`LoadHttpPlan`].

use anyhow::Result;
use clap::Args;
use std::path::PathBuf;
use std::time::Duration;
use tpslab_plan::http::{parse_header, HttpRequest, HttpVersion};
use tpslab_plan::load_http::LoadHttpPlan;
use tpslab_plan::proto::HTTP_BODY_BYTES;

/// The request's flags (`load http`, `capacity http`, `ramp http`): method, headers,
/// body and TLS trust.
#[derive(Args, Debug)]
pub struct HttpRequestFlags {
    /// The request's method.
    #[arg(long, default_value = "GET")]
    pub method: String,
    /// A request header, 'NAME: VALUE' (repeatable); Host is the URL's unless given.
    #[arg(long = "header", value_name = "'NAME: VALUE'")]
    pub headers: Vec<String>,
    /// The request's body: this file's bytes (a regular file of at most 1 MiB), sent with
    /// its Content-Length.
    #[arg(long, value_name = "FILE")]
    pub body: Option<PathBuf>,
    /// https: trust only the certificates in this PEM file (at most 1 MiB), not the
    /// system's.
    #[arg(long, value_name = "FILE")]
    pub cacert: Option<PathBuf>,
    /// https: do not verify the server's certificate (the report says so).
    #[arg(long)]
    pub insecure: bool,
}

/// The open loop's connections and request.
#[derive(Args, Debug)]
pub struct HttpFlags {
    /// Keep-alive connections, each sending at RATE/CONNECTIONS requests a second on its
    /// own schedule, one request in flight (no pipelining).
    #[arg(long, default_value_t = 10)]
    pub connections: usize,
    /// How long a request may wait for its reply (and the grace for replies outstanding
    /// at the end, at most 2 s of it).
    #[arg(long, default_value = "2s", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub timeout: Duration,
    #[command(flatten)]
    pub request: HttpRequestFlags,
    /// Event-loop threads (0: one per CPU, at most one per connection).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub load_threads: usize,
    /// HTTP/2: h2c with prior knowledge for http://, ALPN h2 for https:// (a server that
    /// does not agree is refused).
    #[arg(long)]
    pub http2: bool,
    /// HTTP/3 over QUIC (UDP), ALPN h3; https:// URLs only (load http; not yet capacity
    /// http).
    #[arg(long, conflicts_with = "http2")]
    pub http3: bool,
    /// With --http2 or --http3: streams in flight per connection at most, each on its own
    /// schedule (CONNECTIONS x STREAMS schedules at RATE/(CONNECTIONS x STREAMS) each; the
    /// server's SETTINGS_MAX_CONCURRENT_STREAMS or QUIC MAX_STREAMS caps them).
    #[arg(long, default_value_t = 1)]
    pub streams: usize,
}

impl HttpFlags {
    /// The request checked (URL, method, headers), and the URL's parts. Errors: one line
    /// naming the flag.
    fn request(&self, url: &str) -> Result<(HttpRequest, tpslab_plan::http::HttpUrl)> {
        let headers = self
            .request
            .headers
            .iter()
            .map(|h| parse_header(h))
            .collect::<Result<Vec<_>, _>>()?;
        let request = HttpRequest {
            url: url.to_string(),
            method: self.request.method.clone(),
            headers,
            tls: tpslab_plan::http::TlsSettings {
                insecure: self.request.insecure,
                cacert: self
                    .request
                    .cacert
                    .as_ref()
                    .map(|p| p.display().to_string()),
                ca_pem: vec![],
            },
        };
        let u = request.check()?;
        Ok((request, u))
    }

    /// The plan at `rate` requests/s for `duration`: the request checked first, then
    /// `check` (the command's own flags: the rate, say), then `validate` on the plan (which may set the command's own fields)
    /// before its name is resolved (the command's checks, e.g. [`LoadHttpPlan::validate`]
    /// under its own labels), then the URL resolved, the TLS trust read and tried, and
    /// the body read. Errors: one line naming the flag.
    pub fn plan(
        &self,
        url: &str,
        rate: f64,
        duration: Duration,
        check: impl FnOnce() -> Result<()>,
        validate: impl FnOnce(&mut LoadHttpPlan) -> Result<()>,
    ) -> Result<LoadHttpPlan> {
        let (request, u) = self.request(url)?;
        check()?;
        let mut plan = LoadHttpPlan {
            request,
            body: vec![],
            body_bytes: 0,
            // Checked before the name is resolved: a bad flag never waits on DNS.
            target: ([127, 0, 0, 1], u.port).into(),
            rate,
            max_rate: false,
            requests: None,
            connections: self.connections,
            duration,
            timeout: self.timeout,
            load_threads: self.load_threads,
            version: HttpVersion::from_flags(self.http2, self.http3)?,
            streams: self.streams,
            fail_on: None,
            server_cmd: None,
            verify: false,
            pid: None,
        };
        validate(&mut plan)?;
        plan.target = tpslab_plan::target::resolve(&format!("{}:{}", u.host, u.port))?;
        plan.request.tls =
            tpslab_run::input::tls_settings(self.request.insecure, self.request.cacert.as_deref())?;
        // A --cacert without a usable certificate: one line now, not a run of failures.
        let alpn = if plan.version.is_http2() {
            tpslab_engine::client::proto::h2::ALPN
        } else if plan.version.is_http3() {
            tpslab_engine::client::proto::h3::ALPN
        } else {
            tpslab_engine::client::proto::http1::ALPN
        };
        tpslab_engine::client::proto::tls::client_for(&plan.request, alpn)
            .map_err(anyhow::Error::msg)?;
        if let Some(p) = &self.request.body {
            plan.body = tpslab_run::input::read_bytes("--body", p, HTTP_BODY_BYTES, false)?;
            plan.body_bytes = plan.body.len() as u64;
        }
        Ok(plan)
    }
}
