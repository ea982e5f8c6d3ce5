//! Tests of the verdict: rule order, the cases that are not about the socket buffer.
use super::*;

#[test]
fn invalid_generator_wins_over_everything() {
    let mut f = s1();
    f.gen_valid = false;
    f.gen_reasons = vec!["the generator failed to send 10 datagrams (ENOBUFS x10)".into()];
    let d = diagnose(&f, None);
    assert_eq!(d.case, Case::GeneratorInvalid);
    assert!(d.headline.contains("NOT valid"));
    assert!(d.evidence.iter().any(|e| e.text.contains("ENOBUFS")));
    assert!(d.fix.is_none());
}

#[test]
fn no_listener_is_named_even_when_the_generator_fell_behind() {
    // Beside stress-ng --cpu 2: 36 of 600 datagrams left late, 579 met no socket, 21
    // failed with ECONNREFUSED.
    let f = Facts {
        gen_valid: false,
        gen_reasons: vec!["36 of 600 datagrams (6.00 %) left more than 5000 us after their intended time (allowed: 1 %)".into()],
        attempted: 600,
        no_ports: 579,
        send_failed: 21,
        unattributed: Some(0),
        lost_total: 600,
        port: 9999,
        ..Default::default()
    };
    let d = diagnose(&f, None);
    assert_eq!(d.case, Case::NoListener);
    assert!(d
        .evidence
        .iter()
        .any(|e| e.text.contains("fell behind too")));
}

#[test]
fn a_server_below_the_mean_rate_at_full_cpu_is_too_slow_whatever_the_queue_shape() {
    // Beside stress-ng --cpu 2: 100 k pps offered steadily to a server with 20 us of work
    // per datagram; it read 9395/s while datagrams waited, its queue emptied in 55 % of
    // samples (it ran in slices), and per CPU-second it used it read about 40 k.
    let mut f = s1();
    f.burst = 1;
    f.burst_interval_s = 1e-5;
    f.rxq_share_full = 0.30;
    f.rxq_share_low = 0.55;
    f.drain_pps = Some(9395.0);
    f.capacity_pps = Some(9395.0);
    f.cpu_capacity_pps = Some(40_000.0);
    assert_eq!(diagnose(&f, None).case, Case::AppTooSlow);
    // Java beside the same hog: bursts of 1000 every 50 ms into a 92-datagram buffer,
    // 9.6 % read, the queue empty in 87 % of samples, a drain of 5310/s read while it held
    // datagrams (all there was), 24 k reads per CPU-second against 20 k offered: bursts.
    let mut j = s1();
    j.offered_pps = 20_000.0;
    j.burst = 1000;
    j.rxq_share_full = 0.08;
    j.rxq_share_low = 0.87;
    j.drain_pps = Some(5310.0);
    j.capacity_pps = Some(5310.0);
    j.cpu_capacity_pps = Some(24_000.0);
    assert_eq!(diagnose(&j, None).case, Case::SocketBufferBursts);
    // Even with its CPU time inflated by threads that never read (12 k per CPU-second),
    // a queue empty in 87 % of samples kept up with the mean.
    j.cpu_capacity_pps = Some(12_000.0);
    assert_eq!(diagnose(&j, None).case, Case::SocketBufferBursts);
}

#[test]
fn no_listener_and_no_loss_are_said_plainly() {
    let mut f = Facts {
        gen_valid: true,
        attempted: 600,
        no_ports: 590,
        send_failed: 10,
        unattributed: Some(0),
        lost_total: 600,
        port: 9999,
        ..Default::default()
    };
    assert_eq!(diagnose(&f, None).case, Case::NoListener);
    f = Facts {
        gen_valid: true,
        attempted: 1000,
        delivered: 1000,
        unattributed: Some(0),
        ..Default::default()
    };
    let d = diagnose(&f, None);
    assert_eq!(d.case, Case::NoLoss);
    assert!(d.headline.starts_with("No loss"));
    assert!(d.fix.is_none());
}

#[test]
fn a_queue_that_never_drains_is_too_slow_even_without_cpu_figures() {
    // A foreign server watched by --port only: no CPU, no capacity.
    let mut f = s1();
    f.ours = false;
    f.capacity_pps = None;
    f.server_cpu_mean_pct = 0.0;
    f.rxq_share_full = 0.9;
    f.rxq_share_low = 0.02;
    let d = diagnose(&f, None);
    assert_eq!(d.case, Case::AppTooSlow);
    assert!(d
        .evidence
        .iter()
        .any(|e| e.text.contains("CPU not measured")));
}

