//! `tpslab diagnose` against conditions provoked for real in private network namespaces:
//! each test makes datagrams die (or not) in one specific place, then checks the verdict
//! (`diagnosis.case`), its key evidence, and that the ledger of the "before" run balances
//! (nothing unattributed).
//!
//! Needs root (network namespaces); the dnsmasq test also needs /usr/sbin/dnsmasq. Each
//! test skips with a printed reason otherwise. All tests take `common::serial()`: on
//! 2 CPUs, two runs at once would measure each other.

use crate::common;

use common::{NetNs, Server};
use serde_json::Value;
use std::process::Output;
use std::time::Instant;

use common::DNSMASQ;
const DNS_PORT: u16 = 5353;
const DNS_NAME: &str = "tpslab.test";

/// net.core.rmem_default on a stock kernel: the limit of a socket that never sets
/// SO_RCVBUF (S1's server).
const RMEM_DEFAULT: u64 = 212_992;

// ---------------------------------------------------------------------------------------
// Servers in the namespace, killed by PID on drop.

/// `tpslab serve udp --bind 127.0.0.1:PORT EXTRA --duration 30s` in the namespace.
fn serve(ns: &NetNs, tag: &str, port: u16, extra: &[&str]) -> Server {
    let mut cmd = ns.tpslab();
    cmd.args(["serve", "udp", "--bind", &format!("127.0.0.1:{port}")])
        .args(extra)
        .args(["--duration", "30s"]);
    // The kernel truncates comm to 15 bytes; "tpslab" fits.
    Server::start(cmd, "tpslab serve udp", tag, "tpslab", port)
}

/// dnsmasq in the foreground answering `DNS_NAME` A 127.0.0.1 on 127.0.0.1:DNS_PORT.
fn dnsmasq(ns: &NetNs, tag: &str) -> Server {
    let mut cmd = ns.command(DNSMASQ);
    cmd.args(common::dnsmasq_args(DNS_PORT, DNS_NAME));
    Server::start(cmd, "dnsmasq", tag, "dnsmasq", DNS_PORT)
}

// ---------------------------------------------------------------------------------------
// Running diagnose and reading its record.

/// Runs `tpslab diagnose ARGS --json F` in the namespace; returns the record and stdout.
/// A diagnose run whose generator kept its schedule, or why it did not (a busy 2-CPU host
/// makes the run invalid evidence, never judged: for `common::retry` to repeat).
fn judged_diagnose(ns: &NetNs, tag: &str, args: &[&str], dns: &Server) -> Result<Value, String> {
    let (rec, _) = diagnose(ns, tag, args, Some(dns));
    if rec["before"]["generator"]["valid"] == false {
        return Err(format!(
            "generator off schedule: {}",
            rec["before"]["generator"]["invalid_reasons"]
        ));
    }
    Ok(rec)
}

fn diagnose(ns: &NetNs, tag: &str, args: &[&str], server: Option<&Server>) -> (Value, String) {
    let json = common::tmp(&format!("diagnose-{tag}.json"));
    let _ = std::fs::remove_file(&json);
    let mut cmd = ns.tpslab();
    cmd.arg("diagnose").args(args).arg("--json").arg(&json);
    let t0 = Instant::now();
    let out: Output = common::run(cmd);
    eprintln!(
        "--- diagnose {tag} took {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    assert!(
        out.status.success(),
        "tpslab diagnose ({tag}) failed ({}); server log:\n{}",
        out.status,
        server.map(|s| s.log()).unwrap_or_default()
    );
    let rec = common::record(&json);
    assert_eq!(rec["schema"], "tpslab.record/2");
    assert_eq!(rec["kind"], "diagnose");
    common::assert_report_reproduces(&json, &out.stdout);
    eprintln!(
        "--- facts\n{}\n--- diagnosis\n{}\n--- before.ledger\n{}\n--- notes\n{}",
        rec["facts"],
        serde_json::to_string_pretty(&rec["diagnosis"]).unwrap(),
        rec["before"]["ledger"],
        rec["notes"]
    );
    (rec, String::from_utf8_lossy(&out.stdout).into_owned())
}

