//! `tpslab sweep`: runs a designed experiment over tunables and says which helped.

use crate::flags::{self, GateFlags, LoadFlags, ServerFlags};
use crate::out;
use anyhow::{bail, Context, Result};
use clap::Args;
use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;
use tpslab_analysis::gate::applies;
use tpslab_analysis::prelude::*;
use tpslab_analysis::record::{Body, Record, RunRecord, SweepReport};
use tpslab_analysis::sweep::{analyse, RunMetrics, SweepRun};
use tpslab_engine::guard::HostGuard;
use tpslab_engine::server::Mode;
use tpslab_engine::udp_run::{run_udp, UdpRunPlan};
use tpslab_plan::limits;
use tpslab_plan::sweep::{
    apply_plan_file, cell_config, cells, check_plan, parse_factor, run_order, s2_plan, Design,
    Objective, SweepPlan as Plan, SCHEMA,
};

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
    /// Run the user's server instead of tpslab's: a shell command with {port}, run by
    /// `sh -c` as its own process group, started for every run and stopped after it (and
    /// with tpslab); cpus/sched factors apply to the threads of the group's process that
    /// owns the UDP socket on the port.
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
    #[command(flatten)]
    pub(crate) record: flags::RecordFlag,
    #[command(flatten)]
    pub(crate) metrics: crate::metrics::ListenFlag,
    /// Write one CSV row per run to FILE.
    #[arg(long)]
    pub(crate) csv: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) gate: GateFlags,
    /// Observer sampling interval (1ms..=60s).
    #[arg(long, default_value = "10ms", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub(crate) interval: Duration,
    #[command(flatten)]
    pub(crate) server: ServerFlags,
    #[command(flatten)]
    pub(crate) load: LoadFlags,
    /// Generator sender threads (one socket each); --threads is the server's.
    #[arg(long, default_value_t = 1)]
    pub(crate) load_threads: usize,
}

fn record_path(out: &Path, cell: usize, rep: usize) -> PathBuf {
    out.join(format!("cell{cell:02}-rep{rep}.json"))
}

/// Reads a finished run's record (an interrupted one does not count).
/// A finished (not interrupted) run's record in `path`, of this release or the previous.
fn finished(path: &Path) -> Option<RunRecord> {
    let text = crate::input::read_text("", path, crate::input::RECORD_MAX_BYTES, false).ok()?;
    let rec = Record::from_json(&text).ok()?;
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
        let text = crate::input::read_text("--plan", path, crate::input::PLAN_MAX_BYTES, false)?;
        apply_plan_file(&mut plan, &format!("--plan {}", path.display()), &text)?;
    }
    if a.server_cmd.is_some() {
        plan.server_cmd = a.server_cmd.clone();
    }
    if !a.factors.is_empty() {
        plan.factors = a
            .factors
            .iter()
            .map(|f| parse_factor(f))
            .collect::<Result<_, _>>()?;
    }
    if plan.factors.is_empty() {
        bail!("no factor: give --factor NAME=L1,L2,... (or --scenario s2)");
    }
    if let Some(d) = &a.design {
        plan.design = Design::parse("--design", d)?;
    }
    if let Some(r) = a.repeat {
        plan.repeat = r;
        limits::REPEAT.check("--repeat", r as u64)?;
    }
    if let Some(o) = &a.objective {
        plan.objective = Objective::parse("--objective", o)?;
    }
    Ok(plan)
}

/// The plan: read back from `--out` with `--resume` (checked as a new one is), or made
/// from the flags and a plan file, checked, and saved as `plan_path` in a new `--out`.
fn load_or_make_plan(a: &SweepArgs, plan_path: &Path) -> Result<Plan> {
    Ok(if a.resume {
        own_folder(&a.out).context("--resume")?;
        let text =
            crate::input::read_text("--resume", plan_path, crate::input::PLAN_MAX_BYTES, false)?;
        let plan: Plan = serde_json::from_str(&text)
            .with_context(|| format!("--resume: {}", plan_path.display()))?;
        check_plan(&plan).with_context(|| format!("--resume: {}", plan_path.display()))?;
        check_sysctl_levels(&plan)?;
        plan
    } else {
        let plan = make_plan(a)?;
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
        check_sysctl_levels(&plan)?;
        let leftovers = std::fs::read_dir(&a.out).is_ok_and(|mut d| {
            d.any(|e| e.is_ok_and(|e| e.file_name().to_string_lossy().starts_with("cell")))
        });
        if plan_path.exists() || leftovers {
            bail!(
                "--out {}: holds a sweep already; --resume to continue it or choose another folder",
                a.out.display()
            );
        }
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&a.out)
            .with_context(|| format!("--out {}", a.out.display()))?;
        own_folder(&a.out)?;
        out::write_json_as("--out", plan_path, &plan)?;
        plan
    })
}

/// `--out` is the user's own folder (not a link, owned by this user, writable by neither
/// group nor others): its plan.json names the command `--resume` runs (`server_cmd`) and
/// its records count as runs done, so a folder another user can write to is refused.
fn own_folder(dir: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(dir)
        .map_err(|e| anyhow::anyhow!("--out {}: {e}", dir.display()))?;
    let euid = rustix::process::geteuid().as_raw();
    if !m.is_dir() || m.uid() != euid || m.mode() & 0o022 != 0 {
        bail!(
            "--out {}: {}; allowed a folder of this user's that group and others cannot write (its plan names the command a resume runs)",
            dir.display(),
            if !m.is_dir() {
                "not a folder (a link is not followed)".to_string()
            } else if m.uid() != euid {
                format!("owned by uid {}", m.uid())
            } else {
                format!("mode {:o}", m.mode() & 0o7777)
            }
        );
    }
    Ok(())
}

