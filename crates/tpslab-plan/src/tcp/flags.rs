//! `tpslab tcp`'s settings as given (the command line's values, before they are checked)
//! and the validated [`TcpPlan`] they make: which mode the settings choose and which
//! settings each mode refuses.

use super::{check_buffer, check_times, check_write_size, LinkConfig, TcpMode, TcpPlan};
use super::{ServeTcpMode, ServeTcpPlan};
use crate::limits::LAB_RTT;
use crate::target::{check_pid, resolve};
use crate::PlanError;
use std::net::SocketAddr;
use std::time::Duration;

/// The settings of `tpslab tcp` as given; [`TcpFlags::plan`] checks them. Sizes in bytes,
/// rates in bits/s; a value left at its default is the default's value here.
#[derive(Debug, Clone, Default)]
pub struct TcpFlags {
    /// `TARGET`, HOST:PORT as typed.
    pub target: Option<String>,
    /// `--duration`.
    pub duration: Duration,
    /// `--interval`.
    pub interval: Duration,
    /// `--skip`.
    pub skip: Duration,
    /// `--sndbuf`.
    pub sndbuf: Option<u64>,
    /// `--write-size` (default 128KiB).
    pub write_size: u64,
    /// `--reverse`.
    pub reverse: bool,
    /// `--rcvbuf`.
    pub rcvbuf: Option<u64>,
    /// `--watch-pid`.
    pub watch_pid: Option<u32>,
    /// `--watch-port`.
    pub watch_port: Option<u16>,
    /// `--target-rate`.
    pub target_rate: Option<f64>,
    /// `--fail-on` given (a gate does not apply to watched flows).
    pub fail_on: bool,
    /// `--strict` given.
    pub strict: bool,
    /// `--lab-rtt`.
    pub lab_rtt: Option<Duration>,
    /// `--lab-rate`.
    pub lab_rate: Option<f64>,
    /// `--lab-loss` as typed (`0`, `0.001`, `0.1%`).
    pub lab_loss: String,
    /// `--lab-queue` (default 1000).
    pub lab_queue: usize,
    /// `--sink-rcvbuf`.
    pub sink_rcvbuf: Option<u64>,
    /// `--no-verify`.
    pub no_verify: bool,
}

/// `--lab-loss`: a share from 0 up to (not including) 1, or a percentage (`0.1%`).
pub fn parse_loss(s: &str) -> Result<f64, PlanError> {
    let bad = || {
        PlanError::Conflict(format!("--lab-loss {s}: allowed a share from 0 up to (not including) 1, or a percentage such as 0.1%"))
    };
    let v = match s.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map_err(|_| bad())? / 100.0,
        None => s.trim().parse::<f64>().map_err(|_| bad())?,
    };
    if !(0.0..1.0).contains(&v) {
        return Err(bad());
    }
    Ok(v)
}

fn buffer(flag: &str, v: Option<u64>) -> Result<Option<u64>, PlanError> {
    v.map(|b| check_buffer(flag, b)).transpose()
}

impl TcpFlags {
    /// The validated plan: the times first (nothing is resolved for a plan that cannot
    /// run), then the mode the settings choose (watch, lab, or a TARGET resolved, sending
    /// or `--reverse`) with the settings it refuses, then [`TcpPlan::validate`].
    /// Errors: one line naming the flag(s).
    pub fn plan(&self) -> Result<TcpPlan, PlanError> {
        let a = self;
        let bail = |m: String| Err(PlanError::Conflict(m));
        check_times(a.duration, a.interval, a.skip)?;
        let lab_only = [
            ("--lab-rate", a.lab_rate.is_some()),
            ("--sink-rcvbuf", a.sink_rcvbuf.is_some()),
            ("--lab-loss", a.lab_loss != "0"),
            ("--lab-queue", a.lab_queue != 1000),
            ("--no-verify", a.no_verify),
        ];
        let mode = if a.watch_pid.is_some() || a.watch_port.is_some() {
            if a.target.is_some() || a.lab_rtt.is_some() {
                return bail(
                    "--watch-pid/--watch-port watch existing flows: leave out TARGET and --lab-rtt"
                        .into(),
                );
            }
            let watch_not = [
                ("--sndbuf", a.sndbuf.is_some()),
                ("--rcvbuf", a.rcvbuf.is_some()),
                ("--reverse", a.reverse),
                ("--target-rate", a.target_rate.is_some()),
                ("--fail-on", a.fail_on),
                ("--strict", a.strict),
                ("--write-size", a.write_size != 128 << 10),
            ];
            if let Some((f, _)) = lab_only.iter().chain(&watch_not).find(|x| x.1) {
                return bail(format!(
                    "{f} does not apply when watching flows of another process"
                ));
            }
            if let Some(p) = a.watch_pid {
                check_pid("--watch-pid", p)?;
            }
            TcpMode::Watch {
                pid: a.watch_pid,
                port: a.watch_port,
            }
        } else if let Some(rtt) = a.lab_rtt {
            if a.target.is_some() {
                return bail(
                    "give TARGET or --lab-rtt, not both: the lab runs its own sink".into(),
                );
            }
            // As given: the plan keeps the one-way delay (half of it).
            LAB_RTT.check("--lab-rtt", rtt)?;
            if a.reverse || a.rcvbuf.is_some() {
                return bail(
                    "--reverse and --rcvbuf apply with a TARGET, not in the lab yet".into(),
                );
            }
            let link = LinkConfig {
                delay: rtt / 2,
                rate_bps: a.lab_rate,
                loss: parse_loss(&a.lab_loss)?,
                queue_packets: a.lab_queue,
                ..Default::default()
            };
            TcpMode::Lab {
                link,
                sink_rcvbuf: buffer("--sink-rcvbuf", a.sink_rcvbuf)?,
                verify: !a.no_verify,
            }
        } else {
            let Some(t) = &a.target else {
                return bail("tcp needs TARGET (HOST:PORT of a sink) or --lab-rtt RTT (a lab between two namespaces)".into());
            };
            if let Some((f, _)) = lab_only.iter().find(|x| x.1) {
                return bail(format!("{f} applies only with --lab-rtt"));
            }
            let target = resolve(t)?;
            if a.reverse {
                TcpMode::Reverse { target }
            } else {
                TcpMode::Send { target }
            }
        };
        let p = TcpPlan {
            mode,
            duration: a.duration,
            interval: a.interval,
            skip: a.skip,
            sndbuf: buffer("--sndbuf", a.sndbuf)?,
            rcvbuf: buffer("--rcvbuf", a.rcvbuf)?,
            write_bytes: check_write_size(a.write_size)?,
            target_rate_bps: a.target_rate,
        };
        p.validate()?;
        Ok(p)
    }
}

