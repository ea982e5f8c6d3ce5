//! Table tests of the verdict rules.

use super::*;

/// Facts of the S1 miniature as measured on this machine (the `run udp` example in docs/s1-udp-loss.md): bursts
/// of 5000 x 1024 B every 50 ms, 59.55 % dropped at the socket buffer, server at 18 %
/// of a CPU, queue peaking at 211968 of 212992.
pub(crate) fn s1() -> Facts {
    Facts {
        gen_valid: true,
        attempted: 350_000,
        delivered: 141_583,
        socket_drops: 208_417,
        unattributed: Some(0),
        lost_total: 208_417,
        window_loss_pct: Some(59.30),
        replies: true,
        limit_bytes: Some(212_992),
        rxq_max_bytes: 211_968.0,
        rxq_mean_bytes: 40_693.0,
        rxq_share_full: 0.12,
        rxq_share_low: 0.8,
        server_cpu_mean_pct: 18.0,
        capacity_pps: Some(214_000.0),
        offered_pps: 100_000.0,
        burst: 5000,
        burst_interval_s: 0.05,
        peak_drops_window: 3400,
        size_bytes: 1024,
        truesize_bytes: Some(2304),
        ours: true,
        threads: 1,
        batch: 1,
        cpus: 2,
        rmem_max: Some(4_194_304),
        rmem_default: Some(212_992),
        netdev_max_backlog: Some(1000),
        port: 9000,
        ..Default::default()
    }
}

#[test]
fn s1_is_a_burst_overflow_with_a_buffer_fix() {
    let d = diagnose(&s1(), None);
    assert_eq!(d.case, Case::SocketBufferBursts);
    let b = d.buffer.unwrap();
    // 92 held (212992 / 2304) + 3400 dropped in the worst burst interval.
    assert_eq!(b.peak_backlog, 3492);
    assert!(b.granted_needed_bytes >= 3492 * 2304 * 2);
    let fix = d.fix.clone().unwrap();
    assert_eq!(fix.rcvbuf, Some(b.setsockopt_bytes));
    assert!(d
        .recommendations
        .iter()
        .any(|r| r.what.contains("do not add threads")));
    let lines = d.recommendations[0].lines.join("\n");
    // 8 MB request > rmem_max 4 MiB: the sysctl is needed, persisted with `net.`.
    assert!(lines.contains("sysctl -w net.core.rmem_max="), "{lines}");
    let all = format!("{:?}", d.recommendations);
    assert!(
        !all.contains("\"core.rmem"),
        "persisted keys carry the net. prefix: {all}"
    );
    // rmem_default is the alternative for servers that never set SO_RCVBUF: not doubled.
    let alt = &d.recommendations[1];
    assert!(alt.what.contains("never sets SO_RCVBUF"), "{}", alt.what);
    let granted = fix.rcvbuf.unwrap() * 2;
    assert!(alt
        .lines
        .iter()
        .any(|l| *l == format!("sysctl -w net.core.rmem_default={granted}")));
    let persist = &d.recommendations.last().unwrap().lines;
    assert!(
        persist.contains(&format!("net.core.rmem_default = {granted}")),
        "{persist:?}"
    );
    assert_eq!(
        fix.sysctls,
        vec![(
            "net.core.rmem_max".to_string(),
            fix.rcvbuf.unwrap().to_string()
        )]
    );
}

#[test]
fn a_queue_that_drains_between_bursts_is_not_app_too_slow() {
    // Capacity underestimated on a busy host (90 k < 100 k offered), but the queue is
    // below 10 % of its limit in 80 % of samples: the bursts, not the mean, overflow it.
    let mut f = s1();
    f.capacity_pps = Some(90_000.0);
    assert_eq!(diagnose(&f, None).case, Case::SocketBufferBursts);
    // The same capacity with a queue that never drains is too slow.
    f.rxq_share_low = 0.05;
    assert_eq!(diagnose(&f, None).case, Case::AppTooSlow);
}

