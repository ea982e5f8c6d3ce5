//! A fleet's load plan (`tpslab agent --plan FILE`): one plan for M agents on M hosts, each
//! running its share ([`FleetPlan::share`]) from a common start time; `tpslab merge` adds
//! their records up. The plan file is TOML:
//!
//! ```toml
//! target = "10.0.0.1:9000"   # the server, IP:PORT
//! rate = "20k"               # datagrams per second, all agents together (or "max")
//! size = 64                  # UDP payload, bytes (or "1KiB")
//! duration = "10s"           # measurement window
//! warmup = "1s"
//! drain = "500ms"
//! threads = 1                # sender threads per agent
//! no_replies = false
//! max_clock_error = "10ms"   # the kernel's clock error bound an agent accepts, or "unchecked"
//! max_wait = "10m"           # how far ahead of its start an agent may be started
//! ```

use crate::error::PlanError;
use crate::udp::LoadConfig;
use crate::units::Written;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::time::Duration;

/// Agents in one fleet, at most.
pub const MAX_AGENTS: usize = 1024;

/// A fleet's load plan, as written in its file (see the module docs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct FleetPlan {
    /// The server, IP:PORT.
    pub target: String,
    /// Datagrams per second of all agents together (a number, or a string as `--rate` takes
    /// it: "20k"), or "max" (each as fast as it can).
    #[serde(default = "default_rate")]
    pub rate: Written,
    /// UDP payload, bytes (a number, or a string as `--size` takes it: "1KiB").
    #[serde(default = "default_size")]
    pub size: Written,
    /// Measurement window.
    #[serde(default = "default_duration")]
    pub duration: String,
    /// Warm-up before the window, excluded from the figures.
    #[serde(default = "default_warmup")]
    pub warmup: String,
    /// Wait for late replies after the last send.
    #[serde(default = "default_drain")]
    pub drain: String,
    /// Sender threads per agent.
    #[serde(default = "default_threads")]
    pub threads: usize,
    /// One-way load: no replies expected.
    #[serde(default)]
    pub no_replies: bool,
    /// The largest error of its wall clock an agent accepts, as its kernel states it
    /// (adjtimex maxerror, kept by NTP/PTP daemons); "unchecked" accepts any clock, also
    /// one the kernel calls unsynchronized (agents sharing one host's clock).
    #[serde(default = "default_clock_error")]
    pub max_clock_error: String,
    /// The longest an agent may wait for the start: a start further ahead means its clock
    /// or the start time is wrong.
    #[serde(default = "default_max_wait")]
    pub max_wait: String,
}

fn default_rate() -> Written {
    Written::Text("10000".into())
}
fn default_size() -> Written {
    Written::Int(1024)
}
fn default_duration() -> String {
    "5s".into()
}
fn default_warmup() -> String {
    "500ms".into()
}
fn default_drain() -> String {
    "500ms".into()
}
fn default_threads() -> usize {
    1
}
fn default_clock_error() -> String {
    "10ms".into()
}
fn default_max_wait() -> String {
    "10m".into()
}

fn duration(label: &str, s: &str) -> Result<Duration, PlanError> {
    crate::units::parse_duration(label, s)
}

impl FleetPlan {
    /// Parses and checks a plan file's text. Errors: not TOML, an unknown key, or a value
    /// out of its limit (labelled `plan: KEY`).
    pub fn parse(text: &str) -> Result<FleetPlan, PlanError> {
        let p: FleetPlan = toml::from_str(text).map_err(|e| {
            PlanError::value(
                "--plan",
                e.message().replace('\n', " "),
                "a TOML fleet plan (target, rate, size, duration, warmup, drain, threads, no_replies, max_clock_error, max_wait)",
            )
        })?;
        // A share of one agent is the whole plan: every setting is checked there.
        p.share(0, 1, 0)?;
        p.max_wait()?;
        p.clock_limit()?;
        Ok(p)
    }

