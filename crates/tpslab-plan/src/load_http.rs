//! `load http URL --rate R`: an open loop of HTTP/1.1 requests on keep-alive connections,
//! each connection on its own schedule (wrk2's model), or with `--rate max` a closed loop
//! (wrk's and `oha -c`'s: each connection sends its next request when its last reply is
//! in): what it sends, how fast, how long, and [`LoadHttpPlan::validate`], the one check
//! of all of it.

use std::net::SocketAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::http::{HttpRequest, HttpVersion};
use crate::limits::{
    HTTP2_SCHEDULES, HTTP2_STREAMS, HTTP_LOAD_DURATION, HTTP_LOAD_REQUESTS, HTTP_RATE,
    LOAD_THREADS, RAMP_USERS, REQUEST_TIMEOUT,
};
use crate::proto::HTTP_BODY_BYTES;
use crate::PlanError;

/// An open-loop HTTP load: `connections` keep-alive connections, each sending at
/// `rate / connections` requests a second on its own schedule (connection j's k-th request
/// intended at `start + (j + k * connections) / rate`), one request in flight per
/// connection, for `duration`; no request is sent after the plan's end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct LoadHttpPlan {
    /// What each request is (URL, method, headers); its body is [`LoadHttpPlan::body`].
    pub request: HttpRequest,
    /// The request's body (not kept in a record; its length is, `body_bytes`).
    #[serde(skip, default)]
    pub body: Vec<u8>,
    /// The body's length, bytes.
    pub body_bytes: u64,
    /// The URL's address, resolved.
    pub target: SocketAddr,
    /// Requests a second, all connections together (above 0, at most [`HTTP_RATE`]); 0
    /// with [`LoadHttpPlan::max_rate`].
    pub rate: f64,
    /// `--rate max`: a closed loop instead of a schedule. Each connection (each stream with
    /// HTTP/2) sends its next request as soon as its last reply is in (or its request
    /// failed), as wrk and `oha -c` do: the rate is what the server answers, latency is
    /// service time (from the actual send; coordinated omission does not apply, nothing
    /// is intended). Absent from records of fixed-rate runs.
    #[serde(default, skip_serializing_if = "is_false")]
    pub max_rate: bool,
    /// `--requests N` (with `--rate max`, like `oha -n`): the run ends once N requests
    /// were started (answered or failed) and their replies are in, or at `duration`,
    /// whichever comes first. None: the run lasts `duration`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<u64>,
    /// Keep-alive connections (1..=10,000). More connections than requests in the plan is
    /// allowed: the later connections' first intended times fall after the end and they
    /// send nothing.
    pub connections: usize,
    /// How long requests are sent (JSON: `duration_ns`, integer ns).
    #[serde(rename = "duration_ns", with = "crate::time::ns")]
    #[cfg_attr(feature = "schema", schemars(with = "u64"))]
    pub duration: Duration,
    /// How long a request may wait for its reply; also the grace given at the end to
    /// replies still outstanding (at most 2 s of it) (JSON: `timeout_ns`).
    #[serde(rename = "timeout_ns", with = "crate::time::ns")]
    #[cfg_attr(feature = "schema", schemars(with = "u64"))]
    pub timeout: Duration,
    /// Loop threads (0: one per CPU, at most one per connection).
    pub load_threads: usize,
    /// `--http2` or `--http3` (JSON: the keys `http2` and `http3`, each `true` or absent,
    /// [`crate::http::VersionKeys`]).
    #[serde(flatten, with = "crate::http::version_keys")]
    #[cfg_attr(feature = "schema", schemars(with = "crate::http::VersionKeys"))]
    pub version: HttpVersion,
    /// `--streams`: HTTP/2 or HTTP/3 requests in flight per connection at most (each a
    /// stream; also capped by the server's SETTINGS_MAX_CONCURRENT_STREAMS, or its QUIC
    /// MAX_STREAMS): `connections * streams` schedules in all, each with one request in
    /// flight. 1 for HTTP/1.1 (and in records made before HTTP/2).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub streams: usize,
    /// `--fail-on` as given (thresholds: `p99<20ms`, `errors<0.1%`, `rps>=5000`,
    /// `errors`), checked before the run by `tpslab_analysis::gate::parse` and judged by
    /// the report from the record (printed first, with pass/fail marks); absent when not
    /// given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fail_on: Option<String>,
    /// `--server-cmd` (`--http3` only): the user's server, a shell command started
    /// before the run (`{port}` replaced by the URL's port) and stopped after it; the
    /// process of its group holding a UDP socket on the URL's port is the server
    /// watched. Absent when not given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cmd: Option<String>,
    /// `--verify` (with `--server-cmd`): the host sysctls the verdict on the server's
    /// receive buffer names are applied through the host guard, the server started
    /// again, the run repeated, the host restored.
    #[serde(default, skip_serializing_if = "is_false")]
    pub verify: bool,
    /// `--pid`: the server's process on this host (with its descendants), whose threads
    /// are sampled over the run for its response-time ledger. Absent when not given (the
    /// process holding the URL's listening socket is looked for then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn one() -> usize {
    1
}

