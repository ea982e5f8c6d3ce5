//! `--protocol redis` end to end against Debian's redis-server (started on a free port in
//! a folder of its own, `--save '' --appendonly no`, ended by its PID): `ramp tcp` over
//! 1..4 users and `capacity tcp` finding a rate, each request a RESP `GET key`, and
//! tpslab's count of requests held against redis's own, `INFO stats`
//! `total_commands_processed` read before and after each command; then with a password
//! set, a ramp whose every request fails as `redis: error reply NOAUTH`.

use crate::common;

use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};

const REDIS: &str = "/usr/bin/redis-server";

/// redis-server on a free port of 127.0.0.1, its folder under the tests' tmp; the key
/// `key` set to `hello`.
fn start(tag: &str) -> (common::Kill, u16) {
    let dir = common::tmp(tag);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let port = common::free_port();
    let child = Command::new(REDIS)
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .arg("--dir")
        .arg(&dir)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let kill = common::Kill(child);
    common::wait_listening(port, "redis-server");
    ask(
        port,
        b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nhello\r\n",
        b"+OK\r\n",
    );
    (kill, port)
}

/// Sends `req` on a connection of its own and checks the whole reply is `want`.
fn ask(port: u16, req: &[u8], want: &[u8]) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(req).unwrap();
    let mut got = vec![0; want.len()];
    s.read_exact(&mut got).unwrap();
    assert_eq!(got, want);
}

/// redis's `total_commands_processed` (`INFO stats`), not counting this INFO itself (redis
/// counts a command once it ran: an INFO after this one sees this one).
fn processed(port: u16) -> u64 {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(b"*2\r\n$4\r\nINFO\r\n$5\r\nstats\r\n").unwrap();
    let mut got = vec![];
    let mut buf = [0u8; 8192];
    // A bulk string: `$LEN\r\n` then LEN bytes and CRLF, read until all of them are in
    // (a read may end in a CRLF of the middle of the text).
    let whole = |got: &[u8]| -> bool {
        let Some(eol) = got.windows(2).position(|w| w == b"\r\n") else {
            return false;
        };
        assert_eq!(got[0], b'$', "INFO's reply is a bulk string: {got:?}");
        let len: usize = std::str::from_utf8(&got[1..eol]).unwrap().parse().unwrap();
        got.len() >= eol + 2 + len + 2
    };
    while !whole(&got) {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "redis closed the INFO connection");
        got.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&got)
        .lines()
        .find_map(|l| l.strip_prefix("total_commands_processed:"))
        .expect("INFO stats has total_commands_processed")
        .trim()
        .parse()
        .unwrap()
}