    /// The plan's identity: SHA-256 (hex) of its settings written back as TOML, so
    /// comments and layout do not change it; agents' records carry it for `merge`.
    pub fn hash(&self) -> String {
        use sha2::Digest;
        let text = toml::to_string(self).expect("a plan serialises");
        sha2::Sha256::digest(text.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// `max_wait` as a duration.
    pub fn max_wait(&self) -> Result<Duration, PlanError> {
        duration("plan: max_wait", &self.max_wait)
    }

    /// `max_clock_error` as a duration; None for "unchecked".
    pub fn clock_limit(&self) -> Result<Option<Duration>, PlanError> {
        if self.max_clock_error == "unchecked" {
            return Ok(None);
        }
        duration("plan: max_clock_error", &self.max_clock_error).map(Some)
    }

    /// Agent `index`'s share of `of`: the rate divided evenly, its own sockets and sequence
    /// space (`run_id`), and a phase of index / rate so paced agents interleave instead of
    /// sending at the same instants. Errors name the plan key (or `--index`/`--of`).
    pub fn share(&self, index: usize, of: usize, run_id: u64) -> Result<LoadConfig, PlanError> {
        if of == 0 || of > MAX_AGENTS {
            return Err(PlanError::value("--of", of, format!("1..={MAX_AGENTS}")));
        }
        if index >= of {
            return Err(PlanError::value(
                "--index",
                index,
                format!("0..={} (agents are numbered from 0)", of - 1),
            ));
        }
        let target: SocketAddr = self
            .target
            .parse()
            .ok()
            .filter(|a: &SocketAddr| a.port() != 0 && !a.ip().is_unspecified())
            .ok_or_else(|| {
                PlanError::value(
                    "plan: target",
                    &self.target,
                    "IP:PORT of a server (port 1..=65535, not 0.0.0.0 or [::])",
                )
            })?;
        let total = crate::units::parse_pps("plan: rate", &self.rate.to_string())?;
        let size = crate::units::parse_size("plan: size", &self.size.to_string())?;
        let rate = if total.is_infinite() {
            total
        } else {
            total / of as f64
        };
        let phase = if total.is_infinite() {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(index as f64 / total)
        };
        let cfg = LoadConfig {
            target,
            rate_pps: rate,
            size_bytes: usize::try_from(size).unwrap_or(usize::MAX),
            duration: duration("plan: duration", &self.duration)?,
            warmup: duration("plan: warmup", &self.warmup)?,
            burst: 1,
            threads: self.threads,
            // One source port per thread, as the scenario/plan always ran.
            flows: 0,
            payload: None,
            seq_field: None,
            expect_replies: !self.no_replies,
            drain: duration("plan: drain", &self.drain)?,
            run_id,
            cpus: vec![],
            gso: false,
            // Exact, not auto: the agents' phases interleave their sends to within a
            // fraction of a gap; a slack would bunch each agent's sends into groups and
            // undo the interleaving.
            pacing_slack: crate::udp::PacingSlack::exact(),
            phase,
            keep_histograms: true,
        };
        cfg.validate().map_err(|e| {
            e.relabel(|l| match l {
                "--rate" => "plan: rate (per agent)".into(),
                "--size" => "plan: size".into(),
                "--duration" => "plan: duration".into(),
                "--warmup" => "plan: warmup".into(),
                "--drain" => "plan: drain".into(),
                "--load-threads" => "plan: threads".into(),
                l => format!("plan: {}", l.trim_start_matches("--")),
            })
        })?;
        Ok(cfg)
    }
}

/// `agent --start-at`: an RFC 3339 time (`2026-11-24T10:00:00Z`) or `@UNIX_SECONDS`
/// (fractions allowed), as ns since the Unix epoch. Errors: one line naming the value.
pub fn parse_start(s: &str) -> Result<u64, PlanError> {
    let bad = || {
        PlanError::Conflict(format!("--start-at {s:?}: allowed an RFC 3339 time such as 2026-11-24T10:00:00Z, or @UNIX_SECONDS"))
    };
    if let Some(secs) = s.strip_prefix('@') {
        let v: f64 = secs.parse().map_err(|_| bad())?;
        if !(v.is_finite() && v > 0.0 && v < 1e11) {
            return Err(bad());
        }
        return Ok((v * 1e9) as u64);
    }
    let t = humantime::parse_rfc3339_weak(s).map_err(|_| bad())?;
    t.duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAN: &str = "target = \"10.0.0.1:9000\"\nrate = \"30000\"\nsize = 64\n";

    #[test]
    fn shares_add_up_and_interleave() {
        let p = FleetPlan::parse(PLAN).unwrap();
        let shares: Vec<LoadConfig> = (0..3).map(|i| p.share(i, 3, 7).unwrap()).collect();
        let total: f64 = shares.iter().map(|s| s.rate_pps).sum();
        assert!((total - 30000.0).abs() < 1e-6);
        // One datagram apart: agent i sends i/30000 s after agent 0.
        assert_eq!(shares[0].phase, Duration::ZERO);
        assert_eq!(shares[2].phase, Duration::from_secs_f64(2.0 / 30000.0));
        assert!(shares
            .iter()
            .all(|s| s.keep_histograms && s.size_bytes == 64));
    }

    #[test]
    fn the_hash_is_of_the_settings_not_the_layout() {
        let a = FleetPlan::parse(PLAN).unwrap();
        let b = FleetPlan::parse(&format!("# a comment\n\n{PLAN}")).unwrap();
        assert_eq!(a.hash(), b.hash());
        assert_eq!(a.hash().len(), 64);
        let c = FleetPlan::parse(&PLAN.replace("30000", "30001")).unwrap();
        assert_ne!(a.hash(), c.hash());
    }

    #[test]
    fn rates_sizes_and_durations_take_the_flags_forms() {
        let p = FleetPlan::parse(
            "target = \"10.0.0.1:9\"\nrate = \"20k\"\nsize = \"1KiB\"\nduration = \"1.5s\"\n",
        )
        .unwrap();
        let s = p.share(0, 2, 0).unwrap();
        assert_eq!(
            (s.rate_pps, s.size_bytes, s.duration),
            (10_000.0, 1024, Duration::from_millis(1500))
        );
        // A number where a string was needed before.
        let p = FleetPlan::parse("target = \"10.0.0.1:9\"\nrate = 30000\n").unwrap();
        assert_eq!(p.share(0, 3, 0).unwrap().rate_pps, 10_000.0);
        let e = FleetPlan::parse("target = \"10.0.0.1:9\"\nwarmup = \"5\"\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("plan: warmup 5: allowed {}", crate::units::DURATION_FORMS)
        );
    }

    #[test]
    fn bad_plans_name_the_key() {
        for (text, want) in [
            ("target = \"x\"", "plan: target x: allowed IP:PORT"),
            (
                "target = \"10.0.0.1:0\"",
                "plan: target 10.0.0.1:0: allowed IP:PORT of a server (port 1..=65535",
            ),
            ("target = \"0.0.0.0:9\"", "plan: target 0.0.0.0:9: allowed"),
            ("target = \"[::]:9\"", "plan: target [::]:9: allowed"),
            (
                "target = \"10.0.0.1:1\"\nduration = \"soon\"",
                "plan: duration soon",
            ),
            ("target = \"10.0.0.1:1\"\nsize = 3", "plan: size 3"),
            (
                "target = \"10.0.0.1:1\"\nspeed = 3",
                "unknown field `speed`",
            ),
            (
                "target = \"10.0.0.1:1\"\nmax_clock_error = \"often\"",
                "plan: max_clock_error often",
            ),
        ] {
            let e = FleetPlan::parse(text).unwrap_err().to_string();
            assert!(e.contains(want), "{text}: {e}");
            assert!(!e.contains('\n'), "{e}");
        }
        let p = FleetPlan::parse(PLAN).unwrap();
        assert!(p
            .share(3, 3, 0)
            .unwrap_err()
            .to_string()
            .contains("--index 3"));
        assert!(p.share(0, 0, 0).unwrap_err().to_string().contains("--of 0"));
        assert_eq!(
            FleetPlan::parse(&format!("{PLAN}max_clock_error = \"unchecked\""))
                .unwrap()
                .clock_limit()
                .unwrap(),
            None
        );
    }

    #[test]
    fn a_start_is_a_time_or_unix_seconds() {
        assert_eq!(
            parse_start("@2000000000.5").unwrap(),
            2_000_000_000_500_000_000
        );
        assert_eq!(
            parse_start("2026-11-24T10:00:00Z").unwrap(),
            1_795_514_400_000_000_000
        );
        for bad in ["x", "@0", "@inf", "@1e12"] {
            assert_eq!(
                parse_start(bad).unwrap_err().to_string(),
                format!("--start-at {bad:?}: allowed an RFC 3339 time such as 2026-11-24T10:00:00Z, or @UNIX_SECONDS")
            );
        }
    }
}
