//! A closed-loop ramp's plan (`tpslab ramp tcp|udp`): its protocol, users per step, the
//! step's timing, the request, and [`RampPlan::validate`], the one check of all of it.

use std::net::SocketAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::framing::Framing;
use crate::http::HttpVersion;
use crate::limits::{
    RAMP_STEPS, RAMP_USERS, REQUEST_TIMEOUT, SAMPLE_INTERVAL, STEP_DURATION, STEP_WARMUP, THINK,
};
use crate::proto::{Proto, Wire};
use crate::PlanError;

fn default_knee_gain() -> f64 {
    0.2
}

/// A ramp: what [`RampPlan::validate`] accepts runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RampPlan {
    /// TCP or UDP.
    pub proto: Proto,
    /// The server.
    pub target: SocketAddr,
    /// Users in each step, increasing.
    pub steps: Vec<usize>,
    /// Measured part of each step (JSON: `step_ns`, integer ns).
    #[serde(rename = "step_ns", with = "crate::time::ns")]
    #[cfg_attr(feature = "schema", schemars(with = "u64"))]
    pub step: Duration,
    /// Unmeasured start of each step (JSON: `warmup_ns`).
    #[serde(rename = "warmup_ns", with = "crate::time::ns")]
    #[cfg_attr(feature = "schema", schemars(with = "u64"))]
    pub warmup: Duration,
    /// Pause of a user between a reply and its next request (JSON: `think_ns`).
    #[serde(rename = "think_ns", with = "crate::time::ns")]
    #[cfg_attr(feature = "schema", schemars(with = "u64"))]
    pub think: Duration,
    /// Longest wait for a reply (and for a TCP connect) (JSON: `timeout_ns`).
    #[serde(rename = "timeout_ns", with = "crate::time::ns")]
    #[cfg_attr(feature = "schema", schemars(with = "u64"))]
    pub timeout: Duration,
    /// The bytes of one request as sent (TCP: framed already).
    pub request: Vec<u8>,
    /// How TCP replies end.
    pub framing: Framing,
    /// UDP: (offset, length) of the sequence field written into each request and
    /// expected back in its reply; `None` = the first [`UDP_TAG_BYTES`] bytes (user id,
    /// sequence).
    pub seq_field: Option<(usize, usize)>,
    /// The knee is the first step whose TPS gain per user gain falls below this (an
    /// analysis setting, kept with the plan so the record can be judged again).
    #[serde(default = "default_knee_gain")]
    pub knee_gain: f64,
    /// The built-in server tpslab started for the ramp, in words (None: the target is
    /// someone else's).
    #[serde(default)]
    pub builtin_server: Option<String>,
    /// PID of the server whose threads and CPU are sampled, if on this host.
    pub server_pid: Option<u32>,
    /// Thread-state sampling interval (JSON: `sample_ns`).
    #[serde(rename = "sample_ns", with = "crate::time::ns")]
    #[cfg_attr(feature = "schema", schemars(with = "u64"))]
    pub sample_interval: Duration,
    /// Threads the users are multiplexed on (each an epoll loop); 0: one per CPU (left
    /// out of the record then).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub load_threads: usize,
    /// How the users reach the server: a connection (or socket) each, or streams on the
    /// HTTP/2 or HTTP/3 connections they share (`ramp http --http2 N`, `--http3 N`; JSON:
    /// the keys `http2_connections` and `http3_connections`, each left out when 0,
    /// [`ConnectionKeys`]).
    #[serde(flatten, with = "connection_keys")]
    #[cfg_attr(feature = "schema", schemars(with = "ConnectionKeys"))]
    pub connections: UserConnections,
}

/// How a ramp's users reach the server.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum UserConnections {
    /// A connection (or a UDP socket) per user: HTTP/1.1 and every other protocol.
    #[default]
    PerUser,
    /// `ramp http --http2 N`: N HTTP/2 connections the users share (user i on connection
    /// i % N, each user one stream in flight at a time).
    Http2(usize),
    /// `ramp http --http3 N`: N HTTP/3 (QUIC) connections the users share, as
    /// [`UserConnections::Http2`].
    Http3(usize),
}

impl UserConnections {
    /// The HTTP version the users speak ([`HttpVersion::Http1`] for a connection each).
    pub fn version(self) -> HttpVersion {
        match self {
            UserConnections::PerUser => HttpVersion::Http1,
            UserConnections::Http2(_) => HttpVersion::Http2,
            UserConnections::Http3(_) => HttpVersion::Http3,
        }
    }

    /// The connections the users share; None: a connection each.
    pub fn shared(self) -> Option<usize> {
        match self {
            UserConnections::PerUser => None,
            UserConnections::Http2(n) | UserConnections::Http3(n) => Some(n),
        }
    }
}

/// [`UserConnections`] as records have always carried it.
#[derive(Debug, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ConnectionKeys {
    /// `ramp http --http2`: the HTTP/2 connections the users share (user i on connection
    /// i % N, each user one stream in flight at a time); 0: HTTP/1.1, a connection per
    /// user (left out of the record then).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub http2_connections: usize,
    /// `ramp http --http3`: the HTTP/3 (QUIC) connections the users share, as
    /// `http2_connections` (user i on connection i % N, one stream in flight each); 0:
    /// not HTTP/3 (left out of the record then).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub http3_connections: usize,
}

