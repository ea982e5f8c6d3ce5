//! Tests of what the verdict says beside its rule: nothing sized on reads derived from the
//! namespace's counters, pasteable lines naming the known PID and target, and drops in one
//! socket of an uneven SO_REUSEPORT group called an imbalance.
use super::*;

/// A queue that never drains is too slow whatever the reads, but without them counted on
/// the server's threads the drain is the namespace's counters (every other UDP socket
/// there included): no "drains about N" and no thread count sized on it. Before, a
/// non-root run against its own user's server said "it drains about 3000" and "5
/// processes" from those counters.
#[test]
fn too_slow_without_the_read_count_sizes_nothing_on_derived_reads() {
    let f = Facts {
        ours: false,
        runtime: Some(tpslab_record::runtime::Runtime::Python),
        reads_unknown: Some("PID 7's threads could not be counted: not root".into()),
        rxq_share_full: 0.95,
        rxq_share_low: 0.0,
        // From Udp: InDatagrams minus the generator's: not the server's own count.
        capacity_pps: Some(3000.0),
        drain_pps: Some(3000.0),
        offered_pps: 10_000.0,
        cpus: 8,
        ..s1()
    };
    let d = diagnose(&f, None);
    assert_eq!(d.case, Case::AppTooSlow);
    assert!(!d.headline.contains("drains about"), "{}", d.headline);
    assert!(
        d.headline.contains("its queue stayed at its limit"),
        "{}",
        d.headline
    );
    let recs: Vec<&str> = d.recommendations.iter().map(|r| r.what.as_str()).collect();
    assert!(
        !recs
            .iter()
            .any(|r| r.contains("SO_REUSEPORT") || r.contains("processes,")),
        "{recs:?}"
    );
    assert!(
        recs.iter()
            .any(|r| r.contains("measure what one thread drains")),
        "{recs:?}"
    );
    // Counted on its threads: the drain sizes the processes.
    let counted = diagnose(
        &Facts {
            reads_unknown: None,
            ..f
        },
        None,
    );
    assert!(
        counted.headline.contains("drains about 3000"),
        "{}",
        counted.headline
    );
    assert!(
        counted
            .recommendations
            .iter()
            .any(|r| r.what == "5 processes, each with its own SO_REUSEPORT socket"),
        "{:?}",
        counted.recommendations
    );
}

/// Lines the user pastes name what is known: the PID of a one-thread server in taskset
/// and chrt, the target and PID in the command that counts the reads.
#[test]
fn pasteable_lines_name_the_known_pid_and_target() {
    let slow = |single: bool| Facts {
        ours: false,
        rxq_share_full: 0.9,
        rxq_share_low: 0.0,
        pid: Some(4242),
        pid_single_thread: single,
        target: "127.0.0.1:9500".into(),
        ..s1()
    };
    let lines = |f: &Facts, what: &str| -> Vec<String> {
        let d = diagnose(f, None);
        d.recommendations
            .iter()
            .find(|r| r.what.contains(what))
            .unwrap_or_else(|| panic!("no '{what}' in {:?}", d.recommendations))
            .lines
            .clone()
    };
    let f = slow(true);
    assert_eq!(diagnose(&f, None).case, Case::AppTooSlow);
    assert_eq!(
        lines(&f, "pin each"),
        vec!["taskset -pc 1 4242".to_string()]
    );
    assert!(lines(&f, "SCHED_OTHER")[0].starts_with("chrt -f -p 50 4242"));
    // Several threads: the reading thread is not the PID; the placeholder says which.
    let f = slow(false);
    assert!(lines(&f, "pin each")[0].contains("TID"));
    assert!(lines(&f, "SCHED_OTHER")[0].contains("TID"));
    // Blind: the command that counts the reads, with the target and the PID.
    let f = Facts {
        reads_unknown: Some("PID 4242's threads could not be counted: not root".into()),
        ..slow(true)
    };
    let f = Facts {
        rxq_share_full: 0.3,
        rxq_share_low: 0.5,
        ..f
    };
    assert_eq!(diagnose(&f, None).case, Case::SocketBufferUnjudged);
    let l = lines(&f, "count the server's reads");
    assert!(
        l[0].starts_with("sudo tpslab diagnose udp 127.0.0.1:9500 --pid 4242  #"),
        "{l:?}"
    );
    // An IPv6 target is one word for sh (brackets quoted where needed).
    let f = Facts {
        target: "[::1]:9500".into(),
        pid: None,
        ..f
    };
    let l = lines(&f, "count the server's reads");
    let words = shlex::split(l[0].split("  #").next().unwrap()).unwrap();
    assert_eq!(words, ["sudo", "tpslab", "diagnose", "udp", "[::1]:9500"]);
}

#[test]
fn drops_in_one_socket_of_an_uneven_reuseport_group_are_an_imbalance() {
    use tpslab_record::verdict::GroupSocket;
    let sock = |reads, drops, q| GroupSocket {
        reads: Some(reads),
        drops,
        rx_queue_max_bytes: q,
        rcvbuf_bytes: Some(212_992),
        ..Default::default()
    };
    // 4 threads, 2 flows: one socket idle, one full and dropping, one light.
    let mut f = s1();
    f.threads = 4;
    f.flows = Some(2);
    f.group = vec![
        sock(90_000, 5_000, 212_000),
        sock(0, 0, 0),
        sock(10_000, 0, 4_000),
        sock(0, 0, 0),
    ];
    // What would otherwise read as a server too slow for the mean rate.
    f.rxq_share_full = 0.9;
    f.rxq_share_low = 0.0;
    let d = diagnose(&f, None);
    assert_eq!(d.case, Case::ReuseportImbalance, "{}", d.headline);
    assert!(
        d.headline
            .contains("1 of the server's 4 SO_REUSEPORT sockets"),
        "{}",
        d.headline
    );
    assert!(d
        .evidence
        .iter()
        .any(|e| e.text.contains("2 of its 4 sockets read nothing")));
    assert!(d.evidence.iter().any(|e| e.text.contains("2 flows")));
    assert!(d.recommendations[0].lines[0].contains("more flows"));
    // The same group from a server whose threads used all the CPU the host had: idle
    // sockets' readers could not have read more; too slow, with the imbalance beside it.
    let busy = Facts {
        server_cpu_mean_pct: 190.0,
        ..f.clone()
    };
    let d = diagnose(&busy, None);
    assert_eq!(d.case, Case::AppTooSlow, "{}", d.headline);
    assert!(d
        .evidence
        .iter()
        .any(|e| e.text.contains("SO_REUSEPORT group is uneven")));
    // Every socket dropping: the group had no room; the older rules judge it.
    for s in &mut f.group {
        s.drops = 100;
        s.rx_queue_max_bytes = 212_000;
    }
    assert_eq!(diagnose(&f, None).case, Case::AppTooSlow);
    // An even group says nothing of it.
    f.group = vec![sock(25_000, 10, 200_000); 4];
    f.rxq_share_full = 0.0;
    f.rxq_share_low = 0.9;
    let d = diagnose(&f, None);
    assert_eq!(d.case, Case::SocketBufferBursts);
    assert!(!d
        .evidence
        .iter()
        .any(|e| e.text.contains("SO_REUSEPORT group is uneven")));
}
