//! `tpslab agent` and `tpslab merge`: their flags and the plans they make; the wait, the
//! run and the merge are [`tpslab_run::agent`]'s.

use crate::flags::{GateFlags, RecordFlag};
use crate::out;
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use tpslab_run::agent::{AgentPlan, MergePlan};

#[derive(Args, Debug)]
pub(crate) struct AgentArgs {
    /// The fleet's load plan (TOML: target, rate for all agents together, size, duration,
    /// warmup, drain, threads, no_replies, max_clock_error, max_wait); `-`: standard input.
    #[arg(long, value_name = "FILE")]
    pub(crate) plan: PathBuf,
    /// This agent, 0..M-1 (a Kubernetes Indexed Job's completion index).
    #[arg(long)]
    pub(crate) index: usize,
    /// Agents in the fleet (M).
    #[arg(long)]
    pub(crate) of: usize,
    /// The common start: RFC 3339 UTC (2026-11-24T10:00:00Z, fractions allowed) or
    /// @UNIX_SECONDS. The agent refuses a time already passed or further ahead than the
    /// plan's max_wait.
    #[arg(long, value_name = "TIME")]
    pub(crate) start_at: String,
    /// Observer sampling interval (1ms..=60s).
    #[arg(long, default_value = "10ms", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub(crate) interval: Duration,
    #[command(flatten)]
    pub(crate) record: RecordFlag,
}

impl AgentArgs {
    /// The agent's plan: the fleet's plan read and checked, the start time parsed, the
    /// interval and the output files checked.
    pub(crate) fn plan(&self) -> Result<AgentPlan> {
        let fleet = tpslab_run::input::read_fleet_plan(&self.plan, true)?.1;
        let start_ns = tpslab_plan::fleet::parse_start(&self.start_at)?;
        crate::flags::check_interval(self.interval)?;
        self.record.check(true)?;
        Ok(AgentPlan {
            fleet,
            index: self.index,
            of: self.of,
            start_ns,
            start_at: self.start_at.clone(),
            interval: self.interval,
        })
    }
}

/// Runs `tpslab agent`.
pub(crate) fn agent(a: AgentArgs) -> Result<ExitCode> {
    let plan = a.plan()?;
    let ready = tpslab_run::agent::ready(&plan)?;
    let ctx = out::ctx(None)?;
    eprintln!("{}", ready.line(&plan));
    let Some(rec) = tpslab_run::agent::run(&plan, ready, &ctx)? else {
        eprintln!("tpslab: exit 130: interrupted before the start; nothing was sent");
        return Ok(ExitCode::from(130));
    };
    out::emit_run(
        &rec,
        crate::out::Outputs::of(&a.record),
        false,
        &GateFlags::default(),
        false,
    )
}

#[derive(Args, Debug)]
pub(crate) struct MergeArgs {
    /// The agents' records (`tpslab agent --json`), one per agent of one fleet run.
    #[arg(required = true, value_name = "RECORD")]
    files: Vec<PathBuf>,
    /// A record of the server over the fleet's run (`tpslab watch --pid PID --json`, as
    /// root): the ledger's server side (what it read, its socket's drops, its host's).
    #[arg(long, value_name = "RECORD")]
    server: Option<PathBuf>,
    /// Merge even when agents of the plan are missing (the total says which).
    #[arg(long)]
    allow_missing: bool,
    /// Show the source counter of every figure.
    #[arg(long)]
    explain: bool,
    #[command(flatten)]
    record: RecordFlag,
}

impl MergeArgs {
    /// The records to merge; the output files checked.
    pub(crate) fn plan(&self) -> Result<MergePlan> {
        self.record.check(true)?;
        Ok(MergePlan {
            agents: self.files.clone(),
            server: self.server.clone(),
            allow_missing: self.allow_missing,
            argv: std::env::args_os()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
        })
    }
}

/// Runs `tpslab merge`: every record is read and checked before anything is written.
pub(crate) fn merge(a: MergeArgs) -> Result<ExitCode> {
    let rec = tpslab_run::agent::merge(&a.plan()?)?;
    out::emit_run(
        &rec,
        crate::out::Outputs::of(&a.record),
        a.explain,
        &GateFlags::default(),
        false,
    )
}
