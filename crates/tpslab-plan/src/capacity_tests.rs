//! Tests of the parent module.
use super::*;
use crate::udp::LoadConfig;
use proptest::prelude::*;

#[test]
fn an_objective_parses_as_written() {
    let ms = |m: u64| m * 1_000_000;
    let rows: &[(&str, Vec<Objective>)] = &[
        (
            "p99<20ms,loss<0.1%,errors<0.1%",
            vec![
                Objective::Latency {
                    quantile: Quantile::P99,
                    limit: std::time::Duration::from_nanos(ms(20)),
                    inclusive: false,
                },
                Objective::Loss {
                    limit_pct: 0.1,
                    inclusive: false,
                },
                Objective::Errors {
                    limit_pct: 0.1,
                    inclusive: false,
                },
            ],
        ),
        (
            " p50 <= 200us , p99.9<1s,rate>=99%",
            vec![
                Objective::Latency {
                    quantile: Quantile::P50,
                    limit: std::time::Duration::from_micros(200),
                    inclusive: true,
                },
                Objective::Latency {
                    quantile: Quantile::P999,
                    limit: std::time::Duration::from_nanos(ms(1000)),
                    inclusive: false,
                },
                Objective::Rate {
                    min_pct: 99.0,
                    inclusive: true,
                },
            ],
        ),
        (
            "p999<5ms,max<=1s,p90<2ms,loss<=0%",
            vec![
                Objective::Latency {
                    quantile: Quantile::P999,
                    limit: std::time::Duration::from_nanos(ms(5)),
                    inclusive: false,
                },
                Objective::Latency {
                    quantile: Quantile::Max,
                    limit: std::time::Duration::from_nanos(ms(1000)),
                    inclusive: true,
                },
                Objective::Latency {
                    quantile: Quantile::P90,
                    limit: std::time::Duration::from_nanos(ms(2)),
                    inclusive: false,
                },
                Objective::Loss {
                    limit_pct: 0.0,
                    inclusive: true,
                },
            ],
        ),
        (
            "rate>95",
            vec![Objective::Rate {
                min_pct: 95.0,
                inclusive: false,
            }],
        ),
    ];
    for (s, want) in rows {
        assert_eq!(Slo::parse("--slo", s).unwrap().objectives, *want, "{s}");
    }
}

#[test]
fn a_bad_objective_is_one_line_naming_the_part_and_what_is_allowed() {
    let rows: &[(&str, &str)] = &[
        ("", "--slo \"\": allowed objectives separated by commas"),
        ("p99", "--slo p99: allowed objectives separated by commas"),
        (
            "p99<20",
            "--slo p99<20: allowed p99<DURATION with a duration above 0, e.g. p99<20ms",
        ),
        ("p99>20ms", "--slo p99>20ms: allowed p99<DURATION"),
        ("p99<0s", "--slo p99<0s: allowed p99<DURATION"),
        (
            "p95<20ms",
            "--slo p95<20ms: allowed objectives separated by commas",
        ),
        ("loss<0%", "--slo loss<0%: allowed loss<PCT or loss<=PCT"),
        ("loss<101%", "--slo loss<101%: allowed loss<PCT"),
        ("loss>1%", "--slo loss>1%: allowed loss<PCT"),
        ("errors<x", "--slo errors<x: allowed errors<PCT"),
        (
            "rate<99%",
            "--slo rate<99%: allowed rate>=PCT of the intended rate",
        ),
        ("rate>=0%", "--slo rate>=0%: allowed rate>=PCT"),
        ("rate>100%", "--slo rate>100%: allowed rate>=PCT"),
        (
            "p99<20ms,,loss<1%",
            "--slo \"\": allowed objectives separated by commas",
        ),
        (
            "p99<20ms,p99<30ms",
            "--slo p99<20ms,p99<30ms: allowed each objective once (p99 is given twice)",
        ),
        (
            "p99=20ms",
            "--slo p99=20ms: allowed objectives separated by commas",
        ),
    ];
    for (s, want) in rows {
        let e = Slo::parse("--slo", s).unwrap_err().to_string();
        assert!(e.starts_with(want), "{s}: {e}");
        assert!(!e.contains('\n'), "{e}");
    }
}

#[test]
fn an_objective_holds_by_its_comparison() {
    let p99 = |inclusive| Objective::Latency {
        quantile: Quantile::P99,
        limit: std::time::Duration::from_micros(1),
        inclusive,
    };
    assert!(p99(false).holds(Some(999.0)));
    assert!(!p99(false).holds(Some(1000.0)));
    assert!(p99(true).holds(Some(1000.0)));
    assert!(
        !p99(true).holds(None),
        "a latency not measured does not pass"
    );
    let rate = Objective::Rate {
        min_pct: 99.0,
        inclusive: true,
    };
    assert!(rate.holds(Some(99.0)) && !rate.holds(Some(98.9)));
    let loss = Objective::Loss {
        limit_pct: 0.1,
        inclusive: false,
    };
    assert!(loss.holds(Some(0.0)) && !loss.holds(Some(0.1)) && !loss.holds(Some(f64::NAN)));
}

#[test]
fn a_percentage_flag_takes_a_sign_or_not() {
    assert_eq!(parse_pct("--resolution", "5%"), Ok(5.0));
    assert_eq!(parse_pct("--resolution", "2.5"), Ok(2.5));
    for bad in ["0", "-1%", "101%", "x", ""] {
        let e = parse_pct("--resolution", bad).unwrap_err().to_string();
        assert!(e.starts_with("--resolution"), "{e}");
        assert!(e.contains("allowed a percentage above 0 up to 100"), "{e}");
    }
}

