//! `tpslab tcp`: a bulk flow with TCP_INFO sampled and which limit held it, to a sink,
//! from a source (`--reverse`), across tpslab's delay line between two namespaces
//! (`--lab-rtt`, with the recommended buffers tried), or another process's flows watched.
//! Flags -> [`TcpPlan`] -> [`tpslab_run::tcp`] -> the record -> the report layer.

use crate::flags;
use anyhow::{bail, Result};
use clap::Args;
use std::time::Duration;
use tpslab_analysis::gate::{applies, FailOn};
use tpslab_plan::tcp::{TcpFlags, TcpMode, TcpPlan};

#[derive(Args, Debug)]
pub struct TcpArgs {
    /// The sink, HOST:PORT (`tpslab serve tcp` or anything that reads and discards).
    /// Leave out with --lab-rtt.
    pub target: Option<String>,
    /// How long to send.
    #[arg(long, default_value = "10s", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub duration: Duration,
    /// TCP_INFO sampling interval (1ms..=60s; at most 360000 samples over --duration).
    #[arg(long, default_value = "100ms", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub interval: Duration,
    /// Leave the first part of the flow (slow start) out of the analysis.
    #[arg(long, default_value = "1s", value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub skip: Duration,
    /// The sender's SO_SNDBUF, e.g. 64KiB (the kernel doubles it; default: autotuning by
    /// net.ipv4.tcp_wmem).
    #[arg(long, value_name = crate::flags::SIZE, value_parser = crate::flags::size())]
    pub sndbuf: Option<u64>,
    /// Bytes per write() call.
    #[arg(long, value_name = crate::flags::SIZE, value_parser = crate::flags::size(), default_value = "128KiB")]
    pub write_size: u64,
    /// Receive instead of send: TARGET is a source (e.g. `tpslab serve tcp --mode
    /// source`); this side's receive window is judged from its own TCP_INFO.
    #[arg(long)]
    pub reverse: bool,
    /// This side's SO_RCVBUF with --reverse, e.g. 64KiB (default: autotuning).
    #[arg(long, value_name = crate::flags::SIZE, value_parser = crate::flags::size())]
    pub rcvbuf: Option<u64>,
    /// Watch the established TCP flows of this process instead (no TARGET): its
    /// TCP_INFO through sock_diag, in its network namespace, as `ss -tmi` shows it.
    #[arg(long)]
    pub watch_pid: Option<u32>,
    /// Watch the established TCP flows with this port at either end (with or without
    /// --watch-pid).
    #[arg(long)]
    pub watch_port: Option<u16>,
    /// The rate the flow should reach, e.g. 80mbit: the buffers it needs are computed
    /// from the measured RTT (and, in the lab, tried in a second run).
    #[arg(long, value_name = crate::flags::BITRATE, value_parser = crate::flags::bitrate())]
    pub target_rate: Option<f64>,
    #[command(flatten)]
    pub gate: flags::GateFlags,
    /// Lab: no TARGET; run sender and sink in two new network namespaces joined by
    /// tpslab's user-space delay line with this RTT (e.g. 30ms). Needs root.
    #[arg(long, value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub lab_rtt: Option<Duration>,
    /// Lab: the link's rate each way, e.g. 622mbit (default: as fast as the delay line
    /// forwards).
    #[arg(long, value_name = crate::flags::BITRATE, value_parser = crate::flags::bitrate())]
    pub lab_rate: Option<f64>,
    /// Lab: share of packets lost each way, e.g. 0.1% or 0.001.
    #[arg(long, default_value = "0")]
    pub lab_loss: String,
    /// Lab: packets the link queues before tail drop.
    #[arg(long, default_value_t = 1000)]
    pub lab_queue: usize,
    /// Lab: the sink's SO_RCVBUF, e.g. 64KiB (default: autotuning by net.ipv4.tcp_rmem
    /// of the lab namespace, which starts at the kernel's defaults).
    #[arg(long, value_name = crate::flags::SIZE, value_parser = crate::flags::size())]
    pub sink_rcvbuf: Option<u64>,
    /// Lab with --target-rate: do not re-run with the recommended buffers.
    #[arg(long)]
    pub no_verify: bool,
    #[command(flatten)]
    pub record: flags::RecordFlag,
}

impl TcpArgs {
    /// The validated plan ([`TcpFlags::plan`]); the record's files and the gate checked.
    pub fn plan(&self) -> Result<TcpPlan> {
        let a = self;
        a.record.check(false)?;
        a.gate.conditions(applies::TCP)?;
        let p = TcpFlags {
            target: a.target.clone(),
            duration: a.duration,
            interval: a.interval,
            skip: a.skip,
            sndbuf: a.sndbuf,
            write_size: a.write_size,
            reverse: a.reverse,
            rcvbuf: a.rcvbuf,
            watch_pid: a.watch_pid,
            watch_port: a.watch_port,
            target_rate: a.target_rate,
            fail_on: a.gate.fail_on.is_some(),
            strict: a.gate.strict,
            lab_rtt: a.lab_rtt,
            lab_rate: a.lab_rate,
            lab_loss: a.lab_loss.clone(),
            lab_queue: a.lab_queue,
            sink_rcvbuf: a.sink_rcvbuf,
            no_verify: a.no_verify,
        }
        .plan()?;
        if matches!(p.mode, TcpMode::Reverse { .. })
            && a.gate.conditions(applies::TCP)?.contains(&FailOn::Target)
        {
            bail!("--fail-on target: with --reverse no target rate is judged; allowed invalid");
        }
        Ok(p)
    }
}
