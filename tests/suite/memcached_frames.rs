//! memcached's multi-frame UDP replies with a firewall dropping 10 % of the reply frames
//! (`nft ... numgen random mod 10 == 0 drop` on the input hook of a private namespace):
//! a reply is answered when all its frames arrived, the incomplete ones are counted
//! apart and agree with memcached's own `get` count and the frames it sent, and the
//! verdict names the netfilter rule that holds the loss in the ledger.
//!
//! Needs root (namespace, nft, perf tracepoints), `/usr/bin/memcached` and `nft`.

use crate::common;

use common::{NetNs, Server};
use serde_json::Value;

fn u(v: &Value) -> u64 {
    v.as_u64()
        .unwrap_or_else(|| panic!("not an unsigned integer: {v}"))
}

/// Runs a python snippet in the namespace and returns its stdout.
fn py(ns: &NetNs, code: &str) -> String {
    let mut c = ns.command("python3");
    c.args(["-c", code]);
    let out = common::run(c);
    assert!(out.status.success(), "python failed: {code}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn nft(ns: &NetNs, args: &[&str]) {
    let mut c = ns.command("nft");
    c.args(args);
    assert!(common::run(c).status.success(), "nft {args:?} failed");
}

/// memcached's `STAT get_hits`, asked over UDP (one request, frames put together).
fn get_hits(ns: &NetNs, port: u16) -> u64 {
    let out = py(
        ns,
        &format!(
            "import socket\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\ns.settimeout(2)\n\
             s.sendto(b'\\x00\\x09\\x00\\x00\\x00\\x01\\x00\\x00stats\\r\\n',('127.0.0.1',{port}))\n\
             d=b''\nwhile not d.endswith(b'END\\r\\n'):\n    d+=s.recv(2000)[8:]\nprint(d.decode())\n"
        ),
    );
    out.lines()
        .find_map(|l| l.strip_prefix("STAT get_hits "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no get_hits in {out}"))
}

#[test]
fn reply_frames_dropped_by_a_firewall_are_counted_as_incomplete_replies() {
    let t = "reply_frames_dropped_by_a_firewall_are_counted_as_incomplete_replies";
    if !common::can_netns(t)
        || !common::need(t, "/usr/bin/memcached")
        || !common::need(t, "/usr/sbin/nft")
    {
        return;
    }
    let _g = common::serial();
    let ns = NetNs::new();
    let port = 11431u16;
    let mut cmd = ns.command("/usr/bin/memcached");
    cmd.args([
        "-u",
        "root",
        "-U",
        &port.to_string(),
        "-p",
        "0",
        "-l",
        "127.0.0.1",
        "-t",
        "1",
    ]);
    let srv = Server::start(cmd, "memcached", "memcached-frames", "memcached", port);
    // A 5000-byte value: its get answers in 4 frames of at most 1400 bytes.
    let stored = py(
        &ns,
        &format!(
            "import socket\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\ns.settimeout(2)\n\
             s.sendto(b'\\x00\\x01\\x00\\x00\\x00\\x01\\x00\\x00set k 0 0 5000\\r\\n'+b'v'*5000+b'\\r\\n',('127.0.0.1',{port}))\n\
             print(s.recv(100))\n"
        ),
    );
    assert!(stored.contains("STORED"), "{stored}");
    let hits_before = get_hits(&ns, port);
    // Every tenth reply frame dropped on its way in.
    nft(&ns, &["add", "table", "inet", "t"]);
    nft(
        &ns,
        &[
            "add",
            "chain",
            "inet",
            "t",
            "in",
            "{ type filter hook input priority 0; }",
        ],
    );
    let sport = port.to_string();
    nft(
        &ns,
        &[
            "add", "rule", "inet", "t", "in", "udp", "sport", &sport, "numgen", "random", "mod",
            "10", "==", "0", "drop",
        ],
    );
    let get = common::tmp("memcached-frames-get.bin");
    std::fs::write(&get, b"\x00\x00\x00\x00\x00\x01\x00\x00get k\r\n").unwrap();
    let json = common::tmp("memcached-frames.json");
    let _ = std::fs::remove_file(&json);
    let pid = srv.pid().to_string();
    let mut c = ns.tpslab();
    c.args([
        "diagnose",
        "udp",
        &format!("127.0.0.1:{port}"),
        "--pid",
        &pid,
        "--payload-file",
        get.to_str().unwrap(),
        "--seq-field",
        "0:2",
        "--rate",
        "2000",
        "--duration",
        "1s",
        "--warmup",
        "200ms",
        "--json",
    ])
    .arg(&json);
    let out = common::run(c);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "diagnose failed: {text}");
    nft(&ns, &["flush", "ruleset"]);
    let gets = get_hits(&ns, port) - hits_before;
    let rec = common::record(&json);
    let run = &rec["before"];
    let g = &run["generator"];
    let f = &g["frames"];
    assert_eq!(f["header"], "memcached", "{g}");
    let (complete, incomplete) = (u(&f["replies_complete"]), u(&f["replies_incomplete"]));
    let (received, expected) = (u(&f["frames_received"]), u(&f["frames_expected"]));
    // memcached answered every get it counted, 4 frames each (its own count: the
    // server's sends counted on its threads).
    let reply = &run["ledger"]["reply"];
    assert_eq!(u(&reply["attempted"]), 4 * gets, "{reply} gets {gets}");
    // Each reply of which a frame arrived announced 4; a reply is answered only whole.
    assert_eq!(expected, 4 * (complete + incomplete), "{f}");
    assert_eq!(u(&g["replies_matched"]), complete, "{g}");
    assert_eq!(received, u(&g["replies_read"]), "{g}");
    // 10 % of frames dropped: about 34 % of the replies miss one (1 - 0.9^4); at
    // least some of each kind, whatever the draw.
    assert!(
        incomplete > gets / 10 && complete > gets / 3,
        "{f} of {gets}"
    );
    // The frames missing are the firewall's row of the ledger, to the frame: those of
    // incomplete replies and the 4 of each reply of which none arrived.
    let lost_whole = gets - complete - incomplete;
    assert_eq!(
        common::row(reply, "kernel:NETFILTER_DROP"),
        expected - received + 4 * lost_whole,
        "{reply}"
    );
    assert_eq!(reply["unattributed"].as_i64(), Some(0), "{reply}");
    // The verdict's where is that row.
    let d = &rec["diagnosis"];
    assert_eq!(d["case"], "kernel_drop", "{d}");
    let layer = d["layer"].as_str().unwrap();
    assert!(layer.starts_with("a netfilter rule"), "{layer}");
    assert!(
        text.contains(&format!(
            "{incomplete} of {} replies incomplete",
            complete + incomplete
        )),
        "{text}"
    );
    assert!(!text.contains("another socket or client"), "{text}");
    assert!(!text.contains("no kernel counter"), "{text}");
}
