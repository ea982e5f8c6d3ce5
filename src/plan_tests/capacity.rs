//! The table rows of `capacity udp`: its flags as `load udp` takes them, the objective,
//! the search's bounds.

use super::{accepted, refused, Made, DURATION_FORMS};
use std::time::Duration;
use tpslab_plan::capacity::{Objective, Quantile};

#[test]
fn capacity_refuses_what_it_cannot_search() {
    let dir = tempfile::tempdir().unwrap();
    let bad_budget = format!("--budget 1x: {DURATION_FORMS}");
    refused(
        dir.path(),
        &[
            (
                "capacity udp 127.0.0.1:9 --slo p99<20",
                &["--slo p99<20: allowed p99<DURATION"],
            ),
            (
                "capacity udp 127.0.0.1:9 --slo loss<0%",
                &["--slo loss<0%: allowed loss<PCT"],
            ),
            (
                "capacity udp 127.0.0.1:9 --resolution 60%",
                &["--resolution 60%: allowed 0.5%..=50%"],
            ),
            (
                "capacity udp 127.0.0.1:9 --resolution five",
                &["--resolution five: allowed a percentage"],
            ),
            (
                "capacity udp 127.0.0.1:9 --start-rate max",
                &["--start-rate max: allowed a rate above 0"],
            ),
            (
                "capacity udp 127.0.0.1:9 --start-rate 10k --max-rate 5k",
                &["--start-rate 10000 is above --max-rate 5000"],
            ),
            (
                "capacity udp 127.0.0.1:9 --step-duration 10ms",
                &["--step-duration 10ms: allowed 100ms..=1h"],
            ),
            (
                "capacity udp 127.0.0.1:9 --budget 2s",
                &["--budget 2s: allowed at least one step"],
            ),
            (
                // One step of 2.5 s needs 3.4 s with its drain and start: a 3 s budget
                // would run no step at all.
                "capacity udp 127.0.0.1:9 --step-duration 2s --warmup 500ms --budget 3s",
                &["--budget 3s: allowed at least one step (3s 400ms"],
            ),
            (
                "capacity udp 127.0.0.1:9 --max-rate 2.4",
                &["--max-rate 2.4: allowed a whole rate from 1"],
            ),
            (
                "capacity udp 127.0.0.1:9 --budget 1x",
                &[bad_budget.as_str()],
            ),
            (
                "capacity udp 127.0.0.1:9 --repeats 0",
                &["--repeats 0: allowed 1..=10"],
            ),
            ("capacity udp 127.0.0.1:9 --size 10", &["--size 10"]),
            ("capacity udp 127.0.0.1:9 --threads 0", &["--threads 0"]),
        ],
    );
}

#[test]
fn capacity_takes_the_load_flags_and_the_search_as_given() {
    let dir = tempfile::tempdir().unwrap();
    let Made::Capacity(p) = accepted(
        dir.path(),
        "capacity udp 127.0.0.1:9 --slo 'p99.9<5ms,rate>=99%' --start-rate 10k --max-rate 2M --resolution 2% --repeats 5 --budget 90s --step-duration 1s --warmup 200ms --size 512 --burst 10 --threads 2",
    ) else {
        panic!("not a capacity plan")
    };
    let (l, s) = (&p.run.load, &p.search);
    assert_eq!(
        (l.size_bytes, l.burst, l.threads, l.duration, l.warmup),
        (
            512,
            10,
            2,
            Duration::from_secs(1),
            Duration::from_millis(200)
        )
    );
    assert_eq!(l.target.to_string(), "127.0.0.1:9");
    assert_eq!(
        (
            s.start_rate,
            s.max_rate,
            s.resolution_pct,
            s.repeats,
            s.budget
        ),
        (10_000.0, 2e6, 2.0, 5, Duration::from_secs(90))
    );
    assert_eq!(
        s.slo.objectives,
        vec![
            Objective::Latency {
                quantile: Quantile::P999,
                limit: std::time::Duration::from_millis(5),
                inclusive: false
            },
            Objective::Rate {
                min_pct: 99.0,
                inclusive: true
            }
        ]
    );
    // The defaults: the objective, 1,000 pps up to 1M, 5 %, 3 repeats, 5 minutes.
    let Made::Capacity(d) = accepted(dir.path(), "capacity udp 127.0.0.1:9") else {
        panic!("not a capacity plan")
    };
    assert_eq!(d.search.slo.to_string(), "p99<20ms,loss<0.1%,errors<0.1%");
    assert_eq!(
        (
            d.search.start_rate,
            d.search.max_rate,
            d.search.resolution_pct,
            d.search.repeats
        ),
        (1000.0, 1e6, 5.0, 3)
    );
    assert_eq!(d.search.budget, Duration::from_secs(300));
}
