//! `tpslab load http` for real on loopback: against tpslab's own `serve http`, against a
//! server of this test's own that stalls 200 ms once (the corrected latency shows the
//! stall, the uncorrected hides it, as wrk2 documents), against Debian's nginx for the
//! rate's accuracy, and against a port nothing listens on.

use crate::common;

use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

/// `tpslab load http URL ARGS --json`: its exit code, stderr and record body (the
/// terminal output reproduced by `tpslab report` from it when the run succeeded).
fn load(url: &str, args: &[&str], tag: &str) -> (Option<i32>, String, Value) {
    let json = common::tmp(&format!("{tag}.json"));
    let _ = std::fs::remove_file(&json);
    let mut c = common::tpslab();
    c.args(["load", "http", url])
        .args(args)
        .arg("--json")
        .arg(&json);
    let out = common::run(c);
    if out.status.success() {
        common::assert_report_reproduces(&json, &out.stdout);
    }
    let rec = common::record(Path::new(&json));
    assert_eq!(rec["kind"], "load_http");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        rec,
    )
}

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// Every request sent on time and answered 2xx, nothing failed; each corrected quantile at
/// least the uncorrected one (a request's latency from its intended time is never less).
fn all_answered(r: &Value) {
    let res = &r["result"];
    assert!(n(&res["sent"]) > 0, "{res}");
    assert_eq!(n(&res["status"]["s2xx"]), n(&res["sent"]), "{res}");
    for k in ["refused", "reset", "timeout", "closed", "protocol", "other"] {
        assert_eq!(n(&res["errors"][k]), 0, "{k}: {res}");
    }
    assert_eq!(n(&res["unanswered"]), 0, "{res}");
    for q in ["p50_ns", "p90_ns", "p99_ns", "p999_ns", "max_ns"] {
        assert!(
            n(&res["corrected"][q]) >= n(&res["uncorrected"][q]),
            "{q}: {res}"
        );
    }
}

/// The achieved rate's error against the plan's, a fraction.
fn rate_error(r: &Value) -> f64 {
    let sent = n(&r["result"]["sent"]) as f64;
    let secs = n(&r["plan"]["duration_ns"]) as f64 / 1e9;
    sent / secs / r["plan"]["rate"].as_f64().unwrap() - 1.0
}

#[test]
fn against_serve_http_every_request_is_sent_on_its_schedule_and_answered() {
    let port = common::free_port();
    let mut srv = common::tpslab();
    srv.args([
        "serve",
        "http",
        "--bind",
        &format!("127.0.0.1:{port}"),
        "--duration",
        "20s",
    ])
    .stdout(std::process::Stdio::null());
    let _srv = common::Kill(srv.spawn().expect("spawn serve http"));
    common::wait_listening(port, "tpslab serve http");
    let url = format!("http://127.0.0.1:{port}/");
    // The plan's end is checked when a request starts; a loop thread a busy host preempts
    // between that check and its write finishes the write after the end (seen: 0.16 ms
    // after 2 s while the machine compiled beside the test). Up to three attempts for a
    // run whose every write finished before the end; never a request started after it.
    let test = "against_serve_http_every_request_is_sent_on_its_schedule_and_answered";
    let run = common::retry(test, 3, || {
        let (code, err, r) = load(
            &url,
            &["--rate", "1000", "--connections", "4", "--duration", "2s"],
            "load-serve-http",
        );
        let last = r["result"]["last_sent_s"].as_f64().unwrap_or(0.0);
        if code == Some(0) && last >= 2.0 && n(&r["result"]["behind"]) > 0 {
            return Err(format!(
                "the last write finished at {last} s, after the end, behind a busy host"
            ));
        }
        Ok((code, err, r))
    });
    let Some((code, err, r)) = run else { return };
    assert_eq!(code, Some(0), "{err}");
    all_answered(&r);
    let res = &r["result"];
    assert_eq!(n(&res["intended"]), 2000);
    // Each connection kept alive: 4 made, every request's bytes written and read.
    assert_eq!(n(&res["connections"]), 4, "{res}");
    let sent = n(&res["sent"]);
    assert!(n(&res["bytes_out"]) >= sent * 30, "{res}");
    assert!(n(&res["bytes_in"]) >= sent * 40, "{res}");
    // The plan's end is kept: the last request written before 2 s after the start.
    assert!(res["last_sent_s"].as_f64().unwrap() < 2.0, "{res}");
}

