//! The plan of `tpslab probe idle`: after how long of idleness a path kills a TCP
//! connection (S5), found with idle connections on a ladder of intervals, narrowed by
//! bisection.

use crate::limits::{IDLE_PROBE_CONNECTIONS, IDLE_PROBE_MAX, POOL_DURATION};
use crate::PlanError;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::time::Duration;

pub use crate::tcp::{IdleTimer, OnIdle};

/// Where the probe goes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum IdleTarget {
    /// A TCP server anywhere (no application bytes are sent to it).
    Server {
        /// Its address.
        addr: SocketAddr,
    },
    /// tpslab's lab: a listener behind the delay line's middlebox, between two
    /// throwaway namespaces.
    Lab {
        /// The middlebox's idle timeout (JSON: `idle_timeout_ns`, integer ns).
        #[serde(rename = "idle_timeout_ns", with = "crate::time::ns")]
        #[cfg_attr(feature = "schema", schemars(with = "u64"))]
        idle_timeout: Duration,
        /// What it does to a segment of a forgotten flow.
        on_idle: OnIdle,
        /// What resets its idle timer (left out of records when every packet does).
        #[serde(default, skip_serializing_if = "IdleTimer::is_any")]
        timer: IdleTimer,
    },
}

impl IdleTarget {
    /// The target of `probe idle` from its settings: `TARGET` (HOST:PORT, resolved) or
    /// `--lab-idle-timeout` with `--lab-on-idle` and `--lab-timer`, one of the two.
    /// Errors: one line.
    pub fn from_flags(
        target: Option<&str>,
        lab_idle_timeout: Option<Duration>,
        on_idle: OnIdle,
        timer: IdleTimer,
    ) -> Result<IdleTarget, PlanError> {
        let c = |m: &str| Err(PlanError::Conflict(m.into()));
        match (target, lab_idle_timeout) {
            (Some(t), None) => Ok(IdleTarget::Server {
                addr: crate::target::resolve(t)?,
            }),
            (None, Some(t)) => Ok(IdleTarget::Lab {
                idle_timeout: std::time::Duration::from_nanos(
                    t.as_nanos().min(u64::MAX as u128) as u64
                ),
                on_idle,
                timer,
            }),
            (Some(_), Some(_)) => c("give a target HOST:PORT or --lab-idle-timeout, not both"),
            (None, None) => {
                c("probe idle needs a target HOST:PORT, or --lab-idle-timeout DUR for the lab")
            }
        }
    }
}

/// A validated `probe idle` plan.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct IdlePlan {
    /// Where.
    pub target: IdleTarget,
    /// Shortest idle interval tried, whole seconds (TCP_KEEPIDLE counts seconds).
    pub min_s: u64,
    /// Longest idle interval tried, whole seconds.
    pub max_s: u64,
    /// The study stops when the timeout is known within this, seconds.
    pub resolution_s: u64,
    /// Connections open at once, the control connection included.
    pub connections: usize,
    /// Seconds between keepalive probes once the first went unanswered.
    pub keepalive_intvl_s: u64,
    /// Unanswered keepalive probes before the kernel gives up (ETIMEDOUT).
    pub keepalive_cnt: u64,
    /// UDP mappings (tpslab's responder on the far side) instead of TCP connections.
    #[serde(default)]
    pub udp: bool,
    /// TCP, with tpslab's responder on the far side: the responder's keepalive probes
    /// first (far to near), which finds middleboxes that let the near side's packets
    /// re-open a forgotten flow.
    #[serde(default)]
    pub server_first: bool,
    /// Bytes the user allows as a payload probe (`--probe-data`): connections kept open
    /// through the study that send them every second (and, with `server_first`, the
    /// responder's payload in one direction or both), to tell whether payload resets
    /// the path's timer. None: no application byte is sent (left out of the JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "Option<String>"))]
    pub probe_data: Option<ProbeData>,
    /// `--protocol`: each connection (the control's too) logs in with this database
    /// protocol as a pool's connection would, idles, then sends the protocol's no-op;
    /// the server's own goodbye is kept. None: no application byte is sent (left out of
    /// the JSON). The password is never recorded (the user and
    /// database are, in the command line the record keeps).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<crate::login::DbProtocol>,
}

/// The bytes of `--probe-data`: 1 to [`ProbeData::MAX`] bytes, written (and kept in
/// records) as text with `\n`, `\r`, `\t`, `\0`, `\\` and `\xHH` escapes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct ProbeData {
    len: u8,
    bytes: [u8; ProbeData::MAX],
}