fn plan() -> CapacityPlan {
    CapacityPlan {
        load: CapacityLoad::Udp(UdpRunPlan {
            server: None,
            load: LoadConfig {
                rate_pps: 1000.0,
                duration: Duration::from_secs(1),
                warmup: Duration::from_millis(200),
                ..Default::default()
            },
            interval: Duration::from_millis(10),
            target_pid: None,
            watch_port: None,
            no_drop_reasons: true,
        }),
        search: CapacitySearch {
            slo: Slo::parse("--slo", "p99<20ms").unwrap(),
            start_rate: 1000.0,
            max_rate: 100_000.0,
            resolution_pct: 5.0,
            repeats: 3,
            budget: Duration::from_secs(60),
            min_rate: 1.0,
            unit: RateUnit::Pps,
            fail_on: None,
        },
        server_cmd: None,
        fix_and_retry: false,
    }
}

/// The UDP load of a plan made by [`plan`].
fn udp(p: &mut CapacityPlan) -> &mut LoadConfig {
    match &mut p.load {
        CapacityLoad::Udp(r) => &mut r.load,
        CapacityLoad::Http(_) | CapacityLoad::Tcp(_) => unreachable!("plan() is UDP"),
    }
}

#[test]
fn a_plan_is_checked_flag_by_flag() {
    assert_eq!(plan().validate(), Ok(()));
    type Edit = fn(&mut CapacityPlan);
    let rows: &[(Edit, &str)] = &[
        (
            |p| udp(p).duration = Duration::from_millis(50),
            "--step-duration 50ms: allowed 100ms..=1h",
        ),
        (
            |p| p.search.start_rate = 0.0,
            "--start-rate 0: allowed a whole rate from 1",
        ),
        (
            |p| p.search.max_rate = f64::INFINITY,
            "--max-rate inf: allowed a whole rate from 1",
        ),
        (
            |p| p.search.max_rate = 2.4,
            "--max-rate 2.4: allowed a whole rate from 1",
        ),
        (
            |p| p.search.start_rate = 200_000.0,
            "--start-rate 200000 is above --max-rate 100000",
        ),
        (
            |p| p.search.resolution_pct = 0.1,
            "--resolution 0.1%: allowed 0.5%..=50%",
        ),
        (|p| p.search.repeats = 0, "--repeats 0: allowed 1..=10"),
        (
            |p| p.search.budget = Duration::from_secs(1),
            "--budget 1s: allowed at least one step (2s 100ms: --warmup + --step-duration + --drain + 400ms to start and end it) up to 1day",
        ),
        (|p| udp(p).size_bytes = 10, "--size 10: allowed"),
        (|p| udp(p).threads = 0, "--threads 0: allowed"),
        (|p| p.search.slo.objectives.clear(), "--slo \"\": allowed"),
        (
            |p| p.server_cmd = Some("srv 9000".into()),
            "--server-cmd \"srv 9000\": allowed a shell command containing {port}",
        ),
    ];
    for (edit, want) in rows {
        let mut p = plan();
        edit(&mut p);
        let e = p.validate().unwrap_err().to_string();
        assert!(e.starts_with(want), "want {want}, got {e}");
    }
}

#[test]
fn a_plan_reads_back_as_written() {
    let mut p = plan();
    let j = serde_json::to_string(&p).unwrap();
    assert!(j.contains(r#""budget":60000000000"#), "{j}");
    // A search without --server-cmd/--fix-and-retry writes neither key (records of
    // earlier versions read the same).
    assert!(
        !j.contains("server_cmd") && !j.contains("fix_and_retry"),
        "{j}"
    );
    assert_eq!(serde_json::from_str::<CapacityPlan>(&j).unwrap(), p);
    p.server_cmd = Some("srv --port {port}".into());
    p.fix_and_retry = true;
    let j = serde_json::to_string(&p).unwrap();
    assert_eq!(serde_json::from_str::<CapacityPlan>(&j).unwrap(), p);
}

fn objective() -> impl Strategy<Value = Objective> {
    let q = prop::sample::select(Quantile::ALL.to_vec());
    prop_oneof![
        (q, 1u64..100_000_000_000, any::<bool>()).prop_map(|(quantile, limit_ns, inclusive)| {
            Objective::Latency {
                quantile,
                limit: Duration::from_nanos(limit_ns),
                inclusive,
            }
        }),
        (1u32..=100_000, any::<bool>()).prop_map(|(m, inclusive)| Objective::Loss {
            limit_pct: m as f64 / 1000.0,
            inclusive
        }),
        (1u32..=100_000, any::<bool>()).prop_map(|(m, inclusive)| Objective::Errors {
            limit_pct: m as f64 / 1000.0,
            inclusive
        }),
        (1u32..100_000).prop_map(|m| Objective::Rate {
            min_pct: m as f64 / 1000.0,
            inclusive: m % 2 == 0,
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Whatever objective is written as `--slo` shows it reads back the same.
    #[test]
    fn an_objective_reads_back_as_shown(os in prop::collection::vec(objective(), 1..6)) {
        let mut seen = std::collections::BTreeSet::new();
        let objectives: Vec<Objective> = os.into_iter().filter(|o| seen.insert(o.name())).collect();
        let slo = Slo { objectives };
        prop_assert_eq!(Slo::parse("--slo", &slo.to_string()).unwrap(), slo);
    }

    /// No text makes the parser panic; what it refuses is one line naming `--slo`.
    #[test]
    fn any_text_is_parsed_or_refused_in_one_line(s in "[a-z0-9.,<>=% ]{0,30}") {
        if let Err(e) = Slo::parse("--slo", &s) {
            let e = e.to_string();
            prop_assert!(e.starts_with("--slo "), "{}", e);
            prop_assert!(!e.contains('\n'));
        }
    }
}
