//! The TCP step verdict of `tpslab capacity tcp` end to end, against real servers
//! (tests/servers/tcp_server.py started by `--server-cmd`) on loopback, one step each (a
//! budget of 4 s holds one step of 1 s and its warm-up): a server whose backlog is 1 and
//! that accepts one connection every 20 ms, under a storm of 50 connects, gives at its
//! accept queue (the listen socket's own drops, by sock_diag); a server that resets every
//! connection gives by resets; a prefork server (an idle master, two busy worker
//! processes on one CPU) is judged by its whole process tree: saturated, not waiting.

use crate::common;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn server_py() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/servers/tcp_server.py")
}

fn ready(test: &str) -> bool {
    // `python3` on PATH (a pyenv shim, or /usr/bin/python3).
    let ok = std::process::Command::new("python3")
        .arg("-c")
        .arg("pass")
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        common::skip(test, "python3 not on PATH");
    }
    ok
}

/// `tpslab capacity tcp --server-cmd CMD` for one failing step at `rate` on
/// `connections` connections: its record. The server command's `{port}` is tpslab's.
fn one_step(tag: &str, server: &str, rate: &str, connections: &str) -> Value {
    let json = common::tmp(&format!("capacity_stream_{tag}.json"));
    let _ = std::fs::remove_file(&json);
    let mut c = common::tpslab();
    c.args(["capacity", "tcp", "--server-cmd", server])
        .args(["--start-rate", rate, "--connections", connections])
        .args([
            "--step-duration",
            "1s",
            "--warmup",
            "300ms",
            "--timeout",
            "1s",
        ])
        .args(["--budget", "4s", "--load-threads", "1", "--json"])
        .arg(&json);
    let t0 = Instant::now();
    let out = common::run(c);
    assert!(out.status.success(), "capacity tcp failed: {}", out.status);
    assert!(
        t0.elapsed() < Duration::from_secs(30),
        "took {:?}",
        t0.elapsed()
    );
    common::assert_report_reproduces(&json, &out.stdout);
    common::record(&json)
}

/// The verdict at the first failing rate: (case, layer, evidence texts); Err when no step
/// failed (a host too busy for the generator: an invalid step).
fn boundary(rec: &Value) -> Result<(String, String, Vec<String>), String> {
    let b = &rec["boundary"];
    if b.is_null() {
        return Err(format!("no failing step: {}", rec["steps"]));
    }
    let ev = b["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let s = |k: &str| e[k].as_str().unwrap_or_default().to_string();
            format!("{} [{}]", s("text"), s("source"))
        })
        .collect();
    Ok((
        b["case"].as_str().unwrap().to_string(),
        b["layer"].as_str().unwrap().to_string(),
        ev,
    ))
}

#[test]
fn a_slow_accepting_server_under_a_connect_storm_gives_at_its_accept_queue() {
    let test =
        "capacity_stream::a_slow_accepting_server_under_a_connect_storm_gives_at_its_accept_queue";
    if !ready(test) {
        return;
    }
    let _serial = common::serial();
    let server = format!("python3 {} slowaccept {{port}} 1 20", server_py().display());
    // Retried once: a step the generator could not deliver (a busy host) names nothing.
    let Some((case, layer, ev)) = common::retry(test, 2, || {
        boundary(&one_step("slowaccept", &server, "500", "50"))
    }) else {
        return;
    };
    assert_eq!(case, "accept_queue_full", "{layer}\n{ev:#?}");
    // The target's own listen socket, by its drops, with its backlog of 1.
    assert!(
        layer.starts_with("the server's accept queue: ")
            && layer
                .contains("connection requests dropped at the listen socket on the target's port")
            && layer.contains("of its backlog 1 waiting for accept"),
        "{layer}"
    );
    let own = ev
        .iter()
        .find(|e| e.contains("(sk_drops)"))
        .expect("the listen socket's own drops as evidence");
    let n: u64 = own
        .trim_start_matches("listen socket on the target's port: ")
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap_or_else(|_| panic!("{own}"));
    // 50 connects at once at a queue of 2: most of their SYNs are dropped, at least once.
    assert!(n >= 10, "{own}");
    assert!(
        ev.iter()
            .any(|e| e.contains("listen sockets only, the target's port, every 10 ms")),
        "{ev:#?}"
    );
}

#[test]
fn a_server_that_resets_every_connection_gives_by_resets() {
    let test = "capacity_stream::a_server_that_resets_every_connection_gives_by_resets";
    if !ready(test) {
        return;
    }
    let _serial = common::serial();
    let server = format!("python3 {} reset {{port}}", server_py().display());
    let Some((case, layer, ev)) = common::retry(test, 2, || {
        boundary(&one_step("reset", &server, "500", "10"))
    }) else {
        return;
    };
    assert_eq!(case, "connections_reset", "{layer}\n{ev:#?}");
    assert!(
        layer.starts_with("requests reset by the server ("),
        "{layer}"
    );
    // Nothing dropped at its queue (backlog 1024, accepted at once).
    assert!(
        ev.iter()
            .any(|e| e
                .starts_with("listen socket on the target's port: 0 connection requests dropped")),
        "{ev:#?}"
    );
}

