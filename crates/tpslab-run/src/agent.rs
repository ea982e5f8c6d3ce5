//! `agent`: one agent's share of a fleet's load plan, from a common start time; and
//! `merge`: the agents' records added up exactly. No controller: a scheduler (Kubernetes,
//! ssh) starts the agents, the plan and the start time coordinate them.

use crate::Ctx;
use anyhow::{anyhow, bail, Context, Result};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tpslab_engine::client::udp_run::run_udp_streamed;
use tpslab_plan::fleet::FleetPlan;
use tpslab_plan::udp::UdpRunPlan;
use tpslab_record::{AgentInfo, Record, RunRecord};

/// One agent of a fleet.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentPlan {
    /// The fleet's plan (read by [`crate::input::read_fleet_plan`]).
    pub fleet: FleetPlan,
    /// This agent, 0..of-1.
    pub index: usize,
    /// Agents in the fleet.
    pub of: usize,
    /// The common start, ns since the Unix epoch.
    pub start_ns: u64,
    /// The start as the user wrote it (`--start-at`), for messages.
    pub start_at: String,
    /// Observer sampling interval.
    pub interval: Duration,
}

impl AgentPlan {
    /// The plan's hash (hex) and this agent's share of the load: its own sequence space
    /// (the hash and its index in every datagram's run id). Errors: the index or the
    /// fleet's size out of range for the plan.
    pub fn share(&self) -> Result<(String, tpslab_plan::udp::LoadConfig)> {
        let hash = self.fleet.hash();
        let run_id =
            u64::from_str_radix(&hash[..16], 16).unwrap_or(0) ^ ((self.index as u64) << 48);
        let load = self.fleet.share(self.index, self.of, run_id)?;
        Ok((hash, load))
    }
}

/// An agent ready to start: its share checked, this host's clock trusted, the start
/// ahead within the plan's max_wait.
#[derive(Debug, Clone)]
pub struct Ready {
    hash: String,
    load: tpslab_plan::udp::LoadConfig,
    clock: Option<tpslab_net::ClockStatus>,
    /// Seconds from the check to the start.
    wait_s: f64,
}

impl Ready {
    /// What the agent is about to do: `tpslab agent I of M: RATE pps to TARGET from
    /// START (in S s)`.
    pub fn line(&self, plan: &AgentPlan) -> String {
        format!(
            "tpslab agent {} of {}: {:.0} pps to {} from {} (in {:.1} s)",
            plan.index, plan.of, self.load.rate_pps, self.load.target, plan.start_at, self.wait_s
        )
    }
}

/// Checks that the agent can start as planned: its share ([`AgentPlan::share`]), this
/// host's clock ([`check_clock`]), the start neither passed nor further ahead than the
/// plan's max_wait by this host's clock. Errors: one line saying which and by how much.
pub fn ready(plan: &AgentPlan) -> Result<Ready> {
    let (hash, load) = plan.share()?;
    let clock = tpslab_net::clock_status();
    check_clock(&plan.fleet, clock)?;
    let wait_s = check_start(plan, tpslab_net::real_ns())?;
    Ok(Ready {
        hash,
        load,
        clock,
        wait_s,
    })
}

/// Seconds from `now` (ns since the Unix epoch) to the plan's start; errors when it has
/// passed or is further ahead than the plan's max_wait.
fn check_start(plan: &AgentPlan, now: u64) -> Result<f64> {
    let start_ns = plan.start_ns;
    if now >= start_ns {
        bail!(
            "--start-at {}: passed {:.3} s ago by this host's clock; agents start together only when started before it",
            plan.start_at,
            (now - start_ns) as f64 / 1e9
        );
    }
    let max_wait = plan.fleet.max_wait()?;
    if start_ns - now > max_wait.as_nanos() as u64 {
        bail!(
            "--start-at {}: {:.0} s ahead by this host's clock, more than the plan's max_wait {}: the time or this clock is wrong",
            plan.start_at,
            (start_ns - now) as f64 / 1e9,
            humantime::format_duration(max_wait)
        );
    }
    Ok((start_ns - now) as f64 / 1e9)
}

