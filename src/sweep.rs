//! `tpslab sweep`: runs a designed experiment over tunables and says which helped.

use crate::flags::{self, GateFlags, LoadFlags, ServerFlags};
use crate::out;
use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;
use tpslab_analysis::gate::applies;
use tpslab_analysis::record::{Body, Meta, Record, RunRecord, SweepReport};
use tpslab_analysis::sweep::{
    analyse, cells, run_order, Cell, Design, Factor, Objective, RunMetrics,
};
use tpslab_analysis::sweep::{SweepPlan as Plan, SweepRun};
use tpslab_engine::guard::HostGuard;
use tpslab_engine::lab::{run_udp, UdpRunPlan};
use tpslab_engine::load::LoadConfig;
use tpslab_engine::server::{Mode, ServerConfig};
use tpslab_net::sched::SchedPolicy;
use tpslab_plan::limits;

#[derive(Args, Debug)]
pub(crate) struct SweepArgs {
    /// A factor and its levels, NAME=L1,L2,... (first level = baseline); repeatable.
    /// Names: rcvbuf, cpus (list or all), sched, threads, batch, rate, burst, work_ns,
    /// size, or a sysctl (net.core.rmem_max, net.core.rmem_default,
    /// net.core.netdev_max_backlog, ...; journaled and restored after every run).
    #[arg(long = "factor", value_name = "NAME=L1,L2,...")]
    pub(crate) factors: Vec<String>,
    /// ofat (default): one factor at a time from the baseline; factorial: every combination.
    #[arg(long)]
    pub(crate) design: Option<String>,
    /// Runs per cell, in randomised order (default 3).
    #[arg(long)]
    pub(crate) repeat: Option<usize>,
    /// What the best cell optimises: loss (default), tps or p99.
    #[arg(long)]
    pub(crate) objective: Option<String>,
    /// A plan file (TOML): design, repeat, objective, server_cmd, [server], [load] and
    /// [[factor]] tables (name, levels); flags given as well override it.
    #[arg(long)]
    pub(crate) plan: Option<PathBuf>,
    /// Run the user's server instead of tpslab's: a shell command with {port}, started
    /// for every run and stopped after it; cpus/sched factors apply to its threads.
    #[arg(long)]
    pub(crate) server_cmd: Option<String>,
    /// Built-in study: s2 (affinity x scheduler on an S2-like consumer).
    #[arg(long)]
    pub(crate) scenario: Option<String>,
    /// Folder for the plan and every run's record.
    #[arg(long, default_value = "tpslab-sweep")]
    pub(crate) out: PathBuf,
    /// Continue the sweep in --out: runs whose record is there are not run again.
    #[arg(long)]
    pub(crate) resume: bool,
    /// Seed of the run order (default: from the clock; kept in the plan).
    #[arg(long)]
    pub(crate) seed: Option<u64>,
    /// Write the record (JSON, schema tpslab.record/2, kind sweep: the plan, every run's
    /// figures, the statistics) to FILE.
    #[arg(long)]
    pub(crate) json: Option<PathBuf>,
    /// Write one CSV row per run to FILE.
    #[arg(long)]
    pub(crate) csv: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) gate: GateFlags,
    /// Observer sampling interval (1ms..=60s).
    #[arg(long, default_value = "10ms", value_parser = humantime::parse_duration)]
    pub(crate) interval: Duration,
    #[command(flatten)]
    pub(crate) server: ServerFlags,
    #[command(flatten)]
    pub(crate) load: LoadFlags,
    /// Generator sender threads (one socket each); --threads is the server's.
    #[arg(long, default_value_t = 1)]
    pub(crate) load_threads: usize,
}

/// Schema of the sweep plan and analysis.
pub const SCHEMA: &str = "tpslab.sweep/1";

const FACTORS: &[&str] = &[
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
];

