//! `capacity udp HOST:PORT --slo 'p99<20ms,loss<0.1%'`: the highest rate a server sustains
//! within an objective, found by open-loop steps at rates a search chooses. The objective
//! ([`Slo`], parsed by [`Slo::parse`]), the search's bounds ([`CapacitySearch`]) and the
//! whole plan ([`CapacityPlan`], with [`CapacityPlan::validate`]).

use crate::framing::Framing;
use crate::limits::{STEP_DURATION, WARMUP};
use crate::load_http::LoadHttpPlan;
use crate::proto::{Proto, Transport, Wire};
use crate::udp::UdpRunPlan;
use crate::PlanError;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

mod load;
mod slo;
use slo::pct_text;
pub use slo::{parse_pct, Objective, Quantile, Slo, SLO_FORMS};

/// The search's objective and bounds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CapacitySearch {
    /// What every step must meet.
    pub slo: Slo,
    /// The first rate tried, pps; the search doubles it until a step fails.
    pub start_rate: f64,
    /// The highest rate tried, pps: a server that passes there sustains at least it.
    pub max_rate: f64,
    /// The bracket's width the search narrows to: the failing rate at most this much
    /// above the passing one, % (0.5..=50).
    pub resolution_pct: f64,
    /// Steps at each rate of the final bracket (1..=10): its call is k of n.
    pub repeats: u32,
    /// The whole search's time, at most: no step starts that would end after it.
    #[serde(with = "crate::time::ns")]
    #[cfg_attr(feature = "schema", schemars(with = "u64"))]
    pub budget: Duration,
    /// The lowest rate the search tries, pps (1 unless bursts set it: a step must hold
    /// several bursts, [`min_rate_for_bursts`]); absent in JSON when 1.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub min_rate: f64,
    /// What a rate counts (datagrams or requests a second); absent in JSON for datagrams,
    /// as in records before HTTP.
    #[serde(default, skip_serializing_if = "RateUnit::is_pps")]
    pub unit: RateUnit,
    /// `--fail-on` as given (a floor on the rate sustained, `rps>=N`), checked before the
    /// search by `tpslab_analysis::gate::parse` and judged by the report from the record;
    /// absent when not given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fail_on: Option<String>,
}

fn one() -> f64 {
    1.0
}

fn is_one(v: &f64) -> bool {
    *v == 1.0
}

/// Bursts a step's window holds at least at the lowest rate the search tries.
pub const BURSTS_PER_STEP: f64 = 5.0;

/// The lowest rate worth a step for bursts of `burst` datagrams over a window of
/// `window`: [`BURSTS_PER_STEP`] bursts in it (whole datagrams a second, at least 1). Below
/// it a step holds one burst or none (at 79 pps, bursts of 200 come 2.5 s apart). 1
/// without bursts (`burst` 1).
pub fn min_rate_for_bursts(burst: u64, window: Duration) -> f64 {
    if burst <= 1 {
        return 1.0;
    }
    (burst as f64 * BURSTS_PER_STEP / window.as_secs_f64().max(1e-3))
        .ceil()
        .max(1.0)
}

/// What a capacity search's rates count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum RateUnit {
    /// UDP datagrams a second (`pps`).
    #[default]
    Pps,
    /// HTTP requests a second (`requests/s`).
    RequestsPerSecond,
}

impl RateUnit {
    /// Datagrams a second (serde's skip test).
    pub fn is_pps(&self) -> bool {
        *self == RateUnit::Pps
    }
}

impl fmt::Display for RateUnit {
    /// `pps` or `requests/s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RateUnit::Pps => "pps",
            RateUnit::RequestsPerSecond => "requests/s",
        })
    }
}

/// The resolution's range, %.
pub const RESOLUTION_PCT: (f64, f64) = (0.5, 50.0);
/// Repeats at the boundary.
pub const REPEATS: (u32, u32) = (1, 10);
/// The longest budget: a day.
pub const BUDGET_MAX: Duration = Duration::from_secs(24 * 3600);