/// Refuses a clock the plan does not trust: one its kernel calls unsynchronized, or
/// whose stated maximum error is above the plan's max_clock_error.
pub fn check_clock(plan: &FleetPlan, clock: Option<tpslab_net::ClockStatus>) -> Result<()> {
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

/// Waits for the start (sleeping to just before it, then in small steps), runs the
/// agent's share, and returns its record (kind udp_run) with the agent's place in the
/// fleet, the plan and how late it started (`start_error_us`). None when `ctx.stop` came
/// before the start: nothing was sent. Errors: the engine's.
pub fn run(plan: &AgentPlan, ready: Ready, ctx: &Ctx) -> Result<Option<Record>> {
    let start_ns = plan.start_ns;
    while !ctx.stopped() {
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
    if ctx.stopped() {
        return Ok(None);
    }
    let start_error_us = (tpslab_net::real_ns() as i64 - start_ns as i64) / 1000;
    let run = UdpRunPlan {
        server: None,
        load: ready.load,
        interval: plan.interval,
        target_pid: None,
        watch_port: None,
        no_drop_reasons: false,
    };
    let mut rec = run_udp_streamed(run, &ctx.stop, None)?;
    rec.agent = Some(AgentInfo {
        index: plan.index,
        of: plan.of,
        plan_hash: ready.hash,
        plan: plan.fleet.clone(),
        start_at_unix_ms: start_ns / 1_000_000,
        start_error_us,
        clock: ready.clock,
    });
    Ok(Some(crate::udp::record(rec)))
}

/// `merge`: a fleet run's agents' records, and the server's watch over it.
#[derive(Debug, Clone, PartialEq)]
pub struct MergePlan {
    /// The agents' records (`agent --json`).
    pub agents: Vec<PathBuf>,
    /// A watch of the server over the fleet's run (`--server`).
    pub server: Option<PathBuf>,
    /// Merge even when agents of the plan are missing.
    pub allow_missing: bool,
    /// The command line, for the merged record.
    pub argv: Vec<String>,
}

/// The UDP run or watch record named by `flag` (`""`: an agent's record).
fn read_run(flag: &str, p: &Path) -> Result<RunRecord> {
    let rec = crate::input::read_record(flag, p)?;
    match rec.body {
        tpslab_record::Body::UdpRun(r) | tpslab_record::Body::Watch(r) => Ok(r),
        _ => bail!(
            "{}: a {} record; merge reads agents' records (udp_run) and a server's watch",
            p.display(),
            rec.kind()
        ),
    }
}

/// Adds up a fleet's agents' records exactly (counts and ledgers summed, histograms
/// merged), each agent beside the total, with the server's side from its watch. Every
/// record is read and checked before anything is made. Returns the merged record (kind
/// udp_run). Errors: one line naming the file (unreadable, not a run, not of one fleet
/// run, a watch at another time).
pub fn merge(plan: &MergePlan) -> Result<Record> {
    let agents = plan
        .agents
        .iter()
        .map(|p| Ok((p.display().to_string(), read_run("", p)?)))
        .collect::<Result<Vec<_>>>()?;
    let server = match &plan.server {
        Some(p) => Some((p.display().to_string(), read_run("--server", p)?)),
        None => None,
    };
    let mut merged = tpslab_analysis::merge::merge(
        &agents,
        server.as_ref().map(|(n, r)| (n.as_str(), r)),
        plan.allow_missing,
    )
    .map_err(|e| anyhow!(e))
    .context("merge")?;
    merged.argv = plan.argv.clone();
    Ok(crate::udp::record(merged))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> PathBuf {
        PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/fleet"
        ))
        .join(name)
    }

    fn agent(start_ns: u64) -> AgentPlan {
        AgentPlan {
            fleet: FleetPlan::parse(
                "target = \"127.0.0.1:9\"\nrate = \"2000\"\nmax_wait = \"60s\"\n",
            )
            .unwrap(),
            index: 1,
            of: 2,
            start_ns,
            start_at: "@X".into(),
            interval: Duration::from_millis(10),
        }
    }

    #[test]
    fn a_start_passed_or_too_far_ahead_is_refused() {
        let now = 1_000_000_000_000_000_000;
        let e = check_start(&agent(now - 1_500_000_000), now).unwrap_err();
        assert!(
            e.to_string().contains("--start-at @X: passed 1.500 s ago"),
            "{e}"
        );
        let e = check_start(&agent(now + 61_000_000_000), now).unwrap_err();
        assert!(
            e.to_string()
                .contains("61 s ahead by this host's clock, more than the plan's max_wait 1m"),
            "{e}"
        );
        assert_eq!(check_start(&agent(now + 2_000_000_000), now).unwrap(), 2.0);
    }

    #[test]
    fn each_agent_has_its_share_and_its_own_sequence_space() {
        let a = agent(0);
        let (hash, one) = a.share().unwrap();
        let (_, zero) = AgentPlan {
            index: 0,
            ..a.clone()
        }
        .share()
        .unwrap();
        assert_eq!(one.rate_pps + zero.rate_pps, 2000.0);
        assert_ne!(one.run_id, zero.run_id);
        assert_eq!(one.run_id ^ zero.run_id, 1 << 48);
        assert_eq!(hash, a.fleet.hash());
        assert!(AgentPlan { index: 2, ..a }.share().is_err());
    }

    #[test]
    fn an_agent_stopped_before_the_start_sends_nothing() {
        let a = agent(tpslab_net::real_ns() + 30_000_000_000);
        let r = Ready {
            hash: String::new(),
            load: a.share().unwrap().1,
            clock: None,
            wait_s: 30.0,
        };
        assert_eq!(
            r.line(&a),
            "tpslab agent 1 of 2: 1000 pps to 127.0.0.1:9 from @X (in 30.0 s)"
        );
        let ctx = Ctx::silent();
        ctx.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        assert!(run(&a, r, &ctx).unwrap().is_none());
    }

    #[test]
    fn the_fleets_fixtures_merge_and_a_record_of_another_kind_is_named() {
        let plan = MergePlan {
            agents: vec![fixture("agent0.json")],
            server: Some(fixture("watch.json")),
            allow_missing: true,
            argv: vec!["tpslab".into(), "merge".into()],
        };
        let rec = merge(&plan).unwrap();
        assert_eq!(rec.kind(), "udp_run");
        assert_eq!(crate::udp::run_of(&rec).unwrap().argv, plan.argv);
        let ramp = PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tpslab-report/tests/fixtures/ramp.json"
        ));
        let e = merge(&MergePlan {
            agents: vec![ramp],
            ..plan
        })
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("a ramp record; merge reads agents' records (udp_run)"),
            "{e}"
        );
    }
}
