//! Tests of [`super::judge`] and its wording.
use super::*;

fn s(reads: Option<u64>, drops: u64, q: u64, limit: Option<u64>) -> GroupSocket {
    GroupSocket {
        reads,
        drops,
        rx_queue_max_bytes: q,
        rcvbuf_bytes: limit,
        ..Default::default()
    }
}

#[test]
fn one_socket_or_nothing_read_is_no_finding() {
    assert_eq!(
        judge(&[s(Some(10), 5, 100, None)], Some(1), Steer::Hash),
        None
    );
    assert_eq!(
        judge(
            &[s(Some(0), 0, 0, None), s(Some(0), 0, 0, None)],
            Some(1),
            Steer::Hash
        ),
        None
    );
}

#[test]
fn even_reads_are_no_finding() {
    let g = [
        s(Some(1000), 0, 10, None),
        s(Some(1200), 0, 10, None),
        s(Some(900), 0, 10, None),
        s(Some(1100), 0, 10, None),
    ];
    assert_eq!(judge(&g, Some(16), Steer::Hash), None);
}

#[test]
fn idle_sockets_beside_a_dropping_one_explain_its_drops() {
    // The 4-sender case: [1834112, 0, 4987889, 0].
    let g = [
        s(Some(1_834_112), 0, 1000, Some(425_984)),
        s(Some(0), 0, 0, Some(425_984)),
        s(Some(4_987_889), 7000, 425_000, Some(425_984)),
        s(Some(0), 0, 0, Some(425_984)),
    ];
    let i = judge(&g, Some(4), Steer::Hash).unwrap();
    assert_eq!((i.idle, i.dropping, i.spare, i.drops), (2, 1, 3, 7000));
    assert!((i.busiest_pct.unwrap() - 73.1).abs() < 0.1);
    assert!(i.explains_drops());
    let line = i.sentence();
    assert!(line.contains("2 of its 4 sockets read nothing"), "{line}");
    assert!(line.contains("busiest read 73 %"), "{line}");
    assert!(line.contains("4 flows"), "{line}");
}

#[test]
fn uneven_without_drops_is_said_but_explains_nothing() {
    let g = [s(Some(100), 0, 0, None), s(Some(0), 0, 0, None)];
    let i = judge(&g, Some(1), Steer::Hash).unwrap();
    assert!(!i.explains_drops());
    assert!(i.sentence().contains("1 flow and"), "{}", i.sentence());
}

#[test]
fn every_socket_dropping_is_not_an_imbalance_of_room() {
    // Uneven reads, but every socket dropped: all were full, so more buffer or more
    // readers, not only spreading.
    let g = [
        s(Some(400), 10, 9000, Some(10_000)),
        s(Some(100), 50, 9000, Some(10_000)),
    ];
    let i = judge(&g, Some(2), Steer::Hash).unwrap();
    assert_eq!(i.spare, 0);
    assert!(!i.explains_drops());
}

#[test]
fn without_reads_drops_beside_room_are_an_imbalance() {
    let g = [
        s(None, 500, 212_000, Some(212_992)),
        s(None, 0, 4_000, Some(212_992)),
        s(None, 0, 0, None),
    ];
    let i = judge(&g, None, Steer::Hash).unwrap();
    assert_eq!((i.dropping, i.spare, i.busiest_pct), (1, 2, None));
    assert!(i.explains_drops());
    assert!(i
        .sentence()
        .contains("1 of its 3 sockets dropped 500 datagrams while 2 had room"));
    // A socket whose queue reached more than half its limit had no room.
    let g = [
        s(None, 500, 212_000, Some(212_992)),
        s(None, 0, 150_000, Some(212_992)),
    ];
    assert_eq!(judge(&g, None, Steer::Hash), None);
    // Nothing dropped: nothing to say without reads.
    let g = [s(None, 0, 0, None), s(None, 0, 0, None)];
    assert_eq!(judge(&g, None, Steer::Hash), None);
}

#[test]
fn steering_changes_what_is_said_or_silences_it() {
    let g = [
        s(Some(24_000), 300, 200_000, Some(212_992)),
        s(Some(0), 0, 0, Some(212_992)),
        s(Some(0), 0, 0, Some(212_992)),
        s(Some(0), 0, 0, Some(212_992)),
    ];
    // Random steering: unevenness is not the group's doing.
    assert_eq!(judge(&g, Some(2), Steer::Random), None);
    // By CPU: the CPUs that received, not the flows, and no "more flows" fix.
    let i = judge(&g, Some(2), Steer::Cpu).unwrap();
    assert!(
        i.sentence().contains("CPU that received it"),
        "{}",
        i.sentence()
    );
    assert!(!i.sentence().contains("flow"), "{}", i.sentence());
    assert!(i.fixes()[0].contains("RPS"), "{:?}", i.fixes());
    assert!(!i.fixes().iter().any(|f| f.contains("more flows")));
    // Hash: the flows.
    let i = judge(&g, Some(2), Steer::Hash).unwrap();
    assert!(i.fixes()[0].contains("more flows"), "{:?}", i.fixes());
    // Without known limits, room is an empty queue, and the sentence says so.
    let g = [s(None, 500, 9_000, None), s(None, 0, 0, None)];
    let i = judge(&g, None, Steer::Hash).unwrap();
    assert!(
        i.sentence().contains("queue never above 0"),
        "{}",
        i.sentence()
    );
}

