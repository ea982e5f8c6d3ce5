//! The table rows of ramp, tcp and serve tcp.

use super::{
    check, file, joined, Made,
    Want::{Error, Plan},
    BITRATE_FORMS, SIZE_FORMS,
};
use std::time::Duration;
use tpslab_plan::proto::Proto;
use tpslab_plan::ramp::UserConnections;
use tpslab_plan::tcp::{ServeTcpMode, TcpMode};
use tpslab_plan::tcp::{ServeTcpPlan, TcpPlan};
use tpslab_run::ramp::{RampSetup, BUILTIN_UNSTARTED};

#[test]
fn ramp_rows() {
    let dns = file("dns.bin", &[0u8; 29]);
    let one = file("one.bin", b"x");
    check(&[
        (&["ramp", "tcp"], Plan(|p| matches!(p, Made::Ramp(RampSetup { plan, builtin: Some(b) })
            if plan.proto == Proto::Tcp && plan.target == BUILTIN_UNSTARTED
                && plan.steps == [1, 2, 4, 8, 16, 32, 64] && plan.step == Duration::from_secs(3)
                && plan.warmup == Duration::from_secs(1) && plan.timeout == Duration::from_secs(2)
                // 1024 bytes, "ping" every 64, behind a 4-byte length.
                && plan.request.len() == 1028 && plan.request[..4] == 1024u32.to_be_bytes()
                && plan.request[4..8] == *b"ping" && plan.request[1028 - 64..1028 - 60] == *b"ping"
                && plan.server_pid.is_none() && b.serial == Duration::from_millis(10)
                && plan.builtin_server.as_deref() == Some("0ns CPU + 10ms waiting per request, no lock")))),
        (&["ramp", "tcp", "--users", "10..30", "--step", "+10", "--serialize", "--server-threads", "4"],
            Plan(|p| matches!(p, Made::Ramp(RampSetup { plan, builtin: Some(b) })
                if plan.steps == [10, 20, 30] && b.serialize && b.threads == 4
                    && plan.builtin_server.as_deref() == Some("0ns CPU + 10ms under one global lock per request")))),
        (&["ramp", "udp", "127.0.0.1:9", "--payload-file", dns, "--seq-field", "0:2", "--knee-gain", "0.5"],
            Plan(|p| matches!(p, Made::Ramp(RampSetup { plan, builtin: None })
                if plan.proto == Proto::Udp && plan.target.port() == 9 && plan.request.len() == 29
                    && plan.seq_field == Some((0, 2)) && plan.knee_gain == 0.5 && plan.builtin_server.is_none()))),
        (&["ramp", "tcp", "--users", "9..1"], Error("--users 9..1: the range is empty (FIRST above LAST)")),
        (&["ramp", "tcp", "--users", "0..5"], Error("--users 0..5: allowed FIRST..LAST with 1 <= FIRST <= LAST <= 10000, e.g. 1..200")),
        (&["ramp", "tcp", "--step", "x1"], Error("--step x1: allowed +N or N (add N users, N >= 1) or xF (multiply by F > 1), e.g. +10 or x2")),
        (&["ramp", "tcp", "127.0.0.1:9", "--payload-file", "/nonexistent/req.bin"], Error("--payload-file /nonexistent/req.bin: ")),
        (&["ramp", "tcp", "--framing", "lines"], Error("--framing \"lines\": allowed length, fixed:BYTES (1..=16777216) or delim:TEXT (e.g. delim:\\r\\n)")),
        (&["ramp", "tcp", "--timeout", "0s"], Error("--timeout 0s: allowed 1ms..=10m")),
        (&["ramp", "tcp", "--knee-gain", "2"], Error("--knee-gain 2: allowed above 0 and below 1")),
        (&["ramp", "tcp", "127.0.0.1:9", "--serialize"], Error("--server-work, --server-serial, --server-threads and --serialize configure the built-in server: leave out TARGET to use it")),
        (&["ramp", "tcp", "127.0.0.1:9", "--server-threads", "4"], Error("--server-work, --server-serial, --server-threads and --serialize configure the built-in server: leave out TARGET to use it")),
        (&["ramp", "udp"], Error("ramp udp needs TARGET (HOST:PORT), e.g. of `tpslab serve udp --mode echo`")),
        (&["ramp", "udp", "127.0.0.1:9", "--seq-field", "0:2"], Error("--seq-field needs --payload-file")),
        (&["ramp", "udp", "127.0.0.1:9", "--payload-file", one, "--seq-field", "18446744073709551615:2"],
            Error("--seq-field \"18446744073709551615:2\": allowed OFFSET:LEN with LEN 1..=8 inside the 1-byte payload, e.g. 0:2")),
        (&["ramp", "udp", "127.0.0.1:9", "--payload-file", one], Error("ramp udp --payload-file needs --seq-field OFF:LEN (a field the server echoes, e.g. 0:2 for a DNS id) to match replies")),
        (&["ramp", "udp", "127.0.0.1:9", "--framing", "fixed:4"], Error("--framing applies to ramp tcp")),
        (&["ramp", "tcp", "--seq-field", "0:2"], Error("--seq-field applies to ramp udp")),
        (&["ramp", "tcp", "--size", "7"], Error("--size 7: allowed 8..=65507 bytes")),
        (&["ramp", "tcp", "--size", "2x"], Error(joined("--size 2x: ", SIZE_FORMS))),
        (&["ramp", "tcp", "--pid", "1"], Error("--pid applies with a TARGET; the built-in server is watched anyway")),
        (&["ramp", "tcp", "--users", "1..2", "--json", "/nonexistent-tpslab-dir/out.json"], Error("--json /nonexistent-tpslab-dir/out.json: folder /nonexistent-tpslab-dir does not exist")),
        (&["ramp", "tcp", "--users", "1..2", "--json", "-"], Error("--json -: standard output is taken by the report here; give a file")),
        (&["ramp", "tcp", "--svg", "/nonexistent-tpslab-dir/x.svg"], Error("--svg /nonexistent-tpslab-dir/x.svg: folder /nonexistent-tpslab-dir does not exist")),
    ]);
}