impl ProbeData {
    /// The most bytes a probe may send.
    pub const MAX: usize = 32;

    /// The bytes of `text` (escapes as above). Errors: one line naming `--probe-data`:
    /// empty, longer than [`ProbeData::MAX`], a bad escape.
    pub fn parse(text: &str) -> Result<ProbeData, PlanError> {
        let bad = |why: &str| PlanError::value("--probe-data", text, why);
        let mut out = vec![];
        let mut it = text.bytes();
        while let Some(b) = it.next() {
            if b != b'\\' {
                out.push(b);
                continue;
            }
            out.push(match it.next() {
                Some(b'n') => b'\n',
                Some(b'r') => b'\r',
                Some(b't') => b'\t',
                Some(b'0') => 0,
                Some(b'\\') => b'\\',
                Some(b'x') => {
                    let h: Vec<u8> = it.by_ref().take(2).collect();
                    std::str::from_utf8(&h)
                        .ok()
                        .filter(|h| h.len() == 2)
                        .and_then(|h| u8::from_str_radix(h, 16).ok())
                        .ok_or_else(|| bad("escapes \\n \\r \\t \\0 \\\\ \\xHH (two hex digits)"))?
                }
                _ => return Err(bad("escapes \\n \\r \\t \\0 \\\\ \\xHH")),
            });
        }
        if out.is_empty() || out.len() > Self::MAX {
            return Err(bad("1 to 32 bytes"));
        }
        let mut bytes = [0u8; Self::MAX];
        bytes[..out.len()].copy_from_slice(&out);
        Ok(ProbeData {
            len: out.len() as u8,
            bytes,
        })
    }

    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }
}

impl std::fmt::Display for ProbeData {
    /// As text [`ProbeData::parse`] reads back: printable ASCII as is, the rest escaped.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for &b in self.bytes() {
            match b {
                b'\n' => f.write_str("\\n")?,
                b'\r' => f.write_str("\\r")?,
                b'\t' => f.write_str("\\t")?,
                b'\\' => f.write_str("\\\\")?,
                0x20..=0x7e => write!(f, "{}", b as char)?,
                _ => write!(f, "\\x{b:02x}")?,
            }
        }
        Ok(())
    }
}

impl std::fmt::Debug for ProbeData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ProbeData({self})")
    }
}

impl Serialize for ProbeData {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ProbeData {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        ProbeData::parse(&s).map_err(serde::de::Error::custom)
    }
}

fn whole_seconds(flag: &str, d: Duration) -> Result<u64, PlanError> {
    if d.subsec_nanos() != 0 || d.as_secs() == 0 {
        return Err(PlanError::value(
            flag,
            humantime::format_duration(d),
            "whole seconds, at least 1s (TCP keepalive counts seconds)",
        ));
    }
    Ok(d.as_secs())
}

impl IdlePlan {
    /// The resolution when `--resolution` is not given: 5 s, or half the range `max - min`
    /// (whole seconds) when that is less, at least 1 s (TCP keepalive counts whole
    /// seconds); a range of 1 s leaves none below it, and [`IdlePlan::new`] refuses it.
    pub fn derived_resolution(min: Duration, max: Duration) -> Duration {
        let range_s = max.as_secs().saturating_sub(min.as_secs());
        Duration::from_secs((range_s / 2).clamp(1, 5))
    }

    /// The plan from its flags: every interval in whole seconds, `min < max <=`
    /// [`IDLE_PROBE_MAX`], a resolution below the range, [`IDLE_PROBE_CONNECTIONS`].
    /// Errors name the flag and what is allowed.
    pub fn new(
        target: IdleTarget,
        min: Duration,
        max: Duration,
        resolution: Duration,
        connections: usize,
    ) -> Result<IdlePlan, PlanError> {
        let min_s = whole_seconds("--min", min)?;
        let max_s = whole_seconds("--max", max)?;
        let resolution_s = whole_seconds("--resolution", resolution)?;
        IDLE_PROBE_MAX.check("--max", max)?;
        if max_s <= min_s {
            return Err(PlanError::Conflict(format!(
                "--max {} is not above --min {}",
                humantime::format_duration(max),
                humantime::format_duration(min)
            )));
        }
        if resolution_s >= max_s - min_s {
            return Err(PlanError::Conflict(format!(
                "--resolution {} is not below the range --min {} to --max {}",
                humantime::format_duration(resolution),
                humantime::format_duration(min),
                humantime::format_duration(max)
            )));
        }
        IDLE_PROBE_CONNECTIONS.check("--connections", connections as u64)?;
        if let IdleTarget::Lab { idle_timeout, .. } = target {
            let t = idle_timeout;
            crate::limits::LAB_IDLE_TIMEOUT.check("--lab-idle-timeout", t)?;
        }
        Ok(IdlePlan {
            target,
            min_s,
            max_s,
            resolution_s,
            connections,
            keepalive_intvl_s: 1,
            keepalive_cnt: 2,
            udp: false,
            server_first: false,
            probe_data: None,
            protocol: None,
        })
    }

