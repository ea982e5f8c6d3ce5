//! Nagle x delayed ACK for real on loopback: python3's `http.server` (HTTP/1.1
//! keep-alive, a handler that writes its headers and its body in two sends, as
//! `BaseHTTPRequestHandler` does unbuffered) answers one user in ~40 ms while idle:
//! Nagle holds the body until the client's delayed ACK of the headers. `ramp http` and
//! `load http` name it with the fix; the same server with TCP_NODELAY
//! (`disable_nagle_algorithm = True`) answers in well under 5 ms and nothing is said.
//! A run whose holds look like it is re-timed with the client acknowledging at once
//! (TCP_QUICKACK before each read): the holds go (confirmed); a server with TCP_NODELAY
//! that sleeps 45 ms between its headers and its body (a gap at the delayed-ACK timer,
//! DelayedACKs rising as much: named Nagle before the re-timing) keeps them and is said
//! to pause between its sends, not named Nagle.

use crate::common;

use serde_json::Value;
use std::process::{Command, Stdio};

/// python3's `http.server` on 127.0.0.1:`port`: HTTP/1.1 keep-alive, `GET` answered
/// with 200 and a 120-byte body written after its headers (two sends), `pause_ms`
/// after them; `nodelay`: with TCP_NODELAY on its connections (socketserver's
/// `disable_nagle_algorithm`).
fn server(port: u16, nodelay: bool, pause_ms: u32) -> String {
    format!(
        "import http.server, time\n\
         class H(http.server.BaseHTTPRequestHandler):\n\
         \x20   protocol_version = 'HTTP/1.1'\n\
         \x20   disable_nagle_algorithm = {}\n\
         \x20   def do_GET(self):\n\
         \x20       body = b'x' * 119 + b'\\n'\n\
         \x20       self.send_response(200)\n\
         \x20       self.send_header('Content-Length', str(len(body)))\n\
         \x20       self.end_headers()\n\
         \x20       time.sleep({pause})\n\
         \x20       self.wfile.write(body)\n\
         \x20   def log_message(self, *a):\n\
         \x20       pass\n\
         s = http.server.ThreadingHTTPServer(('127.0.0.1', {port}), H)\n\
         print('ready', flush=True)\n\
         s.serve_forever()\n",
        if nodelay { "True" } else { "False" },
        pause = f64::from(pause_ms) / 1000.0
    )
}

/// The server of [`server`] without a pause, started and ready; killed by its PID on drop.
fn start(nodelay: bool) -> (common::Kill, u16) {
    start_pausing(nodelay, 0)
}

/// The server of [`server`], started and ready; killed by its PID on drop.
fn start_pausing(nodelay: bool, pause_ms: u32) -> (common::Kill, u16) {
    let port = common::free_port();
    let mut py = Command::new("python3");
    py.args(["-c", &server(port, nodelay, pause_ms)])
        .stdout(Stdio::piped())
        // Its tracebacks for connections the client closed (BrokenPipeError): not ours.
        .stderr(Stdio::null());
    let mut child = common::Kill(py.spawn().expect("python3"));
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.0.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "ready");
    (child, port)
}

/// `ramp http` at one user for 1.5 s: its terminal output and record.
fn ramp(port: u16, tag: &str) -> (String, Value) {
    let url = format!("http://127.0.0.1:{port}/");
    let (code, out, err, rec) = common::with_record(
        &["ramp", "http", &url],
        &[
            "--users",
            "1..1",
            "--step-duration",
            "1500ms",
            "--warmup",
            "300ms",
        ],
        tag,
    );
    assert_eq!(code, Some(0), "{err}");
    (out, rec)
}