#[test]
fn replies_or_partial_noports_are_not_no_listener() {
    let f = Facts {
        gen_valid: true,
        attempted: 1000,
        no_ports: 400,
        delivered: 0,
        replies_read: 600,
        unattributed: None,
        lost_total: 400,
        ..Default::default()
    };
    assert_ne!(diagnose(&f, None).case, Case::NoListener);
    assert_eq!(diagnose(&f, None).case, Case::ListenerGone);
}

#[test]
fn unknown_server_side_is_not_no_loss() {
    // Replies missing while the server's socket was not seen: say so, never "no loss".
    let f = Facts {
        gen_valid: true,
        replies: true,
        attempted: 1000,
        unattributed: None,
        reply_unattributed: None,
        window_loss_pct: Some(50.0),
        ..Default::default()
    };
    let d = diagnose(&f, None);
    assert_eq!(d.case, Case::Unexplained);
    assert!(
        d.evidence[1].text.contains("not observable"),
        "{:?}",
        d.evidence
    );
}

#[test]
fn read_but_unanswered_is_the_application() {
    let f = Facts {
        gen_valid: true,
        replies: true,
        attempted: 1000,
        delivered: 1000,
        not_answered: 300,
        unattributed: Some(0),
        reply_unattributed: Some(0),
        lost_total: 300,
        window_loss_pct: Some(30.0),
        replies_read: 700,
        ..Default::default()
    };
    assert_eq!(diagnose(&f, None).case, Case::NotAnswered);
}

#[test]
fn softnet_drops_recommend_the_backlog_sysctl() {
    let f = Facts {
        gen_valid: true,
        attempted: 1_000_000,
        delivered: 900_000,
        softnet_drops: 100_000,
        unattributed: Some(0),
        lost_total: 100_000,
        burst: 64,
        netdev_max_backlog: Some(100),
        ..Default::default()
    };
    let d = diagnose(&f, None);
    assert_eq!(d.case, Case::SoftnetBacklog);
    let fix = d.fix.unwrap();
    assert_eq!(
        fix.sysctls,
        vec![(
            "net.core.netdev_max_backlog".to_string(),
            "1024".to_string()
        )]
    );
    assert!(d.recommendations[0]
        .lines
        .iter()
        .any(|l| l == "sysctl -w net.core.netdev_max_backlog=1024"));
}

#[test]
fn buffer_notes_explain_granted_and_charged_sizes() {
    let p = TruesizeProbe {
        size_bytes: 1024,
        queued: 10,
        rx_queue_bytes: 23040,
        granted_bytes: 212992,
        full_queued: 92,
        full_rx_queue_bytes: 211968,
    };
    let d = diagnose(&s1(), Some(&p));
    let notes = d.buffer_notes.join("\n");
    assert!(notes.contains("charged 2304 bytes"), "{notes}");
    assert!(notes.contains("213312 = 303 x 704"), "{notes}");
    assert!(notes.contains("stays at or below the limit"), "{notes}");
}

/// The rule order is the policy: every case has one rule, in this order, and the last
/// holds for any facts (so every run gets a case).
#[test]
fn the_rules_are_one_table_in_priority_order() {
    let order: Vec<Case> = RULES.iter().map(|r| r.case).collect();
    assert_eq!(
        order,
        vec![
            Case::NoListener,
            Case::GeneratorInvalid,
            Case::Inconsistent,
            Case::NoLoss,
            Case::ReuseportImbalance,
            Case::AppTooSlow,
            Case::SocketBufferUnjudged,
            Case::SocketBufferBursts,
            Case::SoftnetBacklog,
            Case::NicDrops,
            Case::ListenerGone,
            Case::KernelDrop,
            Case::NotAnswered,
            Case::ReplySendFailed,
            Case::Unexplained,
        ]
    );
    assert!((RULES.last().unwrap().when)(&Facts::default()));
    assert!(RULES.iter().all(|r| !r.why_here.is_empty()));
}

