//! Tests of the parent module: the search on scripted step outcomes, the calls.
use super::*;
use std::time::Duration;
use tpslab_plan::capacity::Quantile;
use tpslab_record::capacity::{CapacityRetry, StepVerdict};

fn search(start: f64, max: f64) -> CapacitySearch {
    CapacitySearch {
        slo: Slo::parse("--slo", "p99<20ms,loss<0.1%").unwrap(),
        start_rate: start,
        max_rate: max,
        resolution_pct: 5.0,
        repeats: 3,
        budget: Duration::from_secs(600),
        min_rate: 1.0,
        unit: Default::default(),
        fail_on: None,
    }
}

fn step(rate: f64, status: StepStatus) -> CapacityStep {
    CapacityStep {
        rate_pps: rate,
        achieved_pps: rate,
        answered_pps: rate,
        latency_ns: Some([1, 2, 3, 4, 5]),
        loss_pct: Some(0.0),
        errors_pct: 0.0,
        status,
        why: match status {
            StepStatus::Fail => vec!["p99 31 ms > 20 ms".into()],
            StepStatus::Invalid => vec!["the generator fell behind".into()],
            _ => vec![],
        },
        verdict: None,
        started_s: 0.0,
        elapsed_s: 1.0,
        ledger: None,
    }
}

/// Runs the search against `outcome` (the call of the n-th step at a rate) until it ends.
fn run(
    s: &CapacitySearch,
    mut outcome: impl FnMut(f64, usize) -> StepStatus,
) -> (Conclusion, Vec<CapacityStep>) {
    let mut steps: Vec<CapacityStep> = vec![];
    loop {
        match next(s, &steps) {
            Next::Step(r) => {
                let n = steps.iter().filter(|x| x.rate_pps == r).count();
                steps.push(step(r, outcome(r, n)));
            }
            Next::Done(c) => return (c, steps),
        }
    }
}

#[test]
fn a_server_of_known_capacity_is_bracketed_within_the_resolution() {
    for cap in [1_500.0, 7_777.0, 40_000.0, 41_000.0, 99_999.0, 250_000.0] {
        let s = search(1000.0, 1e6);
        let (c, steps) = run(&s, |r, _| {
            if r <= cap {
                StepStatus::Pass
            } else {
                StepStatus::Fail
            }
        });
        let Conclusion::Bracket {
            sustains_pps,
            fails_pps,
        } = c
        else {
            panic!("{cap}: {c:?}");
        };
        assert!(sustains_pps <= cap && fails_pps > cap, "{cap}: {c:?}");
        assert!(fails_pps <= sustains_pps * 1.05 + 1.0, "{cap}: {c:?}");
        // Both ends repeated: 3 calls each.
        let t = tally(&steps);
        let at = |r: f64| t.iter().find(|x| x.rate_pps == r).unwrap().judged();
        assert_eq!((at(sustains_pps), at(fails_pps)), (3, 3), "{cap}");
        assert!(steps.len() <= 20, "{cap}: {} steps", steps.len());
    }
}

#[test]
fn the_search_doubles_then_bisects() {
    let s = search(1000.0, 1e6);
    let (_, steps) = run(&s, |r, _| {
        if r <= 5000.0 {
            StepStatus::Pass
        } else {
            StepStatus::Fail
        }
    });
    let rates: Vec<f64> = steps.iter().map(|x| x.rate_pps).collect();
    assert_eq!(
        &rates[..6],
        &[1000.0, 2000.0, 4000.0, 8000.0, 6000.0, 5000.0]
    );
}

#[test]
fn a_first_failure_at_the_start_rate_halves_downwards() {
    let s = search(1000.0, 1e6);
    let (c, steps) = run(&s, |r, _| {
        if r <= 300.0 {
            StepStatus::Pass
        } else {
            StepStatus::Fail
        }
    });
    assert_eq!(steps[1].rate_pps, 500.0);
    assert_eq!(steps[2].rate_pps, 250.0);
    let Conclusion::Bracket {
        sustains_pps,
        fails_pps,
    } = c
    else {
        panic!("{c:?}")
    };
    assert!(sustains_pps <= 300.0 && fails_pps > 300.0);
}

#[test]
fn a_pass_at_the_max_rate_is_at_least_it() {
    let s = search(1000.0, 5000.0);
    let (c, steps) = run(&s, |_, _| StepStatus::Pass);
    assert_eq!(
        c,
        Conclusion::AtLeast {
            sustains_pps: 5000.0
        }
    );
    let rates: Vec<f64> = steps.iter().map(|x| x.rate_pps).collect();
    assert_eq!(rates, vec![1000.0, 2000.0, 4000.0, 5000.0, 5000.0, 5000.0]);
}

#[test]
fn nothing_passing_ends_at_the_lowest_rate() {
    let (c, steps) = run(&search(16.0, 1000.0), |_, _| StepStatus::Fail);
    assert_eq!(c, Conclusion::NothingPasses { fails_pps: 1.0 });
    assert_eq!(steps.len(), 5, "16, 8, 4, 2, 1");
}

#[test]
fn a_generator_that_cannot_deliver_is_the_limit_not_the_server() {
    // The server would sustain 80,000; the generator delivers nothing above 30,000.
    let s = search(1000.0, 1e6);
    let (c, steps) = run(&s, |r, _| {
        if r > 30_000.0 {
            StepStatus::Invalid
        } else if r <= 80_000.0 {
            StepStatus::Pass
        } else {
            StepStatus::Fail
        }
    });
    let Conclusion::GeneratorLimited {
        sustains_pps: Some(lo),
        generator_pps,
    } = c
    else {
        panic!("{c:?}")
    };
    assert!(lo <= 30_000.0 && generator_pps > 30_000.0 && generator_pps <= lo * 1.05 + 1.0);
    assert!(
        !steps.iter().any(|x| x.status == StepStatus::Fail),
        "no invalid step is counted as the server failing"
    );
    // Each invalid rate was tried twice before it was the generator's limit.
    for t in tally(&steps).iter().filter(|t| t.invalid > 0) {
        assert_eq!(t.invalid, INVALID_TO_LIMIT);
    }
}

