//! `tpslab bdp` on S4's figures, as a user runs it.

use crate::common;

#[test]
fn s4_buffer_ceiling_and_the_buffer_80_mbit_needs() {
    let o = common::run({
        let mut c = common::tpslab();
        c.args([
            "bdp", "--buffer", "64KiB", "--rate", "80mbit", "--rtt", "30ms",
        ]);
        c
    });
    assert!(o.status.success());
    let out = String::from_utf8_lossy(&o.stdout);
    // 64 KiB over 30 ms: ~17 Mbit/s, S4's ceiling.
    assert!(out.contains("carries at most 17.5 Mbit/s"), "{out}");
    // 80 Mbit/s x 30 ms = 300000 bytes in flight; twice that, rounded to 64 KiB.
    assert!(out.contains("needs 300000 bytes in flight"), "{out}");
    assert!(out.contains("give it a 655360 byte buffer"), "{out}");
    // setsockopt asks for half: the kernel doubles it.
    assert!(out.contains("SO_RCVBUF/SO_SNDBUF 327680"), "{out}");
    assert!(out.contains("net.ipv4.tcp_rmem = "), "{out}");
}

#[test]
fn a_bdp_record_renders_as_the_command_printed_it() {
    let json = common::tmp("bdp-record.json");
    let o = common::run({
        let mut c = common::tpslab();
        c.args([
            "bdp", "--buffer", "64KiB", "--rate", "1gbit", "--rtt", "100ms", "--json",
        ])
        .arg(&json);
        c
    });
    assert!(o.status.success());
    let rec = common::record(&json);
    assert_eq!(rec["kind"], "bdp");
    assert_eq!(rec["need"]["plan"]["bdp_bytes"], 12_500_000);
    assert_eq!(rec["ceiling"]["window_bytes"], 65536);
    common::assert_report_reproduces(&json, &o.stdout);
}

#[test]
fn bdp_without_rate_or_buffer_is_a_usage_error() {
    let mut c = common::tpslab();
    c.args(["bdp", "--rtt", "30ms"]);
    let o = c.output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(String::from_utf8_lossy(&o.stderr).lines().count(), 1);
}
