//! Capacity arithmetic for a step-load test: Gunther's Universal Scalability Law (USL)
//! fitted to (users, TPS) steps, the knee where TPS stops growing while response time
//! rises, and a Little's-law check that the clients were really all busy.
//!
//! Units throughout: users N are concurrent clients (a count, may be fractional), TPS X is
//! completed transactions per second, response and think times are seconds.

use crate::experiment::t975;
use serde::{Deserialize, Serialize};
use tpslab_record::usl::{LittleCheck, UslFit};

/// One step of a step-load test: a fixed number of clients held for a while.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StepPoint {
    /// Concurrent clients N during the step (count).
    pub users: f64,
    /// Completed transactions per second X during the step (1/s).
    pub tps: f64,
    /// Mean response time R during the step (seconds).
    pub mean_response_s: f64,
    /// Mean think time Z between a response and the next request (seconds, 0 if none).
    pub think_s: f64,
}

/// Why a USL fit was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum UslError {
    /// Fewer than `need` distinct user counts: three parameters need at least one spare point.
    #[error("USL fit needs at least {need} points with distinct user counts N, got {got}")]
    TooFewPoints { got: usize, need: usize },
    /// Point `index` has N not finite or below 1, or X not finite or not above 0.
    #[error(
        "USL point {index} is unusable: N = {n}, X = {x} (need finite N >= 1 and finite X > 0)"
    )]
    BadPoint { index: usize, n: f64, x: f64 },
    /// Levenberg-Marquardt did not settle from any start value.
    #[error("USL fit did not converge: the points do not pin down lambda, sigma and kappa")]
    NoConvergence,
}

/// The USL denominator 1 + sigma*(N-1) + kappa*N*(N-1) for p = [lambda, sigma, kappa].
fn denom(p: [f64; 3], n: f64) -> f64 {
    1.0 + p[1] * (n - 1.0) + p[2] * n * (n - 1.0)
}

/// Predicted TPS at `n` users (transactions per second).
pub fn predict(fit: &UslFit, n: f64) -> f64 {
    fit.lambda * n / denom([fit.lambda, fit.sigma, fit.kappa], n)
}

/// Users at which TPS peaks, N* = sqrt((1-sigma)/kappa) (count, at least 1). `None` when
/// kappa is indistinguishable from 0 (its 95 % interval reaches 0, or kappa*N*(N-1) <= 1e-6
/// at the largest measured N): no established retrograde region, TPS approaches lambda/sigma.
pub fn peak_users(fit: &UslFit) -> Option<f64> {
    kappa_matters(fit).then(|| ((1.0 - fit.sigma) / fit.kappa).sqrt().max(1.0))
}

/// Highest TPS of the fitted curve (transactions per second): X at
/// sqrt((1-sigma)/kappa) when kappa > 0 (this is the curve's own maximum, used even when
/// kappa is too uncertain for [`peak_users`]), else the asymptote lambda/sigma.
/// `f64::INFINITY` when sigma and kappa are both indistinguishable from 0 (linear
/// scaling, no ceiling established by the data).
pub fn max_tps(fit: &UslFit) -> f64 {
    if is_linear(fit) {
        f64::INFINITY
    } else if fit.kappa > 0.0 {
        predict(fit, ((1.0 - fit.sigma) / fit.kappa).sqrt().max(1.0))
    } else if fit.sigma > 0.0 {
        fit.lambda / fit.sigma
    } else {
        f64::INFINITY
    }
}

/// A plain one-line sentence on what the fitted numbers mean: "scales almost linearly"
/// when each user still gets >= 90 % of its solo TPS at the largest measured N (or sigma
/// and kappa are both indistinguishable from 0); else the retrograde peak when
/// [`peak_users`] is `Some`; else the serialised fraction and the TPS ceiling.
pub fn verdict(fit: &UslFit) -> String {
    let kappa = if fit.kappa == 0.0 || fit.kappa >= 1e-3 {
        format!("{:.4}", fit.kappa)
    } else {
        format!("{:.2e}", fit.kappa)
    };
    if is_linear(fit) {
        return format!(
            "scales almost linearly (sigma = {:.2}, kappa = {kappa}) up to the measured N = {:.0}",
            fit.sigma, fit.max_users
        );
    }
    if let Some(peak) = peak_users(fit) {
        let beyond = if peak > fit.max_users {
            format!(" (beyond the largest measured N = {:.0})", fit.max_users)
        } else {
            String::new()
        };
        return format!(
            "sigma = {:.2}, kappa = {kappa}: throughput is retrograde; it peaks at about {:.0} TPS near N* = {peak:.0} users{beyond} and falls as more users are added",
            fit.sigma,
            max_tps(fit)
        );
    }
    let pct = fit.sigma * 100.0;
    let pct = if pct >= 1.0 {
        format!("{pct:.0}")
    } else {
        format!("{pct:.1}")
    };
    let loose = if sigma_matters(fit) {
        String::new()
    } else {
        format!(
            " (a loose fit: sigma's 95 % interval is [{:.2}, {:.2}]; the knee is the better guide)",
            fit.sigma_ci.0, fit.sigma_ci.1
        )
    };
    format!(
        "sigma = {:.2}: {pct} % of the work is serialised; adding servers or users will not raise TPS beyond about {:.0}{loose}",
        fit.sigma,
        max_tps(fit)
    )
}

