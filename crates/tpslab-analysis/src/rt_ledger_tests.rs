use super::*;
use crate::ramp_rank::{rank, SIDE_SHARE};
use tpslab_record::ramp::RampRecord;
use tpslab_record::{Body, Record};

/// A real `ramp http` record (trimmed: no drop reasons, which are host-wide): a Python `ThreadingMixIn` HTTP/1.1 server whose handler holds one
/// global lock for 4 ms, listen backlog 5, `--users 1..64 --step x2 --pid PID`.
fn python_lock() -> RampRecord {
    let text = include_str!("../tests/fixtures/ramp_python_lock.json");
    match Record::from_json(text).expect("a record").body {
        Body::Ramp(r) => r.run,
        _ => panic!("a ramp record"),
    }
}

#[test]
fn the_locked_services_ledger_explains_its_mean_response_time() {
    let rec = python_lock();
    let l = step_ledger(rec.steps.last().unwrap(), 0.0).expect("a ledger");
    assert_eq!(l.users, 64);
    let attributed = l.attributed_ms();
    assert!(
        attributed >= 0.8 * l.mean_ms,
        "{attributed} of {} ms",
        l.mean_ms
    );
    assert!(
        (attributed - l.mean_ms).abs() <= 0.1 * l.mean_ms,
        "{attributed} vs {}",
        l.mean_ms
    );
    assert!((l.unattributed_ms - (l.mean_ms - attributed)).abs() < 1e-9);
    // The lock is the largest part by far; the holder's 4 ms sleep is one request's.
    let lock = l.ms(RtPart::Lock);
    assert!(lock >= 0.8 * l.mean_ms, "{}", line(&l));
    let sleep = l.ms(RtPart::Sleep);
    assert!((2.0..=8.0).contains(&sleep), "{}", line(&l));
    // The accept queue was nearly empty at each read: a fraction of a ms.
    assert!(l.ms(RtPart::AcceptWait) < 1.0, "{}", line(&l));
    // Every sampled part has an uncertainty, smaller than the part.
    let p = l.parts.iter().find(|p| p.part == RtPart::Lock).unwrap();
    assert!(p.pm_ms > 0.0 && p.pm_ms < 0.05 * p.ms, "{p:?}");
}

#[test]
fn spare_and_idle_threads_are_not_charged() {
    // The last step of the real run, with its users cut to 8: 56 of the threads seen
    // waiting on the lock are spare beyond the users, and taken off the lock part.
    let rec = python_lock();
    let full = step_ledger(rec.steps.last().unwrap(), 0.0).unwrap();
    let mut s = rec.steps.last().unwrap().clone();
    let waiters = s
        .per_thread
        .iter()
        .filter(|t| crate::ramp_threads::lock_samples(t) > 0)
        .count();
    s.users = 8;
    let cut = step_ledger(&s, 0.0).unwrap();
    let spare_ms = (waiters - 8) as f64 / s.tps * 1e3;
    let want = (full.ms(RtPart::Lock) - spare_ms).max(0.0);
    assert!(
        (cut.ms(RtPart::Lock) - want).abs() < 1e-6,
        "{} vs {want}",
        cut.ms(RtPart::Lock)
    );
    // A thread blocked on the load's own connection (waiting for the next request) or
    // parked in a timer all step is charged nothing; the lock part stays as it was.
    let mut s = rec.steps.last().unwrap().clone();
    let mut waiting = s.per_thread[0].clone();
    waiting.tid = 1;
    waiting.futex_timed = 0;
    waiting.states.by_class = [(WaitClass::Network, 40)].into_iter().collect();
    let mut timer = waiting.clone();
    timer.tid = 2;
    timer.states.by_class = [(WaitClass::Sleep, 40)].into_iter().collect();
    for t in [&mut waiting, &mut timer] {
        t.states.on_cpu_ns = 0;
        t.states.runqueue_ns = 0;
        t.cpu_ns = 0;
    }
    s.per_thread.extend([waiting, timer]);
    let more = step_ledger(&s, 0.0).unwrap();
    for p in RtPart::ALL {
        assert!((more.ms(p) - full.ms(p)).abs() < 1e-9, "{p:?}");
    }
}

#[test]
fn the_lock_heads_the_verdict_and_the_accept_queue_is_a_side_finding() {
    let a = crate::ramp::analyse(&python_lock(), 2);
    assert!(
        a.verdict.starts_with("VERDICT: serialisation: ")
            && a.verdict.ends_with(
                "; ledger: server threads waiting on a lock 246.52 ms of the 261.89 ms mean response time at 64 users (94 %), from 2 users on"
            ),
        "{}",
        a.verdict
    );
    let side = a
        .lines
        .iter()
        .find(|l| l.starts_with("side finding: connections dropped at a full accept queue"))
        .unwrap_or_else(|| panic!("{:#?}", a.lines));
    assert!(side.contains("from 16 users on"), "{side}");
    assert!(
        side.contains("[ledger at 64 users: 3 % of the users' time"),
        "{side}"
    );
    assert_eq!(a.ledger.len(), 7);
    assert!(a.lines.iter().any(|l| l.starts_with(
        "response-time ledger at 64 users: mean 261.89 ms = waiting to be accepted 0.08 ms"
    )));
}

