//! `tpslab agent` and `tpslab merge`: their flags and the plans they make; the wait, the
//! run and the merge are [`tpslab_run::agent`]'s.

use crate::flags::RecordFlag;
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;
use std::time::Duration;
use tpslab_run::agent::{AgentPlan, MergePlan};

#[derive(Args, Debug)]
pub struct AgentArgs {
    /// The fleet's load plan (TOML: target, rate for all agents together, size, duration,
    /// warmup, drain, threads, no_replies, max_clock_error, max_wait); `-`: standard input.
    #[arg(long, value_name = "FILE")]
    pub plan: PathBuf,
    /// This agent, 0..M-1 (a Kubernetes Indexed Job's completion index).
    #[arg(long)]
    pub index: usize,
    /// Agents in the fleet (M).
    #[arg(long)]
    pub of: usize,
    /// The common start: RFC 3339 UTC (2026-11-24T10:00:00Z, fractions allowed) or
    /// @UNIX_SECONDS. The agent refuses a time already passed or further ahead than the
    /// plan's max_wait.
    #[arg(long, value_name = "TIME")]
    pub start_at: String,
    /// Observer sampling interval (1ms..=60s).
    #[arg(long, default_value = "10ms", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub interval: Duration,
    #[command(flatten)]
    pub record: RecordFlag,
}

impl AgentArgs {
    /// The agent's plan: the fleet's plan read and checked, the start time parsed, the
    /// interval and the output files checked.
    pub fn plan(&self) -> Result<AgentPlan> {
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

#[derive(Args, Debug)]
pub struct MergeArgs {
    /// The agents' records (`tpslab agent --json`), one per agent of one fleet run.
    #[arg(required = true, value_name = "RECORD")]
    pub files: Vec<PathBuf>,
    /// A record of the server over the fleet's run (`tpslab watch --pid PID --json`, as
    /// root): the ledger's server side (what it read, its socket's drops, its host's).
    #[arg(long, value_name = "RECORD")]
    pub server: Option<PathBuf>,
    /// Merge even when agents of the plan are missing (the total says which).
    #[arg(long)]
    pub allow_missing: bool,
    /// Show the source counter of every figure.
    #[arg(long)]
    pub explain: bool,
    #[command(flatten)]
    pub record: RecordFlag,
}

impl MergeArgs {
    /// The records to merge; the output files checked.
    pub fn plan(&self) -> Result<MergePlan> {
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
