//! `load http --http2` against Debian's nginx started by the test on free ports: h2c with
//! prior knowledge (`listen ... http2` without TLS) and h2 over TLS (ALPN, a self-signed
//! certificate made by openssl); every request answered on the connections asked for,
//! several streams in flight on one connection (seen in nginx's own access log), a GOAWAY
//! (nginx's `keepalive_requests`) survived without a lost or doubled request, RST_STREAM
//! counted as reset, and servers that do not speak HTTP/2 refused in one line.

use crate::common;

use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;

use common::load_http as load;

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// nginx with four h2c servers: `main` (index.html "hello world\n" at /, a 503 at
/// /busy, each request at /logged in logs/logged.log, /capped limited to 400 requests/s
/// (a burst of 40, the rest answered 503), `return 444` at /reset; rate-limited to 20 requests/s with a queue at /slow;
/// its access log has each request's connection, end time and duration), `goaway`
/// (`keepalive_requests 50`: a GOAWAY after 50 streams), and `h1`, plain HTTP/1.1.
struct H2c {
    _nginx: common::Kill,
    dir: PathBuf,
    main: u16,
    goaway: u16,
    h1: u16,
}

fn nginx_h2c(tag: &str) -> Option<H2c> {
    if !common::need(tag, "/usr/sbin/nginx") {
        return None;
    }
    let dir = common::tmp(&format!("nginx-h2c-{tag}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("html")).unwrap();
    std::fs::create_dir_all(dir.join("logs")).unwrap();
    std::fs::write(dir.join("html/index.html"), "hello world\n").unwrap();
    std::fs::write(dir.join("html/slow"), "slow\n").unwrap();
    std::fs::write(dir.join("html/logged"), "logged\n").unwrap();
    std::fs::write(dir.join("html/capped"), "capped\n").unwrap();
    let (main, goaway, h1) = (
        common::free_port(),
        common::free_port(),
        common::free_port(),
    );
    let d = dir.display();
    std::fs::write(
        dir.join("nginx.conf"),
        format!(
            "daemon off;\nmaster_process off;\nworker_processes 1;\npid {d}/nginx.pid;\n\
             error_log {d}/logs/error.log;\nevents {{ worker_connections 1024; }}\n\
             http {{\n access_log off;\n keepalive_requests 1000000;\n\
             client_body_temp_path {d}/body;\n proxy_temp_path {d}/proxy;\n\
             fastcgi_temp_path {d}/fastcgi;\n uwsgi_temp_path {d}/uwsgi;\n scgi_temp_path {d}/scgi;\n\
             log_format conc '$connection $msec $request_time';\n\
             limit_req_zone $server_port zone=slow:1m rate=20r/s;\n\
             limit_req_zone $server_port zone=capped:1m rate=400r/s;\n\
             server {{\n  listen 127.0.0.1:{main} http2;\n  root {d}/html;\n\
               location = /logged {{ access_log {d}/logs/logged.log conc; }}\n\
               location = /capped {{ limit_req zone=capped burst=40 nodelay; }}\n\
               location = /busy {{ return 503; }}\n  location = /reset {{ return 444; }}\n\
               location = /slow {{ limit_req zone=slow burst=1000; access_log {d}/logs/slow.log conc; }}\n }}\n\
             server {{\n  listen 127.0.0.1:{goaway} http2;\n  keepalive_requests 50;\n  root {d}/html;\n }}\n\
             server {{\n  listen 127.0.0.1:{h1};\n  root {d}/html;\n }}\n}}\n"
        ),
    )
    .unwrap();
    let k = common::spawn_nginx(&dir);
    for p in [main, goaway, h1] {
        common::wait_listening(p, "nginx");
    }
    Some(H2c {
        _nginx: k,
        dir,
        main,
        goaway,
        h1,
    })
}

/// The errors of a record's result, all kinds.
fn no_errors(res: &Value) {
    for k in ["errors", "connect_errors"] {
        if let Some(e) = res.get(k).and_then(|e| e.as_object()) {
            assert!(e.values().all(|v| v == 0), "{k}: {res}");
        }
    }
    assert_eq!(n(&res["unanswered"]), 0, "{res}");
}

#[test]
fn h2c_answers_every_request_on_its_connections_with_streams_in_flight() {
    // Exact counts (every one of 2,000 sent by the plan's end): not beside the other
    // load of this file (the capacity search runs at real-time priority).
    let _serial = common::serial();
    let Some(ng) = nginx_h2c("h2c") else { return };
    let url = format!("http://127.0.0.1:{}/index.html", ng.main);
    let args = [
        "--http2",
        "--rate",
        "2000",
        "--connections",
        "2",
        "--streams",
        "10",
        "--duration",
        "1s",
    ];
    // A generator a busy host held back past the run's end sends fewer than planned (the
    // plan ends on time): retried up to 3 times, then counted as spoiled.
    let test = "load_http2::h2c_answers_every_request_on_its_connections_with_streams_in_flight";
    let on_plan = |url: &str, tag: &str| {
        common::retry(test, 3, || {
            let got = load(url, &args, tag);
            assert_eq!(got.0, Some(0), "{}", got.2);
            common::plan_sent(&got.3)?;
            Ok(got)
        })
    };
    let Some((code, out, err, r)) = on_plan(&url, "h2c") else {
        return;
    };
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("on 2 keep-alive connections over HTTP/2 with 10 streams each"),
        "{out}"
    );
    let res = &r["result"];
    assert_eq!(n(&res["intended"]), 2000, "{res}");
    assert_eq!(n(&res["sent"]), 2000, "{res}");
    assert_eq!(n(&res["status"]["s2xx"]), 2000, "{res}");
    no_errors(res);
    assert_eq!(n(&res["connections"]), 2, "{res}");
    // nginx's reply: HEADERS and a DATA of 12 bytes each, more than 12 bytes a request.
    assert!(n(&res["bytes_in"]) > 2000 * 12, "{res}");
    assert!(n(&res["bytes_out"]) >= 2000 * 10, "{res}");
    assert_eq!(r["plan"]["http2"], true);
    assert_eq!(n(&r["plan"]["streams"]), 10);

    // A 503 is a reply of class 5xx, not an error.
    let url = format!("http://127.0.0.1:{}/busy", ng.main);
    let Some((code, _, err, r)) = on_plan(&url, "h2c-busy") else {
        return;
    };
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(n(&r["result"]["status"]["s5xx"]), 2000, "{}", r["result"]);

    // At /slow nginx answers 20 requests a second and queues the rest: one connection's
    // 8 streams are in flight together, as nginx's log of each request's start and end
    // shows.
    let url = format!("http://127.0.0.1:{}/slow", ng.main);
    let args = [
        "--http2",
        "--rate",
        "40",
        "--connections",
        "1",
        "--streams",
        "8",
        "--duration",
        "1s",
        "--timeout",
        "5s",
    ];
    let (code, _, err, r) = load(&url, &args, "h2c-slow");
    assert_eq!(code, Some(0), "{err}");
    let res = &r["result"];
    assert_eq!(n(&res["connections"]), 1, "{res}");
    assert!(n(&res["status"]["s2xx"]) >= 20, "{res}");
    let log = std::fs::read_to_string(ng.dir.join("logs/slow.log")).unwrap();
    let mut spans: Vec<(String, f64, f64)> = log
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            let end: f64 = f[1].parse().unwrap();
            (f[0].to_string(), end - f[2].parse::<f64>().unwrap(), end)
        })
        .collect();
    assert_eq!(spans.len() as u64, n(&res["status"]["s2xx"]), "{log}");
    assert!(
        spans.iter().all(|s| s.0 == spans[0].0),
        "one connection: {log}"
    );
    spans.sort_by(|a, b| a.1.total_cmp(&b.1));
    let most = spans
        .iter()
        .map(|s| spans.iter().filter(|t| t.1 <= s.1 && s.1 < t.2).count())
        .max()
        .unwrap();
    assert!(
        most >= 4,
        "at most {most} requests at once on the connection: {log}"
    );
}

