//! `tpslab sweep`: its flags and the plan they make (or `--resume`'s); the folder, the
//! runs and the analysis are [`tpslab_run::sweep`]'s.

use crate::flags::{self, GateFlags, LoadFlags, ServerFlags};
use anyhow::{bail, Result};
use clap::Args;
use std::path::PathBuf;
use std::time::Duration;
use tpslab_analysis::gate::applies;
use tpslab_plan::sweep::{apply_plan_file, s2_plan, SweepFlags, SweepPlan as Plan};
use tpslab_plan::udp::Mode;

#[derive(Args, Debug)]
pub struct SweepArgs {
    /// A factor and its levels, NAME=L1,L2,... (first level = baseline); repeatable.
    /// Names: rcvbuf, cpus (list or all), sched, threads, batch, rate, burst, work_ns,
    /// size, busy_poll, gro, steer (hash, cpu, random: --reuseport-steer), or a sysctl
    /// (net.core.rmem_max, net.core.rmem_default, net.core.netdev_max_backlog, ...;
    /// journaled and restored after every run).
    #[arg(long = "factor", value_name = "NAME=L1,L2,...")]
    pub factors: Vec<String>,
    /// ofat (default): one factor at a time from the baseline; factorial: every combination.
    #[arg(long)]
    pub design: Option<String>,
    /// Runs per cell, in randomised order (default 3).
    #[arg(long)]
    pub repeat: Option<usize>,
    /// What the best cell optimises: loss (default), tps or p99.
    #[arg(long)]
    pub objective: Option<String>,
    /// A plan file (TOML): design, repeat, objective, server_cmd, `[server]`, `[load]` and
    /// `[[factor]]` tables (name, levels); flags given as well override it.
    #[arg(long)]
    pub plan: Option<PathBuf>,
    /// Run the user's server instead of tpslab's: a shell command with {port}, run by
    /// `sh -c` as its own process group, started for every run and stopped after it (and
    /// with tpslab); cpus/sched factors apply to the threads of the group's process that
    /// owns the UDP socket on the port.
    #[arg(long)]
    pub server_cmd: Option<String>,
    /// Built-in study: s2 (affinity x scheduler on an S2-like consumer).
    #[arg(long)]
    pub scenario: Option<String>,
    /// Folder for the plan and every run's record.
    #[arg(long, default_value = "tpslab-sweep")]
    pub out: PathBuf,
    /// Continue the sweep in --out: runs whose record is there are not run again.
    #[arg(long)]
    pub resume: bool,
    /// Seed of the run order (default: from the clock; kept in the plan).
    #[arg(long)]
    pub seed: Option<u64>,
    #[command(flatten)]
    pub record: flags::RecordFlag,
    #[command(flatten)]
    pub metrics: crate::metrics::ListenFlag,
    /// Write one CSV row per run to FILE.
    #[arg(long)]
    pub csv: Option<PathBuf>,
    #[command(flatten)]
    pub gate: GateFlags,
    /// Observer sampling interval (1ms..=60s).
    #[arg(long, default_value = "10ms", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub interval: Duration,
    #[command(flatten)]
    pub server: ServerFlags,
    #[command(flatten)]
    pub load: LoadFlags,
    /// Generator sender threads (one socket each); --threads is the server's.
    #[arg(long, default_value_t = 1)]
    pub load_threads: usize,
    /// Show the sweep full screen while it goes: the runs done so far (cell, TPS, loss,
    /// p99) as the table fills in, above the run going now (offered vs delivered pps,
    /// this interval's drops by layer, the rx_queue against its SO_RCVBUF limit,
    /// latency). Keys: q ends the sweep as Ctrl-C does (--resume continues), p freezes
    /// the screen, ? help. Standard output must be a terminal.
    #[arg(long)]
    pub live: bool,
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
    pub fn plan(&self) -> Result<Option<Plan>> {
        // No planted link on the way to --out; files inside it are checked once that
        // folder exists (it is made later).
        tpslab_run::outfile::check_folder("--out", &self.out)?;
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
            crate::live::check()?;
        }
        if self.resume {
            return Ok(None);
        }
        let plan = make_plan(self)?;
        tpslab_run::sweep::check_new(&plan)?;
        Ok(Some(plan))
    }
}
