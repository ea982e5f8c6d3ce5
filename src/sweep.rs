//! `tpslab sweep`: its flags and the plan they make (or `--resume`'s); the folder, the
//! runs and the analysis are [`tpslab_run::sweep`]'s.

use crate::flags::{self, GateFlags, LoadFlags, ServerFlags};
use crate::out;
use anyhow::{bail, Result};
use clap::Args;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use tpslab_analysis::gate::applies;
use tpslab_analysis::record::Body;
use tpslab_engine::server::Mode;
use tpslab_plan::sweep::{apply_plan_file, s2_plan, SweepFlags, SweepPlan as Plan};
use tpslab_run::sweep::Event;

#[derive(Args, Debug)]
pub(crate) struct SweepArgs {
    /// A factor and its levels, NAME=L1,L2,... (first level = baseline); repeatable.
    /// Names: rcvbuf, cpus (list or all), sched, threads, batch, rate, burst, work_ns,
    /// size, busy_poll, gro, steer (hash, cpu, random: --reuseport-steer), or a sysctl
    /// (net.core.rmem_max, net.core.rmem_default, net.core.netdev_max_backlog, ...;
    /// journaled and restored after every run).
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
    /// Show the sweep full screen while it goes: the runs done so far (cell, TPS, loss,
    /// p99) as the table fills in, above the run going now (offered vs delivered pps,
    /// this interval's drops by layer, the rx_queue against its SO_RCVBUF limit,
    /// latency). Keys: q ends the sweep as Ctrl-C does (--resume continues), p freezes
    /// the screen, ? help. Standard output must be a terminal.
    #[arg(long)]
    pub(crate) live: bool,
}

/// A new sweep's plan from the flags and a plan file (flags given override it).
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
            Plan::of_flags(server, load, seed, a.interval)
        }
    };
    if let Some(path) = &a.plan {
        let text =
            tpslab_run::input::read_text("--plan", path, tpslab_run::input::PLAN_MAX_BYTES, false)?;
        apply_plan_file(&mut plan, &format!("--plan {}", path.display()), &text)?;
    }
    SweepFlags {
        server_cmd: a.server_cmd.clone(),
        factors: a.factors.clone(),
        design: a.design.clone(),
        repeat: a.repeat,
        objective: a.objective.clone(),
    }
    .apply(&mut plan)?;
    Ok(plan)
}

impl SweepArgs {
    /// A new sweep's plan, checked ([`tpslab_run::sweep::check_new`]); None with
    /// `--resume` (the plan is the folder's). The output files outside `--out` and the
    /// gate are checked too. Errors: one line naming the flag, factor or level.
    pub(crate) fn plan(&self) -> Result<Option<Plan>> {
        // Files inside --out are checked once that folder exists (it is made later).
        let inside_out = |p: &std::path::Path| p.parent() == Some(self.out.as_path());
        if let Some(p) = self.record.json.as_deref().filter(|p| !inside_out(p)) {
            crate::flags::check_output("--json", p, false)?;
        }
        if let Some(p) = self.record.html.as_deref().filter(|p| !inside_out(p)) {
            crate::flags::check_output("--html", p, false)?;
        }
        if let Some(p) = self.csv.as_deref().filter(|p| !inside_out(p)) {
            crate::flags::check_output("--csv", p, false)?;
        }
        self.gate.conditions(applies::SWEEP)?;
        if self.live {
            out::check_live()?;
        }
        if self.resume {
            return Ok(None);
        }
        let plan = make_plan(self)?;
        tpslab_run::sweep::check_new(&plan)?;
        Ok(Some(plan))
    }
}

/// Runs `tpslab sweep`.
pub fn run(a: SweepArgs) -> Result<ExitCode> {
    let new = a.plan()?;
    // Before the sysctl levels are tried: a Ctrl-C then still restores them.
    let ctx = out::ctx(None)?;
    let plan = tpslab_run::sweep::prepare(new, &a.out)?;
    let exporter = a.metrics.start("sweep")?;
    tpslab_report::term::sweep_header(
        &mut std::io::stdout().lock(),
        &plan,
        &a.out.display().to_string(),
    )?;
    let cells = tpslab_plan::sweep::cells(&plan.factors, plan.design).len();
    let planned = tpslab_plan::sweep::run_order(cells, plan.repeat, plan.seed).len();
    let mut ctx = ctx;
    let load = &plan.load;
    let header = tpslab_report::live::LiveHeader {
        command: "sweep".into(),
        target: match &plan.server_cmd {
            Some(_) => "the server of --server-cmd".into(),
            None => "tpslab's server".into(),
        },
        planned_s: Some((load.warmup + load.duration).as_secs_f64()),
        no_latency: (!load.expect_replies).then(|| "the load reads no replies".into()),
    };
    let kind = tpslab_report::live::RunsKind::Sweep { planned };
    let view = out::attach_runs(a.live, kind, header, &mut ctx)?;
    let pb = if out::progress_shown() && view.is_none() {
        indicatif::ProgressBar::new(planned as u64)
    } else {
        indicatif::ProgressBar::hidden()
    };
    pb.set_style(
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} runs, ETA {eta} {msg}")
            .unwrap()
            .progress_chars("=> "),
    );
    let to_view = view.as_ref().map(|v| v.1.clone());
    let rec = tpslab_run::sweep::run(&plan, &a.out, &ctx, &mut |e| match e {
        Event::Next(cell) => {
            if let Some(tx) = &to_view {
                let _ = tx.send(out::RunsItem::Run(cell.label()));
            }
            pb.set_message(cell.label())
        }
        Event::Done {
            done,
            planned,
            cell,
            record,
        } => {
            pb.inc(1);
            if let Some(tx) = &to_view {
                let m = <tpslab_analysis::sweep::RunMetrics as tpslab_analysis::sweep::RunMetricsExt>::of(record);
                let _ = tx.send(out::RunsItem::SweepDone(done, cell.label(), Box::new(m)));
            }
            // Scraped: the runs done, and the last run's figures labelled by its cell.
            if let Some(e) = &exporter {
                e.set(tpslab_report::metrics::sweep_progress(
                    done,
                    planned,
                    &cell.label(),
                    record,
                ));
            }
        }
    });
    pb.finish_and_clear();
    // The terminal is given back before the report prints (or the error is said).
    drop(to_view);
    drop(view);
    let Some(rec) = rec? else {
        eprintln!("tpslab: interrupted before a run of the baseline cell finished; the records so far are in {} (--resume continues)", a.out.display());
        return Ok(ExitCode::from(130));
    };
    let Body::Sweep(r) = &rec.body else {
        unreachable!("a sweep makes a sweep record")
    };
    let outputs = out::Outputs::of(&a.record).with("--csv", a.csv.as_deref(), "CSV", |w| {
        tpslab_report::csv::sweep(w, r)
    });
    let print = |out: &mut dyn Write| tpslab_report::term::sweep_results(out, r);
    out::emit(&rec, outputs, out::Terminal::With(&print))?;
    a.gate.exit(
        &tpslab_analysis::sweep::outcome(
            &tpslab_run::sweep::metrics(&r.runs),
            rec.meta.interrupted,
        ),
        applies::SWEEP,
    )
}
