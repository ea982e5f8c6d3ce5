//! The plan of `tpslab tcp`: a bulk flow to a sink, from a source, across tpslab's delay
//! line between two namespaces, or the flows of another process watched; the emulated
//! link; and the one flow the engine runs ([`FlowPlan`]).

use crate::limits::{
    check_kept_samples, LAB_RTT, MAX_LINE_PACKETS, SAMPLE_INTERVAL, TCP_BUFFER_BYTES, TCP_DURATION,
    WRITE_BYTES,
};
use crate::PlanError;

mod flags;
pub use flags::{parse_loss, ServeTcpFlags, TcpFlags};
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::time::Duration;

/// Checks a TCP buffer size for `flag`, bytes (read by [`crate::units::parse_size`]),
/// against [`TCP_BUFFER_BYTES`]; the error shows it in its unit
/// ([`crate::units::format_size`]: `2GiB`, as typed).
pub fn check_buffer(flag: &str, b: u64) -> Result<u64, PlanError> {
    if !(TCP_BUFFER_BYTES.min..=TCP_BUFFER_BYTES.max).contains(&b) {
        return Err(PlanError::value(
            flag,
            crate::units::format_size(b),
            "1KiB to 1023MiB",
        ));
    }
    Ok(b)
}

/// The emulated link, the same in both directions.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct LinkConfig {
    /// One-way delay (the RTT is twice this) (JSON: `delay_ns`, integer ns).
    #[serde(rename = "delay_ns", with = "crate::time::ns")]
    #[cfg_attr(feature = "schema", schemars(with = "u64"))]
    pub delay: Duration,
    /// Serialisation rate per direction, bits/s; `None` = as fast as the forwarder goes.
    pub rate_bps: Option<f64>,
    /// Probability that a packet is dropped, 0..1, each direction independently.
    pub loss: f64,
    /// Packets that may wait for the rate limiter before tail drop (a router's buffer).
    pub queue_packets: usize,
    /// MTU of both TUN devices, bytes.
    pub mtu: u32,
    /// Seed of the loss generator (runs are repeatable).
    pub seed: u64,
    /// The middlebox's idle timeout: a flow idle for longer is forgotten (None: no
    /// middlebox). Left out of records when None (JSON: `idle_timeout_ns`).
    #[serde(
        rename = "idle_timeout_ns",
        with = "crate::time::opt_ns",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "schema", schemars(with = "Option<u64>"))]
    pub idle_timeout: Option<Duration>,
    /// What the middlebox does to a later segment of a forgotten TCP flow (left out of
    /// records without a middlebox).
    #[serde(default, skip_serializing_if = "OnIdle::is_drop")]
    pub on_idle: OnIdle,
    /// What resets the middlebox's idle timer (left out of records when every packet
    /// does, the default).
    #[serde(default, skip_serializing_if = "IdleTimer::is_any")]
    pub timer: IdleTimer,
}

/// What the lab's middlebox does to a TCP segment (not a SYN) of a flow it forgot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum OnIdle {
    /// Drop it silently (most firewalls and load balancers).
    #[default]
    Drop,
    /// Answer with a RST to both ends ("reset on idle").
    Reset,
    /// Let a segment from the near side open the flow again (loose pickup, as conntrack
    /// and many NATs do); drop one from the far side.
    Reopen,
    /// End the flow itself when it times out, with a FIN to both ends (a proxy's idle
    /// timeout, haproxy's `timeout client`/`timeout server`), then drop its segments.
    Fin,
}

/// What resets the lab middlebox's idle timer of a flow.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum IdleTimer {
    /// Every packet of the flow, TCP keepalive probes and bare ACKs included (conntrack,
    /// most NATs and stateful firewalls).
    #[default]
    Any,
    /// Segments or datagrams that carry payload, in either direction (a proxy that
    /// counts application data only).
    Payload,
    /// Payload from the near side (the client) only: the far side's data does not keep
    /// the flow alive.
    NearPayload,
}

impl IdleTimer {
    /// Whether it is the default, [`IdleTimer::Any`].
    pub fn is_any(&self) -> bool {
        *self == IdleTimer::Any
    }
}

impl OnIdle {
    /// Whether it is the default, [`OnIdle::Drop`].
    pub fn is_drop(&self) -> bool {
        *self == OnIdle::Drop
    }
}

