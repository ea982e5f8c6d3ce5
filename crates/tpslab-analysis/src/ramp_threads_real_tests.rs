//! Tests of the parent module on real ramp records: redis-server's (its one thread
//! saturated, with and without a knee) and a Java service's with and without a global lock.

use super::*;
use tpslab_record::ramp::RampRecord;
use tpslab_record::waits::StepThread;
use tpslab_record::{Body, Record};

/// The ramp of a record file's text (a fixture of a real run).
pub(super) fn real(text: &str) -> RampRecord {
    match Record::from_json(text).expect("a record").body {
        Body::Ramp(r) => r.run,
        _ => panic!("a ramp record"),
    }
}

/// A real `ramp tcp` record of Debian's redis-server (PING inline, 1..64 users, --pid):
/// the main thread on a CPU or waiting for one all the last step, its 4 helpers idle.
#[test]
fn a_real_redis_ramp_is_saturated_on_one_thread() {
    let rec = real(include_str!(
        "../../tpslab-report/tests/fixtures/ramp_redis.json"
    ));
    let last = rec.steps.last().unwrap();
    let f = facts(last).unwrap();
    assert_eq!(f.working.len(), 1);
    assert_eq!(f.working[0].0, "redis-server");
    assert_eq!(f.idle.len(), 4);
    assert_eq!(judge(&f), Some(ThreadCase::Saturated));
    let a = crate::ramp::analyse(&rec, 2);
    assert!(
        a.verdict
            .starts_with("VERDICT: saturated: one thread at ~100 % of a CPU"),
        "{}",
        a.verdict
    );
    assert!(a.verdict.contains("4 other threads idle"), "{}", a.verdict);
    assert!(!a.verdict.contains("lock") || a.verdict.contains("not a lock"));
    let evidence = a.lines.join("\n");
    assert!(!evidence.contains("futex"), "{evidence}");
}

/// The busiest thread of a ramp's last step (most time on a CPU).
fn main_thread(rec: &mut RampRecord) -> &mut StepThread {
    let last = rec.steps.last_mut().unwrap();
    last.per_thread
        .iter_mut()
        .max_by_key(|t| t.states.on_cpu_ns)
        .unwrap()
}

/// The same record with the TPS and server CPU of a CI run (2026-12-07) where TPS kept
/// growing to the top (52k, 142k, 156k, 251k) while redis's one thread was on a CPU 98 %
/// of the last step: no knee, yet the thread is the limit, not "scales with users". The
/// same shape with the thread on a CPU only 60 % (waiting for one 39 %), or busy 90 % of
/// the step, scales.
#[test]
fn a_redis_ramp_still_growing_with_its_thread_full_is_saturated() {
    let mut rec = real(include_str!(
        "../../tpslab-report/tests/fixtures/ramp_redis.json"
    ));
    let shape = [
        (52093.0, 0.46),
        (141506.0, 0.93),
        (155949.0, 0.90),
        (251155.0, 0.99),
    ];
    for (s, (tps, cores)) in rec.steps.iter_mut().zip(shape) {
        s.tps = tps;
        s.server_cpu_cores = Some(cores);
    }
    // As the CI run's thread: on a CPU 98 % of the last step, waiting for one 1 %.
    let fixture = main_thread(&mut rec).clone();
    let t = main_thread(&mut rec);
    (t.cpu_ns, t.states.on_cpu_ns, t.states.runqueue_ns) = (980_000_000, 980_000_000, 10_000_000);
    let a = crate::ramp::analyse(&rec, 2);
    assert_eq!(a.knee_index, None, "{a:?}");
    assert!(
        a.verdict.starts_with(
            "VERDICT: saturated: one thread at ~100 % of a CPU: TPS still grew 61 % from 16 users to 64 users while the server's CPU per request fell from 5.8 to 3.9 us"
        ),
        "{}",
        a.verdict
    );
    assert!(
        a.verdict.contains("no CPU time left to give"),
        "{}",
        a.verdict
    );

    // The fixture's own thread: runnable 99 % of the step but on a CPU 60 % of it (39 %
    // waiting for one): CPU time left to gain, so without a knee the ramp scales.
    *main_thread(&mut rec) = fixture;
    let a = crate::ramp::analyse(&rec, 2);
    assert_eq!(
        a.verdict,
        "VERDICT: scales with users over the measured range"
    );
    let t = main_thread(&mut rec);
    (t.cpu_ns, t.states.on_cpu_ns, t.states.runqueue_ns) = (980_000_000, 980_000_000, 10_000_000);

    // Busy 90 % of the last step: time left, so the ramp scales.
    let last = rec.steps.last_mut().unwrap();
    let before = facts(last).unwrap().busiest.unwrap().2;
    assert!(before >= 0.95, "{before}");
    let k = 0.9 / before;
    let main = last
        .per_thread
        .iter_mut()
        .max_by_key(|t| t.states.on_cpu_ns)
        .unwrap();
    main.cpu_ns = (main.cpu_ns as f64 * k) as u64;
    main.states.on_cpu_ns = (main.states.on_cpu_ns as f64 * k) as u64;
    main.states.runqueue_ns = (main.states.runqueue_ns as f64 * k) as u64;
    main.states.running = (main.states.samples as f64 * 0.9) as u64;
    let after = facts(last).unwrap().busiest.unwrap().2;
    assert!((0.89..0.91).contains(&after), "{after}");
    let a = crate::ramp::analyse(&rec, 2);
    assert_eq!(
        a.verdict,
        "VERDICT: scales with users over the measured range"
    );
}

