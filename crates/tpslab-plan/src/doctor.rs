//! The workload `tpslab doctor --for` judges a host against: a bursty UDP receiver, a TCP
//! flow over a long path, or a connection pool behind a middlebox with an idle timeout.

use crate::limits::{BURST, IDLE_TIMEOUT, PATH_RTT, SIZE_BYTES, SOCKETS};
use crate::PlanError;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// What the host is for.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "for", rename_all = "snake_case")]
pub enum Workload {
    /// A UDP server that receives bursts (S1).
    Udp {
        /// Mean rate, datagrams per second.
        rate_pps: f64,
        /// Datagrams that arrive back to back in one burst (1: a steady load).
        burst: u64,
        /// UDP payload, bytes.
        size_bytes: u64,
        /// Sockets that receive at once (an SO_REUSEPORT group), each with its own buffer.
        sockets: u64,
    },
    /// A TCP flow that must carry a rate over a round trip (S4).
    Tcp {
        /// Round-trip time (JSON: `rtt_ns`, integer ns).
        #[serde(rename = "rtt_ns", with = "crate::time::ns")]
        #[cfg_attr(feature = "schema", schemars(with = "u64"))]
        rtt: Duration,
        /// Rate the flow must carry, bits/s.
        rate_bps: f64,
    },
    /// Connections kept idle in a pool across a middlebox that forgets idle flows (S5).
    Pool {
        /// The middlebox's idle timeout (JSON: `idle_timeout_ns`, integer ns).
        #[serde(rename = "idle_timeout_ns", with = "crate::time::ns")]
        #[cfg_attr(feature = "schema", schemars(with = "u64"))]
        idle_timeout: Duration,
        /// How often the pool tests its idle connections (None: not stated) (JSON:
        /// `validate_ns`).
        #[serde(rename = "validate_ns", with = "crate::time::opt_ns", default)]
        #[cfg_attr(feature = "schema", schemars(with = "Option<u64>"))]
        validate: Option<Duration>,
        /// How long the pool keeps an idle connection (None: not stated) (JSON:
        /// `max_idle_ns`).
        #[serde(rename = "max_idle_ns", with = "crate::time::opt_ns", default)]
        #[cfg_attr(feature = "schema", schemars(with = "Option<u64>"))]
        max_idle: Option<Duration>,
        /// Whether TCP keepalive resets the middlebox's idle timer, as `probe idle`
        /// measures it (None: not stated; judged as if it does). Left out of the JSON
        /// when not stated.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        keepalive_counts: Option<bool>,
    },
}

/// The figures given with `--for`, as written (`None`: not given).
#[derive(Debug, Clone, Default)]
pub struct WorkloadFlags {
    /// `--rate`: pps for udp (`200000`), bits/s for tcp (`80mbit`).
    pub rate: Option<String>,
    /// `--burst`, datagrams.
    pub burst: Option<u64>,
    /// `--size`, bytes.
    pub size: Option<u64>,
    /// `--sockets`.
    pub sockets: Option<u64>,
    /// `--rtt`.
    pub rtt: Option<Duration>,
    /// `--idle-timeout`.
    pub idle_timeout: Option<Duration>,
    /// `--pool-validate`.
    pub pool_validate: Option<Duration>,
    /// `--pool-max-idle`.
    pub pool_max_idle: Option<Duration>,
    /// `--keepalive-counts`.
    pub keepalive_counts: Option<bool>,
}

impl WorkloadFlags {
    /// The flags given, by name, in a fixed order.
    pub fn given(&self) -> Vec<&'static str> {
        [
            ("--rate", self.rate.is_some()),
            ("--burst", self.burst.is_some()),
            ("--size", self.size.is_some()),
            ("--sockets", self.sockets.is_some()),
            ("--rtt", self.rtt.is_some()),
            ("--idle-timeout", self.idle_timeout.is_some()),
            ("--pool-validate", self.pool_validate.is_some()),
            ("--pool-max-idle", self.pool_max_idle.is_some()),
            ("--keepalive-counts", self.keepalive_counts.is_some()),
        ]
        .into_iter()
        .filter(|(_, g)| *g)
        .map(|(n, _)| n)
        .collect()
    }
}

