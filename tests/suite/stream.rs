//! `--json-stream FILE`: one JSON object per sampling interval, written while the run
//! goes (another program can follow it), agreeing with the record at the end.

use crate::common;

use common::{tmp, NetNs};
use serde_json::Value;
use std::time::{Duration, Instant};

#[test]
fn a_run_streams_each_interval_while_it_goes_and_agrees_with_its_record() {
    if !common::can_netns("a_run_streams_each_interval_while_it_goes_and_agrees_with_its_record") {
        return;
    }
    let ns = NetNs::new();
    let (stream, json) = (tmp("stream.ndjson"), tmp("stream.json"));
    let mut c = ns.tpslab();
    c.args([
        "run",
        "udp",
        "--rate",
        "20000",
        "--burst",
        "200",
        "--burst-interval",
        "10ms",
        "--rcvbuf",
        "20000",
        "--duration",
        "2s",
        "--warmup",
        "200ms",
        "--interval",
        "20ms",
        "--json",
    ])
    .arg(&json)
    .arg("--json-stream")
    .arg(&stream)
    .stdout(std::process::Stdio::null());
    let mut child = c.spawn().expect("spawn tpslab");
    // Lines appear while the run goes, not at its end.
    let t0 = Instant::now();
    let mut live_lines = 0;
    while t0.elapsed() < Duration::from_secs(20) {
        live_lines = std::fs::read_to_string(&stream)
            .map(|s| s.lines().count())
            .unwrap_or(0);
        if live_lines >= 5 || child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let running = child.try_wait().unwrap().is_none();
    let status = child.wait().unwrap();
    assert!(status.success());
    assert!(
        running && live_lines >= 5,
        "{live_lines} lines before the run ended"
    );
    let text = std::fs::read_to_string(&stream).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let rec = common::record(&json);
    let samples = rec["observer"]["samples"].as_u64().unwrap() as usize;
    // One line per interval: every sample after the first.
    assert_eq!(lines.len() + 1, samples);
    let mut t = 0.0;
    for l in &lines {
        let now = l["t_ms"].as_f64().unwrap();
        assert!(now > t, "time goes forward: {l}");
        t = now;
        assert!(l["interval_ms"].as_f64().unwrap() > 0.0);
    }
    // The generator's rate is there, and the mean offered over the stream is the plan's.
    let offered: Vec<f64> = lines
        .iter()
        .filter_map(|l| l["offered_pps"].as_f64())
        .collect();
    assert_eq!(offered.len(), lines.len());
    let sent: f64 = lines
        .iter()
        .map(|l| l["offered_pps"].as_f64().unwrap() * l["interval_ms"].as_f64().unwrap() / 1e3)
        .sum();
    let attempted = rec["generator"]["sent"].as_f64().unwrap();
    assert!((sent - attempted).abs() < 1.0, "{sent} vs {attempted}");
    // The last line's drops so far are the record's.
    let last = lines.last().unwrap();
    assert_eq!(
        last["socket_drops"].as_u64().unwrap(),
        rec["observer"]["deltas"]["server_drops"].as_u64().unwrap()
    );
    assert!(
        last["socket_drops"].as_u64().unwrap() > 0,
        "the small buffer overflows"
    );
    // Each interval's latency covers the replies read in it: together, every reply.
    let replies: u64 = lines
        .iter()
        .filter_map(|l| l["latency"]["replies"].as_u64())
        .sum();
    assert_eq!(
        replies,
        rec["generator"]["replies_matched"].as_u64().unwrap()
    );
    let with = lines.iter().filter(|l| !l["latency"].is_null()).count();
    assert!(
        with * 2 > lines.len(),
        "{with} of {} intervals with replies",
        lines.len()
    );
    for l in lines.iter().filter(|l| !l["latency"].is_null()) {
        let lat = &l["latency"];
        let (p50, p99, max) = (
            lat["p50_us"].as_f64().unwrap(),
            lat["p99_us"].as_f64().unwrap(),
            lat["max_us"].as_f64().unwrap(),
        );
        assert!(0.0 < p50 && p50 <= p99 && p99 <= max, "{l}");
    }
}

/// Progress on stderr: shown when stderr is a terminal (a pseudo-terminal from util-linux
/// `script`), nothing with --quiet or when it is not.
#[test]
fn progress_shows_on_a_terminal_only() {
    let test = "progress_shows_on_a_terminal_only";
    if !common::can_netns(test) || !common::need(test, "/usr/bin/script") {
        return;
    }
    let ns = NetNs::new();
    let args = "run udp --rate 2000 --duration 2s --warmup 100ms --no-history";
    let cmd = format!(
        "ip netns exec {} {} {args}",
        ns.name,
        env!("CARGO_BIN_EXE_tpslab")
    );
    let out = std::process::Command::new("script")
        .args(["-qefc", &cmd, "/dev/null"])
        .output()
        .expect("script");
    assert!(out.status.success());
    let tty = String::from_utf8_lossy(&out.stdout);
    assert!(
        tty.contains("load [") && tty.contains("=>"),
        "no bar on a terminal: {tty}"
    );
    // --quiet: none, even on a terminal.
    let out = std::process::Command::new("script")
        .args(["-qefc", &format!("{cmd} --quiet"), "/dev/null"])
        .output()
        .expect("script");
    assert!(out.status.success());
    let tty = String::from_utf8_lossy(&out.stdout);
    assert!(!tty.contains("load ["), "a bar despite --quiet: {tty}");
    // Not a terminal: the report alone, nothing on stderr.
    let mut c = ns.tpslab();
    c.args(args.split(' '));
    let out = common::run(c);
    assert!(out.status.success());
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("=>"));
}