#[test]
fn tcp_rows() {
    check(&[
        (&["tcp", "127.0.0.1:1"], Plan(|p| matches!(p, Made::Tcp(TcpPlan { mode: TcpMode::Send { target }, duration, interval, skip, sndbuf: None, rcvbuf: None, write_bytes: 131_072, target_rate_bps: None })
            if target.port() == 1 && *duration == Duration::from_secs(10) && *interval == Duration::from_millis(100) && *skip == Duration::from_secs(1)))),
        (&["tcp", "127.0.0.1:1", "--reverse", "--rcvbuf", "64KiB"], Plan(|p| matches!(p, Made::Tcp(TcpPlan { mode: TcpMode::Reverse { .. }, rcvbuf: Some(65536), .. })))),
        (&["tcp", "--lab-rtt", "30ms", "--lab-loss", "0.1%", "--target-rate", "80mbit", "--no-verify"],
            Plan(|p| matches!(p, Made::Tcp(TcpPlan { mode: TcpMode::Lab { link, sink_rcvbuf: None, verify: false }, target_rate_bps: Some(r), .. })
                if link.delay == Duration::from_millis(15) && (link.loss - 0.001).abs() < 1e-12 && link.queue_packets == 1000 && *r == 80e6))),
        (&["tcp", "--watch-port", "80"], Plan(|p| matches!(p, Made::Tcp(TcpPlan { mode: TcpMode::Watch { pid: None, port: Some(80) }, .. })))),
        (&["tcp"], Error("tcp needs TARGET (HOST:PORT of a sink) or --lab-rtt RTT (a lab between two namespaces)")),
        (&["tcp", "127.0.0.1:1", "--lab-rtt", "30ms"], Error("give TARGET or --lab-rtt, not both: the lab runs its own sink")),
        (&["tcp", "--lab-rtt", "30ms", "--lab-loss", "2"], Error("--lab-loss 2: allowed a share from 0 up to (not including) 1, or a percentage such as 0.1%")),
        (&["tcp", "--lab-rtt", "11s"], Error("--lab-rtt 11s: allowed 1ms..=10s")),
        (&["tcp", "--lab-rtt", "0s"], Error("--lab-rtt 0s: allowed 1ms..=10s")),
        (&["tcp", "--lab-rtt", "30ms", "--lab-rate", "fast"], Error(joined("--lab-rate fast: ", BITRATE_FORMS))),
        (&["tcp", "--lab-rtt", "30ms", "--lab-rate", "80"], Error(joined("--lab-rate 80: ", BITRATE_FORMS))),
        (&["tcp", "--lab-rtt", "30ms", "--lab-queue", "0"], Error("lab link: queue 0 packets: allowed 1 to 32768 (--lab-rate, --lab-queue)")),
        (&["tcp", "--lab-rtt", "30ms", "--sndbuf", "2GiB"], Error("--sndbuf 2GiB: allowed 1KiB to 1023MiB")),
        (&["tcp", "--lab-rtt", "30ms", "--sndbuf", "1GiB"], Error("--sndbuf 1GiB: allowed 1KiB to 1023MiB")),
        (&["tcp", "--lab-rtt", "30ms", "--sink-rcvbuf=-5"], Error(joined("--sink-rcvbuf -5: ", SIZE_FORMS))),
        (&["tcp", "--lab-rtt", "30ms", "--write-size", "2x"], Error(joined("--write-size 2x: ", SIZE_FORMS))),
        (&["tcp", "127.0.0.1:1", "--sink-rcvbuf", "64KiB"], Error("--sink-rcvbuf applies only with --lab-rtt")),
        (&["tcp", "127.0.0.1:1", "--lab-queue", "10"], Error("--lab-queue applies only with --lab-rtt")),
        (&["tcp", "127.0.0.1:1", "--no-verify"], Error("--no-verify applies only with --lab-rtt")),
        // `cli` then marks --skip as its default, not given.
        (&["tcp", "127.0.0.1:1", "--duration", "1s"], Error("--skip 1s leaves less than two samples of --duration 1s: shorten --skip or lengthen --duration")),
        (&["tcp", "127.0.0.1:1", "--interval", "500us"], Error("--interval 500us: allowed 1ms..=1m")),
        (&["tcp", "127.0.0.1:1", "--duration", "1h", "--interval", "1ms"], Error("--interval 1ms over --duration 1h: 3600000 samples; allowed up to 360000 (an --interval of at least 10ms)")),
        (&["tcp", "127.0.0.1:1", "--target-rate", "0mbit"], Error(joined("--target-rate 0mbit: ", BITRATE_FORMS))),
        (&["tcp", "127.0.0.1:1", "--reverse", "--sndbuf", "64KiB"], Error("--sndbuf is the sender's: with --reverse the sender is the source (tpslab serve tcp --mode source --sndbuf SIZE)")),
        (&["tcp", "127.0.0.1:1", "--rcvbuf", "64KiB"], Error("--rcvbuf applies with --reverse (this side receiving); the sink's buffer is set on the sink")),
        (&["tcp", "--lab-rtt", "30ms", "--reverse"], Error("--reverse and --rcvbuf apply with a TARGET, not in the lab yet")),
        (&["tcp", "127.0.0.1:1", "--reverse", "--target-rate", "80mbit"], Error("--target-rate applies to sending; with --reverse only this side's receive window is judged")),
        (&["tcp", "127.0.0.1:1", "--reverse", "--fail-on", "target"], Error("--fail-on target: with --reverse no target rate is judged; allowed invalid")),
        (&["tcp", "--watch-pid", "999999999"], Error("--watch-pid 999999999: no such process")),
        (&["tcp", "--watch-port", "80", "--lab-loss", "1%"], Error("--lab-loss does not apply when watching flows of another process")),
        (&["tcp", "--watch-port", "80", "--sndbuf", "64KiB"], Error("--sndbuf does not apply when watching flows of another process")),
        (&["tcp", "127.0.0.1:1", "--watch-port", "80"], Error("--watch-pid/--watch-port watch existing flows: leave out TARGET and --lab-rtt")),
        (&["tcp", "--lab-rtt", "10ms", "--json", "/nonexistent-tpslab-dir/out.json"], Error("--json /nonexistent-tpslab-dir/out.json: folder /nonexistent-tpslab-dir does not exist")),
    ]);
}

