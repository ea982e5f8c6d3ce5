//! Tests of the parent module.
use super::*;
use tpslab_plan::framing::Framing;
use tpslab_plan::proto::Proto;
use tpslab_plan::ramp::RampPlan;
use tpslab_record::ramp::Listener;
use tpslab_record::waits::ThreadStates;

fn step(users: usize, completed: u64, errors: &[(&str, u64)]) -> StepResult {
    StepResult {
        users,
        measured_s: 1.0,
        completed,
        tps: completed as f64,
        response: Default::default(),
        errors: errors.iter().map(|(k, n)| (k.to_string(), *n)).collect(),
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
        reply_gaps: None,
        reconnect_backoffs: 0,
    }
}

fn plan() -> RampPlan {
    RampPlan {
        proto: Proto::Tcp,
        target: "127.0.0.1:1".parse().unwrap(),
        steps: vec![1, 2],
        step: Duration::from_nanos(1),
        warmup: Duration::ZERO,
        think: Duration::ZERO,
        timeout: Duration::from_nanos(1),
        request: vec![],
        framing: Framing::Length,
        seq_field: None,
        knee_gain: 0.2,
        builtin_server: None,
        server_pid: None,
        sample_interval: Duration::from_nanos(1),
        load_threads: 0,
        connections: tpslab_plan::ramp::UserConnections::PerUser,
    }
}

#[test]
fn ramp_outcome_counts_failures_over_every_step() {
    use crate::gate::{applies, exit_code, parse, Loss};
    let mut r = RampRecord {
        server_cpus: None,
        listener: None,
        generator_peak_rss_kib: None,
        load_sent_s: None,
        overrun: None,
        http2: None,
        plan: plan(),
        steps: vec![step(1, 90, &[("timeout", 10)]), step(2, 100, &[])],
        interrupted: false,
        http3: None,
    };
    let o = crate::ramp::outcome(&r);
    assert_eq!(
        o.loss,
        Loss::Measured(5.0, "of 200 requests failed or timed out".into())
    );
    assert_eq!(
        o.errors.as_deref(),
        Some("10 requests failed (timeout x10)")
    );
    assert!(o.invalid.is_empty());
    let conds = parse("loss>1%", applies::RAMP).unwrap();
    assert_eq!(exit_code(&o, &conds, false).0, 1);
    // A refused target: nothing answered, every request failed.
    r.steps = vec![step(1, 0, &[("connect: Connection refused", 7)])];
    let o = crate::ramp::outcome(&r);
    assert!(
        o.invalid[0].contains("no request was answered"),
        "{:?}",
        o.invalid
    );
    assert_eq!(exit_code(&o, &[], true).0, 3);
    assert_eq!(
        exit_code(&o, &parse("errors", applies::RAMP).unwrap(), false).0,
        1
    );
    r.interrupted = true;
    assert_eq!(exit_code(&crate::ramp::outcome(&r), &[], true).0, 130);
}

/// The users of the last step spent half their time outside a request (connecting:
/// SYN retransmissions after the drops), so the accept queue costs them that much and
/// heads the verdict (a full queue that costs little is a side finding).
fn connecting(r: &mut RampRecord) {
    r.steps.last_mut().unwrap().response.mean_ns *= 0.5;
}

fn ramp(tps: &[f64], last_cpu: f64, last_states: ThreadStates) -> RampRecord {
    let users = [1, 2, 4, 8];
    let mut steps: Vec<StepResult> = users
        .iter()
        .zip(tps)
        .map(|(&u, &t)| {
            let mut s = step(u, (t * 1.0) as u64, &[]);
            s.tps = t;
            // Closed loop: R = N / X.
            s.response.mean_ns = u as f64 / t * 1e9;
            s
        })
        .collect();
    steps[0].threads = Some(ThreadStates {
        samples: 100,
        running: 100,
        ..Default::default()
    });
    let last = steps.last_mut().unwrap();
    last.server_cpu_cores = Some(last_cpu);
    last.threads = Some(last_states);
    RampRecord {
        plan: plan(),
        steps,
        interrupted: false,
        server_cpus: None,
        listener: None,
        generator_peak_rss_kib: None,
        load_sent_s: None,
        overrun: None,
        http2: None,
        http3: None,
    }
}