#[test]
fn pinned_queue_and_busy_cpu_is_app_too_slow() {
    let mut f = s1();
    f.burst = 1;
    f.rxq_share_full = 0.95;
    f.server_cpu_mean_pct = 99.0;
    f.capacity_pps = Some(50_000.0);
    let d = diagnose(&f, None);
    assert_eq!(d.case, Case::AppTooSlow);
    assert!(d.recommendations[0]
        .what
        .contains("more buffer will not help"));
    // 130 000/s (the mean with 30 % to spare) at 50 000/s per busy thread takes 3
    // threads, 3 CPUs: this host has 2, so no thread count; batching is still tried.
    let fix = d.fix.unwrap();
    assert_eq!(fix.threads, None);
    assert_eq!(fix.batch, Some(64));
    assert_eq!(fix.rcvbuf, None);
    let r = d
        .recommendations
        .iter()
        .find(|r| r.what.contains("cannot reach 100000 pps"))
        .unwrap_or_else(|| panic!("{:?}", d.recommendations));
    assert!(
        r.why.contains("takes 3 of them") && r.why.contains("this host has 2"),
        "{}",
        r.why
    );
    // With 4 CPUs the 3 threads fit: that count, in our server's flag and the fix.
    f.cpus = 4;
    let d = diagnose(&f, None);
    assert_eq!(d.fix.unwrap().threads, Some(3));
    let all = format!("{:?}", d.recommendations);
    assert!(all.contains("tpslab serve udp --threads 3"), "{all}");
}

/// S1 against a foreign Java server whose socket never set SO_RCVBUF.
fn s1_java() -> Facts {
    Facts {
        ours: false,
        runtime: Some(tpslab_record::runtime::Runtime::Java),
        sk_rcvbufs: vec![212_992],
        ..s1()
    }
}

#[test]
fn foreign_socket_without_its_own_buffer_gets_rmem_default_first() {
    let d = diagnose(&s1_java(), None);
    assert_eq!(d.case, Case::SocketBufferBursts);
    assert!(d.recommendations[0]
        .what
        .starts_with("net.core.rmem_default"));
    let all = format!("{:?}", d.recommendations);
    assert!(all.contains("setReceiveBufferSize("), "{all}");
    assert!(!all.contains("tpslab serve"), "{all}");
    assert!(!all.contains("setsockopt(fd"), "{all}");
    // What tpslab can apply for a restartable foreign server: rmem_default only.
    let fix = d.fix.unwrap();
    assert_eq!(fix.rcvbuf, None);
    assert_eq!(fix.sysctls.len(), 1);
    assert_eq!(fix.sysctls[0].0, "net.core.rmem_default");
}

#[test]
fn reuseport_sockets_on_the_default_buffer_did_not_set_their_own() {
    // Two SO_REUSEPORT sockets at rmem_default: their sum is not rmem_default, but
    // neither set its own buffer.
    let mut f = s1_java();
    f.sk_rcvbufs = vec![212_992, 212_992];
    f.limit_bytes = Some(425_984);
    let d = diagnose(&f, None);
    assert!(d.recommendations[0]
        .what
        .starts_with("net.core.rmem_default"));
    assert!(d.fix.is_some());
}

#[test]
fn inconsistent_evidence_shows_no_share_above_100_percent() {
    let mut f = s1();
    f.attempted = 100_000;
    f.delivered = 528_561;
    f.unattributed = Some(-428_561);
    f.inconsistent = Some("counts include other traffic".into());
    let d = diagnose(&f, None);
    let ev = format!("{:?}", d.evidence);
    assert!(!ev.contains("528.56"), "{ev}");
    assert!(ev.contains("share not shown"), "{ev}");
}

#[test]
fn drain_is_read_while_the_queue_held_datagrams() {
    // Samples every 10 ms; rates index k covers samples k..k+1. The queue holds
    // datagrams from sample 2 to 12 (10 intervals, 100 ms) at 3000 reads/s, empty
    // elsewhere (where the reads, 9999/s, must not count).
    let n = 20;
    let mut o = tpslab_record::ObserverReport::default();
    o.series.t_ms = (0..n).map(|i| i as f64 * 10.0).collect();
    let q: Vec<f64> = (0..n)
        .map(|i| if (2..=12).contains(&i) { 50_000.0 } else { 0.0 })
        .collect();
    let reads: Vec<f64> = (0..n - 1)
        .map(|k| if (2..12).contains(&k) { 3000.0 } else { 9999.0 })
        .collect();
    o.series.values.insert("server_rx_queue_bytes".into(), q);
    o.series.values.insert("server_reads_per_s".into(), reads);
    o.series
        .values
        .insert("target_cpu_pct".into(), vec![10.0; n - 1]);
    let dr = drain(&o);
    assert!((dr.pps.unwrap() - 3000.0).abs() < 1e-6);
    assert!((dr.secs - 0.1).abs() < 1e-9);
    // 100 ms of backlog in a 190 ms run: over half, so its CPU is judged.
    assert!((dr.cpu_pct.unwrap() - 10.0).abs() < 1e-9);
    // Under 50 ms of backlog: no drain figure.
    let short: Vec<f64> = (0..n)
        .map(|i| if i == 5 || i == 6 { 1.0 } else { 0.0 })
        .collect();
    o.series
        .values
        .insert("server_rx_queue_bytes".into(), short);
    assert_eq!(drain(&o).pps, None);
}