/// Runs tpslab with `args` and `--json FILE`: its record.
fn record_of(tag: &str, args: &[&str]) -> Value {
    let json = common::tmp(&format!("{tag}.json"));
    let _ = std::fs::remove_file(&json);
    let mut c = common::tpslab();
    c.args(args).arg("--json").arg(&json);
    let out = common::run(c);
    assert!(
        out.status.success(),
        "tpslab {args:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    // Its first line names the command that ran (`ramp tcp --protocol redis`; there is
    // no `ramp redis`).
    let first = String::from_utf8_lossy(&out.stdout);
    let first = first.lines().next().unwrap_or_default();
    let want = format!("tpslab {} {} --protocol redis", args[0], args[1]);
    assert!(first.starts_with(&want), "{first:?} is not {want:?}...");
    common::assert_report_reproduces(&json, &out.stdout);
    common::record(&json)
}

#[test]
fn ramp_and_capacity_over_resp_send_what_redis_counts() {
    let test = "resp::ramp_and_capacity_over_resp_send_what_redis_counts";
    if !common::need(test, REDIS) {
        return;
    }
    let (_redis, port) = start("resp_redis");
    let target = format!("127.0.0.1:{port}");

    // A ramp over 1..4 users, no warm-up: every reply is counted in the step it ends in,
    // and when the last step's window closes each user may have one request in flight,
    // which redis ran and no step counts.
    let before = processed(port);
    let ramp = record_of(
        "resp_ramp",
        &[
            "ramp",
            "tcp",
            &target,
            "--protocol",
            "redis:GET key",
            "--users",
            "1..4",
            "--step",
            "x2",
            "--step-duration",
            "300ms",
            "--warmup",
            "0s",
            "--load-threads",
            "1",
        ],
    );
    let ran = processed(port) - before - 1;
    assert_eq!(
        ramp["plan"]["proto"],
        serde_json::json!({"redis": ["GET", "key"]})
    );
    let steps = ramp["steps"].as_array().unwrap();
    assert_eq!(
        steps
            .iter()
            .map(|s| s["users"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        vec![1, 2, 4]
    );
    let mut counted = 0;
    for s in steps {
        let errors: u64 = s["errors"]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_u64().unwrap())
            .sum();
        assert_eq!(errors, 0, "step {s}");
        assert!(s["completed"].as_u64().unwrap() > 100, "step {s}");
        counted += s["completed"].as_u64().unwrap();
    }
    assert!(
        (counted..=counted + 4).contains(&ran),
        "redis ran {ran} commands, the ramp counted {counted} replies (+ at most 4 in flight at its end)"
    );

    // A capacity search of 3 steps (500, 1000, 2000 requests/s; no warm-ups): redis passes
    // each, so it sustains at least the highest. Every request written is one redis ran.
    let before = processed(port);
    let cap = record_of(
        "resp_capacity",
        &[
            "capacity",
            "tcp",
            &target,
            "--protocol",
            "redis:GET key",
            "--slo",
            "p99<100ms",
            "--start-rate",
            "500",
            "--max-rate",
            "2000",
            "--repeats",
            "1",
            "--step-duration",
            "500ms",
            "--warmup",
            "0s",
            "--connections",
            "4",
            "--load-threads",
            "1",
        ],
    );
    let ran = processed(port) - before - 1;
    let c = &cap;
    assert_eq!(
        c["plan"]["tcp"]["proto"],
        serde_json::json!({"redis": ["GET", "key"]})
    );
    // A step's achieved rate is the requests it wrote divided by the plan's step duration
    // (figures_tcp: the record's own count over its own duration, not a measured window),
    // so the record's duration times it is the count written, exactly.
    let window = c["plan"]["tcp"]["duration_ns"].as_u64().unwrap() as f64 / 1e9;
    assert_eq!(window, 0.5);
    let mut sent = 0;
    for s in c["steps"].as_array().unwrap() {
        assert_eq!(s["status"], "pass", "step {s}");
        sent += (s["achieved_pps"].as_f64().unwrap() * window).round() as u64;
    }
    assert!(c["steps"].as_array().unwrap().len() >= 3);
    assert_eq!(
        ran, sent,
        "redis ran {ran} commands, capacity wrote {sent} requests"
    );
    assert_eq!(
        c["conclusion"],
        serde_json::json!({"end": "at_least", "sustains_pps": 2000.0})
    );

    // Password-protected: every GET is refused with NOAUTH, and the failures say so.
    ask(
        port,
        b"*4\r\n$6\r\nCONFIG\r\n$3\r\nSET\r\n$11\r\nrequirepass\r\n$2\r\npw\r\n",
        b"+OK\r\n",
    );
    let refused = record_of(
        "resp_noauth",
        &[
            "ramp",
            "tcp",
            &target,
            "--protocol",
            "redis:GET key",
            "--users",
            "1..1",
            "--step-duration",
            "300ms",
            "--warmup",
            "0s",
            "--load-threads",
            "1",
        ],
    );
    let s = &refused["steps"][0];
    assert_eq!(s["completed"], 0, "step {s}");
    let errors = s["errors"].as_object().unwrap();
    assert_eq!(
        errors.keys().collect::<Vec<_>>(),
        ["redis: error reply NOAUTH"],
        "step {s}"
    );
    assert!(errors["redis: error reply NOAUTH"].as_u64().unwrap() > 100);
}