impl Default for LinkConfig {
    fn default() -> Self {
        LinkConfig {
            delay: Duration::ZERO,
            rate_bps: None,
            loss: 0.0,
            queue_packets: 1000,
            mtu: 1500,
            seed: 1,
            idle_timeout: None,
            on_idle: OnIdle::Drop,
            timer: IdleTimer::Any,
        }
    }
}

impl LinkConfig {
    /// Checks ranges; the error names the bad value and what is allowed.
    pub fn check(&self) -> Result<(), String> {
        if self.delay > Duration::from_secs(10) {
            return Err(format!(
                "delay {} ns: at most 10 s one way",
                self.delay.as_nanos()
            ));
        }
        if let Some(r) = self.rate_bps {
            if !(r.is_finite() && (8_000.0..=100e9).contains(&r)) {
                return Err(format!("rate {r} bit/s: allowed 8 kbit/s to 100 Gbit/s"));
            }
        }
        if !(0.0..1.0).contains(&self.loss) {
            return Err(format!(
                "loss {}: allowed 0 up to (not including) 1",
                self.loss
            ));
        }
        if !(1..=MAX_LINE_PACKETS).contains(&self.queue_packets) {
            return Err(format!(
                "queue {} packets: allowed 1 to {MAX_LINE_PACKETS}",
                self.queue_packets
            ));
        }
        if !(576..=65535).contains(&self.mtu) {
            return Err(format!("mtu {}: allowed 576 to 65535", self.mtu));
        }
        Ok(())
    }

    /// The round-trip time the link adds, ns.
    pub fn rtt_ns(&self) -> u64 {
        crate::time::nanos(&self.delay).saturating_mul(2)
    }
}

/// A bulk flow to run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct FlowPlan {
    /// Where the sink listens.
    pub target: SocketAddr,
    /// How long to send (JSON: `duration_ns`, integer ns).
    #[serde(rename = "duration_ns", with = "crate::time::ns")]
    #[cfg_attr(feature = "schema", schemars(with = "u64"))]
    pub duration: Duration,
    /// TCP_INFO sampling interval (JSON: `interval_ns`).
    #[serde(rename = "interval_ns", with = "crate::time::ns")]
    #[cfg_attr(feature = "schema", schemars(with = "u64"))]
    pub interval: Duration,
    /// SO_SNDBUF, bytes (set before connect); `None` = autotuning (net.ipv4.tcp_wmem).
    pub sndbuf: Option<u64>,
    /// Bytes per write() call.
    pub write_bytes: usize,
    /// Receive instead of send (from a source, e.g. `tpslab serve tcp --mode source`);
    /// TCP_INFO is then sampled on the receiving socket.
    #[serde(default)]
    pub reverse: bool,
    /// SO_RCVBUF, bytes (set before connect); `None` = autotuning (net.ipv4.tcp_rmem).
    #[serde(default)]
    pub rcvbuf: Option<u64>,
}

/// The times of a `tcp` plan, checked before anything else (a target is resolved only
/// for a plan whose times can run): `--duration`, `--interval`, at most
/// [`crate::limits::MAX_KEPT_SAMPLES`] samples kept, and a `--skip` that leaves two
/// samples to judge.
pub fn check_times(
    duration: Duration,
    interval: Duration,
    skip: Duration,
) -> Result<(), PlanError> {
    TCP_DURATION.check("--duration", duration)?;
    SAMPLE_INTERVAL.check("--interval", interval)?;
    // Every TCP_INFO sample is kept for the analysis and the record.
    check_kept_samples(duration, interval)?;
    if skip.saturating_add(interval.saturating_mul(2)) >= duration {
        return Err(PlanError::Conflict(format!(
            "--skip {} leaves less than two samples of --duration {}: shorten --skip or lengthen --duration",
            humantime::format_duration(skip),
            humantime::format_duration(duration)
        )));
    }
    Ok(())
}

/// Checks `--write-size`, bytes, against [`WRITE_BYTES`]; the error shows it in its unit
/// ([`crate::units::format_size`]).
pub fn check_write_size(b: u64) -> Result<u64, PlanError> {
    if !(WRITE_BYTES.min..=WRITE_BYTES.max).contains(&b) {
        return Err(PlanError::value(
            "--write-size",
            crate::units::format_size(b),
            "1 byte to 16MiB",
        ));
    }
    Ok(b)
}