/// A factor from its name and levels, each level checked; at least two distinct levels.
fn factor_of(name: &str, levels: Vec<String>) -> Result<Factor> {
    let spec = format!("{name}={}", levels.join(","));
    if levels.len() < 2 || levels.iter().any(|l| l.trim().is_empty()) {
        bail!("--factor \"{spec}\": give at least two non-empty levels, the first is the baseline");
    }
    let mut uniq = levels.clone();
    uniq.sort();
    uniq.dedup();
    if uniq.len() != levels.len() {
        bail!("--factor \"{spec}\": each level once");
    }
    for l in &levels {
        check_level(name, l)?;
    }
    Ok(Factor {
        name: name.to_string(),
        levels,
    })
}

fn parse_factor(spec: &str) -> Result<Factor> {
    let (name, levels) = spec.split_once('=').ok_or_else(|| {
        anyhow!("--factor \"{spec}\": allowed NAME=L1,L2,... e.g. rcvbuf=212992,8388608")
    })?;
    factor_of(
        name,
        levels.split(',').map(|l| l.trim().to_string()).collect(),
    )
}

/// Applies one factor level to a server and load (or returns it as a sysctl to set). The
/// value is parsed here; its limits are the configs' one validation, run on every cell by
/// [`check_plan`] (and on each level alone by [`check_level`]).
fn apply_level(
    srv: &mut ServerConfig,
    load: &mut LoadConfig,
    name: &str,
    level: &str,
) -> Result<Option<(String, String)>> {
    let bad = |what: &str| anyhow!("--factor {name}: level \"{level}\": {what}");
    let num = |what: &str| level.trim().parse::<u64>().map_err(|_| bad(what));
    match name {
        "rcvbuf" if level == "default" => srv.rcvbuf = None,
        "rcvbuf" => srv.rcvbuf = Some(num("allowed bytes or default")?),
        "cpus" => srv.cpus = flags::parse_cpus("--factor cpus: level", level)?,
        "sched" => srv.sched = level.parse::<SchedPolicy>().map_err(|e| bad(&e))?,
        "threads" => srv.threads = num("allowed a whole number")? as usize,
        "batch" => srv.batch = num("allowed a whole number")? as usize,
        "rate" => {
            load.rate_pps =
                tpslab_plan::units::parse_pps(&format!("--factor {name}: level"), level)?
        }
        "burst" => load.burst = num("allowed a whole number")?,
        "work_ns" => srv.work_ns = num("allowed a whole number of ns")?,
        "size" => load.size_bytes = num("allowed bytes")? as usize,
        "busy_poll" if level == "off" => srv.busy_poll_us = None,
        "busy_poll" => {
            srv.busy_poll_us = Some(
                u32::try_from(num("allowed microseconds or off")?)
                    .map_err(|_| bad("allowed microseconds or off"))?,
            )
        }
        "gro" => {
            srv.gro = match level {
                "on" => true,
                "off" => false,
                _ => return Err(bad("allowed on, off")),
            }
        }
        n if n.contains('.') => {
            if !tpslab_engine::env::SYSCTLS.contains(&n) {
                bail!(
                    "--factor {n}: allowed sysctls {}",
                    tpslab_engine::env::SYSCTLS.join(", ")
                );
            }
            if level.split_whitespace().any(|v| v.parse::<u64>().is_err()) {
                return Err(bad("allowed a number"));
            }
            // The kernel reads a leading 0 as octal: "020000" would be 8192.
            if level
                .split_whitespace()
                .any(|v| v.len() > 1 && v.starts_with('0'))
            {
                return Err(bad(&format!(
                    "a leading 0 makes the kernel read it as octal ({}); write it without the 0",
                    tpslab_engine::guard::canonical(level).unwrap_or_default()
                )));
            }
            return Ok(Some((n.to_string(), level.to_string())));
        }
        _ => bail!(
            "--factor {name}: unknown; allowed {} or a sysctl",
            FACTORS.join(", ")
        ),
    }
    Ok(None)
}

