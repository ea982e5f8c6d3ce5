//! `ramp tcp|udp|http`'s settings as given and the validated [`RampSetup`] they make:
//! the limits on the times, the request and its framing, someone's server or the
//! built-in one (whose settings are refused with a target).

use super::BUILTIN_UNSTARTED;
use super::{parse_steps, request, BuiltinServer, RampSetup};
use anyhow::{anyhow, bail, Result};
use std::path::PathBuf;
use std::time::Duration;
use tpslab_plan::framing::Framing;
use tpslab_plan::http::{parse_header, HttpRequest};
use tpslab_plan::limits::{REQUEST_TIMEOUT, SAMPLE_INTERVAL, STEP_DURATION, STEP_WARMUP, THINK};
use tpslab_plan::proto::Proto;
use tpslab_plan::proto::HTTP_BODY_BYTES;
use tpslab_plan::ramp::{RampPlan, UserConnections};
use tpslab_plan::target::{check_pid, resolve};

/// The settings of `ramp tcp|udp` as given (`ramp http` adds [`HttpFlags`]); a value left
/// at its default is the default's value here.
#[derive(Debug, Clone)]
pub struct RampFlags {
    /// `TARGET` (HOST:PORT; ramp http: the URL); None: the built-in server.
    pub target: Option<String>,
    /// `--users` (FIRST..LAST).
    pub users: String,
    /// `--step` (+N, N, xF).
    pub step: String,
    /// `--step-duration`.
    pub step_duration: Duration,
    /// `--warmup`.
    pub warmup: Duration,
    /// `--think`.
    pub think: Duration,
    /// `--timeout`.
    pub timeout: Duration,
    /// `--size`, bytes (default 1024).
    pub size: u64,
    /// `--payload-file`.
    pub payload_file: Option<PathBuf>,
    /// `--framing` (default `length`).
    pub framing: String,
    /// `--seq-field` as typed.
    pub seq_field: Option<String>,
    /// `--pid`.
    pub pid: Option<u32>,
    /// `--interval`.
    pub interval: Duration,
    /// `--load-threads` (0: the number of CPUs).
    pub load_threads: usize,
    /// `--knee-gain`.
    pub knee_gain: f64,
    /// The built-in server's `--server-work`, `--server-serial` (default 10ms),
    /// `--serialize`, `--server-threads`.
    pub builtin: BuiltinServer,
}

/// What `ramp http` adds: `--method`, `--header` (repeatable), `--body FILE`.
#[derive(Debug, Clone)]
pub struct HttpFlags {
    /// `--method`.
    pub method: String,
    /// `--header NAME: VALUE`, as typed.
    pub headers: Vec<String>,
    /// `--body FILE`.
    pub body: Option<PathBuf>,
    /// `--insecure`.
    pub insecure: bool,
    /// `--cacert FILE`.
    pub cacert: Option<PathBuf>,
    /// `--http2 [--connections N]`: the connections the users share; None: HTTP/1.1.
    pub http2: Option<usize>,
    /// `--http3 [--connections N]`: the QUIC connections the users share; None: not
    /// HTTP/3.
    pub http3: Option<usize>,
}

