//! Tests of the parent module.
use super::*;
use tpslab_plan::sweep::{cells, run_order, Design, Factor};

#[test]
fn sweep_outcome_names_invalid_and_failing_runs() {
    let ok = RunMetrics {
        valid: true,
        ..Default::default()
    };
    let runs = vec![
        (0, ok.clone()),
        (
            1,
            RunMetrics {
                valid: false,
                ..ok.clone()
            },
        ),
        (
            1,
            RunMetrics {
                errors: 5,
                ..ok.clone()
            },
        ),
    ];
    let o = outcome(&runs, false);
    assert_eq!(
        o.invalid,
        vec!["1 of 3 runs had a generator that fell behind (cells [1])".to_string()]
    );
    assert_eq!(
        o.errors.as_deref(),
        Some("1 of 3 runs had send or reply failures (5 in all)")
    );
    let clean = outcome(&runs[..1], false);
    assert!(clean.invalid.is_empty() && clean.errors.is_none());
    assert_eq!(
        crate::gate::exit_code(&clean, &[crate::gate::FailOn::Errors], true).0,
        0
    );
    assert_eq!(crate::gate::exit_code(&o, &[], true).0, 3);
}

fn f(name: &str, levels: &[&str]) -> Factor {
    Factor {
        name: name.into(),
        levels: levels.iter().map(|s| s.to_string()).collect(),
    }
}

#[test]
fn ofat_varies_one_factor_from_the_baseline() {
    let c = cells(
        &[
            f("rcvbuf", &["212992", "8388608"]),
            f("sched", &["other", "fifo:99", "rr:10"]),
        ],
        Design::Ofat,
    );
    assert_eq!(c.len(), 1 + 1 + 2);
    assert_eq!(c[0].label(), "rcvbuf=212992 sched=other");
    for cell in &c[1..] {
        let changed = cell
            .settings
            .iter()
            .filter(|(k, v)| c[0].settings[*k] != **v)
            .count();
        assert_eq!(changed, 1, "{}", cell.label());
    }
}

#[test]
fn factorial_has_every_combination_once_with_the_baseline_first() {
    let c = cells(
        &[f("cpus", &["all", "1"]), f("sched", &["other", "fifo:99"])],
        Design::Factorial,
    );
    assert_eq!(c.len(), 4);
    assert_eq!(c[0].label(), "cpus=all sched=other");
    let labels: std::collections::BTreeSet<_> = c.iter().map(|x| x.label()).collect();
    assert_eq!(labels.len(), 4);
}

#[test]
fn run_order_is_a_seeded_permutation() {
    let a = run_order(4, 3, 7);
    let b = run_order(4, 3, 7);
    assert_eq!(a, b);
    assert_ne!(a, run_order(4, 3, 8));
    let mut s = a.clone();
    s.sort();
    assert_eq!(
        s,
        (0..4)
            .flat_map(|c| (0..3).map(move |r| (c, r)))
            .collect::<Vec<_>>()
    );
    assert_ne!(a, s, "shuffled");
}

fn m(loss: f64, tps: f64) -> RunMetrics {
    RunMetrics {
        loss_pct: loss,
        tps,
        valid: true,
        ..Default::default()
    }
}

#[test]
fn real_effect_is_significant_and_noop_is_not() {
    let c = cells(
        &[
            f("rcvbuf", &["212992", "16000000"]),
            f("batch", &["1", "2"]),
        ],
        Design::Ofat,
    );
    let runs = vec![
        (0, m(60.0, 40_000.0)),
        (0, m(58.0, 42_000.0)),
        (0, m(61.0, 39_000.0)),
        (1, m(0.0, 100_000.0)),
        (1, m(0.1, 99_900.0)),
        (1, m(0.0, 100_000.0)),
        (2, m(59.0, 41_000.0)),
        (2, m(62.0, 38_000.0)),
        (2, m(60.5, 40_500.0)),
    ];
    let r = analyse(&c, &runs, Objective::Loss);
    assert!(r.effects[0].effects["loss_pct"].significant);
    assert!(!r.effects[1].effects["loss_pct"].significant);
    assert_eq!(r.best, Some(1));
    assert!(r.findings[0].contains("improved"), "{}", r.findings[0]);
    assert!(
        r.findings[1].contains("not distinguishable"),
        "{}",
        r.findings[1]
    );
    assert!((r.cells[0].figures["loss_pct"].mean - 59.666_666).abs() < 1e-3);
    let t = analyse(&c, &runs, Objective::Tps);
    assert_eq!(t.best, Some(1));
    // A run off schedule in the baseline and in the cell that beat it: no best cell
    // is named, and the findings say why (a clean cell that beats it would be).
    let mut spoiled = runs.clone();
    let late = |loss, tps| RunMetrics {
        valid: false,
        ..m(loss, tps)
    };
    spoiled.push((0, late(59.0, 40_000.0)));
    assert_eq!(analyse(&c, &spoiled, Objective::Loss).best, Some(1));
    spoiled.push((1, late(0.0, 100_000.0)));
    let r = analyse(&c, &spoiled, Objective::Loss);
    assert_eq!(r.best, None);
    assert!(
        r.findings
            .iter()
            .any(|f| f.starts_with("no best cell named")),
        "{:?}",
        r.findings
    );
}

