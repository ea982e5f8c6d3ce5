use super::*;
use tpslab_record::{AgentInfo, ObserverReport};

fn plan() -> tpslab_plan::fleet::FleetPlan {
    tpslab_plan::fleet::FleetPlan::parse("target = \"10.0.0.1:9000\"\nrate = \"2000\"\n").unwrap()
}

/// Agent `index` of `of` whose replies took `lat_ns` each; softnet drops on its kernel.
fn agent(index: usize, of: usize, lat_ns: &[u64], boot: &str, softnet: u64) -> RunRecord {
    let mut h = new_ns_histogram();
    for &v in lat_ns {
        h.record(v).unwrap();
    }
    let n = lat_ns.len() as u64;
    let p = plan();
    RunRecord {
        started_unix_ms: 1_000,
        elapsed_s: 2.0,
        environment: Environment {
            hostname: format!("host{index}"),
            boot_id: boot.into(),
            netns: format!("net:[{index}]"),
            ..Default::default()
        },
        generator: Some(GeneratorReport {
            rate_pps: 1000.0,
            attempted: n + 1,
            sent: n + 1,
            replies_read: n,
            replies_matched: n,
            window_sent: n + 1,
            window_answered: n,
            window_loss_pct: Some(100.0 / (n + 1) as f64),
            tps: n as f64,
            valid: index != 1,
            invalid_reasons: if index == 1 {
                vec!["schedule lag p99 3 ms".into()]
            } else {
                vec![]
            },
            latency_intended: crate::stats::latency_summary(&h),
            histograms: Some(LatencyHistograms {
                intended: encode_histogram(&h),
                actual: encode_histogram(&h),
            }),
            ..Default::default()
        }),
        ledger_inputs: Some(LedgerInputs {
            gen_attempted: n + 1,
            gen_read: n,
            softnet_drops: softnet,
            replies_expected: true,
            ..Default::default()
        }),
        agent: Some(AgentInfo {
            index,
            of,
            plan_hash: p.hash(),
            plan: p,
            start_at_unix_ms: 1_000,
            start_error_us: 40,
            clock: None,
        }),
        ..Default::default()
    }
}

