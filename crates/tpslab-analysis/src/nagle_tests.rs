//! Tests of the parent module, on figures of the kind a run records.
use super::*;
use tpslab_record::ramp::StepResult;

/// `n` small replies of `rt_ms` each, `held` of them with a gap of `gap_ms`.
fn gaps(n: u64, rt_ms: f64, held: u64, gap_ms: f64, delayed_acks: Option<u64>) -> ReplyGaps {
    let mut g = ReplyGaps::default();
    for i in 0..n {
        let gap = if i < held { gap_ms } else { 0.05 };
        g.add((rt_ms * 1e6) as u64, Some((gap * 1e6) as u64), 180);
    }
    g.delayed_acks = delayed_acks;
    g
}

#[test]
fn a_reply_held_at_each_request_is_named_with_its_share_evidence_and_fix() {
    // One user against a server writing headers and body in two sends: ~42 ms a reply,
    // 40 ms of it between the headers and the body; a delayed ACK per reply.
    let g = gaps(47, 42.1, 46, 40.6, Some(49));
    let n = judge(&g).expect("named");
    assert_eq!((n.held, n.small, n.delayed_acks), (46, 47, Some(49)));
    assert!(
        (n.share - 46.0 * 40.6 / (47.0 * 42.1)).abs() < 1e-3,
        "{n:?}"
    );
    let line = n.line();
    assert!(line.starts_with("Nagle x delayed ACK: the server writes a reply in two or more sends; Nagle holds the last until the client's delayed ACK (~40 ms): 46 of 47 small replies (at most 14480 bytes) had their last byte 40.6 ms after their first (mean; max 40.6 ms), 94 % of the response time; TcpExt DelayedACKs rose by 49"), "{line}");
    for fix in [
        "TCP_NODELAY",
        "disable_nagle_algorithm = True",
        "setTcpNoDelay(true)",
        "Go sets TCP_NODELAY by default",
        "setNoDelay(true)",
        "one send",
        "tpslab does not set TCP_QUICKACK",
    ] {
        assert!(line.contains(fix), "{fix}: {line}");
    }
    // Without the counter (not readable) the gaps alone name it.
    assert!(judge(&gaps(47, 42.1, 46, 40.6, None)).is_some());
}

#[test]
fn a_server_with_tcp_nodelay_is_not_named() {
    // The same server with TCP_NODELAY: 0.3 ms a reply, no gap.
    assert_eq!(judge(&gaps(5000, 0.3, 0, 0.0, Some(0))), None);
    assert_eq!(judge(&ReplyGaps::default()), None);
}

#[test]
fn a_few_stalls_or_a_small_share_are_not_named() {
    // Two held replies: noise.
    assert_eq!(judge(&gaps(10, 10.0, 2, 40.0, None)), None);
    // Held now and then: 5 of 100 replies.
    assert_eq!(judge(&gaps(100, 45.0, 5, 40.0, None)), None);
    // Held each time but a sliver of a slow reply's time (2 s replies).
    assert_eq!(judge(&gaps(20, 2000.0, 20, 40.0, None)), None);
}

#[test]
fn gaps_without_delayed_acks_are_a_pausing_server_not_nagle() {
    // 40 ms between the sends of each reply, but no delayed ACK fired: the server
    // paused between its sends (the client acked the first part on its own).
    assert_eq!(judge(&gaps(40, 45.0, 40, 40.0, Some(3))), None);
    // One delayed ACK per two held replies is enough (the counter is the namespace's).
    assert!(judge(&gaps(40, 45.0, 40, 40.0, Some(20))).is_some());
}

#[test]
fn gaps_away_from_the_delayed_ack_timer_are_a_pausing_server_not_nagle() {
    // The held gaps of a real run (python3 http.server, load http at 30/s on one
    // connection: 32 held, 45.8 ms on average, at most 50.5 ms; 32 delayed ACKs).
    let real = ReplyGaps {
        replies: 33,
        response_ns: 33 * 46_500_000,
        small: 33,
        held: 32,
        held_gap_ns: 1_465_227_513,
        held_gap_max_ns: 50_541_379,
        delayed_acks: Some(32),
        held_rtt_min_ns: None,
    };
    assert!(judge(&real).is_some());
    // A server with TCP_NODELAY sleeping 100 ms between headers and body: the client's
    // delayed ACK fires during each pause (DelayedACKs rises as much), but the gap is
    // the pause, not the timer.
    assert_eq!(judge(&gaps(40, 101.0, 40, 100.0, Some(40))), None);
    assert_eq!(judge(&gaps(40, 71.0, 40, 70.0, Some(40))), None);
    // At the timer, however it is rounded (a 10 ms tick at HZ 100): Nagle.
    assert!(judge(&gaps(40, 51.0, 40, 50.0, Some(40))).is_some());
}

