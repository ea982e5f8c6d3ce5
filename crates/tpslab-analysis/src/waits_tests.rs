//! Tests of the parent module: classes, shares, headlines, the threads a verdict leaves out.
use super::*;

#[test]
fn samples_are_classed_by_state_syscall_and_fd() {
    use FdKind::*;
    assert_eq!(classify('R', Some("poll"), Unknown), WaitClass::OnCpu);
    assert_eq!(classify('D', Some("write"), NotSocket), WaitClass::Disk);
    assert_eq!(classify('S', Some("poll"), Unknown), WaitClass::Network);
    assert_eq!(
        classify('S', Some("epoll_wait"), Unknown),
        WaitClass::Network
    );
    assert_eq!(classify('S', Some("read"), Socket), WaitClass::Network);
    assert_eq!(classify('S', Some("read"), NotSocket), WaitClass::File);
    assert_eq!(classify('S', Some("futex"), Unknown), WaitClass::Lock);
    assert_eq!(
        classify('S', Some("clock_nanosleep"), Unknown),
        WaitClass::Sleep
    );
    assert_eq!(classify('S', Some("fdatasync"), Unknown), WaitClass::Disk);
    assert_eq!(classify('S', None, Unknown), WaitClass::Other);
    assert_eq!(classify('S', Some("ioctl"), Unknown), WaitClass::Other);
    // A refused syscall file is not "other": the reader says it could not see.
    assert_eq!(
        classify('S', Some(UNREADABLE_SYSCALL), Unknown),
        WaitClass::Unknown
    );
}

#[test]
fn shares_and_the_headline_name_the_class_and_its_syscall() {
    let mut w = ThreadWaits {
        pid: 42,
        interval_ms: 100,
        ..Default::default()
    };
    for _ in 0..46 {
        crate::waits::add_sample(
            &mut w.process,
            'S',
            Some("do_sys_poll"),
            Some("poll"),
            FdKind::Unknown,
        );
    }
    for _ in 0..3 {
        crate::waits::add_sample(&mut w.process, 'R', None, None, FdKind::Unknown);
    }
    crate::waits::add_sample(
        &mut w.process,
        'S',
        Some("futex_wait_queue"),
        Some("futex"),
        FdKind::Unknown,
    );
    assert_eq!(w.process.share_pct(WaitClass::Network), Some(92.0));
    assert_eq!(w.process.share_pct(WaitClass::OnCpu), Some(6.0));
    assert_eq!(w.process.by_syscall["poll"], 46);
    assert_eq!(
        crate::waits::headline(&w).unwrap(),
        "process 42's threads spent 92 % of the run waiting for the network (in poll)"
    );
    // A second class with a fifth of the samples or more is named too.
    for _ in 0..25 {
        crate::waits::add_sample(
            &mut w.process,
            'D',
            Some("jbd2_log_wait_commit"),
            Some("fsync"),
            FdKind::Unknown,
        );
    }
    assert_eq!(
        crate::waits::headline(&w).unwrap(),
        "process 42's threads spent 61 % of the run waiting for the network (in poll), 33 % waiting on disk I/O (in fsync)"
    );
    let mut m = ThreadStates::default();
    m.merge(&w.process);
    m.merge(&w.process);
    assert_eq!(m.samples, 150);
    assert_eq!(m.sleeping["do_sys_poll"], 92);
    assert_eq!(m.by_class[&WaitClass::Disk], 50);
    assert_eq!(crate::waits::headline(&ThreadWaits::default()), None);
}