#[test]
fn serve_tcp_rows() {
    check(&[
        (
            &["serve", "tcp"],
            Plan(|p| {
                matches!(p, Made::ServeTcp(s) if *s == ServeTcpPlan {
            listen: "127.0.0.1:5001".parse().unwrap(), mode: ServeTcpMode::Sink, rcvbuf: None, sndbuf: None,
            work: Duration::ZERO, serial: Duration::ZERO, serialize: false, threads: 0, duration: None })
            }),
        ),
        (
            &[
                "serve",
                "tcp",
                "--mode",
                "replace",
                "--work",
                "20us",
                "--serial-ns",
                "1000000",
                "--serialize",
                "--threads",
                "4",
                "--duration",
                "1m",
            ],
            Plan(|p| {
                matches!(
                    p,
                    Made::ServeTcp(ServeTcpPlan {
                        mode: ServeTcpMode::Replace,
                        work,
                        serial,
                        serialize: true,
                        threads: 4,
                        duration: Some(d),
                        ..
                    }) if *work == Duration::from_micros(20) && *serial == Duration::from_millis(1)
                        && *d == Duration::from_secs(60)
                )
            }),
        ),
        (
            &["serve", "tcp", "--bind", "nowhere"],
            Error("--bind \"nowhere\": allowed ADDR:PORT, e.g. 127.0.0.1:5001"),
        ),
        (
            &["serve", "tcp", "--rcvbuf", "1"],
            Error("--rcvbuf 1: allowed 1KiB to 1023MiB"),
        ),
        (
            &["serve", "tcp", "--sndbuf", "2x"],
            Error(joined("--sndbuf 2x: ", SIZE_FORMS)),
        ),
        (
            &["serve", "tcp", "--mode", "echo", "--serialize"],
            Error(
                "--serialize needs --serial DURATION (the part of each request run under the lock)",
            ),
        ),
        (
            &["serve", "tcp", "--serial", "1ms"],
            Error("--serial applies to --mode echo or replace, not sink or source"),
        ),
        (
            &["serve", "tcp", "--mode", "source", "--rcvbuf", "64KiB"],
            Error("--rcvbuf applies to --mode sink"),
        ),
        (
            &["serve", "tcp", "--mode", "sink", "--sndbuf", "64KiB"],
            Error("--sndbuf applies to --mode source"),
        ),
        (
            &["serve", "tcp", "--mode", "echo", "--work", "2s"],
            Error("--work 2s: allowed 0s..=1s"),
        ),
        (
            &["serve", "tcp", "--mode", "echo", "--serial", "11s"],
            Error("--serial 11s: allowed 0s..=10s"),
        ),
        (
            &[
                "serve",
                "tcp",
                "--mode",
                "echo",
                "--serial",
                "1ms",
                "--serial-ns",
                "1000000",
            ],
            Error(
                "the argument '--serial <DURATION>' cannot be used with '--serial-ns <SERIAL_NS>'",
            ),
        ),
    ]);
}

