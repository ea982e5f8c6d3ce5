//! `tpslab load udp --payload-file --seq-field` against a real DNS server (dnsmasq) in a
//! private network namespace: replies are matched per packet by the echoed DNS id, and the
//! ledger derived from the namespace's Udp counters balances exactly (nothing else uses UDP
//! in the namespace).
//!
//! Needs root (network namespaces) and /usr/sbin/dnsmasq; skips with a printed reason
//! otherwise.

use crate::common;

use common::{NetNs, Server};
use serde_json::Value;

use common::DNSMASQ;
const PORT: u16 = 5353;
const NAME: &str = "tpslab.test";

fn can_run(test: &str) -> bool {
    if !common::can_netns(test) {
        return false;
    }
    if !common::need(test, DNSMASQ) {
        return false;
    }
    true
}

/// dnsmasq answering `NAME` A 127.0.0.1 on 127.0.0.1:PORT, started in the namespace and
/// waited for until its socket is bound; killed by PID on drop (declare it after the
/// namespace so it is dropped first).
fn dnsmasq(ns: &NetNs, tag: &str) -> Server {
    let mut cmd = ns.command(DNSMASQ);
    cmd.args(common::dnsmasq_args(PORT, NAME));
    Server::start(cmd, "dnsmasq", &format!("dnsmasq-{tag}"), "dnsmasq", PORT)
}

/// Runs `tpslab load udp` against dnsmasq inside the namespace and returns the record.
fn load(ns: &NetNs, dns: &Server, tag: &str, extra: &[&str]) -> Value {
    let query = common::tmp(&format!("query-{tag}.bin"));
    std::fs::write(&query, common::dns_query(NAME)).unwrap();
    let json = common::tmp(&format!("dns-{tag}.json"));
    let _ = std::fs::remove_file(&json);
    let pid = dns.pid().to_string();
    let target = format!("127.0.0.1:{PORT}");
    let mut cmd = ns.tpslab();
    cmd.args(["load", "udp", &target, "--payload-file"])
        .arg(&query)
        .args(["--seq-field", "0:2", "--pid", &pid])
        .args(extra)
        .arg("--json")
        .arg(&json);
    let out = common::run(cmd);
    assert!(
        out.status.success(),
        "tpslab load failed ({}); dnsmasq log:\n{}",
        out.status,
        dns.log()
    );
    let rec = common::record(&json);
    eprintln!(
        "--- generator\n{}\n--- ledger\n{}\n--- notes\n{}",
        rec["generator"], rec["ledger"], rec["notes"]
    );
    rec
}

fn u(v: &Value, what: &str) -> u64 {
    v.as_u64()
        .unwrap_or_else(|| panic!("{what} is not an unsigned integer: {v}"))
}

#[test]
fn dns_ids_match_every_reply_and_ledger_balances() {
    if !can_run("dns_ids_match_every_reply_and_ledger_balances") {
        return;
    }
    let _serial = common::serial();
    let ns = NetNs::new();
    let dns = dnsmasq(&ns, "clean");

    let rec = load(
        &ns,
        &dns,
        "clean",
        &["--rate", "2000", "--duration", "1s", "--warmup", "200ms"],
    );
    let g = &rec["generator"];
    let attempted = u(&g["attempted"], "attempted");
    assert_eq!(g["match_mode"], "seq_field");
    assert!(attempted > 0);
    assert_eq!(u(&g["send_failed"], "send_failed"), 0);
    // No loss at 2000 pps: every query answered once, each reply matched by its DNS id.
    assert_eq!(u(&g["replies_matched"], "replies_matched"), attempted);
    assert_eq!(u(&g["replies_read"], "replies_read"), attempted);
    assert_eq!(u(&g["duplicates"], "duplicates"), 0);
    assert_eq!(u(&g["unmatched"], "unmatched"), 0);
    assert_eq!(g["window_loss_pct"].as_f64(), Some(0.0));
    let window_answered = u(&g["window_answered"], "window_answered");
    assert_eq!(window_answered, u(&g["window_sent"], "window_sent"));
    assert!(window_answered > 0);
    // Per-packet latency from the intended send time, one sample per answered datagram.
    assert_eq!(
        u(&g["latency_intended"]["count"], "latency count"),
        window_answered
    );
    assert!(u(&g["latency_intended"]["p50_ns"], "p50") > 0);

    // The server's socket was found by port in dnsmasq's namespace.
    assert_eq!(
        u(
            &rec["observer"]["deltas"]["server_sockets_found"],
            "server_sockets_found"
        ),
        1
    );

    // Request path: server reads derived from the namespace's Udp counters, exact here.
    let req = &rec["ledger"]["request"];
    assert_eq!(u(&req["attempted"], "request.attempted"), attempted);
    assert_eq!(common::row(req, "socket_drops"), 0);
    assert_eq!(common::row(req, "delivered"), attempted);
    assert_eq!(req["unattributed"].as_i64(), Some(0));
    assert_eq!(common::path_total(req), attempted as i64);

    // Reply path: dnsmasq answered everything it read, the generator read it all.
    let rep = &rec["ledger"]["reply"];
    assert_eq!(u(&rep["attempted"], "reply.attempted"), attempted);
    assert_eq!(common::row(rep, "delivered"), attempted);
    assert_eq!(rep["unattributed"].as_i64(), Some(0));
    assert_eq!(common::path_total(rep), attempted as i64);
}

