//! HTTP/2's stream limit (SETTINGS_MAX_CONCURRENT_STREAMS) against Debian's nginx started
//! by the test with `http2_max_concurrent_streams 8` (its default is 128): the record
//! keeps the limit the server advertised, nginx never has more than 8 of a connection's
//! requests at once, and when the run has more streams (users) per connection the report
//! says plainly that the excess waited on the client for a free stream.

use crate::common;

use serde_json::Value;
use std::path::PathBuf;

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// nginx with one h2c server allowing 8 streams at once per connection: index.html at
/// /, `/queued` rate-limited to 100 requests/s with a queue (its access log has each
/// request's connection, end time and duration), `/stuck` limited to 1 request a minute
/// with a queue (after the first, no reply within a test's timeout) and `/slow` to 5
/// requests/s with a queue (one at a time: each reply 200 ms after the one before).
struct Nginx {
    _nginx: common::Kill,
    dir: PathBuf,
    port: u16,
}

fn nginx(tag: &str) -> Option<Nginx> {
    nginx_with(tag, 8, 1_000_000)
}

/// [`nginx`] allowing `streams` at once per connection, and closing a connection (GOAWAY)
/// after `keepalive_requests` requests.
fn nginx_with(tag: &str, streams: u32, keepalive_requests: u32) -> Option<Nginx> {
    if !common::need(tag, "/usr/sbin/nginx") {
        return None;
    }
    let dir = common::tmp(&format!("nginx-h2-streams-{tag}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("html")).unwrap();
    std::fs::create_dir_all(dir.join("logs")).unwrap();
    for f in ["index.html", "queued", "stuck", "slow"] {
        std::fs::write(dir.join("html").join(f), "hello world\n").unwrap();
    }
    let port = common::free_port();
    let d = dir.display();
    std::fs::write(
        dir.join("nginx.conf"),
        format!(
            "daemon off;\nmaster_process off;\nworker_processes 1;\npid {d}/nginx.pid;\n\
             error_log {d}/logs/error.log;\nevents {{ worker_connections 1024; }}\n\
             http {{\n access_log off;\n keepalive_requests {keepalive_requests};\n\
             http2_max_concurrent_streams {streams};\n\
             client_body_temp_path {d}/body;\n proxy_temp_path {d}/proxy;\n\
             fastcgi_temp_path {d}/fastcgi;\n uwsgi_temp_path {d}/uwsgi;\n scgi_temp_path {d}/scgi;\n\
             log_format conc '$connection $msec $request_time';\n\
             limit_req_zone $server_port zone=queued:1m rate=100r/s;\n\
             limit_req_zone $server_port zone=stuck:1m rate=1r/m;\n\
             limit_req_zone $server_port zone=slow:1m rate=5r/s;\n\
             server {{\n  listen 127.0.0.1:{port} http2;\n  root {d}/html;\n\
               location = /queued {{ limit_req zone=queued burst=10000; access_log {d}/logs/queued.log conc; }}\n\
               location = /stuck {{ limit_req zone=stuck burst=10000; }}\n\
               location = /slow {{ limit_req zone=slow burst=10000; }}\n }}\n}}\n"
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
    // Each step has its own counts: 4 and 8 users fit (none waited), 16 did not; the
    // connection opened in the first step; the run's are the steps' together.
    let per: Vec<(u64, u64)> = r["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                n(&s["http2"]["connections"]),
                n(&s["http2"]["waited_for_stream"]),
            )
        })
        .collect();
    assert_eq!((per[0], per[1].1), ((1, 0), 0), "{per:?}");
    assert!(per[2].1 > 0, "{per:?}");
    let total: u64 = per.iter().map(|p| p.1).sum();
    assert_eq!(total, n(&h["waited_for_stream"]), "{per:?} {h}");
    assert!(
        out.contains(&format!(
            "; the first step whose requests waited: 16 users ({} requests, the longest ",
            per[2].1
        )),
        "{out}"
    );
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
    // At the end the queue is still full (56 schedules, each given up every 300 ms):
    // told apart from the rest not sent.
    let waiting = n(&res["http2"]["waiting_at_end"]);
    let not_sent = n(&res["intended"]) - sent - gave_up;
    assert!(waiting >= 20 && waiting <= not_sent, "{res}");
    assert!(
        out.contains(&format!(
            "Waiting at the end: {waiting} requests were waiting for a free stream when the run ended"
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
    // 24 queued at the end, in the (only) step's counts and the run's.
    let waiting = n(&step["http2"]["waiting_at_end"]);
    assert!((1..=24).contains(&waiting), "{step}");
    assert_eq!(n(&r["http2"]["waiting_at_end"]), waiting, "{r}");
    assert!(
        out.contains(&format!(
            "Waiting at the end: {waiting} requests were waiting for a free stream"
        )),
        "{out}"
    );
}

/// A request's wait for a free stream counts from when it began, through its connection's
/// GOAWAY and reopening: against nginx allowing 1 stream at once and closing a connection
/// after 2 requests, each answered 200 ms after the one before (`/slow`), 6 streams on
/// the connection queue 5 requests that each wait about a second (5 replies ahead) over
/// 3 connections, no more than about 400 ms on any one. With `--timeout 600ms` they are
/// given up at 600 ms of waiting; a wait that restarted at each connection's opening would
/// never reach it (none given up, the longest wait about 400 ms).
#[test]
fn a_wait_for_a_stream_through_goaway_churn_times_out_from_its_start() {
    let _serial = common::serial();
    let Some(ng) = nginx_with("goaway-churn", 1, 2) else {
        return;
    };
    let url = format!("http://127.0.0.1:{}/slow", ng.port);
    let args = [
        "--http2",
        "--rate",
        "60",
        "--connections",
        "1",
        "--streams",
        "6",
        "--duration",
        "2s",
        "--timeout",
        "600ms",
    ];
    let (code, _out, err, r) = common::load_http(&url, &args, "h2-goaway-churn");
    assert_eq!(code, Some(0), "{err}");
    let res = &r["result"];
    let h = &res["http2"];
    // The churn: a connection per 2 requests.
    assert!(n(&h["connections"]) >= 3, "{h}");
    assert_eq!(n(&h["max_concurrent_max"]), 1, "{h}");
    // Given up at the timeout, counted from the wait's start: the longest wait is the
    // timeout (and the 10 ms timeout scan), not one connection's share of it.
    assert!(n(&h["timed_out_waiting"]) > 0, "{h}");
    let w = n(&h["wait_max_ns"]);
    assert!((600_000_000..750_000_000).contains(&w), "{h}");
}
