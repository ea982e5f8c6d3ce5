//! Exit codes against a closed UDP port (issue 54), in a network namespace of its own:
//! `--fail-on errors` fails when nothing arrived (it exited 0 at 100 % loss: "the run is
//! valid evidence"), and `capacity udp` stops at its first step, which shows no listener,
//! exit 2 with one line (it halved the rate 11 times, 33 s, before saying so).
//!
//! Needs root (network namespaces); skips with a printed reason otherwise.

use crate::common;

use common::NetNs;
use std::time::{Duration, Instant};

#[test]
fn a_closed_port_fails_the_errors_gate_and_stops_capacity_at_once() {
    let test = "a_closed_port_fails_the_errors_gate_and_stops_capacity_at_once";
    if !common::can_netns(test) {
        return;
    }
    let _serial = common::serial();
    let ns = NetNs::new();
    // Nothing is bound to 9710 in the fresh namespace.
    let mut cmd = ns.tpslab();
    cmd.args(["load", "udp", "127.0.0.1:9710", "--rate", "2k"])
        .args(["--duration", "500ms", "--no-history"])
        .args(["--fail-on", "errors,invalid"]);
    let out = common::run(cmd);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("nothing arrived")
            && err.contains("no listener")
            && err.contains("(--fail-on errors)"),
        "{err}"
    );
    // The same run gated on validity alone passes: it is valid evidence of a closed port.
    let mut cmd = ns.tpslab();
    cmd.args(["load", "udp", "127.0.0.1:9710", "--rate", "2k"])
        .args([
            "--duration",
            "500ms",
            "--no-history",
            "--fail-on",
            "invalid",
        ]);
    let out = common::run(cmd);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // capacity: one step, then exit 2 naming the listener that is not there; the record
    // is written first.
    let json = common::tmp("no-listener-capacity.json");
    let _ = std::fs::remove_file(&json);
    let mut cmd = ns.tpslab();
    cmd.args([
        "capacity",
        "udp",
        "127.0.0.1:9710",
        "--no-history",
        "--json",
    ])
    .arg(&json);
    let t0 = Instant::now();
    let out = common::run(cmd);
    let took = t0.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(took < Duration::from_secs(8), "took {took:?}: {err}");
    assert!(
        err.contains("127.0.0.1:9710: no listener") && err.contains("Udp: NoPorts"),
        "{err}"
    );
    let rec = common::record(&json);
    assert_eq!(rec["steps"].as_array().map(Vec::len), Some(1), "{rec}");
    assert_eq!(rec["boundary"]["case"], "no_listener", "{rec}");
}
