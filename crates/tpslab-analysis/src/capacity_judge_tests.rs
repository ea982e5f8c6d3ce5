//! Tests of the parent module's judgement: a step judged against the objectives, the
//! headline, an HTTP step's window (a child of capacity_tests.rs, its helpers in scope).

use super::*;

#[test]
fn latency_only_is_every_broken_objective_a_latency_bound() {
    let slo = Slo::parse("--slo", "p99<1ms,loss<0.1%").unwrap();
    let mut f = figs();
    assert!(!latency_only(&slo, &f), "nothing broke");
    f.latency_ns = Some([100_000, 200_000, 5_000_000, 6_000_000, 7_000_000]);
    assert!(latency_only(&slo, &f));
    f.loss_pct = Some(5.0);
    assert!(!latency_only(&slo, &f), "loss broke too");
}

fn figs() -> StepFigures {
    StepFigures {
        rate_pps: 10_000.0,
        achieved_pps: 10_000.0,
        answered_pps: 10_000.0,
        latency_ns: Some([100_000, 200_000, 500_000, 1_000_000, 2_000_000]),
        latency_actual_ns: None,
        loss_pct: Some(0.0),
        errors_pct: 0.0,
        gen_valid: true,
        gen_reasons: vec![],
        interrupted: false,
        server_faults: vec![],
    }
}

#[test]
fn a_step_is_judged_generator_first_then_each_objective() {
    let slo = Slo::parse("--slo", "p99<20ms,loss<0.1%,errors<0.1%,rate>=99%").unwrap();
    assert_eq!(judge(&slo, &figs()), (StepStatus::Pass, vec![]));
    type Edit = fn(&mut StepFigures);
    let rows: &[(Edit, StepStatus, &[&str])] = &[
        (
            |f| f.latency_ns = Some([1, 2, 31_000_000, 4, 5]),
            StepStatus::Fail,
            &["p99 31 ms > 20 ms"],
        ),
        (
            |f| {
                f.loss_pct = Some(2.3);
                f.answered_pps = 9_770.0;
            },
            StepStatus::Fail,
            &["loss 2.3 % > 0.10 %", "rate 98 % of intended < 99 %"],
        ),
        (
            |f| f.errors_pct = 0.1,
            StepStatus::Fail,
            &["errors 0.10 % >= 0.10 %"],
        ),
        (
            |f| {
                f.latency_ns = None;
                f.loss_pct = Some(100.0);
                f.answered_pps = 0.0;
            },
            StepStatus::Fail,
            &[
                "p99 not measured (no reply)",
                "loss 100 % > 0.10 %",
                "rate 0 % of intended < 99 %",
            ],
        ),
        // The server's HTTP/2 misbehaviour fails a step every objective held in.
        (
            |f| f.server_faults = vec!["the server misbehaved over HTTP/2: PING flood on 1 connection (closed by this client)".into()],
            StepStatus::Fail,
            &["the server misbehaved over HTTP/2: PING flood on 1 connection (closed by this client)"],
        ),
        // The generator first: whatever the server did, an invalid step is not its failure.
        (
            |f| {
                f.gen_valid = false;
                f.gen_reasons = vec!["achieved 6000 pps, 40 % below the 10000 planned".into()];
                f.loss_pct = Some(50.0);
            },
            StepStatus::Invalid,
            &["achieved 6000 pps, 40 % below the 10000 planned"],
        ),
        (
            |f| {
                f.interrupted = true;
                f.gen_valid = false;
            },
            StepStatus::Interrupted,
            &["stopped before its end"],
        ),
    ];
    for (edit, status, why) in rows {
        let mut f = figs();
        edit(&mut f);
        let (st, w) = judge(&slo, &f);
        assert_eq!(
            (st, w.iter().map(String::as_str).collect::<Vec<_>>()),
            (*status, why.to_vec())
        );
    }
}

#[test]
fn every_quantile_reads_its_own_figure() {
    let f = figs();
    for (i, q) in Quantile::ALL.iter().enumerate() {
        let o = Objective::Latency {
            quantile: *q,
            limit: std::time::Duration::from_nanos(1),
            inclusive: false,
        };
        assert_eq!(value(&o, &f), Some(f.latency_ns.unwrap()[i] as f64));
    }
}

