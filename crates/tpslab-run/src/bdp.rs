//! `bdp`: the buffers a rate needs over a path, against this host's TCP buffer settings.

use anyhow::{bail, Result};
use tpslab_analysis::bdp::MAX_TCP_WINDOW;
use tpslab_plan::bdp::BdpPlan;
use tpslab_record::bdp::{BdpRecord, HostBuffers, Need};
use tpslab_record::{Body, Record};

/// This host's TCP buffer settings from /proc/sys (None where unreadable).
pub fn host_buffers() -> HostBuffers {
    let read = |k: &str| tpslab_engine::host::env::read_sysctl(k);
    let core = |k: &str| read(k).and_then(|v| v.parse::<u64>().ok());
    HostBuffers {
        tcp_rmem: read("net.ipv4.tcp_rmem"),
        tcp_wmem: read("net.ipv4.tcp_wmem"),
        rmem_max: core("net.core.rmem_max"),
        wmem_max: core("net.core.wmem_max"),
    }
}

/// What the plan's rate needs over its RTT against `host` (None without a rate). Errors:
/// more bytes in flight than the largest TCP window ([`MAX_TCP_WINDOW`]), one line naming
/// the rate and the RTT.
pub fn need(plan: &BdpPlan, host: impl FnOnce() -> HostBuffers) -> Result<Option<Need>> {
    let Some(rate) = plan.rate_bps else {
        return Ok(None);
    };
    let rtt_s = plan.rtt.as_secs_f64();
    let bdp = tpslab_analysis::bdp::bdp_bytes(rate, rtt_s);
    if bdp > MAX_TCP_WINDOW {
        bail!(
            "--rate {} over --rtt {}: {} bytes in flight, more than the largest TCP window ({} bytes): use several flows",
            tpslab_plan::units::format_rate(rate),
            humantime::format_duration(plan.rtt),
            bdp,
            MAX_TCP_WINDOW
        );
    }
    Ok(Some(tpslab_analysis::bdp::need(rate, rtt_s, host())))
}

/// Runs `bdp`: the ceiling of the plan's buffer and what its rate needs against `host`,
/// as one record (kind `bdp`). Errors: as [`need`].
pub fn run(plan: &BdpPlan, host: impl FnOnce() -> HostBuffers) -> Result<Record> {
    let started = crate::Started::now();
    let rtt_s = plan.rtt.as_secs_f64();
    let rec = BdpRecord {
        rtt_s,
        ceiling: plan
            .buffer_bytes
            .map(|b| tpslab_analysis::bdp::ceiling(b, rtt_s)),
        need: need(plan, host)?,
    };
    Ok(Record::with_meta(started.meta(false), Body::Bdp(rec)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_rate_needs_its_buffers_within_the_largest_window() {
        let plan = |rate_bps| BdpPlan {
            rtt: Duration::from_millis(30),
            rate_bps,
            buffer_bytes: None,
        };
        assert_eq!(need(&plan(None), HostBuffers::default).unwrap(), None);
        let n = need(&plan(Some(80e6)), HostBuffers::default)
            .unwrap()
            .unwrap();
        assert_eq!((n.plan.bdp_bytes, n.plan.buffer_bytes), (300_000, 655_360));
        // Unknown host settings: nothing known to raise.
        assert!(n.fixes.is_empty());
        let e = need(&plan(Some(1e12)), HostBuffers::default)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--rate "), "{e}");
        assert!(e.contains(" over --rtt 30ms: 3750000000 bytes in flight, more than the largest TCP window (1073725440 bytes)"), "{e}");
    }
}