/// Whether kappa is distinguishable from 0 (interval excludes 0) and matters within
/// the measured range (kappa*N*(N-1) > 1e-6 at the largest N).
fn kappa_matters(f: &UslFit) -> bool {
    let m = f.max_users;
    f.kappa_ci.0 > 0.0 && f.kappa * m * (m - 1.0).max(1.0) > 1e-6
}

/// Same test for sigma: interval excludes 0 and sigma*(N-1) > 1e-6 at the largest N.
fn sigma_matters(f: &UslFit) -> bool {
    f.sigma_ci.0 > 0.0 && f.sigma * (f.max_users - 1.0).max(1.0) > 1e-6
}

/// Near-linear: each user still gets at least 90 % of its solo TPS at the largest
/// measured N (by the fitted curve). Judged by the curve, not by whether sigma and
/// kappa are distinguishable from 0: a hard knee fits loosely, with intervals that
/// reach 0, yet the curve is far from linear.
fn is_linear(f: &UslFit) -> bool {
    let efficiency = crate::usl::predict(f, f.max_users) / (f.lambda * f.max_users);
    efficiency >= 0.9
}

/// Keeps parameters in the allowed region; a non-positive lambda becomes a tenth of `old`.
fn project(p: [f64; 3], old_lambda: f64) -> [f64; 3] {
    let lambda = if p[0] > 0.0 { p[0] } else { old_lambda * 0.1 };
    [lambda, p[1].clamp(0.0, 1.0), p[2].max(0.0)]
}

/// J^T J, J^T r and RSS at `p` (r = X - model).
fn normal(p: [f64; 3], pts: &[(f64, f64)]) -> ([[f64; 3]; 3], [f64; 3], f64) {
    let (mut a, mut g, mut rss) = ([[0.0; 3]; 3], [0.0; 3], 0.0);
    for &(n, x) in pts {
        let d = denom(p, n);
        let f = p[0] * n / d;
        let row = [n / d, -f * (n - 1.0) / d, -f * n * (n - 1.0) / d];
        let r = x - f;
        rss += r * r;
        for i in 0..3 {
            g[i] += row[i] * r;
            for j in 0..3 {
                a[i][j] += row[i] * row[j];
            }
        }
    }
    (a, g, rss)
}

fn rss_at(p: [f64; 3], pts: &[(f64, f64)]) -> f64 {
    pts.iter()
        .map(|&(n, x)| (x - p[0] * n / denom(p, n)).powi(2))
        .sum()
}

/// Solves a 3x3 system after scaling to unit diagonal, with partial pivoting.
fn solve3(a: [[f64; 3]; 3], b: [f64; 3]) -> Option<[f64; 3]> {
    let s = [0, 1, 2].map(|i| {
        if a[i][i] > 0.0 {
            1.0 / a[i][i].sqrt()
        } else {
            1.0
        }
    });
    let mut m = [[0.0; 4]; 3];
    for i in 0..3 {
        for j in 0..3 {
            m[i][j] = s[i] * a[i][j] * s[j];
        }
        m[i][3] = s[i] * b[i];
    }
    for c in 0..3 {
        let piv = (c..3).max_by(|&i, &j| m[i][c].abs().total_cmp(&m[j][c].abs()))?;
        m.swap(c, piv);
        if m[c][c].is_nan() || m[c][c].abs() <= 1e-13 {
            return None;
        }
        let pivot_row = m[c];
        for (r, row) in m.iter_mut().enumerate() {
            if r != c {
                let f = row[c] / pivot_row[c];
                for (v, pv) in row.iter_mut().zip(pivot_row).skip(c) {
                    *v -= f * pv;
                }
            }
        }
    }
    let x = [0, 1, 2].map(|i| s[i] * m[i][3] / m[i][i]);
    x.iter().all(|v| v.is_finite()).then_some(x)
}