/// `capacity udp|http`: the load's settings (its rate is set by each step; its duration
/// and warm-up are each step's) and the search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CapacityPlan {
    /// Each step's load, at the start rate (the search sets the rate of each); JSON: the
    /// key `run` (UDP) or `http`.
    #[serde(flatten)]
    pub load: CapacityLoad,
    /// The objective and the search's bounds.
    pub search: CapacitySearch,
    /// `--server-cmd`: the user's UDP server, a shell command with `{port}`, started by
    /// tpslab for the search (the load's target and PID are the started server's) and
    /// started again after `--fix-and-retry`'s change. None: the server at the target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cmd: Option<String>,
    /// `--fix-and-retry`: the fix the verdict recommends at the first failing rate is
    /// applied through the host guard, the search runs again, and the host is restored.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fix_and_retry: bool,
}

/// What each step of a capacity search runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum CapacityLoad {
    /// A UDP run (`run udp`'s engine without a server of its own), its warm-up and drain
    /// included.
    #[serde(rename = "run")]
    Udp(UdpRunPlan),
    /// `load http`'s open loop; its duration is the step's measured window.
    #[serde(rename = "http")]
    Http(HttpStep),
    /// The open loop of framed requests over TCP (`ramp tcp`'s protocol); its duration is
    /// the step's measured window.
    #[serde(rename = "tcp")]
    Tcp(TcpStep),
}

/// A TCP capacity step: a warm-up run at the step's rate (its figures not kept;
/// connections are made again for the window), then the window's run: `connections`
/// connections, each sending the same request at `rate / connections` a second on its own
/// schedule (as `load http`'s open loop), one request in flight per connection, each reply
/// ending by `framing`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TcpStep {
    /// The server's address.
    pub target: SocketAddr,
    /// The bytes of one request as sent, framed already (not kept in a record; its length
    /// is, `request_bytes`).
    #[serde(skip, default)]
    pub request: Vec<u8>,
    /// The request's length, bytes.
    pub request_bytes: u64,
    /// How a reply ends.
    pub framing: Framing,
    /// Requests a second, all connections together (the search sets each step's).
    pub rate: f64,
    /// Connections (1..=10,000).
    pub connections: usize,
    /// The measured window (JSON: `duration_ns`).
    #[serde(rename = "duration_ns", with = "crate::time::ns")]
    #[cfg_attr(feature = "schema", schemars(with = "u64"))]
    pub duration: Duration,
    /// How long a request (or a connect) may wait; also the grace for replies outstanding
    /// at the end, at most 2 s of it (JSON: `timeout_ns`).
    #[serde(rename = "timeout_ns", with = "crate::time::ns")]
    #[cfg_attr(feature = "schema", schemars(with = "u64"))]
    pub timeout: Duration,
    /// Loop threads (0: one per CPU, at most one per connection).
    pub load_threads: usize,
    /// The warm-up before each window, at the same rate (0: none; JSON: `warmup_ns`).
    #[serde(rename = "warmup_ns", with = "crate::time::ns")]
    #[cfg_attr(feature = "schema", schemars(with = "u64"))]
    pub warmup: Duration,
    /// `--pid`: the server process watched (its threads at a failing step); with a
    /// server tpslab started, that server's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// tpslab's reference server (`serve tcp --mode replace`) started for the search
    /// when no HOST:PORT is given (None: the server at the target, or `--server-cmd`'s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub builtin: Option<BuiltinTcpServer>,
    /// `--protocol`: the request/reply protocol over the connections (a stream one, not
    /// HTTP: `capacity http` is its own); absent in JSON for [`Proto::Tcp`] (framed), as
    /// in records before it.
    #[serde(default = "framed", skip_serializing_if = "is_framed")]
    pub proto: Proto,
}

fn framed() -> Proto {
    Proto::Tcp
}

fn is_framed(p: &Proto) -> bool {
    *p == Proto::Tcp
}

/// tpslab's reference TCP server as `capacity tcp` (and `ramp tcp`) without a target
/// starts it: `serve tcp --mode replace` with these settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct BuiltinTcpServer {
    /// CPU work per request, a busy loop (JSON: `work_ns`).
    #[serde(rename = "work_ns", with = "crate::time::ns")]
    #[cfg_attr(feature = "schema", schemars(with = "u64"))]
    pub work: Duration,
    /// Waiting per request, a sleep (JSON: `serial_ns`).
    #[serde(rename = "serial_ns", with = "crate::time::ns")]
    #[cfg_attr(feature = "schema", schemars(with = "u64"))]
    pub serial: Duration,
    /// The waiting under one global lock.
    pub serialize: bool,
    /// 0: a thread per connection; N: N epoll workers sharing the connections.
    pub threads: usize,
}