#[test]
fn h2c_goaway_and_rst_stream() {
    let _serial = common::serial();
    let Some(ng) = nginx_h2c("h2c-goaway") else {
        return;
    };
    // keepalive_requests 50: nginx sends GOAWAY after a connection's 50th stream; the
    // streams it did not take go again on a new connection, none lost or counted twice.
    let url = format!("http://127.0.0.1:{}/index.html", ng.goaway);
    let args = [
        "--http2",
        "--rate",
        "1000",
        "--connections",
        "2",
        "--streams",
        "10",
        "--duration",
        "1s",
    ];
    // Retried as the h2c test is: a generator a busy host held back sends fewer than planned.
    let Some((code, _, err, r)) = common::retry("load_http2::h2c_goaway_and_rst_stream", 3, || {
        let got = load(&url, &args, "h2c-goaway");
        assert_eq!(got.0, Some(0), "{}", got.2);
        common::plan_sent(&got.3)?;
        Ok(got)
    }) else {
        return;
    };
    assert_eq!(code, Some(0), "{err}");
    let res = &r["result"];
    assert_eq!(n(&res["sent"]), 1000, "{res}");
    assert_eq!(n(&res["status"]["s2xx"]), 1000, "{res}");
    no_errors(res);
    assert!(n(&res["connections"]) >= 1000 / 50, "{res}");

    // `return 444`: nginx resets each stream (RST_STREAM), counted as reset.
    let url = format!("http://127.0.0.1:{}/reset", ng.main);
    let args = [
        "--http2",
        "--rate",
        "200",
        "--connections",
        "1",
        "--streams",
        "4",
        "--duration",
        "1s",
    ];
    let (code, _, err, r) = load(&url, &args, "h2c-reset");
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("no request answered") && err.contains("reset 200"),
        "{err}"
    );
    let res = &r["result"];
    assert_eq!(n(&res["errors"]["reset"]), 200, "{res}");
    assert_eq!(n(&res["connections"]), 1, "{res}");
}

