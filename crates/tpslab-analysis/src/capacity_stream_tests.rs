use super::*;
use std::time::Duration;
use tpslab_plan::capacity::Slo;

fn threads(run: f64, wait: f64) -> Option<ThreadFacts> {
    Some(ThreadFacts {
        processes: 1,
        threads: 4,
        busiest_run_pct: run,
        busiest_wait_pct: wait,
        all_wanted_pct: run + wait,
        cpus: Some(2),
    })
}

/// p99 broke (1 % of requests can break it) and errors<0.1 % did too.
fn p99_and_errors() -> Broken {
    Broken {
        latency: true,
        failures: true,
        share: 0.001,
        failure_share: 0.001,
    }
}

fn p99_only() -> Broken {
    Broken {
        latency: true,
        failures: false,
        share: 0.01,
        failure_share: 1.0,
    }
}

#[test]
fn each_rule_is_a_row() {
    // 1,000 connects, 10,000 requests.
    let base = StreamFacts {
        listen_drops: Some(0),
        namespace_drops: Some(0),
        accept_queue_max: Some(3),
        backlog: Some(128),
        connects: 1000,
        requests: 10_000,
        broken: p99_and_errors(),
        threads: threads(60.0, 5.0),
        ..Default::default()
    };
    let rows: Vec<(&str, StreamFacts, Case, &str)> = vec![
        (
            "drops at the target's listen socket",
            StreamFacts {
                listen_drops: Some(40),
                namespace_drops: Some(41),
                accept_queue_max: Some(5),
                backlog: Some(4),
                refused: 3,
                ..base.clone()
            },
            Case::AcceptQueueFull,
            "the server's accept queue: 40 connection requests dropped at the listen socket on the target's port (up to 5 of its backlog 4 waiting for accept)",
        ),
        (
            // The namespace's counters alone: named as the namespace's, not the target's.
            "drops in the namespace, the socket's own not read",
            StreamFacts {
                listen_drops: None,
                namespace_drops: Some(40),
                accept_queue_max: None,
                ..base.clone()
            },
            Case::AcceptQueueFull,
            "an accept queue of the server's network namespace: 40 connection requests dropped at its listen sockets (any of them; the target's own not read)",
        ),
        (
            // 1 connect held back of 1,000 is 0.1 %: a p99 needs 1 %.
            "one drop against a p99 objective",
            StreamFacts {
                listen_drops: Some(1),
                broken: p99_only(),
                ..base.clone()
            },
            Case::Unexplained,
            "none named",
        ),
        (
            // The socket's own count rules: the namespace's drops were another socket's.
            "drops at another listen socket of the namespace",
            StreamFacts {
                namespace_drops: Some(500),
                ..base.clone()
            },
            Case::Unexplained,
            "none named",
        ),
        (
            "refused",
            StreamFacts {
                refused: 20,
                reset: 1,
                ..base.clone()
            },
            Case::ConnectionsRefused,
            "connections refused (20)",
        ),
        (
            // 2 of 10,000 is 0.02 %: under errors<0.1 %.
            "a few refused",
            StreamFacts {
                refused: 2,
                ..base.clone()
            },
            Case::Unexplained,
            "none named",
        ),
        (
            // max broke (one request breaks it) and errors<1 %: one reset of 10,000 is
            // not enough to break errors, and a failed request cannot break max.
            "one reset beside a broken max",
            StreamFacts {
                reset: 1,
                broken: Broken {
                    latency: true,
                    failures: true,
                    share: 0.0,
                    failure_share: 0.01,
                },
                ..base.clone()
            },
            Case::Unexplained,
            "none named",
        ),
        (
            "reset",
            StreamFacts {
                reset: 70,
                ..base.clone()
            },
            Case::ConnectionsReset,
            "requests reset by the server (70: connections reset, or HTTP/2 streams reset with RST_STREAM)",
        ),
        (
            // Resets do not make latency: a p99 failure is not theirs, whatever their count.
            "resets when only latency broke",
            StreamFacts {
                reset: 5000,
                broken: p99_only(),
                ..base.clone()
            },
            Case::Unexplained,
            "none named",
        ),
        (
            "resets when only latency broke, with saturated threads",
            StreamFacts {
                reset: 5000,
                broken: p99_only(),
                threads: threads(70.0, 25.0),
                ..base.clone()
            },
            Case::ServerSaturated,
            "the server's threads: saturated",
        ),
        (
            "a thread always wanting a CPU",
            StreamFacts {
                threads: threads(70.0, 25.0),
                ..base.clone()
            },
            Case::ServerSaturated,
            "the server's threads: saturated (its busiest thread on a CPU 70 % of the window, waiting for one 25 %)",
        ),
        (
            // A thread per connection: none busy alone, both CPUs' worth together.
            "many threads together at every CPU",
            StreamFacts {
                threads: Some(ThreadFacts {
                    processes: 1,
                    threads: 10,
                    busiest_run_pct: 15.0,
                    busiest_wait_pct: 5.0,
                    all_wanted_pct: 190.0,
                    cpus: Some(2),
                }),
                ..base.clone()
            },
            Case::ServerSaturated,
            "the server's threads: saturated (together on or waiting for a CPU 190 % of the window: its 2 CPUs' worth)",
        ),
        (
            // nginx: an idle master and two workers at a CPU each.
            "worker processes together at every CPU",
            StreamFacts {
                threads: Some(ThreadFacts {
                    processes: 3,
                    threads: 3,
                    busiest_run_pct: 80.0,
                    busiest_wait_pct: 5.0,
                    all_wanted_pct: 185.0,
                    cpus: Some(2),
                }),
                ..base.clone()
            },
            Case::ServerSaturated,
            "the server's threads (3 processes): saturated (together on or waiting for a CPU 185 %",
        ),
        (
            // Each under half a CPU, but together more: not waiting, not saturated.
            "many threads, half the CPUs",
            StreamFacts {
                threads: Some(ThreadFacts {
                    processes: 1,
                    threads: 10,
                    busiest_run_pct: 15.0,
                    busiest_wait_pct: 5.0,
                    all_wanted_pct: 120.0,
                    cpus: Some(4),
                }),
                ..base.clone()
            },
            Case::Unexplained,
            "none named",
        ),
        (
            "threads mostly off CPU",
            StreamFacts {
                threads: threads(10.0, 2.0),
                ..base.clone()
            },
            Case::ServerWaiting,
            "the server's threads: waiting, not on a CPU (its busiest thread wanted one 12 %",
        ),
        (
            // HTTP/3: 50 datagrams of 30,000 dropped, each holding a request of 10,000
            // back: 0.5 % against a p99-and-errors share of 0.1 %, before the threads.
            "drops at the server's QUIC socket",
            StreamFacts {
                http3: true,
                listen_drops: None,
                namespace_drops: None,
                accept_queue_max: None,
                quic_socket: Some(QuicSocket {
                    dropped: 50,
                    sent: 30_000,
                    headline: "quic-go asks for 2 MiB, rmem_max allows 4 KiB".into(),
                }),
                threads: threads(70.0, 25.0),
                ..base.clone()
            },
            Case::QuicReceiveBuffer,
            "the server's QUIC socket: 50 of 30000 client datagrams dropped at its receive buffer (quic-go asks for 2 MiB, rmem_max allows 4 KiB)",
        ),
        (
            // 5 of 10,000 requests held back is 0.05 %: a p99 needs 1 %.
            "a few drops at the QUIC socket against a p99",
            StreamFacts {
                http3: true,
                quic_socket: Some(QuicSocket {
                    dropped: 5,
                    sent: 30_000,
                    headline: String::new(),
                }),
                broken: p99_only(),
                ..base.clone()
            },
            Case::Unexplained,
            "none named",
        ),
        (
            // Only errors broke: a dropped datagram is sent again, it fails no request.
            "many drops at the QUIC socket when only errors broke",
            StreamFacts {
                http3: true,
                quic_socket: Some(QuicSocket {
                    dropped: 5000,
                    sent: 30_000,
                    headline: String::new(),
                }),
                broken: Broken {
                    latency: false,
                    ..p99_and_errors()
                },
                ..base.clone()
            },
            Case::Unexplained,
            "none named",
        ),
        ("nothing to name", base.clone(), Case::Unexplained, "none named"),
        (
            "drops not read and no PID: nothing to name",
            StreamFacts {
                listen_drops: None,
                namespace_drops: None,
                threads: None,
                ..base.clone()
            },
            Case::Unexplained,
            "none named",
        ),
    ];
    for (what, f, case, layer) in rows {
        let d = diagnose(&f);
        assert_eq!(d.case, case, "{what}: {}", d.headline);
        assert!(d.layer.starts_with(layer), "{what}: {}", d.layer);
    }
}