    /// Checks `protocol` against the rest: a login probe needs a server (not the lab)
    /// over TCP, probed from this side, without `--probe-data`. Errors: one line naming
    /// the flags.
    pub fn check_protocol(&self) -> Result<(), PlanError> {
        let Some(p) = self.protocol else {
            return Ok(());
        };
        let c = |m: String| Err(PlanError::Conflict(m));
        let name = p.name();
        if matches!(self.target, IdleTarget::Lab { .. }) {
            return c(format!(
                "--protocol {name} logs in to a server: give its HOST:PORT, not --lab-idle-timeout"
            ));
        }
        if self.udp || self.server_first {
            return c(format!("--protocol {name} logs in over TCP from this side: not with --udp or --server-first"));
        }
        if self.probe_data.is_some() {
            return c(format!(
                "--protocol {name} sends the protocol's own no-op: not with --probe-data"
            ));
        }
        Ok(())
    }

    /// The longest a probe idle for `idle_s` takes to be judged, seconds. TCP: its first
    /// keepalive probe at `idle_s`, the last unanswered one `cnt x intvl` later, and a
    /// second of grace for the path's round trip. UDP: the reply due at `idle_s`, and a
    /// second of grace.
    pub fn verdict_after_s(&self, idle_s: u64) -> u64 {
        if self.udp {
            return idle_s + 1;
        }
        idle_s + self.keepalive_cnt * self.keepalive_intvl_s + 1
    }
}

/// `probe pool`: S5 in miniature. A pool of TCP connections through the lab's middlebox
/// (which forgets flows idle for `idle_timeout` and drops their segments) to an echo
/// server; the pool validates idle connections every `validate_every`, retires those
/// idle for `max_idle` and keeps `min_idle` open; requests come every `request_every` on
/// the connection idle longest, each failing after `query_timeout` without its answer.
/// In JSON the times are the integer nanoseconds of the `_ns` fields.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PoolPlan {
    /// The middlebox's idle timeout.
    #[serde(rename = "idle_timeout_ns", with = "crate::time::ns")]
    #[cfg_attr(feature = "schema", schemars(with = "u64"))]
    pub idle_timeout: Duration,
    /// How often idle connections are tested (None: never).
    #[serde(rename = "validate_every_ns", with = "crate::time::opt_ns", default)]
    #[cfg_attr(feature = "schema", schemars(with = "Option<u64>"))]
    pub validate_every: Option<Duration>,
    /// Idle connections older than this are closed (None: never).
    #[serde(rename = "max_idle_ns", with = "crate::time::opt_ns", default)]
    #[cfg_attr(feature = "schema", schemars(with = "Option<u64>"))]
    pub max_idle: Option<Duration>,
    /// Connections kept open however idle.
    pub min_idle: usize,
    /// Requests sent.
    pub requests: usize,
    /// Time between requests.
    #[serde(rename = "request_every_ns", with = "crate::time::ns")]
    #[cfg_attr(feature = "schema", schemars(with = "u64"))]
    pub request_every: Duration,
    /// A request (or a validation) without its answer in this long fails.
    #[serde(rename = "query_timeout_ns", with = "crate::time::ns")]
    #[cfg_attr(feature = "schema", schemars(with = "u64"))]
    pub query_timeout: Duration,
    /// A real path instead of the lab: an echo server (or a proxy in front of one) at
    /// this address; `idle_timeout` is then the path's timeout as stated (what `probe
    /// idle` measured), used to mark requests on connections idle past it. Left out of
    /// records of lab runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<SocketAddr>,
    /// `--protocol` (with `target` only): each pooled connection logs in with this
    /// database protocol as `probe idle --protocol` does (the same credentials), and its
    /// requests and validations are the protocol's no-op, so a pooler's or server's idle
    /// timeout for logged-in connections applies to them. None: the echo's lines (left
    /// out of the JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<crate::login::DbProtocol>,
}