/// The group of a real run: `tpslab diagnose udp` against a pre-forked Python server (two
/// processes, one SO_REUSEPORT socket each; `facts.group` of the record).
fn fixture(name: &str) -> Vec<GroupSocket> {
    let text = match name {
        // The second worker sleeps 1 ms per datagram; 4000 pps from 32 flows.
        "slow" => include_str!("reuseport_fixtures/slow.json"),
        // One process, a thread per socket, the second sleeping 1 ms per datagram; 4000
        // pps from 32 flows (2026-12-07, `diagnose udp 127.0.0.1:9204 --rate 4k
        // --duration 2s` in a network namespace).
        "threads" => include_str!("reuseport_fixtures/threads.json"),
        // Both workers fast; 1 flow in bursts of 400 every 40 ms.
        _ => include_str!("reuseport_fixtures/uneven.json"),
    };
    serde_json::from_str(text).unwrap()
}

/// A slow reader's neighbour whose queue once passed half its limit (its reader off a
/// CPU a moment on a busy host) and that dropped nothing still had room: the slow reader
/// explains the drops.
#[test]
fn a_slow_readers_neighbour_with_a_high_queue_and_no_drops_had_room() {
    let mut g = fixture("slow");
    assert_eq!(g[1].drops, 0);
    g[1].rx_queue_max_bytes = g[1].rcvbuf_bytes.expect("the fixture's limit");
    let i = judge(&g, Some(32), Steer::Hash).unwrap();
    assert_eq!(i.kind, Kind::SlowReader { sockets: vec![0] });
    assert_eq!(i.spare, 1);
    assert!(i.explains_drops());
    // A third socket whose reader was busy (not waiting), no drops, its queue at the
    // limit: no room; the waiting neighbour's is still counted.
    let mut third = g[0].clone();
    (third.drops, third.reads) = (0, g[1].reads);
    third.rx_queue_max_bytes = third.rcvbuf_bytes.expect("the fixture's limit");
    g.push(third);
    let i = judge(&g, Some(32), Steer::Hash).unwrap();
    assert_eq!(i.kind, Kind::SlowReader { sockets: vec![0] });
    assert!(
        i.figures[2].waiting_pct.is_some_and(|w| w < 50.0),
        "{:?}",
        i.figures
    );
    assert_eq!(i.spare, 1, "{:?}", i.figures);
    // Uneven hashing keeps the queue's test: a socket near its limit had no room.
    let mut g = [
        s(Some(9_000), 0, 0, Some(1000)),
        s(Some(1_000), 500, 900, Some(1000)),
    ];
    g[0].rx_queue_max_bytes = 900;
    let i = judge(&g, None, Steer::Hash).unwrap();
    assert_eq!(i.kind, Kind::UnevenHashing);
    assert!(!i.explains_drops());
}

#[test]
fn a_worker_that_sleeps_is_a_slow_reader_named_by_its_pid() {
    let g = fixture("slow");
    let i = judge(&g, Some(32), Steer::Hash).unwrap();
    assert_eq!(i.kind, Kind::SlowReader { sockets: vec![0] });
    assert!(i.explains_drops());
    let f = &i.figures[0];
    assert_eq!(f.offered, Some(3095 + 4753));
    assert!((f.share_pct.unwrap() - 56.1).abs() < 0.1, "{f:?}");
    assert!((f.lost_pct.unwrap() - 60.6).abs() < 0.1, "{f:?}");
    assert_eq!(i.figures[1].lost_pct, Some(0.0));
    let line = i.sentence();
    assert!(line.contains("slow reader"), "{line}");
    assert!(line.contains("PID 22413 (python3)"), "{line}");
    assert!(
        line.contains("sleeping (in clock_nanosleep: 29 of 43 samples)"),
        "{line}"
    );
    assert!(!line.contains("uneven"), "{line}");
    let fixes = i.fixes().join("\n");
    assert!(
        fixes.contains("fix the worker PID 22413 (python3): it sleeps"),
        "{fixes}"
    );
    assert!(!fixes.contains("more flows from the clients"), "{fixes}");
    // The fast worker is never the one named.
    assert!(
        !fixes.contains("22330") && !line.contains("22330 (python3) was"),
        "{fixes}"
    );
}