fn u(v: &Value, what: &str) -> u64 {
    v.as_u64()
        .unwrap_or_else(|| panic!("{what} is not an unsigned integer: {v}"))
}

fn f(v: &Value, what: &str) -> f64 {
    v.as_f64()
        .unwrap_or_else(|| panic!("{what} is not a number: {v}"))
}

/// The ledger of the "before" run balances: every attempted datagram is charged to a
/// counted layer, on the request path and, when replies were expected, the reply path.
fn assert_ledger_balances(rec: &Value, reply_path: bool) {
    let ledger = &rec["before"]["ledger"];
    let req = &ledger["request"];
    assert_eq!(
        req["unattributed"].as_i64(),
        Some(0),
        "request path unattributed: {req}"
    );
    assert_eq!(
        common::path_total(req),
        u(&req["attempted"], "request.attempted") as i64,
        "request rows do not add up: {req}"
    );
    let rep = &ledger["reply"];
    if reply_path {
        assert!(rep.is_object(), "no reply path in the ledger: {ledger}");
        assert_eq!(
            rep["unattributed"].as_i64(),
            Some(0),
            "reply path unattributed: {rep}"
        );
        assert_eq!(
            common::path_total(rep),
            u(&rep["attempted"], "reply.attempted") as i64,
            "reply rows do not add up: {rep}"
        );
    } else {
        assert!(rep.is_null(), "no reply path expected: {rep}");
    }
}

fn case(rec: &Value) -> &str {
    rec["diagnosis"]["case"].as_str().expect("diagnosis.case")
}

/// All evidence as "text [source]" lines.
fn evidence(rec: &Value) -> String {
    rec["diagnosis"]["evidence"]
        .as_array()
        .expect("evidence")
        .iter()
        .map(|e| format!("{} [{}]", e["text"], e["source"]))
        .collect::<Vec<_>>()
        .join("\n")
}

fn can_run(test: &str) -> bool {
    common::can_netns(test)
}

// ---------------------------------------------------------------------------------------
// 1. The built-in S1 scenario: burst overflow of the default buffer, fix verified.