#[test]
fn the_cpu_count_of_the_record_decides_saturation_or_a_concurrency_cap() {
    let running = ThreadStates {
        samples: 100,
        running: 90,
        sleeping: [("do_epoll_wait".to_string(), 10)].into(),
        ..Default::default()
    };
    let r = ramp(&[100.0, 190.0, 200.0, 205.0], 1.9, running);
    // On the 2-CPU host that ran it: 1.9 of 2 CPUs busy at a flat top.
    let a = analyse(&r, 2);
    assert_eq!(a.knee_users, Some(2));
    assert!(
        a.verdict.starts_with("VERDICT: saturation of the CPU"),
        "{}",
        a.verdict
    );
    // The same record said to come from an 8-CPU host: the CPU idles; not saturation.
    let b = analyse(&r, 8);
    assert!(b.verdict.contains("concurrency cap"), "{}", b.verdict);
    // On that 8-CPU host, a server whose affinity allows 2 CPUs is saturated again.
    let pinned = RampRecord {
        server_cpus: Some(2),
        ..r.clone()
    };
    assert!(analyse(&pinned, 8)
        .verdict
        .starts_with("VERDICT: saturation of the CPU"));
    assert_eq!(a.little.len(), 4);
    assert!(a.little.iter().all(|l| l.ok(0.1)), "{:?}", a.little);
}

#[test]
fn a_growing_futex_wait_at_a_flat_top_with_idle_cpu_is_serialisation() {
    let locked = ThreadStates {
        samples: 100,
        running: 10,
        sleeping: [("futex_wait_queue".to_string(), 80)].into(),
        ..Default::default()
    };
    let a = analyse(&ramp(&[100.0, 105.0, 104.0, 106.0], 0.2, locked), 2);
    assert!(
        a.verdict.starts_with("VERDICT: serialisation"),
        "{}",
        a.verdict
    );
    assert!(
        a.lines
            .iter()
            .any(|l| l.contains("waiting on a lock (futex)")),
        "{:?}",
        a.lines
    );
    // Nothing answered: no knee, Little's law or fit lines, whatever the states say.
    let mut none = ramp(&[0.0, 0.0, 0.0, 0.0], 0.0, ThreadStates::default());
    for s in &mut none.steps {
        s.completed = 0;
    }
    let n = analyse(&none, 2);
    assert!(n.verdict.contains("no replies at all"), "{}", n.verdict);
    assert!(
        n.lines
            .iter()
            .all(|l| !l.contains("knee") && !l.contains("USL")),
        "{:?}",
        n.lines
    );
}

#[test]
fn connections_dropped_at_a_full_accept_queue_name_it() {
    use tpslab_proc::netstat::TcpCounters;
    let mut r = ramp(
        &[100.0, 190.0, 200.0, 205.0],
        0.1,
        ThreadStates {
            samples: 100,
            running: 5,
            ..Default::default()
        },
    );
    for (s, n) in r.steps.iter_mut().zip([0u64, 0, 6, 19]) {
        s.tcp = Some(TcpCounters {
            listen_overflows: n,
            listen_drops: n,
            ..Default::default()
        });
        s.accept_queue_max = Some(2);
    }
    r.listener = Some(Listener {
        backlog: 1,
        somaxconn: Some(4096),
    });
    connecting(&mut r);
    let a = analyse(&r, 2);
    assert!(
        a.verdict.starts_with("VERDICT: connections dropped at a full accept queue: 25 connection requests were dropped (TcpExt ListenOverflows/ListenDrops) from 4 users on; the listen socket's backlog is 1 (net.core.somaxconn 4096)"),
        "{}",
        a.verdict
    );
    assert!(
        a.lines
            .iter()
            .any(|l| l.contains("4 users 6 (queue up to 2)")),
        "{:?}",
        a.lines
    );
    // Drops that stopped as users grew (a burst at the start) are not the limit.
    r.steps[0].tcp.as_mut().unwrap().listen_overflows = 30;
    r.steps[0].tcp.as_mut().unwrap().listen_drops = 30;
    assert!(!analyse(&r, 2).verdict.contains("accept queue"));
    // Not counted (UDP, a remote server): no such verdict.
    for s in &mut r.steps {
        s.tcp = None;
    }
    assert!(!analyse(&r, 2).verdict.contains("accept queue"));
}

