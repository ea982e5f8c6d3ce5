//! `tpslab probe idle`: the lab's middlebox timeout found within the resolution, dropped
//! and reset, with the control connection alive; a server on loopback with no middlebox
//! keeps every connection; bad input is a one-line error. Each study runs in throwaway
//! namespaces of its own (the lab) or on loopback; nothing on the host changes.
//! Every test here is `common::quiet()`: it mostly waits out idle intervals, so it runs
//! beside any other test (tests/common/turn.rs).

use crate::common;

/// Runs a lab study with a 2.5 s timeout over idle intervals of 1..8 s and returns the
/// record.
fn lab(test: &str, on_idle: &str) -> Option<serde_json::Value> {
    if !common::can_netns(test) {
        return None;
    }
    let json = common::tmp(&format!("{test}.json"));
    let mut c = common::tpslab();
    c.args([
        "probe",
        "idle",
        "--lab-idle-timeout",
        "2500ms",
        "--lab-on-idle",
        on_idle,
        "--min",
        "1s",
        "--max",
        "8s",
        "--resolution",
        "1s",
        "--connections",
        "16",
        "--json",
    ])
    .arg(&json);
    let out = common::run(c);
    assert!(out.status.success());
    common::assert_report_reproduces(&json, &out.stdout);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Result: idle timeout in (2 s, 3 s]"),
        "{text}"
    );
    assert!(text.contains("Control connection: alive"), "{text}");
    let j = common::record(&json);
    assert_eq!(j["kind"], "probe_idle");
    assert_eq!(j["bracket"]["alive_s"], 2);
    assert_eq!(j["bracket"]["dead_s"], 3);
    assert_eq!(j["control"], "alive");
    // The control, silent but for its keepalives, outlived connections the middlebox
    // forgot: keepalive resets this middlebox's timer (conntrack-like).
    assert_eq!(j["keepalive_counts"], "yes", "{text}");
    assert!(j.get("control_ends_ms").is_none(), "no control ended: {j}");
    // The round ended once 1 s and 2 s were judged alive (at 4 s and 5 s): longer
    // intervals were not waited for, and those that ended before died too.
    let conns = j["conns"].as_array().unwrap();
    for c in conns {
        let (idle, fate) = (c["idle_s"].as_u64().unwrap(), c["fate"].as_str().unwrap());
        let ms = c["decided_ms"].as_u64().unwrap();
        match idle {
            1 | 2 => assert_eq!(fate, "alive", "{c}"),
            _ => assert!(
                fate == "abandoned" || fate == on_idle.replace("drop", "dropped"),
                "{c}"
            ),
        }
        assert!(ms < 9_000, "{c}");
    }
    Some(j)
}

#[test]
fn lab_timeout_found_when_the_middlebox_drops() {
    common::quiet();
    let Some(j) = lab("lab_timeout_found_when_the_middlebox_drops", "drop") else {
        return;
    };
    assert_eq!(j["how"], "dropped");
    // Dropped: the kernel gave up after the keepalive probes (3 s idle + 2 x 1 s).
    let dead = j["conns"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["idle_s"] == 3)
        .unwrap();
    let ms = dead["decided_ms"].as_u64().unwrap();
    assert!((4_800..8_000).contains(&ms), "ETIMEDOUT after {ms} ms");
    // The host's settings judged against the timeout found: keepalive is far too late.
    let f = j["findings"].as_array().unwrap();
    assert!(
        f.iter().any(|x| x["what"]
            .as_str()
            .unwrap()
            .contains("the middlebox forgets it after 2 s")),
        "{f:?}"
    );
}

#[test]
fn lab_timeout_found_when_the_middlebox_resets() {
    common::quiet();
    let Some(j) = lab("lab_timeout_found_when_the_middlebox_resets", "reset") else {
        return;
    };
    assert_eq!(j["how"], "reset");
    // Reset: at the first keepalive probe.
    let dead = j["conns"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["idle_s"] == 3)
        .unwrap();
    let ms = dead["decided_ms"].as_u64().unwrap();
    assert!((2_800..5_500).contains(&ms), "ECONNRESET after {ms} ms");
}

