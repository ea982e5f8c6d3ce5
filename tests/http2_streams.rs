//! HTTP/2's stream limit (SETTINGS_MAX_CONCURRENT_STREAMS) against Debian's nginx started
//! by the test with `http2_max_concurrent_streams 8` (its default is 128): the record
//! keeps the limit the server advertised, nginx never has more than 8 of a connection's
//! requests at once, and when the run has more streams (users) per connection the report
//! says plainly that the excess waited on the client for a free stream.

mod common;

use serde_json::Value;
use std::path::PathBuf;

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// nginx with one h2c server allowing 8 streams at once per connection: index.html at
/// /, `/queued` rate-limited to 100 requests/s with a queue (its access log has each
/// request's connection, end time and duration), and `/stuck` limited to 1 request a
/// minute with a queue (after the first, no reply within a test's timeout).
struct Nginx {
    _nginx: common::Kill,
    dir: PathBuf,
    port: u16,
}

fn nginx(tag: &str) -> Option<Nginx> {
    if !common::need(tag, "/usr/sbin/nginx") {
        return None;
    }
    let dir = common::tmp(&format!("nginx-h2-streams-{tag}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("html")).unwrap();
    std::fs::create_dir_all(dir.join("logs")).unwrap();
    for f in ["index.html", "queued", "stuck"] {
        std::fs::write(dir.join("html").join(f), "hello world\n").unwrap();
    }
    let port = common::free_port();
    let d = dir.display();
    std::fs::write(
        dir.join("nginx.conf"),
        format!(
            "daemon off;\nmaster_process off;\nworker_processes 1;\npid {d}/nginx.pid;\n\
             error_log {d}/logs/error.log;\nevents {{ worker_connections 1024; }}\n\
             http {{\n access_log off;\n keepalive_requests 1000000;\n\
             http2_max_concurrent_streams 8;\n\
             client_body_temp_path {d}/body;\n proxy_temp_path {d}/proxy;\n\
             fastcgi_temp_path {d}/fastcgi;\n uwsgi_temp_path {d}/uwsgi;\n scgi_temp_path {d}/scgi;\n\
             log_format conc '$connection $msec $request_time';\n\
             limit_req_zone $server_port zone=queued:1m rate=100r/s;\n\
             limit_req_zone $server_port zone=stuck:1m rate=1r/m;\n\
             server {{\n  listen 127.0.0.1:{port} http2;\n  root {d}/html;\n\
               location = /queued {{ limit_req zone=queued burst=10000; access_log {d}/logs/queued.log conc; }}\n\
               location = /stuck {{ limit_req zone=stuck burst=10000; }}\n }}\n}}\n"
        ),
    )
    .unwrap();
    let k = common::spawn_nginx(&dir);
    common::wait_listening(port, "nginx");
    Some(Nginx {
        _nginx: k,
        dir,
        port,
    })
}

/// The most requests nginx had at once on one connection, from its log lines
/// `CONNECTION END_S DURATION_S` (both to the millisecond: whole milliseconds here, so a
/// request that ended in the millisecond the next began does not overlap it).
fn most_at_once(log: &str) -> usize {
    let ms = |v: &str| (v.parse::<f64>().unwrap() * 1000.0).round() as i64;
    let spans: Vec<(&str, i64, i64)> = log
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (f[0], ms(f[1]) - ms(f[2]), ms(f[1]))
        })
        .collect();
    spans
        .iter()
        .map(|s| {
            spans
                .iter()
                .filter(|t| t.0 == s.0 && t.1 <= s.1 && s.1 < t.2)
                .count()
        })
        .max()
        .unwrap_or(0)
}

/// `load http --http2` with 16 streams on one connection against a server allowing 8:
/// the record has 8, nginx never had more than 8 at once, no stream was refused, and the
/// report says the other 8 waited on the client.
#[test]
fn load_http2_keeps_the_servers_stream_limit_and_says_the_excess_waited_on_the_client() {
    let _serial = common::serial();
    let Some(ng) = nginx("load") else { return };
    // nginx answers /queued at 100 requests/s and queues the rest: at 200/s every stream
    // of the connection is soon busy.
    let url = format!("http://127.0.0.1:{}/queued", ng.port);
    let args = [
        "--http2",
        "--rate",
        "200",
        "--connections",
        "1",
        "--streams",
        "16",
        "--duration",
        "1s",
        "--timeout",
        "5s",
    ];
    let (code, out, err, r) = common::load_http(&url, &args, "h2-streams-load");
    assert_eq!(code, Some(0), "{err}");
    let res = &r["result"];
    let h = &res["http2"];
    assert_eq!(n(&h["connections"]), 1, "{h}");
    assert_eq!(n(&h["max_concurrent_min"]), 8, "{h}");
    assert_eq!(n(&h["max_concurrent_max"]), 8, "{h}");
    assert_eq!(n(&h["unlimited"]), 0, "{h}");
    assert!(n(&h["waited_for_stream"]) > 0, "{h}");
    assert!(n(&h["wait_max_ns"]) > 0, "{h}");
    // Nothing refused (a stream over the limit would be RST_STREAM REFUSED_STREAM).
    assert_eq!(n(&res["errors"]["reset"]), 0, "{res}");
    assert!(n(&res["status"]["s2xx"]) >= 50, "{res}");
    let log = std::fs::read_to_string(ng.dir.join("logs/queued.log")).unwrap();
    let most = most_at_once(&log);
    assert!((4..=8).contains(&most), "{most} at once: {log}");
    assert!(
        out.contains("HTTP/2: streams at once per connection the server allows (its SETTINGS_MAX_CONCURRENT_STREAMS): 8; 16 streams per connection: the streams over it waited on the client for a free stream"),
        "{out}"
    );

    // 4 streams fit under 8: said so, nothing waited.
    let url = format!("http://127.0.0.1:{}/index.html", ng.port);
    let args = [
        "--http2",
        "--rate",
        "200",
        "--connections",
        "1",
        "--streams",
        "4",
        "--duration",
        "500ms",
    ];
    let (code, out, err, r) = common::load_http(&url, &args, "h2-streams-fit");
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(n(&r["result"]["http2"]["waited_for_stream"]), 0, "{r}");
    assert!(
        out.contains(
            "(its SETTINGS_MAX_CONCURRENT_STREAMS): 8; 4 streams per connection fit under it"
        ),
        "{out}"
    );
}