#[test]
fn the_headline_names_both_ends_and_what_gave() {
    use tpslab_record::verdict::Diagnosis;
    let mut steps = vec![];
    for _ in 0..3 {
        steps.push(step(40_000.0, StepStatus::Pass));
        steps.push(step(42_000.0, StepStatus::Fail));
    }
    steps[1].verdict = Some(StepVerdict {
        case: Case::SocketBufferBursts,
        layer: "the server socket's receive buffer".into(),
        headline: "h".into(),
    });
    let rec = CapacityRecord {
        plan: tpslab_plan::capacity::CapacityPlan {
            load: tpslab_plan::capacity::CapacityLoad::Udp(tpslab_plan::udp::UdpRunPlan {
                server: None,
                load: Default::default(),
                interval: Duration::from_millis(10),
                target_pid: None,
                watch_port: None,
                no_drop_reasons: true,
            }),
            search: search(1000.0, 1e6),
            server_cmd: None,
            fix_and_retry: false,
        },
        steps,
        conclusion: Conclusion::Bracket {
            sustains_pps: 40_000.0,
            fails_pps: 42_000.0,
        },
        boundary: Some(Diagnosis {
            case: Case::SocketBufferBursts,
            layer: "the server socket's receive buffer".into(),
            headline: "h".into(),
            evidence: vec![],
            recommendations: vec![],
            buffer: None,
            buffer_notes: vec![],
            fix: None,
            explain_notes: vec![],
        }),
        interrupted: false,
        environment: Default::default(),
        notes: vec![],
        retry: None,
    };
    assert_eq!(
        headline(&rec),
        "sustains 40,000 pps (40,000 passes 3/3; 42,000 fails 3/3: p99 31 ms > 20 ms); first to give: the server socket's receive buffer"
    );
    assert_eq!(rate_text(1_234_567.4), "1,234,567");
    assert_eq!(rate_text(999.0), "999");

    // --fix-and-retry: a change in % only between two boundaries found; a second search
    // cut short (or ended by the generator) has no capacity to compare.
    let mut with = rec.clone();
    let mut second = rec.clone();
    second.conclusion = Conclusion::Bracket {
        sustains_pps: 55_200.0,
        fails_pps: 58_000.0,
    };
    with.retry = Some(Box::new(CapacityRetry {
        applied: vec!["sysctl net.core.rmem_default=921600".into()],
        restored: vec![],
        search: second.clone(),
    }));
    assert_eq!(with.retry_change_pct().map(|p| p.round()), Some(38.0));
    for end in [
        Conclusion::Unfinished {
            sustains_pps: Some(80_000.0),
            fails_pps: None,
            why: "interrupted".into(),
        },
        Conclusion::AtLeast { sustains_pps: 1e6 },
        Conclusion::GeneratorLimited {
            sustains_pps: Some(60_000.0),
            generator_pps: 64_000.0,
        },
    ] {
        second.conclusion = end.clone();
        with.retry.as_mut().unwrap().search = second.clone();
        assert_eq!(with.retry_change_pct(), None, "{end:?}");
    }
}

#[test]
fn latency_broken_only_by_the_generators_lateness_is_invalid_not_the_server() {
    let slo = Slo::parse("--slo", "p99<20ms,loss<0.1%").unwrap();
    let ms = 1_000_000;
    let mut f = figs();
    // 39 ms from the intended send, 2 ms from the actual send: the generator sent late.
    f.latency_ns = Some([4 * ms, 20 * ms, 39 * ms, 44 * ms, 44 * ms]);
    f.latency_actual_ns = Some([ms / 10, ms, 2 * ms, 3 * ms, 3 * ms]);
    let (status, why) = judge(&slo, &f);
    assert_eq!(status, StepStatus::Invalid, "{why:?}");
    assert_eq!(
        why,
        vec!["p99 39 ms from the intended send time, 2.00 ms from the actual send: the generator sent late, not the server (it answered within the objective from the actual send)"]
    );
    // Slow from the actual send too: the server's.
    f.latency_actual_ns = Some([4 * ms, 20 * ms, 30 * ms, 44 * ms, 44 * ms]);
    assert_eq!(
        judge(&slo, &f),
        (StepStatus::Fail, vec!["p99 39 ms > 20 ms".into()])
    );
    // Loss broke too: the server failed whatever the lateness.
    f.latency_actual_ns = Some([ms / 10, ms, 2 * ms, 3 * ms, 3 * ms]);
    f.loss_pct = Some(1.0);
    assert_eq!(judge(&slo, &f).0, StepStatus::Fail);
    // Where a send may wait for the server (no figures from the actual send), never.
    f.loss_pct = Some(0.0);
    f.latency_actual_ns = None;
    assert_eq!(judge(&slo, &f).0, StepStatus::Fail);
}

