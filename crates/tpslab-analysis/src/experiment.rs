//! Statistics for experiments with repeated runs: mean with a t-based 95 % confidence
//! interval, and the effect of a setting against a baseline (Welch's unequal-variance
//! comparison), so a sweep can say whether a factor helped or is indistinguishable from
//! noise.

use crate::Summary;
use serde::{Deserialize, Serialize};

/// Two-sided 97.5 % quantile of Student's t with `df` degrees of freedom (the multiplier
/// of a 95 % confidence interval). Exact table values for df 1..=30, then interpolated in
/// 1/df towards the normal 1.960. `df` below 1 is treated as 1.
pub fn t975(df: f64) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    let df = df.max(1.0);
    if df <= 30.0 {
        // Linear between integer degrees of freedom (Welch's df is fractional).
        let lo = df.floor() as usize;
        let hi = df.ceil() as usize;
        let (a, b) = (T[lo - 1], T[hi - 1]);
        return a + (b - a) * (df - lo as f64);
    }
    // 2.042 at df 30 to 1.960 at infinity, linear in 1/df.
    1.960 + (2.042 - 1.960) * 30.0 / df
}

/// Mean and spread of repeated measurements of one figure.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    /// Runs.
    pub n: usize,
    /// Mean.
    #[serde(deserialize_with = "crate::nan::de")]
    pub mean: f64,
    /// Sample standard deviation.
    #[serde(deserialize_with = "crate::nan::de")]
    pub stddev: f64,
    /// Smallest run.
    #[serde(deserialize_with = "crate::nan::de")]
    pub min: f64,
    /// Largest run.
    #[serde(deserialize_with = "crate::nan::de")]
    pub max: f64,
    /// 95 % confidence interval of the mean, lower bound (NaN when n < 2).
    #[serde(deserialize_with = "crate::nan::de")]
    pub ci_lo: f64,
    /// Upper bound.
    #[serde(deserialize_with = "crate::nan::de")]
    pub ci_hi: f64,
}

impl Estimate {
    /// From the values of the runs (NaN ignored).
    pub fn of(xs: &[f64]) -> Estimate {
        let s = Summary::of(xs);
        // One run has no interval: NaN (null in JSON, "-" in tables), not a zero width.
        let half = if s.n >= 2 {
            t975((s.n - 1) as f64) * s.stddev / (s.n as f64).sqrt()
        } else {
            f64::NAN
        };
        Estimate {
            n: s.n,
            mean: s.mean,
            stddev: s.stddev,
            min: s.min,
            max: s.max,
            ci_lo: s.mean - half,
            ci_hi: s.mean + half,
        }
    }
}

/// The difference of a setting's mean from the baseline's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Effect {
    /// mean(setting) - mean(baseline).
    #[serde(deserialize_with = "crate::nan::de")]
    pub diff: f64,
    /// The difference relative to the baseline mean, % (None when the baseline is 0).
    pub rel_pct: Option<f64>,
    /// 95 % confidence interval of the difference (Welch).
    #[serde(deserialize_with = "crate::nan::de")]
    pub ci_lo: f64,
    /// Upper bound.
    #[serde(deserialize_with = "crate::nan::de")]
    pub ci_hi: f64,
    /// Welch-Satterthwaite degrees of freedom.
    #[serde(deserialize_with = "crate::nan::de")]
    pub df: f64,
    /// Cohen's d: the difference in pooled standard deviations (None when both are 0).
    pub cohen_d: Option<f64>,
    /// The interval excludes 0: distinguishable from noise at 95 %.
    pub significant: bool,
}