impl RampFlags {
    /// The validated setup for `proto`: the steps parsed, then `outputs` (the command's
    /// check of its output files and gate, in that order with the steps), then the limits,
    /// the request, and the target (someone's server, resolved, or the built-in one).
    /// Errors: one line naming the flag(s).
    pub fn setup(&self, proto: Proto, outputs: impl FnOnce() -> Result<()>) -> Result<RampSetup> {
        let a = self;
        let steps = parse_steps(&a.users, &a.step).map_err(|e| anyhow!(e))?;
        outputs()?;
        STEP_DURATION.check("--step-duration", a.step_duration)?;
        STEP_WARMUP.check("--warmup", a.warmup)?;
        THINK.check("--think", a.think)?;
        REQUEST_TIMEOUT.check("--timeout", a.timeout)?;
        SAMPLE_INTERVAL.check("--interval", a.interval)?;
        if !(a.knee_gain > 0.0 && a.knee_gain < 1.0) {
            bail!("--knee-gain {}: allowed above 0 and below 1", a.knee_gain);
        }
        let framing = Framing::parse(&a.framing).map_err(|e| anyhow!("--{e}"))?;
        let payload = match &a.payload_file {
            Some(p) => Some(crate::input::read_payload_file(p)?),
            None => None,
        };
        let (request, seq_field) = request(
            proto.clone(),
            payload,
            a.size,
            a.framing != "length",
            a.seq_field.as_deref(),
        )?;
        let b = a.builtin;
        let builtin_flags = !b.work.is_zero()
            || b.serialize
            || b.threads != 0
            || b.serial != Duration::from_millis(10);
        let with_target = |what: &str| -> Result<()> {
            if builtin_flags {
                bail!("--server-work, --server-serial, --server-threads and --serialize configure the built-in server: leave out {what} to use it");
            }
            if let Some(p) = a.pid {
                check_pid("--pid", p)?;
            }
            Ok(())
        };
        let (target, pid, builtin) = match &a.target {
            Some(t) => {
                with_target(if proto.http_request().is_some() {
                    "URL"
                } else {
                    "TARGET"
                })?;
                (resolve(&proto.target_text(t)?)?, a.pid, None)
            }
            None => {
                proto.builtin()?;
                if a.pid.is_some() {
                    bail!("--pid applies with a TARGET; the built-in server is watched anyway");
                }
                (BUILTIN_UNSTARTED, None, Some(b))
            }
        };
        let plan = RampPlan {
            proto,
            target,
            steps,
            step: a.step_duration,
            warmup: a.warmup,
            think: a.think,
            timeout: a.timeout,
            request,
            framing,
            seq_field,
            knee_gain: a.knee_gain,
            builtin_server: builtin.map(|b| b.describe()),
            server_pid: pid,
            sample_interval: a.interval,
            load_threads: a.load_threads,
            connections: UserConnections::PerUser,
        };
        Ok(RampSetup { plan, builtin })
    }

    /// `ramp http`'s setup: `--payload-file` and `--size` refused (the body is `--body`),
    /// the headers and the URL checked, the body read, then [`RampFlags::setup`].
    pub fn http_setup(
        &self,
        h: &HttpFlags,
        outputs: impl FnOnce() -> Result<()>,
    ) -> Result<RampSetup> {
        if self.payload_file.is_some() {
            bail!("--payload-file applies to ramp tcp|udp; ramp http sends --body FILE");
        }
        if self.size != 1024 {
            bail!("--size applies to ramp tcp|udp; ramp http sends --body FILE");
        }
        let headers = h
            .headers
            .iter()
            .map(|h| parse_header(h))
            .collect::<Result<Vec<_>, _>>()?;
        let req = HttpRequest {
            // Without a URL: the built-in server's, known once it is started.
            url: self
                .target
                .clone()
                .unwrap_or_else(|| "http://127.0.0.1/".into()),
            method: h.method.clone(),
            headers,
            tls: crate::input::tls_settings(h.insecure, h.cacert.as_deref())?,
        };
        req.check()?;
        if h.http2.is_some() && h.http3.is_some() {
            bail!("--http2 and --http3 are two protocols: give one");
        }
        if let Some(c) = h.http2.or(h.http3) {
            tpslab_plan::limits::RAMP_USERS.check("--connections", c as u64)?;
        }
        if h.http2.is_some() && self.target.is_none() {
            bail!("ramp http --http2 needs the URL of an HTTP/2 server: the built-in server speaks HTTP/1.1");
        }
        if h.http3.is_some() && self.target.is_none() {
            bail!("ramp http --http3 needs the https:// URL of an HTTP/3 server: the built-in server speaks HTTP/1.1");
        }
        let alpn = match (h.http2, h.http3) {
            (Some(_), _) => tpslab_engine::client::proto::h2::ALPN,
            (_, Some(_)) => tpslab_engine::client::proto::h3::ALPN,
            _ => tpslab_engine::client::proto::http1::ALPN,
        };
        // A --cacert without a usable certificate: one line now, not a run of failures.
        tpslab_engine::client::proto::tls::client_for(&req, alpn).map_err(|e| anyhow!(e))?;
        let body = match &h.body {
            Some(p) => crate::input::read_bytes("--body", p, HTTP_BODY_BYTES, false)?,
            None => vec![],
        };
        let mut setup = self.setup(Proto::Http(req), outputs)?;
        setup.plan.request = body;
        setup.plan.connections = match (h.http2, h.http3) {
            (Some(n), _) => UserConnections::Http2(n),
            (_, Some(n)) => UserConnections::Http3(n),
            _ => UserConnections::PerUser,
        };
        // What the setup could not check before HTTP/3 was known: its URL and headers
        // (a URL is given with --http3: the target is resolved).
        if h.http3.is_some() {
            setup.plan.validate()?;
        }
        Ok(setup)
    }
}