#[test]
fn fifo_that_saturates_a_cpu_is_flagged() {
    let c = cells(&[f("sched", &["other", "fifo:99"])], Design::Ofat);
    let busy = |b: f64| RunMetrics {
        cpu_busy_pct: [("cpu1".to_string(), b), ("cpu0".to_string(), 100.0)]
            .into_iter()
            .collect(),
        server_cpu_pct: b,
        valid: true,
        ..Default::default()
    };
    let runs = vec![
        (0, busy(40.0)),
        (0, busy(42.0)),
        (1, busy(99.0)),
        (1, busy(98.0)),
    ];
    let r = analyse(&c, &runs, Objective::Loss);
    assert_eq!(r.warnings.len(), 1);
    assert!(r.warnings[0].contains("starves"), "{}", r.warnings[0]);
    // A busy CPU the server does not use (the generator's) is no reason to warn.
    let runs = vec![
        (0, busy(40.0)),
        (0, busy(42.0)),
        (1, busy(50.0)),
        (1, busy(52.0)),
    ];
    assert!(analyse(&c, &runs, Objective::Loss).warnings.is_empty());
}

#[test]
fn kernel_drop_reasons_are_figures_and_findings() {
    let c = cells(&[f("rcvbuf", &["212992", "16000000"])], Design::Ofat);
    let drops = |n: u64| RunMetrics {
        valid: true,
        kernel_drops: Some(if n > 0 {
            [("SOCKET_RCVBUFF".to_string(), n)].into()
        } else {
            BTreeMap::new()
        }),
        ..m(1.0, 1000.0)
    };
    let mut runs = vec![
        (0, drops(2000)),
        (0, drops(1990)),
        (0, drops(2010)),
        (1, drops(0)),
        (1, drops(0)),
        (1, drops(0)),
    ];
    // A run whose reasons were not read counts nowhere, not as 0.
    runs.push((1, m(1.0, 1000.0)));
    let r = analyse(&c, &runs, Objective::Loss);
    let d = |cell: usize| &r.cells[cell].figures["drops:SOCKET_RCVBUFF"];
    assert_eq!((d(0).n, d(0).mean), (3, 2000.0));
    assert_eq!((d(1).n, d(1).mean), (3, 0.0), "read, none seen: 0");
    assert!(
        r.findings.iter().any(
            |f| f == "rcvbuf=16000000: kernel drops SOCKET_RCVBUFF fell from 2000 to 0 per run"
        ),
        "{:?}",
        r.findings
    );
    assert!(m(1.0, 1.0).figure("drops:SOCKET_RCVBUFF").is_nan());
}

#[test]
fn every_figure_has_its_domain_and_intervals_keep_to_it() {
    use crate::experiment::Domain;
    let mut r = m(0.0, 1.0);
    r.cpu_busy_pct.insert("cpu3".into(), 50.0);
    r.kernel_drops = Some([("SOCKET_RCVBUFF".to_string(), 1u64)].into());
    r.p50_us = Some(1.0);
    r.p99_us = Some(1.0);
    for name in r.figures().keys() {
        let want = match name.as_str() {
            "loss_pct" | "cpu3_busy_pct" => Domain::Percent,
            _ => Domain::NonNegative,
        };
        assert_eq!(domain(name), want, "{name}");
    }
    assert_eq!(domain("something_new"), Domain::Real);
    // Loss near 0 in three runs a cell, nearly all lost in the other cell: the cells'
    // intervals within 0..=100, the effect's within -100..=100.
    let c = cells(&[f("rcvbuf", &["212992", "16000000"])], Design::Ofat);
    let runs = vec![
        (0, m(100.0, 0.0)),
        (0, m(92.0, 8.0)),
        (0, m(99.0, 1.0)),
        (1, m(0.0, 100.0)),
        (1, m(8.0, 92.0)),
        (1, m(1.0, 99.0)),
    ];
    let r = analyse(&c, &runs, Objective::Loss);
    for cell in &r.cells {
        let (lo, hi) = cell.figures["loss_pct"].interval().unwrap();
        assert!((0.0..=100.0).contains(&lo) && (0.0..=100.0).contains(&hi));
        let (lo, _) = cell.figures["tps"].interval().unwrap();
        assert!(lo >= 0.0);
    }
    assert_eq!(r.cells[1].figures["loss_pct"].ci_lo, 0.0);
    assert_eq!(r.cells[0].figures["loss_pct"].ci_hi, 100.0);
    let e = &r.effects[0].effects["loss_pct"];
    assert_eq!(e.ci_lo, -100.0);
    assert!(e.significant && e.ci_hi < 0.0);
    assert!(
        r.findings[0].contains("95 % CI [-100.000, "),
        "{}",
        r.findings[0]
    );
    // One run a cell: no test, said so (not a [-inf, inf] interval).
    let r = analyse(&c, &[(0, m(1.0, 1.0)), (1, m(2.0, 1.0))], Objective::Loss);
    assert!(
        r.findings[0].contains("one run on a side, no test"),
        "{}",
        r.findings[0]
    );
}
