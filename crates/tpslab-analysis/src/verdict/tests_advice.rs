//! The advice a user pastes: snippets in the server's runtime, every persisted sysctl in
//! one file written once, thread counts that reach the mean rate, a SO_REUSEPORT group
//! that already exists.

use super::*;
use tpslab_proc::sysctl_conf::{parse_sysctl_conf, ConfEntry};
use tpslab_record::runtime::{Runtime, ALL};

/// Text that only `rt`'s own API has: each of its lines names one of these.
fn markers(rt: Runtime) -> &'static [&'static str] {
    match rt {
        Runtime::Java => &[
            "setReceiveBufferSize(",
            "StandardSocketOptions.SO_REUSEPORT",
        ],
        Runtime::Python => &["socket.SO_RCVBUF", "socket.SO_REUSEPORT"],
        Runtime::Go => &["SetReadBuffer(", "unix.SO_REUSEPORT", "ReadBatch("],
        Runtime::Node => &["recvBufferSize", "reusePort: true"],
        Runtime::Native => &[
            "setsockopt(fd, SOL_SOCKET, SO_RCVBUF",
            "setsockopt(fd, SOL_SOCKET, SO_REUSEPORT",
            "recvmmsg(fd",
        ],
    }
}

/// A foreign server too slow for 10 000 pps: one reader drained 2963 datagrams/s at a
/// whole CPU (the Python echo server), on a host of `cpus` CPUs.
fn too_slow(rt: Option<Runtime>, cpus: usize) -> Facts {
    Facts {
        ours: false,
        runtime: rt,
        burst: 1,
        offered_pps: 10_000.0,
        rxq_share_full: 0.95,
        rxq_share_low: 0.0,
        drain_pps: Some(2_963.0),
        capacity_pps: Some(2_963.0),
        backlog_cpu_pct: Some(99.0),
        backlog_s: 2.5,
        reader_threads: Some(1),
        server_sockets: 1,
        sk_rcvbufs: vec![212_992],
        cpus,
        ..super::s1()
    }
}

/// S1's bursts against a foreign server that set its own (small) buffer: the code line.
fn bursts(rt: Option<Runtime>) -> Facts {
    Facts {
        ours: false,
        runtime: rt,
        sk_rcvbufs: vec![65_536],
        limit_bytes: Some(65_536),
        ..super::s1()
    }
}

fn lines(d: &Diagnosis) -> Vec<String> {
    d.recommendations
        .iter()
        .flat_map(|r| r.lines.clone())
        .collect()
}

#[test]
fn every_snippet_is_in_the_runtime_of_the_server() {
    for rt in ALL {
        let slow = diagnose(&too_slow(Some(rt), 16), None);
        assert_eq!(slow.case, Case::AppTooSlow, "{rt:?}");
        let buf = diagnose(&bursts(Some(rt)), None);
        assert_eq!(buf.case, Case::SocketBufferBursts, "{rt:?}");
        let all: Vec<String> = lines(&slow).into_iter().chain(lines(&buf)).collect();
        let text = all.join("\n");
        // Its own API, for the buffer and for the readers (and the batch, where the
        // runtime has one).
        for m in markers(rt) {
            assert!(text.contains(m), "{rt:?} lacks {m}:\n{text}");
        }
        // No other runtime's.
        for other in ALL.into_iter().filter(|o| *o != rt) {
            for m in markers(other) {
                assert!(!text.contains(m), "{rt:?} got {other:?}'s {m}:\n{text}");
            }
        }
        let whats = format!(
            "{:?}",
            slow.recommendations
                .iter()
                .chain(&buf.recommendations)
                .map(|r| &r.what)
                .collect::<Vec<_>>()
        );
        assert_eq!(whats.contains("c/native"), rt == Runtime::Native, "{whats}");
        // Readers in the runtime's own terms: processes where a process runs one thread
        // of the language at a time.
        let readers = format!("5 {}, each with its own SO_REUSEPORT socket", rt.readers());
        assert!(whats.contains(&readers), "{rt:?}: {whats}");
        assert_eq!(
            whats.contains("processes"),
            matches!(rt, Runtime::Python | Runtime::Node),
            "{whats}"
        );
    }
}