/// What `tpslab tcp` does.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum TcpMode {
    /// Send to a sink at `target` and judge what held the flow.
    Send {
        /// The sink, HOST:PORT resolved.
        target: SocketAddr,
    },
    /// Receive from a source at `target` and judge this side's receive window.
    Reverse {
        /// The source.
        target: SocketAddr,
    },
    /// Send across tpslab's delay line between two new network namespaces; with a target
    /// rate not reached because of a buffer, run again with the recommended buffers
    /// unless `verify` is off.
    Lab {
        /// The emulated link.
        link: LinkConfig,
        /// The sink's SO_RCVBUF, bytes; `None` = autotuning.
        sink_rcvbuf: Option<u64>,
        /// Re-run with the recommended buffers when the target rate was missed.
        verify: bool,
    },
    /// Watch the established flows of a process and/or with a port at either end.
    Watch {
        /// The process.
        pid: Option<u32>,
        /// The port.
        port: Option<u16>,
    },
}

/// The whole plan of `tpslab tcp`, validated by [`TcpPlan::validate`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TcpPlan {
    /// What to do.
    #[serde(flatten)]
    pub mode: TcpMode,
    /// How long (JSON: `duration_ns`, integer ns).
    #[serde(rename = "duration_ns", with = "crate::time::ns")]
    #[cfg_attr(feature = "schema", schemars(with = "u64"))]
    pub duration: Duration,
    /// TCP_INFO sampling interval (JSON: `interval_ns`).
    #[serde(rename = "interval_ns", with = "crate::time::ns")]
    #[cfg_attr(feature = "schema", schemars(with = "u64"))]
    pub interval: Duration,
    /// The start of the flow (slow start) left out of the analysis (JSON: `skip_ns`).
    #[serde(rename = "skip_ns", with = "crate::time::ns")]
    #[cfg_attr(feature = "schema", schemars(with = "u64"))]
    pub skip: Duration,
    /// The sender's SO_SNDBUF, bytes; `None` = autotuning.
    pub sndbuf: Option<u64>,
    /// This side's SO_RCVBUF with `Reverse`, bytes; `None` = autotuning.
    pub rcvbuf: Option<u64>,
    /// Bytes per write().
    pub write_bytes: u64,
    /// The rate the flow should reach, bits/s.
    pub target_rate_bps: Option<f64>,
}

impl TcpPlan {
    /// The flow the engine runs for this plan toward `target` with SO_SNDBUF `sndbuf`.
    pub fn flow(&self, target: SocketAddr, sndbuf: Option<u64>) -> FlowPlan {
        FlowPlan {
            target,
            duration: self.duration,
            interval: self.interval,
            sndbuf,
            write_bytes: self.write_bytes as usize,
            reverse: matches!(self.mode, TcpMode::Reverse { .. }),
            rcvbuf: self.rcvbuf,
        }
    }

    /// Checks every limit and combination; the error names the flag and what is allowed.
    pub fn validate(&self) -> Result<(), PlanError> {
        check_times(self.duration, self.interval, self.skip)?;
        for (flag, v) in [("--sndbuf", self.sndbuf), ("--rcvbuf", self.rcvbuf)] {
            if let Some(v) = v {
                TCP_BUFFER_BYTES.check(flag, v)?;
            }
        }
        WRITE_BYTES.check("--write-size", self.write_bytes)?;
        if let Some(r) = self.target_rate_bps {
            if !(r.is_finite() && r > 0.0) {
                return Err(PlanError::value(
                    "--target-rate",
                    r,
                    "a positive rate such as 80mbit",
                ));
            }
        }
        let conflict = |m: &str| Err(PlanError::Conflict(m.into()));
        match self.mode {
            TcpMode::Send { .. } => {
                if self.rcvbuf.is_some() {
                    return conflict("--rcvbuf applies with --reverse (this side receiving); the sink's buffer is set on the sink");
                }
            }
            TcpMode::Reverse { .. } => {
                if self.sndbuf.is_some() {
                    return conflict("--sndbuf is the sender's: with --reverse the sender is the source (tpslab serve tcp --mode source --sndbuf SIZE)");
                }
                if self.target_rate_bps.is_some() {
                    return conflict("--target-rate applies to sending; with --reverse only this side's receive window is judged");
                }
            }
            TcpMode::Lab {
                link, sink_rcvbuf, ..
            } => {
                if self.rcvbuf.is_some() {
                    return conflict(
                        "--reverse and --rcvbuf apply with a TARGET, not in the lab yet",
                    );
                }
                LAB_RTT.check("--lab-rtt", Duration::from_nanos(link.rtt_ns()))?;
                link.check().map_err(|e| {
                    PlanError::Conflict(format!("lab link: {e} (--lab-rate, --lab-queue)"))
                })?;
                if let Some(v) = sink_rcvbuf {
                    TCP_BUFFER_BYTES.check("--sink-rcvbuf", v)?;
                }
            }
            TcpMode::Watch { pid, port } => {
                if pid.is_none() && port.is_none() {
                    return conflict("watching needs --watch-pid PID or --watch-port PORT");
                }
                if self.sndbuf.is_some() || self.rcvbuf.is_some() || self.target_rate_bps.is_some()
                {
                    return conflict("--sndbuf, --rcvbuf and --target-rate do not apply when watching flows of another process");
                }
            }
        }
        Ok(())
    }
}

