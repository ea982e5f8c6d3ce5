use super::*;

/// Deterministic noise in [-1, 1) from a 64-bit LCG.
fn noise(state: &mut u64) -> f64 {
    *state = state
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    ((*state >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
}

fn synthetic(lambda: f64, sigma: f64, kappa: f64, noise_frac: f64) -> Vec<(f64, f64)> {
    let mut st = 42;
    [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 100.0, 150.0, 200.0]
        .iter()
        .map(|&n| {
            let x = lambda * n / denom([lambda, sigma, kappa], n);
            (n, x * (1.0 + noise_frac * noise(&mut st)))
        })
        .collect()
}

fn step(users: f64, tps: f64, mean_response_s: f64) -> StepPoint {
    StepPoint {
        users,
        tps,
        mean_response_s,
        think_s: 0.0,
    }
}

fn within(v: f64, ci: (f64, f64)) -> bool {
    ci.0 <= v && v <= ci.1
}

#[test]
fn usl_recovers_known_parameters_with_noise() {
    let f = fit_usl(&synthetic(100.0, 0.05, 0.001, 0.01)).unwrap();
    assert!(within(100.0, f.lambda_ci), "{f:?}");
    assert!(within(0.05, f.sigma_ci), "{f:?}");
    assert!(within(0.001, f.kappa_ci), "{f:?}");
    // Intervals are informative, not just wide enough to contain anything.
    assert!(f.sigma_ci.1 - f.sigma_ci.0 < 0.01 && f.kappa_ci.1 - f.kappa_ci.0 < 1e-4);
    assert!((f.lambda - 100.0).abs() < 5.0, "{f:?}");
    assert!((f.sigma - 0.05).abs() < 0.01, "{f:?}");
    assert!((f.kappa - 0.001).abs() < 0.0002, "{f:?}");
    assert!(f.r_squared > 0.99 && f.n == 10, "{f:?}");
    let truth = (0.95f64 / 0.001).sqrt();
    let peak = crate::usl::peak_users(&f).unwrap();
    assert!((peak / truth - 1.0).abs() < 0.1, "{peak} vs {truth}");
    assert!((crate::usl::max_tps(&f) - crate::usl::predict(&f, peak)).abs() < 1e-9);
    assert!(
        crate::usl::verdict(&f).contains("retrograde"),
        "{}",
        crate::usl::verdict(&f)
    );
}

#[test]
fn usl_pure_contention_has_no_peak() {
    let f = fit_usl(&synthetic(100.0, 0.9, 0.0, 0.01)).unwrap();
    assert!((f.sigma - 0.9).abs() < 0.05, "{f:?}");
    assert_eq!(crate::usl::peak_users(&f), None, "{f:?}");
    assert!((crate::usl::max_tps(&f) / (f.lambda / f.sigma) - 1.0).abs() < 0.01);
    assert!(
        (crate::usl::max_tps(&f) / (100.0 / 0.9) - 1.0).abs() < 0.03,
        "{}",
        crate::usl::max_tps(&f)
    );
    let v = crate::usl::verdict(&f);
    assert!(v.contains("90 % of the work is serialised"), "{v}");
}

#[test]
fn usl_linear_scaling() {
    let f = fit_usl(&synthetic(100.0, 0.0, 0.0, 0.01)).unwrap();
    assert!(f.sigma < 0.001 && f.kappa < 1e-6, "{f:?}");
    assert!(
        crate::usl::verdict(&f).starts_with("scales almost linearly"),
        "{}",
        crate::usl::verdict(&f)
    );
    // Exact data: zero residual, both terms exactly 0, no ceiling.
    let exact = fit_usl(&synthetic(100.0, 0.0, 0.0, 0.0)).unwrap();
    assert!(exact.sigma < 1e-9 && exact.kappa < 1e-12, "{exact:?}");
    assert_eq!(crate::usl::peak_users(&exact), None);
    assert_eq!(crate::usl::max_tps(&exact), f64::INFINITY);
}

fn s3_steps() -> Vec<StepPoint> {
    [
        (1.0, 10.0),
        (5.0, 48.0),
        (10.0, 85.0),
        (20.0, 98.0),
        (40.0, 100.0),
        (80.0, 100.0),
        (110.0, 100.0),
    ]
    .iter()
    .map(|&(users, tps)| step(users, tps, users / tps))
    .collect()
}

#[test]
fn usl_s3_field_case_saturates_near_100_tps() {
    let steps = s3_steps();
    let pts: Vec<(f64, f64)> = steps.iter().map(|p| (p.users, p.tps)).collect();
    let f = fit_usl(&pts).unwrap();
    assert!(f.sigma > 0.05, "{f:?}");
    assert!(
        (crate::usl::max_tps(&f) / 100.0 - 1.0).abs() < 0.15,
        "{} {f:?}",
        crate::usl::max_tps(&f)
    );
    // 10 -> 20 users: e = (13/85)/1 = 0.15 >= 0.1; 20 -> 40: e = (2/98)/1 = 0.02 < 0.1.
    assert_eq!(find_knee(&steps, 0.1), Some(3));
    assert_eq!(steps[3].users, 20.0);
    // A stricter threshold moves the knee earlier: 10 -> 20 (e = 0.15) already flat.
    assert_eq!(find_knee(&steps, 0.2), Some(2));
    for p in &steps {
        assert!(littles_law(p).ok(0.1), "{p:?}");
    }
}

#[test]
fn usl_knee_none_while_tps_grows_or_response_flat() {
    let grow: Vec<StepPoint> = (1..=6)
        .map(|i| step(i as f64, 10.0 * i as f64, 0.1))
        .collect();
    assert_eq!(find_knee(&grow, 0.5), None);
    // Flat TPS but flat response time too (e.g. the load tool is the limit): no knee.
    let flat: Vec<StepPoint> = (1..=4).map(|i| step(i as f64, 10.0, 0.1)).collect();
    assert_eq!(find_knee(&flat, 0.5), None);
    assert_eq!(find_knee(&[], 0.5), None);
}

#[test]
fn usl_errors_name_the_bad_value() {
    let e = fit_usl(&[(1.0, 10.0), (2.0, 19.0), (4.0, 35.0)]).unwrap_err();
    assert_eq!(e, UslError::TooFewPoints { got: 3, need: 4 });
    assert!(
        e.to_string().contains("at least 4") && e.to_string().contains("got 3"),
        "{e}"
    );
    let dup = fit_usl(&[(1.0, 10.0), (2.0, 19.0), (2.0, 19.5), (4.0, 35.0)]).unwrap_err();
    assert_eq!(dup, UslError::TooFewPoints { got: 3, need: 4 });
    let e = fit_usl(&[(1.0, 10.0), (2.0, f64::NAN), (4.0, 35.0), (8.0, 60.0)]).unwrap_err();
    assert!(matches!(e, UslError::BadPoint { index: 1, .. }), "{e:?}");
    assert!(
        e.to_string().contains("point 1") && e.to_string().contains("X = NaN"),
        "{e}"
    );
    let e = fit_usl(&[(1.0, 10.0), (2.0, 19.0), (0.0, 35.0), (8.0, 60.0)]).unwrap_err();
    assert!(
        e.to_string().contains("point 2 is unusable: N = 0, X = 35"),
        "{e}"
    );
    let e = fit_usl(&[(1.0, 0.0), (2.0, 19.0), (4.0, 35.0), (8.0, 60.0)]).unwrap_err();
    assert!(e.to_string().contains("X = 0"), "{e}");
}

#[test]
fn usl_littles_law_ratio() {
    let p = step(110.0, 100.0, 1.1);
    let c = littles_law(&p);
    assert!((c.ratio - 1.0).abs() < 1e-12 && c.ok(0.01), "{c:?}");
    let c = littles_law(&StepPoint {
        mean_response_s: 0.5,
        ..p
    });
    assert!(
        (c.ratio - 50.0 / 110.0).abs() < 1e-12 && !c.ok(0.1),
        "{c:?}"
    );
    let c = littles_law(&StepPoint {
        mean_response_s: 0.5,
        think_s: 0.6,
        ..p
    });
    assert!(c.ok(0.01), "think time counts: {c:?}");
    assert!(!littles_law(&StepPoint { users: 0.0, ..p }).ok(0.5));
}

#[test]
fn usl_hard_knee_is_not_called_linear() {
    // Measured here: 4 shared workers, 5 ms per request: linear to 4 users, then flat.
    let pts = [
        (1.0, 190.0),
        (2.0, 382.0),
        (4.0, 764.0),
        (8.0, 772.0),
        (16.0, 767.0),
    ];
    let f = fit_usl(&pts).unwrap();
    let v = crate::usl::verdict(&f);
    assert!(!v.contains("linearly"), "{v} {f:?}");
    let m = crate::usl::max_tps(&f);
    assert!(m.is_finite() && (700.0..=950.0).contains(&m), "max_tps {m}");
}

#[test]
fn a_noisy_step_is_no_knee_when_tps_grows_again() {
    // The step figures of a real redis PING ramp (report fixture ramp_redis.json: users,
    // TPS, mean response s): TPS dipped from 1 user to 4, then grew 1.9x to 64 users.
    // Before: "knee at 1 user"; the knee is where TPS stops growing, 16 users.
    let steps: Vec<StepPoint> = [
        (1.0, 41050.0, 0.000024),
        (4.0, 33518.0, 0.000119),
        (16.0, 54591.0, 0.000293),
        (64.0, 62644.0, 0.001022),
    ]
    .iter()
    .map(|&(u, x, r)| step(u, x, r))
    .collect();
    assert_eq!(find_knee(&steps, 0.2), Some(2));
    // A flat top after the knee still has it at once.
    let flat: Vec<StepPoint> = [(1.0, 467.0), (2.0, 470.0), (4.0, 473.0), (8.0, 463.0)]
        .iter()
        .map(|&(u, x)| step(u, x, u / x))
        .collect();
    assert_eq!(find_knee(&flat, 0.2), Some(0));
}