/// A timeout the first ladder only brackets: a second round bisects it (reset mode, 6.5 s,
/// five idle connections per round: 1 2 5 13 30 s, then 6 7 9 10 11 s).
#[test]
fn bisection_narrows_the_ladders_bracket() {
    common::quiet();
    if !common::can_netns("bisection_narrows_the_ladders_bracket") {
        return;
    }
    let json = common::tmp("probe-bisect.json");
    let mut c = common::tpslab();
    c.args([
        "probe",
        "idle",
        "--lab-idle-timeout",
        "6500ms",
        "--lab-on-idle",
        "reset",
        "--min",
        "1s",
        "--max",
        "30s",
        "--resolution",
        "1s",
        "--connections",
        "6",
        "--json",
    ])
    .arg(&json);
    let out = common::run(c);
    assert!(out.status.success());
    let j = common::record(&json);
    let round = |n: u64| -> Vec<u64> {
        j["conns"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["round"] == n)
            .map(|c| c["idle_s"].as_u64().unwrap())
            .collect()
    };
    assert_eq!(round(1), [1, 2, 5, 13, 30]);
    assert_eq!(round(2), [6, 7, 9, 10, 11]);
    assert_eq!(
        (
            j["bracket"]["alive_s"].as_u64(),
            j["bracket"]["dead_s"].as_u64()
        ),
        (Some(6), Some(7))
    );
    assert_eq!(j["how"], "reset");
    assert_eq!(j["control"], "alive");
}

/// UDP mappings: the lab's middlebox drops the responder's late replies once it forgot
/// the mapping (2.5 s), found in (2 s, 3 s].
#[test]
fn lab_udp_mapping_timeout() {
    common::quiet();
    if !common::can_netns("lab_udp_mapping_timeout") {
        return;
    }
    let json = common::tmp("probe-udp.json");
    let mut c = common::tpslab();
    c.args([
        "probe",
        "idle",
        "--udp",
        "--lab-idle-timeout",
        "2500ms",
        "--min",
        "1s",
        "--max",
        "8s",
        "--resolution",
        "1s",
        "--json",
    ])
    .arg(&json);
    let out = common::run(c);
    assert!(out.status.success());
    common::assert_report_reproduces(&json, &out.stdout);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Result: idle timeout in (2 s, 3 s]; the path ended it: dropped silently (the reply due after the idle time never came)"), "{text}");
    let j = common::record(&json);
    assert_eq!(j["plan"]["udp"], true);
    assert_eq!(j["control"], "alive");
    // A mapping is judged when its reply is due (+1 s grace), not later.
    let dead = j["conns"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["idle_s"] == 3)
        .unwrap();
    let ms = dead["decided_ms"].as_u64().unwrap();
    assert!((3_800..6_500).contains(&ms), "{dead}");
}