#[test]
fn builtin_s1_buffer_overflow_then_verified_fix() {
    if !can_run("builtin_s1_buffer_overflow_then_verified_fix") {
        return;
    }
    let _serial = common::serial();
    let ns = NetNs::new();
    // The fix must hold the bursts: under 1 % lost on a quiet machine. On a loaded host
    // (a CPU hog beside the test) the server, not the buffer, falls behind: up to three
    // attempts for the quiet result, then what must hold whatever the load: the fix
    // cuts the loss at least in half (a fix not applied leaves it as it was; under a
    // 2-CPU hog the starved server still loses some: 58.6 % -> 15.2 % was seen), with no
    // generator at fault.
    let mut attempt = 0;
    let (rec, stdout) = loop {
        attempt += 1;
        let neighbour = common::Neighbour::start(&[]);
        let (rec, stdout) = diagnose(&ns, "s1", &[], None);
        // A generator off its schedule before the fix makes that run invalid evidence:
        // nothing is recommended, so nothing is verified; the attempt is repeated.
        if rec["before"]["generator"]["valid"] == false {
            let why = format!(
                "the generator off its schedule before the fix: {}",
                rec["before"]["generator"]["invalid_reasons"]
            );
            if attempt < 3 {
                eprintln!(
                    "builtin_s1_buffer_overflow_then_verified_fix: attempt {attempt} spoiled by the machine: {why}"
                );
                continue;
            }
            // Spoiled only with a neighbour taking CPU time: on a quiet host a generator
            // off its schedule three times is the product's.
            let busy = neighbour
                .busy()
                .unwrap_or_else(|| panic!("on a quiet host: {why}"));
            common::skip(
                "builtin_s1_buffer_overflow_then_verified_fix",
                &format!("spoiled by the machine in all 3 attempts; the last: {busy}; {why}"),
            );
            return;
        }
        assert!(
            rec["after"].is_object(),
            "no verification run: {} {}",
            rec["notes"],
            rec["before"]["generator"]["invalid_reasons"]
        );
        let g = &rec["after"]["generator"];
        let before = rec["before"]["generator"]["window_loss_pct"]
            .as_f64()
            .expect("before.window_loss_pct");
        let loss = g["window_loss_pct"]
            .as_f64()
            .expect("after.window_loss_pct");
        let valid = g["valid"] == true && rec["before"]["generator"]["valid"] == true;
        if valid && loss < 1.0 {
            break (rec, stdout);
        }
        eprintln!(
            "builtin_s1_buffer_overflow_then_verified_fix: attempt {attempt}: {loss:.2} % lost after the fix ({before:.2} % before), generators valid: {valid}"
        );
        if attempt == 3 {
            if !valid {
                common::skip(
                    "builtin_s1_buffer_overflow_then_verified_fix",
                    "spoiled by the machine in all 3 attempts: a generator off its schedule",
                );
                return;
            }
            assert!(
                loss < before / 2.0,
                "the fix does not hold the bursts: {loss:.2} % lost after it, {before:.2} % before"
            );
            eprintln!(
                "  accepted as a loaded machine's result: the fix cut the loss at least in half"
            );
            break (rec, stdout);
        }
    };
    let facts = &rec["facts"];
    let d = &rec["diagnosis"];
    assert_eq!(case(&rec), "socket_buffer_bursts", "{}", evidence(&rec));
    // S1's mean where this host drains it: 100 k pps, or half of what a calibration run
    // answered at full speed, in bursts 50 ms apart, and said so.
    let g = &rec["before"]["generator"];
    let rate = f(&g["rate_pps"], "before.generator.rate_pps");
    assert!((10_000.0..=100_000.0).contains(&rate), "S1 at {rate} pps");
    assert_eq!(u(&g["burst"], "burst"), (rate * 0.05).round() as u64);
    let scenario = rec["scenario"].as_str().unwrap();
    assert!(
        scenario.contains(&format!("({rate:.0} pps mean)")),
        "{scenario}"
    );
    assert_eq!(
        rate < 100_000.0,
        rec["notes"].to_string().contains("S1's mean rate lowered"),
        "{}",
        rec["notes"]
    );

    // Before: a large share dies at the server socket while the server idles.
    let before = &rec["before"];
    let req = &before["ledger"]["request"];
    let attempted = u(&req["attempted"], "request.attempted");
    let sock = common::row(req, "socket_drops");
    assert!(
        sock as f64 > 0.2 * attempted as f64,
        "socket drops {sock} of {attempted} attempted: expected > 20 %"
    );
    assert_eq!(u(&facts["socket_drops"], "facts.socket_drops"), sock);
    // The kernel's own reason for those drops, sampled host-wide over the same run: at
    // least the ledger's count (other namespaces may drop for that reason too).
    let dr = &before["drop_reasons"];
    assert!(
        dr["unavailable"].is_null(),
        "drop reasons not read as root: {dr}"
    );
    let rcvbuff = dr["by_reason"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r[0] == "SOCKET_RCVBUFF")
        .map_or(0, |r| r[1].as_u64().unwrap());
    let lost = u(&dr["lost"], "drop_reasons.lost");
    assert!(
        rcvbuff + lost >= sock,
        "SOCKET_RCVBUFF {rcvbuff} (+{lost} lost) below the ledger's {sock} socket drops"
    );
    assert!(stdout.contains("SOCKET_RCVBUFF"), "{stdout}");
    let cpu = f(&facts["server_cpu_mean_pct"], "server_cpu_mean_pct");
    assert!(
        cpu < 70.0,
        "server at {cpu:.0} % of a CPU: S1's server should keep up on average"
    );
    assert_ledger_balances(&rec, true);

    // The queue fills to its limit, not beyond (this kernel checks the new datagram).
    let limit = u(&before["server"]["rcvbuf_granted_bytes"], "rcvbuf_granted");
    assert_eq!(limit, u(&facts["limit_bytes"], "facts.limit_bytes"));
    let truesize = u(&facts["truesize_bytes"], "facts.truesize_bytes");
    let probe = &rec["probe"];
    assert_eq!(
        truesize,
        u(&probe["rx_queue_bytes"], "probe.rx_queue_bytes") / u(&probe["queued"], "probe.queued"),
        "facts.truesize_bytes is the probe's measurement"
    );
    let rxq_max = f(&facts["rxq_max_bytes"], "rxq_max_bytes");
    assert!(
        rxq_max <= limit as f64,
        "rx_queue max {rxq_max} above the limit {limit}"
    );
    assert!(
        rxq_max >= (limit - 2 * truesize) as f64,
        "rx_queue max {rxq_max} not close to the limit {limit} (truesize {truesize})"
    );

    // The fix: a buffer that holds a burst, far above the default.
    let fix = &d["fix"];
    let rcvbuf = u(&fix["rcvbuf"], "fix.rcvbuf");
    let need = u(
        &d["buffer"]["granted_needed_bytes"],
        "buffer.granted_needed_bytes",
    );
    assert!(
        need > RMEM_DEFAULT * 10,
        "granted_needed_bytes {need} should exceed 10 x {RMEM_DEFAULT}"
    );
    assert!(fix["threads"].is_null(), "a buffer problem: no threads");

    // The arithmetic notes: the measured truesize and S2's riddle.
    let notes = d["buffer_notes"]
        .as_array()
        .expect("buffer_notes")
        .iter()
        .map(|n| n.as_str().unwrap().to_string())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        notes.contains(&format!("charged {truesize} bytes")),
        "buffer notes lack the measured truesize {truesize}:\n{notes}"
    );
    assert!(notes.contains("213312 = 303 x 704"), "{notes}");

    // Verified: the same load with the recommended buffer loses (nearly) nothing.
    let applied = rec["applied"].to_string();
    assert!(
        applied.contains(&format!("--rcvbuf {rcvbuf}")),
        "applied: {applied}"
    );
    let after = &rec["after"];
    assert!(after.is_object(), "no verification run: {}", rec["notes"]);
    let after_loss = f(
        &after["generator"]["window_loss_pct"],
        "after.window_loss_pct",
    );
    assert!(
        after_loss < 1.0 || attempt == 3,
        "after the fix {after_loss} % still lost; after.ledger: {}",
        after["ledger"]
    );
    let granted_after = u(
        &after["server"]["rcvbuf_granted_bytes"],
        "after.rcvbuf_granted",
    );
    assert!(
        granted_after >= 2 * rcvbuf,
        "after run granted {granted_after}, asked {rcvbuf}: expected 2x"
    );
    assert_eq!(after["generator"]["valid"], true, "{}", after["generator"]);

    // Terminal output: the verdict first, then the ledger; the verification table.
    let verdict_at = stdout.find("VERDICT:").expect("VERDICT: in stdout");
    let ledger_at = stdout
        .find("request path: generator -> server")
        .expect("ledger table in stdout");
    assert!(
        verdict_at < ledger_at,
        "verdict after the ledger:\n{stdout}"
    );
    let first = stdout
        .lines()
        .skip(1)
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    assert!(
        first.starts_with("VERDICT:"),
        "the verdict section starts with {first:?}"
    );
    assert!(stdout.contains("Verification"), "{stdout}");
}