/// Thread states of `samples` thread samples, `disk` of them on disk I/O (state D, in
/// fsync) and the rest in poll.
fn disk_states(disk: u64, samples: u64) -> ThreadStates {
    use crate::waits::FdKind;
    let mut t = ThreadStates::default();
    for i in 0..samples {
        if i < disk {
            crate::waits::add_sample(
                &mut t,
                'D',
                Some("folio_wait_bit"),
                Some("fsync"),
                FdKind::Unknown,
            );
        } else {
            crate::waits::add_sample(
                &mut t,
                'S',
                Some("do_sys_poll"),
                Some("poll"),
                FdKind::Unknown,
            );
        }
    }
    t
}

#[test]
fn waits_on_disk_io_that_grow_with_users_are_the_verdict() {
    // 100 sampling ticks per 1 s step. At 1 user one thread, a fifth of the time on disk
    // (0.2 ms per request at 1000 TPS); at 8 users eight threads, half of it (4 threads on
    // disk / 2300 TPS = 1.74 ms per request, half of the 3.48 ms response).
    let mut r = ramp(
        &[1000.0, 1900.0, 2100.0, 2300.0],
        0.5,
        disk_states(400, 800),
    );
    r.plan.sample_interval = Duration::from_millis(10);
    r.steps[0].threads = Some(disk_states(20, 100));
    let a = analyse(&r, 2);
    assert!(
        a.verdict.starts_with("VERDICT: waits on disk I/O grow with users: TPS bends beyond the knee (2 users) while each request waits longer on disk I/O (0.20 ms at 1 user, 1.74 ms at 8 users, in fsync, 50 % of its response time)"),
        "{}",
        a.verdict
    );
    assert!(
        a.lines
            .iter()
            .any(|l| l.contains("1 users 0.20 ms (20 % of response)")
                && l.contains("8 users 1.74 ms (50 % of response)")),
        "{:?}",
        a.lines
    );
    // As long per request at 1 user (1 ms) as at 8 (1.74 ms): the disk is not where more
    // users queue.
    r.steps[0].threads = Some(disk_states(100, 100));
    assert!(!analyse(&r, 2).verdict.contains("disk"));
    // Growing eightfold, but a small part of the response time (0.43 of 3.48 ms).
    r.steps[0].threads = Some(disk_states(5, 100));
    r.steps[3].threads = Some(disk_states(100, 800));
    assert!(!analyse(&r, 2).verdict.contains("disk"));
    // Records from before wait classes: state D alone.
    let mut old = disk_states(400, 800);
    old.by_class.clear();
    r.steps[3].threads = Some(old);
    assert!(analyse(&r, 2).verdict.contains("disk I/O grow"));
    // More disk wait than response time (a background writer always in D): not a
    // per-request figure, no share above 100 % printed, no verdict.
    r.steps[3].threads = Some(disk_states(800, 800));
    r.steps[3].tps = 200.0;
    let a = analyse(&r, 2);
    assert!(
        !a.verdict.contains("waits on disk I/O grow"),
        "{}",
        a.verdict
    );
    let line = a
        .lines
        .iter()
        .find(|l| l.starts_with("disk I/O wait per request"))
        .unwrap();
    assert!(
        line.contains("8 users 40.00 ms (more than the response time"),
        "{line}"
    );
}