/// Projected Levenberg-Marquardt from `start`; returns (parameters, RSS) once no step of
/// meaningful size lowers the RSS, `None` if it runs out of iterations or numbers.
fn levenberg_marquardt(start: [f64; 3], pts: &[(f64, f64)]) -> Option<([f64; 3], f64)> {
    let mut p = project(start, 1.0);
    let (mut a, mut g, mut rss) = normal(p, pts);
    let (mut mu, mut nu) = (1e-3, 2.0);
    for _ in 0..1000 {
        if !rss.is_finite() {
            return None;
        }
        if rss == 0.0 {
            return Some((p, rss));
        }
        // Parameters on a bound whose descent direction points out of the region stay put.
        let free = [
            true,
            !((p[1] <= 0.0 && g[1] < 0.0) || (p[1] >= 1.0 && g[1] > 0.0)),
            !(p[2] <= 0.0 && g[2] < 0.0),
        ];
        let mut m = a;
        let mut b = g;
        for i in 0..3 {
            for j in 0..3 {
                if !free[i] || !free[j] {
                    m[i][j] = if i == j { 1.0 } else { 0.0 };
                }
            }
            if free[i] {
                m[i][i] *= 1.0 + mu;
            } else {
                b[i] = 0.0;
            }
        }
        let cand = solve3(m, b).map(|d| project([p[0] + d[0], p[1] + d[1], p[2] + d[2]], p[0]));
        let rc = cand.map_or(f64::NAN, |c| rss_at(c, pts));
        match cand {
            Some(c) if rc < rss => {
                // Nielsen's damping update: shrink mu when the quadratic model predicted
                // the decrease well, grow it when it did not (stops Gauss-Newton zig-zag).
                let d = [c[0] - p[0], c[1] - p[1], c[2] - p[2]];
                let ad: Vec<f64> = (0..3)
                    .map(|i| (0..3).map(|j| a[i][j] * d[j]).sum())
                    .collect();
                let predicted: f64 = (0..3).map(|i| d[i] * (2.0 * g[i] - ad[i])).sum();
                let rho = (rss - rc) / predicted;
                let gain = (rss - rc) / rss;
                p = c;
                (a, g, rss) = normal(p, pts);
                let shrink = if rho.is_finite() {
                    (1.0 - (2.0 * rho - 1.0).powi(3)).max(1.0 / 3.0)
                } else {
                    1.0
                };
                mu = (mu * shrink).max(1e-12);
                nu = 2.0;
                if gain < 1e-12 {
                    return Some((p, rss));
                }
            }
            _ => {
                mu *= nu;
                nu *= 2.0;
                if mu > 1e12 {
                    return Some((p, rss));
                }
            }
        }
    }
    None
}

/// Fits the USL to `points` of (N users, X TPS) by least squares in X.
///
/// Start values: lambda = X/N at the smallest N, then Gunther's linearisation
/// z = lambda*N/X - 1 = sigma*(N-1) + kappa*N*(N-1) regressed without intercept (and a few
/// simpler starts); each is refined by Levenberg-Marquardt keeping lambda > 0,
/// sigma in [0, 1], kappa >= 0, and the lowest RSS wins.
///
/// Errors: [`UslError::BadPoint`] for the first point with non-finite N or X, N < 1 or
/// X <= 0; [`UslError::TooFewPoints`] with fewer than 4 distinct N; [`UslError::NoConvergence`].
pub fn fit_usl(points: &[(f64, f64)]) -> Result<UslFit, UslError> {
    for (index, &(n, x)) in points.iter().enumerate() {
        if !(n.is_finite() && n >= 1.0 && x.is_finite() && x > 0.0) {
            return Err(UslError::BadPoint { index, n, x });
        }
    }
    let mut ns: Vec<f64> = points.iter().map(|p| p.0).collect();
    ns.sort_by(f64::total_cmp);
    ns.dedup();
    if ns.len() < 4 {
        return Err(UslError::TooFewPoints {
            got: ns.len(),
            need: 4,
        });
    }
    let (n0, x0) = points
        .iter()
        .copied()
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .ok_or(UslError::NoConvergence)?;
    let lambda0 = x0 / n0;
    // Linearisation: z = s*u + k*v with u = N-1, v = N*(N-1).
    let (mut uu, mut uv, mut vv, mut uz, mut vz) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for &(n, x) in points {
        let (u, v, z) = (n - 1.0, n * (n - 1.0), lambda0 * n / x - 1.0);
        (uu, uv, vv, uz, vz) = (uu + u * u, uv + u * v, vv + v * v, uz + u * z, vz + v * z);
    }
    let det = uu * vv - uv * uv;
    let lin = if det.abs() > 0.0 {
        [
            lambda0,
            (uz * vv - vz * uv) / det,
            (vz * uu - uz * uv) / det,
        ]
    } else {
        [lambda0, 0.0, 0.0]
    };
    let sigma_only = if uu > 0.0 { uz / uu } else { 0.0 };
    let starts = [
        lin,
        [lambda0, sigma_only, 0.0],
        [lambda0, 0.1, 0.0],
        [lambda0, 0.0, 0.0],
    ];
    let (p, rss) = starts
        .iter()
        .filter_map(|&s| levenberg_marquardt(s, points))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .ok_or(UslError::NoConvergence)?;

    let n = points.len();
    let df = (n - 3) as f64;
    let s2 = rss / df;
    let (a, _, _) = normal(p, points);
    let unit = |k: usize| [0, 1, 2].map(|i| if i == k { 1.0 } else { 0.0 });
    let half = |k: usize| {
        let var = solve3(a, unit(k)).map_or(f64::NAN, |col| col[k] * s2);
        let se = if var >= 0.0 {
            var.sqrt()
        } else {
            f64::INFINITY
        };
        t975(df) * se
    };
    let ci = |k: usize, lo: f64, hi: f64| {
        let h = half(k);
        ((p[k] - h).max(lo), (p[k] + h).min(hi))
    };
    let mean = points.iter().map(|q| q.1).sum::<f64>() / n as f64;
    let tss: f64 = points.iter().map(|q| (q.1 - mean).powi(2)).sum();
    // All X equal: the curve sigma = 1, kappa = 0 fits them exactly.
    let r_squared = if tss > 0.0 { 1.0 - rss / tss } else { 1.0 };
    Ok(UslFit {
        lambda: p[0],
        lambda_ci: ci(0, 0.0, f64::INFINITY),
        sigma: p[1],
        sigma_ci: ci(1, 0.0, 1.0),
        kappa: p[2],
        kappa_ci: ci(2, 0.0, f64::INFINITY),
        r_squared,
        n,
        residual_std: s2.sqrt(),
        max_users: ns[ns.len() - 1],
    })
}