/// tpslab's responder on loopback answers every mapping after the time asked; with no
/// responder the probe refuses to start.
#[test]
fn udp_responder_on_loopback() {
    common::quiet();
    // The responder binds one port for UDP and TCP: a port free for UDP a moment ago may be
    // taken for TCP by another process of this busy host (an ephemeral port): then it
    // exits at once with EADDRINUSE, and another port is tried, up to 5 times.
    let Some((addr, mut responder)) = common::retry("udp_responder_on_loopback", 5, || {
        let port = std::net::UdpSocket::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr = format!("127.0.0.1:{port}");
        let mut responder = common::tpslab()
            .args(["probe", "idle-responder", &addr, "--duration", "30s"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Its first line is printed once it is bound.
        let mut first = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(responder.stdout.take().unwrap()),
            &mut first,
        )
        .unwrap();
        if first.is_empty() {
            let out = responder.wait_with_output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr).into_owned();
            assert!(err.contains("Address already in use"), "{err}");
            return Err(err);
        }
        assert!(
            first.starts_with("tpslab probe idle-responder on"),
            "{first}"
        );
        Ok((addr, responder))
    }) else {
        return;
    };
    let mut c = common::tpslab();
    c.args([
        "probe",
        "idle",
        "--udp",
        &addr,
        "--min",
        "1s",
        "--max",
        "3s",
        "--resolution",
        "1s",
        "--connections",
        "4",
    ]);
    let out = common::run(c);
    // Ended by PID, ours.
    let _ = end_child(responder.id());
    let _ = responder.wait();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Result: no idle timeout up to 3 s"), "{text}");
    let closed = std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .to_string();
    let out = common::tpslab()
        .args([
            "probe",
            "idle",
            "--udp",
            &closed,
            "--min",
            "1s",
            "--max",
            "3s",
            "--resolution",
            "1s",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        format!("tpslab: error: connecting to {closed}: Connection refused (os error 111)")
    );
}

/// SIGTERM to a child this test started.
fn end_child(pid: u32) -> std::io::Result<()> {
    let st = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()?;
    if st.success() {
        Ok(())
    } else {
        Err(std::io::Error::other("kill failed"))
    }
}

/// Runs `probe pool` through a middlebox that forgets flows idle for 2 s, 4 requests 3 s
/// apart on a pool of 2, with the pool's validation and expiry given.
fn pool(test: &str, validate: &str, max_idle: &str) -> Option<serde_json::Value> {
    if !common::can_netns(test) {
        return None;
    }
    let json = common::tmp(&format!("{test}.json"));
    let mut c = common::tpslab();
    c.args([
        "probe",
        "pool",
        "--lab-idle-timeout",
        "2s",
        "--validate-every",
        validate,
        "--max-idle",
        max_idle,
        "--min-idle",
        "2",
        "--requests",
        "4",
        "--request-every",
        "3s",
        "--query-timeout",
        "1s",
        "--json",
    ])
    .arg(&json);
    let out = common::run(c);
    assert!(out.status.success());
    common::assert_report_reproduces(&json, &out.stdout);
    Some(common::record(&json))
}

/// S5 before the fix, scaled to seconds: the pool tests its idle connections (20 s) and
/// retires them (30 s) far later than the path forgets them (2 s): every request lands
/// on a forgotten connection and times out.
#[test]
fn s5_miniature_before_the_fix_fails() {
    common::quiet();
    let Some(j) = pool("s5_miniature_before_the_fix_fails", "20s", "30s") else {
        return;
    };
    let reqs = j["requests"].as_array().unwrap();
    assert_eq!(reqs.len(), 4);
    for r in reqs {
        assert_eq!(r["outcome"], "timed_out", "{r}");
        assert!(r["idle_ms"].as_u64().unwrap() > 2_000, "{r}");
    }
}

/// S5 after the fix: validation every second and expiry after 1.5 s, both below the
/// path's 2 s: every request is answered.
#[test]
fn s5_miniature_after_the_fix_answers_every_request() {
    common::quiet();
    let Some(j) = pool(
        "s5_miniature_after_the_fix_answers_every_request",
        "1s",
        "1500ms",
    ) else {
        return;
    };
    let reqs = j["requests"].as_array().unwrap();
    assert_eq!(reqs.len(), 4);
    for r in reqs {
        assert!(r["outcome"]["answered"].is_object(), "{r}");
        assert!(r["idle_ms"].as_u64().unwrap() < 2_000, "{r}");
    }
    assert!(j["validations"].as_u64().unwrap() >= 8);
    assert_eq!(j["validations_failed"], 0);
}

/// A middlebox that lets the near side re-open a forgotten flow (conntrack's loose
/// pickup): probing from the near side finds no timeout, since each keepalive re-opens
/// the flow; the far side probing first (tpslab's responder) finds it.
#[test]
fn server_first_finds_what_the_near_side_cannot() {
    common::quiet();
    if !common::can_netns("server_first_finds_what_the_near_side_cannot") {
        return;
    }
    let run = |extra: &[&str]| {
        let mut c = common::tpslab();
        c.args([
            "probe",
            "idle",
            "--lab-idle-timeout",
            "2500ms",
            "--lab-on-idle",
            "reopen",
            "--min",
            "1s",
            "--max",
            "5s",
            "--resolution",
            "1s",
        ])
        .args(extra);
        let out = common::run(c);
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let near = std::thread::spawn(move || run(&[]));
    let far = run(&["--server-first"]);
    let near = near.join().unwrap();
    assert!(near.contains("Result: no idle timeout up to 5 s"), "{near}");
    assert!(
        far.contains("Result: idle timeout in (2 s, 3 s]; the path ended it: dropped silently"),
        "{far}"
    );
    assert!(far.contains("Control connection: alive"), "{far}");
}

/// On loopback nothing forgets a flow: keepalive keeps every connection, so the probe
/// itself kills none.
#[test]
fn a_path_without_a_middlebox_keeps_every_connection() {
    common::quiet();
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let t = std::thread::spawn(move || {
        let mut held = vec![];
        l.set_nonblocking(true).unwrap();
        let end = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while std::time::Instant::now() < end && held.len() < 16 {
            match l.accept() {
                Ok((s, _)) => held.push(s),
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(10)),
            }
        }
        std::thread::sleep(std::time::Duration::from_secs(8));
    });
    let mut c = common::tpslab();
    c.args([
        "probe",
        "idle",
        &addr,
        "--min",
        "1s",
        "--max",
        "3s",
        "--resolution",
        "1s",
        "--connections",
        "4",
    ]);
    let out = common::run(c);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Result: no idle timeout up to 3 s"), "{text}");
    assert!(text.contains("round 1: 1 s alive"), "{text}");
    drop(t);
}

#[test]
fn bad_input_is_a_one_line_error() {
    common::quiet();
    // A port nobody listens on (bound, then closed).
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let c = closed.to_string();
    let cases: Vec<(Vec<&str>, String)> = vec![
        (
            vec!["127.0.0.1:5432", "--min", "1m", "--max", "30s"],
            "--max 30s is not above --min 1m".into(),
        ),
        (
            vec![
                "127.0.0.1:5432",
                "--min",
                "10s",
                "--max",
                "20s",
                "--resolution",
                "10s",
            ],
            "--resolution 10s is not below the range --min 10s to --max 20s".into(),
        ),
        (
            vec!["127.0.0.1:5432", "--max", "3h"],
            "--max 3h: allowed 2s..=2h".into(),
        ),
        (
            vec![],
            "probe idle needs a target HOST:PORT, or --lab-idle-timeout DUR for the lab".into(),
        ),
        (
            vec![&c, "--min", "1s", "--max", "3s", "--resolution", "1s"],
            format!("connecting to {c}: Connection refused (os error 111)"),
        ),
    ];
    for (args, want) in cases {
        let out = common::tpslab()
            .args(["probe", "idle"])
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim(), format!("tpslab: error: {want}"), "{args:?}");
    }
}