impl BuiltinTcpServer {
    /// Requests a second it can answer at most when its CPU time is its own: threads
    /// (one per connection when 0) over the work and waiting per request, the waiting
    /// alone under a lock; None when a request costs nothing.
    pub fn ceiling(&self, connections: usize) -> Option<f64> {
        let threads = if self.threads == 0 {
            connections
        } else {
            self.threads
        } as f64;
        let per = (self.work + self.serial).as_secs_f64();
        let by_threads = (per > 0.0).then(|| threads / per);
        let by_lock =
            (self.serialize && !self.serial.is_zero()).then(|| 1.0 / self.serial.as_secs_f64());
        match (by_threads, by_lock) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// An HTTP capacity step: a warm-up run at the step's rate (its figures not kept;
/// connections are made again for the window), then `load`'s run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct HttpStep {
    /// The open loop, at the start rate, for the step's window.
    pub load: LoadHttpPlan,
    /// The warm-up before each window, at the same rate (0: none).
    #[serde(rename = "warmup_ns", with = "crate::time::ns")]
    #[cfg_attr(feature = "schema", schemars(with = "u64"))]
    pub warmup: Duration,
    /// `--pid`: the server process watched (its threads at a failing step); None: not
    /// read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
}

/// What a step costs beyond its warm-up, window and drain: the observer's start and last
/// sample, the target's queue emptying.
pub const STEP_OVERHEAD: Duration = Duration::from_millis(400);

impl CapacityPlan {
    /// The shortest a step can take: its warm-up and measured window.
    pub fn step_time(&self) -> Duration {
        self.load.warmup() + self.load.window()
    }

    /// The wait for late replies after a step's last send ([`CapacityLoad::drain`]).
    pub fn drain(&self) -> Duration {
        self.load.drain()
    }

    /// The least budget one step needs: its warm-up and window, the drain of late
    /// replies and [`STEP_OVERHEAD`] (no step starts that could not end within the budget).
    pub fn min_budget(&self) -> Duration {
        self.step_time() + self.drain() + STEP_OVERHEAD
    }

    /// The target's address.
    pub fn target(&self) -> std::net::SocketAddr {
        self.load.target()
    }

    /// The words after `capacity` that run it ([`CapacityLoad::command`]).
    pub fn command(&self) -> &'static str {
        self.load.command()
    }

    /// The protocol's word ([`CapacityLoad::protocol`]).
    pub fn protocol(&self) -> &'static str {
        self.load.protocol()
    }

    /// Checks the load (as `load udp` does, labelled with its flags) and the search:
    /// `--step-duration` within 100ms..=1h, `--start-rate` and `--max-rate` above 0, the
    /// start at most the max, neither above the rate limit, `--resolution` 0.5..=50 %,
    /// `--repeats` 1..=10, a `--budget` that holds at least one step and at most a day.
    pub fn validate(&self) -> Result<(), PlanError> {
        self.load.validate()?;
        let s = &self.search;
        let most = self.load.rate_limit();
        for (label, r) in [("--start-rate", s.start_rate), ("--max-rate", s.max_rate)] {
            // Whole datagrams (requests) per second: the search steps by whole rates, and
            // a fractional ceiling would be stepped below forever or passed.
            if !(r.is_finite() && (1.0..=most).contains(&r) && r.fract() == 0.0) {
                return Err(PlanError::value(
                    label,
                    r,
                    format!("a whole rate from 1 up to {most:.0} {} (not max)", s.unit),
                ));
            }
        }
        if s.start_rate < s.min_rate {
            return Err(PlanError::Conflict(format!(
                "--start-rate {} is below {}, the lowest rate at which a step of --step-duration holds {BURSTS_PER_STEP} bursts of --burst: start at or above it",
                s.start_rate, s.min_rate
            )));
        }
        if s.start_rate > s.max_rate {
            return Err(PlanError::Conflict(format!(
                "--start-rate {} is above --max-rate {}: the search starts at or below its ceiling",
                s.start_rate, s.max_rate
            )));
        }
        let (lo, hi) = RESOLUTION_PCT;
        if !(s.resolution_pct >= lo && s.resolution_pct <= hi) {
            return Err(PlanError::value(
                "--resolution",
                pct_text(s.resolution_pct),
                format!("{lo}%..={hi}%"),
            ));
        }
        if !(REPEATS.0..=REPEATS.1).contains(&s.repeats) {
            return Err(PlanError::value(
                "--repeats",
                s.repeats,
                format!("{}..={}", REPEATS.0, REPEATS.1),
            ));
        }
        if s.budget < self.min_budget() || s.budget > BUDGET_MAX {
            return Err(PlanError::value(
                "--budget",
                humantime::format_duration(s.budget),
                format!(
                    "at least one step ({}: --warmup + --step-duration + --drain + {} to start and end it) up to {}",
                    humantime::format_duration(self.min_budget()),
                    humantime::format_duration(STEP_OVERHEAD),
                    humantime::format_duration(BUDGET_MAX)
                ),
            ));
        }
        if s.slo.objectives.is_empty() {
            return Err(PlanError::value("--slo", "", SLO_FORMS));
        }
        self.validate_server()
    }

    /// `--server-cmd` (a command with `{port}`, where the load takes one:
    /// [`CapacityLoad::check_server_cmd`]; the record's plan holds the started server's
    /// address and PID) and `--fix-and-retry` (UDP only: the verdict rules and their fixes
    /// read a UDP run).
    fn validate_server(&self) -> Result<(), PlanError> {
        if let Some(cmd) = &self.server_cmd {
            self.load.check_server_cmd()?;
            if !cmd.contains("{port}") {
                return Err(PlanError::value(
                    "--server-cmd",
                    format!("\"{cmd}\""),
                    "a shell command containing {port}, where tpslab puts the port to listen on",
                ));
            }
        }
        if self.fix_and_retry && self.load.udp().is_none() {
            return Err(PlanError::Conflict(format!(
                "--fix-and-retry applies the fix the verdict at a failing UDP step recommends: capacity {} names no fix tpslab can apply",
                self.command()
            )));
        }
        Ok(())
    }
}