#[test]
fn a_worker_that_waits_for_datagrams_is_not_slow_however_it_drops() {
    // The same group, but the dropping worker's thread waited for datagrams most of the
    // run (bursts, not a slow reader): its share was even, so the group is no finding
    // (the socket buffer's verdict speaks), never a slow reader nor uneven hashing.
    let mut g = fixture("slow");
    let st = g[0].reader.as_mut().unwrap().states.as_mut().unwrap();
    st.by_class.insert(WaitClass::Network, 40);
    st.by_class.remove(&WaitClass::Sleep);
    assert_eq!(judge(&g, Some(32), Steer::Hash), None);
    // Without the readers' waits (tpslab's own server): never a slow reader.
    let mut g = fixture("slow");
    g.iter_mut().for_each(|s| s.reader = None);
    assert_eq!(judge(&g, Some(32), Steer::Hash), None);
    // With the fast worker also busy (not waiting for datagrams), nothing shows the
    // readers unequal: not a slow reader.
    let mut g = fixture("slow");
    let st = g[1].reader.as_mut().unwrap().states.as_mut().unwrap();
    st.by_class.insert(WaitClass::Network, 1);
    st.by_class.insert(WaitClass::Sleep, 40);
    assert_eq!(judge(&g, Some(32), Steer::Hash), None);
}

#[test]
fn one_flow_on_one_worker_is_uneven_hashing_as_before() {
    let g = fixture("uneven");
    let i = judge(&g, Some(1), Steer::Hash).unwrap();
    assert_eq!(i.kind, Kind::UnevenHashing);
    assert!(i.explains_drops());
    assert_eq!(i.figures[0].share_pct, Some(100.0));
    let line = i.sentence();
    assert!(
        line.contains("1 of its 2 sockets read nothing and the busiest read 100 %"),
        "{line}"
    );
    assert!(line.contains("1 flow and"), "{line}");
    assert!(i.fixes()[0].contains("more flows"), "{:?}", i.fixes());
    // A busy socket with twice its share and a busy reader is still hashing's doing:
    // its share, not its reader, is uneven.
    let mut g = fixture("slow");
    g[0].drops = 20_000;
    let i = judge(&g, Some(32), Steer::Hash).unwrap();
    assert_eq!(i.kind, Kind::UnevenHashing, "{:?}", i.figures);
}

/// The review's case: two alike workers (each drains about 2,500 datagrams per busy
/// second), 4,000 pps hashed 72/28: the first is offered more than it can take, drops,
/// and is busy all the time; the second waits 55 %. Per busy second they drain alike: not
/// a slow reader (and uneven hashing is what it is).
#[test]
fn an_alike_worker_offered_more_than_it_can_take_is_not_a_slow_reader() {
    let mut g = fixture("slow");
    // 10 s: A offered 28,800, read 25,000, dropped 3,800; B read 11,200.
    g[0].reads = Some(25_000);
    g[0].drops = 3_800;
    g[1].reads = Some(11_200);
    g[1].drops = 0;
    let a = g[0].reader.as_mut().unwrap().states.as_mut().unwrap();
    a.by_class.clear();
    a.by_class.insert(WaitClass::OnCpu, 43);
    a.samples = 43;
    (a.on_cpu_ns, a.runqueue_ns) = (a.window_ns, 0);
    let b = g[1].reader.as_mut().unwrap().states.as_mut().unwrap();
    b.by_class.clear();
    b.by_class.insert(WaitClass::Network, 24);
    b.by_class.insert(WaitClass::OnCpu, 19);
    b.samples = 43;
    (b.on_cpu_ns, b.runqueue_ns) = (b.window_ns * 45 / 100, 0);
    let f = figures(&g);
    let i = judge(&g, Some(32), Steer::Hash);
    // The readers as set: A never waited, B waited 55 %.
    assert_eq!(f[0].waiting_pct, Some(0.0));
    assert!((f[1].waiting_pct.unwrap() - 55.0).abs() < 1.0, "{f:?}");
    assert!(
        !matches!(i.as_ref().map(|i| &i.kind), Some(Kind::SlowReader { .. })),
        "{i:?}"
    );
}

#[test]
fn a_thread_of_one_process_reading_its_own_socket_is_named_by_tid_and_socket() {
    // One process's two threads, a socket each (a real run): the reader is the thread,
    // named with its socket; its fix names the thread's files.
    let g = fixture("threads");
    let i = judge(&g, Some(32), Steer::Hash).unwrap();
    assert_eq!(i.kind, Kind::SlowReader { sockets: vec![1] });
    let named = "thread 3807 of PID 3759 (python3), socket 5182748";
    assert_eq!(i.slow_names(), named);
    let line = i.sentence();
    assert!(
        line.contains("sleeping (in clock_nanosleep: 22 of 33 samples)"),
        "{line}"
    );
    assert!(!line.contains("uneven"), "{line}");
    let fixes = i.fixes().join("\n");
    assert!(
        fixes.contains(&format!("fix the reader {named}: it sleeps")),
        "{fixes}"
    );
    assert!(!fixes.contains("thread 3806"), "{fixes}");
    assert!(!fixes.contains("more flows from the clients"), "{fixes}");
    // The same figures read as two processes' (no threads told): named by PID.
    let mut g = g;
    g.iter_mut().for_each(|s| {
        let r = s.reader.as_mut().unwrap();
        r.tids.clear();
        r.inode = 0;
    });
    let i = judge(&g, Some(32), Steer::Hash).unwrap();
    assert_eq!(i.slow_names(), "PID 3759 (python3)");
}