#[test]
fn a_socket_that_set_its_buffer_gets_the_code_line_first() {
    let mut f = s1_java();
    f.sk_rcvbufs = vec![65_536];
    f.limit_bytes = Some(65_536);
    let d = diagnose(&f, None);
    assert!(d.recommendations[0]
        .what
        .contains("in the server's code (java)"));
    assert!(!format!("{:?}", d.recommendations).contains("rmem_default ="));
    assert!(d.fix.is_none(), "nothing on the host reaches its buffer");
}

#[test]
fn no_sysctl_is_recommended_at_its_current_value() {
    let mut f = s1_java();
    f.rmem_max = Some(100_000_000);
    f.rmem_default = Some(100_000_000);
    f.sk_rcvbufs = vec![100_000_000];
    f.limit_bytes = Some(100_000_000);
    let d = diagnose(&f, None);
    let lines: Vec<&String> = d.recommendations.iter().flat_map(|r| &r.lines).collect();
    assert!(!lines.iter().any(|l| l.contains("sysctl -w")), "{lines:?}");
}

#[test]
fn runtime_lines_follow_the_runtime() {
    for (rt, want) in [
        (
            tpslab_record::runtime::Runtime::Python,
            "sock.setsockopt(socket.SOL_SOCKET",
        ),
        (tpslab_record::runtime::Runtime::Go, "SetReadBuffer("),
        (
            tpslab_record::runtime::Runtime::Native,
            "setsockopt(fd, SOL_SOCKET, SO_RCVBUF",
        ),
    ] {
        let mut f = s1_java();
        f.runtime = Some(rt);
        f.sk_rcvbufs = vec![65_536];
        let d = diagnose(&f, None);
        assert!(
            format!("{:?}", d.recommendations[0].lines).contains(want),
            "{rt:?}"
        );
    }
}

#[test]
fn s2_riddle_is_background_for_a_foreign_server() {
    let probe = TruesizeProbe {
        size_bytes: 1024,
        queued: 8,
        rx_queue_bytes: 18432,
        full_queued: 92,
        full_rx_queue_bytes: 211_968,
        granted_bytes: 212_992,
    };
    let d = diagnose(&s1_java(), Some(&probe));
    assert!(!d.buffer_notes.iter().any(|n| n.starts_with("S2's riddle")));
    assert!(d.explain_notes.iter().any(|n| n.starts_with("S2's riddle")));
    assert!(d
        .buffer_notes
        .iter()
        .any(|n| n.contains("getReceiveBufferSize() reports 106496")));
    let ours = diagnose(&s1(), Some(&probe));
    assert!(ours
        .buffer_notes
        .iter()
        .any(|n| n.starts_with("S2's riddle")));
}

#[test]
fn a_sleeping_server_is_too_slow_and_said_to_wait() {
    let mut f = s1_java();
    f.burst = 1;
    f.offered_pps = 10_000.0;
    f.rxq_share_full = 0.74;
    f.rxq_share_low = 0.18;
    f.drain_pps = Some(3_161.0);
    f.capacity_pps = Some(3_161.0);
    f.backlog_cpu_pct = Some(15.0);
    f.backlog_s = 2.5;
    let d = diagnose(&f, None);
    assert_eq!(d.case, Case::AppTooSlow);
    assert!(d.headline.contains("mostly asleep"), "{}", d.headline);
    assert!(d.recommendations[1].what.contains("overlap the wait"));
    assert!(d.fix.is_none());
    let ev = format!("{:?}", d.evidence);
    assert!(ev.contains("read 3161 datagrams/s"), "{ev}");
    assert!(ev.contains("sleeps or blocks"), "{ev}");
    assert!(!ev.contains("where the server's threads waited"), "{ev}");
    // With the threads sampled: what they waited on, in the evidence and the advice.
    f.waits_headline =
        Some("process 7's threads spent 62 % of the run waiting on disk I/O (in fsync)".into());
    f.blocked_on = Some(("disk I/O (in fsync)".into(), 62.0));
    let d = diagnose(&f, None);
    let ev = format!("{:?}", d.evidence);
    assert!(
        ev.contains("where the server's threads waited: process 7's threads spent 62 % of the run waiting on disk I/O (in fsync)"),
        "{ev}"
    );
    let r = &d.recommendations[1];
    assert_eq!(
        r.what,
        "remove or overlap the wait on disk I/O (in fsync) in the per-message path (62 % of the threads' time)"
    );
    assert!(
        r.why
            .contains("each message waits on disk I/O (in fsync) for about"),
        "{}",
        r.why
    );
}