#[test]
fn counts_too_few_to_count_are_said_so() {
    let d = diagnose(&StreamFacts {
        listen_drops: Some(1),
        connects: 1000,
        requests: 10_000,
        reset: 3,
        broken: p99_only(),
        threads: threads(60.0, 5.0),
        ..Default::default()
    });
    assert_eq!(d.case, Case::Unexplained);
    assert_eq!(
        d.headline,
        "At the first failing rate, no rule named a layer: 1 of 1000 (0.10 %) connects held back by drops at the accept queue, too few to break the objective; 3 of 10000 (0.03 %) requests refused or reset, while only latency bounds broke (a failed request has no latency); the server's threads neither saturated nor mostly waiting."
    );
}

#[test]
fn a_missing_count_says_which_conclusion_needs_it() {
    let d = diagnose(&StreamFacts {
        listen_drops: None,
        threads: None,
        ..Default::default()
    });
    assert_eq!(d.explain_notes.len(), 2);
    assert!(d.explain_notes[0]
        .contains("whether connection requests were dropped at the listen socket needs them"));
    assert!(d.explain_notes[1].contains("whether they were saturated or waiting needs them"));
    // Read: no note, and the counts are evidence.
    let d = diagnose(&StreamFacts {
        listen_drops: Some(0),
        threads: threads(95.0, 0.0),
        ..Default::default()
    });
    assert!(d.explain_notes.is_empty());
    assert_eq!(d.case, Case::ServerSaturated);
    assert_eq!(d.evidence.len(), 3);
    assert!(d
        .headline
        .starts_with("At the first failing rate, what gave: the server's threads: saturated"));
}

