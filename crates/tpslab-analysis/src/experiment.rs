//! Statistics for experiments with repeated runs: mean with a t-based 95 % confidence
//! interval that stays within the values its figure can take ([`Domain`]), and the effect
//! of a setting against a baseline (Welch's unequal-variance comparison), so a sweep can
//! say whether a factor helped or is indistinguishable from noise.

use serde::{Deserialize, Serialize};
use tpslab_record::estimate::{Effect, Estimate, MIN_RUNS_FOR_INTERVAL};

/// The values a figure can take; its interval never leaves them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Domain {
    /// Any real number (a model's parameter).
    Real,
    /// 0 or more: a rate, a count, bytes, a time, a % of one CPU (which passes 100 with
    /// several threads).
    NonNegative,
    /// A proportion in percent, 0..=100: a loss, a share, one CPU's busy %.
    Percent,
}

impl Domain {
    /// The smallest and largest value a figure of this domain can take.
    pub fn bounds(self) -> (f64, f64) {
        match self {
            Domain::Real => (f64::NEG_INFINITY, f64::INFINITY),
            Domain::NonNegative => (0.0, f64::INFINITY),
            Domain::Percent => (0.0, 100.0),
        }
    }

    /// The bounds of a difference of two figures of this domain (each within
    /// [lo, hi]): [lo - hi, hi - lo], so [-100, 100] for percentages, unbounded otherwise
    /// (a difference of two rates may be any real number).
    pub fn difference_bounds(self) -> (f64, f64) {
        let (lo, hi) = self.bounds();
        (lo - hi, hi - lo)
    }
}

/// `x` within [lo, hi]; NaN stays NaN (f64::max would turn it into a bound).
fn within(x: f64, (lo, hi): (f64, f64)) -> f64 {
    if x.is_nan() {
        x
    } else {
        x.max(lo).min(hi)
    }
}

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

/// From the values of the runs (NaN ignored) of a figure that takes values in
/// `domain`.
///
/// The interval is Student's t interval of the mean over the runs, intersected with
/// the domain: `mean +- t975(n-1) s / sqrt(n)`, then each bound brought within
/// [`Domain::bounds`] (a loss within 0..=100 %, a queue at 0 B or more). Fewer than
/// [`MIN_RUNS_FOR_INTERVAL`] runs give no interval (NaN: null in JSON).
///
/// Why this interval, for a proportion measured in a handful of repeats:
/// - Its coverage stays 95 %: the true mean lies in the domain, so every value the
///   intersection removes was impossible (truncating an interval to the physical
///   region, Mandelkern, "Setting confidence intervals for bounded parameters",
///   Statistical Science 17(2), 2002). The run mean lies in the domain and in the t
///   interval, so the result is never empty and always holds the mean shown with it.
/// - The spread comes from the runs themselves, which is where a sweep's noise is.
///   A Wilson interval on the datagrams pooled over the runs (Wilson 1927) takes
///   every datagram as an independent trial; UDP loss comes in bursts (a full queue
///   drops consecutive datagrams) and varies from run to run with scheduling: issue
///   33's two runs at 0.21 % and 0.37 % differ by 0.15 points where the binomial
///   standard error of a run of 10^5 datagrams is 0.017, so a pooled Wilson interval
///   would claim ten times the precision the repeats show.
/// - A percentile bootstrap over 2 to 5 runs cannot reach beyond the runs' range:
///   with 2 runs it is [min, max], which holds the true mean half the time (both
///   runs on one side of it with probability 1/2), with 3 runs 3 times in 4.
/// - A t interval on the logit scale is an interval for the mean logit, not for the
///   mean loss shown beside it (which may fall outside it), and is undefined at 0 %,
///   the commonest loss, without an arbitrary continuity correction.
pub fn estimate(xs: &[f64], domain: Domain) -> Estimate {
    let s = crate::stats::summary(xs);
    let half = t975((s.n.max(1) - 1) as f64) * s.stddev / (s.n as f64).sqrt();
    let e = Estimate {
        n: s.n,
        mean: s.mean,
        stddev: s.stddev,
        min: s.min,
        max: s.max,
        ci_lo: s.mean - half,
        ci_hi: s.mean + half,
    };
    within_domain(e, domain)
}

/// An estimate with its interval as [`estimate`] gives it for `domain`:
/// within the domain's bounds, none below [`MIN_RUNS_FOR_INTERVAL`] runs. For
/// estimates read from records written before the interval knew its domain (a loss
/// interval of `[-0.68, 1.26]`, an interval of 2 runs).
pub fn within_domain(e: Estimate, domain: Domain) -> Estimate {
    if e.n < MIN_RUNS_FOR_INTERVAL {
        return Estimate {
            ci_lo: f64::NAN,
            ci_hi: f64::NAN,
            ..e
        };
    }
    Estimate {
        ci_lo: within(e.ci_lo, domain.bounds()),
        ci_hi: within(e.ci_hi, domain.bounds()),
        ..e
    }
}