#[test]
fn h2_over_tls_and_servers_without_http2_refused() {
    let _serial = common::serial();
    let tag = "h2-tls";
    let Some((_nginx, port, ca)) = common::nginx_tls(tag, true) else {
        return;
    };
    let url = format!("https://localhost:{port}/index.html");
    let args = [
        "--http2",
        "--rate",
        "1000",
        "--connections",
        "2",
        "--streams",
        "10",
        "--duration",
        "1s",
        "--cacert",
        ca.to_str().unwrap(),
    ];
    // Retried as the h2c test is: a generator a busy host held back sends fewer than planned.
    let Some((code, out, err, r)) = common::retry(
        "load_http2::h2_over_tls_and_servers_without_http2_refused",
        3,
        || {
            let got = load(&url, &args, "h2-tls");
            assert_eq!(got.0, Some(0), "{}", got.2);
            common::plan_sent(&got.3)?;
            Ok(got)
        },
    ) else {
        return;
    };
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("over HTTP/2 with 10 streams each"), "{out}");
    let res = &r["result"];
    assert_eq!(n(&res["sent"]), 1000, "{res}");
    assert_eq!(n(&res["status"]["s2xx"]), 1000, "{res}");
    no_errors(res);
    assert_eq!(n(&res["connections"]), 2, "{res}");

    // A TLS server without h2 in its ALPN: one line, exit 2, before any count.
    let (_plain_tls, port1, ca1) = common::nginx_tls("h2-tls-h1only", false).unwrap();
    let url = format!("https://localhost:{port1}/");
    let args = [
        "--http2",
        "--rate",
        "100",
        "--duration",
        "1s",
        "--cacert",
        ca1.to_str().unwrap(),
    ];
    let (code, _, err, _) = load(&url, &args, "h2-tls-h1only");
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("did not agree to HTTP/2") && err.contains("no_application_protocol"),
        "{err}"
    );

    // h2c to a server of HTTP/1.1 only: it answers the preface with HTTP/1.1 400.
    let Some(ng) = nginx_h2c("h2c-to-h1") else {
        return;
    };
    let url = format!("http://127.0.0.1:{}/", ng.h1);
    let (code, _, err, _) = load(
        &url,
        &["--http2", "--rate", "100", "--duration", "1s"],
        "h2c-h1",
    );
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("answered HTTP/2's preface with HTTP/1.x"),
        "{err}"
    );
}

