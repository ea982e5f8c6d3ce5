//! The plan of `tpslab bdp`: a path's round-trip time and what to work out over it, the
//! buffers a rate needs or the rate a buffer allows (or both).

use crate::limits::PATH_RTT;
use crate::PlanError;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// A `bdp` question.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct BdpPlan {
    /// The path's round-trip time.
    pub rtt: Duration,
    /// The rate a flow should reach, bits/s: the buffers it needs.
    pub rate_bps: Option<f64>,
    /// A buffer (window), bytes: the most a flow limited by it carries.
    pub buffer_bytes: Option<u64>,
}

impl BdpPlan {
    /// Checks the RTT against [`PATH_RTT`] and that a rate or a buffer is asked about.
    /// Errors name the flag (`--rtt 0s: allowed ...`).
    pub fn validate(&self) -> Result<(), PlanError> {
        PATH_RTT.check("--rtt", self.rtt)?;
        if self.rate_bps.is_none() && self.buffer_bytes.is_none() {
            return Err(PlanError::Conflict(
                "bdp needs --rate RATE (the buffers it needs) or --buffer SIZE (the rate it allows)".into(),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_or_a_buffer_over_a_path_rtt() {
        let p = |rtt_ms, rate_bps, buffer_bytes| BdpPlan {
            rtt: Duration::from_millis(rtt_ms),
            rate_bps,
            buffer_bytes,
        };
        assert_eq!(p(30, Some(80e6), None).validate(), Ok(()));
        assert_eq!(p(30, None, Some(65536)).validate(), Ok(()));
        assert!(p(30, None, None)
            .validate()
            .unwrap_err()
            .to_string()
            .starts_with("bdp needs --rate RATE"));
        assert!(p(0, Some(80e6), None)
            .validate()
            .unwrap_err()
            .to_string()
            .starts_with("--rtt 0s: allowed"));
    }
}