#[test]
fn with_a_window_cpu_time_is_exact_and_the_blocked_time_split_by_samples() {
    // The busy-host bias: 25 of 31 samples saw the thread runnable, but schedstat
    // says it ran 0.7 s and waited for a CPU 0.14 s of 3 s; its 6 blocked samples
    // were all in fsync, in state D.
    let mut s = ThreadStates::default();
    for _ in 0..25 {
        crate::waits::add_sample(&mut s, 'R', None, None, FdKind::Unknown);
    }
    for _ in 0..6 {
        crate::waits::add_sample(
            &mut s,
            'D',
            Some("jbd2_log_wait_commit"),
            Some("fsync"),
            FdKind::Unknown,
        );
    }
    s.on_cpu_ns = 700_000_000;
    s.runqueue_ns = 140_000_000;
    s.window_ns = 3_000_000_000;
    let pct = |c| (s.share_pct(c).unwrap() * 10.0).round() / 10.0;
    assert_eq!(pct(WaitClass::OnCpu), 23.3);
    assert_eq!(pct(WaitClass::Runnable), 4.7);
    assert_eq!(pct(WaitClass::Disk), 72.0);
    assert_eq!(s.dominant().unwrap().0, WaitClass::Disk);
    let total: f64 = WaitClass::ALL
        .iter()
        .map(|&c| s.share_pct(c).unwrap())
        .sum();
    assert!((total - 100.0).abs() < 1e-9, "{total}");
    // Without samples of a blocked thread, its blocked time is "other".
    let mut r = ThreadStates::default();
    crate::waits::add_sample(&mut r, 'R', None, None, FdKind::Unknown);
    r.on_cpu_ns = 500;
    r.window_ns = 1000;
    assert_eq!(r.share_pct(WaitClass::Other), Some(50.0));
    // On a guest, time the hypervisor held the vCPU comes out of that unseen time
    // first (never more than is left after the CPU and run-queue time).
    r.stolen_ns = 300;
    assert_eq!(r.share_pct(WaitClass::Stolen), Some(30.0));
    assert_eq!(r.share_pct(WaitClass::Other), Some(20.0));
    r.stolen_ns = 900;
    assert_eq!(r.share_pct(WaitClass::Stolen), Some(50.0));
    assert_eq!(r.share_pct(WaitClass::Other), Some(0.0));
    // A blocked thread's stolen time is taken from its blocked time, the rest split
    // by its blocked samples.
    s.stolen_ns = 60_000_000;
    let pct = |c| (s.share_pct(c).unwrap() * 10.0).round() / 10.0;
    assert_eq!(pct(WaitClass::Stolen), 2.0);
    assert_eq!(pct(WaitClass::Disk), 70.0);
}

#[test]
fn a_record_without_classes_still_reads() {
    let old = r#"{"samples":10,"running":10,"sleeping":{},"disk":0,"other":0}"#;
    let s: ThreadStates = serde_json::from_str(old).unwrap();
    assert_eq!(s.samples, 10);
    assert!(s.by_class.is_empty());
}

