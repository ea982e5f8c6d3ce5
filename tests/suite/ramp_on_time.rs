//! A plan is a promise (issue 35): a ramp's steps end on time beside a CPU hog
//! (`stress-ng --cpu 2` on this 2-CPU host), over UDP (tpslab's `serve udp --mode echo`)
//! and TCP (the built-in server). Each test runs in a network namespace of its own, so the
//! namespace's `Udp:`/`Tcp:` counters are the test's traffic alone: they show, outside
//! tpslab, when load really stopped, beside what the record says of it.

use crate::common;

use common::NetNs;
use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Users 1, 2, 4: three steps of 200 ms warm-up + 1 s measured.
const ARGS: [&str; 10] = [
    "--users",
    "1..4",
    "--step",
    "x2",
    "--step-duration",
    "1s",
    "--warmup",
    "200ms",
    "--quiet",
    "--no-history",
];
const STEP_S: f64 = 1.2;
const STEPS: usize = 3;
/// What the issue allows past a step's planned end, seconds.
const SLACK_S: f64 = 1.0;

/// `stress-ng --cpu 2` (its own timeout a backstop), or None (the test skipped) without it.
fn hog(test: &str) -> Option<common::Stopped> {
    let bin = ["/usr/bin/stress-ng", "/usr/local/bin/stress-ng"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists());
    let Some(bin) = bin else {
        common::skip(
            test,
            "stress-ng not installed (the CPU hog beside the ramp)",
        );
        return None;
    };
    let c = Command::new(bin)
        .args(["--cpu", "2", "--timeout", "120"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start stress-ng");
    // Its workers are running before the ramp starts.
    std::thread::sleep(Duration::from_millis(500));
    Some(common::Stopped(c))
}

/// A counter of `/proc/PID/net/snmp` (the namespace of PID): `Udp: InDatagrams`, say.
fn snmp(pid: u32, group: &str, field: &str) -> Option<u64> {
    let t = std::fs::read_to_string(format!("/proc/{pid}/net/snmp")).ok()?;
    let mut rows = t.lines().filter(|l| l.starts_with(group));
    let (names, values) = (rows.next()?, rows.next()?);
    let at = names.split_whitespace().position(|n| n == field)?;
    values.split_whitespace().nth(at)?.parse().ok()
}

/// Runs the ramp `args` in `ns`, sampling the namespace's `group`/`field` counter every
/// 10 ms while it runs: the record, stdout, and the first and last rises of the counter
/// (seconds after the command started).
fn ramp_sampled(ns: &NetNs, args: &[&str], group: &str, field: &str) -> (Value, String, f64, f64) {
    let json = common::tmp(&format!("on-time-{}.json", args[0]));
    let mut c = ns.tpslab();
    c.arg("ramp").args(args).args(ARGS).arg("--json").arg(&json);
    let t0 = Instant::now();
    let mut child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn tpslab ramp");
    let pid = child.id();
    let (mut last, mut first_rise, mut last_rise) = (None::<u64>, None::<f64>, 0.0);
    while child.try_wait().expect("wait").is_none() {
        if let Some(n) = snmp(pid, group, field) {
            let now = t0.elapsed().as_secs_f64();
            if last.is_some_and(|l| n > l) {
                first_rise.get_or_insert(now);
                last_rise = now;
            }
            last = Some(n);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().expect("ramp output");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    eprintln!(
        "--- stdout\n{stdout}\n--- stderr\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "exit {:?}", out.status);
    common::assert_report_reproduces(&json, &out.stdout);
    let first = first_rise.expect("the namespace's counter never rose: no load seen");
    (common::record(&json), stdout, first, last_rise)
}

/// The record's and the namespace's view of when load was sent, against the plan.
fn assert_on_time(test: &str, rec: &Value, stdout: &str, seen: (f64, f64)) {
    let planned = STEPS as f64 * STEP_S;
    let steps = rec["steps"].as_array().expect("steps");
    assert_eq!(steps.len(), STEPS, "{test}: every step ran");
    for (k, s) in steps.iter().enumerate() {
        let end = s["load_end_s"].as_f64().expect("load_end_s");
        let sent = s["load_sent_s"].as_f64().expect("load_sent_s");
        let plan_end = (k + 1) as f64 * STEP_S;
        eprintln!(
            "{test}: step {k}: load sent {sent:.3} s, ended {end:.3} s (plan {plan_end:.1} s)"
        );
        assert!(
            end <= plan_end + SLACK_S,
            "{test}: step {k} sent until {end:.3} s, planned to end at {plan_end:.1} s"
        );
        // Sent into its last part: the figure is the step's load, not a stray request.
        assert!(
            end > plan_end - STEP_S / 2.0 && sent > STEP_S / 2.0 && sent <= end,
            "{test}: step {k}: load sent {sent:.3} s, ended {end:.3} s"
        );
    }
    let total = rec["load_sent_s"].as_f64().expect("load_sent_s");
    assert!(
        total <= planned + SLACK_S && total > planned - 2.0 * STEP_S,
        "{test}: load sent {total:.3} s, planned {planned:.1} s"
    );
    assert!(rec.get("overrun").is_none(), "{test}: {}", rec["overrun"]);
    assert!(!stdout.contains("OVERRUN"), "{test}: {stdout}");
    // Outside tpslab: the namespace's packets stopped within the plan too (10 ms samples).
    let (first, last) = seen;
    eprintln!("{test}: the namespace's counter rose from {first:.2} s to {last:.2} s");
    assert!(
        last - first <= planned + SLACK_S,
        "{test}: packets flowed for {:.2} s, planned {planned:.1} s",
        last - first
    );
}

#[test]
fn udp_ramp_steps_end_on_time_beside_a_cpu_hog() {
    const T: &str = "udp_ramp_steps_end_on_time_beside_a_cpu_hog";
    let _g = common::serial();
    if !common::can_netns(T) {
        return;
    }
    let Some(_hog) = hog(T) else { return };
    let ns = NetNs::new();
    let mut c = ns.tpslab();
    c.args([
        "serve",
        "udp",
        "--mode",
        "echo",
        "--bind",
        "127.0.0.1:39931",
        "--quiet",
        "--no-history",
    ])
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    let server = common::Stopped(c.spawn().expect("start serve udp"));
    // Its socket is bound (port 39931 = 0x9BFB) before the first request.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !std::fs::read_to_string(format!("/proc/{}/net/udp", server.0.id()))
        .unwrap_or_default()
        .contains(":9BFB ")
    {
        assert!(Instant::now() < deadline, "serve udp did not bind");
        std::thread::sleep(Duration::from_millis(20));
    }
    let (rec, stdout, first, last) =
        ramp_sampled(&ns, &["udp", "127.0.0.1:39931"], "Udp:", "InDatagrams");
    assert_on_time(T, &rec, &stdout, (first, last));
}

#[test]
fn tcp_ramp_steps_end_on_time_beside_a_cpu_hog() {
    const T: &str = "tcp_ramp_steps_end_on_time_beside_a_cpu_hog";
    let _g = common::serial();
    if !common::can_netns(T) {
        return;
    }
    let Some(_hog) = hog(T) else { return };
    let ns = NetNs::new();
    // The built-in server, answering at once: requests as fast as the users go.
    let (rec, stdout, first, last) =
        ramp_sampled(&ns, &["tcp", "--server-serial", "0s"], "Tcp:", "InSegs");
    assert_on_time(T, &rec, &stdout, (first, last));
}