#[test]
fn an_accept_queue_that_costs_the_users_most_of_their_time_heads_the_verdict() {
    let rec = python_lock();
    let mut l = step_ledger(rec.steps.last().unwrap(), 0.0).unwrap();
    // Users that spent 600 ms per request in SYN retransmissions: 70 % of their cycle.
    l.outside_ms = 600.0;
    let mut lines = vec![];
    let v = rank(
        "VERDICT: serialisation: the lock".into(),
        Some("VERDICT: connections dropped at a full accept queue: 9 dropped".into()),
        std::slice::from_ref(&l),
        0.0,
        true,
        &mut lines,
    );
    assert!(
        v.starts_with("VERDICT: connections dropped at a full accept queue"),
        "{v}"
    );
    assert!(v.contains("70 % of the users' time"), "{v}");
    assert_eq!(lines.len(), 1);
    assert!(lines[0].starts_with(
        "side finding: serialisation: the lock; ledger: server threads waiting on a lock"
    ));
    // Below the side share (here 0.1 / 1.1 of the cycle) it never heads, even beside
    // a verdict with no ledger part.
    l.outside_ms = 0.1 * l.mean_ms;
    assert!(crate::ramp_rank::accept_share(&l, 0.0) < SIDE_SHARE);
    let mut lines = vec![];
    let v = rank(
        "VERDICT: a concurrency cap: x".into(),
        Some("VERDICT: connections dropped at a full accept queue: 9 dropped".into()),
        std::slice::from_ref(&l),
        0.0,
        true,
        &mut lines,
    );
    assert_eq!(v, "VERDICT: a concurrency cap: x");
    assert!(
        lines[0].starts_with("side finding: connections dropped"),
        "{lines:?}"
    );
}

#[test]
fn replies_that_never_end_headline_the_protocol_errors_not_the_accept_queue() {
    // The real run's steps as a server whose replies never end would leave them: no
    // reply, every request failed "frame too long", the accept queue still dropping.
    let mut rec = python_lock();
    for s in &mut rec.steps {
        s.completed = 0;
        s.tps = 0.0;
        s.errors = [("http: frame too long".to_string(), 300)]
            .into_iter()
            .collect();
    }
    let a = crate::ramp::analyse(&rec, 2);
    assert!(
        a.verdict.starts_with(
            "VERDICT: no replies at all: every request failed (http: frame too long x2100)"
        ),
        "{}",
        a.verdict
    );
    assert!(a.ledger.is_empty());
}

/// A real `ramp http --users 1..1 --pid PID` against python3's http.server writing headers
/// and body in two sends (the report's fixture): the held replies are the ledger's
/// transmission stall, and Nagle x delayed ACK, 99 % of the response time, heads the
/// verdict; "one step only" follows as a side finding.
#[test]
fn a_stall_that_explains_the_response_time_heads_the_ramp() {
    let text = include_str!("../../tpslab-report/tests/fixtures/ramp_python_nagle.json");
    let Body::Ramp(r) = Record::from_json(text).expect("a record").body else {
        panic!("a ramp record")
    };
    let a = crate::ramp::analyse(&r.run, 2);
    let l = a.ledger.last().expect("a ledger");
    let stall = l.ms(RtPart::TransmissionStall);
    // 32 of 32 replies held 45.8 ms on average: 45.8 ms per request of a 46.1 ms mean.
    assert!((45.0..46.5).contains(&stall), "{stall}");
    assert!(l.unattributed_ms.abs() < 0.1 * l.mean_ms, "{l:?}");
    assert!(
        a.verdict.starts_with("VERDICT: Nagle x delayed ACK"),
        "{}",
        a.verdict
    );
    assert!(a.verdict.contains("(99 %)"), "{}", a.verdict);
    assert!(
        a.lines
            .iter()
            .any(|x| x.starts_with("side finding: one step only")),
        "{:?}",
        a.lines
    );
    // The locked service's ledger has no stall measured (recorded before reply_gaps) and
    // the lock still heads it.
    let lock = crate::ramp::analyse(&python_lock(), 2);
    assert!(!lock.verdict.contains("Nagle"), "{}", lock.verdict);
}

