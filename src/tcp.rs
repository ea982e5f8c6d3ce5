//! `tpslab tcp`: a bulk flow with TCP_INFO sampled and which limit held it, to a sink,
//! from a source (`--reverse`), across tpslab's delay line between two namespaces
//! (`--lab-rtt`, with the recommended buffers tried), or another process's flows watched.
//! Flags -> [`TcpPlan`] -> [`tpslab_run::tcp`] -> the record -> the report layer.

use crate::flags;
use crate::out::{install_signals, resolve};
use anyhow::{anyhow, bail, Result};
use clap::Args;
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;
use tpslab_analysis::gate::{applies, FailOn};
use tpslab_analysis::prelude::*;
use tpslab_analysis::record::Body;
use tpslab_plan::limits::LAB_RTT;
use tpslab_plan::tcp::{check_buffer, check_times, check_write_size, LinkConfig, TcpMode, TcpPlan};
use tpslab_report::term::tcp as render;

#[derive(Args, Debug)]
pub(crate) struct TcpArgs {
    /// The sink, HOST:PORT (`tpslab serve tcp` or anything that reads and discards).
    /// Leave out with --lab-rtt.
    target: Option<String>,
    /// How long to send.
    #[arg(long, default_value = "10s", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    duration: Duration,
    /// TCP_INFO sampling interval (1ms..=60s; at most 360000 samples over --duration).
    #[arg(long, default_value = "100ms", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    interval: Duration,
    /// Leave the first part of the flow (slow start) out of the analysis.
    #[arg(long, default_value = "1s", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    skip: Duration,
    /// The sender's SO_SNDBUF, e.g. 64KiB (the kernel doubles it; default: autotuning by
    /// net.ipv4.tcp_wmem).
    #[arg(long, value_name = crate::flags::SIZE, value_parser = crate::flags::size())]
    sndbuf: Option<u64>,
    /// Bytes per write() call.
    #[arg(long, value_name = crate::flags::SIZE, value_parser = crate::flags::size(), default_value = "128KiB")]
    write_size: u64,
    /// Receive instead of send: TARGET is a source (e.g. `tpslab serve tcp --mode
    /// source`); this side's receive window is judged from its own TCP_INFO.
    #[arg(long)]
    reverse: bool,
    /// This side's SO_RCVBUF with --reverse, e.g. 64KiB (default: autotuning).
    #[arg(long, value_name = crate::flags::SIZE, value_parser = crate::flags::size())]
    rcvbuf: Option<u64>,
    /// Watch the established TCP flows of this process instead (no TARGET): its
    /// TCP_INFO through sock_diag, in its network namespace, as `ss -tmi` shows it.
    #[arg(long)]
    watch_pid: Option<u32>,
    /// Watch the established TCP flows with this port at either end (with or without
    /// --watch-pid).
    #[arg(long)]
    watch_port: Option<u16>,
    /// The rate the flow should reach, e.g. 80mbit: the buffers it needs are computed
    /// from the measured RTT (and, in the lab, tried in a second run).
    #[arg(long, value_name = crate::flags::BITRATE, value_parser = crate::flags::bitrate())]
    target_rate: Option<f64>,
    #[command(flatten)]
    gate: flags::GateFlags,
    /// Lab: no TARGET; run sender and sink in two new network namespaces joined by
    /// tpslab's user-space delay line with this RTT (e.g. 30ms). Needs root.
    #[arg(long, value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    lab_rtt: Option<Duration>,
    /// Lab: the link's rate each way, e.g. 622mbit (default: as fast as the delay line
    /// forwards).
    #[arg(long, value_name = crate::flags::BITRATE, value_parser = crate::flags::bitrate())]
    lab_rate: Option<f64>,
    /// Lab: share of packets lost each way, e.g. 0.1% or 0.001.
    #[arg(long, default_value = "0")]
    lab_loss: String,
    /// Lab: packets the link queues before tail drop.
    #[arg(long, default_value_t = 1000)]
    lab_queue: usize,
    /// Lab: the sink's SO_RCVBUF, e.g. 64KiB (default: autotuning by net.ipv4.tcp_rmem
    /// of the lab namespace, which starts at the kernel's defaults).
    #[arg(long, value_name = crate::flags::SIZE, value_parser = crate::flags::size())]
    sink_rcvbuf: Option<u64>,
    /// Lab with --target-rate: do not re-run with the recommended buffers.
    #[arg(long)]
    no_verify: bool,
    #[command(flatten)]
    record: flags::RecordFlag,
}

fn parse_loss(s: &str) -> Result<f64> {
    let bad = || {
        anyhow!("--lab-loss {s}: allowed a share from 0 up to (not including) 1, or a percentage such as 0.1%")
    };
    let v = match s.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map_err(|_| bad())? / 100.0,
        None => s.trim().parse::<f64>().map_err(|_| bad())?,
    };
    if !(0.0..1.0).contains(&v) {
        return Err(bad());
    }
    Ok(v)
}

/// A TCP buffer flag's bytes checked against its limit (None: not given).
fn buffer(flag: &str, v: Option<u64>) -> Result<Option<u64>> {
    Ok(v.map(|b| check_buffer(flag, b)).transpose()?)
}