// ---------------------------------------------------------------------------------------
// 2. A server too slow for the mean rate: more buffer will not help.

#[test]
fn slow_application_is_not_a_buffer_problem() {
    if !can_run("slow_application_is_not_a_buffer_problem") {
        return;
    }
    let _serial = common::serial();
    let ns = NetNs::new();
    const PORT: u16 = 7100;
    // 20 us of work per datagram: at most ~50 k pps on one thread (less with the
    // system-call and softirq costs), offered 100 k pps paced.
    let srv = serve(&ns, "serve-slow", PORT, &["--work-ns", "20000"]);
    let pid = srv.pid().to_string();
    let target = format!("127.0.0.1:{PORT}");
    // The property needs the generator at 100 k pps; a host busy with other work (a
    // compile beside the suite) can hold it back for a whole second: up to three tries,
    // then a counted skip.
    let Some(rec) = common::retry("slow_application_is_not_a_buffer_problem", 3, || {
        let (rec, _) = diagnose(
            &ns,
            "slow",
            &[
                "udp",
                &target,
                "--pid",
                &pid,
                "--rate",
                "100000",
                "--duration",
                "1s",
                "--warmup",
                "200ms",
            ],
            Some(&srv),
        );
        if rec["facts"]["gen_valid"] == true {
            Ok(rec)
        } else {
            Err(format!(
                "the generator did not keep 100 k pps: {}",
                rec["facts"]["gen_reasons"]
            ))
        }
    }) else {
        return;
    };
    let facts = &rec["facts"];
    assert_eq!(case(&rec), "app_too_slow", "{}", evidence(&rec));
    let d = &rec["diagnosis"];
    let first = d["recommendations"][0]["what"].as_str().unwrap_or("");
    assert!(
        first.contains("more buffer will not help"),
        "first recommendation: {first:?}"
    );
    assert!(
        d["headline"]
            .as_str()
            .unwrap()
            .contains("more buffer will not help"),
        "{}",
        d["headline"]
    );
    // A server tpslab did not start: nothing it can apply (no buffer either).
    let fix = &d["fix"];
    assert!(fix.is_null(), "no fix for a foreign server: {fix}");

    // The evidence: the server's capacity below the offered rate, and the drops at its
    // socket.
    let cap = f(&facts["capacity_pps"], "capacity_pps");
    let offered = f(&facts["offered_pps"], "offered_pps");
    assert!(
        offered >= 0.9 * cap,
        "offered {offered} pps vs capacity {cap}"
    );
    // Its drain measured while its queue held datagrams (busy, or short of CPU on a
    // loaded host: never "asleep", it does 20 us of work per datagram).
    assert!(
        evidence(&rec).contains("while datagrams waited in its queue"),
        "{}",
        evidence(&rec)
    );
    assert!(
        !evidence(&rec).contains("sleeps or blocks"),
        "{}",
        evidence(&rec)
    );
    assert!(common::row(&rec["before"]["ledger"]["request"], "socket_drops") > 0);
    assert_ledger_balances(&rec, true);
}