#[test]
fn two_writes_without_nodelay_are_named_nagle_x_delayed_ack_with_the_fix() {
    if !common::need(
        "two_writes_without_nodelay_are_named_nagle_x_delayed_ack_with_the_fix",
        "/usr/bin/python3",
    ) {
        return;
    }
    let (_srv, port) = start(false);
    let (out, rec) = ramp(port, "nagle-ramp");
    let step = &rec["steps"][0];
    let g = &step["reply_gaps"];
    let p50_ms = step["response"]["p50_ns"].as_f64().unwrap() / 1e6;
    assert!(p50_ms >= 30.0, "p50 {p50_ms} ms: {out}");
    let (held, small) = (g["held"].as_u64().unwrap(), g["small"].as_u64().unwrap());
    assert!(held >= 10 && held * 10 >= small * 9, "{g}");
    assert!(g["delayed_acks"].as_u64().unwrap() * 2 >= held, "{g}");
    // It explains the response time: the headline, with its share of the ledger.
    assert!(out.contains("VERDICT: Nagle x delayed ACK at 1 user(s): the server writes a reply in two or more sends; Nagle holds the last until the client's delayed ACK (~40 ms)"), "{out}");
    let ledger = rec["ledger"].as_array().expect("the ramp's ledger");
    let stall = ledger[0]["parts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["part"] == "transmission_stall")
        .expect("the stall measured")["ms"]
        .as_f64()
        .unwrap();
    let mean = ledger[0]["mean_ms"].as_f64().unwrap();
    assert!(stall >= 0.5 * mean, "stall {stall} ms of {mean}: {out}");
    // Re-timed with the client acknowledging at once: the holds went.
    let q = &g["quickack"];
    let (rq, rsmall, rheld) = (
        q["requests"].as_u64().unwrap(),
        q["small"].as_u64().unwrap(),
        q["held"].as_u64().unwrap(),
    );
    assert!(
        (10..=50).contains(&rq) && rsmall >= 10 && rheld * 10 < rsmall,
        "{q}"
    );
    assert!(q["duration_ns"].as_u64().unwrap() <= 2_000_000_000, "{q}");
    assert!(
        out.contains(
            "confirmed: with the client acknowledging at once (TCP_QUICKACK set before each read"
        ),
        "{out}"
    );
    assert!(out.contains("Fix: set TCP_NODELAY"), "{out}");
    assert!(out.contains("disable_nagle_algorithm = True"), "{out}");
    assert!(
        out.contains("tpslab's load does not set TCP_QUICKACK"),
        "{out}"
    );

    // The open loop says it too: 1 connection at 30 requests/s (a request due within the
    // delayed-ACK timeout of the last reply: at 15/s, 66 ms apart, Linux acks at once).
    let url = format!("http://127.0.0.1:{port}/");
    let (code, out, err, rec) = common::load_http(
        &url,
        &["--rate", "30", "--connections", "1", "--duration", "1500ms"],
        "nagle-load",
    );
    assert_eq!(code, Some(0), "{err}");
    let g = &rec["result"]["reply_gaps"];
    assert!(g["held"].as_u64().unwrap() >= 10, "{g}");
    assert!(g["quickack"]["small"].as_u64().unwrap() >= 10, "{g}");
    assert!(
        out.contains("confirmed: with the client acknowledging at once"),
        "{out}"
    );
    assert!(
        out.contains("Nagle x delayed ACK: the server writes a reply in two or more sends"),
        "{out}"
    );
}

#[test]
fn with_tcp_nodelay_the_same_server_answers_fast_and_nothing_is_said() {
    if !common::need(
        "with_tcp_nodelay_the_same_server_answers_fast_and_nothing_is_said",
        "/usr/bin/python3",
    ) {
        return;
    }
    let (_srv, port) = start(true);
    let (out, rec) = ramp(port, "nagle-nodelay");
    let step = &rec["steps"][0];
    let p50_ms = step["response"]["p50_ns"].as_f64().unwrap() / 1e6;
    assert!(p50_ms < 5.0, "p50 {p50_ms} ms: {out}");
    assert_eq!(step["reply_gaps"]["held"], 0, "{}", step["reply_gaps"]);
    assert!(
        step["reply_gaps"]["small"].as_u64().unwrap() > 100,
        "{step}"
    );
    assert!(!out.contains("Nagle"), "{out}");
}

#[test]
fn a_server_pausing_between_its_sends_is_not_named_nagle_once_re_timed() {
    if !common::need(
        "a_server_pausing_between_its_sends_is_not_named_nagle_once_re_timed",
        "/usr/bin/python3",
    ) {
        return;
    }
    // TCP_NODELAY, 45 ms between the headers and the body: each reply's gap is at the
    // delayed-ACK timer and the client's delayed ACK fires in each pause.
    let (_srv, port) = start_pausing(true, 45);
    let (out, rec) = ramp(port, "nagle-pause");
    let g = &rec["steps"][0]["reply_gaps"];
    let (held, small) = (g["held"].as_u64().unwrap(), g["small"].as_u64().unwrap());
    assert!(held >= 10 && held * 10 >= small * 9, "{g}");
    // The re-timing kept the holds: the server's pause, whatever the ACKs do.
    let q = &g["quickack"];
    let (rsmall, rheld) = (q["small"].as_u64().unwrap(), q["held"].as_u64().unwrap());
    assert!(rsmall >= 10 && rheld * 10 >= rsmall * 9, "{q}");
    assert!(q["requests"].as_u64().unwrap() <= 50, "{q}");
    assert!(q["duration_ns"].as_u64().unwrap() <= 2_100_000_000, "{q}");
    assert!(!out.contains("Nagle x delayed ACK at"), "{out}");
    assert!(!out.contains("Fix: set TCP_NODELAY"), "{out}");
    assert!(
        out.contains(
            "Replies held between the server's sends at 1 user(s), not Nagle x delayed ACK"
        ),
        "{out}"
    );
    assert!(out.contains("the stall stayed"), "{out}");
}