/// `ramp http --http2` of 4, 8 and 16 users on one connection against a server allowing
/// 8 streams: the record has the limit and the waits, and the report names the step
/// whose users over 8 waited on the client.
#[test]
fn ramp_http2_names_the_steps_whose_users_waited_for_a_stream() {
    let _serial = common::serial();
    let Some(ng) = nginx("ramp") else { return };
    let url = format!("http://127.0.0.1:{}/index.html", ng.port);
    let args = [
        "--connections",
        "1",
        "--users",
        "4..16",
        "--step-duration",
        "400ms",
        "--warmup",
        "100ms",
    ];
    let (code, out, err, r) = common::with_record(
        &["ramp", "http", &url, "--http2", "--no-history"],
        &args,
        "h2-streams-ramp",
    );
    assert_eq!(code, Some(0), "{err}\n{out}");
    let users: Vec<u64> = r["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .map(|s| n(&s["users"]))
        .collect();
    assert_eq!(users, [4, 8, 16], "{out}");
    let h = &r["http2"];
    assert_eq!(n(&h["max_concurrent_min"]), 8, "{h}");
    // 16 users, no think time: 8 of them wait at any moment.
    assert!(n(&h["waited_for_stream"]) > 0, "{h}");
    assert!(
        out.contains(": 8; at 16 users (16 per connection): the streams over it waited on the client for a free stream"),
        "{out}"
    );
}

/// A request that waits on the client for a free stream past `--timeout` counts as a
/// timeout, as HTTP/1.1's request without its reply in time does. At `/stuck` nginx
/// answers the first request and holds every later one for a minute: 8 streams are stuck
/// in flight (each cancelled at its timeout) and the other 56 of the connection's 64
/// schedules wait in the client's queue. Without the queue's timeouts only requests sent
/// could time out (timeouts <= sent); with them the queued ones count too.
#[test]
fn a_request_queued_for_a_stream_past_the_timeout_is_a_timeout() {
    let _serial = common::serial();
    let Some(ng) = nginx("queue-timeout") else {
        return;
    };
    let url = format!("http://127.0.0.1:{}/stuck", ng.port);
    let args = [
        "--http2",
        "--rate",
        "320",
        "--connections",
        "1",
        "--streams",
        "64",
        "--duration",
        "1s",
        "--timeout",
        "300ms",
    ];
    let (code, out, err, r) = common::load_http(&url, &args, "h2-queue-timeout");
    assert_eq!(code, Some(0), "{err}");
    let res = &r["result"];
    let (sent, timeouts) = (n(&res["sent"]), n(&res["errors"]["timeout"]));
    assert!(sent >= 8, "{res}");
    assert!(
        timeouts > 2 * sent,
        "{timeouts} timeouts, {sent} sent: {res}"
    );
    assert!(n(&res["http2"]["wait_max_ns"]) >= 300_000_000, "{res}");
    assert!(out.contains("Errors: timeout "), "{out}");
    // Those given up unsent are told apart from the requests written and not answered.
    let gave_up = n(&res["http2"]["timed_out_waiting"]);
    assert!(gave_up > sent && gave_up <= timeouts, "{res}");
    assert!(
        out.contains(&format!(
            "Given up unsent: {gave_up} of the failed requests"
        )),
        "{out}"
    );

    // The closed loop the same: 32 users on the connection, 8 stuck in flight and 24
    // queued, each failing every 200 ms (10 per user in a 500 ms window at most): sent
    // ones alone would be 8 per 200 ms, 20 in the window.
    let args = [
        "--connections",
        "1",
        "--users",
        "32..32",
        "--step-duration",
        "500ms",
        "--warmup",
        "100ms",
        "--timeout",
        "200ms",
    ];
    let (code, out, err, r) = common::with_record(
        &["ramp", "http", &url, "--http2", "--no-history"],
        &args,
        "h2-queue-timeout-ramp",
    );
    assert_eq!(code, Some(0), "{err}\n{out}");
    let step = &r["steps"][0];
    let t = n(&step["errors"]["timeout"]);
    assert!((40..=170).contains(&t), "{t} timeouts: {step}");
}