// ---------------------------------------------------------------------------------------
// 3. The generator itself is the bottleneck: the run is not evidence.

#[test]
fn generator_failure_invalidates_the_run() {
    if !can_run("generator_failure_invalidates_the_run") {
        return;
    }
    let _serial = common::serial();
    let ns = NetNs::new();
    const PORT: u16 = 7200;
    // A sink with a 16 MB buffer: the server is not the limit, one sender thread at
    // 5 M pps (a datagram every 200 ns) is.
    let srv = serve(
        &ns,
        "serve-sink",
        PORT,
        &["--mode", "sink", "--rcvbuf", "8000000"],
    );
    let pid = srv.pid().to_string();
    let target = format!("127.0.0.1:{PORT}");
    let (rec, _) = diagnose(
        &ns,
        "generator",
        &[
            "udp",
            &target,
            "--pid",
            &pid,
            "--rate",
            "5000000",
            "--duration",
            "500ms",
            "--warmup",
            "0s",
            "--no-replies",
        ],
        Some(&srv),
    );
    assert_eq!(case(&rec), "generator_invalid", "{}", evidence(&rec));
    let d = &rec["diagnosis"];
    assert!(
        d["headline"].as_str().unwrap().contains("NOT valid"),
        "{}",
        d["headline"]
    );
    assert!(
        d["fix"].is_null(),
        "no fix for an invalid run: {}",
        d["fix"]
    );
    let g = &rec["before"]["generator"];
    assert_eq!(g["valid"], false);
    assert!(u(&g["not_sent"], "not_sent") > 0, "{g}");
    // The generator's own reason is in the evidence, from its self-check.
    let gen_ev: Vec<&Value> = d["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["source"] == "generator self-check")
        .collect();
    assert!(!gen_ev.is_empty(), "{}", evidence(&rec));
    let text = gen_ev
        .iter()
        .map(|e| e["text"].as_str().unwrap())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        text.contains("fell behind its schedule")
            || text.contains("pps of the 5000000 pps planned")
            || text.contains("after their intended time"),
        "{text}"
    );
    assert_ledger_balances(&rec, false);
}