/// Welch's comparison of `setting` against `baseline` (each the values of repeated runs
/// of a figure in `domain`). With fewer than 2 runs on either side nothing is
/// significant.
pub fn effect(baseline: &[f64], setting: &[f64], domain: Domain) -> Effect {
    let (a, b) = (
        crate::stats::summary(baseline),
        crate::stats::summary(setting),
    );
    welch((a.n, a.mean, a.stddev), (b.n, b.mean, b.stddev), domain)
}

/// Welch's comparison from each side's (n, mean, sample standard deviation) of a figure
/// in `domain`: what [`effect`] computes from the values themselves. The interval of the
/// difference is Welch's, intersected with [`Domain::difference_bounds`] (a difference
/// of two percentages may be negative, never below -100 points); the intersection
/// removes only impossible differences, so it keeps the coverage and never moves 0 in
/// or out of the interval: the test is Welch's as it was. Two runs a side are enough
/// for the test (its level holds at any n >= 2; a difference it calls real is), though
/// [`MIN_RUNS_FOR_INTERVAL`] gives a cell's own interval.
pub fn welch(baseline: (usize, f64, f64), setting: (usize, f64, f64), domain: Domain) -> Effect {
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
    let bounds = domain.difference_bounds();
    Effect {
        diff,
        rel_pct,
        ci_lo: within(diff - half, bounds),
        ci_hi: within(diff + half, bounds),
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
        let e = crate::experiment::estimate(&[10.0, 12.0, 14.0], Domain::Real);
        assert_eq!(
            (e.n, e.mean, e.stddev, e.min, e.max),
            (3, 12.0, 2.0, 10.0, 14.0)
        );
        assert!((e.ci_hi - 12.0 - 4.302_653 * 2.0 / 3f64.sqrt()).abs() < 1e-5);
        assert!((e.ci_lo + e.ci_hi - 24.0).abs() < 1e-9);
        let one = crate::experiment::estimate(&[5.0], Domain::Real);
        assert!(
            one.ci_lo.is_nan() && one.ci_hi.is_nan(),
            "one run has no interval"
        );
    }

    #[test]
    fn welch_known_values() {
        // Baseline 10,12,14 (s=2), setting 20,22,24 (s=2): diff 10, se = sqrt(4/3+4/3)
        // = 1.63299, df = 4, half = 2.776 * 1.63299 = 4.5332.
        let e = effect(&[10.0, 12.0, 14.0], &[20.0, 22.0, 24.0], Domain::Real);
        assert_eq!(e.diff, 10.0);
        assert!((e.df - 4.0).abs() < 1e-9);
        assert!((e.ci_lo - (10.0 - 2.776_445 * (8.0f64 / 3.0).sqrt())).abs() < 1e-5);
        assert!(e.significant);
        assert!((e.cohen_d.unwrap() - 5.0).abs() < 1e-9);
        assert!((e.rel_pct.unwrap() - 100.0 * 10.0 / 12.0).abs() < 1e-9);
        // Overlapping noisy runs: not distinguishable.
        let n = effect(&[10.0, 12.0, 14.0], &[11.0, 13.0, 15.0], Domain::Real);
        assert!(!n.significant);
        // Identical zero-loss runs: exactly no effect.
        let z = effect(&[0.0, 0.0, 0.0], &[0.0, 0.0, 0.0], Domain::Real);
        assert!(!z.significant && z.diff == 0.0 && z.rel_pct.is_none() && z.cohen_d.is_none());
        // Constant but different: significant.
        assert!(effect(&[1.0, 1.0], &[2.0, 2.0], Domain::Real).significant);
        // Too few runs: never significant.
        assert!(!effect(&[1.0], &[100.0, 101.0], Domain::Real).significant);
    }

    #[test]
    fn unequal_variances_use_welch_df() {
        let e = effect(&[1.0, 1.1, 0.9, 1.0, 1.05], &[5.0, 9.0, 1.0], Domain::Real);
        assert!(e.df < 3.0, "df {} dominated by the noisy side", e.df);
        assert!(
            !e.significant,
            "one noisy run set cannot prove an effect: {e:?}"
        );
    }
    /// The t interval as it was computed before the domain: mean +- t975(n-1) s/sqrt(n).
    fn bare_t(xs: &[f64]) -> (f64, f64) {
        let s = crate::stats::summary(xs);
        let half = t975((s.n - 1) as f64) * s.stddev / (s.n as f64).sqrt();
        (s.mean - half, s.mean + half)
    }

    #[test]
    fn issue_33_loss_of_two_runs_gets_no_interval_and_of_three_stays_at_0() {
        // The consumer's two runs (--repeat 2): mean 0.29, and the t interval printed as
        // [-0.68, 1.26].
        let two = [0.2137, 0.3663];
        let (lo, hi) = bare_t(&two);
        assert_eq!(format!("[{lo:.2}, {hi:.2}]"), "[-0.68, 1.26]");
        let e = crate::experiment::estimate(&two, Domain::Percent);
        assert!((e.mean - 0.29).abs() < 1e-12);
        assert_eq!(e.interval(), None, "2 runs: too few for an interval");
        assert!(e.ci_lo.is_nan() && e.ci_hi.is_nan());
        // Three runs, the same mean, a t interval below 0: cut at 0, the top kept.
        let three = [0.0, 0.12, 0.75];
        let (lo, hi) = bare_t(&three);
        assert!(lo < -0.7, "{lo}");
        let e = crate::experiment::estimate(&three, Domain::Percent);
        let (clo, chi) = e.interval().unwrap();
        assert_eq!(clo, 0.0);
        assert!(
            (chi - hi).abs() < 1e-12 && (chi - 1.2908).abs() < 1e-3,
            "{chi}"
        );
        assert!(clo <= e.mean && e.mean <= chi);
        // The same runs as a signed figure keep the bare interval.
        assert_eq!(
            crate::experiment::estimate(&three, Domain::Real).interval(),
            Some((lo, hi))
        );
    }

    #[test]
    fn percent_intervals_stay_within_0_and_100_at_the_edges() {
        // Every run lost nothing, or everything: a point, at the bound.
        let zeros = crate::experiment::estimate(&[0.0; 4], Domain::Percent);
        assert_eq!((zeros.mean, zeros.interval()), (0.0, Some((0.0, 0.0))));
        let all = crate::experiment::estimate(&[100.0; 3], Domain::Percent);
        assert_eq!(all.interval(), Some((100.0, 100.0)));
        // Near 100 %: the top is cut at 100, the bottom kept.
        let high = [99.9, 100.0, 97.0];
        let (lo, hi) = bare_t(&high);
        assert!(hi > 100.0, "{hi}");
        assert_eq!(
            crate::experiment::estimate(&high, Domain::Percent).interval(),
            Some((lo, 100.0))
        );
        // Near 0 with one lossy run in four: [0, top].
        let (lo, _) = crate::experiment::estimate(&[0.0, 0.0, 0.0, 10.0], Domain::Percent)
            .interval()
            .unwrap();
        assert_eq!(lo, 0.0);
        // One run, two runs: no interval in any domain.
        for d in [Domain::Real, Domain::NonNegative, Domain::Percent] {
            assert_eq!(crate::experiment::estimate(&[0.5], d).interval(), None);
            assert_eq!(crate::experiment::estimate(&[0.5, 0.7], d).interval(), None);
            assert_eq!(crate::experiment::estimate(&[], d).interval(), None);
        }
        // A queue in bytes: not below 0, unbounded above.
        let q = [0.0, 0.0, 9000.0];
        let (_, hi) = bare_t(&q);
        assert_eq!(
            crate::experiment::estimate(&q, Domain::NonNegative).interval(),
            Some((0.0, hi))
        );
    }

    #[test]
    fn an_older_records_interval_is_brought_within_its_domain() {
        // As written before the domain: 2 runs with [-0.68, 1.26].
        let old = Estimate {
            n: 2,
            mean: 0.29,
            stddev: 0.108,
            min: 0.2137,
            max: 0.3663,
            ci_lo: -0.68,
            ci_hi: 1.26,
        };
        assert_eq!(
            crate::experiment::within_domain(old, Domain::Percent).interval(),
            None
        );
        let old3 = Estimate { n: 3, ..old };
        assert_eq!(
            crate::experiment::within_domain(old3, Domain::Percent).interval(),
            Some((0.0, 1.26))
        );
        assert_eq!(crate::experiment::within_domain(old3, Domain::Real), old3);
    }

    #[test]
    fn a_difference_of_percentages_may_be_negative_but_not_below_minus_100() {
        // All lost against nothing lost, noisily: Welch's interval passes -100.
        let base = [100.0, 92.0, 99.0];
        let set = [0.0, 8.0, 1.0];
        let bare = effect(&base, &set, Domain::Real);
        assert!(bare.ci_lo < -100.0, "{bare:?}");
        let e = effect(&base, &set, Domain::Percent);
        assert_eq!(e.ci_lo, -100.0);
        assert!(e.ci_hi < 0.0 && e.ci_hi == bare.ci_hi, "{e:?}");
        assert!(e.significant && e.diff < 0.0);
        // And the other way, up to +100.
        assert_eq!(effect(&set, &base, Domain::Percent).ci_hi, 100.0);
        // A small effect near 0 keeps its negative side, and its verdict.
        let small = effect(&[0.2137, 0.3663], &[0.0, 0.4], Domain::Percent);
        let bare = effect(&[0.2137, 0.3663], &[0.0, 0.4], Domain::Real);
        assert!(small.ci_lo < 0.0 && small.ci_lo >= -100.0);
        assert_eq!(small.significant, bare.significant);
        // One run on a side: no test, no interval (not [-100, 100]).
        let none = effect(&[1.0], &[2.0, 3.0], Domain::Percent);
        assert!(!none.ci_lo.is_finite() && !none.ci_hi.is_finite());
    }
}