#[test]
fn ramp_http_rows() {
    let body = file("body.json", b"{\"a\":1}");
    let big = file("big.bin", &vec![b'x'; (1 << 20) + 1]);
    check(&[
        (&["ramp", "http", "http://127.0.0.1:8080/x?y=1", "--method", "POST", "--header", "Accept: */*",
           "--header", "X-Trace:  7 ", "--body", body, "--users", "1..4"],
            Plan(|p| matches!(p, Made::Ramp(RampSetup { plan, builtin: None })
                if matches!(&plan.proto, Proto::Http(h) if h.url == "http://127.0.0.1:8080/x?y=1"
                    && h.method == "POST"
                    && h.headers == [("Accept".to_string(), "*/*".to_string()), ("X-Trace".to_string(), "7".to_string())])
                && plan.target == "127.0.0.1:8080".parse().unwrap()
                && plan.request == b"{\"a\":1}" && plan.steps == [1, 2, 4]
                && plan.connections == UserConnections::PerUser))),
        (&["ramp", "http", "http://127.0.0.1:8080/", "--http2"],
            Plan(|p| matches!(p, Made::Ramp(RampSetup { plan, .. }) if plan.connections == UserConnections::Http2(1)))),
        (&["ramp", "http", "http://127.0.0.1:8080/", "--http2", "--connections", "4"],
            Plan(|p| matches!(p, Made::Ramp(RampSetup { plan, .. }) if plan.connections == UserConnections::Http2(4)))),
        (&["ramp", "http", "http://127.0.0.1:8080/", "--http2", "--connections", "10001"],
            Error("--connections 10001: allowed 1..=10000")),
        (&["ramp", "http", "https://127.0.0.1:8443/", "--http3", "--insecure"],
            Plan(|p| matches!(p, Made::Ramp(RampSetup { plan, .. })
                if plan.connections == UserConnections::Http3(1)))),
        (&["ramp", "http", "https://127.0.0.1:8443/", "--http3", "--connections", "4"],
            Plan(|p| matches!(p, Made::Ramp(RampSetup { plan, .. }) if plan.connections == UserConnections::Http3(4)))),
        (&["ramp", "http", "http://127.0.0.1:8080/", "--http3"],
            Error("URL http://127.0.0.1:8080/: allowed https://HOST[:PORT]/PATH with --http3 (QUIC is always TLS)")),
        (&["ramp", "http", "https://127.0.0.1:8443/", "--http3", "--http2"],
            Error("the argument '--http3' cannot be used with '--http2'")),
        (&["ramp", "http", "https://127.0.0.1:8443/", "--http3", "--header", "Connection: close"],
            Error("--header \"Connection: close\": allowed no connection-specific header with --http2 or --http3")),
        (&["ramp", "http", "--http3"],
            Error("ramp http --http3 needs the https:// URL of an HTTP/3 server: the built-in server speaks HTTP/1.1")),
        (&["ramp", "http", "http://127.0.0.1:8080/", "--connections", "4"],
            Error("--connections applies with --http2 or --http3")),
        (&["ramp", "http", "--serialize"], Plan(|p| matches!(p, Made::Ramp(RampSetup { plan, builtin: Some(b) })
            if matches!(&plan.proto, Proto::Http(h) if h.method == "GET" && h.headers.is_empty())
                && plan.target == BUILTIN_UNSTARTED && plan.request.is_empty() && b.serialize))),
        (&["ramp", "http", "http://localhost/"], Plan(|p| matches!(p, Made::Ramp(RampSetup { plan, .. })
            if plan.target.port() == 80 && plan.target.ip().is_loopback()))),
        (&["ramp", "http", "https://127.0.0.1/", "--insecure"], Plan(|p| matches!(p, Made::Ramp(s) if s.plan.target.port() == 443))),
        (&["ramp", "http", "http://127.0.0.1/", "--insecure"], Error("--insecure applies to an https:// URL, not \"http://127.0.0.1/\"")),
        (&["ramp", "http", "ftp://127.0.0.1/"], Error("URL \"ftp://127.0.0.1/\": allowed http[s]://HOST[:PORT]/PATH")),
        (&["ramp", "http", "127.0.0.1:8080"], Error("URL \"127.0.0.1:8080\": allowed http[s]://HOST[:PORT]/PATH")),
        (&["ramp", "http", "http://127.0.0.1:0/"], Error("URL \"http://127.0.0.1:0/\": allowed a port 1..=65535")),
        (&["ramp", "http", "http://127.0.0.1:70000/"], Error("URL \"http://127.0.0.1:70000/\": allowed a port 1..=65535")),
        (&["ramp", "http", "http://a b/"], Error("URL \"http://a b/\": allowed http://HOST[:PORT]/PATH")),
        (&["ramp", "http", "http://127.0.0.1/", "--header", "NoColon"], Error("--header \"NoColon\": allowed NAME: VALUE")),
        (&["ramp", "http", "http://127.0.0.1/", "--header", "Content-Length: 3"],
            Error("--header \"Content-Length: 3\": allowed other headers: Content-Length is written by tpslab from the body (--body)")),
        (&["ramp", "http", "http://127.0.0.1/", "--method", "G ET"], Error("--method G ET: allowed an HTTP method")),
        (&["ramp", "http", "http://127.0.0.1/", "--body", "/nonexistent/b.json"], Error("--body /nonexistent/b.json: ")),
        (&["ramp", "http", "http://127.0.0.1/", "--body", "/dev/null"], Error("--body /dev/null: ")),
        (&["ramp", "http", "http://127.0.0.1/", "--body", big], Error("--body ")),
        (&["ramp", "http", "http://127.0.0.1/", "--payload-file", body], Error("--payload-file applies to ramp tcp|udp; ramp http sends --body FILE")),
        (&["ramp", "http", "http://127.0.0.1/", "--framing", "delim:x"], Error("--framing applies to ramp tcp")),
        (&["ramp", "http", "http://127.0.0.1/", "--seq-field", "0:2"], Error("--seq-field applies to ramp udp")),
        (&["ramp", "http", "http://127.0.0.1/", "--serialize"],
            Error("--server-work, --server-serial, --server-threads and --serialize configure the built-in server: leave out URL to use it")),
        (&["ramp", "http", "http://127.0.0.1/", "--users", "9..1"], Error("--users 9..1: the range is empty (FIRST above LAST)")),
    ]);
}
