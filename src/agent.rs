//! `tpslab agent`: one agent's share of a fleet's load plan, from a common start time; and
//! `tpslab merge`: the agents' records added up exactly. No controller: a scheduler
//! (Kubernetes, ssh) starts the agents, the plan and the start time coordinate them.

use crate::flags::{GateFlags, RecordFlag};
use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;
use tpslab_analysis::record::{AgentInfo, Body, RunRecord};
use tpslab_engine::udp_run::{run_udp_streamed, UdpRunPlan};
use tpslab_plan::fleet::FleetPlan;

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

/// Reads and checks a fleet plan file (`-`: standard input), at most
/// [`tpslab_run::input::PLAN_MAX_BYTES`].
pub(crate) fn read_plan(path: &std::path::Path) -> Result<FleetPlan> {
    let text =
        tpslab_run::input::read_text("--plan", path, tpslab_run::input::PLAN_MAX_BYTES, true)?;
    FleetPlan::parse(&text).map_err(|e| anyhow!("--plan {}: {e}", path.display()))
}

/// `--start-at` in ns since the Unix epoch.
pub(crate) fn parse_start(s: &str) -> Result<u64> {
    let bad = || {
        anyhow!("--start-at {s:?}: allowed an RFC 3339 time such as 2026-11-24T10:00:00Z, or @UNIX_SECONDS")
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

/// Refuses a clock the plan does not trust: one its kernel calls unsynchronized, or
/// whose stated maximum error is above the plan's max_clock_error.
fn check_clock(plan: &FleetPlan, clock: Option<tpslab_net::ClockStatus>) -> Result<()> {
    let Some(limit) = plan.clock_limit()? else {
        return Ok(());
    };
    let Some(c) = clock else {
        bail!("this host's clock error cannot be read (adjtimex failed); set max_clock_error = \"unchecked\" in the plan to run anyway");
    };
    if !c.synchronized {
        bail!(
            "this host's kernel says its wall clock is not synchronized (adjtimex: STA_UNSYNC, maximum error {} ms): agents could start that far apart; run an NTP/PTP daemon (chrony), or set max_clock_error = \"unchecked\" in the plan when the agents share one clock",
            c.maxerror_us / 1000
        );
    }
    if c.maxerror_us as u128 > limit.as_micros() {
        bail!(
            "this host's clock may be off by up to {} us (adjtimex maxerror), more than the plan's max_clock_error {}",
            c.maxerror_us,
            humantime::format_duration(limit)
        );
    }
    Ok(())
}

/// Runs `tpslab agent`.
pub(crate) fn agent(a: AgentArgs) -> Result<ExitCode> {
    let plan = read_plan(&a.plan)?;
    let start_ns = parse_start(&a.start_at)?;
    crate::flags::check_interval(a.interval)?;
    a.record.check(true)?;
    let hash = plan.hash();
    // Its own sequence space: the plan's hash and its index in every datagram's run id.
    let run_id = u64::from_str_radix(&hash[..16], 16).unwrap_or(0) ^ ((a.index as u64) << 48);
    let load = plan.share(a.index, a.of, run_id)?;
    let clock = tpslab_net::clock_status();
    check_clock(&plan, clock)?;
    let now = tpslab_net::real_ns();
    if now >= start_ns {
        bail!(
            "--start-at {}: passed {:.3} s ago by this host's clock; agents start together only when started before it",
            a.start_at,
            (now - start_ns) as f64 / 1e9
        );
    }
    let max_wait = plan.max_wait()?;
    if start_ns - now > max_wait.as_nanos() as u64 {
        bail!(
            "--start-at {}: {:.0} s ahead by this host's clock, more than the plan's max_wait {}: the time or this clock is wrong",
            a.start_at,
            (start_ns - now) as f64 / 1e9,
            humantime::format_duration(max_wait)
        );
    }
    let stop = crate::out::install_signals()?;
    eprintln!(
        "tpslab agent {} of {}: {:.0} pps to {} from {} (in {:.1} s)",
        a.index,
        a.of,
        load.rate_pps,
        load.target,
        a.start_at,
        (start_ns - now) as f64 / 1e9
    );
    // Sleep to just before the start, then in small steps to it.
    while !stop.load(Relaxed) {
        let now = tpslab_net::real_ns();
        if now >= start_ns {
            break;
        }
        let left = start_ns - now;
        std::thread::sleep(Duration::from_nanos(if left > 3_000_000 {
            (left - 2_000_000).min(100_000_000)
        } else {
            left.min(50_000)
        }));
    }
    if stop.load(Relaxed) {
        eprintln!("tpslab: exit 130: interrupted before the start; nothing was sent");
        return Ok(ExitCode::from(130));
    }
    let start_error_us = (tpslab_net::real_ns() as i64 - start_ns as i64) / 1000;
    let run = UdpRunPlan {
        server: None,
        load,
        interval: a.interval,
        target_pid: None,
        watch_port: None,
        no_drop_reasons: false,
    };
    let mut rec = run_udp_streamed(run, &stop, None)?;
    rec.agent = Some(AgentInfo {
        index: a.index,
        of: a.of,
        plan_hash: hash,
        plan,
        start_at_unix_ms: start_ns / 1_000_000,
        start_error_us,
        clock,
    });
    crate::out::emit_run(
        &tpslab_run::udp::record(rec),
        a.record.outputs(),
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

/// The UDP run or watch record named by `flag` (`""`: an agent's record).
fn read_run(flag: &str, p: &std::path::Path) -> Result<RunRecord> {
    let rec = crate::report_cmd::read_flag(flag, p)?;
    match rec.body {
        Body::UdpRun(r) | Body::Watch(r) => Ok(r),
        _ => bail!(
            "{}: a {} record; merge reads agents' records (udp_run) and a server's watch",
            p.display(),
            rec.kind()
        ),
    }
}

/// Runs `tpslab merge`: every record is read and checked before anything is written.
pub(crate) fn merge(a: MergeArgs) -> Result<ExitCode> {
    a.record.check(true)?;
    let agents = a
        .files
        .iter()
        .map(|p| Ok((p.display().to_string(), read_run("", p)?)))
        .collect::<Result<Vec<_>>>()?;
    let server = match &a.server {
        Some(p) => Some((p.display().to_string(), read_run("--server", p)?)),
        None => None,
    };
    let mut merged = tpslab_analysis::merge::merge(
        &agents,
        server.as_ref().map(|(n, r)| (n.as_str(), r)),
        a.allow_missing,
    )
    .map_err(|e| anyhow!(e))
    .context("merge")?;
    merged.argv = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    crate::out::emit_run(
        &tpslab_run::udp::record(merged),
        a.record.outputs(),
        a.explain,
        &GateFlags::default(),
        false,
    )
}