#[test]
fn kernel_drop_reasons_per_step_are_evidence() {
    use tpslab_record::DropReasons;
    let mut r = ramp(&[100.0, 200.0, 400.0, 800.0], 0.1, ThreadStates::default());
    for s in &mut r.steps {
        s.drop_reasons = Some(DropReasons::default());
    }
    r.steps[3].drop_reasons = Some(DropReasons {
        by_reason: vec![("TCP_LISTEN_OVERFLOW".into(), 3), ("NO_SOCKET".into(), 2)],
        by_site: vec![("TCP_LISTEN_OVERFLOW".into(), "tcp_v4_rcv+0x91".into(), 3)],
        ..Default::default()
    });
    let line = |r: &RampRecord| {
        analyse(r, 2)
            .lines
            .into_iter()
            .find(|l| l.starts_with("kernel drop reasons"))
    };
    assert_eq!(
        line(&r).as_deref(),
        Some("kernel drop reasons (skb:kfree_skb, host-wide) per step: 8 users: TCP_LISTEN_OVERFLOW 3 in tcp_v4_rcv+0x91, NO_SOCKET 2")
    );
    r.steps[3].drop_reasons = Some(DropReasons::default());
    assert_eq!(
        line(&r).as_deref(),
        Some("kernel drop reasons (skb:kfree_skb, host-wide): none in any step")
    );
    for s in &mut r.steps {
        s.drop_reasons = Some(DropReasons {
            unavailable: Some("needs root".into()),
            ..Default::default()
        });
    }
    assert_eq!(
        line(&r).as_deref(),
        Some("kernel drop reasons not read (needs root)")
    );
    for s in &mut r.steps {
        s.drop_reasons = None;
    }
    assert_eq!(line(&r), None, "older records: no line");
}

#[test]
fn a_target_that_refuses_every_request_is_unreachable_not_a_result() {
    let mut r = RampRecord {
        server_cpus: None,
        listener: None,
        generator_peak_rss_kib: None,
        load_sent_s: None,
        overrun: None,
        http2: None,
        plan: plan(),
        steps: vec![
            step(1, 0, &[("connect: connection refused", 10)]),
            step(2, 0, &[("connect: connection refused", 20)]),
        ],
        interrupted: false,
        http3: None,
    };
    let why = crate::ramp::unreachable(&r).expect("refused everywhere");
    assert!(
        why.contains("127.0.0.1:1") && why.contains("connect: connection refused x30"),
        "{why}"
    );
    assert!(!why.contains('\n'));
    // Redis runs over ramp tcp: the line names that command.
    r.plan.proto = tpslab_plan::proto::Proto::Redis(vec!["PING".into()]);
    let why = crate::ramp::unreachable(&r).unwrap();
    assert!(
        why.starts_with("ramp tcp --protocol redis 127.0.0.1:1: unable to reach"),
        "{why}"
    );
    r.plan = plan();
    // UDP: the port unreachable comes back on the socket.
    r.steps = vec![step(1, 0, &[("connection refused", 5)])];
    assert!(crate::ramp::unreachable(&r).is_some());
    // One reply: the server was there.
    r.steps = vec![step(1, 1, &[("connect: connection refused", 5)])];
    assert_eq!(crate::ramp::unreachable(&r), None);
    // Connected but never answered: timeouts are what was measured.
    r.steps = vec![step(
        1,
        0,
        &[("connect: connection refused", 5), ("timeout", 3)],
    )];
    assert_eq!(crate::ramp::unreachable(&r), None);
    // Nothing failed and nothing answered (e.g. interrupted at once): not this.
    r.steps = vec![step(1, 0, &[])];
    assert_eq!(crate::ramp::unreachable(&r), None);
}

#[test]
fn the_target_listen_sockets_own_drops_are_preferred_to_the_namespaces() {
    use tpslab_proc::netstat::TcpCounters;
    let mut r = ramp(
        &[100.0, 190.0, 200.0, 205.0],
        0.1,
        ThreadStates {
            samples: 100,
            running: 5,
            ..Default::default()
        },
    );
    for (s, (own, ns)) in r
        .steps
        .iter_mut()
        .zip([(0u64, 0u64), (0, 0), (3, 50), (9, 70)])
    {
        s.tcp = Some(TcpCounters {
            listen_overflows: ns,
            listen_drops: ns,
            ..Default::default()
        });
        s.listener_drops = Some(own);
    }
    connecting(&mut r);
    let a = analyse(&r, 2);
    assert!(
        a.verdict.starts_with("VERDICT: connections dropped at a full accept queue: 12 connection requests were dropped (at the target's listen socket, sk_drops by sock_diag) from 4 users on"),
        "{}",
        a.verdict
    );
    assert!(
        a.lines.iter().any(|l| l.contains("4 users 3 [50]")
            && l.contains("at the target's listen socket(s)")),
        "{:?}",
        a.lines
    );
    // Another listener of the namespace dropped, the target's did not: not its queue.
    for s in &mut r.steps {
        s.listener_drops = Some(0);
    }
    assert!(!analyse(&r, 2).verdict.contains("accept queue"));
}

