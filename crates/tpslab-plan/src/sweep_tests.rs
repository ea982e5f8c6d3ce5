//! Tests of the parent module.
use super::*;
use proptest::prelude::*;

/// A plan file from `text`, applied to the S2 plan and checked as `sweep` checks it.
fn plan_from(text: &str) -> Result<Plan, PlanError> {
    let mut plan = s2_plan(1, Duration::from_millis(10));
    apply_plan_file(&mut plan, "--plan p.toml", text).and_then(|_| check_plan(&plan))?;
    Ok(plan)
}

#[test]
fn plan_file_values_that_would_run_at_another_rate_are_refused() {
    for (text, want) in [
        ("[load]\nburst_interval = \"0s\"\n", "load.burst_interval"),
        ("[load]\nrate = inf\n", "load.rate inf"),
        ("[load]\nrate = nan\n", "load.rate NaN"),
        ("[server]\nthreads = 0\n", "plan: server threads 0"),
        ("[load]\nsize = 39\n", "plan: load size 39"),
        ("repeat = 101\n", "plan: repeat 101"),
    ] {
        let e = plan_from(text).unwrap_err().to_string();
        assert!(e.contains(want), "{text:?}: {e}");
    }
    assert!(plan_from("[load]\nrate = 5000\n").is_ok());
}

#[test]
fn plan_files_and_levels_take_the_forms_the_flags_take() {
    let p = plan_from(
        "[server]\nrcvbuf = \"2MiB\"\n[load]\nrate = \"10k\"\nsize = \"1KiB\"\nduration = \"1.5s\"\n",
    )
    .unwrap();
    assert_eq!(p.server.rcvbuf, Some(2 << 20));
    assert_eq!(p.load.rate_pps, 10_000.0);
    assert_eq!(p.load.size_bytes, 1024);
    assert_eq!(p.load.duration, Duration::from_millis(1500));
    // Numbers as before.
    let p = plan_from("[server]\nrcvbuf = 4096\n[load]\nsize = 64\n").unwrap();
    assert_eq!((p.server.rcvbuf, p.load.size_bytes), (Some(4096), 64));
    // Refused in the flags' words, under the plan's key.
    for (text, want) in [
        (
            "[load]\nduration = \"5\"\n",
            format!(
                "--plan p.toml: load.duration 5: allowed {}",
                crate::units::DURATION_FORMS
            ),
        ),
        (
            "[server]\nrcvbuf = \"2x\"\n",
            format!(
                "--plan p.toml: server.rcvbuf 2x: allowed {}",
                crate::units::SIZE_FORMS
            ),
        ),
        (
            "[load]\nrate = \"10m\"\n",
            format!(
                "--plan p.toml: load.rate 10m: allowed {}",
                crate::units::pps_forms()
            ),
        ),
    ] {
        assert_eq!(plan_from(text).unwrap_err().to_string(), want, "{text}");
    }
    let f = parse_factor("rcvbuf=default,2MiB,65536").unwrap();
    let mut srv = ServerConfig::default();
    let mut load = LoadConfig::default();
    apply_level(&mut srv, &mut load, "rcvbuf", &f.levels[1]).unwrap();
    assert_eq!(srv.rcvbuf, Some(2 << 20));
    apply_level(&mut srv, &mut load, "size", "1KiB").unwrap();
    assert_eq!(load.size_bytes, 1024);
    let e = apply_level(&mut srv, &mut load, "rcvbuf", "2x").unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "--factor rcvbuf: level 2x: allowed {}",
            crate::units::SIZE_FORMS
        )
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn any_plan_file_is_a_plan_or_a_one_line_error(
        lines in proptest::collection::vec(
            "(design|repeat|objective|\\[server\\]|\\[load\\]|\\[\\[factor\\]\\]|threads|batch|rcvbuf|mode|work_ns|rate|size|burst|burst_interval|duration|warmup|no_replies|name|levels) ?= ?(-?[0-9]{1,12}(\\.[0-9]{1,3})?|\"[a-z0-9:. ]{0,12}\"|\\[\"[a-z0-9_.]{0,10}\", ?[0-9]{1,6}\\]|true|inf|nan)?",
            0..12,
        )
    ) {
        let text = lines.join("\n");
        match plan_from(&text) {
            Ok(p) => {
                // What passes can run: every cell's server and load validate.
                for c in cells(&p.factors, p.design) {
                    prop_assert!(cell_config(&p, &c).is_ok());
                }
            }
            Err(e) => prop_assert!(!e.to_string().contains('\n'), "{}", e),
        }
    }

    #[test]
    fn any_factor_spec_is_a_factor_or_a_one_line_error(spec in "\\PC{0,40}") {
        if let Err(e) = parse_factor(&spec) {
            prop_assert!(!e.to_string().contains('\n') || spec.contains('\n'));
        }
    }
}

#[test]
fn a_sysctl_level_holds_as_many_numbers_as_the_sysctl() {
    let e = parse_factor("net.core.rmem_max=1 2,3")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("net.core.rmem_max") && e.contains("\"1 2\"") && e.contains("a number"),
        "{e}"
    );
    assert!(parse_factor("net.core.rmem_max=").is_err());
    assert!(parse_factor("net.ipv4.udp_mem=1 2 3,4 5 6").is_ok());
    let e = parse_factor("net.ipv4.udp_mem=1 2 3,1 2")
        .unwrap_err()
        .to_string();
    assert!(e.contains("3 numbers"), "{e}");
}

proptest! {
    #[test]
    fn a_sysctl_level_is_taken_iff_its_count_of_numbers_is_right(
        nums in proptest::collection::vec(1u64..1_000_000, 0..5),
        udp_mem in any::<bool>(),
    ) {
        let (name, want) = if udp_mem {
            ("net.ipv4.udp_mem", 3)
        } else {
            ("net.core.netdev_max_backlog", 1)
        };
        let level = nums.iter().map(u64::to_string).collect::<Vec<_>>().join(" ");
        let r = check_level(name, &level);
        prop_assert_eq!(r.is_ok(), nums.len() == want, "{:?}", r);
    }
}
