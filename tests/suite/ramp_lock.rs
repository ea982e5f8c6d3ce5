//! S3 with two faults at once (issue 54): a Python `socketserver.ThreadingMixIn` HTTP/1.1
//! service whose handler holds one global lock for 4 ms (at most ~250 requests/s) and
//! whose listen backlog is socketserver's 5. As users join, their connection requests are
//! dropped at the full accept queue, but what holds TPS flat is the lock: the ramp's
//! headline is the lock with its share of the response-time ledger, the accept queue a
//! side finding with its own share and the step it starts at, and the ledger of the last
//! step explains its mean response time. The server is written here, started on a free
//! loopback port and killed by its PID.

use crate::common;

use serde_json::Value;
use std::process::{Command, Stdio};

/// The locked service: one write per reply (headers and body together, so Nagle and a
/// delayed ACK play no part), threads per connection, the lock held across a 4 ms sleep.
const LOCKED_HTTP: &str = r#"
import http.server, socketserver, sys, threading, time
LOCK = threading.Lock()
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        with LOCK:
            time.sleep(0.004)
        self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")
    def log_message(self, *a):
        pass
class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
S(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"#;

fn ramp(port: u16, pid: u32) -> (Value, String) {
    let json = common::tmp("ramp-python-lock.json");
    let mut c = common::tpslab();
    c.args(["ramp", "http", &format!("http://127.0.0.1:{port}/"), "-q"])
        .args([
            "--pid",
            &pid.to_string(),
            "--users",
            "1..64",
            "--step",
            "x4",
        ])
        .args(["--step-duration", "2s", "--warmup", "500ms", "--json"])
        .arg(&json);
    let out = common::run(c);
    assert!(out.status.success(), "exit {:?}", out.status);
    common::assert_report_reproduces(&json, &out.stdout);
    (
        common::record(&json),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn the_lock_heads_the_verdict_and_the_full_accept_queue_is_a_side_finding() {
    const T: &str = "the_lock_heads_the_verdict_and_the_full_accept_queue_is_a_side_finding";
    if !common::need(T, "/usr/bin/python3") {
        return;
    }
    let _one = common::serial();
    let port = common::free_port();
    let server = common::Kill(
        Command::new("python3")
            .args(["-c", LOCKED_HTTP, &port.to_string()])
            .stdin(Stdio::null())
            .spawn()
            .expect("python3"),
    );
    common::wait_listening(port, "the locked Python service");
    // Retried once: the new users' SYNs may all fit the queue on a quiet host (no drop,
    // no side finding to check), or another process may starve a step.
    let got = common::retry(T, 2, || {
        let neighbour = common::Neighbour::start(&[server.0.id()]);
        let (rec, out) = ramp(port, server.0.id());
        let drops: u64 = rec["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["listener_drops"].as_u64().unwrap_or(0))
            .sum();
        if drops == 0 {
            return Err(format!("no connection request was dropped: {out}"));
        }
        // Beside other work the threads sampled in turns can overlap the ledger's parts
        // (seen beside stress-ng: 225 ms of parts for a 190 ms mean), which then gives no
        // share: retried, then spoiled; on a quiet host the checks below judge it.
        let verdict = rec["verdict"].as_str().unwrap_or_default();
        if !verdict.contains("; ledger: ") {
            if let Some(busy) = neighbour.busy() {
                return Err(format!(
                    "the verdict gave no ledger share while {busy}: {verdict}"
                ));
            }
        }
        Ok((rec, out))
    });
    let Some((rec, out)) = got else { return };
    let verdict = rec["verdict"].as_str().unwrap();
    // The headline is the lock, with its share of the mean response time.
    assert!(verdict.starts_with("VERDICT: serialisation: "), "{out}");
    assert!(
        verdict.contains("; ledger: server threads waiting on a lock "),
        "{out}"
    );
    assert!(!verdict.contains("accept queue"), "{out}");
    // The full accept queue follows as a side finding, with its share and first step.
    let lines: Vec<&str> = rec["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    let side = lines
        .iter()
        .find(|l| l.starts_with("side finding: connections dropped at a full accept queue"))
        .unwrap_or_else(|| panic!("no side finding: {out}"));
    assert!(
        side.contains(" users on;") && side.contains("[ledger at 64 users: "),
        "{side}"
    );
    // The ledger of the last step attributes at least 80 % of its mean response time,
    // and its parts sum to the measured mean within 10 %.
    let l = rec["ledger"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(l["users"], 64, "{l}");
    let mean = l["mean_ms"].as_f64().unwrap();
    let parts: f64 = l["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["ms"].as_f64().unwrap())
        .sum();
    let step_mean = rec["steps"].as_array().unwrap().last().unwrap()["response"]["mean_ns"]
        .as_f64()
        .unwrap()
        / 1e6;
    assert!((mean - step_mean).abs() < 1e-6, "{mean} vs {step_mean}");
    eprintln!("ledger at 64 users: {parts:.2} of {mean:.2} ms attributed\n{out}");
    assert!(parts >= 0.8 * mean, "{parts} of {mean} ms: {l}");
    assert!((parts - mean).abs() <= 0.1 * mean, "{parts} vs {mean}: {l}");
    assert!(
        out.contains("response-time ledger at 64 users: mean "),
        "{out}"
    );
}

/// `capacity http` of the same service on 4 connections (fewer than its backlog, so no
/// connection request is dropped): each step with replies keeps its response-time ledger,
/// and the verdict at the first failing rate names the lock with its share of it.
#[test]
fn capacity_http_keeps_a_ledger_per_step_and_names_the_lock_at_the_boundary() {
    const T: &str = "capacity_http_keeps_a_ledger_per_step_and_names_the_lock_at_the_boundary";
    if !common::need(T, "/usr/bin/python3") {
        return;
    }
    let _one = common::serial();
    let port = common::free_port();
    let server = common::Kill(
        Command::new("python3")
            .args(["-c", LOCKED_HTTP, &port.to_string()])
            .stdin(Stdio::null())
            .spawn()
            .expect("python3"),
    );
    common::wait_listening(port, "the locked Python service");
    let json = common::tmp("capacity-python-lock.json");
    let got = common::retry(T, 2, || {
        let _ = std::fs::remove_file(&json);
        let mut c = common::tpslab();
        c.args([
            "capacity",
            "http",
            &format!("http://127.0.0.1:{port}/"),
            "-q",
        ])
        .args(["--pid", &server.0.id().to_string(), "--connections", "4"])
        .args([
            "--start-rate",
            "400",
            "--resolution",
            "50%",
            "--repeats",
            "1",
        ])
        .args([
            "--step-duration",
            "1s",
            "--warmup",
            "300ms",
            "--budget",
            "20s",
        ])
        .args(["--no-history", "--json"])
        .arg(&json);
        let neighbour = common::Neighbour::start(&[server.0.id()]);
        let out = common::run(c);
        let busy = neighbour.busy();
        assert!(out.status.success(), "exit {:?}", out.status);
        common::assert_report_reproduces(&json, &out.stdout);
        let rec = common::record(&json);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        // A busy host can make the threads look saturated or fail the generator.
        if rec["boundary"]["case"] != "server_waiting" {
            return Err(format!("no waiting threads at the boundary: {text}"));
        }
        // Or, with a neighbour taking CPU time, leave the ledger's parts overlapping (no
        // share given); on a quiet host the run is kept and judged below.
        if let (true, Some(busy)) = (text.contains("so no share is given"), &busy) {
            return Err(format!(
                "{busy}; the failing step's ledger parts overlap: {text}"
            ));
        }
        Ok((rec, text))
    });
    let Some((rec, out)) = got else { return };
    for s in rec["steps"].as_array().unwrap() {
        if s["answered_pps"].as_f64().unwrap() > 0.0 {
            let l = &s["ledger"];
            assert_eq!(l["users"], 4, "{s}");
            assert_eq!(l["outside_ms"], 0.0, "{s}");
            assert!(l["parts"].as_array().unwrap().len() >= 3, "{s}");
        }
    }
    let fail = rec["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["status"] == "fail")
        .expect("a failing step");
    let l = &fail["ledger"];
    let mean = l["mean_ms"].as_f64().unwrap();
    let part = |name: &str| {
        l["parts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["part"] == name)
            .map_or(0.0, |p| p["ms"].as_f64().unwrap())
    };
    // The lock is the largest part and a large share: 12.3 of 16.3 ms in the fixture's
    // run, 7.8 of 16.6 ms (4.1 ms unattributed by the 100 ms samples) in a suite's.
    let parts = l["parts"].as_array().unwrap();
    let largest = parts
        .iter()
        .max_by(|a, b| {
            a["ms"]
                .as_f64()
                .unwrap()
                .total_cmp(&b["ms"].as_f64().unwrap())
        })
        .unwrap();
    assert_eq!(largest["part"], "lock", "{l}");
    assert!(part("lock") >= 0.4 * mean, "{l}");
    let head = rec["boundary"]["headline"].as_str().unwrap();
    assert!(
        head.contains("; ledger: server threads waiting on a lock "),
        "{out}"
    );
    assert!(out.contains("response-time ledger at "), "{out}");
}

/// `load http` of the same service at a fixed rate above its lock's 250 requests/s (300),
/// on 4 connections, without `--pid`: the server is found by the URL's listening socket,
/// its threads sampled over the run, and the run's mean response time split in the record
/// and the report, the lock named with its share, in the ledger and the verdict (17.75 ms
/// mean, the lock 8.81 ms (50 %), asleep 4.30 ms, 4.44 ms unattributed in a run beside
/// two builds).
#[test]
fn load_http_finds_the_server_by_its_socket_and_names_the_lock_in_its_ledger() {
    const T: &str = "load_http_finds_the_server_by_its_socket_and_names_the_lock_in_its_ledger";
    if !common::need(T, "/usr/bin/python3") {
        return;
    }
    let _one = common::serial();
    let port = common::free_port();
    let server = common::Kill(
        Command::new("python3")
            .args(["-c", LOCKED_HTTP, &port.to_string()])
            .stdin(Stdio::null())
            .spawn()
            .expect("python3"),
    );
    common::wait_listening(port, "the locked Python service");
    let json = common::tmp("load-http-python-lock.json");
    let got = common::retry(T, 2, || {
        let _ = std::fs::remove_file(&json);
        let mut c = common::tpslab();
        c.args(["load", "http", &format!("http://127.0.0.1:{port}/"), "-q"])
            .args(["--rate", "300", "--connections", "4", "--duration", "2s"])
            .args(["--no-history", "--json"])
            .arg(&json);
        let neighbour = common::Neighbour::start(&[server.0.id()]);
        let out = common::run(c);
        let busy = neighbour.busy();
        assert!(out.status.success(), "exit {:?}", out.status);
        common::assert_report_reproduces(&json, &out.stdout);
        let rec = common::record(&json);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        // A neighbour's CPU time can leave the parts overlapping (no share given).
        if let (true, Some(busy)) = (text.contains("so no share is given"), &busy) {
            return Err(format!("{busy}; the ledger's parts overlap: {text}"));
        }
        Ok((rec, text))
    });
    let Some((rec, out)) = got else { return };
    let srv = &rec["result"]["server"];
    assert_eq!(srv["pid"], server.0.id(), "{srv}");
    assert_eq!(srv["found_by"], "address", "{srv}");
    let l = &srv["ledger"];
    assert_eq!(l["users"], 4, "{l}");
    assert_eq!(l["outside_ms"], 0.0, "{l}");
    let mean = l["mean_ms"].as_f64().unwrap();
    // The mean is the replies' from their send (the record's uncorrected latency).
    let uncorrected = rec["result"]["uncorrected"]["mean_ns"].as_f64().unwrap() / 1e6;
    assert!((mean - uncorrected).abs() < 0.01 * uncorrected, "{l}");
    let parts = l["parts"].as_array().unwrap();
    let lock = parts
        .iter()
        .find(|p| p["part"] == "lock")
        .map_or(0.0, |p| p["ms"].as_f64().unwrap());
    // Every request holds the lock 4 ms asleep; the queue for it is the largest part.
    let largest = parts
        .iter()
        .max_by(|a, b| {
            a["ms"]
                .as_f64()
                .unwrap()
                .total_cmp(&b["ms"].as_f64().unwrap())
        })
        .unwrap();
    assert_eq!(largest["part"], "lock", "{l}");
    assert!(lock >= 0.3 * mean, "{l}");
    assert!(
        out.contains("VERDICT: limited by the server's answers: ")
            && out.contains("; ledger: server threads waiting on a lock "),
        "{out}"
    );
    let line = out
        .lines()
        .find(|l| l.starts_with(&format!("Server PID {} (found by the URL's listening socket): response-time ledger at 300 requests/s: mean ", server.0.id())))
        .unwrap_or_else(|| panic!("no ledger line: {out}"));
    let pct = (100.0 * lock / mean).round() as u64;
    assert!(
        line.contains(&format!("server threads waiting on a lock {lock:.2} ms"))
            && line.contains(&format!("({pct} %)")),
        "{line}"
    );
    assert!(
        out.contains("  server threads waiting on a lock: threads' blocked time x share of samples in a futex without a timeout"),
        "{out}"
    );
}
