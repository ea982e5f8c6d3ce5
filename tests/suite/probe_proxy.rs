//! `tpslab probe idle` through a real proxy (S5): Debian's haproxy in TCP mode, whose
//! idle timeout counts application data only and which ends a flow with a FIN, in front
//! of tpslab's idle responder on loopback. The timeout is dated by the FINs themselves
//! (not charged to the probe schedule), the control connection's end is recognised as the
//! timeout being measured (TCP keepalive does not count here), not as a failed path, and
//! HikariCP files are judged against it: one without a usable keepaliveTime is flagged,
//! one with keepaliveTime below the timeout passes.
//! Every test here is `common::quiet()`: it mostly waits out idle intervals, so it runs
//! beside any other test (tests/common/turn.rs).

use crate::common;

use std::process::{Command, Stdio};

const HAPROXY: &str = "/usr/sbin/haproxy";

/// The proxy's `timeout client` and `timeout server`, s: above HikariCP's smallest
/// keepaliveTime (30 s) by more than a second (the pools are judged against the whole
/// seconds below the bracket) so that a pool can be right, short enough for a test.
const TIMEOUT_S: u64 = 33;

#[test]
fn haproxy_timeout_is_dated_by_its_fins_and_keepalive_does_not_count() {
    common::quiet();
    let test = "haproxy_timeout_is_dated_by_its_fins_and_keepalive_does_not_count";
    if !common::need(test, HAPROXY) {
        return;
    }
    let dir = common::tmp("probe-proxy");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (front, back) = (common::free_port(), common::free_port());
    // The backend: tpslab's responder keeps every TCP connection open, silent.
    let responder = common::Kill(
        common::tpslab()
            .args(["probe", "idle-responder", &format!("127.0.0.1:{back}")])
            .args(["--duration", "120s"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the responder"),
    );
    common::wait_listening(back, "the responder");
    let cfg = dir.join("haproxy.cfg");
    std::fs::write(
        &cfg,
        format!(
            "global\n    maxconn 100\ndefaults\n    mode tcp\n    timeout connect 2s\n\
             timeout client {TIMEOUT_S}s\n    timeout server {TIMEOUT_S}s\n\
             frontend f\n    bind 127.0.0.1:{front}\n    default_backend b\n\
             backend b\n    server s1 127.0.0.1:{back}\n"
        ),
    )
    .unwrap();
    // -db: in the foreground, one process, killed by its PID.
    let proxy = common::Kill(
        Command::new(HAPROXY)
            .arg("-f")
            .arg(&cfg)
            .arg("-db")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn haproxy"),
    );
    common::wait_listening(front, "haproxy");
    let unset = dir.join("unset.properties");
    std::fs::write(
        &unset,
        "jdbcUrl=jdbc:postgresql://db/app\nidleTimeout=600000\n",
    )
    .unwrap();
    let tested = dir.join("tested.properties");
    std::fs::write(
        &tested,
        "jdbcUrl=jdbc:postgresql://db/app\nidleTimeout=600000\nkeepaliveTime=30000\n",
    )
    .unwrap();
    let json = dir.join("idle.json");
    let mut c = common::tpslab();
    c.args(["probe", "idle", &format!("127.0.0.1:{front}")])
        .args(["--min", "29s", "--max", "36s", "--resolution", "1s"])
        .arg("--pool-config")
        .arg(&unset)
        .arg("--pool-config")
        .arg(&tested)
        .arg("--json")
        .arg(&json);
    let out = common::run(c);
    drop(proxy);
    drop(responder);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    common::assert_report_reproduces(&json, &out.stdout);
    let j = common::record(&json);
    assert_eq!(j["kind"], "probe_idle");
    // Every connection, probed before the timeout or not, got the FIN about 33 s after
    // its open: the timeout, dated by the ends, within the resolution.
    let ends = &j["active_ends"];
    let (first, last) = (
        ends["first_ms"].as_u64().unwrap(),
        ends["last_ms"].as_u64().unwrap(),
    );
    let t = TIMEOUT_S * 1000;
    assert!(first > t - 1000 && last < t + 1000, "{ends} {text}");
    assert!(last - first < 1000, "{ends}");
    for c in j["conns"].as_array().unwrap() {
        if c["fate"] != "abandoned" {
            assert!(
                c["fate"] == "closed" && c["active_end"] == true || c["fate"] == "alive",
                "{c}"
            );
        }
    }
    assert_eq!(j["how"], "closed");
    assert!(text.contains("Result: idle timeout in ("), "{text}");
    // The behaviour line: dated by the FINs, keepalive ignored, ended with a FIN.
    let behaviour = text
        .lines()
        .find(|l| l.starts_with("Behaviour: times out after ("))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        behaviour.contains("; TCP keepalive does not count;")
            && behaviour.contains("ends flows itself with a FIN"),
        "{behaviour}"
    );
    // The control, probed every second, was ended as long after its open: keepalive does
    // not count on this proxy, and that is the finding, not a failed path.
    assert!(!text.contains("NOT EVIDENCE"), "{text}");
    assert_eq!(j["control"], "alive");
    assert_eq!(j["keepalive_counts"], "no", "{text}");
    let control_ends = j["control_ends_ms"].as_array().unwrap();
    assert!(!control_ends.is_empty());
    for e in control_ends {
        let e = e.as_u64().unwrap();
        assert!(e > t - 1000 && e < t + 1000, "{control_ends:?}");
    }
    assert!(
        text.contains("TCP keepalive does not reset this path's idle timer"),
        "{text}"
    );
    // Judged: keepalive is not offered as the cure; the pool without keepaliveTime is
    // flagged, the one testing every 30 s passes; no silent-drop retransmission finding
    // (this proxy says FIN).
    let findings = j["findings"].as_array().unwrap();
    let with = |s: &'static str| {
        findings
            .iter()
            .filter(move |f| f["what"].as_str().unwrap().contains(s))
    };
    assert_eq!(
        with("TCP keepalive does not keep flows alive").count(),
        1,
        "{text}"
    );
    let u = with("unset.properties")
        .next()
        .expect("the unset pool judged");
    assert_eq!(u["severity"], "warn", "{u}");
    let ok = with("tested.properties")
        .next()
        .expect("the tested pool judged");
    assert_eq!(ok["severity"], "info", "{ok}");
    assert_eq!(with("retransmitted").count(), 0, "{text}");
}