impl TcpArgs {
    /// The validated plan of the flags given (the output files and gates checked first;
    /// TARGET resolved, a `--watch-pid` looked up).
    pub(crate) fn plan(&self) -> Result<TcpPlan> {
        let a = self;
        a.record.check(false)?;
        a.gate.conditions(applies::TCP)?;
        // The times first: nothing is resolved for a plan that cannot run.
        check_times(a.duration, a.interval, a.skip)?;
        let lab_only = [
            ("--lab-rate", a.lab_rate.is_some()),
            ("--sink-rcvbuf", a.sink_rcvbuf.is_some()),
            ("--lab-loss", a.lab_loss != "0"),
            ("--lab-queue", a.lab_queue != 1000),
            ("--no-verify", a.no_verify),
        ];
        let mode = if a.watch_pid.is_some() || a.watch_port.is_some() {
            if a.target.is_some() || a.lab_rtt.is_some() {
                bail!(
                    "--watch-pid/--watch-port watch existing flows: leave out TARGET and --lab-rtt"
                );
            }
            let watch_not = [
                ("--sndbuf", a.sndbuf.is_some()),
                ("--rcvbuf", a.rcvbuf.is_some()),
                ("--reverse", a.reverse),
                ("--target-rate", a.target_rate.is_some()),
                ("--fail-on", a.gate.fail_on.is_some()),
                ("--strict", a.gate.strict),
                ("--write-size", a.write_size != 128 << 10),
            ];
            if let Some((f, _)) = lab_only.iter().chain(&watch_not).find(|x| x.1) {
                bail!("{f} does not apply when watching flows of another process");
            }
            if let Some(p) = a.watch_pid {
                if !std::path::Path::new(&format!("/proc/{p}")).exists() {
                    bail!("--watch-pid {p}: no such process");
                }
            }
            TcpMode::Watch {
                pid: a.watch_pid,
                port: a.watch_port,
            }
        } else if let Some(rtt) = a.lab_rtt {
            if a.target.is_some() {
                bail!("give TARGET or --lab-rtt, not both: the lab runs its own sink");
            }
            // As given: the plan keeps the one-way delay (half of it).
            LAB_RTT.check("--lab-rtt", rtt)?;
            if a.reverse || a.rcvbuf.is_some() {
                bail!("--reverse and --rcvbuf apply with a TARGET, not in the lab yet");
            }
            let link = LinkConfig {
                delay_ns: (rtt.as_nanos() / 2).min(u64::MAX as u128) as u64,
                rate_bps: a.lab_rate,
                loss: parse_loss(&a.lab_loss)?,
                queue_packets: a.lab_queue,
                ..Default::default()
            };
            TcpMode::Lab {
                link,
                sink_rcvbuf: buffer("--sink-rcvbuf", a.sink_rcvbuf)?,
                verify: !a.no_verify,
            }
        } else {
            let Some(t) = &a.target else {
                bail!("tcp needs TARGET (HOST:PORT of a sink) or --lab-rtt RTT (a lab between two namespaces)");
            };
            if let Some((f, _)) = lab_only.iter().find(|x| x.1) {
                bail!("{f} applies only with --lab-rtt");
            }
            let target = resolve(t)?;
            if a.reverse {
                TcpMode::Reverse { target }
            } else {
                TcpMode::Send { target }
            }
        };
        let p = TcpPlan {
            mode,
            duration_ns: a.duration.as_nanos().min(u64::MAX as u128) as u64,
            interval_ns: a.interval.as_nanos().min(u64::MAX as u128) as u64,
            skip_ns: a.skip.as_nanos().min(u64::MAX as u128) as u64,
            sndbuf: buffer("--sndbuf", a.sndbuf)?,
            rcvbuf: buffer("--rcvbuf", a.rcvbuf)?,
            write_bytes: check_write_size(a.write_size)?,
            target_rate_bps: a.target_rate,
        };
        p.validate()?;
        if matches!(p.mode, TcpMode::Reverse { .. })
            && a.gate.conditions(applies::TCP)?.contains(&FailOn::Target)
        {
            bail!("--fail-on target: with --reverse no target rate is judged; allowed invalid");
        }
        Ok(p)
    }
}

/// `tpslab tcp`: the lab's runs printed as each ends, other flows' report at the end.
pub(crate) fn run(a: TcpArgs) -> Result<ExitCode> {
    let plan = a.plan()?;
    let ctx = tpslab_run::Ctx {
        stop: install_signals()?,
        live: None,
        progress: std::sync::Arc::new(crate::out::TermProgress),
    };
    let mut out = std::io::stdout().lock();
    let rec = tpslab_run::tcp::run(&plan, &ctx, &mut |r, i| {
        render::run_part(&mut out, r, i)?;
        Ok(out.flush()?)
    })?;
    let Body::Tcp(r) = &rec.body else {
        unreachable!("a tcp record")
    };
    if !matches!(plan.mode, TcpMode::Lab { .. }) {
        render::record(&mut out, r)?;
    }
    let outcome = r.outcome();
    if a.record.wanted() {
        crate::out::emit(
            &rec,
            crate::out::Outputs::of(&a.record),
            crate::out::Terminal::Nothing,
        )?;
    }
    if matches!(plan.mode, TcpMode::Watch { .. }) {
        return Ok(ExitCode::SUCCESS);
    }
    a.gate.exit(&outcome, applies::TCP)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loss_accepts_shares_and_percentages() {
        assert_eq!(parse_loss("0").unwrap(), 0.0);
        assert!((parse_loss("0.1%").unwrap() - 0.001).abs() < 1e-12);
        assert_eq!(parse_loss("0.25").unwrap(), 0.25);
        for bad in ["1", "100%", "-0.1", "lots"] {
            let e = parse_loss(bad).unwrap_err().to_string();
            assert!(e.contains(&format!("--lab-loss {bad}")), "{e}");
        }
    }
}
