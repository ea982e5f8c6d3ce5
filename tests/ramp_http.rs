//! `tpslab ramp http` for real on loopback: against Debian's nginx (a static file, a
//! location answering 503), a port nothing listens on, and tpslab's own `serve http`
//! (started by the test, and built in when the URL is left out).

mod common;

use serde_json::Value;
use std::path::Path;

const SHORT: [&str; 8] = [
    "--users",
    "1..4",
    "--step",
    "x2",
    "--step-duration",
    "700ms",
    "--warmup",
    "200ms",
];

/// `tpslab ramp http ARGS --json`: its exit code, stderr and record (the terminal output
/// reproduced by `tpslab report` from it when the run succeeded).
fn ramp(args: &[&str], tag: &str) -> (Option<i32>, String, Value) {
    let json = common::tmp(&format!("{tag}.json"));
    let _ = std::fs::remove_file(&json);
    let mut c = common::tpslab();
    c.args(["ramp", "http"]).args(args).arg("--json").arg(&json);
    let out = common::run(c);
    if out.status.success() {
        common::assert_report_reproduces(&json, &out.stdout);
    }
    let rec = common::record(Path::new(&json));
    assert_eq!(rec["kind"], "ramp");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        rec,
    )
}

fn steps(j: &Value) -> &Vec<Value> {
    j["steps"].as_array().unwrap()
}

/// Every step answered, none failed, latencies measured.
fn all_answered(j: &Value) {
    assert!(!steps(j).is_empty());
    for st in steps(j) {
        assert!(st["tps"].as_f64().unwrap() > 0.0, "{st}");
        assert!(
            st["errors"].as_object().unwrap().is_empty(),
            "{}",
            st["errors"]
        );
        let p50 = st["response"]["p50_ns"].as_f64().unwrap_or(0.0);
        assert!(p50 > 0.0, "p50 {st}");
    }
}

#[test]
fn nginx_static_file_every_request_answered() {
    let Some((_nginx, port)) = common::nginx("nginx_static_file_every_request_answered") else {
        return;
    };
    let url = format!("http://127.0.0.1:{port}/index.html");
    let mut args = vec![url.as_str(), "--header", "Accept: text/html"];
    args.extend(SHORT);
    let (code, _, j) = ramp(&args, "http-nginx");
    assert_eq!(code, Some(0));
    all_answered(&j);
    assert_eq!(j["plan"]["proto"]["http"]["url"], url.as_str());
    assert_eq!(j["plan"]["proto"]["http"]["method"], "GET");
    // HEAD: the same file's headers, no body: answered as well.
    let mut args = vec![url.as_str(), "--method", "HEAD"];
    args.extend(SHORT);
    let (code, _, j) = ramp(&args, "http-nginx-head");
    assert_eq!(code, Some(0));
    all_answered(&j);
}

#[test]
fn a_503_storm_is_failures_of_kind_http_5xx() {
    let Some((_nginx, port)) = common::nginx("a_503_storm_is_failures_of_kind_http_5xx") else {
        return;
    };
    let url = format!("http://127.0.0.1:{port}/busy");
    let mut args = vec![url.as_str()];
    args.extend(SHORT);
    let (_, _, j) = ramp(&args, "http-503");
    for st in steps(&j) {
        assert_eq!(st["completed"], 0, "{st}");
        let errs = st["errors"].as_object().unwrap();
        assert_eq!(errs.keys().collect::<Vec<_>>(), ["http 5xx"], "{st}");
        assert!(errs["http 5xx"].as_u64().unwrap() > 0);
    }
    // A missing file: 404s, failures of kind http 4xx.
    let url = format!("http://127.0.0.1:{port}/nothing-here");
    let (_, _, j) = ramp(
        &[
            url.as_str(),
            "--users",
            "1..1",
            "--step-duration",
            "300ms",
            "--warmup",
            "100ms",
        ],
        "http-404",
    );
    let errs = steps(&j)[0]["errors"].as_object().unwrap();
    assert_eq!(errs.keys().collect::<Vec<_>>(), ["http 4xx"]);
}

#[test]
fn a_refused_port_is_connection_refused() {
    let port = common::free_port();
    let url = format!("http://127.0.0.1:{port}/");
    let (code, err, j) = ramp(
        &[
            url.as_str(),
            "--users",
            "1..2",
            "--step-duration",
            "300ms",
            "--warmup",
            "100ms",
        ],
        "http-refused",
    );
    assert_eq!(code, Some(2));
    let lines: Vec<&str> = err.lines().filter(|l| l.contains("error")).collect();
    assert_eq!(lines.len(), 1, "one error line: {err}");
    assert!(
        err.contains("ramp http") && err.contains("connection refused"),
        "{err}"
    );
    for st in steps(&j) {
        let errs = st["errors"].as_object().unwrap();
        assert!(
            errs.keys().all(|k| k.contains("connection refused")),
            "{st}"
        );
    }
}

#[test]
fn tpslab_serve_http_answers_every_request() {
    let port = common::free_port();
    let mut srv = common::tpslab();
    srv.args([
        "serve",
        "http",
        "--bind",
        &format!("127.0.0.1:{port}"),
        "--serial",
        "1ms",
        "--duration",
        "20s",
    ])
    .stdout(std::process::Stdio::null());
    let _srv = common::Kill(srv.spawn().expect("spawn serve http"));
    common::wait_listening(port, "tpslab serve http");
    let body = common::tmp("http-body.txt");
    std::fs::write(&body, "ping ping").unwrap();
    let url = format!("http://127.0.0.1:{port}/api");
    let mut args = vec![
        url.as_str(),
        "--method",
        "POST",
        "--body",
        body.to_str().unwrap(),
    ];
    args.extend(SHORT);
    let (code, _, j) = ramp(&args, "http-serve");
    assert_eq!(code, Some(0));
    all_answered(&j);
    // 1 ms waiting per request, a thread per connection: 4 users get about 4x 1 user.
    let s = steps(&j);
    let (t1, t4) = (s[0]["tps"].as_f64().unwrap(), s[2]["tps"].as_f64().unwrap());
    assert!(t1 < 1000.0, "1 ms a request: {t1}");
    assert!(t4 > 2.0 * t1, "no lock: {t1} -> {t4}");
}

#[test]
fn builtin_server_without_url_is_s3_behind_http() {
    let _g = common::serial();
    let mut args = vec!["--serialize", "--server-serial", "5ms"];
    args.extend(SHORT);
    let (code, _, j) = ramp(&args, "http-builtin");
    assert_eq!(code, Some(0));
    all_answered(&j);
    let url = j["plan"]["proto"]["http"]["url"].as_str().unwrap();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    // One global lock held 5 ms a request: at most 200 TPS whatever the users.
    for st in steps(&j) {
        let tps = st["tps"].as_f64().unwrap();
        assert!((100.0..=205.0).contains(&tps), "TPS {tps}");
    }
}