/// S5 in miniature on real software: `probe pool` through haproxy (`timeout client 3s`,
/// `timeout server 3s`, ending idle flows with a FIN) in front of an echo server. A pool
/// that never tests its idle connections hands out ones haproxy ended (requests fail);
/// one testing them every 0.5 s and retiring them after 2 s (its tests are payload,
/// which this proxy counts) gets every answer.
#[test]
fn pool_through_haproxy_fails_without_the_fix_and_not_with_it() {
    common::quiet();
    let test = "pool_through_haproxy_fails_without_the_fix_and_not_with_it";
    if !common::need(test, HAPROXY) {
        return;
    }
    let dir = common::tmp("probe-pool-proxy");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // The backend: an echo server in this process, a thread per connection.
    let echo = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let back = echo.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in echo.incoming().flatten() {
            std::thread::spawn(move || {
                use std::io::{Read, Write};
                let mut s = s;
                let mut buf = [0u8; 4096];
                while let Ok(n) = s.read(&mut buf) {
                    if n == 0 || s.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            });
        }
    });
    let front = common::free_port();
    let cfg = dir.join("haproxy.cfg");
    std::fs::write(
        &cfg,
        format!(
            "global\n    maxconn 100\ndefaults\n    mode tcp\n    timeout connect 2s\n\
             timeout client 3s\n    timeout server 3s\n\
             frontend f\n    bind 127.0.0.1:{front}\n    default_backend b\n\
             backend b\n    server s1 127.0.0.1:{back}\n"
        ),
    )
    .unwrap();
    let proxy = common::Kill(
        Command::new(HAPROXY)
            .arg("-f")
            .arg(&cfg)
            .arg("-db")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn haproxy"),
    );
    common::wait_listening(front, "haproxy");
    let run = move |extra: &[&str]| {
        let mut c = common::tpslab();
        c.args(["probe", "pool", &format!("127.0.0.1:{front}")])
            .args([
                "--path-idle-timeout",
                "3s",
                "--min-idle",
                "2",
                "--requests",
                "4",
            ])
            .args([
                "--request-every",
                "4s",
                "--query-timeout",
                "2s",
                "--no-history",
            ])
            .args(extra);
        let out = common::run(c);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "{text}");
        text
    };
    let fixed = std::thread::spawn(move || run(&["--validate-every", "500ms", "--max-idle", "2s"]));
    let before = run(&[]);
    let after = fixed.join().unwrap();
    drop(proxy);
    assert!(
        before.contains(&format!("through 127.0.0.1:{front}")),
        "{before}"
    );
    assert!(before.contains(" of 4 requests failed"), "{before}");
    assert!(after.contains("Result: all 4 requests answered"), "{after}");
}

