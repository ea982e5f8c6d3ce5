//! The plan of `tpslab sweep`: factors and their levels, the design that makes cells of
//! them, the run order, and the baseline server and load. A level is parsed here and the
//! server and load it makes are checked by their one validation ([`ServerConfig::validate`],
//! [`LoadConfig::validate`]) whether it came from `--factor`, a TOML plan file or a
//! `plan.json` read back on `--resume`.

use crate::udp::{LoadConfig, Mode, ServerConfig};
use crate::PlanError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;
use tpslab_net::sched::SchedPolicy;

/// Schema of the sweep plan (`plan.json` in a sweep's folder).
pub const SCHEMA: &str = "tpslab.sweep/1";

mod flags;
pub use flags::SweepFlags;

macro_rules! msg {
    ($($t:tt)*) => { PlanError::Conflict(format!($($t)*)) };
}

macro_rules! fail {
    ($($t:tt)*) => { return Err(msg!($($t)*)) };
}

type Plan = SweepPlan;

/// A factor and its levels; the first level is the baseline's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Factor {
    /// Name (`rcvbuf`, `cpus`, `sched`, ..., or a sysctl such as `net.core.rmem_default`).
    pub name: String,
    /// Levels as written by the user.
    pub levels: Vec<String>,
}

/// How cells are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Design {
    /// The baseline, then each other level of each factor with the rest at baseline.
    Ofat,
    /// Every combination of levels.
    Factorial,
}

impl Design {
    /// Parses `ofat` or `factorial`; `label` names where it came from.
    pub fn parse(label: &str, s: &str) -> Result<Design, PlanError> {
        match s {
            "ofat" => Ok(Design::Ofat),
            "factorial" => Ok(Design::Factorial),
            _ => Err(PlanError::value(label, s, "ofat, factorial")),
        }
    }
}

/// One combination of levels.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Cell {
    /// Index in the plan.
    pub id: usize,
    /// factor -> level, for every factor.
    pub settings: BTreeMap<String, String>,
}