/// Finds the knee of a step-load test: returns the index of the last step before TPS
/// flattens, `None` if TPS keeps growing.
///
/// Rule: steps are taken in the given order (increasing users). For each consecutive pair
/// (i-1, i) the marginal efficiency is e = ((X_i - X_{i-1}) / X_{i-1}) /
/// ((N_i - N_{i-1}) / N_{i-1}), the relative TPS gain per relative user gain (1 = linear,
/// 0 = flat, negative = TPS fell). The first pair with e < `min_gain` while the mean
/// response time grows (R_i > R_{i-1}) is the flattening, and `i - 1` is returned. Pairs
/// where users do not increase, or with non-finite or non-positive N or X, are skipped.
/// A knee needs TPS to stop growing, not one noisy step: a pair is passed over when a
/// later step's TPS exceeds the higher of the pair's by more than `2 x min_gain` (a
/// redis PING ramp dipped from 1 user to 4, then grew 1.5x more: no knee at 1 user).
pub fn find_knee(points: &[StepPoint], min_gain: f64) -> Option<usize> {
    let good =
        |p: &StepPoint| p.users.is_finite() && p.users > 0.0 && p.tps.is_finite() && p.tps > 0.0;
    points.windows(2).enumerate().find_map(|(i, w)| {
        let (a, b) = (w[0], w[1]);
        if !(good(&a) && good(&b) && b.users > a.users) {
            return None;
        }
        let e = ((b.tps - a.tps) / a.tps) / ((b.users - a.users) / a.users);
        let later = points[i + 2..]
            .iter()
            .filter(|p| p.tps.is_finite())
            .map(|p| p.tps)
            .fold(0.0, f64::max);
        let grew_again = later > a.tps.max(b.tps) * (1.0 + 2.0 * min_gain);
        (e < min_gain && b.mean_response_s > a.mean_response_s && !grew_again).then_some(i)
    })
}

/// Checks a step against Little's law. A ratio well below 1 means the clients were not
/// all busy: timeouts or errors not counted as transactions, think time misreported, or
/// the load tool itself the limit. A ratio well above 1 means more work was in flight than
/// clients configured (e.g. retries, or response time under-measured).
pub fn littles_law(p: &StepPoint) -> LittleCheck {
    let expected_users = p.tps * (p.mean_response_s + p.think_s);
    let ratio = if p.users.is_finite() && p.users > 0.0 {
        expected_users / p.users
    } else {
        f64::NAN
    };
    LittleCheck {
        users: p.users,
        expected_users,
        ratio,
    }
}

#[cfg(test)]
#[path = "usl_tests.rs"]
mod tests;
