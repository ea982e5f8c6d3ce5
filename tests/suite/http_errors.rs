//! `load http`'s failures by kind against servers that misbehave on loopback: a port
//! nothing listens on (connects refused, apart from failed requests), a server that
//! closes or resets its connections mid-reply (requests failed: closed by peer, reset), a
//! storm of 503s from Debian's nginx (replies by status class, not failures), bad URLs
//! (one line, exit 2).

use crate::common;

use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpListener;

/// `tpslab load http URL ARGS --json`: exit code, stdout, stderr, record (`Null` when
/// none was written).
use common::load_http as load;

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

const LOAD: &[&str] = &["--rate", "200", "--connections", "2", "--duration", "500ms"];

/// A server that reads each request's head, writes the start of a reply promising 100
/// bytes of body and 7 of them, then closes the connection (`reset`: having read one
/// byte of the request only: a close with unread bytes is an RST). Runs until the test
/// ends.
fn half_reply_server(reset: bool) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            std::thread::spawn(move || {
                let mut have = Vec::new();
                let mut buf = [0u8; 4096];
                if reset {
                    // The request's first byte only; the rest is left unread.
                    let _ = s.read(&mut buf[..1]);
                    std::thread::sleep(std::time::Duration::from_millis(2));
                    let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial");
                    return;
                }
                while !have.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(k) => have.extend_from_slice(&buf[..k]),
                    }
                }
                let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial");
            });
        }
    });
    port
}

#[test]
fn a_server_that_closes_or_resets_mid_reply_fails_requests_by_kind() {
    for (reset, kind) in [(false, "closed"), (true, "reset")] {
        let port = half_reply_server(reset);
        let url = format!("http://127.0.0.1:{port}/");
        let (code, _, err, r) = load(&url, LOAD, &format!("http-errors-mid-{kind}"));
        // Nothing answered: exit 2, one line naming the requests' failures.
        assert_eq!(code, Some(2), "{err}");
        assert_eq!(
            err.lines().filter(|l| l.contains("error:")).count(),
            1,
            "{err}"
        );
        let res = &r["result"];
        let sent = n(&res["sent"]);
        assert!(sent >= 20, "{res}");
        // Every request sent failed as this kind (a reset can also read as a close when
        // the FIN came first; none may be a connect's failure or unanswered).
        let e = &res["errors"];
        let by_kind = n(&e[kind]);
        assert!(by_kind * 2 > sent, "{kind}: {res}");
        assert_eq!(n(&e["closed"]) + n(&e["reset"]), sent, "{res}");
        assert!(res.get("connect_errors").is_none(), "{res}");
        assert!(
            err.contains("connects failed: none; requests failed: "),
            "{err}"
        );
    }
}

#[test]
fn a_503_storm_is_replies_of_class_5xx() {
    let tag = "a_503_storm_is_replies_of_class_5xx";
    let Some((_nginx, port)) = common::nginx(tag) else {
        return;
    };
    let url = format!("http://127.0.0.1:{port}/busy");
    let (code, out, err, r) = load(&url, LOAD, "http-errors-503");
    assert_eq!(code, Some(0), "{err}");
    let res = &r["result"];
    assert_eq!(n(&res["status"]["s5xx"]), n(&res["sent"]), "{res}");
    assert_eq!(n(&res["status"]["s2xx"]), 0, "{res}");
    assert!(
        out.contains("Status: 2xx 0, 3xx 0, 4xx 0, 5xx 100"),
        "{out}"
    );
    assert!(out.contains("Errors: none"), "{out}");
}

#[test]
fn bad_urls_are_one_line_exit_2() {
    for (url, says) in [
        ("ftp://127.0.0.1/", "http[s]://HOST[:PORT]/PATH"),
        ("http://127.0.0.1:0/", "a port 1..=65535"),
        ("https://u@127.0.0.1/", "without user info"),
        ("127.0.0.1:80", "http[s]://"),
    ] {
        let mut c = common::tpslab();
        c.args(["load", "http", url, "--rate", "10"]);
        let out = common::run(c);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{url}: {err}");
        assert_eq!(err.lines().count(), 1, "{url}: {err}");
        assert!(err.contains(says), "{url}: {err}");
    }
}
