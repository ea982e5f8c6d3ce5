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
        "tpslab's load does not set TCP_QUICKACK",
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
        quickack: None,
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
        connections: tpslab_plan::ramp::UserConnections::PerUser,
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
        http3: None,
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

/// A re-timing of `n` small replies with the client acknowledging at once, each
/// `gap_ms` from its first byte to its last, `rt_ms` in all, over `secs`.
fn retime(n: u64, rt_ms: f64, gap_ms: f64, secs: f64) -> QuickackRetime {
    let mut q = QuickackRetime {
        requests: n,
        duration_ns: (secs * 1e9) as u64,
        ..Default::default()
    };
    for _ in 0..n {
        q.add((rt_ms * 1e6) as u64, Some((gap_ms * 1e6) as u64), 180);
    }
    q
}

/// A step's `reply_gaps` of a real run (`ramp http URL --users 1..1 --step-duration
/// 1500ms --warmup 300ms`, loopback, 2026-12-07): python3's `http.server` writing
/// headers and body in two sends, re-timed with TCP_QUICKACK.
const REAL_NAGLE: &str = r#"{"replies": 34, "response_ns": 1515709720, "small": 34, "held": 34, "held_gap_ns": 1501332786, "held_gap_max_ns": 47702483, "delayed_acks": 34, "held_rtt_min_ns": 8000, "quickack": {"requests": 50, "replies": 50, "failed": 0, "duration_ns": 55852018, "response_ns": 55843296, "small": 50, "gap_ns": 46388854, "held": 0, "held_gap_ns": 0, "delayed_acks": 0}}"#;

/// The same run against a server with TCP_NODELAY sleeping 45 ms between its headers and
/// its body.
const REAL_PAUSE: &str = r#"{"replies": 32, "response_ns": 1513603808, "small": 32, "held": 32, "held_gap_ns": 1502660080, "held_gap_max_ns": 52546007, "delayed_acks": 30, "held_rtt_min_ns": 9000, "quickack": {"requests": 43, "replies": 42, "failed": 0, "duration_ns": 1971925487, "response_ns": 1971679271, "small": 42, "gap_ns": 1957100951, "held": 42, "held_gap_ns": 1957100951, "delayed_acks": 0}}"#;

fn real(text: &str) -> ReplyGaps {
    serde_json::from_str(text).unwrap()
}

#[test]
fn holds_that_go_with_the_client_acknowledging_at_once_confirm_nagle() {
    let g = real(REAL_NAGLE);
    assert_eq!(retimed(&g.quickack.unwrap()), Retimed::Gone);
    let n = judge(&g).expect("confirmed");
    assert_eq!(paused(&g), None);
    let e = n.evidence();
    assert!(e.contains("; confirmed: with the client acknowledging at once (TCP_QUICKACK set before each read, 50 request(s) in 0.06 s on one new connection, at most 50 or 2 s) the stall went from 44.2 ms to 0.9 ms (a small reply's first-to-last-byte gap, mean; 0 of 50 re-timed replies held)"), "{e}");
    // Four of 50 held (under a tenth): still gone.
    let mut q = retime(46, 0.25, 0.05, 0.2);
    for _ in 0..4 {
        q.add(41_000_000, Some(40_000_000), 180);
    }
    assert_eq!(retimed(&q), Retimed::Gone);
}

#[test]
fn holds_that_stay_with_the_client_acknowledging_at_once_are_a_pausing_server() {
    // At the delayed-ACK timer with a delayed ACK per hold: it looks like Nagle, and
    // without its re-timing is named so (as the main branch did).
    let mut g = real(REAL_PAUSE);
    assert!(looks_like(&g).is_some());
    let q = g.quickack.take().unwrap();
    assert!(judge(&g).is_some(), "named without a re-timing");
    g.quickack = Some(q);
    assert_eq!(retimed(&q), Retimed::Stayed);
    assert_eq!(judge(&g), None);
    let p = paused(&g).expect("a pausing server");
    let line = p.line_at(" at 1 user(s)");
    assert!(line.starts_with("Replies held between the server's sends at 1 user(s), not Nagle x delayed ACK: 32 of 32 small replies"), "{line}");
    assert!(line.contains("with the client acknowledging at once (TCP_QUICKACK set before each read, 43 request(s) in 1.97 s on one new connection, at most 50 or 2 s) the stall stayed: 47.0 ms -> 46.6 ms (a small reply's first-to-last-byte gap, mean; 42 of 42 re-timed replies held)"), "{line}");
    assert!(!line.contains("Fix: set TCP_NODELAY"), "{line}");
}

#[test]
fn a_re_timing_with_too_few_replies_says_nothing_either_way() {
    // The server failed the re-timed requests (2 replies, 48 failed).
    let mut q = retime(2, 0.3, 0.05, 0.1);
    q.requests = 50;
    q.failed = 48;
    assert_eq!(retimed(&q), Retimed::TooFew);
    let mut g = gaps(47, 42.1, 46, 40.6, Some(49));
    g.quickack = Some(q);
    let n = judge(&g).expect("named by its gaps");
    assert_eq!(paused(&g), None);
    assert!(n.evidence().contains("; not confirmed: the re-timing with the client acknowledging at once (TCP_QUICKACK set before each read, 50 request(s) in 0.10 s on one new connection, at most 50 or 2 s) had 2 small replies, 48 failed"), "{}", n.evidence());
}

#[test]
fn a_ramp_says_which_steps_paused_instead_of_naming_nagle() {
    let plan = tpslab_plan::ramp::RampPlan {
        proto: tpslab_plan::proto::Proto::Tcp,
        target: "127.0.0.1:1".parse().unwrap(),
        steps: vec![1, 2],
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
        connections: tpslab_plan::ramp::UserConnections::PerUser,
    };
    let q = real(REAL_PAUSE).quickack.unwrap();
    let with = |mut g: ReplyGaps| {
        g.quickack = Some(q);
        Some(g)
    };
    let rec = RampRecord {
        plan,
        steps: vec![
            step(1, with(gaps(32, 47.27, 32, 46.3, Some(32)))),
            step(2, with(gaps(64, 47.0, 64, 46.5, Some(60)))),
        ],
        interrupted: false,
        server_cpus: None,
        listener: None,
        generator_peak_rss_kib: None,
        load_sent_s: None,
        overrun: None,
        http2: None,
        http3: None,
    };
    assert_eq!(ramp_line(&rec), None);
    let line = ramp_pause_line(&rec).expect("said");
    assert!(
        line.starts_with(
            "Replies held between the server's sends at 1, 2 user(s), not Nagle x delayed ACK: "
        ),
        "{line}"
    );
    assert!(line.ends_with("[figures at 2 user(s)]"), "{line}");
}
