//! Statistics for experiments with repeated runs: mean with a t-based 95 % confidence
//! interval, and the effect of a setting against a baseline (Welch's unequal-variance
//! comparison), so a sweep can say whether a factor helped or is indistinguishable from
//! noise.

use crate::Summary;
use serde::{Deserialize, Serialize};

/// Two-sided 97.5 % quantile of Student's t with `df` degrees of freedom (the multiplier
/// of a 95 % confidence interval), exact for fractional `df` too (Welch's df is
/// fractional): the inverse CDF of statrs' `StudentsT` up to 1000 degrees of freedom;
/// above, Fisher's expansion in 1/df around the normal quantile (within 3e-9 at 1000,
/// closer beyond; statrs 0.19 drifts below the normal quantile past 1e5 and does not
/// return at 1e9). `df` below 1 (or NaN) is treated as 1.
pub fn t975(df: f64) -> f64 {
    use statrs::distribution::{ContinuousCDF, StudentsT};
    const Z: f64 = 1.959_963_984_540_054;
    let df = if df.is_nan() { 1.0 } else { df.max(1.0) };
    if df > 1000.0 {
        let (z3, z5) = (Z.powi(3), Z.powi(5));
        return Z + (z3 + Z) / (4.0 * df) + (5.0 * z5 + 16.0 * z3 + 3.0 * Z) / (96.0 * df * df);
    }
    StudentsT::new(0.0, 1.0, df).map_or(f64::NAN, |t| t.inverse_cdf(0.975))
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
    let (a, b) = (Summary::of(baseline), Summary::of(setting));
    welch((a.n, a.mean, a.stddev), (b.n, b.mean, b.stddev))
}

/// Welch's comparison from each side's (n, mean, sample standard deviation): what
/// [`effect`] computes from the values themselves.
pub fn welch(baseline: (usize, f64, f64), setting: (usize, f64, f64)) -> Effect {
    struct S {
        n: usize,
        mean: f64,
        stddev: f64,
    }
    let a = S {
        n: baseline.0,
        mean: baseline.1,
        stddev: baseline.2,
    };
    let b = S {
        n: setting.0,
        mean: setting.1,
        stddev: setting.2,
    };
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
    fn t_quantiles_match_the_tables_and_fractional_df() {
        let near = |a: f64, b: f64| (a - b).abs() < 5e-4;
        // Printed tables (3 decimals) for integer df.
        for (df, t) in [(1.0, 12.706), (2.0, 4.303), (4.0, 2.776), (30.0, 2.042)] {
            assert!(near(t975(df), t), "df {df}: {}", t975(df));
        }
        // Fractional df (Welch): exact, where linear interpolation in a table was 41 %
        // too wide at 1.5 (8.50 against 6.017; checked by numerical integration).
        assert!(near(t975(1.5), 6.0167), "{}", t975(1.5));
        assert!(near(t975(2.5), 3.5747), "{}", t975(2.5));
        assert!((t975(1e9) - 1.960).abs() < 1e-3);
        // Both sides of the switch to the expansion agree, and the quantile falls with df.
        assert!((t975(1000.0) - t975(1_000.000_001)).abs() < 1e-8);
        assert!((t975(1000.0) - 1.962_339_080_8).abs() < 1e-8);
        let dfs = [1.0, 1.5, 2.0, 3.0, 10.0, 100.0, 999.0, 1001.0, 1e5, 1e12];
        assert!(dfs.windows(2).all(|w| t975(w[0]) > t975(w[1])));
        assert!((t975(f64::INFINITY) - 1.95996).abs() < 1e-5);
        assert_eq!(t975(0.2), t975(1.0));
        assert_eq!(t975(f64::NAN), t975(1.0));
    }

    #[test]
    fn confidence_interval_for_three_runs() {
        // 10, 12, 14: mean 12, s = 2, half-width = 4.303 * 2 / sqrt(3) = 4.9687.
        let e = Estimate::of(&[10.0, 12.0, 14.0]);
        assert_eq!(
            (e.n, e.mean, e.stddev, e.min, e.max),
            (3, 12.0, 2.0, 10.0, 14.0)
        );
        assert!((e.ci_hi - 12.0 - 4.302_653 * 2.0 / 3f64.sqrt()).abs() < 1e-5);
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
        assert!((e.ci_lo - (10.0 - 2.776_445 * (8.0f64 / 3.0).sqrt())).abs() < 1e-5);
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
