//! `load http --http3` against a real HTTP/3 server: Debian's Caddy (2.6, quic-go),
//! started here in a folder of this test's own (`tls internal` without installing its
//! root, no admin endpoint, HOME and XDG folders here), stopped by PID. Every request
//! sent is answered or counted failed; `--rate max --requests N` gets exactly N 200s;
//! a URL without HTTP/3 behind it (Caddy asked for a name it has no certificate for, a
//! UDP port nothing listens on) is one line naming the handshake's failure, exit 2.

use crate::common;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CADDY: &str = "/usr/bin/caddy";

/// Whether a UDP socket is bound to `port` on this host (/proc/net/udp, udp6).
fn udp_bound(port: u16) -> bool {
    let hex = format!(":{port:04X} ");
    ["/proc/net/udp", "/proc/net/udp6"].iter().any(|f| {
        std::fs::read_to_string(f)
            .unwrap_or_default()
            .lines()
            .skip(1)
            .any(|l| {
                l.split_whitespace()
                    .nth(1)
                    .is_some_and(|a| a.ends_with(hex.trim_end()))
            })
    })
}

/// Caddy serving `hello` over HTTPS and HTTP/3 on https://localhost:PORT.
fn caddy(tag: &str) -> (common::Kill, u16) {
    let dir = common::tmp(tag);
    std::fs::create_dir_all(&dir).unwrap();
    let port = common::free_port();
    let conf = format!(
        "{{\n\tadmin off\n\tskip_install_trust\n\tauto_https disable_redirects\n\tstorage file_system {d}/data\n\tlog {{\n\t\toutput discard\n\t}}\n}}\nhttps://localhost:{port} {{\n\ttls internal\n\trespond \"hello\" 200\n}}\n",
        d = dir.display()
    );
    std::fs::write(dir.join("Caddyfile"), conf).unwrap();
    let child = Command::new(CADDY)
        .args(["run", "--config", "Caddyfile", "--adapter", "caddyfile"])
        .current_dir(&dir)
        .env("HOME", &dir)
        .env("XDG_DATA_HOME", dir.join("data"))
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("caddy.log")).unwrap())
        .spawn()
        .unwrap();
    let k = common::Kill(child);
    common::wait_listening(port, "caddy");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !udp_bound(port) {
        assert!(
            Instant::now() < deadline,
            "caddy's UDP port {port} not bound"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    (k, port)
}

/// The record's counts: every request sent answered (2xx here) or counted failed.
fn counts(rec: &serde_json::Value) -> (u64, u64, u64, u64) {
    let r = &rec["result"];
    let errors: u64 = r["errors"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap_or(0))
        .sum();
    (
        r["sent"].as_u64().unwrap(),
        r["status"]["s2xx"].as_u64().unwrap(),
        errors,
        r["unanswered"].as_u64().unwrap(),
    )
}

#[test]
fn caddy_answers_load_http_over_http3_and_a_port_without_it_is_one_line() {
    const T: &str = "http3::caddy_answers_load_http_over_http3_and_a_port_without_it_is_one_line";
    if !common::need(T, CADDY) {
        return;
    }
    let (_caddy, port) = caddy("http3-caddy");
    let url = format!("https://localhost:{port}/");

    // The open loop: 2 connections x 2 streams at 200/s for 1 s.
    let (code, out, err, rec) = common::load_http(
        &url,
        &[
            "--http3",
            "--insecure",
            "--rate",
            "200",
            "--connections",
            "2",
            "--streams",
            "2",
            "--duration",
            "1s",
        ],
        "http3-open",
    );
    assert_eq!(code, Some(0), "{out}\n{err}");
    let (sent, ok, errors, unanswered) = counts(&rec);
    assert!(sent >= 150, "{out}");
    assert_eq!(sent, ok + errors + unanswered, "{out}");
    assert_eq!(ok, sent, "every request a 200: {out}");
    let q = &rec["result"]["http3"];
    assert!(q["connections"].as_u64().unwrap() >= 2, "{q}");
    assert!(q["packets_sent"].as_u64().unwrap() >= sent, "{q}");
    assert!(q["rtt_mean_ns"].as_u64().unwrap() > 0, "{q}");
    assert!(
        out.contains("over HTTP/3 (QUIC) with 2 streams each"),
        "{out}"
    );
    assert!(out.contains("\nQUIC: "), "{out}");

    // The closed loop with a cap: exactly N answered.
    let (code, out, err, rec) = common::load_http(
        &url,
        &[
            "--http3",
            "--insecure",
            "--rate",
            "max",
            "--requests",
            "500",
            "--connections",
            "4",
            "--duration",
            "5s",
        ],
        "http3-max",
    );
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert_eq!(counts(&rec), (500, 500, 0, 0), "{out}");

    // Caddy asked for a name it holds no certificate for: its TLS alert, by name.
    let ip = format!("https://127.0.0.1:{port}/");
    let (code, out, err, _) = common::load_http(
        &ip,
        &["--http3", "--insecure", "--rate", "10", "--duration", "1s"],
        "http3-alert",
    );
    assert_eq!(code, Some(2), "{out}\n{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("no HTTP/3 connection: the QUIC handshake with 127.0.0.1:")
            && err.contains("failed: the server sent TLS alert internal_error (80)"),
        "{err}"
    );

    // Nothing on the UDP port: no reply within --timeout.
    let none = common::free_port();
    let (code, out, err, _) = common::load_http(
        &format!("https://localhost:{none}/"),
        &[
            "--http3",
            "--insecure",
            "--rate",
            "10",
            "--duration",
            "1s",
            "--timeout",
            "300ms",
        ],
        "http3-none",
    );
    assert_eq!(code, Some(2), "{out}\n{err}");
    assert!(
        err.contains(&format!(
            "got no reply (nothing answers QUIC on UDP port {none}"
        )),
        "{err}"
    );
}