#[test]
fn a_steady_load_is_not_called_bursts() {
    let mut f = s1();
    f.burst = 1;
    let d = diagnose(&f, None);
    assert_eq!(d.case, Case::SocketBufferBursts);
    assert!(!d.headline.contains("burst"), "{}", d.headline);
    assert!(d.headline.contains("steady"), "{}", d.headline);
    assert!(!format!("{:?}", d.evidence).contains("bursts of 1 "));
}

#[test]
fn an_inconsistent_ledger_gives_no_verdict() {
    let mut f = s1();
    f.unattributed = Some(-418_561);
    f.inconsistent = Some("the counters explain 418561 datagrams more than sent".into());
    let d = diagnose(&f, None);
    assert_eq!(d.case, Case::Inconsistent);
    assert!(d.headline.starts_with("NO VERDICT"));
    assert!(d.fix.is_none());
    let ev = format!("{:?}", d.evidence);
    assert!(!ev.contains("-418561"), "{ev}");
}

#[test]
fn eight_blocking_threads_at_a_fifth_of_a_cpu_each_are_waiting_not_busy() {
    let mut f = s1_java();
    f.burst = 1;
    f.cpus = 16;
    f.offered_pps = 10_000.0;
    f.rxq_share_full = 0.9;
    f.rxq_share_low = 0.0;
    f.drain_pps = Some(4_000.0);
    f.capacity_pps = Some(4_000.0);
    f.backlog_cpu_pct = Some(160.0);
    f.reader_threads = Some(8);
    let d = diagnose(&f, None);
    assert_eq!(d.case, Case::AppTooSlow);
    assert!(d.headline.contains("mostly asleep"), "{}", d.headline);
}

#[test]
fn a_server_starved_of_cpu_is_not_said_to_sleep() {
    // Under a CPU hog: 41 % of a CPU while behind, runnable without a CPU 55 %.
    let mut f = s1();
    f.burst = 1;
    f.rxq_share_full = 0.4;
    f.rxq_share_low = 0.4;
    f.drain_pps = Some(15_661.0);
    f.capacity_pps = Some(15_661.0);
    f.backlog_cpu_pct = Some(41.0);
    f.backlog_runq_pct = Some(55.0);
    let d = diagnose(&f, None);
    assert_eq!(d.case, Case::AppTooSlow);
    assert!(!d.headline.contains("asleep"), "{}", d.headline);
    assert!(d.headline.contains("short of CPU"), "{}", d.headline);
    let ev = format!("{:?}", d.evidence);
    assert!(ev.contains("waiting for a CPU 55 %"), "{ev}");
    assert!(!ev.contains("sleeps or blocks"), "{ev}");
    assert!(d
        .recommendations
        .iter()
        .any(|r| r.what.contains("CPU of its own")));
}

#[test]
fn a_server_asleep_per_message_on_a_loaded_host_is_said_to_be_both() {
    // A Python server sleeping 200 us per datagram beside stress-ng: 20 % of a CPU, 30 %
    // runnable without one, the rest (50 %) asleep.
    let mut f = s1();
    f.burst = 1;
    f.rxq_share_full = 0.9;
    f.rxq_share_low = 0.02;
    f.drain_pps = Some(2054.0);
    f.capacity_pps = Some(2054.0);
    f.backlog_cpu_pct = Some(20.0);
    f.backlog_runq_pct = Some(30.0);
    let d = diagnose(&f, None);
    assert_eq!(d.case, Case::AppTooSlow);
    assert!(
        d.headline.contains("asleep") && d.headline.contains("short of CPU"),
        "{}",
        d.headline
    );
    let whats: Vec<&str> = d.recommendations.iter().map(|r| r.what.as_str()).collect();
    assert!(
        whats.iter().any(|w| w.contains("CPU of its own")),
        "{whats:?}"
    );
    assert!(
        whats.iter().any(|w| w.contains("overlap the wait")),
        "{whats:?}"
    );
}

#[path = "tests_rules.rs"]
mod rules;

#[path = "tests_lines.rs"]
mod lines;

#[path = "tests_advice.rs"]
mod advice;
#[path = "tests_frames.rs"]
mod frames;