/// The listener read at the first steps only (a listener that went away, a dump that
/// failed): those steps' drops are its own, the later ones the namespace's. The label
/// says so per step, never one source for all.
#[test]
fn steps_that_mix_drop_sources_are_labelled_each_by_its_own() {
    use tpslab_proc::netstat::TcpCounters;
    let mut r = ramp(
        &[100.0, 190.0, 200.0, 205.0],
        0.1,
        ThreadStates {
            samples: 100,
            running: 5,
            ..Default::default()
        },
    );
    for (k, (s, n)) in r.steps.iter_mut().zip([1u64, 2, 6, 19]).enumerate() {
        s.tcp = Some(TcpCounters {
            listen_overflows: n + 40,
            listen_drops: n + 40,
            ..Default::default()
        });
        if k < 2 {
            s.listener_drops = Some(n);
        } else {
            s.tcp.as_mut().unwrap().listen_overflows = n;
            s.tcp.as_mut().unwrap().listen_drops = n;
        }
    }
    connecting(&mut r);
    let a = analyse(&r, 2);
    assert!(
        a.verdict.contains("28 connection requests were dropped (the steps mix sources: at the target's listen socket, sk_drops by sock_diag at 1, 2 users; TcpExt ListenOverflows/ListenDrops at 4, 8 users) from 1 users on"),
        "{}",
        a.verdict
    );
    let line = a
        .lines
        .iter()
        .find(|l| l.starts_with("listen socket"))
        .unwrap_or_else(|| panic!("{:?}", a.lines));
    assert!(line.contains("the steps mix sources"), "{line}");
    assert!(
        line.contains("1 users 1 at the listen socket [41], 2 users 2 at the listen socket [42], 4 users 6 by TcpExt, 8 users 19 by TcpExt"),
        "{line}"
    );
    // One source at every step: named once, no step labelled.
    for (s, n) in r.steps.iter_mut().zip([1u64, 2, 6, 19]) {
        s.listener_drops = None;
        let t = s.tcp.as_mut().unwrap();
        (t.listen_overflows, t.listen_drops) = (n, n);
    }
    let a = analyse(&r, 2);
    assert!(
        a.verdict
            .contains("(TcpExt ListenOverflows/ListenDrops) from"),
        "{}",
        a.verdict
    );
    assert!(
        !a.lines.iter().any(|l| l.contains("by TcpExt")),
        "{:?}",
        a.lines
    );
}

/// Users that backed off before connecting again (a refused connect, a reply no request
/// asked for) are counted per step and said, with the steps where it happened; none, no
/// line.
#[test]
fn back_offs_are_said_per_step() {
    let mut a = step(4, 100, &[("connect: ECONNREFUSED", 12)]);
    a.reconnect_backoffs = 12;
    let b = step(8, 100, &[]);
    let mut r = ramp(&[100.0, 100.0], 0.5, ThreadStates::default());
    r.steps = vec![a, b.clone()];
    let line = backoffs_line(&r).expect("a line");
    assert!(
        line.ends_with("in the step's window: 12 at 4 users"),
        "{line}"
    );
    assert!(analyse(&r, 2).lines.contains(&line));
    r.steps = vec![b];
    assert_eq!(backoffs_line(&r), None);
}

/// Prefork servers' workers: CPU-bound, or kept off the CPUs by other work.
#[path = "ramp_prefork_tests.rs"]
mod prefork;
