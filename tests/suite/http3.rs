//! `load http --http3` against a real HTTP/3 server: Debian's Caddy (2.6, quic-go),
//! started here in a folder of this test's own (`tls internal` without installing its
//! root, no admin endpoint, HOME and XDG folders here), stopped by PID. Every request
//! sent is answered or counted failed; `--rate max --requests N` gets exactly N 200s;
//! a URL without HTTP/3 behind it (Caddy asked for a name it has no certificate for, a
//! UDP port nothing listens on) is one line naming the handshake's failure, exit 2.
//! A second, independent implementation, aioquic, is in http3_aioquic.rs.

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

/// Caddy serving `hello` (and a 503 at /busy) over HTTPS and HTTP/3 on
/// https://localhost:PORT.
fn caddy(tag: &str) -> (common::Kill, u16) {
    let dir = common::tmp(tag);
    std::fs::create_dir_all(&dir).unwrap();
    let port = common::free_port();
    let conf = format!(
        "{{\n\tadmin off\n\tskip_install_trust\n\tauto_https disable_redirects\n\tstorage file_system {d}/data\n\tlog {{\n\t\toutput discard\n\t}}\n}}\nhttps://localhost:{port} {{\n\ttls internal\n\trespond /busy \"busy\" 503\n\trespond \"hello\" 200\n}}\n",
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
    // Its `tls internal` certificate is issued after the ports are bound (a new CA's
    // first start, seconds on a busy host): until then a handshake gets TLS alert
    // internal_error. Ready once HTTPS over TCP answers (the same certificate).
    let url = format!("https://localhost:{port}/");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !Command::new("curl")
        .args(["-sk", "--max-time", "2", &url])
        .output()
        .is_ok_and(|o| o.stdout == b"hello")
    {
        assert!(
            Instant::now() < deadline,
            "caddy's certificate not issued within 30 s (curl -k {url})"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    (k, port)
}

/// The record's counts: every request sent answered (2xx here) or counted failed.
/// The server socket's request path in `rec` (a `load http --http3` record) balances to
/// the datagram: every UDP datagram the client sent (`result.http3.datagrams_sent`) is
/// attempted, none unattributed, each dropped at the socket or delivered. Returns that
/// count.
pub(crate) fn quic_request_path_balances(rec: &serde_json::Value) -> u64 {
    let r = &rec["result"];
    let req = &r["server_udp"]["ledger"]["request"];
    let sent = r["http3"]["datagrams_sent"].as_u64().unwrap();
    assert_eq!(req["attempted"].as_u64(), Some(sent), "{req}");
    assert_eq!(req["unattributed"].as_i64(), Some(0), "{req}");
    assert_eq!(
        common::row(req, "socket_drops") + common::row(req, "delivered"),
        sent,
        "{req}"
    );
    sent
}

pub(crate) fn counts(rec: &serde_json::Value) -> (u64, u64, u64, u64) {
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
    // 2 streams a connection, under quic-go's 100: none waited for one.
    assert_eq!(q["waited_for_stream"], 0, "{q}");
    assert!(!out.contains("\nQUIC streams: "), "{out}");

    // 150 streams on one connection in a closed loop: always more wanted than quic-go's
    // 100 at once (its MaxIncomingStreams), so some wait on the client, counted.
    let (code, out, err, rec) = common::load_http(
        &url,
        &[
            "--http3",
            "--insecure",
            "--rate",
            "max",
            "--requests",
            "3000",
            "--connections",
            "1",
            "--streams",
            "150",
            "--duration",
            "5s",
        ],
        "http3-streams",
    );
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert_eq!(counts(&rec), (3000, 3000, 0, 0), "{out}");
    let q = &rec["result"]["http3"];
    let waited = q["waited_for_stream"].as_u64().unwrap();
    assert!((50..=3000).contains(&waited), "{q}");
    assert!(q["stream_wait_max_ns"].as_u64().unwrap() > 0, "{q}");
    assert!(
        out.contains(&format!(
            "\nQUIC streams: {waited} requests waited on the client for a stream (the server's MAX_STREAMS had none left on their connection, or, rarely, the connection's send window held their headers), the longest "
        )),
        "{out}"
    );
    assert_eq!(q["connections"], 1, "{q}");

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

/// `ramp http --http3`: the users of each step share two QUIC connections (a closed loop),
/// every step answered, the QUIC figures in the record and the report; with Caddy's PID,
/// its threads sampled step by step.
#[test]
fn ramp_http_over_http3_shares_its_quic_connections_among_the_users() {
    const T: &str = "http3::ramp_http_over_http3_shares_its_quic_connections_among_the_users";
    if !common::need(T, CADDY) {
        return;
    }
    let (caddy, port) = caddy("http3-ramp");
    let url = format!("https://localhost:{port}/");
    let pid = caddy.0.id().to_string();
    let (code, out, err, rec) = common::with_record(
        &["ramp", "http", &url],
        &[
            "--http3",
            "--insecure",
            "--connections",
            "2",
            "--users",
            "1..8",
            "--step-duration",
            "500ms",
            "--warmup",
            "200ms",
            "--pid",
            &pid,
        ],
        "http3-ramp",
    );
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert_eq!(rec["plan"]["http3_connections"], 2, "{out}");
    let steps = rec["steps"].as_array().unwrap();
    assert_eq!(
        steps
            .iter()
            .map(|s| s["users"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        [1, 2, 4, 8],
        "{out}"
    );
    for s in steps {
        assert!(s["completed"].as_u64().unwrap() > 0, "{s}");
        // A busy host may time a request out; nothing else may fail.
        if let Some(e) = s["errors"].as_object() {
            assert!(e.keys().all(|k| k.contains("timeout")), "{s}");
        }
        // Caddy's threads were sampled (its PID given).
        assert!(!s["per_thread"].as_array().unwrap().is_empty(), "{s}");
        // No TCP of its own: neither listen socket nor TCP counters read.
        assert!(s["tcp"].is_null() && s["accept_queue_max"].is_null(), "{s}");
    }
    let q = &rec["http3"];
    assert!(q["connections"].as_u64().unwrap() >= 2, "{q}");
    let completed: u64 = steps.iter().map(|s| s["completed"].as_u64().unwrap()).sum();
    assert!(q["packets_sent"].as_u64().unwrap() >= completed, "{q}");
    assert!(q["datagrams_received"].as_u64().unwrap() > 0, "{q}");
    assert!(
        out.contains("HTTP/3 (QUIC): the users' streams on 2 connections"),
        "{out}"
    );
    assert!(out.contains("\nQUIC: "), "{out}");

    // A 503 is a failed request, not an answer (as over HTTP/1.1 and HTTP/2).
    let busy = format!("https://localhost:{port}/busy");
    let (_, out, err, rec) = common::with_record(
        &["ramp", "http", &busy],
        &[
            "--http3",
            "--insecure",
            "--users",
            "1..2",
            "--step-duration",
            "300ms",
            "--warmup",
            "100ms",
        ],
        "http3-ramp-busy",
    );
    let steps = rec["steps"].as_array();
    for s in steps.unwrap_or_else(|| panic!("{out}\n{err}")) {
        assert_eq!(s["completed"], 0, "{s}");
        assert!(s["errors"]["http 5xx"].as_u64().unwrap() > 0, "{s}");
    }
}

/// `capacity http --http3`: each step a `load http --http3` run; a step that breaks its
/// objective (p99 under 1 us cannot hold) is judged by the server's QUIC socket, found by
/// its address, never by an accept queue (there is none over UDP).
#[test]
fn capacity_http_over_http3_judges_a_failing_step_by_the_quic_socket() {
    const T: &str = "http3::capacity_http_over_http3_judges_a_failing_step_by_the_quic_socket";
    if !common::need(T, CADDY) {
        return;
    }
    // A step's figures are the generator's schedule: one at a time.
    let _one = common::serial();
    // Without --pid: no thread rule names a layer first, so the headline says what the
    // socket showed.
    let (_caddy, port) = caddy("http3-capacity");
    let url = format!("https://localhost:{port}/");
    let found = common::retry(T, 3, || {
        // Other processes' CPU time over the run: the only excuse for a late generator.
        let neighbour = common::Neighbour::start(&[]);
        let (code, out, err, rec) = common::with_record(
            &["capacity", "http", &url],
            &[
                "--http3",
                "--insecure",
                "--connections",
                "2",
                "--start-rate",
                "100",
                "--max-rate",
                "100",
                "--step-duration",
                "500ms",
                "--warmup",
                "0s",
                "--repeats",
                "1",
                "--budget",
                "3s",
                "--slo",
                "p99<1us",
            ],
            "http3-capacity",
        );
        assert_eq!(code, Some(0), "{out}\n{err}");
        let first = &rec["steps"][0];
        // A generator late on a busy host makes the step no evidence: again.
        let headline = first["verdict"]["headline"].as_str().unwrap_or_default();
        // A datagram the step's ledger could not place (seen beside a browser, and beside
        // stress-ng) leaves the socket not judged, which the verdict says.
        let spoiled = if first["status"] == "invalid" {
            Some(format!("the step was invalid: {}", first["why"]))
        } else if headline.contains("QUIC socket not judged") {
            Some(format!("the socket was not judged: {headline}"))
        } else {
            None
        };
        if let Some(why) = spoiled {
            match neighbour.busy() {
                Some(busy) => return Err(format!("{why} ({busy})")),
                None => panic!("on a quiet host {why}\n{out}"),
            }
        }
        Ok((out, rec))
    });
    let Some((out, rec)) = found else {
        return;
    };
    assert!(
        out.contains("on 2 QUIC connection(s) over HTTP/3 with 1 stream(s) each"),
        "{out}"
    );
    let first = &rec["steps"][0];
    assert_eq!(first["status"], "fail", "{first}");
    assert!(first["answered_pps"].as_f64().unwrap() > 0.0, "{first}");
    let v = &first["verdict"];
    let headline = v["headline"].as_str().unwrap();
    // Judged: its drops counted (none at this rate, or too few to name).
    assert!(
        headline.contains("no client datagram dropped at the server's QUIC socket")
            || headline.contains("client datagrams dropped at the server's QUIC socket"),
        "{v}"
    );
    assert!(!headline.contains("accept queue"), "{v}");
    assert_ne!(v["case"], "accept_queue_full", "{v}");
}

/// Whether `net.core.rmem_max` can be written inside a network namespace of its own here
/// (it is per namespace on kernels that allow it; on others, this one among them, it is
/// read-only there and only the host's can be changed, under the host lock).
fn rmem_max_writable(ns: &common::NetNs) -> bool {
    ns.command("sh")
        .args(["-c", "test -w /proc/sys/net/core/rmem_max"])
        .status()
        .is_ok_and(|s| s.success())
}

/// `load http --http3 --server-cmd` on Debian's Caddy run as nobody (so quic-go cannot
/// force its buffer past net.core.rmem_max) in a network namespace of its own: its QUIC
/// socket is found by the URL's address, its SO_RCVBUF is what quic-go asks for under
/// rmem_max (the kernel's doubling), every datagram quinn sent is accounted for by the
/// socket's drops and Caddy's threads' reads, and the verdict names what it asked for.
/// Then with rmem_max small (in that namespace where it can be set there, else the
/// host's under the host lock), the socket drops, every datagram still accounted for,
/// and `--verify` raises it through the host guard, restarts Caddy, shows the drops gone
/// and restores the small value (issue 58's Done-when).
#[test]
fn caddy_socket_found_by_address_its_datagrams_accounted_and_its_buffer_judged() {
    // Alone: beside Chromium and other servers, the request path once did not balance to
    // the datagram (seen once in five runs, 2026-12-06; cause not yet found).
    let _g = common::serial();
    const T: &str =
        "http3::caddy_socket_found_by_address_its_datagrams_accounted_and_its_buffer_judged";
    if !common::need(T, CADDY)
        || !common::need(T, "/usr/bin/setpriv")
        || !common::root(
            T,
            "Caddy runs as nobody; its threads' reads are counted by perf tracepoints",
        )
        || !common::can_netns(T)
    {
        return;
    }
    let ns = common::NetNs::new();
    let dir = common::tmp("http3-beneath");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let port = common::free_port();
    let conf = format!(
        "{{\n\tadmin off\n\tskip_install_trust\n\tauto_https disable_redirects\n\tstorage file_system {d}/data\n\tlog {{\n\t\toutput discard\n\t}}\n}}\nhttps://localhost:{port} {{\n\ttls internal\n\trespond \"hello\" 200\n}}\n",
        d = dir.display()
    );
    std::fs::write(dir.join("Caddyfile"), conf).unwrap();
    let d = dir.display();
    let server_cmd = format!(
        "cd {d} && exec setpriv --reuid=nobody --regid=nogroup --clear-groups env HOME={d} XDG_DATA_HOME={d}/data XDG_CONFIG_HOME={d}/config {CADDY} run --config Caddyfile --adapter caddyfile"
    );
    let url = format!("https://localhost:{port}/");
    // Caddy binds its UDP port before its `tls internal` certificate is issued (a new
    // CA's first start, slower beside other tests): a handshake in between gets its TLS
    // alert internal_error. tpslab waits for one handshake after --server-cmd, so each
    // run goes at once, the first (a new CA) too.
    // `on_host`: tpslab (and so Caddy) in the host's namespace instead of the test's.
    let run = |tag: &str, rate: &str, flows: &str, on_host: bool| {
        let json = dir.join(format!("{tag}.json"));
        let out = common::run({
            let mut c = if on_host {
                common::tpslab()
            } else {
                ns.tpslab()
            };
            c.args([
                "load",
                "http",
                &url,
                "--http3",
                "--insecure",
                "--rate",
                rate,
                "--connections",
                flows,
                "--streams",
                flows,
                "--duration",
                "1s",
                "--server-cmd",
                &server_cmd,
                "--verify",
                "--json",
            ])
            .arg(&json);
            c
        });
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        assert_eq!(out.status.code(), Some(0), "{text}\n{err}");
        (text, common::record(&json))
    };

    // As the namespace is: Caddy's socket granted twice what quic-go asks for, up to
    // rmem_max; the request path balances to the datagram.
    let (out, rec) = run("as-is", "1000", "4", false);
    let r = &rec["result"];
    let u = &r["server_udp"];
    assert_eq!(u["address"], format!("127.0.0.1:{port}"), "{u}");
    assert_eq!(
        u["target"]["found_by"],
        format!("found by its UDP socket on 127.0.0.1:{port}"),
        "{u}"
    );
    assert!(
        u["target"]["exe"].as_str().unwrap().ends_with("caddy"),
        "{u}"
    );
    assert_eq!(u["stack"]["name"], "quic-go", "{u}");
    let asks = u["stack"]["asks_bytes"].as_u64().unwrap();
    let rmem_max = u["rmem_max"].as_u64().unwrap();
    let granted = u["observer"]["target_rcvbuf_bytes"][0].as_u64().unwrap();
    assert_eq!(granted, 2 * asks.min(rmem_max), "{u}");
    quic_request_path_balances(&rec);
    let req = &u["ledger"]["request"];
    assert!(out.contains("\nVERDICT (server socket): "), "{out}");
    if common::row(req, "socket_drops") == 0 {
        assert!(
            out.contains("Asked: quic-go asks for ") && out.contains("allows it"),
            "{out}"
        );
        assert!(
            r["verification"]["not_verified"]
                .as_str()
                .unwrap()
                .starts_with("nothing tpslab can apply"),
            "{r}"
        );
    }

    // A small limit: Caddy's socket (as nobody: no SO_RCVBUFFORCE) drops, the verdict
    // names rmem_max with what quic-go asks for, --verify raises it, restarts Caddy,
    // shows the drops gone and restores the small value. In the test's namespace where
    // rmem_max is writable there; else (this kernel) in the host's, under the host lock,
    // the host's value put back whatever happens.
    let on_host = !rmem_max_writable(&ns);
    let _host = on_host.then(common::host_lock);
    // A command in the namespace where the limit is changed.
    let there = |prog: &str| {
        if on_host {
            Command::new(prog)
        } else {
            ns.command(prog)
        }
    };
    // The value to put back, read under the host lock (never a record's figure).
    let was = String::from_utf8(
        there("sysctl")
            .args(["-n", "net.core.rmem_max"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap()
    .trim()
    .to_string();
    assert!(was.parse::<u64>().is_ok(), "net.core.rmem_max: {was:?}");
    let sysctl = |v: &str| {
        there("sysctl")
            .args(["-qw", &format!("net.core.rmem_max={v}")])
            .status()
            .is_ok_and(|s| s.success())
    };
    /// Puts net.core.rmem_max back when dropped (a failed assertion included); a failure
    /// to is said, not panicked on (it may run while a panic unwinds).
    struct PutBack<F: Fn(&str) -> bool>(F, String);
    impl<F: Fn(&str) -> bool> Drop for PutBack<F> {
        fn drop(&mut self) {
            if !(self.0)(&self.1) {
                eprintln!("could not put net.core.rmem_max back to {}", self.1);
            }
        }
    }
    let put_back = PutBack(sysctl, was);
    assert!((put_back.0)("4096"), "sysctl net.core.rmem_max=4096");
    // The kernel's own count of datagrams a full receive buffer dropped (Udp
    // RcvbufErrors, /proc/net/snmp), read by the test, not taken from the record.
    let rcvbuf_errors = || -> u64 {
        let snmp = there("cat").arg("/proc/net/snmp").output().unwrap().stdout;
        let snmp = tpslab_proc::parse_snmp(&snmp[..], "/proc/net/snmp").unwrap();
        snmp.udp
            .expect("a Udp line in /proc/net/snmp")
            .rcvbuf_errors
    };
    // 256 streams at 8,000 requests/s into an 8 KiB buffer (twice 4096): drops within
    // the second on this machine quiet or busy (282 of 3,876 datagrams beside three
    // builds, 160 quiet, 2026-12-06). A run the kernel saw no drop in (Caddy kept up: a
    // faster machine) is tried again, then the test is spoiled; a run whose record shows
    // none while the kernel counted some is the product's failure.
    let Some((out, rec)) = common::retry(T, 3, || {
        let kernel0 = rcvbuf_errors();
        let (out, rec) = run("small", "8000", "16", on_host);
        let kernel = rcvbuf_errors() - kernel0;
        let drops = common::row(
            &rec["result"]["server_udp"]["ledger"]["request"],
            "socket_drops",
        );
        if drops == 0 {
            assert_eq!(
                kernel, 0,
                "the kernel counted {kernel} RcvbufErrors, the record no drop: {out}"
            );
            return Err(format!(
                "Caddy kept up: no datagram dropped at an 8 KiB buffer, by the kernel's count too: {out}"
            ));
        }
        Ok((out, rec))
    }) else {
        return;
    };
    let r = &rec["result"];
    let req = &r["server_udp"]["ledger"]["request"];
    assert_eq!(req["unattributed"].as_i64(), Some(0), "{out}");
    assert!(
        out.contains(&format!(
            "it asks for {} MiB ({asks} B) and net.core.rmem_max",
            asks >> 20
        )),
        "{out}"
    );
    let v = &r["verification"];
    assert!(v["not_verified"].is_null(), "{v}");
    let after = &v["after"]["server_udp"]["ledger"]["request"];
    assert_eq!(common::row(after, "socket_drops"), 0, "{out}");
    assert!(
        out.contains("VERIFIED: the receive-buffer drops are gone with the fix"),
        "{out}"
    );
    assert_eq!(
        v["restored"][0],
        serde_json::json!(["net.core.rmem_max", "4096"]),
        "{v}"
    );
}