fn is_one(n: &usize) -> bool {
    *n == 1
}

impl LoadHttpPlan {
    /// One connection's interval between intended sends, ns (`connections / rate` s).
    /// Not meaningful with [`LoadHttpPlan::max_rate`] (no schedule: infinite).
    pub fn interval_ns(&self) -> f64 {
        self.connections as f64 * 1e9 / self.rate
    }

    /// The schedules in all: one per connection, or with HTTP/2 or HTTP/3 one per stream
    /// (`connections * streams`), each sending at `rate / schedules` requests a second.
    pub fn schedules(&self) -> usize {
        self.connections * self.streams.max(1)
    }

    /// Requests the plan intends: those whose intended time falls before its end (a
    /// closed loop intends none: its `--requests` is a cap, not a schedule).
    pub fn intended(&self) -> u64 {
        if self.max_rate {
            return 0;
        }
        // Request n (all connections, in order) is intended at n / rate.
        (self.duration.as_nanos() as f64 * self.rate / 1e9).ceil() as u64
    }

    /// Checks every setting. Errors (one line, naming the flag): the URL, method and
    /// headers ([`HttpRequest::check`]), a rate not above 0 or above [`HTTP_RATE`],
    /// connections outside 1..=10,000, a duration outside 100ms..=24h, a timeout outside
    /// 1ms..=10min, a body over 1 MiB, loop threads over the limit; `--requests` without
    /// `--rate max` or outside [`HTTP_LOAD_REQUESTS`]; `--http3` with an `http://` URL,
    /// `--streams` without `--http2` or `--http3`, a connection-specific header with
    /// either; `--pid` with `--http3`.
    pub fn validate(&self) -> Result<(), PlanError> {
        self.request.check()?;
        if self.pid.is_some() && self.version.is_http3() {
            return Err(PlanError::Conflict(
                "--pid applies to HTTP/1.1 and HTTP/2 (over --http3 the server is found by its UDP socket, or started by --server-cmd)".into(),
            ));
        }
        if let Some(n) = self.requests {
            if !self.max_rate {
                return Err(PlanError::Conflict(
                    "--requests applies to --rate max (at a fixed rate the requests are the rate x --duration)".into(),
                ));
            }
            HTTP_LOAD_REQUESTS.check("--requests", n)?;
        }
        if self.max_rate {
            if self.rate != 0.0 {
                return Err(PlanError::value(
                    "--rate",
                    self.rate,
                    "max alone (a closed loop has no rate of its own)",
                ));
            }
        } else if !(self.rate > 0.0 && self.rate <= HTTP_RATE) {
            return Err(PlanError::value(
                "--rate",
                self.rate,
                format!("above 0 and at most {HTTP_RATE} requests/s"),
            ));
        }
        RAMP_USERS.check("--connections", self.connections as u64)?;
        HTTP_LOAD_DURATION.check("--duration", self.duration)?;
        REQUEST_TIMEOUT.check("--timeout", self.timeout)?;
        if self.body_bytes > HTTP_BODY_BYTES || self.body.len() as u64 > HTTP_BODY_BYTES {
            return Err(PlanError::value(
                "--body",
                format!("{} bytes", self.body_bytes),
                format!("at most {HTTP_BODY_BYTES} bytes"),
            ));
        }
        if self.load_threads != 0 {
            LOAD_THREADS.check("--load-threads", self.load_threads as u64)?;
        }
        if self.version.is_http3() && !self.request.check()?.tls {
            return Err(PlanError::value(
                "URL",
                &self.request.url,
                "https://HOST[:PORT]/PATH with --http3 (QUIC is always TLS)",
            ));
        }
        if !self.version.multiplexed() && self.streams != 1 {
            return Err(PlanError::Conflict(
                "--streams applies to --http2 and --http3 (HTTP/1.1 has one request in flight per connection)"
                    .into(),
            ));
        }
        HTTP2_STREAMS.check("--streams", self.streams as u64)?;
        if self.schedules() > HTTP2_SCHEDULES {
            return Err(PlanError::value(
                "--streams",
                self.streams,
                format!(
                    "at most {HTTP2_SCHEDULES} streams in all (--connections {} x --streams)",
                    self.connections
                ),
            ));
        }
        if self.version.multiplexed() {
            crate::http::check_h2_headers(&self.request.headers)?;
        }
        if self.server_cmd.is_some() && !self.version.is_http3() {
            return Err(PlanError::Conflict(
                "--server-cmd applies to --http3 (the QUIC server's socket is watched and restarted for --verify)".into(),
            ));
        }
        if self.verify && self.server_cmd.is_none() {
            return Err(PlanError::Conflict(
                "--verify needs --server-cmd: a server's socket takes a new buffer limit only when it is created, so tpslab must start the server again".into(),
            ));
        }
        Ok(())
    }
}