/// Parts that add up to more than the mean (a JVM's helper threads sampled asleep: the
/// review's 165.9 ms mean with 244.5 ms of parts) are said to overlap: no share of the
/// mean, no negative remainder, no figure over 100 %; a ledger that balances gives them.
#[test]
fn a_ledger_whose_parts_exceed_the_mean_gives_no_share() {
    let part = |part, ms| LedgerPart {
        part,
        ms,
        pm_ms: 1.0,
    };
    let l = RtLedger {
        users: 8,
        mean_ms: 165.9,
        parts: vec![part(RtPart::Lock, 142.5), part(RtPart::Sleep, 102.0)],
        unattributed_ms: 165.9 - 244.5,
        outside_ms: 0.5,
    };
    assert!(!balances(&l));
    let text = line(&l);
    assert!(
        text.contains("the parts add up to 244.50 ms, 78.60 ms more"),
        "{text}"
    );
    assert!(
        !text.contains('%') && !text.contains("unattributed"),
        "{text}"
    );
    assert_eq!(share(&l, RtPart::Lock), 142.5 / 165.9);
    let mut over = l.clone();
    over.parts = vec![part(RtPart::Sleep, 200.0)];
    assert_eq!(share(&over, RtPart::Sleep), 1.0);
    let ok = RtLedger {
        parts: vec![part(RtPart::Lock, 142.5)],
        unattributed_ms: 165.9 - 142.5,
        ..l
    };
    assert!(balances(&ok));
    assert!(line(&ok).contains("(86 %)"), "{}", line(&ok));
}

/// redis (tests/suite/threads.rs' ramp tcp of PING, the report's fixture): its bio and
/// jemalloc threads sit parked in a futex from the first step on; they are no request's
/// queue, so no step's ledger charges them to a lock (the suite caught "waiting on a lock"
/// in redis's output).
#[test]
fn threads_parked_from_the_first_step_are_no_lock() {
    let text = include_str!("../../tpslab-report/tests/fixtures/ramp_redis.json");
    let Body::Ramp(r) = Record::from_json(text).expect("a record").body else {
        panic!("a ramp record")
    };
    let parked = parked(&r.run.steps[0]);
    assert!(!parked.is_empty(), "the fixture's helpers are parked");
    for l in ledgers(&r.run.steps, 0.0) {
        assert_eq!(l.ms(RtPart::Lock), 0.0, "{l:?}");
    }
    // The locked Python service's waiters are no first-step helpers: its lock stands.
    let lock = ledgers(&python_lock().steps, 0.0);
    assert!(lock.last().unwrap().ms(RtPart::Lock) > 100.0);
}

/// A real `ramp tcp` record of tests/servers/LockedTcpServer.java (8 pool threads, a 2 ms
/// sleep under one synchronized lock, 1..8 users, --pid; written before timed futex
/// waits were told apart): at 4 users its JVM's VM Periodic Task ran (on a CPU 0.7 % of
/// the step: not idle) and waited in a futex the rest of it.
/// Busy runtime helpers: their waits are not the lock's, in the thread facts and in the
/// ledger; the pool threads' waits are.
#[test]
fn a_jvms_busy_helpers_are_not_waiting_on_the_lock() {
    use crate::ramp_threads::{facts, lock_samples};
    let text = include_str!("../tests/fixtures/ramp_java_lock.json");
    let rec = match Record::from_json(text).expect("a record").body {
        Body::Ramp(r) => r.run,
        _ => panic!("a ramp record"),
    };
    let step = &rec.steps[2];
    assert_eq!(step.users, 4);
    let f = facts(step).expect("thread facts");
    assert_eq!(f.helpers, ["VM Periodic Tas"], "{f:?}");
    for h in &f.helpers {
        // Working, not idle: they ran.
        assert!(
            f.working.iter().any(|(n, _)| n == h),
            "{h}: {:?}",
            f.working
        );
    }
    // The lock figures are the pool threads' alone.
    let pool: Vec<_> = step
        .per_thread
        .iter()
        .filter(|t| t.comm.starts_with("pool-") && f.working.iter().any(|w| w.1 == t.tid))
        .collect();
    let pool_lock: u64 = pool.iter().map(|t| lock_samples(t)).sum();
    let pool_samples: u64 = pool.iter().map(|t| t.states.samples).sum();
    assert!(
        (f.lock_share - pool_lock as f64 / pool_samples as f64).abs() < 1e-12,
        "{} vs {pool_lock} of {pool_samples}",
        f.lock_share
    );
    let pool_futex = pool
        .iter()
        .filter(|t| 2 * lock_samples(t) >= t.states.samples)
        .count();
    assert_eq!(f.futex_threads, pool_futex, "{f:?}");
    let line = crate::ramp_threads::evidence_line(&f);
    assert!(
        line.contains(
            "; 1 of them a runtime's helper, their waits not counted as a lock's (VM Periodic Tas)"
        ),
        "{line}"
    );
    // The ledger's lock part is the same with the helpers' samples gone: only their CPU
    // time weighs.
    let l = step_ledger(step, 0.0).expect("a ledger");
    let mut without = step.clone();
    for t in &mut without.per_thread {
        if crate::waits::is_helper(&t.comm, &t.states) {
            let (cpu, runq) = (t.states.on_cpu_ns, t.states.runqueue_ns);
            t.states = Default::default();
            t.states.on_cpu_ns = cpu;
            t.states.runqueue_ns = runq;
        }
    }
    let w = step_ledger(&without, 0.0).expect("a ledger");
    assert!(
        (l.ms(RtPart::Lock) - w.ms(RtPart::Lock)).abs() < 1e-9,
        "{l:?} vs {w:?}"
    );
    assert!(l.ms(RtPart::Lock) > 0.5 * l.mean_ms, "{l:?}");
}