#[test]
fn a_rate_missed_below_one_delivered_is_a_busy_moment_not_the_limit() {
    // 4,250 is missed twice, yet 4,500 was delivered (and failed): tried again.
    let s = search(1000.0, 1e6);
    let mut steps = vec![
        step(4000.0, StepStatus::Pass),
        step(4500.0, StepStatus::Fail),
        step(4250.0, StepStatus::Invalid),
        step(4250.0, StepStatus::Invalid),
    ];
    assert_eq!(next(&s, &steps), Next::Step(4250.0));
    steps.push(step(4250.0, StepStatus::Pass));
    assert_eq!(next(&s, &steps), Next::Step(4375.0));
    // Missed every time: the search ends unfinished with the bracket so far, saying why.
    let (c, steps) = run(&s, |r, _| {
        if (4_200.0..4_400.0).contains(&r) {
            StepStatus::Invalid
        } else if r <= 4_300.0 {
            StepStatus::Pass
        } else {
            StepStatus::Fail
        }
    });
    let Conclusion::Unfinished {
        sustains_pps: Some(lo),
        fails_pps: Some(hi),
        why,
    } = &c
    else {
        panic!("{c:?}")
    };
    assert!(*lo <= 4_200.0 && *hi >= 4_400.0, "{c:?}");
    assert!(why.starts_with("the generator did not deliver"), "{why}");
    assert!(steps.len() < 40);
}

#[test]
fn one_invalid_step_is_tried_again_and_then_counted() {
    let s = search(1000.0, 1e6);
    let steps = vec![step(1000.0, StepStatus::Invalid)];
    assert_eq!(next(&s, &steps), Next::Step(1000.0));
    let steps = vec![
        step(1000.0, StepStatus::Invalid),
        step(1000.0, StepStatus::Pass),
    ];
    assert_eq!(next(&s, &steps), Next::Step(2000.0));
}

#[test]
fn a_passing_end_that_fails_on_a_repeat_narrows_again_below_it() {
    // 5,000 passes twice and fails its third: it stops passing, the bracket moves down.
    let s = search(1000.0, 1e6);
    let (c, steps) = run(&s, |r, n| {
        if r <= 4_900.0 || (r <= 5_000.0 && n < 2) {
            StepStatus::Pass
        } else {
            StepStatus::Fail
        }
    });
    let Conclusion::Bracket {
        sustains_pps,
        fails_pps,
    } = c
    else {
        panic!("{c:?}")
    };
    assert!(sustains_pps <= 4_900.0, "{c:?}");
    assert!(fails_pps <= 5_000.0, "{c:?}");
    assert!(steps.len() < MAX_STEPS);
}

#[test]
fn interrupted_steps_are_not_counted_and_the_step_limit_ends_a_search() {
    let s = search(1000.0, 1e6);
    let steps = vec![step(1000.0, StepStatus::Interrupted)];
    assert_eq!(next(&s, &steps), Next::Step(1000.0));
    let many: Vec<CapacityStep> = (0..MAX_STEPS)
        .map(|_| step(1000.0, StepStatus::Interrupted))
        .collect();
    assert!(matches!(
        next(&s, &many),
        Next::Done(Conclusion::Unfinished { .. })
    ));
    let some = vec![
        step(1000.0, StepStatus::Pass),
        step(2000.0, StepStatus::Fail),
    ];
    assert_eq!(
        so_far(&search(1000.0, 100_000.0), &some, "the budget of 10s"),
        Conclusion::Unfinished {
            sustains_pps: Some(1000.0),
            fails_pps: Some(2000.0),
            why: "the budget of 10s".into()
        }
    );
    // The generator missed 2000 twice and delivered nothing higher: no server failure.
    let gen = vec![
        step(1000.0, StepStatus::Pass),
        step(2000.0, StepStatus::Invalid),
        step(2000.0, StepStatus::Invalid),
    ];
    let Conclusion::Unfinished {
        sustains_pps,
        fails_pps,
        why,
    } = so_far(&search(1000.0, 100_000.0), &gen, "the budget of 10s")
    else {
        panic!("unfinished")
    };
    assert_eq!((sustains_pps, fails_pps), (Some(1000.0), None));
    assert!(
        why.contains("the generator could not deliver 2,000 pps"),
        "{why}"
    );
}

#[test]
fn a_bursty_search_stops_at_its_lowest_rate_not_at_one_datagram_a_second() {
    // Bursts of 200 over 1 s windows: 1,000 pps is the lowest rate with 5 bursts a step.
    let mut s = search(10_000.0, 100_000.0);
    s.min_rate = tpslab_plan::capacity::min_rate_for_bursts(200, Duration::from_secs(1));
    assert_eq!(s.min_rate, 1000.0);
    let mut steps = vec![];
    let mut tried = vec![];
    while let Next::Step(r) = next(&s, &steps) {
        tried.push(r);
        steps.push(step(r, StepStatus::Fail));
        assert!(steps.len() < 20, "{tried:?}");
    }
    assert_eq!(tried, vec![10_000.0, 5_000.0, 2_500.0, 1_250.0, 1_000.0]);
    assert_eq!(
        next(&s, &steps),
        Next::Done(Conclusion::NothingPasses { fails_pps: 1000.0 })
    );
}

#[path = "capacity_judge_tests.rs"]
mod judge;