/// The server's watch: it read `read` datagrams and answered each.
fn server(read: u64, boot: &str, softnet: u64) -> RunRecord {
    let mut deltas = BTreeMap::new();
    for (k, v) in [
        ("server_sockets_found", 1),
        ("server_drops", 0),
        ("server_io_read", read),
        ("server_io_sent", read),
        ("server_io_send_failed", 0),
        ("softnet_dropped", softnet),
    ] {
        deltas.insert(k.to_string(), v);
    }
    RunRecord {
        started_unix_ms: 500,
        elapsed_s: 10.0,
        environment: Environment {
            hostname: "server".into(),
            boot_id: boot.into(),
            netns: "net:[srv]".into(),
            ..Default::default()
        },
        observer: Some(ObserverReport {
            deltas,
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[test]
fn counts_add_up_and_percentiles_come_from_one_merged_histogram() {
    let a: Vec<u64> = (1..=900).map(|i| i * 1_000).collect();
    let b: Vec<u64> = (1..=100).map(|i| 5_000_000 + i * 10_000).collect();
    let recs = vec![
        ("a0.json".to_string(), agent(0, 2, &a, "k1", 0)),
        ("a1.json".to_string(), agent(1, 2, &b, "k2", 0)),
    ];
    let srv = server(1000, "k3", 0);
    let m = merge(&recs, Some(("srv.json", &srv)), false).unwrap();
    let g = m.generator.as_ref().unwrap();
    assert_eq!((g.sent, g.replies_read), (1002, 1000));
    assert_eq!(g.rate_pps, 2000.0);
    // One histogram fed with every agent's values.
    let mut all = new_ns_histogram();
    for v in a.iter().chain(&b) {
        all.record(*v).unwrap();
    }
    assert_eq!(g.latency_intended.p99_ns, all.value_at_quantile(0.99));
    assert_eq!(g.latency_intended.p50_ns, all.value_at_quantile(0.5));
    // Not the mean of the agents' p99s (900 us and ~6 ms).
    let mean_p99 = (recs[0]
        .1
        .generator
        .as_ref()
        .unwrap()
        .latency_intended
        .p99_ns
        + recs[1]
            .1
            .generator
            .as_ref()
            .unwrap()
            .latency_intended
            .p99_ns)
        / 2;
    assert_ne!(g.latency_intended.p99_ns, mean_p99);
    // The ledger balances with the server's reads: 2 requests lost, unattributed.
    let l = m.ledger.as_ref().unwrap();
    assert_eq!(l.request.attempted, 1002);
    assert_eq!(l.request.count("delivered"), 1000);
    assert_eq!(l.request.unattributed, Some(2));
    assert_eq!(l.reply.as_ref().unwrap().unattributed, Some(0));
    // Agent 1's generator was the bottleneck: flagged, beside its figures.
    let info = m.merged.as_ref().unwrap();
    assert_eq!(info.agents.len(), 2);
    assert_eq!(info.agents[1].bottleneck, vec!["schedule lag p99 3 ms"]);
    assert!(!g.valid);
    assert!(g.invalid_reasons[0].starts_with("agent 1: "));
    assert!(m.notes.iter().any(|n| n.contains("agent 1 did not keep")));
}

#[test]
fn host_wide_counters_are_taken_once_per_kernel() {
    let recs = vec![
        ("a0".to_string(), agent(0, 2, &[1_000], "same", 5)),
        ("a1".to_string(), agent(1, 2, &[1_000], "same", 7)),
    ];
    let srv = server(2, "same", 6);
    let m = merge(&recs, Some(("srv", &srv)), false).unwrap();
    assert_eq!(m.ledger_inputs.as_ref().unwrap().softnet_drops, 7);
    let recs = vec![
        ("a0".to_string(), agent(0, 2, &[1_000], "k1", 5)),
        ("a1".to_string(), agent(1, 2, &[1_000], "k2", 7)),
    ];
    let m = merge(&recs, Some(("srv", &server(2, "k3", 1))), false).unwrap();
    assert_eq!(m.ledger_inputs.as_ref().unwrap().softnet_drops, 13);
}

#[test]
fn records_that_do_not_belong_together_are_refused() {
    let good = |i| (format!("a{i}"), agent(i, 3, &[1_000], "k", 0));
    // A missing agent: refused, or a partial total that says which.
    let e = merge(&[good(0), good(2)], None, false).unwrap_err();
    assert_eq!(
        e.to_string().split(';').next().unwrap(),
        "agent(s) 1 of 3 missing"
    );
    let m = merge(&[good(0), good(2)], None, true).unwrap();
    assert_eq!(m.merged.as_ref().unwrap().missing, vec![1]);
    assert!(m.notes[0].starts_with("PARTIAL: agent(s) 1 of 3 missing"));
    // Without the server's record its side is unknown, not zero.
    assert_eq!(m.ledger.as_ref().unwrap().request.unattributed, None);
    // Another plan, another start, the same index twice.
    let mut other = good(1);
    other.1.agent.as_mut().unwrap().plan_hash = "0".repeat(64);
    assert!(matches!(
        merge(&[good(0), other], None, true),
        Err(MergeError::Different { what, .. }) if what == "plan hash"
    ));
    let mut late = good(1);
    late.1.agent.as_mut().unwrap().start_at_unix_ms = 2_000;
    assert!(merge(&[good(0), late], None, true)
        .unwrap_err()
        .to_string()
        .contains("start time"));
    assert!(matches!(
        merge(&[good(0), good(0)], None, true),
        Err(MergeError::Duplicate { index: 0, .. })
    ));
    // A histogram that does not decode names the record.
    let mut bad = good(1);
    bad.1
        .generator
        .as_mut()
        .unwrap()
        .histograms
        .as_mut()
        .unwrap()
        .actual = "AAAA".into();
    let e = merge(&[good(0), bad], None, true).unwrap_err().to_string();
    assert!(
        e.starts_with("a1: its actual latency histogram does not decode"),
        "{e}"
    );
    // Counts beyond 2^53 (merge once accepted n = 4.6e18): one agent's histogram is
    // refused; two within it whose sum is over it are refused as the fleet's total.
    let with = |i: usize, n: u64| {
        let mut a = good(i);
        let mut h = new_ns_histogram();
        h.record_n(1_000, n).unwrap();
        a.1.generator.as_mut().unwrap().histograms = Some(LatencyHistograms {
            intended: encode_histogram(&h),
            actual: encode_histogram(&h),
        });
        a
    };
    let e = merge(&[with(0, 1 << 60), good(1)], None, true)
        .unwrap_err()
        .to_string();
    assert!(
        e.ends_with("a histogram of 1152921504606846976 values; allowed up to 9007199254740992"),
        "{e}"
    );
    let e = merge(&[with(0, 1 << 52), with(1, (1 << 52) + 1)], None, true)
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "the agents' intended latency values add up to more than 9007199254740992: no fleet run counts that many"
    );
    assert!(merge(&[with(0, 1 << 52), with(1, 1 << 52)], None, true).is_ok());
    // Not an agent's record; a server record that is an agent's.
    assert!(matches!(
        merge(&[("x".into(), RunRecord::default())], None, true),
        Err(MergeError::NotAnAgent(n)) if n == "x"
    ));
    let g0 = good(0);
    assert!(matches!(
        merge(&[good(0)], Some(("a0", &g0.1)), true),
        Err(MergeError::NotAServer(_))
    ));
}

#[test]
fn what_no_fleet_run_writes_is_refused() {
    // A fleet of no agents, of more than the plan's limit, an index outside the fleet.
    for (index, of, allowed) in [
        (0, 0, "allowed 1..=1024 agents in a fleet"),
        (0, 1_000_000_000, "allowed 1..=1024 agents in a fleet"),
        (3, 3, "allowed an index of 0..=2"),
    ] {
        let e = merge(
            &[("a".into(), agent(index, of, &[1_000], "k", 0))],
            None,
            true,
        )
        .unwrap_err()
        .to_string();
        assert_eq!(e, format!("a: agent {index} of {of}: {allowed}"));
    }
    // Counts that add up past any run's: refused, never wrapped.
    let big = |i| {
        let mut r = agent(i, 2, &[1_000], "k", 0);
        r.generator.as_mut().unwrap().attempted = u64::MAX / 2 + 1;
        (format!("a{i}"), r)
    };
    let e = merge(&[big(0), big(1)], None, false)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("the agents' attempted datagrams add up to more than 9007199254740992"),
        "{e}"
    );
    let mut r = agent(1, 2, &[1_000], "k", 0);
    r.ledger_inputs.as_mut().unwrap().gen_read = u64::MAX;
    let e = merge(
        &[
            ("a0".into(), agent(0, 2, &[1_000], "k", 0)),
            ("a1".into(), r),
        ],
        None,
        false,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("replies read add up"), "{e}");
    // A server watched at another time than the agents' run (1 s to 3 s after the epoch).
    let recs = [
        ("a0".into(), agent(0, 2, &[1_000], "k1", 0)),
        ("a1".into(), agent(1, 2, &[1_000], "k2", 0)),
    ];
    let mut late = server(2, "k3", 0);
    late.started_unix_ms = 3_001;
    assert_eq!(
        merge(&recs, Some(("srv", &late)), false).unwrap_err().to_string(),
        "srv: watched 1970-01-01T00:00:03.001Z to 1970-01-01T00:00:13.001Z, outside the agents' run 1970-01-01T00:00:01.000Z to 1970-01-01T00:00:03.000Z: give a watch of the server over the fleet's run"
    );
    late.started_unix_ms = 0;
    assert!(merge(&recs, Some(("srv", &late)), false)
        .unwrap_err()
        .to_string()
        .contains("at a time its record does not say"));
    late.started_unix_ms = 2_999;
    assert!(merge(&recs, Some(("srv", &late)), false).is_ok());
}