impl WorkloadFlags {
    /// The workload `--for kind` states ([`Workload::from_flags`]); without `--for`, none,
    /// and a figure given is refused (it describes a workload).
    pub fn workload(&self, kind: Option<&str>) -> Result<Option<Workload>, PlanError> {
        match kind {
            Some(kind) => Ok(Some(Workload::from_flags(kind, self)?)),
            None => match self.given().first() {
                Some(flag) => Err(PlanError::Conflict(format!(
                    "{flag} describes a workload: give --for udp, tcp or pool"
                ))),
                None => Ok(None),
            },
        }
    }
}

impl Workload {
    /// The workload `--for kind` with `f`'s figures: each one it needs given and within its
    /// limit, none it does not use. Errors name the flag, the value and what is allowed.
    pub fn from_flags(kind: &str, f: &WorkloadFlags) -> Result<Workload, PlanError> {
        let used: &[&str] = match kind {
            "udp" => &["--rate", "--burst", "--size", "--sockets"],
            "tcp" => &["--rate", "--rtt"],
            "pool" => &[
                "--idle-timeout",
                "--pool-validate",
                "--pool-max-idle",
                "--keepalive-counts",
            ],
            other => return Err(PlanError::value("--for", other, "udp, tcp or pool")),
        };
        if let Some(flag) = f.given().into_iter().find(|n| !used.contains(n)) {
            return Err(PlanError::Conflict(format!(
                "{flag} does not apply to --for {kind} (it takes {})",
                used.join(", ")
            )));
        }
        let need = |flag: &str| {
            PlanError::Conflict(format!(
                "--for {kind} needs {flag} (it takes {})",
                used.join(", ")
            ))
        };
        Ok(match kind {
            "udp" => {
                let rate = f.rate.as_deref().ok_or_else(|| need("--rate"))?;
                let rate_pps = crate::units::parse_pps("--rate", rate)?;
                if rate_pps.is_infinite() {
                    return Err(PlanError::value("--rate", rate, "a rate in pps (not max)"));
                }
                Workload::Udp {
                    rate_pps,
                    burst: BURST.check("--burst", f.burst.ok_or_else(|| need("--burst"))?)?,
                    size_bytes: SIZE_BYTES
                        .check("--size", f.size.ok_or_else(|| need("--size"))?)?,
                    sockets: SOCKETS.check("--sockets", f.sockets.unwrap_or(1))?,
                }
            }
            "tcp" => {
                let rate = f.rate.as_deref().ok_or_else(|| need("--rate"))?;
                let rate_bps = crate::units::parse_rate("--rate", rate)?;
                let rtt = PATH_RTT.check("--rtt", f.rtt.ok_or_else(|| need("--rtt"))?)?;
                Workload::Tcp { rtt, rate_bps }
            }
            _ => {
                let t = f.idle_timeout.ok_or_else(|| need("--idle-timeout"))?;
                let check = |flag: &str, d: Option<Duration>| {
                    d.map(|d| IDLE_TIMEOUT.check(flag, d)).transpose()
                };
                Workload::Pool {
                    idle_timeout: IDLE_TIMEOUT.check("--idle-timeout", t)?,
                    validate: check("--pool-validate", f.pool_validate)?,
                    max_idle: check("--pool-max-idle", f.pool_max_idle)?,
                    keepalive_counts: f.keepalive_counts,
                }
            }
        })
    }