/// S1 against a JVM (`diagnose udp` of tests/servers/UdpServer.java, docs/waits.md):
/// after 16 idle threads were left out, its C1 and C2 compiler threads and Monitor
/// Deflation, which ran a little and waited in a futex with a timeout the rest of
/// the run, still made the run read "72 % of the run waiting on a lock (in futex),
/// 22 % waiting for the network (in poll)" beside its one reader. Their timed
/// futex waits are sleeps: no lock is named.
#[test]
fn a_jvms_helpers_in_a_timed_futex_are_asleep_not_on_a_lock() {
    let thread = |tid: u32, samples: &[(char, &str, u64)], cpu_ms: u64, timed: u64| {
        let mut states = ThreadStates::default();
        for &(state, call, n) in samples {
            for _ in 0..n {
                crate::waits::add_sample(&mut states, state, None, Some(call), FdKind::Unknown);
            }
        }
        states.on_cpu_ns = cpu_ms * 1_000_000;
        states.window_ns = 3_000_000_000;
        ThreadWait {
            tid,
            comm: format!("t{tid}"),
            states,
            pid: 9,
            futex_timed: timed,
        }
    };
    // The reader: in poll, on a CPU a fifth of the run.
    let mut threads = vec![thread(1, &[('S', "poll", 240), ('R', "none", 60)], 600, 0)];
    // C1, C2, Monitor Deflation: a little CPU, the rest in a timed futex.
    threads.push(thread(2, &[('S', "futex", 299), ('R', "none", 1)], 80, 299));
    threads.push(thread(3, &[('S', "futex", 300)], 30, 300));
    threads.push(thread(4, &[('S', "futex", 300)], 20, 300));
    // Sixteen parked helpers (main, GC, VM Thread, ...): idle, left out.
    for tid in 10..26 {
        threads.push(thread(tid, &[('S', "futex", 300)], 0, 0));
    }
    let mut process = ThreadStates::default();
    for t in &threads {
        process.merge(&t.states);
    }
    let w = ThreadWaits {
        pid: 9,
        interval_ms: 10,
        process,
        threads,
        ..Default::default()
    };
    let (kept, left) = without_idle(&w);
    assert_eq!((left.idle, kept.threads.len()), (16, 4));
    let lock = kept.process.share_pct(WaitClass::Lock).unwrap();
    let sleep = kept.process.share_pct(WaitClass::Sleep).unwrap();
    assert_eq!(lock, 0.0, "{:?}", kept.process.by_class);
    assert!(sleep > 50.0, "{sleep}");
    let h = crate::waits::headline(&kept).unwrap();
    assert!(!h.contains("lock"), "{h}");
    // Without the timeouts (a record from before them), the helpers read as a lock.
    let mut old = w.clone();
    old.threads.iter_mut().for_each(|t| t.futex_timed = 0);
    let (kept, _) = without_idle(&old);
    assert!(
        crate::waits::headline(&kept).unwrap().contains("a lock"),
        "{:?}",
        crate::waits::headline(&kept)
    );
    // A thread that waits in an untimed futex is still on a lock.
    let mut untimed = w.clone();
    untimed.threads[2].futex_timed = 0;
    let (kept, _) = without_idle(&untimed);
    assert!(kept.process.share_pct(WaitClass::Lock).unwrap() > 0.0);
}

/// S1 against a JVM whose runtime helpers ran: its compiler, its collector and its
/// VM thread on a CPU now and then (0.5 to 3 % of the run), in a futex without a
/// timeout the rest, beside its one reader (the main thread, `java`, in poll). They
/// are not idle, so before they were known they made the run "waiting on a lock".
#[test]
fn a_jvms_busy_helpers_are_left_out_by_name_unless_seen_on_a_socket() {
    let thread = |tid: u32, comm: &str, samples: &[(char, &str, u64)], cpu_ms: u64| {
        let mut states = ThreadStates::default();
        for &(state, call, n) in samples {
            for _ in 0..n {
                crate::waits::add_sample(&mut states, state, None, Some(call), FdKind::Unknown);
            }
        }
        states.on_cpu_ns = cpu_ms * 1_000_000;
        states.window_ns = 3_000_000_000;
        ThreadWait {
            tid,
            comm: comm.into(),
            states,
            pid: 9,
            futex_timed: 0,
        }
    };
    let mut threads = vec![thread(
        9,
        "java",
        &[('S', "poll", 240), ('R', "none", 60)],
        600,
    )];
    threads.push(thread(
        11,
        "C2 CompilerThre",
        &[('S', "futex", 284), ('R', "none", 16)],
        90,
    ));
    threads.push(thread(
        12,
        "GC Thread#0",
        &[('S', "futex", 290), ('R', "none", 10)],
        60,
    ));
    threads.push(thread(
        13,
        "VM Thread",
        &[('S', "futex", 296), ('R', "none", 4)],
        16,
    ));
    for tid in 20..36 {
        threads.push(thread(tid, "G1 Refine#0", &[('S', "futex", 300)], 0));
    }
    let mut process = ThreadStates::default();
    for t in &threads {
        process.merge(&t.states);
    }
    let w = ThreadWaits {
        pid: 9,
        interval_ms: 10,
        process,
        threads,
        ..Default::default()
    };
    let (kept, left) = without_idle(&w);
    assert_eq!(left.idle, 16);
    assert_eq!(
        left.helpers,
        ["C2 CompilerThre", "GC Thread#0", "VM Thread"]
    );
    assert_eq!(kept.threads.len(), 1);
    let h = format!("{}{}", crate::waits::headline(&kept).unwrap(), left.words());
    assert_eq!(
        h,
        "process 9's threads spent 80 % of the run waiting for the network (in poll), 20 % on CPU (16 idle threads left out: parked in one wait the whole run, no CPU time; 3 runtime helper threads left out, not serving requests: C2 CompilerThre, GC Thread#0, VM Thread)"
    );
    // A thread with a helper's name seen on a socket serves: kept.
    let mut on_socket = w.clone();
    on_socket.threads[2] = thread(
        12,
        "GC Thread#0",
        &[('S', "recvfrom", 290), ('R', "none", 10)],
        60,
    );
    let (kept, left) = without_idle(&on_socket);
    assert_eq!(left.helpers, ["C2 CompilerThre", "VM Thread"]);
    assert_eq!(kept.threads.len(), 2);
    // The same threads under other names (a pool's, blocked on a lock) are kept.
    let mut pool = w.clone();
    for (i, t) in pool.threads[1..4].iter_mut().enumerate() {
        t.comm = format!("pool-1-thread-{i}");
    }
    let (kept, left) = without_idle(&pool);
    assert!(left.helpers.is_empty());
    assert!(
        crate::waits::headline(&kept)
            .unwrap()
            .contains("waiting on a lock (in futex)"),
        "{:?}",
        crate::waits::headline(&kept)
    );
}