/// The settings of `serve tcp` and `serve http` as given; [`ServeTcpFlags::plan`] checks
/// them. Sizes in bytes; times left out are 0 (no work, no waiting, until stopped).
#[derive(Debug, Clone)]
pub struct ServeTcpFlags {
    /// `--bind ADDR:PORT` as typed.
    pub bind: String,
    /// What the server does.
    pub mode: ServeTcpMode,
    /// `--rcvbuf`.
    pub rcvbuf: Option<u64>,
    /// `--sndbuf`.
    pub sndbuf: Option<u64>,
    /// `--work`: CPU work per request.
    pub work: Option<Duration>,
    /// `--serial`: waiting per request.
    pub serial: Option<Duration>,
    /// `--serialize`.
    pub serialize: bool,
    /// `--threads`.
    pub threads: usize,
    /// `--duration`.
    pub duration: Option<Duration>,
}

impl ServeTcpFlags {
    /// The validated plan: the address parsed (the error's example is HTTP's port for
    /// `serve http`), the buffers checked, then [`ServeTcpPlan::validate`].
    pub fn plan(&self) -> Result<ServeTcpPlan, PlanError> {
        let a = self;
        let example = match a.mode {
            ServeTcpMode::Http => "127.0.0.1:8080",
            _ => "127.0.0.1:5001",
        };
        let listen: SocketAddr = a.bind.parse().map_err(|_| {
            PlanError::Conflict(format!(
                "--bind \"{}\": allowed ADDR:PORT, e.g. {example}",
                a.bind
            ))
        })?;
        let p = ServeTcpPlan {
            listen,
            mode: a.mode,
            rcvbuf: buffer("--rcvbuf", a.rcvbuf)?,
            sndbuf: buffer("--sndbuf", a.sndbuf)?,
            work: a.work.unwrap_or_default(),
            serial: a.serial.unwrap_or_default(),
            serialize: a.serialize,
            threads: a.threads,
            duration: a.duration,
        };
        p.validate()?;
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags() -> TcpFlags {
        TcpFlags {
            duration: Duration::from_secs(10),
            interval: Duration::from_millis(100),
            skip: Duration::from_secs(1),
            write_size: 128 << 10,
            lab_loss: "0".into(),
            lab_queue: 1000,
            ..Default::default()
        }
    }

    #[test]
    fn loss_accepts_shares_and_percentages() {
        assert_eq!(parse_loss("0").unwrap(), 0.0);
        assert!((parse_loss("0.1%").unwrap() - 0.001).abs() < 1e-12);
        assert_eq!(parse_loss("0.25").unwrap(), 0.25);
        for bad in ["1", "100%", "-0.1", "lots"] {
            let e = parse_loss(bad).unwrap_err().to_string();
            assert!(e.contains(&format!("--lab-loss {bad}")), "{e}");
        }
    }

    #[test]
    fn each_mode_refuses_the_settings_of_another() {
        type Case = (fn(&mut TcpFlags), &'static str);
        let cases: Vec<Case> = vec![
            (|f| f.target = None, "tcp needs TARGET (HOST:PORT of a sink) or --lab-rtt RTT (a lab between two namespaces)"),
            (|f| { f.target = Some("127.0.0.1:9".into()); f.lab_queue = 10 }, "--lab-queue applies only with --lab-rtt"),
            (|f| { f.watch_port = Some(80); f.strict = true }, "--strict does not apply when watching flows of another process"),
            (|f| { f.watch_port = Some(80); f.target = Some("x:1".into()) }, "--watch-pid/--watch-port watch existing flows: leave out TARGET and --lab-rtt"),
            (|f| { f.lab_rtt = Some(Duration::from_millis(20)); f.reverse = true }, "--reverse and --rcvbuf apply with a TARGET, not in the lab yet"),
            (|f| { f.lab_rtt = Some(Duration::from_millis(20)); f.target = Some("x:1".into()) }, "give TARGET or --lab-rtt, not both: the lab runs its own sink"),
        ];
        for (set, want) in cases {
            let mut f = flags();
            set(&mut f);
            assert_eq!(f.plan().unwrap_err().to_string(), want);
        }
        let mut f = flags();
        f.lab_rtt = Some(Duration::from_millis(20));
        f.lab_loss = "1%".into();
        let TcpMode::Lab { link, verify, .. } = f.plan().unwrap().mode else {
            panic!("a lab plan")
        };
        assert_eq!((link.delay, verify), (Duration::from_millis(10), true));
        assert!((link.loss - 0.01).abs() < 1e-12);
    }
}