/// Facts where several rules hold: the earlier one names the case.
#[test]
fn where_rules_overlap_the_earlier_one_wins() {
    let no_port = |f: Facts| Facts {
        no_ports: f.attempted,
        delivered: 0,
        replies_read: 0,
        socket_drops: 0,
        ..f
    };
    let off_schedule = |f: Facts| Facts {
        gen_valid: false,
        gen_reasons: vec!["late".into()],
        ..f
    };
    let inconsistent = |f: Facts| Facts {
        inconsistent: Some("InDatagrams rose by more than sent".into()),
        ..f
    };
    let blind = |f: Facts| Facts {
        ours: false,
        reads_unknown: Some("no process of the server was found on this host".into()),
        ..f
    };
    let softnet_heavier = |f: Facts| Facts {
        softnet_drops: f.socket_drops + 1,
        ..f
    };
    let cases: Vec<(&str, Facts, Case)> = vec![
        ("S1 as measured", s1(), Case::SocketBufferBursts),
        (
            "nothing listens, generator late too",
            off_schedule(no_port(s1())),
            Case::NoListener,
        ),
        (
            "generator late and drops",
            off_schedule(s1()),
            Case::GeneratorInvalid,
        ),
        (
            "generator late and inconsistent",
            off_schedule(inconsistent(s1())),
            Case::GeneratorInvalid,
        ),
        (
            "inconsistent with drops",
            inconsistent(s1()),
            Case::Inconsistent,
        ),
        (
            "nothing listens but inconsistent",
            inconsistent(no_port(s1())),
            Case::Inconsistent,
        ),
        (
            "queue pinned and never drains",
            Facts {
                rxq_share_full: 0.9,
                rxq_share_low: 0.0,
                ..s1()
            },
            Case::AppTooSlow,
        ),
        (
            "S1's drops, the server's reads not counted",
            blind(s1()),
            Case::SocketBufferUnjudged,
        ),
        (
            "the issue's Python server without its reads: queue at the limit 77 % of samples, drained in 17 %",
            blind(Facts {
                rxq_share_full: 0.77,
                rxq_share_low: 0.17,
                offered_pps: 10_000.0,
                capacity_pps: None,
                cpu_capacity_pps: None,
                server_cpu_mean_pct: 0.0,
                backlog_cpu_pct: None,
                ..s1()
            }),
            Case::SocketBufferUnjudged,
        ),
        (
            "blind, but the queue never drains: too slow from the queue alone",
            blind(Facts {
                rxq_share_full: 0.9,
                rxq_share_low: 0.0,
                ..s1()
            }),
            Case::AppTooSlow,
        ),
        (
            "blind, a capacity estimate below the mean is not used",
            blind(Facts {
                capacity_pps: Some(1000.0),
                cpu_capacity_pps: Some(1000.0),
                ..s1()
            }),
            Case::SocketBufferUnjudged,
        ),
        (
            "the server exited 1.2 s into a 3 s run (the review's figures)",
            Facts {
                attempted: 35_000,
                no_ports: 23_331,
                socket_drops: 400,
                delivered: 11_269,
                replies_read: 11_269,
                lost_total: 23_731,
                ..s1()
            },
            Case::ListenerGone,
        ),
        (
            "softnet lost more",
            softnet_heavier(s1()),
            Case::SoftnetBacklog,
        ),
        (
            "no drops anywhere, all read",
            Facts {
                socket_drops: 0,
                lost_total: 0,
                delivered: 350_000,
                window_loss_pct: Some(0.0),
                reply_unattributed: Some(0),
                ..s1()
            },
            Case::NoLoss,
        ),
        (
            "loss no counter saw",
            Facts {
                socket_drops: 0,
                unattributed: Some(500),
                ..s1()
            },
            Case::Unexplained,
        ),
    ];
    for (what, f, want) in cases {
        assert_eq!(first_rule(&f).case, want, "{what}");
        assert_eq!(diagnose(&f, None).case, want, "{what}");
    }
}

/// Without the server's reads the verdict names the layer, says the cause is unknown and
/// why, recommends how to count the reads, and proposes no fix to verify.
#[test]
fn a_blind_verdict_says_what_it_cannot_tell() {
    let f = Facts {
        ours: false,
        reads_unknown: Some("no process of the server was found on this host".into()),
        ..s1()
    };
    let d = diagnose(&f, None);
    assert_eq!(d.case, Case::SocketBufferUnjudged);
    assert!(
        d.headline.contains("unknown without its read count"),
        "{}",
        d.headline
    );
    assert!(
        d.headline.contains("no process of the server was found"),
        "{}",
        d.headline
    );
    assert!(
        !d.headline.contains("keeps up on average"),
        "{}",
        d.headline
    );
    assert!(d.fix.is_none());
    let recs: Vec<&str> = d.recommendations.iter().map(|r| r.what.as_str()).collect();
    assert_eq!(recs.len(), 1, "{recs:?}");
    assert!(recs[0].contains("count the server's reads"), "{recs:?}");
    assert!(
        !recs.iter().any(|r| r.contains("do not add threads")),
        "{recs:?}"
    );
}