/// A real S1 run against a JVM (`ip netns exec NS tpslab diagnose udp --server-cmd "java
/// tests/servers/UdpServer.java {port}" --burst 1000 --burst-interval 50ms --duration 3s
/// --warmup 1s --no-verify`, 2026-12-06, the record's `observer.thread_waits`): 17 of its
/// 20 threads idle, its reader (`java`, tid 9311) in poll, its C2 and C1 compilers on a
/// CPU 5.8 % and 0.9 % of the run and in a timed futex the rest. Before helpers were
/// known, the run read "59 % of the run sleeping, 30 % waiting for the network (in
/// poll)": the compilers' waits, not the reader's.
#[test]
fn a_real_jvms_compilers_are_left_out_of_s1s_waits() {
    let w: ThreadWaits =
        serde_json::from_str(include_str!("../tests/fragments/s1_java_thread_waits.json"))
            .expect("thread waits");
    assert_eq!(w.threads.len(), 20);
    let (kept, left) = without_idle(&w);
    assert_eq!(left.idle, 17);
    assert_eq!(left.helpers, ["C2 CompilerThre", "C1 CompilerThre"]);
    assert_eq!(kept.threads.len(), 1);
    assert_eq!(kept.threads[0].tid, 9311);
    let h = format!("{}{}", crate::waits::headline(&kept).unwrap(), left.words());
    // The reader alone: on a CPU 7 % of the run (schedstat), waiting for one 10 % (the
    // host was busy), in poll the rest.
    assert!(
        h.starts_with(
            "process 9310's threads spent 83 % of the run waiting for the network (in poll)"
        ),
        "{h}"
    );
    assert!(!h.contains("sleeping"), "{h}");
    assert!(
        h.ends_with("(17 idle threads left out: parked in one wait the whole run, no CPU time; 2 runtime helper threads left out, not serving requests: C2 CompilerThre, C1 CompilerThre)"),
        "{h}"
    );
}

/// .NET's thread-pool workers serve ASP.NET's requests: one blocked on a lock is never a
/// helper, whatever its runtime; .NET's finalizer is.
#[test]
fn a_dotnet_pool_worker_on_a_lock_is_not_a_helper() {
    let mut states = ThreadStates::default();
    for _ in 0..280 {
        crate::waits::add_sample(&mut states, 'S', None, Some("futex"), FdKind::Unknown);
    }
    for comm in [".NET TP Worker", ".NET ThreadPool", ".NET Long Runni"] {
        assert!(!is_helper(comm, &states), "{comm}");
    }
    assert!(is_helper(".NET Finalizer", &states));
}