#[test]
fn overloaded_dns_server_loss_is_per_packet_and_charged_to_its_socket() {
    if !can_run("overloaded_dns_server_loss_is_per_packet_and_charged_to_its_socket") {
        return;
    }
    let _serial = common::serial();
    // Changes host-wide state or checks it unchanged: under the suite's host lock,
    // taken after serial(): another test may hold serial() while its tpslab waits for it.
    let _host = common::host_lock();
    let ns = NetNs::new();
    let dns = dnsmasq(&ns, "overload");

    // Bursts of 2000 queries every 20 ms (100 k pps mean) into dnsmasq's default receive
    // buffer (net.core.rmem_default: a few hundred small datagrams): each burst overflows
    // it. 0.6 s in all = 60000 queries, below 65536 so the 16-bit DNS id never wraps and
    // every reply matches exactly one query.
    let rec = load(
        &ns,
        &dns,
        "overload",
        &[
            "--burst",
            "2000",
            "--burst-interval",
            "20ms",
            "--duration",
            "500ms",
            "--warmup",
            "100ms",
        ],
    );
    let g = &rec["generator"];
    let attempted = u(&g["attempted"], "attempted");
    let read = u(&g["replies_read"], "replies_read");
    let matched = u(&g["replies_matched"], "replies_matched");
    let dups = u(&g["duplicates"], "duplicates");
    let unmatched = u(&g["unmatched"], "unmatched");
    assert_eq!(g["match_mode"], "seq_field");
    assert!(
        attempted > 0 && attempted < 65536,
        "attempted {attempted}: the DNS id must not wrap for exact matching"
    );
    assert_eq!(u(&g["send_failed"], "send_failed"), 0);

    // Loss is seen per packet.
    let loss = g["window_loss_pct"].as_f64().expect("window_loss_pct");
    assert!(loss > 0.0, "expected loss when overloaded, got {loss} %");
    assert!(matched < attempted, "matched {matched} of {attempted}");
    assert!(matched > 0, "dnsmasq answered nothing");
    // Generator counts are self-consistent.
    assert_eq!(matched + dups + unmatched, read);
    assert_eq!(dups, 0, "no id wrap, so no reply can look like a duplicate");
    assert_eq!(unmatched, 0);
    let window_sent = u(&g["window_sent"], "window_sent");
    let window_answered = u(&g["window_answered"], "window_answered");
    assert!(window_answered < window_sent);
    let expect_pct = 100.0 * (window_sent - window_answered) as f64 / window_sent as f64;
    assert!((loss - expect_pct).abs() < 1e-6, "{loss} vs {expect_pct}");

    // Request path: the loss is charged to dnsmasq's socket receive buffer, all of it, and
    // nothing is left unexplained.
    let req = &rec["ledger"]["request"];
    let delivered = common::row(req, "delivered");
    let sock = common::row(req, "socket_drops");
    assert_eq!(u(&req["attempted"], "request.attempted"), attempted);
    assert_eq!(req["unattributed"].as_i64(), Some(0));
    assert_eq!(common::path_total(req), attempted as i64);
    assert!(sock > 0, "no socket drops charged");
    assert_eq!(common::row(req, "no_ports"), 0);
    assert_eq!(
        sock,
        attempted - delivered,
        "all request loss should be at the server socket"
    );
    assert_eq!(
        sock,
        u(&rec["observer"]["deltas"]["server_drops"], "server_drops")
    );

    // Reply path: dnsmasq answered what it read; the generator read every answer.
    let rep = &rec["ledger"]["reply"];
    assert_eq!(u(&rep["attempted"], "reply.attempted"), delivered);
    assert_eq!(common::row(rep, "delivered"), read);
    assert_eq!(rep["unattributed"].as_i64(), Some(0));
    assert_eq!(common::path_total(rep), delivered as i64);

    // The generator's per-packet loss equals the ledger's loss over both paths.
    let rep_lost = delivered - common::row(rep, "delivered");
    assert_eq!(attempted - matched, sock + rep_lost);
}