#[test]
fn pool_bad_input_is_a_one_line_error() {
    common::quiet();
    let cases: [(&[&str], &str); 3] = [
        (
            &["--lab-idle-timeout", "50ms"],
            "--lab-idle-timeout 50ms: allowed 100ms..=10m",
        ),
        (
            &["--lab-idle-timeout", "2s", "--requests", "0"],
            "--requests 0: allowed 1..=1000",
        ),
        (
            &[
                "--lab-idle-timeout",
                "2s",
                "--requests",
                "1000",
                "--request-every",
                "10m",
            ],
            "--requests x --request-every is more than 1 h",
        ),
    ];
    for (args, want) in cases {
        let out = common::tpslab()
            .args(["probe", "pool"])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr).trim(),
            format!("tpslab: error: {want}")
        );
    }
}

/// Ctrl-C (SIGINT) ends a study with what it found so far, written to its record.
#[test]
fn ctrl_c_keeps_what_was_found() {
    common::quiet();
    if !common::can_netns("ctrl_c_keeps_what_was_found") {
        return;
    }
    let json = common::tmp("probe-interrupted.json");
    let _ = std::fs::remove_file(&json);
    let child = common::tpslab()
        .args([
            "probe",
            "idle",
            "--lab-idle-timeout",
            "100s",
            "--min",
            "1s",
            "--max",
            "60s",
            "--resolution",
            "1s",
            "--json",
        ])
        .arg(&json)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // 1 s and 2 s are judged alive 4 s and 5 s after they opened.
    std::thread::sleep(std::time::Duration::from_millis(6500));
    let st = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{:?}", out.status);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("(interrupted: what was found so far)"),
        "{text}"
    );
    let j = common::record(&json);
    assert_eq!(j["interrupted"], true);
    assert_eq!(j["meta"]["interrupted"], true);
    let alive: Vec<u64> = j["conns"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["fate"] == "alive")
        .map(|c| c["idle_s"].as_u64().unwrap())
        .collect();
    assert!(alive.starts_with(&[1, 2]), "{alive:?}");
    assert!(j["bracket"]["dead_s"].is_null());
}
