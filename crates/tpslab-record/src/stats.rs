//! Summaries as a record holds them: of a series (mean, stddev, min, max, p50, p99) and of
//! a latency histogram. Computing one is `tpslab_analysis::stats`.

use serde::{Deserialize, Serialize};

/// Summary of a series of samples, in the unit of the series.
///
/// `stddev` is the sample standard deviation (n-1 in the denominator; 0 for n < 2);
/// percentiles use the nearest-rank method on the sorted samples.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Summary {
    /// Number of samples.
    pub n: usize,
    /// Arithmetic mean.
    pub mean: f64,
    /// Sample standard deviation.
    pub stddev: f64,
    /// Smallest sample.
    pub min: f64,
    /// Largest sample.
    pub max: f64,
    /// Median (nearest rank).
    pub p50: f64,
    /// 99th percentile (nearest rank).
    pub p99: f64,
}

/// Latency percentiles in nanoseconds, from an HDR histogram (3 significant digits).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct LatencySummary {
    /// Number of recorded values.
    pub count: u64,
    /// Mean, ns.
    pub mean_ns: f64,
    /// Median, ns.
    pub p50_ns: u64,
    /// 90th percentile, ns.
    pub p90_ns: u64,
    /// 99th percentile, ns.
    pub p99_ns: u64,
    /// 99.9th percentile, ns.
    pub p999_ns: u64,
    /// Largest value, ns.
    pub max_ns: u64,
    /// The distribution for a percentile plot: the value at each quantile of
    /// [`LatencySummary::LADDER`], ns (all 0 in records written before it was kept).
    #[serde(default, skip_serializing_if = "all_zero")]
    pub ladder_ns: [u64; LADDER_LEN],
}

const LADDER_LEN: usize = 15;

fn all_zero(v: &[u64; LADDER_LEN]) -> bool {
    v.iter().all(|&x| x == 0)
}

impl LatencySummary {
    /// The quantiles of `ladder_ns`: the minimum, then ever closer to the maximum (as
    /// HdrHistogram's percentile plots step), ending with the maximum itself.
    pub const LADDER: [f64; LADDER_LEN] = [
        0.0, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999, 0.9995, 0.9999, 0.99995, 0.99999,
        0.999995, 1.0,
    ];

    /// (quantile, ns) pairs of the ladder, or none when it was not kept.
    pub fn ladder(&self) -> Vec<(f64, u64)> {
        if all_zero(&self.ladder_ns) {
            return vec![];
        }
        Self::LADDER.iter().copied().zip(self.ladder_ns).collect()
    }
}