/// An HTTP/1.1 server that answers every request `200 ok`, but sleeps `stall` before its
/// `nth` reply (counted over all connections, from 1). Runs until the test ends.
fn stalling_server(nth: usize, stall: Duration) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let count = Arc::new(AtomicUsize::new(0));
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            let count = count.clone();
            std::thread::spawn(move || {
                s.set_nodelay(true).unwrap();
                let mut have = Vec::new();
                let mut buf = [0u8; 4096];
                loop {
                    let Ok(k) = s.read(&mut buf) else { return };
                    if k == 0 {
                        return;
                    }
                    have.extend_from_slice(&buf[..k]);
                    while let Some(end) = have.windows(4).position(|w| w == b"\r\n\r\n") {
                        have.drain(..end + 4);
                        if count.fetch_add(1, SeqCst) + 1 == nth {
                            std::thread::sleep(stall);
                        }
                        if s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                            .is_err()
                        {
                            return;
                        }
                    }
                }
            });
        }
    });
    port
}

#[test]
fn a_200ms_stall_shows_in_the_corrected_p99_and_hides_from_the_uncorrected() {
    // One connection at 1000/s for 2 s, the 500th reply 200 ms late: the ~200 requests
    // intended during the stall go late, at once after it, each with its wait in the
    // corrected latency (0..200 ms: ~10 % of all, so the corrected p99 is ~180 ms); the
    // uncorrected counts one slow request of 2000 (0.05 %: below its p99.9).
    // Retried (at most 3 times, counted as a skip) only when the host was too busy for the
    // uncorrected p99 of a loopback round trip to stay under 20 ms: that measures the
    // machine, not the correction; the corrected figures are checked on every attempt.
    let test = "a_200ms_stall_shows_in_the_corrected_p99_and_hides_from_the_uncorrected";
    let Some(r) = common::retry(test, 3, || {
        let port = stalling_server(500, Duration::from_millis(200));
        let url = format!("http://127.0.0.1:{port}/");
        let (code, err, r) = load(
            &url,
            &["--rate", "1000", "--connections", "1", "--duration", "2s"],
            "load-stall",
        );
        assert_eq!(code, Some(0), "{err}");
        all_answered(&r);
        let res = &r["result"];
        let (c, u) = (&res["corrected"], &res["uncorrected"]);
        // The stall itself, in both.
        assert!(n(&u["max_ns"]) >= 200_000_000, "{res}");
        assert!(n(&c["max_ns"]) >= 200_000_000, "{res}");
        // Corrected: the requests it delayed.
        assert!(n(&c["p99_ns"]) >= 100_000_000, "corrected p99: {res}");
        assert!(n(&res["late"]) >= 150, "late sends: {res}");
        assert!(n(&res["max_lag_ns"]) >= 150_000_000, "{res}");
        // Caught up: (almost) every intended request still sent by the end.
        assert!(rate_error(&r).abs() < 0.01, "{res}");
        if n(&u["p99_ns"]) >= 20_000_000 {
            return Err(format!("uncorrected p99 {} ns on a busy host", u["p99_ns"]));
        }
        Ok(r)
    }) else {
        return;
    };
    let res = &r["result"];
    assert!(n(&res["uncorrected"]["p99_ns"]) < 20_000_000, "{res}");
}

#[test]
fn nginx_at_2000_per_second_for_3_s_within_half_a_percent_of_the_rate() {
    let tag = "nginx_at_2000_per_second_for_3_s_within_half_a_percent_of_the_rate";
    let Some((_nginx, port)) = common::nginx(tag) else {
        return;
    };
    let url = format!("http://127.0.0.1:{port}/index.html");
    let (code, err, r) = load(
        &url,
        &["--rate", "2000", "--connections", "10", "--duration", "3s"],
        "load-nginx",
    );
    assert_eq!(code, Some(0), "{err}");
    all_answered(&r);
    let e = rate_error(&r);
    assert!(e.abs() < 0.005, "rate error {e}: {}", r["result"]);
    assert_eq!(n(&r["result"]["intended"]), 6000);
    assert_eq!(n(&r["result"]["connections"]), 10);
}

#[test]
fn a_refused_port_is_errors_of_kind_refused_and_one_error_line() {
    let port = common::free_port();
    let url = format!("http://127.0.0.1:{port}/");
    let (code, err, r) = load(
        &url,
        &["--rate", "100", "--connections", "2", "--duration", "300ms"],
        "load-refused",
    );
    assert_eq!(code, Some(2));
    let lines: Vec<&str> = err.lines().filter(|l| l.contains("error")).collect();
    assert_eq!(lines.len(), 1, "one error line: {err}");
    assert!(
        err.contains("no request answered") && err.contains("refused"),
        "{err}"
    );
    let res = &r["result"];
    // Connects that failed, counted apart from requests (none of which went).
    assert!(n(&res["connect_errors"]["refused"]) > 0, "{res}");
    assert_eq!(n(&res["errors"]["refused"]), 0, "{res}");
    assert!(err.contains("connects failed: refused"), "{err}");
    assert_eq!(n(&res["sent"]), 0, "{res}");
    assert_eq!(n(&res["connections"]), 0, "{res}");
}