impl PoolPlan {
    /// The timeout of `probe pool` from its flags: `--lab-idle-timeout` sets the lab's
    /// middlebox (no target); with a real path (`real`: a HOST:PORT given)
    /// `--path-idle-timeout` states that path's timeout (what `probe idle` measured).
    /// Errors: one line naming the flag that fits, when the other one (or neither) is
    /// given.
    pub fn timeout_from_flags(
        real: bool,
        lab: Option<Duration>,
        path: Option<Duration>,
    ) -> Result<Duration, PlanError> {
        let c = |m: &str| Err(PlanError::Conflict(m.into()));
        match (real, lab, path) {
            (false, Some(t), None) | (true, None, Some(t)) => Ok(t),
            (false, _, Some(_)) => c("--path-idle-timeout states a real path's timeout: give HOST:PORT with it, or --lab-idle-timeout for the lab"),
            (true, Some(_), _) => c("--lab-idle-timeout sets the lab's middlebox: with HOST:PORT state the path's timeout as --path-idle-timeout DUR (what probe idle measured)"),
            (false, None, None) => c("probe pool needs --lab-idle-timeout DUR (the lab), or HOST:PORT with --path-idle-timeout DUR"),
            (true, None, None) => c("probe pool HOST:PORT needs --path-idle-timeout DUR: the path's idle timeout, as probe idle measured it"),
        }
    }

    /// Checks every figure: timeouts 100ms..=10m, at most 64 connections and 1000
    /// requests, a run of at most 1 h; `protocol` only with a target. Errors name the
    /// flag.
    pub fn validate(&self) -> Result<(), PlanError> {
        let d = |flag: &str, v: Duration| POOL_DURATION.check(flag, v).map(|_| ());
        let timeout_flag = if self.target.is_some() {
            "--path-idle-timeout"
        } else {
            "--lab-idle-timeout"
        };
        d(timeout_flag, self.idle_timeout)?;
        d("--request-every", self.request_every)?;
        d("--query-timeout", self.query_timeout)?;
        if let Some(v) = self.validate_every {
            d("--validate-every", v)?;
        }
        if let Some(v) = self.max_idle {
            d("--max-idle", v)?;
        }
        if let (Some(p), None) = (self.protocol, self.target) {
            return Err(PlanError::Conflict(format!(
                "--protocol {} logs in to a server: give its HOST:PORT, not --lab-idle-timeout",
                p.name()
            )));
        }
        crate::limits::POOL_CONNECTIONS.check("--min-idle", self.min_idle as u64)?;
        crate::limits::POOL_REQUESTS.check("--requests", self.requests as u64)?;
        let total = self.request_every.as_nanos() * self.requests as u128;
        if total > 3600 * 1_000_000_000 {
            return Err(PlanError::Conflict(
                "--requests x --request-every is more than 1 h".into(),
            ));
        }
        Ok(())
    }
}

/// `probe idle-responder`: where it answers and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponderPlan {
    /// The address it answers on, UDP and TCP (port 0: one the kernel picks).
    pub bind: SocketAddr,
    /// How long it answers (None: until stopped).
    pub duration: Option<Duration>,
}