/// What `tpslab serve tcp` does with its connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ServeTcpMode {
    /// Read and discard everything.
    Sink,
    /// Write a stream to every connection.
    Source,
    /// Framed request/response: reply with each request unchanged.
    Echo,
    /// Framed request/response, S1's work: replace every "ping" with "pong".
    Replace,
    /// HTTP/1.1 keep-alive request/response (`serve http`): 200 with the request's body,
    /// "ping"s replaced.
    Http,
}

/// The plan of `tpslab serve tcp`, validated by [`ServeTcpPlan::validate`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ServeTcpPlan {
    /// Address to listen on (port 0: any free port).
    pub listen: SocketAddr,
    /// What to do with the bytes.
    pub mode: ServeTcpMode,
    /// SO_RCVBUF of each connection (sink), bytes; `None` = autotuning.
    pub rcvbuf: Option<u64>,
    /// SO_SNDBUF of each connection (source), bytes; `None` = autotuning.
    pub sndbuf: Option<u64>,
    /// Echo/replace: CPU work per request (busy loop) (JSON: `work_ns`, integer ns).
    #[serde(rename = "work_ns", with = "crate::time::ns")]
    #[cfg_attr(feature = "schema", schemars(with = "u64"))]
    pub work: Duration,
    /// Echo/replace: waiting per request (a sleep) (JSON: `serial_ns`).
    #[serde(rename = "serial_ns", with = "crate::time::ns")]
    #[cfg_attr(feature = "schema", schemars(with = "u64"))]
    pub serial: Duration,
    /// Echo/replace: the waiting under one process-wide lock.
    pub serialize: bool,
    /// Echo/replace: 0 = a thread per connection; N = N epoll workers.
    pub threads: usize,
    /// Stop after this long; `None` = until SIGINT/SIGTERM (JSON: `duration_ns`).
    #[serde(rename = "duration_ns", with = "crate::time::opt_ns", default)]
    #[cfg_attr(feature = "schema", schemars(with = "Option<u64>"))]
    pub duration: Option<Duration>,
}

impl ServeTcpPlan {
    /// Whether requests are answered (echo, replace) rather than a stream moved.
    pub fn request_response(&self) -> bool {
        matches!(
            self.mode,
            ServeTcpMode::Echo | ServeTcpMode::Replace | ServeTcpMode::Http
        )
    }

    /// Checks every limit and combination; the error names the flag and what is allowed.
    pub fn validate(&self) -> Result<(), PlanError> {
        let conflict = |m: String| Err(PlanError::Conflict(m));
        for (flag, v) in [("--rcvbuf", self.rcvbuf), ("--sndbuf", self.sndbuf)] {
            if let Some(v) = v {
                TCP_BUFFER_BYTES.check(flag, v)?;
            }
        }
        if self.rcvbuf.is_some() && self.mode != ServeTcpMode::Sink {
            return conflict("--rcvbuf applies to --mode sink".into());
        }
        if self.sndbuf.is_some() && self.mode != ServeTcpMode::Source {
            return conflict("--sndbuf applies to --mode source".into());
        }
        if !self.request_response() {
            for (flag, set) in [
                ("--work", !self.work.is_zero()),
                ("--serial", !self.serial.is_zero()),
                ("--serialize", self.serialize),
                ("--threads", self.threads != 0),
            ] {
                if set {
                    return conflict(format!(
                        "{flag} applies to --mode echo or replace, not sink or source"
                    ));
                }
            }
        }
        crate::limits::WORK.check("--work", self.work)?;
        crate::limits::SERIAL.check("--serial", self.serial)?;
        if self.serialize && self.serial.is_zero() {
            return conflict(
                "--serialize needs --serial DURATION (the part of each request run under the lock)"
                    .into(),
            );
        }
        if self.threads > 1024 {
            return Err(PlanError::value(
                "--threads",
                self.threads,
                "0 (one per connection) to 1024",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "tcp_tests.rs"]
mod tests;