/// serde of [`UserConnections`] as [`ConnectionKeys`]; a record with both counts above
/// 0 is refused on reading.
mod connection_keys {
    use super::{ConnectionKeys, UserConnections};
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(c: &UserConnections, s: S) -> Result<S::Ok, S::Error> {
        let (http2_connections, http3_connections) = match *c {
            UserConnections::PerUser => (0, 0),
            UserConnections::Http2(n) => (n, 0),
            UserConnections::Http3(n) => (0, n),
        };
        ConnectionKeys {
            http2_connections,
            http3_connections,
        }
        .serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<UserConnections, D::Error> {
        match ConnectionKeys::deserialize(d)? {
            ConnectionKeys {
                http2_connections: 0,
                http3_connections: 0,
            } => Ok(UserConnections::PerUser),
            ConnectionKeys {
                http2_connections: n,
                http3_connections: 0,
            } => Ok(UserConnections::Http2(n)),
            ConnectionKeys {
                http2_connections: 0,
                http3_connections: n,
            } => Ok(UserConnections::Http3(n)),
            _ => Err(serde::de::Error::custom(
                "http2_connections and http3_connections both above 0: --http2 and --http3 are two protocols",
            )),
        }
    }
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl RampPlan {
    /// What the engine makes the protocol's exchange of.
    pub fn wire(&self) -> Wire<'_> {
        Wire {
            proto: &self.proto,
            target: self.target,
            request: &self.request,
            framing: &self.framing,
            seq_field: self.seq_field,
        }
    }

    /// Checks everything `tpslab ramp` checks of its settings, whichever way the plan was
    /// made (flags, code, a record read back), with the flags' error texts:
    /// - steps: at least one, none below the one before, users 1..=10000 per step
    ///   ([`RAMP_USERS`]), at most [`RAMP_STEPS`] steps;
    /// - `--step-duration`, `--warmup`, `--think`, `--timeout`, `--interval` within
    ///   their limits ([`STEP_DURATION`], ...), `--knee-gain` above 0 and below 1;
    /// - the protocol's request, framing and sequence field ([`Proto::validate`]);
    /// - HTTP/2 or HTTP/3 connections only with HTTP, 1..=[`RAMP_USERS`] and at most the
    ///   last step's users; HTTP/3 with an `https://` URL and no connection-specific
    ///   header;
    /// - the target's port is not 0.
    ///
    /// Errors: the first setting out of bounds, as one line.
    pub fn validate(&self) -> Result<(), PlanError> {
        let (Some(&first), Some(&last)) = (self.steps.first(), self.steps.last()) else {
            return Err(PlanError::Conflict(
                "ramp steps must be non-empty and increasing".into(),
            ));
        };
        if self.steps.windows(2).any(|w| w[1] < w[0]) {
            return Err(PlanError::Conflict(
                "ramp steps must be non-empty and increasing".into(),
            ));
        }
        // Not decreasing: the first step has the fewest users, the last the most.
        if (first as u64) < RAMP_USERS.min || last as u64 > RAMP_USERS.max {
            return Err(PlanError::value(
                "--users",
                format!("{first}..{last}"),
                format!(
                    "FIRST..LAST with {} <= FIRST <= LAST <= {}, e.g. 1..200",
                    RAMP_USERS.min, RAMP_USERS.max
                ),
            ));
        }
        if self.steps.len() > RAMP_STEPS {
            return Err(PlanError::Conflict(format!(
                "--users {first}..{last}: {} steps, allowed at most {RAMP_STEPS}",
                self.steps.len()
            )));
        }
        STEP_DURATION.check("--step-duration", self.step)?;
        STEP_WARMUP.check("--warmup", self.warmup)?;
        THINK.check("--think", self.think)?;
        REQUEST_TIMEOUT.check("--timeout", self.timeout)?;
        SAMPLE_INTERVAL.check("--interval", self.sample_interval)?;
        if !(self.knee_gain > 0.0 && self.knee_gain < 1.0) {
            return Err(PlanError::value(
                "--knee-gain",
                self.knee_gain,
                "above 0 and below 1",
            ));
        }
        self.proto.validate(
            self.request.len(),
            &self.framing,
            self.seq_field,
            self.target,
        )?;
        let shared = match self.connections {
            UserConnections::PerUser => None,
            UserConnections::Http2(n) => {
                if self.proto.http_request().is_none() {
                    return Err(PlanError::Conflict("--http2 applies to ramp http".into()));
                }
                Some(n)
            }
            UserConnections::Http3(n) => {
                let Some(req) = self.proto.http_request() else {
                    return Err(PlanError::Conflict("--http3 applies to ramp http".into()));
                };
                if !req.check()?.tls {
                    return Err(PlanError::value(
                        "URL",
                        &req.url,
                        "https://HOST[:PORT]/PATH with --http3 (QUIC is always TLS)",
                    ));
                }
                crate::http::check_h2_headers(&req.headers)?;
                Some(n)
            }
        };
        if let Some(shared) = shared {
            RAMP_USERS.check("--connections", shared as u64)?;
            // Shared connections: each with a user at the last step at least (one
            // without stays open, idle, all the ramp).
            if shared > last {
                return Err(PlanError::value(
                    "--connections",
                    shared,
                    format!("1..={last}: at most the last step's users (a connection without a user would stay idle)"),
                ));
            }
        }
        if self.target.port() == 0 {
            return Err(PlanError::Conflict(format!(
                "target \"{}\": port 0 is not a port a server listens on; allowed 1..=65535",
                self.target
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "ramp_tests.rs"]
mod tests;
