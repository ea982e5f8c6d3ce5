//! Estimates over repeated runs as a record holds them: a figure's mean with its spread
//! and 95 % interval ([`Estimate`]), and a setting's difference from a baseline
//! ([`Effect`]). Computing them (Student's t, Welch) is `tpslab_analysis::experiment`.

use serde::{Deserialize, Serialize};

/// Fewest runs (or batches) whose mean gets a confidence interval: 3.
///
/// With 2 runs the interval has one degree of freedom: its half-width is t(1) = 12.71
/// times s/sqrt(2), on average 7.2 times the runs' true standard deviation sigma
/// (12.71 x c4(2) = 0.798 / sqrt(2)), against 2.2 sigma with 3 runs (4.30 x 0.886 /
/// sqrt(3)) and 1.5 sigma with 4: an interval seven times wider than the spread of a
/// single run says nothing a reader can use (issue 33's `0.29 [-0.68, 1.26]` was two
/// runs 0.21 and 0.37 apart by 0.15). Tables say "too few runs" instead.
pub const MIN_RUNS_FOR_INTERVAL: usize = 3;

/// Mean and spread of repeated measurements of one figure.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Estimate {
    /// Runs.
    pub n: usize,
    /// Mean.
    #[serde(deserialize_with = "crate::nan::de")]
    #[cfg_attr(feature = "schema", schemars(with = "crate::schema::NanF64"))]
    pub mean: f64,
    /// Sample standard deviation.
    #[serde(deserialize_with = "crate::nan::de")]
    #[cfg_attr(feature = "schema", schemars(with = "crate::schema::NanF64"))]
    pub stddev: f64,
    /// Smallest run.
    #[serde(deserialize_with = "crate::nan::de")]
    #[cfg_attr(feature = "schema", schemars(with = "crate::schema::NanF64"))]
    pub min: f64,
    /// Largest run.
    #[serde(deserialize_with = "crate::nan::de")]
    #[cfg_attr(feature = "schema", schemars(with = "crate::schema::NanF64"))]
    pub max: f64,
    /// 95 % confidence interval of the mean, lower bound, within the figure's domain
    /// (NaN with fewer than [`MIN_RUNS_FOR_INTERVAL`] runs).
    #[serde(deserialize_with = "crate::nan::de")]
    #[cfg_attr(feature = "schema", schemars(with = "crate::schema::NanF64"))]
    pub ci_lo: f64,
    /// Upper bound.
    #[serde(deserialize_with = "crate::nan::de")]
    #[cfg_attr(feature = "schema", schemars(with = "crate::schema::NanF64"))]
    pub ci_hi: f64,
}

impl Estimate {
    /// The 95 % interval, when the runs give one.
    pub fn interval(&self) -> Option<(f64, f64)> {
        (self.ci_lo.is_finite() && self.ci_hi.is_finite()).then_some((self.ci_lo, self.ci_hi))
    }
}

/// The difference of a setting's mean from the baseline's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Effect {
    /// mean(setting) - mean(baseline).
    #[serde(deserialize_with = "crate::nan::de")]
    #[cfg_attr(feature = "schema", schemars(with = "crate::schema::NanF64"))]
    pub diff: f64,
    /// The difference relative to the baseline mean, % (None when the baseline is 0).
    pub rel_pct: Option<f64>,
    /// 95 % confidence interval of the difference (Welch), within
    /// the domain's difference bounds (-100..=100 points for percentages); -inf..inf when
    /// either side has fewer than 2 runs (no test).
    #[serde(deserialize_with = "crate::nan::de")]
    #[cfg_attr(feature = "schema", schemars(with = "crate::schema::NanF64"))]
    pub ci_lo: f64,
    /// Upper bound.
    #[serde(deserialize_with = "crate::nan::de")]
    #[cfg_attr(feature = "schema", schemars(with = "crate::schema::NanF64"))]
    pub ci_hi: f64,
    /// Welch-Satterthwaite degrees of freedom.
    #[serde(deserialize_with = "crate::nan::de")]
    #[cfg_attr(feature = "schema", schemars(with = "crate::schema::NanF64"))]
    pub df: f64,
    /// Cohen's d: the difference in pooled standard deviations (None when both are 0).
    pub cohen_d: Option<f64>,
    /// The interval excludes 0: distinguishable from noise at 95 %.
    pub significant: bool,
}