/// What resets haproxy's timer, one direction at a time (`--probe-data`): through
/// haproxy (`timeout client 3s`, `timeout server 3s`) in front of tpslab's responder,
/// `--server-first` opens three payload connections (the client's payload alone, the
/// server's alone, both ways) beside the timed ones. Each outlives the timeout: payload
/// from either side resets haproxy's timer (measured on Debian's haproxy 2.x); the
/// timeout itself is dated by haproxy's FINs within the 1 s resolution. Then plain
/// `--probe-data` through a second frontend to an echo server: the echo's answers make
/// it a both-ways probe, which counts too.
#[test]
fn haproxy_counts_payload_from_either_side() {
    common::quiet();
    let test = "haproxy_counts_payload_from_either_side";
    if !common::need(test, HAPROXY) {
        return;
    }
    let dir = common::tmp("probe-proxy-payload");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (front, back, front_echo) = (
        common::free_port(),
        common::free_port(),
        common::free_port(),
    );
    let responder = common::Kill(
        common::tpslab()
            .args(["probe", "idle-responder", &format!("127.0.0.1:{back}")])
            .args(["--duration", "60s"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the responder"),
    );
    common::wait_listening(back, "the responder");
    let echo = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let echo_port = echo.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in echo.incoming().flatten() {
            std::thread::spawn(move || {
                use std::io::{Read, Write};
                let mut s = s;
                let mut buf = [0u8; 4096];
                while let Ok(n) = s.read(&mut buf) {
                    if n == 0 || s.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            });
        }
    });
    let cfg = dir.join("haproxy.cfg");
    std::fs::write(
        &cfg,
        format!(
            "global\n    maxconn 100\ndefaults\n    mode tcp\n    timeout connect 2s\n\
             timeout client 3s\n    timeout server 3s\n\
             frontend f\n    bind 127.0.0.1:{front}\n    default_backend b\n\
             backend b\n    server s1 127.0.0.1:{back}\n\
             frontend fe\n    bind 127.0.0.1:{front_echo}\n    default_backend be\n\
             backend be\n    server s1 127.0.0.1:{echo_port}\n"
        ),
    )
    .unwrap();
    let proxy = common::Kill(
        Command::new(HAPROXY)
            .arg("-f")
            .arg(&cfg)
            .arg("-db")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn haproxy"),
    );
    common::wait_listening(front, "haproxy");
    common::wait_listening(front_echo, "haproxy (echo frontend)");
    let study = |port: u16, name: &str, extra: &[&str]| {
        let json = dir.join(name);
        let mut c = common::tpslab();
        c.args(["probe", "idle", &format!("127.0.0.1:{port}")])
            .args(["--min", "1s", "--max", "6s", "--resolution", "1s"])
            .args(["--connections", "8", "--probe-data", "x"])
            .args(extra)
            .arg("--json")
            .arg(&json);
        let out = common::run(c);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "{text}");
        common::assert_report_reproduces(&json, &out.stdout);
        assert!(!text.contains("NOT EVIDENCE"), "{text}");
        (common::record(&json), text)
    };
    let (j, text) = study(front, "one-way.json", &["--server-first"]);
    let (je, texte) = study(front_echo, "echo.json", &[]);
    drop(proxy);
    drop(responder);
    // Dated by haproxy's FINs on this side: the bracket holds 3 s, within 1 s.
    let ends = &j["active_ends"];
    let (open, last) = (
        ends["open_ms"].as_u64().unwrap(),
        ends["last_ms"].as_u64().unwrap(),
    );
    assert!(
        open <= 3100 && last >= 3000 && last - open <= 1000,
        "{ends} {text}"
    );
    assert_eq!(j["how"], "closed", "{text}");
    let ways: Vec<(&str, &str)> = j["payload"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["way"].as_str().unwrap(),
                c["fate"].as_str().unwrap_or("error"),
            )
        })
        .collect();
    assert_eq!(
        ways,
        [("near", "alive"), ("far", "alive"), ("both", "alive")],
        "{text}"
    );
    assert!(
        text.contains("; payload from either side counts (resets its timer);")
            && text.contains("ends flows itself with a FIN"),
        "{text}"
    );
    // The echo's answers: one connection, both ways, alive past the timeout.
    let p = je["payload"].as_array().unwrap();
    assert_eq!(p.len(), 1, "{texte}");
    assert_eq!(
        (p[0]["way"].as_str(), p[0]["fate"].as_str()),
        (Some("both"), Some("alive")),
        "{texte}"
    );
    assert!(p[0]["answered_bytes"].as_u64().unwrap() > 0, "{texte}");
    assert!(
        texte.contains(
            "; payload counts (tested both ways at once; one direction alone: not measured);"
        ),
        "{texte}"
    );
}