#[test]
fn a_hold_on_a_long_round_trip_is_judged_without_the_round_trip() {
    // A 40.6 ms delayed-ACK hold on a 30 ms path: the ACK goes to the server and the
    // held body comes back after the timer, so each held gap is 70.6 ms, past the
    // timer's window when the round trip is not known (or not taken off).
    let mut g = gaps(40, 71.0, 40, 70.6, Some(40));
    assert_eq!(judge(&g), None);
    g.held_rtt(30_000_000);
    let n = judge(&g).expect("named on the 30 ms path");
    assert_eq!(n.rtt_ns, Some(30_000_000));
    assert!(
        n.evidence()
            .contains("70.6 ms after their first (mean; max 70.6 ms; 30.0 ms of it the path's round trip, TCP_INFO min_rtt), 99 %"),
        "{}",
        n.evidence()
    );
    // A server with TCP_NODELAY pausing 100 ms between its sends on the same path:
    // 70 ms beyond the round trip, still not the timer; nor is a 200 ms pause.
    for pause in [100.0, 200.0] {
        let mut p = gaps(40, pause + 31.0, 40, pause, Some(40));
        p.held_rtt(30_000_000);
        assert_eq!(judge(&p), None, "{pause} ms pause");
    }
    // Loopback's round trip (20 us) changes nothing and is not said.
    let mut l = gaps(47, 42.1, 46, 40.6, Some(49));
    l.held_rtt(20_000);
    let n = judge(&l).expect("named");
    assert!(!n.evidence().contains("round trip"), "{}", n.evidence());
    let mut far = gaps(47, 42.1, 46, 40.6, Some(49));
    far.held_rtt(90_000_000);
    assert_eq!(
        judge(&far),
        None,
        "a gap shorter than the round trip is no hold"
    );
}

fn step(users: usize, g: Option<ReplyGaps>) -> StepResult {
    StepResult {
        users,
        measured_s: 1.0,
        completed: g.map_or(0, |g| g.replies),
        tps: 0.0,
        response: Default::default(),
        errors: Default::default(),
        server_cpu_cores: None,
        threads: None,
        tcp: None,
        accept_queue_max: None,
        accept_queue_mean: None,
        listener_drops: None,
        drop_reasons: None,
        load_sent_s: None,
        load_end_s: None,
        per_thread: vec![],
        tree_sampling: None,
        http2: None,
        reply_gaps: g,
        reconnect_backoffs: 0,
    }
}

#[test]
fn a_ramp_names_the_steps_held_and_the_worst_ones_figures() {
    let plan = tpslab_plan::ramp::RampPlan {
        proto: tpslab_plan::proto::Proto::Tcp,
        target: "127.0.0.1:1".parse().unwrap(),
        steps: vec![1, 2, 4],
        step: std::time::Duration::from_secs(1),
        warmup: std::time::Duration::ZERO,
        think: std::time::Duration::ZERO,
        timeout: std::time::Duration::from_secs(1),
        request: vec![],
        framing: tpslab_plan::framing::Framing::Length,
        seq_field: None,
        knee_gain: 0.2,
        builtin_server: None,
        server_pid: None,
        sample_interval: std::time::Duration::from_millis(10),
        load_threads: 1,
        http2_connections: 0,
    };
    let mut rec = RampRecord {
        plan,
        steps: vec![
            step(1, Some(gaps(47, 42.1, 46, 40.6, Some(47)))),
            step(2, Some(gaps(90, 44.0, 60, 40.9, Some(70)))),
            step(4, Some(gaps(1000, 4.0, 0, 0.0, Some(0)))),
        ],
        interrupted: false,
        server_cpus: None,
        listener: None,
        generator_peak_rss_kib: None,
        load_sent_s: None,
        overrun: None,
        http2: None,
    };
    let line = ramp_line(&rec).expect("named");
    assert!(
        line.starts_with("Nagle x delayed ACK at 1, 2 user(s): "),
        "{line}"
    );
    assert!(
        line.contains("at 1 user(s) 46 of 47 small replies"),
        "{line}"
    );
    assert!(line.contains("Fix: set TCP_NODELAY"), "{line}");
    // It is among the ramp's findings.
    let a = crate::ramp::analyse(&rec, 2);
    assert!(a.lines.iter().any(|l| l == &line), "{:?}", a.lines);
    // No step held (or an older record without gaps): nothing said.
    rec.steps.truncate(1);
    rec.steps[0].reply_gaps = Some(gaps(47, 0.3, 0, 0.0, Some(0)));
    assert_eq!(ramp_line(&rec), None);
    rec.steps[0].reply_gaps = None;
    assert_eq!(ramp_line(&rec), None);
    let a = crate::ramp::analyse(&rec, 2);
    assert!(
        !a.lines.iter().any(|l| l.contains("Nagle")),
        "{:?}",
        a.lines
    );
}