/// A real `ramp tcp` record of tests/servers/LockedTcpServer.java (8 pool threads, a 2 ms
/// sleep under one synchronized lock, 1..8 users, --pid): serialised, its JVM's GC,
/// compiler and other parked threads idle.
#[test]
fn a_real_java_ramp_under_one_lock_is_serialised() {
    let rec = real(include_str!("../tests/fixtures/ramp_java_lock.json"));
    let f = facts(rec.steps.last().unwrap()).unwrap();
    assert_eq!(judge(&f), Some(ThreadCase::Serialised));
    assert!(f.futex_threads >= 2, "{f:?}");
    assert!(f.idle.len() > 10, "{:?}", f.idle);
    let a = crate::ramp::analyse(&rec, 2);
    assert!(
        a.verdict.starts_with("VERDICT: serialisation: "),
        "{}",
        a.verdict
    );
    assert!(a
        .verdict
        .contains("threads waiting on a futex, serialised by a lock in the server process"));
}

/// Real `ramp http` records of tests/servers/LockedHttpServer.java (the JDK's
/// com.sun.net.httpserver, 8 pool threads, a 20 ms sleep per request; 1..8 users,
/// --pid), from tests/suite/threads.rs: with one global lock, serialised; without it, the pool
/// threads sleep in futex waits with a timeout (HotSpot's Thread.sleep), which the rule
/// before timeouts were read took for a lock.
#[test]
fn real_java_http_ramps_with_and_without_one_lock() {
    let rec = real(include_str!(
        "../../tpslab-report/tests/fixtures/ramp_java_http_lock.json"
    ));
    let f = facts(rec.steps.last().unwrap()).unwrap();
    assert_eq!(judge(&f), Some(ThreadCase::Serialised), "{f:?}");
    // 7 pool threads' worth wait on the lock while one sleeps in it (less the moments
    // they run): far beyond the spare threads.
    assert!(f.lock_excess >= 4.0, "{f:?}");
    let a = crate::ramp::analyse(&rec, 2);
    assert!(
        a.verdict
            .contains("threads waiting on a futex, serialised by a lock in the server process"),
        "{}",
        a.verdict
    );
    let usl = a.usl.unwrap();
    assert!(usl.sigma > 0.8, "{usl:?}");

    let rec = real(include_str!("../tests/fixtures/ramp_java_http_free.json"));
    let last = rec.steps.last().unwrap();
    let f = facts(last).unwrap();
    assert_eq!(judge(&f), None, "{f:?}");
    assert!(f.timed_share > 0.5 && f.lock_share < 0.2, "{f:?}");
    let a = crate::ramp::analyse(&rec, 2);
    assert_eq!(
        a.verdict,
        "VERDICT: scales with users over the measured range"
    );
    assert!(a.usl.unwrap().sigma < 0.1);
    assert!(
        a.lines
            .iter()
            .any(|l| l.contains("mostly waits with a timeout (a sleep or a timer), not a lock")),
        "{:?}",
        a.lines
    );
    // Read as before timeouts were known, the same step's threads are "serialised".
    let mut old = last.clone();
    for t in &mut old.per_thread {
        t.futex_timed = 0;
    }
    assert_eq!(judge(&facts(&old).unwrap()), Some(ThreadCase::Serialised));
}