impl TcpStep {
    /// What the engine makes the protocol's exchange of.
    pub fn wire(&self) -> Wire<'_> {
        Wire {
            proto: &self.proto,
            target: self.target,
            request: &self.request,
            framing: &self.framing,
            seq_field: None,
        }
    }

    /// Checks the step, labelled with `capacity tcp`'s flags: `--step-duration` within
    /// 100ms..=1h, `--warmup` 0 or a run of its own (at least 100ms) up to 1h, a rate
    /// above 0 up to the HTTP limit (`--start-rate`), `--connections` 1..=10,000,
    /// `--timeout` 1ms..=10min, `--load-threads` within its limit, a request of at least
    /// one byte, a stream protocol other than HTTP and its checks ([`Proto::validate`]),
    /// and no `--pid` with tpslab's own server (it is watched anyway).
    pub fn validate(&self) -> Result<(), PlanError> {
        use crate::limits::{HTTP_RATE, LOAD_THREADS, RAMP_USERS, REQUEST_TIMEOUT};
        STEP_DURATION.check("--step-duration", self.duration)?;
        load::check_request_warmup(self.warmup)?;
        if !(self.rate > 0.0 && self.rate <= HTTP_RATE) {
            return Err(PlanError::value(
                "--start-rate",
                self.rate,
                format!("above 0 and at most {HTTP_RATE} requests/s"),
            ));
        }
        RAMP_USERS.check("--connections", self.connections as u64)?;
        REQUEST_TIMEOUT.check("--timeout", self.timeout)?;
        if self.load_threads != 0 {
            LOAD_THREADS.check("--load-threads", self.load_threads as u64)?;
        }
        if self.request_bytes == 0 {
            return Err(PlanError::Conflict(
                "capacity tcp: a request of at least one byte".into(),
            ));
        }
        if self.proto.transport() != Transport::Stream || self.proto.http_request().is_some() {
            return Err(PlanError::Conflict(format!(
                "capacity tcp runs a request/reply protocol over TCP, not {} (capacity udp, capacity http)",
                self.proto.name()
            )));
        }
        self.proto.validate(
            self.request_bytes as usize,
            &self.framing,
            None,
            self.target,
        )?;
        if self.builtin.is_some() && self.pid.is_some() && self.target.port() == 0 {
            return Err(PlanError::Conflict(
                "--pid applies with HOST:PORT; tpslab's own server is watched anyway".into(),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "capacity_tests.rs"]
mod tests;
