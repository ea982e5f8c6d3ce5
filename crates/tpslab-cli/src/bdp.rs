//! `tpslab bdp`: the bandwidth-delay product of a path, the buffers a rate needs and the
//! ceiling a buffer puts on a flow, against this host's settings.

use anyhow::Result;
use clap::Args;
use std::time::Duration;
use tpslab_plan::bdp::BdpPlan;

#[derive(Args, Debug)]
pub struct BdpArgs {
    /// Round-trip time, e.g. 30ms.
    #[arg(long, value_name = crate::flags::DURATION, value_parser = crate::flags::duration())]
    pub rtt: Duration,
    /// Target rate, bits per second, e.g. 80mbit, 1gbit, 10MB/s (bytes per second).
    #[arg(long, value_name = crate::flags::BITRATE, value_parser = crate::flags::bitrate())]
    pub rate: Option<f64>,
    /// A buffer (window) size, e.g. 64KiB: the most a flow limited by it can carry.
    #[arg(long, value_name = crate::flags::SIZE, value_parser = crate::flags::size())]
    pub buffer: Option<u64>,
    #[command(flatten)]
    pub record: crate::flags::RecordFlag,
}

impl BdpArgs {
    /// The validated plan.
    pub fn plan(&self) -> Result<BdpPlan> {
        let p = BdpPlan {
            rtt: self.rtt,
            rate_bps: self.rate,
            buffer_bytes: self.buffer,
        };
        p.validate()?;
        self.record.check(true)?;
        Ok(p)
    }
}