#[test]
fn an_unknown_runtime_is_said_unknown_and_gets_every_runtime_named() {
    for d in [
        diagnose(&bursts(None), None),
        diagnose(&too_slow(None, 16), None),
    ] {
        let all = lines(&d);
        let text = all.join("\n");
        assert!(text.contains("runtime is unknown (no PID"), "{text}");
        for rt in ALL {
            // The SO_RCVBUF line of each (bursts) or its SO_REUSEPORT line (too slow),
            // each after the runtime's name.
            let m = markers(rt)[if d.case == Case::AppTooSlow { 1 } else { 0 }];
            assert!(
                all.iter()
                    .any(|l| l.starts_with(&format!("{}: ", rt.name())) && l.contains(m)),
                "{rt:?} ({m}) not named:\n{text}"
            );
        }
        let whats: Vec<&String> = d.recommendations.iter().map(|r| &r.what).collect();
        assert!(
            !format!("{whats:?}").contains("(c/native)"),
            "an unknown runtime called native: {whats:?}"
        );
    }
    let d = diagnose(&bursts(None), None);
    assert!(
        d.recommendations.iter().any(|r| r
            .what
            .contains("in the server's code (its runtime unknown)")),
        "{:?}",
        d.recommendations
    );
}

/// The `KEY=VALUE` of every `sysctl -w` line, split back by shlex as sh would.
fn sysctl_w(lines: &[String]) -> Vec<(String, String)> {
    lines
        .iter()
        .filter(|l| l.starts_with("sysctl -w "))
        .map(|l| {
            let words = shlex::split(l).unwrap_or_else(|| panic!("not sh: {l}"));
            assert_eq!(words.len(), 3, "{l}");
            let (k, v) = words[2].split_once('=').unwrap();
            (k.to_string(), v.to_string())
        })
        .collect()
}

#[test]
fn every_persisted_sysctl_is_in_one_file_written_once() {
    // rmem_default below what the burst needs (the socket never set its own buffer) and
    // rmem_max below the request: two recommendations, two keys.
    for f in [
        Facts {
            sk_rcvbufs: vec![212_992],
            limit_bytes: Some(212_992),
            ..bursts(Some(Runtime::Python))
        },
        super::s1(),
        Facts {
            sk_rcvbufs: vec![212_992],
            limit_bytes: Some(212_992),
            ..bursts(None)
        },
    ] {
        let d = diagnose(&f, None);
        let all = lines(&d);
        let set = sysctl_w(&all);
        assert!(set.len() >= 2, "two keys to persist: {all:#?}");
        let writes: Vec<&String> = all
            .iter()
            .filter(|l| l.contains("/etc/sysctl.d/"))
            .collect();
        assert_eq!(writes.len(), 1, "one write of one file: {writes:?}");
        let words = shlex::split(writes[0]).unwrap();
        assert_eq!(words[..3], ["cat", ">", PERSIST_FILE], "{}", writes[0]);
        // The here-document's body, read back by the doctor's own sysctl.d parser.
        let at = all.iter().position(|l| l == writes[0]).unwrap();
        let body: Vec<&str> = all[at + 1..]
            .iter()
            .take_while(|l| *l != "EOF")
            .map(String::as_str)
            .collect();
        assert!(all[at + 1 + body.len()..]
            .first()
            .is_some_and(|l| l == "EOF"));
        let parsed: Vec<(String, String)> = parse_sysctl_conf(&body.join("\n"))
            .into_iter()
            .map(|l| match l.entry {
                ConfEntry::Set { key, value, .. } => (key, value),
                ConfEntry::Malformed { text } => panic!("malformed in the file: {text}"),
            })
            .collect();
        let mut want = set.clone();
        want.sort();
        let mut got = parsed.clone();
        got.sort();
        assert_eq!(got, want, "the file holds every key set, at its value");
    }
}