#[test]
fn a_prefork_server_is_judged_by_its_workers_not_its_idle_master() {
    let test = "capacity_stream::a_prefork_server_is_judged_by_its_workers_not_its_idle_master";
    // The server runs on CPU 1 (the generator's CPU 0 beside it).
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        common::skip(
            test,
            "the prefork server needs CPU 1: this host has one CPU",
        );
        return;
    }
    if !ready(test) || !common::need(test, "/usr/bin/taskset") {
        return;
    }
    let _serial = common::serial();
    // Two workers of 1 ms of CPU work a request on one CPU: at most 1,000 requests a
    // second; 2,000 are asked. The master (the PID tpslab finds: it holds the listen
    // socket first) sleeps in pause(): judged alone, its one thread is "waiting".
    let server = format!(
        "taskset -c 1 python3 {} prefork {{port}} 2 1000",
        server_py().display()
    );
    let Some((case, layer, ev)) = common::retry(test, 2, || {
        boundary(&one_step("prefork", &server, "2000", "10"))
    }) else {
        return;
    };
    assert_eq!(case, "server_saturated", "{layer}\n{ev:#?}");
    assert!(
        layer.starts_with("the server's threads (3 processes): saturated"),
        "{layer}"
    );
    assert!(
        ev.iter().any(|e| e
            .starts_with("3 server threads in 3 processes (the PID and its descendants)")
            && e.contains("on 1 CPUs")),
        "{ev:#?}"
    );
}

/// `capacity tcp --live` under tmux (a server socket of the test's own): the search's view
/// (its steps and bracket above the step running, the open loop's requests/s) on the
/// alternate screen while it goes, against tpslab's own server; the search ends by its
/// budget with exit 0 and its record. Without a terminal: one line, exit 2.
#[test]
fn capacity_tcp_live_shows_the_search_and_wants_a_terminal() {
    let test = "capacity_stream::capacity_tcp_live_shows_the_search_and_wants_a_terminal";
    let out = common::tpslab()
        .args(["capacity", "tcp", "127.0.0.1:9", "--no-history", "--live"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("--live: standard output is not a terminal"),
        "{err}"
    );
    if !common::need(test, "/usr/bin/tmux") {
        return;
    }
    let _serial = common::serial();
    let dir = common::tmp("capacity_tcp_live");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (rec, rc) = (dir.join("rec.json"), dir.join("rc"));
    let sock = format!("tpslab-test-cap-tcp-{}", std::process::id());
    let tmux = |args: &[&str]| {
        let o = std::process::Command::new("tmux")
            .args(["-L", &sock])
            .args(args)
            .output()
            .expect("run tmux");
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let script = format!(
        "XDG_DATA_HOME={d} {bin} capacity tcp --server-serial 1ms --start-rate 200 \
         --step-duration 1s --warmup 300ms --budget 8s --no-history --live --json {rec} \
         2>/dev/null; echo $? > {rc}; sleep 20",
        d = dir.display(),
        bin = env!("CARGO_BIN_EXE_tpslab"),
        rec = rec.display(),
        rc = rc.display(),
    );
    tmux(&["new-session", "-d", "-x", "110", "-y", "34", &script]);
    let t0 = Instant::now();
    let mut seen = None;
    while t0.elapsed() < Duration::from_secs(15) && seen.is_none() {
        let s = tmux(&["capture-pane", "-p"]);
        if s.contains("now capacity step 2") {
            seen = Some(s);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut code = None;
    while t0.elapsed() < Duration::from_secs(30) && code.is_none() {
        code = std::fs::read_to_string(&rc).ok().filter(|s| !s.is_empty());
        std::thread::sleep(Duration::from_millis(100));
    }
    tmux(&["kill-server"]);
    let s = seen.expect("no live view of the search at its second step");
    assert!(s.contains("tpslab capacity tcp"), "{s}");
    // The server the search starts has no port yet when the header is made.
    assert!(
        s.contains("the server the search starts, on 127.0.0.1"),
        "{s}"
    );
    assert!(!s.contains("127.0.0.1:0"), "{s}");
    assert!(s.contains("step 1"), "{s}");
    assert!(s.contains("req/s: intended"), "{s}");
    assert_eq!(code.as_deref().map(str::trim), Some("0"), "exit status");
    let r = common::record(&rec);
    assert_eq!(r["kind"], "capacity");
    assert!(!r["steps"].as_array().unwrap().is_empty(), "{r}");
}