/// Checks one level alone, applied to the default server and load.
fn check_level(name: &str, level: &str) -> Result<()> {
    let (mut srv, mut load) = (ServerConfig::default(), LoadConfig::default());
    apply_level(&mut srv, &mut load, name, level)?;
    let relabel = |e: tpslab_plan::PlanError| {
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
fn cell_config(plan: &Plan, cell: &Cell) -> Result<(ServerConfig, LoadConfig, Sysctls)> {
    let mut srv = plan.server.clone();
    let mut load = plan.load.clone();
    let mut sysctls = vec![];
    for (k, v) in &cell.settings {
        sysctls.extend(apply_level(&mut srv, &mut load, k, v)?);
    }
    let at = |e: tpslab_plan::PlanError| {
        let what = cell
            .settings
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ");
        anyhow!("plan: the cell {what}: {e}")
    };
    srv.validate().map_err(at)?;
    load.validate().map_err(at)?;
    Ok((srv, load, sysctls))
}

/// The S2 study: a consumer that reads one datagram per call and does a little work
/// (like S2's Python `recvfrom` loop) under a fast sender of small datagrams; affinity
/// (all CPUs vs CPU 1, where S2 used CPU 3) x scheduler (other vs FIFO 99).
fn s2_plan(seed: u64, interval: Duration) -> Plan {
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
            work_ns: 6000,
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
            payload: None,
            seq_field: None,
            expect_replies: false,
            drain: Duration::from_millis(300),
            run_id: 0,
            // The generator on CPU 0: S2's sender was another machine.
            cpus: vec![0],
            gso: false,
        },
        interval_ms: interval.as_secs_f64() * 1e3,
        scenario: Some("s2".into()),
        server_cmd: None,
    }
}

fn record_path(out: &Path, cell: usize, rep: usize) -> PathBuf {
    out.join(format!("cell{cell:02}-rep{rep}.json"))
}

/// Reads a finished run's record (an interrupted one does not count).
/// A finished (not interrupted) run's record in `path`, of this release or the previous.
fn finished(path: &Path) -> Option<RunRecord> {
    let rec = Record::from_json(&std::fs::read_to_string(path).ok()?).ok()?;
    match rec.body {
        Body::UdpRun(r) if !r.interrupted => Some(r),
        _ => None,
    }
}

fn make_plan(a: &SweepArgs) -> Result<Plan> {
    let seed = a
        .seed
        .unwrap_or_else(|| tpslab_net::mono_ns() ^ std::process::id() as u64);
    flags::check_interval(a.interval)?;
    let mut plan = match a.scenario.as_deref() {
        Some("s2") => s2_plan(seed, a.interval),
        Some(s) => bail!("--scenario {s}: allowed s2"),
        None => {
            let mut server = flags::server_config(&a.server)?;
            if a.load.no_replies {
                server.mode = Mode::Sink;
            }
            let load = flags::load_config(&a.load, a.load_threads, "--load-threads", server.bind)?;
            Plan {
                schema: SCHEMA.into(),
                factors: vec![],
                design: Design::Ofat,
                repeat: 3,
                seed,
                objective: Objective::Loss,
                server,
                load,
                interval_ms: a.interval.as_secs_f64() * 1e3,
                scenario: None,
                server_cmd: None,
            }
        }
    };
    if let Some(path) = &a.plan {
        apply_plan_file(&mut plan, path)?;
    }
    if a.server_cmd.is_some() {
        plan.server_cmd = a.server_cmd.clone();
    }
    if !a.factors.is_empty() {
        plan.factors = a
            .factors
            .iter()
            .map(|f| parse_factor(f))
            .collect::<Result<_>>()?;
    }
    if let Some(cmd) = &plan.server_cmd {
        if !cmd.contains("{port}") {
            bail!("--server-cmd \"{cmd}\": must contain {{port}}, where tpslab puts the port to listen on");
        }
        if let Some(f) = plan.factors.iter().find(|f| {
            ["rcvbuf", "threads", "batch", "work_ns", "busy_poll", "gro"].contains(&f.name.as_str())
        }) {
            bail!(
                "--factor {}: a setting of tpslab's own server; with --server-cmd use cpus, sched, load factors or a sysctl",
                f.name
            );
        }
    }
    if plan.factors.is_empty() {
        bail!("no factor: give --factor NAME=L1,L2,... (or --scenario s2)");
    }
    let mut names: Vec<&str> = plan.factors.iter().map(|f| f.name.as_str()).collect();
    names.sort();
    names.dedup();
    if names.len() != plan.factors.len() {
        bail!("--factor: each factor once");
    }
    if let Some(d) = &a.design {
        plan.design = match d.as_str() {
            "ofat" => Design::Ofat,
            "factorial" => Design::Factorial,
            d => bail!("--design {d}: allowed ofat, factorial"),
        };
    }
    if let Some(r) = a.repeat {
        plan.repeat = r;
    }
    limits::REPEAT.check("--repeat", plan.repeat as u64)?;
    if let Some(o) = &a.objective {
        plan.objective = match o.as_str() {
            "loss" => Objective::Loss,
            "tps" => Objective::Tps,
            "p99" => Objective::P99,
            o => bail!("--objective {o}: allowed loss, tps, p99"),
        };
    }
    Ok(plan)
}

