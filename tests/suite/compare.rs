//! `tpslab compare` on real records: two diagnoses of a server started by `--server-cmd`,
//! before and after its receive buffer was raised, name that change first and show the
//! loss difference as more than noise; two runs of one plan differ within noise.

use crate::common;

use common::{tmp, NetNs};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// `diagnose udp` of tpslab's own server, started by --server-cmd with `server_flags`:
/// S1 in miniature (bursts of 2000 x 1024 B every 50 ms).
fn diagnose(ns: &NetNs, name: &str, server_flags: &str) -> PathBuf {
    let json = tmp(name);
    let cmd = format!(
        "{} serve udp --bind 127.0.0.1:{{port}} {server_flags}",
        env!("CARGO_BIN_EXE_tpslab")
    );
    let mut c = ns.tpslab();
    c.args([
        "diagnose",
        "udp",
        "--server-cmd",
        &cmd,
        "--burst",
        "2000",
        "--burst-interval",
        "50ms",
        "--duration",
        "1s",
        "--warmup",
        "300ms",
        "--no-verify",
        "--json",
    ])
    .arg(&json);
    let out = common::run(c);
    assert!(out.status.success(), "diagnose {name}");
    json
}

fn compare(ns: &NetNs, files: &[&Path], name: &str) -> (Value, String) {
    let json = tmp(&format!("{name}.json"));
    let html = tmp(&format!("{name}.html"));
    let mut c = ns.tpslab();
    c.arg("compare")
        .args(files)
        .arg("--json")
        .arg(&json)
        .arg("--html")
        .arg(&html);
    let out = common::run(c);
    assert!(out.status.success(), "compare");
    assert!(std::fs::read_to_string(&html)
        .unwrap()
        .contains("What differs (settings, not results)"));
    common::assert_report_reproduces(&json, &out.stdout);
    (
        common::record(&json),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

fn figure<'a>(c: &'a Value, name: &str) -> &'a Value {
    c["figures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == name)
        .unwrap_or_else(|| panic!("no figure {name}: {c}"))
}

#[test]
fn a_buffer_change_is_named_first_and_its_loss_difference_is_real() {
    if !common::can_netns("a_buffer_change_is_named_first_and_its_loss_difference_is_real") {
        return;
    }
    let _g = common::serial();
    let ns = NetNs::new();
    let before = diagnose(&ns, "small-buffer.json", "");
    let after = diagnose(&ns, "big-buffer.json", "--rcvbuf 16000000");
    let (c, out) = compare(&ns, &[&before, &after], "buffer");
    assert_eq!(c["kind"], "compare");
    assert_eq!(c["of_kind"], "diagnose");
    // First what differs: the server socket's buffer as the kernel held it.
    let first = &c["differences"][0];
    assert_eq!(first["what"], "server SO_RCVBUF (sock_diag)", "{out}");
    let (a, b) = (
        first["values"][0].as_str().unwrap().parse::<u64>().unwrap(),
        first["values"][1].as_str().unwrap().parse::<u64>().unwrap(),
    );
    assert!(b > 10 * a, "{a} -> {b}");
    assert!(
        out.find("What differs").unwrap() < out.find("Figures").unwrap(),
        "{out}"
    );
    // The loss fell, by more than the runs' own variation.
    let loss = figure(&c, "socket loss %");
    assert!(loss["values"][0]["mean"].as_f64().unwrap() > 20.0, "{loss}");
    let e = &loss["effects"][0];
    assert!(e["diff"].as_f64().unwrap() < -20.0, "{loss}");
    assert_eq!(e["significant"], true, "{loss}");
    assert!(out.contains("distinguishable from noise"), "{out}");
}

#[test]
fn two_runs_of_one_plan_differ_within_noise() {
    if !common::can_netns("two_runs_of_one_plan_differ_within_noise") {
        return;
    }
    let _g = common::serial();
    let ns = NetNs::new();
    // A 95 % test on batch means sees only what varies inside a run, not between runs
    // (docs/reports.md#compare says so): on this 2-core host, 1 pair in 8 of one plan was
    // called distinguishable on a quiet host (8 pairs, 2026-12-07), more on a busy one.
    // So five tries: an attempt that differed while the kernel saw tasks waiting for a
    // CPU over 20 % of the last 10 s (PSI) is the machine's; when every attempt differed
    // and one of them was such, the test is counted as spoiled, else it fails (chance on
    // a quiet host: about 1 in 30,000). A compare that called every pair distinguishable
    // (intervals too narrow, a wrong t) still fails every time.
    const T: &str = "two_runs_of_one_plan_differ_within_noise";
    const TRIES: usize = 5;
    let mut busy = 0;
    let mut last = String::new();
    for i in 1..=TRIES {
        let a = diagnose(&ns, "same-a.json", "");
        let b = diagnose(&ns, "same-b.json", "");
        let (c, out) = compare(&ns, &[&a, &b], "same");
        let what: Vec<&str> = c["differences"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["what"].as_str().unwrap())
            .collect();
        // The plan is the same: only the command's own port may differ.
        assert!(
            what.iter().all(|w| w.starts_with("plan target")
                || w.starts_with("plan load.target")
                || w.starts_with("plan watch_port")),
            "{what:?}\n{out}"
        );
        // A lossy plan, so that "within noise" is about a real figure: its runs' mean
        // loss moves a lot from run to run (19.6 % and 18.0 % in one quiet clean-clone
        // run, 64.7 % and 47.8 % in another, 22 % to 61 % in 16 runs on 2026-12-07), so
        // only "some" is asked of each.
        let loss = figure(&c, "socket loss %");
        for v in loss["values"].as_array().unwrap() {
            assert!(v["mean"].as_f64().unwrap() > 2.0, "{loss}");
        }
        if loss["effects"][0]["significant"] != true {
            return;
        }
        let pressure = common::cpu_pressure_pct().unwrap_or(0.0);
        if pressure > 20.0 {
            busy += 1;
        }
        last = format!(
            "loss differed beyond noise with CPU pressure {pressure:.0} %: {}",
            loss["effects"][0]
        );
        eprintln!("{T}: attempt {i} of {TRIES}: {last}");
    }
    if busy > 0 {
        common::skip(
            T,
            &format!(
                "spoiled by the machine in all {TRIES} attempts ({busy} on a busy host); the last: {last}"
            ),
        );
        return;
    }
    panic!("{T}: every one of {TRIES} attempts differed on a quiet host; the last: {last}");
}