    /// The workload in the words of its flags (`udp --rate 100000 --burst 5000 --size 1024`).
    pub fn describe(&self) -> String {
        let d = |t: Duration| humantime::format_duration(t).to_string();
        match *self {
            Workload::Udp {
                rate_pps,
                burst,
                size_bytes,
                sockets,
            } => format!(
                "udp --rate {rate_pps} --burst {burst} --size {size_bytes}{}",
                if sockets > 1 {
                    format!(" --sockets {sockets}")
                } else {
                    String::new()
                }
            ),
            Workload::Tcp { rtt, rate_bps } => {
                format!(
                    "tcp --rtt {} --rate {}",
                    d(rtt),
                    crate::units::format_rate(rate_bps)
                )
            }
            Workload::Pool {
                idle_timeout,
                validate,
                max_idle,
                keepalive_counts,
            } => format!(
                "pool --idle-timeout {}{}{}{}",
                d(idle_timeout),
                validate.map_or(String::new(), |v| format!(" --pool-validate {}", d(v))),
                max_idle.map_or(String::new(), |v| format!(" --pool-max-idle {}", d(v))),
                keepalive_counts.map_or(String::new(), |k| format!(
                    " --keepalive-counts {}",
                    if k { "yes" } else { "no" }
                ))
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags() -> WorkloadFlags {
        WorkloadFlags::default()
    }

    #[test]
    fn each_kind_takes_its_own_figures() {
        let udp = Workload::from_flags(
            "udp",
            &WorkloadFlags {
                rate: Some("100000".into()),
                burst: Some(5000),
                size: Some(1024),
                ..flags()
            },
        )
        .unwrap();
        assert_eq!(
            udp,
            Workload::Udp {
                rate_pps: 100000.0,
                burst: 5000,
                size_bytes: 1024,
                sockets: 1
            }
        );
        assert_eq!(udp.describe(), "udp --rate 100000 --burst 5000 --size 1024");
        let tcp = Workload::from_flags(
            "tcp",
            &WorkloadFlags {
                rate: Some("80mbit".into()),
                rtt: Some(Duration::from_millis(30)),
                ..flags()
            },
        )
        .unwrap();
        assert_eq!(tcp.describe(), "tcp --rtt 30ms --rate 80Mbit");
        let pool = Workload::from_flags(
            "pool",
            &WorkloadFlags {
                idle_timeout: Some(Duration::from_secs(350)),
                pool_validate: Some(Duration::from_secs(3000)),
                ..flags()
            },
        )
        .unwrap();
        assert_eq!(
            pool.describe(),
            "pool --idle-timeout 5m 50s --pool-validate 50m"
        );
        let data_only = Workload::from_flags(
            "pool",
            &WorkloadFlags {
                idle_timeout: Some(Duration::from_secs(5)),
                keepalive_counts: Some(false),
                ..flags()
            },
        )
        .unwrap();
        assert_eq!(
            data_only.describe(),
            "pool --idle-timeout 5s --keepalive-counts no"
        );
        // Only for a pool.
        assert!(Workload::from_flags(
            "tcp",
            &WorkloadFlags {
                keepalive_counts: Some(true),
                rate: Some("1gbit".into()),
                rtt: Some(Duration::from_millis(1)),
                ..flags()
            },
        )
        .unwrap_err()
        .to_string()
        .starts_with("--keepalive-counts does not apply to --for tcp"));
    }

    #[test]
    fn errors_name_the_flag_and_what_is_allowed() {
        let e = |k: &str, f: WorkloadFlags| Workload::from_flags(k, &f).unwrap_err().to_string();
        assert_eq!(e("dns", flags()), "--for dns: allowed udp, tcp or pool");
        assert_eq!(
            e("pool", WorkloadFlags { rtt: Some(Duration::from_millis(1)), ..flags() }),
            "--rtt does not apply to --for pool (it takes --idle-timeout, --pool-validate, --pool-max-idle, --keepalive-counts)"
        );
        assert_eq!(
            e(
                "tcp",
                WorkloadFlags {
                    rate: Some("1gbit".into()),
                    ..flags()
                }
            ),
            "--for tcp needs --rtt (it takes --rate, --rtt)"
        );
        let udp = |rate: &str| WorkloadFlags {
            rate: Some(rate.into()),
            burst: Some(10),
            size: Some(1024),
            ..flags()
        };
        assert!(e("udp", udp("max")).contains("not max"));
        assert!(e("udp", udp("fast")).starts_with("--rate fast: allowed"));
        assert!(e(
            "udp",
            WorkloadFlags {
                burst: Some(0),
                ..udp("10")
            }
        )
        .starts_with("--burst 0"));
        assert!(e(
            "tcp",
            WorkloadFlags {
                rate: Some("80".into()),
                rtt: Some(Duration::from_millis(1)),
                ..flags()
            }
        )
        .contains("unit"));
        assert!(e(
            "pool",
            WorkloadFlags {
                idle_timeout: Some(Duration::from_secs(0)),
                ..flags()
            }
        )
        .starts_with("--idle-timeout 0s: allowed"));
    }
}