/// The TOML plan file: every field optional; factors' levels may be strings or numbers.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct PlanFile {
    design: Option<String>,
    repeat: Option<usize>,
    objective: Option<String>,
    server_cmd: Option<String>,
    server: Option<PlanServer>,
    load: Option<PlanLoad>,
    #[serde(default)]
    factor: Vec<PlanFactor>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct PlanServer {
    threads: Option<usize>,
    batch: Option<usize>,
    rcvbuf: Option<u64>,
    mode: Option<String>,
    work_ns: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct PlanLoad {
    rate: Option<f64>,
    size: Option<usize>,
    burst: Option<u64>,
    burst_interval: Option<String>,
    duration: Option<String>,
    warmup: Option<String>,
    no_replies: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PlanFactor {
    name: String,
    levels: Vec<toml::Value>,
}

fn apply_plan_file(plan: &mut Plan, path: &Path) -> Result<()> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("--plan {}", path.display()))?;
    let bad = |what: String| anyhow!("--plan {}: {what}", path.display());
    let f: PlanFile = toml::from_str(&text).map_err(|e| bad(e.to_string().replace('\n', " ")))?;
    let dur = |k: &str, v: &str| {
        humantime::parse_duration(v).map_err(|e| bad(format!("{k} \"{v}\": {e}")))
    };
    if let Some(s) = f.server {
        plan.server.threads = s.threads.unwrap_or(plan.server.threads);
        plan.server.batch = s.batch.unwrap_or(plan.server.batch);
        plan.server.rcvbuf = s.rcvbuf.or(plan.server.rcvbuf);
        plan.server.work_ns = s.work_ns.unwrap_or(plan.server.work_ns);
        if let Some(m) = s.mode {
            plan.server.mode = match m.as_str() {
                "replace" => Mode::Replace,
                "echo" => Mode::Echo,
                "sink" => Mode::Sink,
                _ => {
                    return Err(bad(format!(
                        "server.mode \"{m}\": allowed replace, echo, sink"
                    )))
                }
            };
        }
    }
    if let Some(l) = f.load {
        if let Some(r) = l.rate.filter(|r| !r.is_finite()) {
            return Err(bad(format!(
                "load.rate {r}: allowed a rate above 0 up to {:.0} pps",
                limits::MAX_RATE_PPS
            )));
        }
        plan.load.rate_pps = l.rate.unwrap_or(plan.load.rate_pps);
        plan.load.size_bytes = l.size.unwrap_or(plan.load.size_bytes);
        plan.load.burst = l.burst.unwrap_or(plan.load.burst);
        if let Some(v) = &l.duration {
            plan.load.duration = dur("load.duration", v)?;
        }
        if let Some(v) = &l.warmup {
            plan.load.warmup = dur("load.warmup", v)?;
        }
        if let Some(v) = &l.burst_interval {
            let iv = dur("load.burst_interval", v)?;
            if iv.is_zero() {
                return Err(bad(format!(
                    "load.burst_interval \"{v}\": allowed a positive duration, e.g. 50ms"
                )));
            }
            plan.load.rate_pps = plan.load.burst as f64 / iv.as_secs_f64();
        }
        if l.no_replies == Some(true) {
            plan.load.expect_replies = false;
            plan.server.mode = Mode::Sink;
        }
    }
    if !f.factor.is_empty() {
        plan.factors = f
            .factor
            .iter()
            .map(|x| {
                let levels: Vec<String> = x
                    .levels
                    .iter()
                    .map(|v| match v {
                        toml::Value::String(s) => s.clone(),
                        v => v.to_string(),
                    })
                    .collect();
                factor_of(&x.name, levels)
            })
            .collect::<Result<_>>()?;
    }
    if let Some(d) = f.design {
        plan.design = match d.as_str() {
            "ofat" => Design::Ofat,
            "factorial" => Design::Factorial,
            _ => return Err(bad(format!("design \"{d}\": allowed ofat, factorial"))),
        };
    }
    plan.repeat = f.repeat.unwrap_or(plan.repeat);
    if let Some(o) = f.objective {
        plan.objective = match o.as_str() {
            "loss" => Objective::Loss,
            "tps" => Objective::Tps,
            "p99" => Objective::P99,
            _ => return Err(bad(format!("objective \"{o}\": allowed loss, tps, p99"))),
        };
    }
    if f.server_cmd.is_some() {
        plan.server_cmd = f.server_cmd;
    }
    Ok(())
}