/// Welch's comparison of `setting` against `baseline` (each the values of repeated runs).
/// With fewer than 2 runs on either side nothing is significant.
pub fn effect(baseline: &[f64], setting: &[f64]) -> Effect {
    let a = Summary::of(baseline);
    let b = Summary::of(setting);
    let diff = b.mean - a.mean;
    let rel_pct = (a.mean != 0.0).then(|| 100.0 * diff / a.mean.abs());
    if a.n < 2 || b.n < 2 {
        return Effect {
            diff,
            rel_pct,
            ci_lo: f64::NEG_INFINITY,
            ci_hi: f64::INFINITY,
            df: 0.0,
            cohen_d: None,
            significant: false,
        };
    }
    let (va, vb) = (a.stddev.powi(2) / a.n as f64, b.stddev.powi(2) / b.n as f64);
    let se = (va + vb).sqrt();
    let df = if se == 0.0 {
        (a.n + b.n - 2) as f64
    } else {
        (va + vb).powi(2) / (va.powi(2) / (a.n - 1) as f64 + vb.powi(2) / (b.n - 1) as f64)
    };
    let half = t975(df) * se;
    let pooled = (((a.n - 1) as f64 * a.stddev.powi(2) + (b.n - 1) as f64 * b.stddev.powi(2))
        / (a.n + b.n - 2) as f64)
        .sqrt();
    Effect {
        diff,
        rel_pct,
        ci_lo: diff - half,
        ci_hi: diff + half,
        df,
        cohen_d: (pooled > 0.0).then(|| diff / pooled),
        // Identical runs on both sides (se 0) differ exactly when the means differ.
        significant: if se == 0.0 {
            diff != 0.0
        } else {
            diff - half > 0.0 || diff + half < 0.0
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_table_and_tail() {
        assert_eq!(t975(1.0), 12.706);
        assert_eq!(t975(2.0), 4.303);
        assert_eq!(t975(30.0), 2.042);
        assert!((t975(2.5) - (4.303 + 3.182) / 2.0).abs() < 1e-12);
        assert!((t975(1e9) - 1.960).abs() < 1e-6);
        assert!(t975(60.0) > 1.96 && t975(60.0) < 2.042);
        assert_eq!(t975(0.2), 12.706);
    }

    #[test]
    fn confidence_interval_for_three_runs() {
        // 10, 12, 14: mean 12, s = 2, half-width = 4.303 * 2 / sqrt(3) = 4.9687.
        let e = Estimate::of(&[10.0, 12.0, 14.0]);
        assert_eq!(
            (e.n, e.mean, e.stddev, e.min, e.max),
            (3, 12.0, 2.0, 10.0, 14.0)
        );
        assert!((e.ci_hi - 12.0 - 4.303 * 2.0 / 3f64.sqrt()).abs() < 1e-9);
        assert!((e.ci_lo + e.ci_hi - 24.0).abs() < 1e-9);
        let one = Estimate::of(&[5.0]);
        assert!(
            one.ci_lo.is_nan() && one.ci_hi.is_nan(),
            "one run has no interval"
        );
    }

    #[test]
    fn welch_known_values() {
        // Baseline 10,12,14 (s=2), setting 20,22,24 (s=2): diff 10, se = sqrt(4/3+4/3)
        // = 1.63299, df = 4, half = 2.776 * 1.63299 = 4.5332.
        let e = effect(&[10.0, 12.0, 14.0], &[20.0, 22.0, 24.0]);
        assert_eq!(e.diff, 10.0);
        assert!((e.df - 4.0).abs() < 1e-9);
        assert!((e.ci_lo - (10.0 - 2.776 * (8.0f64 / 3.0).sqrt())).abs() < 1e-9);
        assert!(e.significant);
        assert!((e.cohen_d.unwrap() - 5.0).abs() < 1e-9);
        assert!((e.rel_pct.unwrap() - 100.0 * 10.0 / 12.0).abs() < 1e-9);
        // Overlapping noisy runs: not distinguishable.
        let n = effect(&[10.0, 12.0, 14.0], &[11.0, 13.0, 15.0]);
        assert!(!n.significant);
        // Identical zero-loss runs: exactly no effect.
        let z = effect(&[0.0, 0.0, 0.0], &[0.0, 0.0, 0.0]);
        assert!(!z.significant && z.diff == 0.0 && z.rel_pct.is_none() && z.cohen_d.is_none());
        // Constant but different: significant.
        assert!(effect(&[1.0, 1.0], &[2.0, 2.0]).significant);
        // Too few runs: never significant.
        assert!(!effect(&[1.0], &[100.0, 101.0]).significant);
    }

    #[test]
    fn unequal_variances_use_welch_df() {
        let e = effect(&[1.0, 1.1, 0.9, 1.0, 1.05], &[5.0, 9.0, 1.0]);
        assert!(e.df < 3.0, "df {} dominated by the noisy side", e.df);
        assert!(
            !e.significant,
            "one noisy run set cannot prove an effect: {e:?}"
        );
    }
}
