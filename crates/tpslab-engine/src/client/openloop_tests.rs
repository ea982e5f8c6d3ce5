//! The open loop's tests: each connection's phase and interval on its schedule, and late
//! sends told apart from the generator's own lag.

use super::*;
use tpslab_record::http_counts::ErrorKinds;

#[test]
fn each_connection_has_its_phase_and_interval() {
    let stop = AtomicBool::new(false);
    // 1000/s on 4 connections for 1 s: every 4 ms each, 1 ms apart in turn.
    let s = Schedule::new(1_000, 1000.0, 4, 1_000_000_000, 1_000_000, &stop);
    assert_eq!(s.interval, 4_000_000);
    let firsts: Vec<u64> = (0..4).map(|j| s.first_due(j)).collect();
    assert_eq!(firsts, vec![1_000, 1_001_000, 2_001_000, 3_001_000]);
    assert_eq!(s.next_due(firsts[1], 0), 5_001_000);
    assert_eq!(s.intended(4), 1000);
    // More connections than requests in the plan: the late ones send nothing.
    let s = Schedule::new(0, 10.0, 50, 1_000_000_000, 1_000_000, &stop);
    assert_eq!(s.intended(50), 10);
    // A rate that does not divide a second: the count is the plan's, rounded up.
    let s = Schedule::new(0, 3.0, 2, 1_000_000_000, 1_000_000, &stop);
    assert_eq!(s.intended(2), 3);
}

#[test]
fn late_sends_are_told_apart_from_the_generators_own_lag() {
    let stop = AtomicBool::new(false);
    let s = Schedule::new(0, 1000.0, 1, 1_000_000_000, 1_000_000, &stop);
    let mut l = s.local();
    // On time.
    s.sent(&mut l, 10_000_000, 9_000_000, 10_000_100, 10);
    // Late because its previous reply came late (ready at 21.9 ms): not the generator's.
    s.sent(&mut l, 20_000_000, 21_900_000, 22_000_000, 10);
    // Late with its connection idle since before its time: the generator's own.
    s.sent(&mut l, 30_000_000, 25_000_000, 33_000_000, 10);
    assert_eq!((l.sent, l.late, l.max_lag_ns), (3, 2, 3_000_000));
    assert_eq!((l.behind, l.behind_max_ns), (1, 3_000_000));
    assert_eq!(l.bytes_out, 30);
    let r = |status| Reply {
        status,
        ..Reply::ok(1)
    };
    s.answered(
        &mut l,
        10_000_000,
        10_000_100,
        10_500_000,
        12_000_000,
        &r(200),
    );
    s.answered(
        &mut l,
        20_000_000,
        22_000_000,
        22_100_000,
        23_000_000,
        &r(503),
    );
    assert_eq!((l.status.s2xx, l.status.s5xx), (1, 1));
    assert_eq!((l.gaps.replies, l.gaps.small, l.gaps.held), (2, 2, 0));
    // A reply whose last byte came 40 ms after its first: held (a 5xx is a reply too);
    // one whose first byte was not dated: no gap.
    let mut l2 = s.local();
    s.answered(
        &mut l2,
        40_000_000,
        40_000_000,
        41_000_000,
        81_000_000,
        &r(503),
    );
    s.answered(&mut l2, 90_000_000, 90_000_000, 0, 91_000_000, &r(200));
    assert_eq!((l2.gaps.replies, l2.gaps.small, l2.gaps.held), (2, 1, 1));
    assert_eq!(l2.gaps.held_gap_ns, 40_000_000);
    assert_eq!(l2.gaps.response_ns, 41_000_000 + 1_000_000);
    // Corrected from the intended time, uncorrected from the send.
    assert_eq!(l.corrected.max(), l.corrected.highest_equivalent(3_000_000));
    assert_eq!(
        l.uncorrected.max(),
        l.uncorrected.highest_equivalent(1_999_900)
    );
    for (k, slot) in [
        ("connect: connection refused", 0),
        ("connection reset", 1),
        ("broken pipe", 1),
        ("timeout", 2),
        ("connect: timeout", 2),
        ("closed by peer", 3),
        ("stream reset (RST_STREAM REFUSED_STREAM)", 1),
        (
            "http2: a frame of 20000 bytes, over SETTINGS_MAX_FRAME_SIZE 16384",
            4,
        ),
        ("http: invalid HTTP version", 4),
        ("Permission denied (os error 13)", 5),
    ] {
        let mut e = ErrorKinds::default();
        *error_slot(&mut e, k) += 1;
        let v = [e.refused, e.reset, e.timeout, e.closed, e.protocol, e.other];
        assert_eq!(v.iter().position(|&x| x == 1), Some(slot), "{k}");
    }
}

/// A reply that says its request failed and has no status code (a Redis error reply:
/// `capacity tcp --protocol redis` against a server wanting AUTH) is a failed request, not
/// an answer; an HTTP 5xx stays an answer counted in its class.
#[test]
fn an_error_reply_without_a_status_is_a_failed_request() {
    let stop = AtomicBool::new(false);
    let s = Schedule::new(0, 1000.0, 1, 1_000_000_000, 1_000_000, &stop);
    let mut l = s.local();
    s.sent(&mut l, 10_000_000, 9_000_000, 10_000_100, 10);
    s.sent(&mut l, 11_000_000, 10_500_000, 11_000_100, 10);
    let noauth = Reply {
        failed: Some("redis: error reply NOAUTH"),
        ..Reply::ok(40)
    };
    s.answered(
        &mut l, 10_000_000, 10_000_100, 10_400_000, 10_500_000, &noauth,
    );
    let http503 = Reply {
        failed: Some("http 5xx"),
        status: 503,
        ..Reply::ok(40)
    };
    s.answered(
        &mut l, 11_000_000, 11_000_100, 11_400_000, 11_500_000, &http503,
    );
    assert_eq!(l.errors.other, 1, "the Redis error is a failed request");
    assert_eq!((l.status.s5xx, l.status.other), (1, 0), "the 503 an answer");
    assert_eq!(l.corrected.len(), 1, "one response time: the 503's");
}
