//! The table rows of load http.

use super::{
    check, file, Made,
    Want::{Error, Plan},
};
use std::time::Duration;

#[test]
fn load_http_rows() {
    let body = file("load-body.json", b"{\"a\":1}");
    let big = file("load-big.bin", &vec![b'x'; (1 << 20) + 1]);
    let me = std::process::id().to_string();
    let me = me.as_str();
    check(&[
        // --pid: the server watched for the response-time ledger (HTTP/1.1, HTTP/2), a
        // process that exists now; over HTTP/3 its UDP socket is found instead.
        (
            &["load", "http", "http://127.0.0.1/", "--rate", "100", "--pid", me],
            Plan(|p| {
                matches!(p, Made::LoadHttp(l) if l.pid == Some(std::process::id()))
            }),
        ),
        (
            &["load", "http", "http://127.0.0.1/", "--rate", "100"],
            Plan(|p| matches!(p, Made::LoadHttp(l) if l.pid.is_none())),
        ),
        (
            &["load", "http", "http://127.0.0.1/", "--rate", "100", "--pid", "4294967295"],
            Error("--pid 4294967295: no such process"),
        ),
        (
            &[
                "load",
                "http",
                "https://127.0.0.1:8443/",
                "--rate",
                "100",
                "--http3",
                "--pid",
                me,
            ],
            Error("--pid applies to HTTP/1.1 and HTTP/2 (over --http3 the server is found by its UDP socket, or started by --server-cmd)"),
        ),
        // The rate's forms (pps units); `max` is a closed loop (no schedule, rate 0).
        (
            &["load", "http", "http://127.0.0.1/", "--rate", "2k"],
            Plan(|p| matches!(p, Made::LoadHttp(l) if l.rate == 2000.0 && !l.max_rate)),
        ),
        (
            &["load", "http", "http://127.0.0.1/", "--rate", "max"],
            Plan(|p| {
                matches!(p, Made::LoadHttp(l) if l.max_rate && l.rate == 0.0 && l.requests.is_none()
                    && l.duration == Duration::from_secs(10) && l.intended() == 0)
            }),
        ),
        // `--requests` (oha -n): the run still ends at --duration, 10 s by default (a
        // server that never answers must not hold a pipeline for a day).
        (
            &[
                "load",
                "http",
                "http://127.0.0.1/",
                "--rate",
                "max",
                "--requests",
                "5000",
                "--connections",
                "50",
            ],
            Plan(|p| {
                matches!(p, Made::LoadHttp(l) if l.max_rate && l.requests == Some(5000)
                    && l.connections == 50 && l.duration == Duration::from_secs(10))
            }),
        ),
        (
            &[
                "load",
                "http",
                "http://127.0.0.1/",
                "--rate",
                "max",
                "--requests",
                "5000",
                "--duration",
                "2s",
                "--http2",
                "--streams",
                "8",
            ],
            Plan(|p| {
                matches!(p, Made::LoadHttp(l) if l.max_rate && l.requests == Some(5000)
                    && l.duration == Duration::from_secs(2) && l.streams == 8 && l.version.is_http2())
            }),
        ),
        // HTTP/3: https:// only, streams as HTTP/2's, one protocol at a time; not yet
        // under capacity.
        (
            &[
                "load",
                "http",
                "https://127.0.0.1:8443/",
                "--rate",
                "max",
                "--http3",
                "--streams",
                "4",
                "--insecure",
            ],
            Plan(|p| {
                matches!(p, Made::LoadHttp(l) if l.version.is_http3() && l.streams == 4
                    && l.request.tls.insecure && l.schedules() == 40)
            }),
        ),
        (
            &["load", "http", "http://127.0.0.1/", "--rate", "10", "--http3"],
            Error(
                "URL http://127.0.0.1/: allowed https://HOST[:PORT]/PATH with --http3 (QUIC is always TLS)",
            ),
        ),
        (
            &[
                "load",
                "http",
                "https://127.0.0.1/",
                "--rate",
                "10",
                "--http3",
                "--http2",
                "--insecure",
            ],
            Error("the argument '--http3' cannot be used with '--http2'"),
        ),
        (
            &[
                "load",
                "http",
                "https://127.0.0.1/",
                "--rate",
                "10",
                "--http3",
                "--insecure",
                "--header",
                "Connection: close",
            ],
            Error("--header \"Connection: close\": allowed no connection-specific header with --http2 or --http3"),
        ),
        (
            &[
                "capacity",
                "http",
                "https://127.0.0.1/",
                "--http3",
                "--insecure",
            ],
            Plan(|p| matches!(p, Made::Capacity(c)
                if matches!(&c.load, tpslab_plan::capacity::CapacityLoad::Http(h) if h.load.version.is_http3()))),
        ),
        // --server-cmd starts an HTTP/3 server for the run; --verify needs it.
        (
            &[
                "load",
                "http",
                "https://127.0.0.1:8443/",
                "--rate",
                "100",
                "--http3",
                "--insecure",
                "--server-cmd",
                "caddy run",
                "--verify",
            ],
            Plan(|p| {
                matches!(p, Made::LoadHttp(l) if l.version.is_http3() && l.verify
                    && l.server_cmd.as_deref() == Some("caddy run"))
            }),
        ),
        (
            &[
                "load",
                "http",
                "http://127.0.0.1/",
                "--rate",
                "100",
                "--server-cmd",
                "caddy run",
            ],
            Error("--server-cmd applies to --http3 (the QUIC server's socket is watched and restarted for --verify)"),
        ),
        (
            &[
                "load",
                "http",
                "https://127.0.0.1/",
                "--rate",
                "100",
                "--http3",
                "--insecure",
                "--verify",
            ],
            Error("--verify needs --server-cmd: a server's socket takes a new buffer limit only when it is created, so tpslab must start the server again"),
        ),
        (
            &[
                "load",
                "http",
                "http://127.0.0.1/",
                "--rate",
                "max",
                "--requests",
                "0",
            ],
            Error("--requests 0: allowed 1..=10000000000"),
        ),
        (
            &[
                "load",
                "http",
                "http://127.0.0.1/",
                "--rate",
                "100",
                "--requests",
                "10",
            ],
            Error("--requests applies to --rate max"),
        ),
        (
            &[
                "load",
                "http",
                "http://127.0.0.1:8080/x?y=1",
                "--rate",
                "2000",
                "--connections",
                "8",
                "--duration",
                "3s",
                "--method",
                "POST",
                "--header",
                "Accept: */*",
                "--body",
                body,
            ],
            Plan(|p| {
                matches!(p, Made::LoadHttp(l)
                if l.request.url == "http://127.0.0.1:8080/x?y=1" && l.request.method == "POST"
                    && l.request.headers == [("Accept".to_string(), "*/*".to_string())]
                    && l.target == "127.0.0.1:8080".parse().unwrap()
                    && l.rate == 2000.0 && l.connections == 8 && l.duration == Duration::from_secs(3)
                    && l.timeout == Duration::from_secs(2) && l.body == b"{\"a\":1}" && l.body_bytes == 7
                    && l.interval_ns() == 4e6 && l.intended() == 6000)
            }),
        ),
        // Defaults: 10 connections for 10 s.
        (
            &["load", "http", "http://localhost/", "--rate", "100"],
            Plan(|p| {
                matches!(p, Made::LoadHttp(l)
            if l.target.port() == 80 && l.target.ip().is_loopback() && l.connections == 10
                && l.duration == Duration::from_secs(10) && l.body.is_empty() && l.request.method == "GET")
            }),
        ),
        // More connections than requests in the plan: the later ones send nothing.
        (
            &[
                "load",
                "http",
                "http://127.0.0.1/",
                "--rate",
                "10",
                "--duration",
                "1s",
                "--connections",
                "50",
            ],
            Plan(|p| matches!(p, Made::LoadHttp(l) if l.connections == 50 && l.intended() == 10)),
        ),
        (
            &[
                "load",
                "http",
                "https://127.0.0.1/",
                "--rate",
                "10",
                "--insecure",
            ],
            Plan(
                |p| matches!(p, Made::LoadHttp(l) if l.target.port() == 443 && l.request.tls.insecure),
            ),
        ),
        (
            &[
                "load",
                "http",
                "http://127.0.0.1/",
                "--rate",
                "10",
                "--insecure",
            ],
            Error("--insecure applies to an https:// URL, not \"http://127.0.0.1/\""),
        ),
        (
            &["load", "http", "127.0.0.1:8080", "--rate", "10"],
            Error("URL \"127.0.0.1:8080\": allowed http[s]://HOST[:PORT]/PATH"),
        ),
        (
            &["load", "http", "http://127.0.0.1:0/", "--rate", "10"],
            Error("URL \"http://127.0.0.1:0/\": allowed a port 1..=65535"),
        ),
        (
            &["load", "http", "http://127.0.0.1/", "--rate", "0"],
            Error("--rate 0: allowed a rate above 0"),
        ),
        (
            &["load", "http", "http://127.0.0.1/", "--rate", "NaN"],
            Error("--rate NaN: allowed a rate above 0"),
        ),
        (
            &["load", "http", "http://127.0.0.1/", "--rate", "20M"],
            Error("--rate 20000000: allowed above 0 and at most 10000000 requests/s"),
        ),
        (
            &[
                "load",
                "http",
                "http://127.0.0.1/",
                "--rate",
                "10",
                "--connections",
                "0",
            ],
            Error("--connections 0: allowed 1..=10000"),
        ),
        (
            &[
                "load",
                "http",
                "http://127.0.0.1/",
                "--rate",
                "10",
                "--connections",
                "10001",
            ],
            Error("--connections 10001: allowed 1..=10000"),
        ),
        (
            &[
                "load",
                "http",
                "http://127.0.0.1/",
                "--rate",
                "10",
                "--duration",
                "10ms",
            ],
            Error("--duration 10ms: allowed 100ms..="),
        ),
        (
            &[
                "load",
                "http",
                "http://127.0.0.1/",
                "--rate",
                "10",
                "--timeout",
                "0s",
            ],
            Error("--timeout 0s: allowed 1ms..=10m"),
        ),
        (
            &[
                "load",
                "http",
                "http://127.0.0.1/",
                "--rate",
                "10",
                "--load-threads",
                "300",
            ],
            Error("--load-threads 300: allowed 1..=256"),
        ),
        (
            &[
                "load",
                "http",
                "http://127.0.0.1/",
                "--rate",
                "10",
                "--header",
                "NoColon",
            ],
            Error("--header \"NoColon\": allowed NAME: VALUE"),
        ),
        (
            &[
                "load",
                "http",
                "http://127.0.0.1/",
                "--rate",
                "10",
                "--method",
                "CONNECT",
            ],
            Error("--method CONNECT: allowed a method with a reply"),
        ),
        (
            &[
                "load",
                "http",
                "http://127.0.0.1/",
                "--rate",
                "10",
                "--body",
                "/nonexistent/b.json",
            ],
            Error("--body /nonexistent/b.json: "),
        ),
        (
            &[
                "load",
                "http",
                "http://127.0.0.1/",
                "--rate",
                "10",
                "--body",
                big,
            ],
            Error("--body "),
        ),
        (
            &["load", "http", "http://127.0.0.1/"],
            Error("load http needs --rate R: requests a second"),
        ),
        (
            &[
                "load",
                "http",
                "http://127.0.0.1/",
                "--rate",
                "max",
                "--fail-on",
                "p99<20ms,errors<0.1%,rps>=5k,errors",
            ],
            Plan(|p| {
                matches!(p, Made::LoadHttp(l)
                    if l.fail_on.as_deref() == Some("p99<20ms,errors<0.1%,rps>=5k,errors"))
            }),
        ),
        (
            &[
                "load",
                "http",
                "http://127.0.0.1/",
                "--rate",
                "max",
                "--fail-on",
                "loss>1%",
            ],
            Error("--fail-on 'loss>1%': this command cannot judge it; allowed 'pNN<DURATION'"),
        ),
        (
            &[
                "load",
                "http",
                "http://127.0.0.1/",
                "--rate",
                "max",
                "--fail-on",
                "p99<20",
            ],
            Error("--fail-on 'p99<20': p99: a duration (e.g. p99<20ms)"),
        ),
    ]);
}