impl ResponderPlan {
    /// The plan of `bind` (ADDR:PORT as written) and `--duration`. Errors: an address that
    /// is not ADDR:PORT, a duration outside [`crate::limits::WATCH_DURATION`].
    pub fn new(bind: &str, duration: Option<Duration>) -> Result<ResponderPlan, PlanError> {
        let bind = bind.parse().map_err(|_| {
            PlanError::Conflict(format!(
                "bind \"{bind}\": allowed ADDR:PORT, e.g. 0.0.0.0:9100"
            ))
        })?;
        if let Some(d) = duration {
            crate::limits::WATCH_DURATION.check("--duration", d)?;
        }
        Ok(ResponderPlan { bind, duration })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server() -> IdleTarget {
        IdleTarget::Server {
            addr: "127.0.0.1:5432".parse().unwrap(),
        }
    }

    fn s(x: u64) -> Duration {
        Duration::from_secs(x)
    }

    #[test]
    fn the_derived_resolution_fits_below_the_range_it_can() {
        let r = IdlePlan::derived_resolution;
        // `--min 1s --max 5s`: 2s, where the plain 5s would exceed the range.
        assert_eq!(r(s(1), s(5)), s(2));
        assert_eq!(r(s(10), s(3600)), s(5));
        // A range of 1s leaves no whole second below it: 1s, refused naming itself.
        assert_eq!(r(s(1), s(2)), s(1));
        assert_eq!(r(s(5), s(2)), s(1));
    }

    #[test]
    fn limits_and_errors() {
        let p = IdlePlan::new(server(), s(10), s(3600), s(5), 16).unwrap();
        assert_eq!((p.min_s, p.max_s, p.resolution_s), (10, 3600, 5));
        assert_eq!(p.verdict_after_s(100), 103);
        let e = |min, max, res, c| {
            IdlePlan::new(server(), min, max, res, c)
                .unwrap_err()
                .to_string()
        };
        assert_eq!(e(s(60), s(30), s(1), 16), "--max 30s is not above --min 1m");
        assert_eq!(
            e(s(10), s(20), s(10), 16),
            "--resolution 10s is not below the range --min 10s to --max 20s"
        );
        assert!(e(Duration::from_millis(500), s(20), s(1), 16)
            .starts_with("--min 500ms: allowed whole seconds"));
        assert!(e(s(1), s(3 * 3600), s(1), 16).starts_with("--max 3h: allowed"));
        assert!(e(s(1), s(30), s(1), 2).starts_with("--connections 2: allowed 3..=256"));
        let lab = IdleTarget::Lab {
            idle_timeout: std::time::Duration::ZERO,
            on_idle: OnIdle::Drop,
            timer: IdleTimer::Any,
        };
        assert!(IdlePlan::new(lab, s(1), s(10), s(1), 8)
            .unwrap_err()
            .to_string()
            .starts_with("--lab-idle-timeout 0s: allowed"));
    }

    #[test]
    fn probe_data_reads_its_escapes_and_writes_them_back() {
        let p = ProbeData::parse("PING\\r\\n").unwrap();
        assert_eq!(p.bytes(), b"PING\r\n");
        assert_eq!(p.to_string(), "PING\\r\\n");
        let p = ProbeData::parse("\\x00\\xffa\\\\").unwrap();
        assert_eq!(p.bytes(), [0, 0xff, b'a', b'\\']);
        assert_eq!(ProbeData::parse(&p.to_string()).unwrap(), p);
        let json = serde_json::to_string(&p).unwrap();
        assert_eq!(serde_json::from_str::<ProbeData>(&json).unwrap(), p);
        let e = |t: &str| ProbeData::parse(t).unwrap_err().to_string();
        assert!(e("").contains("allowed 1 to 32 bytes"), "{}", e(""));
        assert!(e(&"x".repeat(33)).contains("allowed 1 to 32 bytes"));
        assert!(e("a\\q").contains("allowed escapes"));
        assert!(e("\\x4").contains("two hex digits"));
    }

    #[test]
    fn a_pool_timeout_is_the_labs_or_a_real_paths() {
        let f = PoolPlan::timeout_from_flags;
        assert_eq!(f(false, Some(s(3)), None).unwrap(), s(3));
        assert_eq!(f(true, None, Some(s(4))).unwrap(), s(4));
        let e = |real, lab, path| f(real, lab, path).unwrap_err().to_string();
        assert!(e(true, Some(s(3)), None).starts_with("--lab-idle-timeout sets the lab's"));
        assert!(e(false, None, Some(s(3))).starts_with("--path-idle-timeout states a real"));
        assert!(e(false, None, None).starts_with("probe pool needs --lab-idle-timeout"));
        assert!(e(true, None, None).starts_with("probe pool HOST:PORT needs --path-idle-timeout"));
    }

    #[test]
    fn a_responder_answers_on_an_address_for_a_while() {
        let p = ResponderPlan::new("0.0.0.0:9100", Some(s(5))).unwrap();
        assert_eq!((p.bind.port(), p.duration), (9100, Some(s(5))));
        assert_eq!(
            ResponderPlan::new("nowhere", None).unwrap_err().to_string(),
            "bind \"nowhere\": allowed ADDR:PORT, e.g. 0.0.0.0:9100"
        );
        assert!(ResponderPlan::new("127.0.0.1:0", Some(Duration::ZERO))
            .unwrap_err()
            .to_string()
            .starts_with("--duration 0s: allowed"));
    }
}
