//! A Universal Scalability Law fit and Little's-law checks as a ramp's record holds them.
//! Fitting the curve, finding the knee and reading the fit are `tpslab_analysis::usl`.
//!
//! Units throughout: users N are concurrent clients (a count, may be fractional), TPS X is
//! completed transactions per second, response and think times are seconds.

use serde::{Deserialize, Serialize};

/// A fitted USL curve X(N) = lambda*N / (1 + sigma*(N-1) + kappa*N*(N-1)).
///
/// Confidence intervals are 95 %, from the linearised covariance s^2 (J^T J)^-1 with
/// s^2 = RSS/(n-3) and half-width t975(n-3)*se, then clipped to the allowed region
/// (lambda > 0, sigma in [0, 1], kappa >= 0).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct UslFit {
    /// TPS of one user without contention (transactions per second per user).
    #[serde(with = "crate::nan::word")]
    #[cfg_attr(feature = "schema", schemars(schema_with = "crate::nan::word::schema"))]
    pub lambda: f64,
    /// 95 % interval of `lambda` (lo, hi), TPS per user.
    #[serde(with = "crate::nan::word_pair")]
    #[cfg_attr(
        feature = "schema",
        schemars(schema_with = "crate::nan::word_pair::schema")
    )]
    pub lambda_ci: (f64, f64),
    /// Contention: the serialised fraction of the work (dimensionless, 0..=1).
    #[serde(with = "crate::nan::word")]
    #[cfg_attr(feature = "schema", schemars(schema_with = "crate::nan::word::schema"))]
    pub sigma: f64,
    /// 95 % interval of `sigma` (lo, hi).
    #[serde(with = "crate::nan::word_pair")]
    #[cfg_attr(
        feature = "schema",
        schemars(schema_with = "crate::nan::word_pair::schema")
    )]
    pub sigma_ci: (f64, f64),
    /// Coherency (crosstalk) penalty per pair of users (dimensionless, >= 0).
    #[serde(with = "crate::nan::word")]
    #[cfg_attr(feature = "schema", schemars(schema_with = "crate::nan::word::schema"))]
    pub kappa: f64,
    /// 95 % interval of `kappa` (lo, hi).
    #[serde(with = "crate::nan::word_pair")]
    #[cfg_attr(
        feature = "schema",
        schemars(schema_with = "crate::nan::word_pair::schema")
    )]
    pub kappa_ci: (f64, f64),
    /// Coefficient of determination of X (1 = perfect; 1 also when all X are equal and fitted).
    #[serde(with = "crate::nan::word")]
    #[cfg_attr(feature = "schema", schemars(schema_with = "crate::nan::word::schema"))]
    pub r_squared: f64,
    /// Points used.
    pub n: usize,
    /// Residual standard deviation s = sqrt(RSS/(n-3)), TPS.
    #[serde(with = "crate::nan::word")]
    #[cfg_attr(feature = "schema", schemars(schema_with = "crate::nan::word::schema"))]
    pub residual_std: f64,
    /// Largest measured N (users): predictions beyond it are extrapolations.
    #[serde(with = "crate::nan::word")]
    #[cfg_attr(feature = "schema", schemars(schema_with = "crate::nan::word::schema"))]
    pub max_users: f64,
}

/// Little's law for one step: N' = X * (R + Z) clients should have been in the system.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct LittleCheck {
    /// Configured concurrent clients N (count).
    pub users: f64,
    /// Clients implied by Little's law, N' = X * (R + Z) (count).
    pub expected_users: f64,
    /// N'/N (dimensionless; NaN if N is not positive and finite).
    pub ratio: f64,
}

impl LittleCheck {
    /// True when |ratio - 1| <= `tolerance` (a fraction, e.g. 0.1 = 10 %); false for NaN.
    pub fn ok(&self, tolerance: f64) -> bool {
        (self.ratio - 1.0).abs() <= tolerance
    }
}