/// Checks a plan however it was made (flags, plan file, or plan.json on --resume): the
/// same limits as the command line's.
fn check_plan(plan: &Plan) -> Result<()> {
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
    let iv = Duration::from_secs_f64(plan.interval_ms.clamp(0.0, 1e12) / 1e3);
    if !plan.interval_ms.is_finite() || limits::SAMPLE_INTERVAL.check("", iv).is_err() {
        bail!(
            "plan: interval_ms {}: allowed {}",
            plan.interval_ms,
            limits::SAMPLE_INTERVAL.allowed()
        );
    }
    limits::REPEAT
        .check("plan: repeat", plan.repeat as u64)
        .map(drop)?;
    if plan.factors.is_empty() {
        bail!("plan: no factor");
    }
    for f in &plan.factors {
        factor_of(&f.name, f.levels.clone())?;
    }
    for cell in cells(&plan.factors, plan.design) {
        cell_config(plan, &cell)?;
    }
    Ok(())
}

/// Runs `tpslab sweep`.
pub fn run(a: SweepArgs) -> Result<ExitCode> {
    // Files inside --out are checked once that folder exists (it is made below).
    let inside_out = |p: &std::path::Path| p.parent() == Some(a.out.as_path());
    if let Some(p) = a.json.as_deref().filter(|p| !inside_out(p)) {
        out::check_output("--json", p, false)?;
    }
    if let Some(p) = a.csv.as_deref().filter(|p| !inside_out(p)) {
        out::check_output("--csv", p, false)?;
    }
    a.gate.conditions(applies::SWEEP)?;
    let plan_path = a.out.join("plan.json");
    let plan: Plan = if a.resume {
        let text = std::fs::read_to_string(&plan_path)
            .with_context(|| format!("--resume: no plan in {}", a.out.display()))?;
        let plan: Plan = serde_json::from_str(&text)
            .with_context(|| format!("--resume: {}", plan_path.display()))?;
        check_plan(&plan).with_context(|| format!("--resume: {}", plan_path.display()))?;
        plan
    } else {
        let plan = make_plan(&a)?;
        check_plan(&plan)?;
        // Host sysctls need root: say so now, before any folder or file is made.
        if let Some(f) = plan.factors.iter().find(|f| f.name.contains('.')) {
            if !tpslab_net::is_root() {
                bail!(
                    "--factor {}: changing a sysctl needs root; run as root or drop the factor",
                    f.name
                );
            }
        }
        let leftovers = std::fs::read_dir(&a.out).is_ok_and(|mut d| {
            d.any(|e| e.is_ok_and(|e| e.file_name().to_string_lossy().starts_with("cell")))
        });
        if plan_path.exists() || leftovers {
            bail!(
                "--out {}: holds a sweep already; --resume to continue it or choose another folder",
                a.out.display()
            );
        }
        std::fs::create_dir_all(&a.out).with_context(|| format!("--out {}", a.out.display()))?;
        out::write_json(&plan_path, &plan)?;
        plan
    };
    let cells = cells(&plan.factors, plan.design);
    let order = run_order(cells.len(), plan.repeat, plan.seed);
    let stop = out::install_signals()?;
    let env = tpslab_engine::env::environment();
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let t0 = tpslab_net::mono_ns();
    let out_dir = a.out.display().to_string();
    tpslab_report::term::sweep_header(&mut std::io::stdout().lock(), &plan, &out_dir)?;
    let pb = indicatif::ProgressBar::new(order.len() as u64);
    pb.set_style(
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} runs, ETA {eta} {msg}")
            .unwrap()
            .progress_chars("=> "),
    );
    let mut runs: Vec<(usize, usize, RunMetrics, BTreeMap<String, String>)> = vec![];
    let mut notes = vec![];
    for (i, &(c, rep)) in order.iter().enumerate() {
        if stop.load(Relaxed) {
            notes.push(format!(
                "interrupted after {i} of {} runs: --resume continues",
                order.len()
            ));
            break;
        }
        let path = record_path(&a.out, c, rep);
        let cell = &cells[c];
        pb.set_message(cell.label());
        let rec = match finished(&path) {
            Some(r) => r,
            None => {
                let (srv, mut load, sysctls) = cell_config(&plan, cell)?;
                load.run_id = plan.seed ^ ((i as u64) << 40) ^ tpslab_net::mono_ns();
                let guard = if sysctls.is_empty() {
                    None
                } else {
                    Some(HostGuard::apply(&sysctls)?)
                };
                let interval = Duration::from_secs_f64(plan.interval_ms / 1e3);
                let rec = match &plan.server_cmd {
                    None => run_udp(
                        UdpRunPlan {
                            server: Some(srv),
                            load,
                            interval,
                            target_pid: None,
                            watch_port: None,
                        },
                        &stop,
                    )?,
                    Some(cmd) => {
                        let user =
                            crate::server_proc::ServerProcess::user_udp(cmd, &srv.cpus, srv.sched)?;
                        load.target = user.addr;
                        let pid = user.pid();
                        let rec = run_udp(
                            UdpRunPlan {
                                server: None,
                                load,
                                interval,
                                target_pid: Some(pid),
                                watch_port: None,
                            },
                            &stop,
                        )?;
                        drop(user);
                        rec
                    }
                };
                drop(guard);
                let rec = Record::new(Body::UdpRun(rec));
                out::write_json(&path, &rec)?;
                let Body::UdpRun(rec) = rec.body else {
                    unreachable!("made as a UDP run above")
                };
                if rec.interrupted {
                    notes.push(format!(
                        "run {} of cell {} interrupted; not counted",
                        rep,
                        cell.label()
                    ));
                    break;
                }
                rec
            }
        };
        runs.push((c, rep, RunMetrics::of(&rec), cell.settings.clone()));
        pb.inc(1);
    }
    pb.finish_and_clear();
    let metrics: Vec<(usize, RunMetrics)> =
        runs.iter().map(|(c, _, m, _)| (*c, m.clone())).collect();
    if metrics.iter().all(|(c, _)| *c != 0) {
        if stop.load(Relaxed) {
            eprintln!("tpslab: interrupted before a run of the baseline cell finished; the records so far are in {} (--resume continues)", a.out.display());
            return Ok(ExitCode::from(130));
        }
        bail!("no run of the baseline cell finished: nothing to compare");
    }
    let result = analyse(&cells, &metrics, plan.objective);
    let interrupted = stop.load(Relaxed);
    let meta = Meta::new(
        &env,
        started,
        (tpslab_net::mono_ns() - t0) as f64 / 1e9,
        interrupted,
    );
    let rec = Record::with_meta(
        meta,
        Body::Sweep(SweepReport {
            plan,
            out: out_dir,
            runs: runs
                .iter()
                .map(|(cell, rep, m, _)| SweepRun {
                    cell: *cell,
                    rep: *rep,
                    metrics: m.clone(),
                })
                .collect(),
            result,
            notes,
        }),
    );
    let Body::Sweep(r) = &rec.body else {
        unreachable!("made as a sweep above")
    };
    // The record first: a CSV that cannot be written does not cost it.
    if let Some(p) = &a.json {
        out::write_json(p, &rec)?;
    }
    if let Some(p) = &a.csv {
        let mut text = Vec::new();
        tpslab_report::csv::sweep(&mut text, r)?;
        std::fs::write(p, text).with_context(|| format!("--csv {}", p.display()))?;
    }
    let mut stdout = std::io::stdout().lock();
    tpslab_report::term::sweep_results(&mut stdout, r)?;
    if let Some(p) = &a.json {
        writeln!(stdout, "record written to {}", p.display())?;
    }
    a.gate.exit(
        &tpslab_analysis::sweep::outcome(&metrics, interrupted),
        applies::SWEEP,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A plan file from `text`, applied to the S2 plan and checked as `sweep` checks it.
    fn plan_from(text: &str) -> Result<Plan> {
        let path = std::env::temp_dir().join(format!(
            "tpslab-plan-prop-{}-{:x}.toml",
            std::process::id(),
            tpslab_net::mono_ns()
        ));
        std::fs::write(&path, text)?;
        let mut plan = s2_plan(1, Duration::from_millis(10));
        let r = apply_plan_file(&mut plan, &path).and_then(|_| check_plan(&plan));
        let _ = std::fs::remove_file(&path);
        r.map(|_| plan)
    }

    #[test]
    fn plan_file_values_that_would_run_at_another_rate_are_refused() {
        for (text, want) in [
            ("[load]\nburst_interval = \"0s\"\n", "load.burst_interval"),
            ("[load]\nrate = inf\n", "load.rate inf"),
            ("[load]\nrate = nan\n", "load.rate NaN"),
            ("[server]\nthreads = 0\n", "plan: server threads 0"),
            ("[load]\nsize = 39\n", "plan: load size 39"),
            ("repeat = 101\n", "plan: repeat 101"),
        ] {
            let e = plan_from(text).unwrap_err().to_string();
            assert!(e.contains(want), "{text:?}: {e}");
        }
        assert!(plan_from("[load]\nrate = 5000\n").is_ok());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn any_plan_file_is_a_plan_or_a_one_line_error(
            lines in proptest::collection::vec(
                "(design|repeat|objective|\\[server\\]|\\[load\\]|\\[\\[factor\\]\\]|threads|batch|rcvbuf|mode|work_ns|rate|size|burst|burst_interval|duration|warmup|no_replies|name|levels) ?= ?(-?[0-9]{1,12}(\\.[0-9]{1,3})?|\"[a-z0-9:. ]{0,12}\"|\\[\"[a-z0-9_.]{0,10}\", ?[0-9]{1,6}\\]|true|inf|nan)?",
                0..12,
            )
        ) {
            let text = lines.join("\n");
            match plan_from(&text) {
                Ok(p) => {
                    // What passes can run: every cell's server and load validate.
                    for c in cells(&p.factors, p.design) {
                        prop_assert!(cell_config(&p, &c).is_ok());
                    }
                }
                Err(e) => prop_assert!(!e.to_string().contains('\n'), "{}", e),
            }
        }

        #[test]
        fn any_factor_spec_is_a_factor_or_a_one_line_error(spec in "\\PC{0,40}") {
            if let Err(e) = parse_factor(&spec) {
                prop_assert!(!e.to_string().contains('\n') || spec.contains('\n'));
            }
        }
    }
}