#[test]
fn what_broke_and_how_few_requests_break_it() {
    let slo = |o: Vec<Objective>| Slo { objectives: o };
    let p99 = Objective::Latency {
        quantile: Quantile::P99,
        limit: Duration::from_millis(20),
        inclusive: false,
    };
    let errors = Objective::Errors {
        limit_pct: 0.1,
        inclusive: false,
    };
    let rate = Objective::Rate {
        min_pct: 99.0,
        inclusive: true,
    };
    let f = StepFigures {
        rate_pps: 1000.0,
        answered_pps: 1000.0,
        latency_ns: Some([1_000_000, 2_000_000, 30_000_000, 40_000_000, 50_000_000]),
        errors_pct: 0.0,
        gen_valid: true,
        ..Default::default()
    };
    // p99 31 ms > 20 ms: latency broke, 1 % of requests break it.
    let b = broken(&slo(vec![p99, errors, rate]), &f);
    assert_eq!(
        b,
        Broken {
            latency: true,
            failures: false,
            share: 0.01,
            failure_share: 1.0,
        }
    );
    // Errors 0.5 % and 90 % of the rate too: the smallest share, 0.1 %.
    let f2 = StepFigures {
        errors_pct: 0.5,
        answered_pps: 900.0,
        ..f.clone()
    };
    let b = broken(&slo(vec![p99, errors, rate]), &f2);
    assert!(b.latency && b.failures, "{b:?}");
    assert!((b.share - 0.001).abs() < 1e-12, "{b:?}");
    assert!((b.failure_share - 0.001).abs() < 1e-12, "{b:?}");
    // The rate alone: 1 % short breaks rate>=99 %.
    let b = broken(
        &slo(vec![rate]),
        &StepFigures {
            answered_pps: 900.0,
            ..f.clone()
        },
    );
    assert_eq!((b.latency, b.failures), (false, true), "{b:?}");
    assert!((b.share - 0.01).abs() < 1e-12, "{b:?}");
}

/// HTTP/3: no accept queue is asked for; a socket not judged is said so, with what it
/// would have told.
#[test]
fn an_http3_step_names_its_quic_socket_not_an_accept_queue() {
    let f = StreamFacts {
        http3: true,
        connects: 4,
        requests: 1000,
        broken: p99_only(),
        ..Default::default()
    };
    let d = diagnose(&f);
    assert_eq!(d.case, Case::Unexplained);
    assert!(
        d.headline.contains("the server's QUIC socket not judged"),
        "{}",
        d.headline
    );
    assert!(!d.headline.contains("accept queue"), "{}", d.headline);
    let notes = d.explain_notes.join("\n");
    assert!(notes.contains("QUIC socket was not judged"), "{notes}");
    assert!(!notes.contains("accept queue"), "{notes}");
    let judged = diagnose(&StreamFacts {
        quic_socket: Some(QuicSocket {
            dropped: 0,
            sent: 3000,
            headline: String::new(),
        }),
        ..f
    });
    assert!(
        judged
            .headline
            .contains("no client datagram dropped at the server's QUIC socket"),
        "{}",
        judged.headline
    );
    assert!(judged
        .evidence
        .iter()
        .any(|e| e.text.contains("0 of 3000 client datagrams dropped")));
}