// ---------------------------------------------------------------------------------------
// 4a. Nothing listens.

#[test]
fn no_listener_is_named() {
    if !can_run("no_listener_is_named") {
        return;
    }
    let _serial = common::serial();
    let ns = NetNs::new();
    let (rec, _) = diagnose(
        &ns,
        "nolistener",
        &[
            "udp",
            "127.0.0.1:9999",
            "--rate",
            "2000",
            "--duration",
            "300ms",
            "--warmup",
            "0s",
        ],
        None,
    );
    assert_eq!(case(&rec), "no_listener", "{}", evidence(&rec));
    let ev = evidence(&rec);
    assert!(ev.contains("NoPorts"), "{ev}");
    assert!(ev.contains("port 9999"), "{ev}");
    let req = &rec["before"]["ledger"]["request"];
    let attempted = u(&req["attempted"], "request.attempted");
    let no_ports = common::row(req, "no_ports");
    assert!(no_ports > 0);
    assert_eq!(common::row(req, "delivered"), 0);
    // Every datagram either reached the empty port or, once the ICMP error came back,
    // failed to send with ECONNREFUSED.
    assert_eq!(no_ports + common::row(req, "send_failed"), attempted);
    assert!(rec["diagnosis"]["fix"].is_null());
    assert_ledger_balances(&rec, true);
}

// ---------------------------------------------------------------------------------------
// 4b. No loss, said plainly; --verify has nothing to apply.

#[test]
fn no_loss_is_said_plainly() {
    if !can_run("no_loss_is_said_plainly") {
        return;
    }
    let _serial = common::serial();
    let ns = NetNs::new();
    const PORT: u16 = 7300;
    let srv = serve(&ns, "serve-big", PORT, &["--rcvbuf", "8000000"]);
    let pid = srv.pid().to_string();
    let target = format!("127.0.0.1:{PORT}");
    // A generator off its schedule beside a busy neighbour makes the run invalid evidence:
    // again, then the test is listed as spoiled.
    let Some(rec) = common::retry("diagnose::no_loss_is_said_plainly", 3, || {
        let neighbour = common::Neighbour::start(&[srv.pid()]);
        let (rec, _) = diagnose(
            &ns,
            "noloss",
            &[
                "udp",
                &target,
                "--pid",
                &pid,
                "--rate",
                "5000",
                "--duration",
                "1s",
                "--warmup",
                "200ms",
                "--verify",
            ],
            Some(&srv),
        );
        if rec["before"]["generator"]["valid"] == false {
            // On a quiet host, the product's: the assertions below fail on it.
            if let Some(busy) = neighbour.busy() {
                return Err(format!(
                    "{busy}; the generator off its schedule: {}",
                    rec["before"]["generator"]["invalid_reasons"]
                ));
            }
        }
        Ok(rec)
    }) else {
        return;
    };
    assert_eq!(case(&rec), "no_loss", "{}", evidence(&rec));
    let d = &rec["diagnosis"];
    assert!(
        d["headline"].as_str().unwrap().starts_with("No loss"),
        "{}",
        d["headline"]
    );
    assert!(d["fix"].is_null(), "{}", d["fix"]);
    assert!(
        rec["after"].is_null(),
        "nothing to verify, yet: {}",
        rec["after"]
    );
    assert_eq!(rec["applied"], serde_json::json!([]));
    assert_eq!(rec["restored"], serde_json::json!([]));
    assert!(
        rec["notes"].to_string().contains("nothing to verify"),
        "{}",
        rec["notes"]
    );
    let req = &rec["before"]["ledger"]["request"];
    let attempted = u(&req["attempted"], "request.attempted");
    assert!(attempted > 0);
    assert_eq!(common::row(req, "delivered"), attempted);
    assert_eq!(
        common::row(&rec["before"]["ledger"]["reply"], "delivered"),
        attempted
    );
    assert_ledger_balances(&rec, true);
}

