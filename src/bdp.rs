//! `tpslab bdp`: the bandwidth-delay product of a path, the buffers a rate needs and the
//! ceiling a buffer puts on a flow, against this host's settings.

use anyhow::Result;
use clap::Args;
use std::process::ExitCode;
use std::time::Duration;
use tpslab_plan::bdp::BdpPlan;

#[derive(Args, Debug)]
pub(crate) struct BdpArgs {
    /// Round-trip time, e.g. 30ms.
    #[arg(long, value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub(crate) rtt: Duration,
    /// Target rate, bits per second, e.g. 80mbit, 1gbit, 10MB/s (bytes per second).
    #[arg(long, value_name = crate::flags::BITRATE, value_parser = crate::flags::bitrate())]
    pub(crate) rate: Option<f64>,
    /// A buffer (window) size, e.g. 64KiB: the most a flow limited by it can carry.
    #[arg(long, value_name = crate::flags::SIZE, value_parser = crate::flags::size())]
    pub(crate) buffer: Option<u64>,
}

impl BdpArgs {
    /// The validated plan.
    pub(crate) fn plan(&self) -> Result<BdpPlan> {
        let p = BdpPlan {
            rtt: self.rtt,
            rate_bps: self.rate,
            buffer_bytes: self.buffer,
        };
        p.validate()?;
        Ok(p)
    }
}

/// Runs `tpslab bdp`: the ceiling of `--buffer`, then what `--rate` needs (a rate beyond
/// the largest TCP window is an error after the ceiling is printed).
pub(crate) fn run(a: &BdpArgs) -> Result<ExitCode> {
    use tpslab_report::term::bdp as render;
    let plan = a.plan()?;
    let mut out = std::io::stdout().lock();
    if let Some(bytes) = plan.buffer_bytes {
        render::ceiling(&mut out, bytes, plan.rtt.as_secs_f64())?;
    }
    if let Some(n) = tpslab_run::bdp::need(&plan, tpslab_run::bdp::host_buffers)? {
        render::need(&mut out, &n)?;
    }
    Ok(ExitCode::SUCCESS)
}