impl Cell {
    /// "rcvbuf=212992 sched=other".
    pub fn label(&self) -> String {
        self.settings
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// Expands factors into cells; cell 0 is always the baseline (every first level).
pub fn cells(factors: &[Factor], design: Design) -> Vec<Cell> {
    let base: BTreeMap<String, String> = factors
        .iter()
        .map(|f| (f.name.clone(), f.levels[0].clone()))
        .collect();
    let mut out: Vec<BTreeMap<String, String>> = vec![base.clone()];
    match design {
        Design::Ofat => {
            for f in factors {
                for l in &f.levels[1..] {
                    let mut s = base.clone();
                    s.insert(f.name.clone(), l.clone());
                    out.push(s);
                }
            }
        }
        Design::Factorial => {
            let mut all: Vec<BTreeMap<String, String>> = vec![BTreeMap::new()];
            for f in factors {
                all = all
                    .into_iter()
                    .flat_map(|s| {
                        f.levels.iter().map(move |l| {
                            let mut s = s.clone();
                            s.insert(f.name.clone(), l.clone());
                            s
                        })
                    })
                    .collect();
            }
            out.extend(all.into_iter().filter(|s| *s != base));
        }
    }
    out.into_iter()
        .enumerate()
        .map(|(id, settings)| Cell { id, settings })
        .collect()
}

/// (cell, repetition) pairs in a random order from `seed` (Fisher-Yates with splitmix64):
/// drift of the machine over time spreads over all cells instead of biasing one.
pub fn run_order(cells: usize, repeat: usize, seed: u64) -> Vec<(usize, usize)> {
    let mut v: Vec<(usize, usize)> = (0..cells)
        .flat_map(|c| (0..repeat).map(move |r| (c, r)))
        .collect();
    let mut x = seed;
    let mut next = || {
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    for i in (1..v.len()).rev() {
        let j = (next() % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
    v
}

/// Everything needed to (re)run a sweep (saved as `plan.json` in its output folder, and
/// in its record).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SweepPlan {
    /// The plan file's schema (`tpslab.sweep/1`).
    pub schema: String,
    /// The factors and their levels (the first level of each is the baseline).
    pub factors: Vec<Factor>,
    /// One factor at a time, or every combination.
    pub design: Design,
    /// Runs per cell.
    pub repeat: usize,
    /// Seed of the random run order.
    pub seed: u64,
    /// The figure the sweep optimises.
    pub objective: Objective,
    /// The reference server's settings (the baseline).
    pub server: ServerConfig,
    /// The load's settings (the baseline).
    pub load: LoadConfig,
    /// Observer sampling interval (JSON: `interval_ms`, float ms).
    #[serde(rename = "interval_ms", with = "crate::time::ms")]
    #[cfg_attr(feature = "schema", schemars(with = "f64"))]
    pub interval: Duration,
    /// A built-in study (`s2`), if it is one.
    pub scenario: Option<String>,
    /// The user's server: a shell command with {port} (None: tpslab's server).
    #[serde(default)]
    pub server_cmd: Option<String>,
}

/// What the user wants to optimise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Objective {
    /// Lowest loss.
    Loss,
    /// Highest TPS.
    Tps,
    /// Lowest p99 RTT.
    P99,
}

impl Objective {
    /// Parses `loss`, `tps` or `p99`; `label` names where it came from.
    pub fn parse(label: &str, s: &str) -> Result<Objective, PlanError> {
        match s {
            "loss" => Ok(Objective::Loss),
            "tps" => Ok(Objective::Tps),
            "p99" => Ok(Objective::P99),
            _ => Err(PlanError::value(label, s, "loss, tps, p99")),
        }
    }

    /// The figure and whether lower is better.
    pub fn figure(self) -> (&'static str, bool) {
        match self {
            Objective::Loss => ("loss_pct", true),
            Objective::Tps => ("tps", false),
            Objective::P99 => ("p99_us", true),
        }
    }
}

/// Factors that set tpslab's own server (refused with the user's `--server-cmd`).
pub const OWN_SERVER_FACTORS: &[&str] = &[
    "rcvbuf",
    "threads",
    "batch",
    "work_ns",
    "busy_poll",
    "gro",
    "steer",
];

/// The factors a sweep knows besides sysctls.
pub const FACTORS: &[&str] = &[
    "rcvbuf",
    "cpus",
    "sched",
    "threads",
    "batch",
    "rate",
    "burst",
    "work_ns",
    "size",
    "busy_poll",
    "gro",
    "steer",
];

/// A factor from its name and levels, each level checked; at least two distinct levels.
pub fn factor_of(name: &str, levels: Vec<String>) -> Result<Factor, PlanError> {
    let spec = format!("{name}={}", levels.join(","));
    if levels.len() < 2 || levels.iter().any(|l| l.trim().is_empty()) {
        fail!("--factor \"{spec}\": give at least two non-empty levels, the first is the baseline");
    }
    let mut uniq = levels.clone();
    uniq.sort();
    uniq.dedup();
    if uniq.len() != levels.len() {
        fail!("--factor \"{spec}\": each level once");
    }
    for l in &levels {
        check_level(name, l)?;
    }
    Ok(Factor {
        name: name.to_string(),
        levels,
    })
}

pub fn parse_factor(spec: &str) -> Result<Factor, PlanError> {
    let (name, levels) = spec.split_once('=').ok_or_else(|| {
        msg!("--factor \"{spec}\": allowed NAME=L1,L2,... e.g. rcvbuf=212992,8388608")
    })?;
    factor_of(
        name,
        levels.split(',').map(|l| l.trim().to_string()).collect(),
    )
}

/// Applies one factor level to a server and load (or returns it as a sysctl to set). The
/// value is parsed here; its limits are the configs' one validation, run on every cell by
/// [`check_plan`] (and on each level alone by [`check_level`]).
pub fn apply_level(
    srv: &mut ServerConfig,
    load: &mut LoadConfig,
    name: &str,
    level: &str,
) -> Result<Option<(String, String)>, PlanError> {
    let bad = |what: &str| msg!("--factor {name}: level \"{level}\": {what}");
    let num = |what: &str| level.trim().parse::<u64>().map_err(|_| bad(what));
    match name {
        "rcvbuf" if level == "default" => srv.rcvbuf = None,
        "rcvbuf" => {
            srv.rcvbuf = Some(crate::units::parse_size(
                &format!("--factor {name}: level"),
                level,
            )?)
        }
        "cpus" => {
            srv.cpus =
                crate::units::parse_cpus("--factor cpus: level", level, tpslab_net::online_cpus())?
        }
        "sched" => srv.sched = level.parse::<SchedPolicy>().map_err(|e| bad(&e))?,
        "threads" => srv.threads = num("allowed a whole number")? as usize,
        "batch" => srv.batch = num("allowed a whole number")? as usize,
        "rate" => {
            load.rate_pps = crate::units::parse_pps(&format!("--factor {name}: level"), level)?
        }
        "burst" => load.burst = num("allowed a whole number")?,
        "work_ns" => srv.work = Duration::from_nanos(num("allowed a whole number of ns")?),
        "size" => {
            let b = crate::units::parse_size(&format!("--factor {name}: level"), level)?;
            load.size_bytes = usize::try_from(b).unwrap_or(usize::MAX)
        }
        "busy_poll" if level == "off" => srv.busy_poll_us = None,
        "busy_poll" => {
            srv.busy_poll_us = Some(crate::units::parse_busy_poll_us(
                &format!("--factor {name}: level"),
                level,
            )?)
        }
        "gro" => {
            srv.gro = match level {
                "on" => true,
                "off" => false,
                _ => return Err(bad("allowed on, off")),
            }
        }
        "steer" => srv.steer = level.parse::<crate::udp::Steer>().map_err(|e| bad(&e))?,
        n if n.contains('.') => {
            if !crate::sysctl::SYSCTLS.contains(&n) {
                fail!(
                    "--factor {n}: allowed sysctls {}",
                    crate::sysctl::SYSCTLS.join(", ")
                );
            }
            let want = crate::sysctl::fields(n);
            let allowed = if want == 1 {
                "allowed a number".to_string()
            } else {
                format!("allowed {want} numbers separated by spaces")
            };
            if level.split_whitespace().any(|v| v.parse::<u64>().is_err())
                || level.split_whitespace().count() != want
            {
                return Err(bad(&allowed));
            }
            // The kernel reads a leading 0 as octal: "020000" would be 8192.
            if level
                .split_whitespace()
                .any(|v| v.len() > 1 && v.starts_with('0'))
            {
                return Err(bad(&format!(
                    "a leading 0 makes the kernel read it as octal ({}); write it without the 0",
                    crate::sysctl::canonical(level).unwrap_or_default()
                )));
            }
            return Ok(Some((n.to_string(), level.to_string())));
        }
        _ => fail!(
            "--factor {name}: unknown; allowed {} or a sysctl",
            FACTORS.join(", ")
        ),
    }
    Ok(None)
}

/// Checks one level alone, applied to the default server and load.
pub fn check_level(name: &str, level: &str) -> Result<(), PlanError> {
    let (mut srv, mut load) = (ServerConfig::default(), LoadConfig::default());
    apply_level(&mut srv, &mut load, name, level)?;
    let relabel = |e: PlanError| {
        e.relabel(|l| match l {
            "" => String::new(),
            _ => format!("--factor {name}: level"),
        })
    };
    srv.validate().map_err(relabel)?;
    load.validate().map_err(relabel)?;
    Ok(())
}

/// Sysctls a cell sets: (name, value).
type Sysctls = Vec<(String, String)>;

/// The server and load of one cell, and the sysctls it sets.
pub fn cell_config(
    plan: &Plan,
    cell: &Cell,
) -> Result<(ServerConfig, LoadConfig, Sysctls), PlanError> {
    let mut srv = plan.server.clone();
    let mut load = plan.load.clone();
    let mut sysctls = vec![];
    for (k, v) in &cell.settings {
        sysctls.extend(apply_level(&mut srv, &mut load, k, v)?);
    }
    let at = |e: PlanError| {
        let what = cell
            .settings
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ");
        msg!("plan: the cell {what}: {e}")
    };
    srv.validate().map_err(at)?;
    load.validate().map_err(at)?;
    Ok((srv, load, sysctls))
}

/// The S2 study: a consumer that reads one datagram per call and does a little work
/// (like S2's Python `recvfrom` loop) under a fast sender of small datagrams; affinity
/// (all CPUs vs CPU 1, where S2 used CPU 3) x scheduler (other vs FIFO 99).
pub fn s2_plan(seed: u64, interval: Duration) -> Plan {
    Plan {
        schema: SCHEMA.into(),
        factors: vec![
            Factor {
                name: "cpus".into(),
                levels: vec!["all".into(), "1".into()],
            },
            Factor {
                name: "sched".into(),
                levels: vec!["other".into(), "fifo:99".into()],
            },
        ],
        design: Design::Factorial,
        repeat: 3,
        seed,
        objective: Objective::Loss,
        server: ServerConfig {
            bind: "127.0.0.1:0".parse().unwrap(),
            mode: Mode::Sink,
            // ~7 us per datagram with the recvfrom: slower than the sender, as in S2.
            work: Duration::from_micros(6),
            ..ServerConfig::default()
        },
        load: LoadConfig {
            target: "127.0.0.1:0".parse().unwrap(),
            rate_pps: 150_000.0,
            size_bytes: 64,
            duration: Duration::from_secs(5),
            warmup: Duration::from_secs(1),
            burst: 1,
            threads: 1,
            // One source port per thread, as the scenario/plan always ran.
            flows: 0,
            payload: None,
            seq_field: None,
            expect_replies: false,
            drain: Duration::from_millis(300),
            run_id: 0,
            // The generator on CPU 0: S2's sender was another machine.
            cpus: vec![0],
            gso: false,
            // Exact, not auto: the calibration reproduces S2's sender (another machine
            // sending evenly at 150 k pps); auto would send groups of 15 per 100 us
            // into the slow server, a queue shape the scenario was not calibrated with.
            pacing_slack: crate::udp::PacingSlack::exact(),

            phase: Duration::ZERO,

            keep_histograms: false,
        },
        interval,
        scenario: Some("s2".into()),
        server_cmd: None,
    }
}

/// Checks a plan however it was made (flags, plan file, or plan.json on --resume): the
/// same limits as the command line's.
pub fn check_plan(plan: &Plan) -> Result<(), PlanError> {
    plan.server.validate().map_err(|e| {
        e.relabel(|l| match l {
            "" => "plan: server".into(),
            l => format!("plan: server {}", l.trim_start_matches("--")),
        })
    })?;
    plan.load.validate().map_err(|e| {
        e.relabel(|l| match l {
            "" => "plan: load".into(),
            l => format!(
                "plan: load {}",
                l.trim_start_matches("--").trim_start_matches("load-")
            ),
        })
    })?;
    if crate::limits::SAMPLE_INTERVAL
        .check("", plan.interval)
        .is_err()
    {
        fail!(
            "plan: interval_ms {}: allowed {}",
            plan.interval.as_secs_f64() * 1e3,
            crate::limits::SAMPLE_INTERVAL.allowed()
        );
    }
    crate::limits::REPEAT
        .check("plan: repeat", plan.repeat as u64)
        .map(drop)?;
    if plan.factors.is_empty() {
        fail!("plan: no factor");
    }
    let mut names: Vec<&str> = plan.factors.iter().map(|f| f.name.as_str()).collect();
    names.sort();
    names.dedup();
    if names.len() != plan.factors.len() {
        fail!("--factor: each factor once");
    }
    if let Some(cmd) = &plan.server_cmd {
        if !cmd.contains("{port}") {
            fail!("--server-cmd \"{cmd}\": must contain {{port}}, where tpslab puts the port to listen on");
        }
        if let Some(f) = plan
            .factors
            .iter()
            .find(|f| OWN_SERVER_FACTORS.contains(&f.name.as_str()))
        {
            fail!(
                "--factor {}: a setting of tpslab's own server; with --server-cmd use cpus, sched, load factors or a sysctl",
                f.name
            );
        }
    }
    for f in &plan.factors {
        factor_of(&f.name, f.levels.clone())?;
    }
    for cell in cells(&plan.factors, plan.design) {
        cell_config(plan, &cell)?;
    }
    Ok(())
}

mod plan_file;
pub use plan_file::apply_plan_file;

#[cfg(test)]
#[path = "sweep_tests.rs"]
mod tests;
