//! The ramp's verdict judges the server threads that did the work, on real servers
//! started here on free loopback ports and killed by PID: Debian's redis-server (one
//! event-loop thread beside four idle helpers) is saturated on one thread, not held by a
//! lock; a small Java service (tests/servers/LockedTcpServer.java: 8 pool threads doing
//! their work under one global lock) is serialised by a lock, and the same service
//! without the lock is not; S3 in miniature over HTTP (tests/servers/LockedHttpServer.java
//! on the JDK's com.sun.net.httpserver) finds the knee, sigma near 1 and a lock with it,
//! sigma near 0 and no lock without. Each test skips with a printed reason when its
//! server's binary is absent.

use crate::common;

use serde_json::Value;
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A free loopback TCP port (bound, then released for the server).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// Starts `cmd` (output to a log), killed by its PID on drop; waits until it accepts TCP
/// connections on 127.0.0.1:`port`.
fn start(mut cmd: Command, tag: &str, port: u16) -> common::Kill {
    let log = common::tmp(&format!("{tag}.log"));
    let file = std::fs::File::create(&log).expect("log file");
    cmd.stdin(Stdio::null())
        .stdout(file.try_clone().unwrap())
        .stderr(file);
    let mut k = common::Kill(cmd.spawn().unwrap_or_else(|e| panic!("spawn {tag}: {e}")));
    let deadline = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Some(st) = k.0.try_wait().unwrap() {
            panic!(
                "{tag} exited ({st}): {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        assert!(
            Instant::now() < deadline,
            "{tag} not listening on {port} after 30 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    k
}

/// `tpslab ramp tcp 127.0.0.1:PORT --pid PID` with `request` as each request, replies
/// ending in \r\n: the record and the printed report.
fn ramp(
    tag: &str,
    port: u16,
    pid: u32,
    request: &[u8],
    users: &str,
    step: &str,
) -> (Value, String) {
    let req = common::tmp(&format!("{tag}.req"));
    std::fs::write(&req, request).unwrap();
    let json = common::tmp(&format!("{tag}.json"));
    let mut c = common::tpslab();
    c.args(["ramp", "tcp", &format!("127.0.0.1:{port}")])
        .args(["--framing", "delim:\\r\\n", "--payload-file"])
        .arg(&req)
        .args(["--pid", &pid.to_string(), "--users", users, "--step", step])
        .args(["--step-duration", "1s", "--warmup", "300ms", "-q", "--json"])
        .arg(&json);
    let out = common::run(c);
    assert!(out.status.success(), "exit {:?}", out.status);
    common::assert_report_reproduces(&json, &out.stdout);
    (
        common::record(&json),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

fn last_step(rec: &Value) -> &Value {
    rec["steps"].as_array().unwrap().last().unwrap()
}

#[test]
fn redis_is_saturated_on_one_thread_not_waiting_on_a_lock() {
    // One at a time: a JVM compiling its source beside a ramp starves the other's server.
    let _one = common::serial();
    const T: &str = "threads::redis_is_saturated_on_one_thread_not_waiting_on_a_lock";
    if !common::need(T, "/usr/bin/redis-server") {
        return;
    }
    // A busy host (builds or another suite beside this one) keeps redis's one thread
    // waiting for a CPU: its TPS then grows with users for want of a CPU, not of work.
    // Such a run is retried on a new server, up to 3 times, and then counted as spoiled
    // when the thread waited for a CPU over 20 % of the last step (schedstat).
    let Some((rec, out, pid)) = common::retry(T, 3, || {
        let port = free_port();
        let mut cmd = Command::new("/usr/bin/redis-server");
        cmd.args([
            "--port",
            &port.to_string(),
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .args(["--daemonize", "no"]);
        let server = start(cmd, "redis", port);
        let pid = server.0.id();
        let (rec, out) = ramp("redis", port, pid, b"PING\r\n", "1..64", "x4");
        let verdict = rec["verdict"].as_str().unwrap();
        let main = &last_step(&rec)["per_thread"][0];
        let waited = main["states"]["runqueue_ns"].as_f64().unwrap_or(0.0);
        let span = main["span_ns"].as_f64().unwrap();
        if !verdict.starts_with("VERDICT: saturated: one thread at ~100 % of a CPU")
            && waited > 0.2 * span
        {
            return Err(format!(
                "redis's thread waited for a CPU {:.0} % of the last step: {verdict}",
                100.0 * waited / span
            ));
        }
        Ok((rec, out, pid))
    }) else {
        return;
    };
    let verdict = rec["verdict"].as_str().unwrap();
    let main = &last_step(&rec)["per_thread"][0];
    if verdict.starts_with("VERDICT: CPU contention: one thread runnable ~100 %") {
        // The host's CPUs were busy elsewhere: the main thread was on a CPU less than half
        // the step, by schedstat.
        let on_cpu = main["states"]["on_cpu_ns"].as_f64().unwrap();
        let span = main["span_ns"].as_f64().unwrap();
        assert!(on_cpu < 0.5 * span, "{on_cpu} of {span}: {verdict}");
    } else {
        assert!(
            verdict.starts_with("VERDICT: saturated: one thread at ~100 % of a CPU"),
            "{verdict}"
        );
    }
    assert!(verdict.contains("redis-server"), "{verdict}");
    assert!(!verdict.contains("concurrency cap"), "{verdict}");
    // The main thread did the work; its helpers (bio_*, jemalloc_bg_thd) idled apart.
    let per = last_step(&rec)["per_thread"].as_array().unwrap();
    assert!(per.len() >= 2, "{per:?}");
    assert_eq!(per[0]["tid"].as_u64(), Some(pid as u64), "most CPU first");
    assert!(out.contains("other threads idle"), "{out}");
    assert!(
        !out.contains("waiting on a lock"),
        "idle helpers' futex waits judged: {out}"
    );
}

/// The Java service of tests/servers, run from source: PORT, a 2 ms sleep per request,
/// under the global lock or not.
fn java(port: u16, locked: bool) -> common::Kill {
    let servers = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/servers");
    let mut cmd = Command::new("java");
    cmd.arg(servers.join("LockedTcpServer.java"))
        .arg(port.to_string())
        .args(["2", if locked { "1" } else { "0" }]);
    start(cmd, if locked { "java-locked" } else { "java-free" }, port)
}

#[test]
fn a_java_service_under_one_lock_is_serialised_and_without_it_is_not() {
    // One at a time: a JVM compiling its source beside a ramp starves the other's server.
    let _one = common::serial();
    const T: &str = "a_java_service_under_one_lock_is_serialised_and_without_it_is_not";
    if Command::new("java").arg("-version").output().is_err() {
        common::skip(T, "java not installed");
        return;
    }
    // Both JVMs start together (each compiles its source for ~2 s of CPU; on 2 CPUs side
    // by side); the free one idles while the locked one is ramped.
    let (port, free_port_) = (free_port(), free_port());
    let (server, free) = std::thread::scope(|s| {
        let free = s.spawn(|| java(free_port_, false));
        (
            java(port, true),
            free.join().expect("start the free server"),
        )
    });
    let (rec, out) = ramp("java-locked", port, server.0.id(), b"x\n", "1..8", "x2");
    drop(server);
    let verdict = rec["verdict"].as_str().unwrap();
    assert!(verdict.starts_with("VERDICT: serialisation: "), "{verdict}");
    assert!(
        verdict.contains("threads waiting on a futex, serialised by a lock in the server process"),
        "{verdict}"
    );
    // The JVM's own threads (GC, compilers, ...) are idle, shown apart.
    assert!(out.contains("other threads idle"), "{out}");
    // Without the lock the 8 threads sleep side by side: TPS grows to 8 users, no lock.
    // (Up to 8 users: one pool thread per connection serves them all.)
    let (rec, _) = ramp("java-free", free_port_, free.0.id(), b"x\n", "1..8", "x2");
    drop(free);
    let verdict = rec["verdict"].as_str().unwrap();
    assert!(!verdict.contains("serialis"), "{verdict}");
    assert!(!verdict.contains("futex"), "{verdict}");
}

/// S3 in miniature on a real HTTP server (tests/servers/LockedHttpServer.java: the JDK's
/// com.sun.net.httpserver with an executor of 8 threads, a 20 ms sleep per request, like
/// a database round trip, under one global lock or not), run from source on PORT.
fn java_http(port: u16, locked: bool) -> common::Kill {
    let servers = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/servers");
    let mut cmd = Command::new("java");
    cmd.arg(servers.join("LockedHttpServer.java"))
        .arg(port.to_string())
        .args(["20", if locked { "1" } else { "0" }]);
    let tag = if locked {
        "java-http-locked"
    } else {
        "java-http-free"
    };
    start(cmd, tag, port)
}

/// `tpslab ramp http http://127.0.0.1:PORT/ --pid PID --users 1..8 --step x2` (1 s
/// steps: ~50 requests each under the 20 ms lock): the record and the printed report. Without `pid`, a 1 s step of 8 users that
/// only warms the JVM (its JIT compiles the request path; a first step spent compiling
/// would bend the curve by itself), nothing kept.
fn ramp_http(tag: &str, port: u16, pid: Option<u32>) -> Option<(Value, String)> {
    let url = format!("http://127.0.0.1:{port}/");
    let mut c = common::tpslab();
    c.args(["ramp", "http", &url, "-q"]);
    let Some(pid) = pid else {
        c.args([
            "--users",
            "8..8",
            "--step-duration",
            "1s",
            "--warmup",
            "200ms",
        ]);
        let out = common::run(c);
        assert!(out.status.success(), "warm-up: exit {:?}", out.status);
        return None;
    };
    let json = common::tmp(&format!("{tag}.json"));
    c.args(["--pid", &pid.to_string(), "--users", "1..8", "--step", "x2"])
        .args(["--step-duration", "1s", "--warmup", "300ms", "--json"])
        .arg(&json);
    let out = common::run(c);
    assert!(out.status.success(), "exit {:?}", out.status);
    common::assert_report_reproduces(&json, &out.stdout);
    Some((
        common::record(&json),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    ))
}

fn sigma(rec: &Value) -> Option<f64> {
    rec["usl"]["sigma"].as_f64()
}

fn tps(rec: &Value) -> Vec<f64> {
    rec["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["tps"].as_f64().unwrap())
        .collect()
}

#[test]
fn s3_in_miniature_over_http_a_global_lock_is_serialised_and_without_it_scales() {
    // One at a time: a JVM compiling its source beside a ramp starves the other's server.
    let _one = common::serial();
    const T: &str = "s3_in_miniature_over_http_a_global_lock_is_serialised_and_without_it_scales";
    if Command::new("java").arg("-version").output().is_err() {
        common::skip(T, "java not installed");
        return;
    }
    // With the lock: one request at a time holds it for 20 ms, so TPS stays near 50
    // whatever the users (at 1 user the client's share of each cycle is small: sigma
    // near 1), and the other pool threads wait on it.
    // Both JVMs start together (each compiles its source for ~2 s of CPU); the free one
    // idles while the locked one is ramped.
    let (port, free_port_) = (free_port(), free_port());
    let (server, free_server) = std::thread::scope(|s| {
        let free = s.spawn(|| java_http(free_port_, false));
        (
            java_http(port, true),
            free.join().expect("start the free server"),
        )
    });
    let pid = server.0.id();
    ramp_http("java-http-warm", port, None);
    // Retried once: a step that the host's other work (a compiler beside the test, the
    // JVM's own JIT or GC) starves bends the curve by itself; the verdict's wording is
    // checked on every attempt (a lock is never judged something else).
    let locked = common::retry(T, 2, || {
        let (rec, out) = ramp_http("java-http-locked", port, Some(pid)).unwrap();
        let verdict = rec["verdict"].as_str().unwrap().to_string();
        if !verdict.starts_with("VERDICT: serialisation: ") {
            return Err(format!("not serialised: {verdict}\n{out}"));
        }
        assert!(
            verdict
                .contains("threads waiting on a futex, serialised by a lock in the server process"),
            "{verdict}"
        );
        let s = sigma(&rec).ok_or_else(|| format!("no USL fit: {out}"))?;
        if s < 0.8 || rec["knee_users"].is_null() {
            return Err(format!("sigma {s}, knee {}: {out}", rec["knee_users"]));
        }
        Ok((rec, out))
    });
    drop(server);
    let Some((rec, out)) = locked else { return };
    eprintln!("locked: {}\n{out}", rec["verdict"]);
    // The JVM's own threads (GC, compilers, ...) are idle, shown apart; the pool thread
    // in the lock sleeps in a futex with a timeout (Thread.sleep), the others without.
    assert!(out.contains("other threads idle"), "{out}");
    let last = last_step(&rec);
    let timed: u64 = last["per_thread"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["futex_timed"].as_u64().unwrap_or(0))
        .sum();
    assert!(timed > 0, "no timed futex wait seen: {last}");

    // Without it the 8 pool threads sleep side by side: TPS grows with the users.
    let (port, server) = (free_port_, free_server);
    let pid = server.0.id();
    ramp_http("java-http-warm", port, None);
    // Retried once: on 2 shared CPUs another process's burst can flatten a step of a
    // service that scales; a lock verdict is refused on every attempt.
    let free = common::retry(T, 2, || {
        let (rec, out) = ramp_http("java-http-free", port, Some(pid)).unwrap();
        let verdict = rec["verdict"].as_str().unwrap().to_string();
        assert!(!verdict.contains("serialis"), "{verdict}\n{out}");
        assert!(!verdict.contains("futex"), "{verdict}\n{out}");
        let t = tps(&rec);
        let s = sigma(&rec).ok_or_else(|| format!("no USL fit: {out}"))?;
        if t[t.len() - 1] < 3.0 * t[0] || s > 0.1 {
            return Err(format!("TPS {t:?}, sigma {s}: {out}"));
        }
        Ok((rec, out))
    });
    drop(server);
    let Some((rec, out)) = free else { return };
    eprintln!("free: {}\n{out}", rec["verdict"]);
}