#[test]
fn bad_http2_flags_are_one_line_exit_2() {
    for (args, want) in [
        (
            &[
                "load",
                "http",
                "http://127.0.0.1:1/",
                "--rate",
                "10",
                "--streams",
                "4",
            ][..],
            "--streams applies to --http2",
        ),
        (
            &[
                "load",
                "http",
                "http://127.0.0.1:1/",
                "--rate",
                "10",
                "--http2",
                "--streams",
                "0",
            ][..],
            "--streams",
        ),
        (
            &[
                "load",
                "http",
                "http://127.0.0.1:1/",
                "--rate",
                "10",
                "--http2",
                "--streams",
                "1001",
            ][..],
            "--streams",
        ),
        (
            &[
                "load",
                "http",
                "http://127.0.0.1:1/",
                "--rate",
                "10",
                "--http2",
                "--connections",
                "1000",
                "--streams",
                "1000",
            ][..],
            "100000 streams in all",
        ),
        (
            &[
                "load",
                "http",
                "http://127.0.0.1:1/",
                "--rate",
                "10",
                "--http2",
                "--header",
                "Connection: close",
            ][..],
            "connection-specific",
        ),
        (
            &["ramp", "http", "--http2"][..],
            "needs the URL of an HTTP/2 server",
        ),
        (
            &["ramp", "http", "http://127.0.0.1:1/", "--connections", "2"][..],
            "--connections applies with --http2",
        ),
        (
            &[
                "ramp",
                "http",
                "http://127.0.0.1:1/",
                "--http2",
                "--connections",
                "0",
            ][..],
            "--connections 0",
        ),
    ] {
        let mut c = common::tpslab();
        c.args(args);
        let out = common::run(c);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

/// `ramp http --http2 ARGS` at `url`, its record to `TAG.json` ([`common::with_record`]).
fn ramp(url: &str, args: &[&str], tag: &str) -> (Option<i32>, String, String, Value) {
    common::with_record(&["ramp", "http", url, "--http2", "--no-history"], args, tag)
}

/// A closed-loop ramp over HTTP/2: the users' streams on the two connections asked for
/// (nginx's log names each request's connection), every step answered without error,
/// Little's law holding (each user one request out); a 503 storm counted as `http 5xx`
/// failures as HTTP/1.1's ramp counts them; a server without h2c refused in one line.
#[test]
fn ramp_http2_users_share_the_connections_asked_for() {
    let _serial = common::serial();
    let Some(ng) = nginx_h2c("ramp-h2c") else {
        return;
    };
    let url = format!("http://127.0.0.1:{}/logged", ng.main);
    let args = [
        "--connections",
        "2",
        "--users",
        "2..8",
        "--step-duration",
        "500ms",
        "--warmup",
        "200ms",
    ];
    let (code, out, err, r) = ramp(&url, &args, "ramp-h2c");
    assert_eq!(code, Some(0), "{err}\n{out}");
    assert!(
        out.contains("HTTP/2: the users' streams on 2 connections"),
        "{out}"
    );
    assert_eq!(n(&r["plan"]["http2_connections"]), 2, "{}", r["plan"]);
    let steps = r["steps"].as_array().expect("steps");
    let users: Vec<u64> = steps.iter().map(|s| n(&s["users"])).collect();
    assert_eq!(users, [2, 4, 8], "{out}");
    let mut completed = 0;
    for s in steps {
        assert!(n(&s["completed"]) > 0, "{s}");
        completed += n(&s["completed"]);
        let errors = s["errors"].as_object().expect("errors");
        assert!(errors.is_empty(), "{s}");
    }
    // Every request nginx logged came on one of the two connections.
    let log = std::fs::read_to_string(ng.dir.join("logs/logged.log")).expect("nginx's log");
    let conns: std::collections::BTreeSet<&str> = log
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(conns.len(), 2, "connections in nginx's log: {conns:?}");
    assert!(log.lines().count() as u64 >= completed, "{completed} {log}");
    assert!(out.contains("Little's law holds"), "{out}");

    let busy = format!("http://127.0.0.1:{}/busy", ng.main);
    let short = [
        "--users",
        "1..2",
        "--step-duration",
        "300ms",
        "--warmup",
        "100ms",
    ];
    let (code, out, err, r) = ramp(&busy, &short, "ramp-h2c-503");
    assert_eq!(code, Some(0), "{err}\n{out}");
    for s in r["steps"].as_array().expect("steps") {
        assert_eq!(n(&s["completed"]), 0, "{s}");
        assert!(n(&s["errors"]["http 5xx"]) > 0, "{s}");
    }

    let h1 = format!("http://127.0.0.1:{}/", ng.h1);
    let (code, out, err, _) = ramp(&h1, &short, "ramp-h2c-h1");
    assert_eq!(code, Some(2), "{out}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("does not take h2c"), "{err}");
}

/// `ramp http --http2` over TLS (ALPN h2, the test's CA): every step answered.
#[test]
fn ramp_http2_over_tls() {
    let _serial = common::serial();
    let tag = "ramp-h2-tls";
    let Some((_nginx, port, ca)) = common::nginx_tls(tag, true) else {
        return;
    };
    let url = format!("https://localhost:{port}/index.html");
    let ca = ca.display().to_string();
    let args = [
        "--cacert",
        &ca,
        "--users",
        "1..4",
        "--step-duration",
        "300ms",
        "--warmup",
        "100ms",
    ];
    let (code, out, err, r) = ramp(&url, &args, tag);
    assert_eq!(code, Some(0), "{err}\n{out}");
    assert_eq!(n(&r["plan"]["http2_connections"]), 1, "{}", r["plan"]);
    for s in r["steps"].as_array().expect("steps") {
        assert!(n(&s["completed"]) > 0, "{s}");
        assert!(s["errors"].as_object().expect("errors").is_empty(), "{s}");
    }
}

/// `capacity http --http2` finds the ceiling nginx's limit_req puts on /capped: 400
/// requests/s and a burst of 40 over each 1.3 s step (about 430/s), the rest answered
/// 503. The generator runs under `chrt -f 5` where allowed, so other work on the host (a
/// build) does not make its sends late (a late step is INVALID and the search goes on
/// without it); a search a busy host still left unfinished is tried again (3 times).
#[test]
fn capacity_http2_finds_nginxs_request_limit() {
    let test = "load_http2::capacity_http2_finds_nginxs_request_limit";
    // Alone: its generator runs at real-time priority and would starve the others' (on
    // two cores), and their load would make its steps late.
    let _serial = common::serial();
    let Some(ng) = nginx_h2c("capacity-h2") else {
        return;
    };
    let url = format!("http://127.0.0.1:{}/capped", ng.main);
    let json = common::tmp("capacity-h2.json");
    let rt = common::root(test, "the generator at real-time priority")
        && common::need(test, "/usr/bin/chrt");
    let found = common::retry(test, 3, || {
        let _ = std::fs::remove_file(&json);
        let mut c = if rt {
            let mut c = Command::new("chrt");
            c.args(["-f", "5"]).arg(env!("CARGO_BIN_EXE_tpslab"));
            c
        } else {
            common::tpslab()
        };
        c.args(["capacity", "http", &url, "--http2", "--connections", "2"])
            .args([
                "--streams",
                "4",
                "--start-rate",
                "100",
                "--step-duration",
                "1s",
            ])
            .args(["--warmup", "300ms", "--budget", "40s", "--repeats", "1"])
            .arg("--no-history")
            .args(["--slo", "p99<50ms,errors<1%", "--json"])
            .arg(&json);
        let out = common::run(c);
        assert!(
            out.status.success(),
            "capacity http --http2 failed: {}",
            out.status
        );
        common::assert_report_reproduces(&json, &out.stdout);
        let rec = common::record(&json);
        let end = &rec["conclusion"];
        if end["end"] != "bracket" {
            return Err(format!("the search ended {end}"));
        }
        Ok(rec)
    });
    let Some(rec) = found else { return };
    assert_eq!(
        rec["plan"]["http"]["load"]["http2"], true,
        "{}",
        rec["plan"]
    );
    let end = &rec["conclusion"];
    let (lo, hi) = (
        end["sustains_pps"].as_f64().unwrap(),
        end["fails_pps"].as_f64().unwrap(),
    );
    assert!(
        (360.0..=480.0).contains(&lo),
        "sustains {lo} requests/s: nginx allows 400/s and a burst of 40"
    );
    assert!(
        hi <= lo * 1.05 + 1.0,
        "a bracket wider than 5 %: {lo}..{hi}"
    );
    // The steps that failed, failed on the 503s.
    for s in rec["steps"].as_array().unwrap() {
        if s["status"] == "fail" {
            assert!(s["why"][0].as_str().unwrap().starts_with("errors "), "{s}");
        }
    }
}
