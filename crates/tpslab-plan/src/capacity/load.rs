//! The capacity search's registry of step loads: the one place in tpslab-plan that
//! matches on a [`CapacityLoad`] (the run's is `tpslab-run/src/capacity.rs`, where each
//! gets its engine; `tests/suite/architecture.rs` checks there are no others outside the
//! renderers). Each variant's window, warm-up, drain, target, words, rate limit and
//! checks, so that the search and its plan ask the load instead of matching on it.

use std::net::SocketAddr;
use std::time::Duration;

use super::{CapacityLoad, STEP_DURATION, WARMUP};
use crate::limits::{HTTP_LOAD_DURATION, HTTP_RATE, LOAD_DURATION, MAX_RATE_PPS};
use crate::udp::UdpRunPlan;
use crate::PlanError;

impl CapacityLoad {
    /// The step's measured window.
    pub fn window(&self) -> Duration {
        match self {
            CapacityLoad::Udp(r) => r.load.duration,
            CapacityLoad::Http(h) => h.load.duration,
            CapacityLoad::Tcp(t) => t.duration,
        }
    }

    /// The warm-up before each window, at the step's rate (0: none).
    pub fn warmup(&self) -> Duration {
        match self {
            CapacityLoad::Udp(r) => r.load.warmup,
            CapacityLoad::Http(h) => h.warmup,
            CapacityLoad::Tcp(t) => t.warmup,
        }
    }

    /// The wait for late replies after a step's last send: `--drain` (UDP); the grace
    /// for outstanding requests, `--timeout` up to 2 s, after the warm-up's and the
    /// window's runs each (HTTP, TCP).
    pub fn drain(&self) -> Duration {
        let timeout = match self {
            CapacityLoad::Udp(r) => return r.load.drain,
            CapacityLoad::Http(h) => h.load.timeout,
            CapacityLoad::Tcp(t) => t.timeout,
        };
        let grace = timeout.min(Duration::from_secs(2));
        if self.warmup().is_zero() {
            grace
        } else {
            2 * grace
        }
    }

    /// The target's address (port 0 until a server the search starts has its own).
    pub fn target(&self) -> SocketAddr {
        match self {
            CapacityLoad::Udp(r) => r.load.target,
            CapacityLoad::Http(h) => h.load.target,
            CapacityLoad::Tcp(t) => t.target,
        }
    }

    /// The words after `capacity` that run it: `udp`, `http`, or the TCP step's
    /// ([`crate::proto::Proto::command`]: `tcp`, `tcp --protocol redis`).
    pub fn command(&self) -> &'static str {
        match self {
            CapacityLoad::Tcp(t) => t.proto.command(),
            _ => self.protocol(),
        }
    }

    /// The protocol's word: `udp`, `http`, or the TCP step's protocol's
    /// ([`crate::proto::Proto::name`]: `tcp` for framed requests).
    pub fn protocol(&self) -> &'static str {
        match self {
            CapacityLoad::Udp(_) => "udp",
            CapacityLoad::Http(_) => "http",
            CapacityLoad::Tcp(t) => t.proto.name(),
        }
    }

    /// The highest rate a step may be asked for: datagrams a second (UDP,
    /// [`MAX_RATE_PPS`]) or requests a second ([`HTTP_RATE`]).
    pub fn rate_limit(&self) -> f64 {
        match self {
            CapacityLoad::Udp(_) => MAX_RATE_PPS,
            CapacityLoad::Http(_) | CapacityLoad::Tcp(_) => HTTP_RATE,
        }
    }

    /// The UDP run of a UDP search (its datagrams size the buffer verdict's fix, and only
    /// its verdict names a fix `--fix-and-retry` applies); None for requests.
    pub fn udp(&self) -> Option<&UdpRunPlan> {
        match self {
            CapacityLoad::Udp(r) => Some(r),
            CapacityLoad::Http(_) | CapacityLoad::Tcp(_) => None,
        }
    }

    /// Whether the steps run tpslab's own reference server (`capacity tcp` without a
    /// target), whose port and PID are drawn anew each run.
    pub fn runs_builtin_server(&self) -> bool {
        matches!(self, CapacityLoad::Tcp(t) if t.builtin.is_some())
    }

    /// Points the load at a server the search started: its address, and its PID as the
    /// process watched (an HTTP load takes no started server: unchanged).
    pub fn on_server(&mut self, addr: SocketAddr, pid: u32) {
        match self {
            CapacityLoad::Udp(r) => {
                r.load.target = addr;
                r.target_pid = Some(pid);
            }
            CapacityLoad::Tcp(t) => {
                t.target = addr;
                t.pid = Some(pid);
            }
            CapacityLoad::Http(_) => {}
        }
    }

    /// Whether `--server-cmd` applies: a UDP or TCP server tpslab starts, not with
    /// `capacity http` (it loads a server already running) nor beside tpslab's own TCP
    /// server.
    pub(super) fn check_server_cmd(&self) -> Result<(), PlanError> {
        match self {
            CapacityLoad::Http(_) => Err(PlanError::Conflict(
                "--server-cmd starts a UDP or TCP server: capacity http loads a server already running".into(),
            )),
            CapacityLoad::Tcp(t) if t.builtin.is_some() => Err(PlanError::Conflict(
                "--server-cmd starts the user's server: the --server-* settings of tpslab's own do not apply".into(),
            )),
            CapacityLoad::Udp(_) | CapacityLoad::Tcp(_) => Ok(()),
        }
    }

    /// Checks the load as its own command does, labelled with `capacity`'s flags
    /// (`--step-duration` for the window, `--start-rate` for the rate, `--threads` for a
    /// UDP run's sender threads), the window within 100ms..=1h, and a warm-up of 0 or
    /// (HTTP, TCP: a run of its own) at least [`HTTP_LOAD_DURATION`]'s least, up to 1h.
    pub(super) fn validate(&self) -> Result<(), PlanError> {
        let relabel = |e: PlanError| {
            e.relabel(|l| match l {
                "--duration" => "--step-duration".into(),
                "--rate" => "--start-rate".into(),
                l => l.into(),
            })
        };
        match self {
            CapacityLoad::Udp(r) => {
                let load = &r.load;
                STEP_DURATION.check("--step-duration", load.duration)?;
                LOAD_DURATION.check("--step-duration", load.duration)?;
                WARMUP.check("--warmup", load.warmup)?;
                load.validate().map_err(|e| {
                    relabel(e).relabel(|l| match l {
                        "--load-threads" => "--threads".into(),
                        l => l.into(),
                    })
                })
            }
            CapacityLoad::Http(h) => {
                STEP_DURATION.check("--step-duration", h.load.duration)?;
                check_request_warmup(h.warmup)?;
                h.load.validate().map_err(relabel)
            }
            CapacityLoad::Tcp(t) => t.validate(),
        }
    }
}

/// A requests' step's warm-up (HTTP, TCP): within [`WARMUP`], and 0 (none) or a run of its
/// own, at least [`HTTP_LOAD_DURATION`]'s least.
pub(super) fn check_request_warmup(warmup: Duration) -> Result<(), PlanError> {
    WARMUP.check("--warmup", warmup)?;
    let least = HTTP_LOAD_DURATION.min;
    if !warmup.is_zero() && warmup < least {
        return Err(PlanError::value(
            "--warmup",
            humantime::format_duration(warmup),
            format!(
                "0 (none) or {}..={} (a run of its own)",
                humantime::format_duration(least),
                humantime::format_duration(WARMUP.max)
            ),
        ));
    }
    Ok(())
}