// ---------------------------------------------------------------------------------------
// 5. A real DNS server: keeps up at 2000 qps, overflows under bursts.

#[test]
fn dnsmasq_keeps_up_and_overloaded() {
    if !can_run("dnsmasq_keeps_up_and_overloaded") {
        return;
    }
    if !common::need("dnsmasq_keeps_up_and_overloaded", DNSMASQ) {
        return;
    }
    let _serial = common::serial();
    let ns = NetNs::new();
    let dns = dnsmasq(&ns, "dnsmasq-diagnose");
    let query = common::tmp("diagnose-query.bin");
    std::fs::write(&query, common::dns_query(DNS_NAME)).unwrap();
    let query = query.to_str().unwrap().to_string();
    let pid = dns.pid().to_string();
    let target = format!("127.0.0.1:{DNS_PORT}");
    let base = [
        "udp",
        target.as_str(),
        "--payload-file",
        query.as_str(),
        "--seq-field",
        "0:2",
        "--pid",
        pid.as_str(),
    ];

    // Keeps up: every query answered, matched by its DNS id.
    let mut args = base.to_vec();
    args.extend(["--rate", "2000", "--duration", "1s", "--warmup", "200ms"]);
    // A generator that fell off its schedule (a busy 2-CPU host) makes the run invalid
    // evidence, never judged: that run is repeated; any other case fails at once.
    let Some(rec) = common::retry("dnsmasq_keeps_up_and_overloaded", 3, || {
        judged_diagnose(&ns, "dns-clean", &args, &dns)
    }) else {
        return;
    };
    assert_eq!(case(&rec), "no_loss", "{}", evidence(&rec));
    assert_eq!(rec["before"]["generator"]["match_mode"], "seq_field");
    let req = &rec["before"]["ledger"]["request"];
    let attempted = u(&req["attempted"], "request.attempted");
    assert!(attempted > 0);
    assert_eq!(common::row(req, "delivered"), attempted);
    assert_ledger_balances(&rec, true);

    // Bursts of 2000 every 20 ms into dnsmasq's default buffer (256 queries of 832 B
    // charged each): every burst overflows it. 60000 queries: the 16-bit id never wraps.
    let mut args = base.to_vec();
    args.extend([
        "--burst",
        "2000",
        "--burst-interval",
        "20ms",
        "--duration",
        "500ms",
        "--warmup",
        "100ms",
    ]);
    // Off schedule here too (one burst in 25 over 10 ms late on a busy guest): repeated.
    let Some(rec) = common::retry("dnsmasq_keeps_up_and_overloaded bursts", 3, || {
        judged_diagnose(&ns, "dns-burst", &args, &dns)
    }) else {
        return;
    };
    let c = case(&rec);
    assert!(
        c == "socket_buffer_bursts" || c == "app_too_slow",
        "case {c}: {}",
        evidence(&rec)
    );
    let req = &rec["before"]["ledger"]["request"];
    let attempted = u(&req["attempted"], "request.attempted");
    assert!(attempted < 65536, "DNS id wrapped: {attempted}");
    let sock = common::row(req, "socket_drops");
    assert!(sock > 0, "no socket drops charged: {req}");
    assert!(
        f(
            &rec["before"]["generator"]["window_loss_pct"],
            "window_loss_pct"
        ) > 0.0
    );
    assert!(
        evidence(&rec).contains(&format!("{sock} at the socket buffer")),
        "{}",
        evidence(&rec)
    );
    assert_ledger_balances(&rec, true);
}