#[test]
fn a_thread_count_only_where_it_reaches_the_mean_rate() {
    // The figures: one Python process drains 2963/s at a whole CPU; 10 000 pps
    // with 30 % to spare takes ceil(13000 / 2963) = 5 of them: 5 CPUs, on a 2-CPU host.
    let d = diagnose(&too_slow(Some(Runtime::Python), 2), None);
    assert_eq!(d.case, Case::AppTooSlow);
    let whats: Vec<&str> = d.recommendations.iter().map(|r| r.what.as_str()).collect();
    assert!(
        !whats.iter().any(|w| w.contains("SO_REUSEPORT")),
        "a count that cannot reach the rate: {whats:?}"
    );
    let r = d
        .recommendations
        .iter()
        .find(|r| r.what == "more processes alone cannot reach 10000 pps on this host")
        .unwrap_or_else(|| panic!("{whats:?}"));
    assert!(
        r.why.contains("one process drained 2963 datagrams/s")
            && r.why
                .contains("takes 5 of them, 5.0 CPUs of work, and this host has 2"),
        "{}",
        r.why
    );
    // Two threads at 2963/s each (5926/s in all) on 2 CPUs: adding threads cannot help.
    let mut two = too_slow(Some(Runtime::Native), 2);
    two.reader_threads = Some(2);
    two.drain_pps = Some(5_926.0);
    two.capacity_pps = Some(5_926.0);
    two.backlog_cpu_pct = Some(198.0);
    let d = diagnose(&two, None);
    assert!(
        d.recommendations
            .iter()
            .any(|r| r.what.contains("cannot reach") && r.why.contains("takes 5 of them")),
        "{:?}",
        d.recommendations
    );
    // On 8 CPUs the 5 fit, and 5 x 2963 reaches 13 000/s where 4 do not.
    let d = diagnose(&too_slow(Some(Runtime::Python), 8), None);
    let r = d
        .recommendations
        .iter()
        .find(|r| r.what.ends_with("each with its own SO_REUSEPORT socket"))
        .unwrap_or_else(|| panic!("{:?}", d.recommendations));
    let n: f64 = r.what.split(' ').next().unwrap().parse().unwrap();
    assert!(
        n * 2963.0 >= 13_000.0 && (n - 1.0) * 2963.0 < 13_000.0,
        "{}",
        r.what
    );
    assert!(r.why.contains("5 drain 14815/s"), "{}", r.why);
    // A server that sleeps per message uses a fraction of a CPU per reader: its readers'
    // CPU, not their number, meets the host's CPUs (5 readers at 20 % = 1 CPU).
    let mut asleep = too_slow(Some(Runtime::Java), 2);
    asleep.backlog_cpu_pct = Some(20.0);
    let d = diagnose(&asleep, None);
    assert!(
        d.recommendations
            .iter()
            .any(|r| r.what == "5 threads, each with its own SO_REUSEPORT socket"),
        "{:?}",
        d.recommendations
    );
}

#[test]
fn a_server_with_a_reuseport_group_is_not_told_to_add_one() {
    // named: two sockets on the port; 5 threads at 2963/s each reach 13 000/s.
    let mut f = too_slow(Some(Runtime::Native), 16);
    f.server_sockets = 2;
    let d = diagnose(&f, None);
    let r = d
        .recommendations
        .iter()
        .find(|r| r.what.contains("SO_REUSEPORT"))
        .unwrap_or_else(|| panic!("{:?}", d.recommendations));
    assert_eq!(
        r.what,
        "5 threads, one per socket of its SO_REUSEPORT group"
    );
    assert!(
        r.why.contains("it has 2 sockets on port 9000 already")
            && r.why.contains("raise their number"),
        "{}",
        r.why
    );
    assert!(
        !lines(&d).iter().any(|l| l.contains("SO_REUSEPORT")),
        "a setsockopt for a group that exists: {:?}",
        lines(&d)
    );
    // Enough sockets already (8 for 5 readers): keep them read, nothing to add.
    f.server_sockets = 8;
    let d = diagnose(&f, None);
    let r = d
        .recommendations
        .iter()
        .find(|r| r.what.contains("SO_REUSEPORT"))
        .unwrap();
    assert!(
        r.why.contains("it has 8 sockets") && !r.why.contains("raise their number"),
        "{}",
        r.why
    );
    // One socket: the snippet that makes the group.
    f.server_sockets = 1;
    let d = diagnose(&f, None);
    assert!(
        lines(&d)
            .iter()
            .any(|l| l.contains("setsockopt(fd, SOL_SOCKET, SO_REUSEPORT")),
        "{:?}",
        lines(&d)
    );
}

#[test]
fn the_sockets_on_the_port_come_from_the_observer() {
    let mut o = tpslab_record::ObserverReport::default();
    o.deltas.insert("server_sockets_found".into(), 2);
    let rec = tpslab_record::RunRecord {
        observer: Some(o),
        ..Default::default()
    };
    assert_eq!(crate::verdict::facts_of(&rec, None).server_sockets, 2);
}

#[test]
fn no_thread_count_without_a_measured_drain() {
    // A queue pinned at its limit, the server's reads and CPU not counted: too slow, but
    // no figure for what it drains, so no count.
    let mut f = too_slow(Some(Runtime::Python), 16);
    f.drain_pps = None;
    f.capacity_pps = None;
    f.cpu_capacity_pps = None;
    f.backlog_cpu_pct = None;
    let d = diagnose(&f, None);
    assert_eq!(d.case, Case::AppTooSlow);
    assert!(!d.headline.contains("about 1)"), "{}", d.headline);
    assert!(d.headline.contains("it drains less"), "{}", d.headline);
    let whats: Vec<&str> = d.recommendations.iter().map(|r| r.what.as_str()).collect();
    assert!(
        !whats
            .iter()
            .any(|w| w.contains("SO_REUSEPORT") || w.contains("cannot reach")),
        "{whats:?}"
    );
    assert!(
        whats
            .iter()
            .any(|w| w.starts_with("measure what one thread drains")),
        "{whats:?}"
    );
    assert!(!format!("{:?}", d.recommendations).contains("(1 pps)"));
}