/// `load http`'s record of a real run (`tpslab-report/tests/fixtures/load_http.json`: 2000
/// requests/s for 1 s against `serve http`, every one answered 2xx).
fn http_record() -> tpslab_record::load_http::LoadHttpRecord {
    let text = include_str!("../../tpslab-report/tests/fixtures/load_http.json");
    let rec = tpslab_record::Record::from_json(text).unwrap();
    match rec.body {
        tpslab_record::Body::LoadHttp(l) => l,
        _ => panic!("not a load_http record"),
    }
}

#[test]
fn an_http_step_reads_its_window_and_counts_no_reply_as_loss_and_failures_as_errors() {
    let mut r = http_record();
    let f = figures_http(&r, 2000.0, false);
    assert_eq!((f.achieved_pps, f.answered_pps), (2000.0, 2000.0));
    assert_eq!(
        f.latency_ns,
        Some([90_623, 116_607, 139_775, 207_103, 293_375])
    );
    assert_eq!((f.loss_pct, f.errors_pct), (Some(0.0), 0.0));
    assert!(f.gen_valid && f.latency_actual_ns.is_none());
    // 20 timed out and 10 still outstanding of 2000 written: 1.5 % lost; 30 refused
    // connects, 40 resets, 50 503s of 2000 intended: 6 % errors.
    r.result.errors.timeout = 20;
    r.result.unanswered = 10;
    r.result.connect_errors.refused = 30;
    r.result.errors.reset = 40;
    r.result.status.s5xx = 50;
    let f = figures_http(&r, 2000.0, false);
    assert_eq!(f.loss_pct, Some(1.5));
    assert_eq!(f.errors_pct, 6.0);
    // 3000 more timeouts given up on the client while they waited for an HTTP/2 stream
    // (never written): errors of those intended, not loss of those written (which
    // would read 151.5 %).
    r.result.errors.timeout += 3000;
    r.result.http2 = Some(tpslab_record::load_http::Http2Streams {
        timed_out_waiting: 3000,
        ..Default::default()
    });
    let f = figures_http(&r, 2000.0, false);
    assert_eq!(f.loss_pct, Some(1.5));
    assert_eq!(f.errors_pct, 100.0);
    r.result.errors.timeout -= 3000;
    // Connections closed for the server's PING flood, requests GOAWAY refused twice:
    // named, each a reason the step fails.
    let mut h = tpslab_record::load_http::Http2Streams {
        goaway_refused: 4,
        ..Default::default()
    };
    h.faults.ping_flood = 2;
    r.result.http2 = Some(h);
    let f = figures_http(&r, 2000.0, false);
    assert_eq!(
        f.server_faults,
        vec![
            "the server misbehaved over HTTP/2: PING flood on 2 connections (closed by this client)",
            "the server's GOAWAY refused 4 requests twice"
        ]
    );
    assert_eq!(
        judge(&Slo::parse("--slo", "p99<20ms").unwrap(), &f).0,
        StepStatus::Fail
    );
    r.result.http2 = None;
    assert!(figures_http(&r, 2000.0, false).server_faults.is_empty());
    // 21 of 2000 sent late with their connection ready: the generator's, not evidence.
    r.result.behind = 21;
    r.result.behind_max_ns = 3_000_000;
    let f = figures_http(&r, 2000.0, false);
    assert!(!f.gen_valid);
    assert_eq!(
        f.gen_reasons,
        vec!["the generator sent 21 of 2000 requests late with their connection idle and ready (up to 3.00 ms; allowed: 1 %)"]
    );
    assert_eq!(
        judge(&Slo::parse("--slo", "p99<20ms").unwrap(), &f).0,
        StepStatus::Invalid
    );
}