// ---------------------------------------------------------------------------------------
// 6. --server-cmd: a shell command, its server found by its socket, bound to tpslab.

#[test]
fn server_cmd_pipeline_watches_the_server_and_stops_every_process() {
    let test = "server_cmd_pipeline_watches_the_server_and_stops_every_process";
    if !can_run(test) || !common::need(test, "/usr/bin/tee") {
        return;
    }
    let _serial = common::serial();
    let ns = NetNs::new();
    let dir = common::tmp("server-cmd-pipeline");
    let cmd = common::pipeline_cmd(&dir);
    let (rec, _) = diagnose(
        &ns,
        "server-cmd-pipeline",
        &[
            "udp",
            "--server-cmd",
            &cmd,
            "--rate",
            "1000",
            "--duration",
            "1s",
            "--warmup",
            "200ms",
            "--no-verify",
        ],
        None,
    );
    // The process watched is the one owning the socket (python3), not the shell: its
    // reads are counted, so the ledger is consistent and every datagram is read.
    let sched = rec["before"]["observer"]["target_sched"].to_string();
    assert!(sched.contains("python3"), "watched {sched}");
    assert_ne!(case(&rec), "inconsistent", "{}", evidence(&rec));
    let req = &rec["before"]["ledger"]["request"];
    assert_eq!(
        common::row(req, "delivered"),
        u(&req["attempted"], "request.attempted")
    );
    // Nothing of the command outlives the run.
    let left = common::live_with(dir.to_str().unwrap());
    assert!(
        left.is_empty(),
        "still running after tpslab ended: {left:?}"
    );
}

#[test]
fn server_cmd_dies_with_a_sigkilled_tpslab() {
    let test = "server_cmd_dies_with_a_sigkilled_tpslab";
    if !can_run(test) || !common::need(test, "/usr/bin/tee") {
        return;
    }
    let _serial = common::serial();
    let ns = NetNs::new();
    let dir = common::tmp("server-cmd-sigkill");
    let mark = dir.to_str().unwrap().to_string();
    let mut c = ns.tpslab();
    c.args([
        "diagnose",
        "udp",
        "--server-cmd",
        &common::pipeline_cmd(&dir),
    ])
    .args(["--rate", "500", "--duration", "20s", "--warmup", "100ms"])
    .arg("--no-verify")
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null());
    // `ip netns exec` execs tpslab: this child's PID is tpslab's.
    let mut tpslab = common::Kill(c.spawn().expect("spawn tpslab"));
    let t0 = Instant::now();
    while common::live_with(&mark).len() < 3 {
        assert!(
            t0.elapsed().as_secs() < 15,
            "sh, python3 and tee not all started after 15 s: {:?}",
            common::live_with(&mark)
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    tpslab.0.kill().unwrap();
    tpslab.0.wait().unwrap();
    let t1 = Instant::now();
    while !common::live_with(&mark).is_empty() {
        assert!(
            t1.elapsed().as_secs_f64() < 2.0,
            "still running 2 s after tpslab was SIGKILLed: {:?}",
            common::live_with(&mark)
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