/// Every level of every sysctl factor, written once and restored at once (the host
/// guard), so a level the kernel refuses stops the sweep before its first run, not at its
/// cell. Errors: one line naming the factor, the level and the kernel's answer.
fn check_sysctl_levels(plan: &Plan) -> Result<()> {
    for f in plan.factors.iter().filter(|f| f.name.contains('.')) {
        for level in &f.levels {
            HostGuard::check_accepted(&f.name, level).map_err(|e| {
                anyhow::anyhow!(
                    "--factor {}: level \"{level}\": the kernel does not take it ({e})",
                    f.name
                )
            })?;
        }
    }
    Ok(())
}

/// Runs one cell's repetition (the `i`-th run of the sweep), the user's server started
/// for it with `--server-cmd`, its sysctls applied and restored; its record is written to
/// `path` before anything else happens to it.
fn run_cell(
    plan: &Plan,
    cell: &tpslab_plan::sweep::Cell,
    i: usize,
    path: &Path,
    stop: &std::sync::atomic::AtomicBool,
) -> Result<RunRecord> {
    let (srv, mut load, sysctls) = cell_config(plan, cell)?;
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
                no_drop_reasons: false,
            },
            stop,
        )?,
        Some(cmd) => {
            let user = crate::server_proc::ServerProcess::user_udp(cmd, &srv.cpus, srv.sched)?;
            load.target = user.addr;
            let pid = user.pid();
            let rec = run_udp(
                UdpRunPlan {
                    server: None,
                    load,
                    interval,
                    target_pid: Some(pid),
                    watch_port: None,
                    no_drop_reasons: false,
                },
                stop,
            )?;
            drop(user);
            rec
        }
    };
    drop(guard);
    let rec = Record::new(Body::UdpRun(rec));
    out::write_json_as("--out", path, &rec)?;
    let Body::UdpRun(rec) = rec.body else {
        unreachable!("made as a UDP run above")
    };
    Ok(rec)
}

/// Runs `tpslab sweep`.
pub fn run(a: SweepArgs) -> Result<ExitCode> {
    // Files inside --out are checked once that folder exists (it is made below).
    let inside_out = |p: &std::path::Path| p.parent() == Some(a.out.as_path());
    if let Some(p) = a.record.json.as_deref().filter(|p| !inside_out(p)) {
        out::check_output("--json", p, false)?;
    }
    if let Some(p) = a.record.html.as_deref().filter(|p| !inside_out(p)) {
        out::check_output("--html", p, false)?;
    }
    if let Some(p) = a.csv.as_deref().filter(|p| !inside_out(p)) {
        out::check_output("--csv", p, false)?;
    }
    a.gate.conditions(applies::SWEEP)?;
    let plan_path = a.out.join("plan.json");
    // Before the sysctl levels are tried: a Ctrl-C then still restores them.
    let stop = out::install_signals()?;
    let plan = load_or_make_plan(&a, &plan_path)?;
    let cells = cells(&plan.factors, plan.design);
    let order = run_order(cells.len(), plan.repeat, plan.seed);
    let exporter = a.metrics.start("sweep")?;
    let started = crate::out::Started::now();
    let out_dir = a.out.display().to_string();
    tpslab_report::term::sweep_header(&mut std::io::stdout().lock(), &plan, &out_dir)?;
    let pb = if out::progress_shown() {
        indicatif::ProgressBar::new(order.len() as u64)
    } else {
        indicatif::ProgressBar::hidden()
    };
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
                let rec = run_cell(&plan, cell, i, &path, &stop)?;
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
        // Scraped: the runs done, and the last run's figures labelled by its cell.
        if let Some(e) = &exporter {
            use tpslab_report::metrics::{labels, of_run, Family, Kind, Value};
            let mut fams = vec![
                Family::one(
                    "tpslab_sweep_runs_done",
                    "Runs of the sweep finished so far.",
                    Kind::Gauge,
                    vec![],
                    Value::Int(runs.len() as u64),
                ),
                Family::one(
                    "tpslab_sweep_runs_planned",
                    "Runs the sweep's plan holds.",
                    Kind::Gauge,
                    vec![],
                    Value::Int(order.len() as u64),
                ),
            ];
            let cell_label = cell.label();
            for mut f in of_run(&rec) {
                for (l, _) in &mut f.series {
                    l.extend(labels(&[("cell", &cell_label)]));
                }
                fams.push(f);
            }
            e.set(fams);
        }
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
    let meta = started.meta(interrupted);
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
    let mut outputs = a.record.outputs();
    if let Some(p) = &a.csv {
        let mut text = Vec::new();
        let r = tpslab_report::csv::sweep(&mut text, r)
            .map(|_| text)
            .map_err(anyhow::Error::from);
        outputs.extra.push(("--csv", p, "CSV", r));
    }
    let print = |out: &mut dyn Write| tpslab_report::term::sweep_results(out, r);
    out::emit(&rec, outputs, out::Terminal::With(&print))?;
    a.gate.exit(
        &tpslab_analysis::sweep::outcome(&metrics, interrupted),
        applies::SWEEP,
    )
}
