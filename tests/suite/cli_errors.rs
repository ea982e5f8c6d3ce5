//! Bad arguments and failed setup give exit code 2 and one clean line on stderr naming the
//! bad value; no panic, no backtrace.
//!
//! Validation cases send nothing when tpslab is correct; still, when root, they run in a
//! fresh network namespace (only `lo`) so that even a validation regression could not send
//! anything outside it. Cases that need a namespace (unreachable target, port in use) skip
//! without root.

use crate::common;

use common::NetNs;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

fn is_root() -> bool {
    // SAFETY: geteuid has no memory effects.
    unsafe { libc::geteuid() == 0 }
}

/// Runs tpslab with `args`: in a fresh namespace when root, else in this one.
fn tpslab(args: &[&str]) -> Output {
    if is_root() {
        let ns = NetNs::new();
        let mut c = ns.tpslab();
        c.args(args);
        common::run(c)
    } else {
        let mut c = common::tpslab();
        c.args(args);
        common::run(c)
    }
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn assert_no_panic(out: &Output) {
    let err = stderr(out).to_lowercase();
    assert!(!err.contains("panicked"), "panic on stderr: {err}");
    assert!(!err.contains("backtrace"), "backtrace on stderr: {err}");
}

/// Exit code 2, stderr exactly one non-empty line from tpslab's error handler, naming
/// `names` (case-insensitive).
fn assert_one_line_error(out: &Output, names: &str) -> String {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(2), "exit status; stderr: {err}");
    assert_no_panic(out);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "stderr must be one line: {err:?}");
    let line = lines[0].trim();
    assert!(!line.is_empty(), "empty error line");
    assert!(
        line.starts_with("tpslab: error: "),
        "not tpslab's error format: {line}"
    );
    assert!(
        line.to_lowercase().contains(&names.to_lowercase()),
        "error does not name {names:?}: {line}"
    );
    line.to_string()
}

/// For clap's own errors (several lines by design): exit code 2, no panic, names `names`.
fn assert_clap_error(out: &Output, names: &str) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(2), "exit status; stderr: {err}");
    assert_no_panic(out);
    assert!(err.contains(names), "error does not name {names:?}: {err}");
}

/// A one-line error must not say the same thing twice (e.g. an OS error repeated by an
/// error chain: "failed: X (os error 98): X (os error 98)").
fn assert_not_repeated(line: &str) {
    let parts: Vec<&str> = line.split(": ").map(str::trim).collect();
    for w in parts.windows(2) {
        assert!(w[0] != w[1], "error repeats {:?}: {line}", w[0]);
    }
    for p in &parts {
        if p.contains("(os error") {
            assert_eq!(line.matches(p).count(), 1, "error repeats {p:?}: {line}");
        }
    }
}

/// A 29-byte DNS query (id at 0..2), as a payload file.
fn payload_file() -> std::path::PathBuf {
    let p = common::tmp("cli-payload.bin");
    let mut q = vec![0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0];
    q.extend_from_slice(b"\x06tpslab\x04test\x00\x00\x01\x00\x01");
    assert_eq!(q.len(), 29);
    std::fs::write(&p, q).unwrap();
    p
}

#[test]
fn unresolvable_target() {
    let out = tpslab(&["load", "udp", "nosuchhost.invalid:9", "--duration", "100ms"]);
    assert_one_line_error(&out, "nosuchhost.invalid");
}

#[test]
fn unreachable_target() {
    if !common::can_netns("unreachable_target") {
        return;
    }
    // Only lo in the namespace: connect() fails with ENETUNREACH, nothing is sent.
    let ns = NetNs::new();
    let mut c = ns.tpslab();
    c.args(["load", "udp", "192.0.2.1:9", "--duration", "100ms"]);
    let out = common::run(c);
    assert_one_line_error(&out, "192.0.2.1");
}

/// Starts `tpslab serve udp --bind 127.0.0.1:9100` in `ns` and waits until it is bound.
fn serve_9100(ns: &NetNs) -> common::Kill {
    let mut c = ns.tpslab();
    c.args([
        "serve",
        "udp",
        "--bind",
        "127.0.0.1:9100",
        "--duration",
        "5s",
    ])
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    let mut first = common::Kill(c.spawn().expect("spawn tpslab serve"));
    // `ip netns exec` execs tpslab, so the child's PID is the server's.
    let pid = first.0.id();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(st) = first.0.try_wait().unwrap() {
            panic!("first server exited early: {st}");
        }
        let udp = std::fs::read_to_string(format!("/proc/{pid}/net/udp")).unwrap_or_default();
        if udp.lines().any(|l| l.contains("0100007F:238C")) {
            return first;
        }
        assert!(
            Instant::now() < deadline,
            "first server not bound after 5 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn second_serve_9100(ns: &NetNs) -> Output {
    let mut c = ns.tpslab();
    c.args([
        "serve",
        "udp",
        "--bind",
        "127.0.0.1:9100",
        "--duration",
        "1s",
    ]);
    common::run(c)
}

#[test]
fn port_in_use() {
    if !common::can_netns("port_in_use") {
        return;
    }
    let ns = NetNs::new();
    let mut first = serve_9100(&ns);
    let out = second_serve_9100(&ns);
    let line = assert_one_line_error(&out, "9100");
    assert!(line.to_lowercase().contains("in use"), "{line}");
    assert!(
        first.0.try_wait().unwrap().is_none(),
        "the first server must be unaffected"
    );
}

/// OS errors are wrapped with the call that failed; the wrapped error must appear once.
#[test]
fn os_errors_are_not_repeated() {
    if !common::can_netns("os_errors_are_not_repeated") {
        return;
    }
    let ns = NetNs::new();
    let mut c = ns.tpslab();
    c.args(["load", "udp", "192.0.2.1:9", "--duration", "100ms"]);
    let out = common::run(c);
    assert_not_repeated(&assert_one_line_error(&out, "192.0.2.1"));

    let _first = serve_9100(&ns);
    let out = second_serve_9100(&ns);
    assert_not_repeated(&assert_one_line_error(&out, "9100"));
}

#[test]
fn sweep_resume_without_a_plan() {
    let out = tpslab(&["sweep", "--resume", "--out", "/nonexistent/never-created"]);
    assert_one_line_error(&out, "--resume");
}

#[test]
fn tcp_refused_target() {
    if !is_root() {
        eprintln!("skipped tcp_refused_target: needs root for a private namespace");
        return;
    }
    // Nothing listens on port 1 in a fresh namespace.
    let out = tpslab(&["tcp", "127.0.0.1:1", "--duration", "2s"]);
    let line = assert_one_line_error(&out, "connect 127.0.0.1:1");
    assert!(line.contains("refused"), "{line}");
}

#[test]
fn seq_field_offset_near_the_integer_limit_is_an_error_not_a_hang() {
    // load udp's: a table row in crates/tpslab-cli/src/plan_tests/.
    let p = payload_file();
    let t0 = Instant::now();
    let out = tpslab(&[
        "ramp",
        "udp",
        "127.0.0.1:9",
        "--payload-file",
        p.to_str().unwrap(),
        "--seq-field",
        "18446744073709551615:2",
    ]);
    assert!(
        t0.elapsed() < Duration::from_secs(10),
        "ramp udp took too long"
    );
    assert_one_line_error(&out, "18446744073709551615:2");
}

#[test]
fn watch_of_a_port_with_no_socket_says_so() {
    let out = tpslab(&[
        "watch",
        "--port",
        "9",
        "--duration",
        "200ms",
        "--interval",
        "50ms",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("NO SOCKET FOUND: no UDP or TCP socket on port 9"),
        "{text}"
    );
}

#[test]
fn output_paths_are_checked_before_the_run() {
    let missing = "/nonexistent-tpslab-dir/out.json";
    // Each run planned for a minute or more: a check made only after it would take that
    // long, where the check before it takes well under 30 s even on a host shared with a
    // second suite (the 5 s this allowed were passed there once).
    let (ramp, tcp) = (
        ["ramp", "tcp", "--users", "1..2", "--step-duration", "30s"],
        ["tcp", "--lab-rtt", "10ms", "--duration", "60s"],
    );
    for (cmd, out_args) in [
        (&ramp[..], ["--json", missing]),
        (&ramp[..], ["--svg", "/nonexistent-tpslab-dir/r.svg"]),
        (&tcp[..], ["--json", missing]),
        (&tcp[..], ["--html", "/nonexistent-tpslab-dir/r.html"]),
    ] {
        let args = [cmd, &out_args[..]].concat();
        let t0 = Instant::now();
        let out = tpslab(&args);
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "{args:?}: checked only after a run"
        );
        assert_one_line_error(&out, "does not exist");
    }
    // Standard output is not free for commands that print their report as they go.
    let out = tpslab(&["ramp", "tcp", "--users", "1..2", "--json", "-"]);
    assert_one_line_error(&out, "--json -");
}

#[test]
fn a_metrics_address_is_checked_before_the_run() {
    let t0 = Instant::now();
    let out = tpslab(&["watch", "--port", "9", "--metrics-listen", "localhost"]);
    assert_one_line_error(&out, "--metrics-listen \"localhost\": allowed ADDR:PORT");
    // A port already taken (in this namespace: tpslab runs beside the test here) is said
    // up front, not after the watch.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let mut c = common::tpslab();
    c.args([
        "watch",
        "--port",
        "9",
        "--duration",
        "60s",
        "--no-history",
        "--metrics-listen",
        &addr,
    ]);
    let out = common::run(c);
    assert_one_line_error(
        &out,
        &format!("--metrics-listen {addr}: cannot listen there"),
    );
    // A watch of 60 s: checked after it would take that long (4 s were passed once on a
    // host shared with a second suite).
    assert!(
        t0.elapsed() < Duration::from_secs(30),
        "checked only after a run"
    );
}

#[test]
fn json_dash_writes_the_record_alone_to_standard_output() {
    let out = tpslab(&[
        "load",
        "udp",
        "127.0.0.1:9",
        "--rate",
        "1000",
        "--duration",
        "100ms",
        "--warmup",
        "0s",
        "--no-replies",
        "--json",
        "-",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("standard output is one JSON record");
    assert_eq!(v["schema"], "tpslab.record/2");
    assert_eq!(v["kind"], "udp_run");
    assert!(
        !std::path::Path::new("-").exists(),
        "a file named - was written"
    );
}

#[test]
fn port_zero_and_unitless_rates_are_refused() {
    let out = tpslab(&["bdp", "--rtt", "30ms", "--rate", "80"]);
    let line = assert_one_line_error(&out, "--rate 80: allowed");
    assert!(line.contains("with a unit"), "{line}");
}

#[test]
fn exit_codes_gate_a_pipeline() {
    // Nothing listens on port 9 in a fresh namespace: every datagram is lost.
    let base = [
        "load",
        "udp",
        "127.0.0.1:9",
        "--rate",
        "1000",
        "--duration",
        "200ms",
        "--warmup",
        "0s",
        "--drain",
        "50ms",
    ];
    let run = |extra: &[&str]| {
        let mut args = base.to_vec();
        args.extend(extra);
        tpslab(&args)
    };
    assert_eq!(
        run(&[]).status.code(),
        Some(0),
        "no gate: the run itself succeeded"
    );
    let out = run(&["--fail-on", "loss>0.1%"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("tpslab: exit 1: loss 100.000 %"),
        "{}",
        stderr(&out)
    );
    // "invalid" is not met while the generator keeps its schedule (a loaded host can
    // spoil that: retried). ICMP port-unreachable makes some sends fail with
    // ECONNREFUSED, so "errors" depends on ICMP rate limits: not asserted here.
    // The last check: None (all attempts spoiled) is a recorded skip.
    let _ = common::retry("exit_codes_gate_a_pipeline", 3, || {
        let out = run(&["--fail-on", "invalid"]);
        match out.status.code() {
            Some(0) => Ok(()),
            Some(1) if stderr(&out).contains("not valid evidence") => {
                Err(format!("generator off schedule: {}", stderr(&out)))
            }
            c => panic!("--fail-on invalid: exit {c:?}: {}", stderr(&out)),
        }
    });
}

#[test]
fn exit_codes_of_ramp_tcp_and_sweep() {
    if !is_root() {
        common::skip(
            "exit_codes_of_ramp_tcp_and_sweep",
            "needs root for a private namespace",
        );
        return;
    }
    // A condition a command cannot judge is a usage error, before anything runs.
    let out = tpslab(&["tcp", "127.0.0.1:1", "--fail-on", "loss>1%"]);
    assert!(assert_one_line_error(&out, "loss>1%").contains("cannot judge"));
    // A ramp against a closed port: every request refused.
    let ramp = |extra: &[&str]| {
        let mut a = vec![
            "ramp",
            "tcp",
            "127.0.0.1:1",
            "--users",
            "1..2",
            "--step-duration",
            "200ms",
            "--warmup",
            "0s",
        ];
        a.extend(extra);
        tpslab(&a)
    };
    // A target that refuses every connection: nothing was measured, an environment error
    // (exit 2, like iperf3's "unable to connect") whatever the gate; the report is printed.
    for gate in [
        &[][..],
        &["--strict"],
        &["--fail-on", "errors"],
        &["--fail-on", "loss>50%"],
    ] {
        let out = ramp(gate);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{gate:?}: {err}");
        assert!(
            err.contains("unable to reach the server") && err.contains("connection refused"),
            "{gate:?}: {err}"
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("no replies at all"), "{stdout}");
        assert!(
            !stdout.contains("no knee"),
            "a knee line without a reply: {stdout}"
        );
    }
    // A TCP flow into a sink: a target it cannot reach exits 1, one it reaches 0.
    let ns = NetNs::new();
    let mut c = ns.tpslab();
    c.args([
        "serve",
        "tcp",
        "--mode",
        "sink",
        "--bind",
        "127.0.0.1:5001",
        "--duration",
        "20s",
    ])
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    let _sink = common::Kill(c.spawn().expect("spawn the sink"));
    std::thread::sleep(Duration::from_millis(300));
    let flow = |target: &str| {
        let mut c = ns.tpslab();
        c.args([
            "tcp",
            "127.0.0.1:5001",
            "--duration",
            "1s",
            "--skip",
            "100ms",
            "--target-rate",
            target,
            "--fail-on",
            "target",
        ]);
        common::run(c)
    };
    let out = flow("1000gbit");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("short of the 1000000.0 Mbit/s target"),
        "{}",
        stderr(&out)
    );
    let out = flow("1kbit");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn report_of_an_unreadable_record_prints_and_writes_nothing() {
    // What each bad record is called: the table rows in crates/tpslab-cli/src/plan_tests/.
    let dir = common::tmp("report-bad");
    let _ = std::fs::create_dir_all(&dir);
    let junk = dir.join("junk.json");
    std::fs::write(&junk, "not json\n").unwrap();
    // Nothing printed for the good file before the bad one.
    let good = format!(
        "{}/crates/tpslab-report/tests/fixtures/udp_run.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let out = tpslab(&["report", &good, junk.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty(), "partial output before the error");
    // --html: a file that is not a record writes nothing: an existing page is not touched
    // by a failed render.
    let page = dir.join("page.html");
    std::fs::write(&page, "keep me").unwrap();
    let out = tpslab(&[
        "report",
        junk.to_str().unwrap(),
        "--html",
        page.to_str().unwrap(),
    ]);
    assert!(assert_one_line_error(&out, "junk.json").contains("not a tpslab record"));
    assert_eq!(std::fs::read_to_string(&page).unwrap(), "keep me");
    let out = tpslab(&["report", &good, "--html", page.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(std::fs::read_to_string(&page)
        .unwrap()
        .starts_with("<!DOCTYPE html>"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn compare_refuses_a_kind_without_runs_and_prints_nothing_before_an_error() {
    // Mixed kinds, a file that is not a record, one record, an unwritable --html: the
    // table rows in crates/tpslab-cli/src/plan_tests/.
    let run = format!(
        "{}/crates/tpslab-report/tests/fixtures/udp_run.json",
        env!("CARGO_MANIFEST_DIR")
    );
    // A kind without runs (doctor's audit) is named, with the kinds compare reads.
    let doctor = common::tmp("compare-doctor.json");
    let out = tpslab(&["doctor", "--no-history", "--json", doctor.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let d = doctor.to_str().unwrap();
    let out = tpslab(&["compare", d, d]);
    assert_one_line_error(
        &out,
        "compare reads udp_run, watch, diagnose, sweep, ramp and tcp",
    );
    let junk = common::tmp("compare-junk.json");
    std::fs::write(&junk, "{}").unwrap();
    let out = tpslab(&["compare", &run, junk.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(out.stdout.is_empty());
}

#[test]
fn duration_flags_are_named_without_a_unit_and_keep_their_old_names() {
    // serve udp's --work and --work-ns: the table rows in crates/tpslab-cli/src/plan_tests/. The previous
    // name takes plain nanoseconds (or a duration), never both names.
    let out = tpslab(&[
        "serve",
        "tcp",
        "--mode",
        "echo",
        "--serial",
        "1ms",
        "--serial-ns",
        "1000000",
    ]);
    assert_clap_error(&out, "--serial");
    if !is_root() {
        common::skip(
            "duration_flags_are_named_without_a_unit_and_keep_their_old_names",
            "the runs need root for a private namespace",
        );
        return;
    }
    for work in [
        ["--work", "20us"],
        ["--work-ns", "20000"],
        ["--work-ns", "20us"],
    ] {
        let mut args = vec![
            "run",
            "udp",
            "--rate",
            "1000",
            "--duration",
            "100ms",
            "--warmup",
            "0s",
        ];
        args.extend(work);
        args.extend(["--json", "-"]);
        let out = tpslab(&args);
        assert_eq!(out.status.code(), Some(0), "{work:?}: {}", stderr(&out));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a record");
        assert_eq!(v["server"]["work_ns"], 20000, "{work:?}");
    }
}

#[test]
fn errors_name_the_flag_the_user_gave() {
    let out = tpslab(&["tcp", "127.0.0.1:1", "--reverse", "--fail-on", "target"]);
    assert_one_line_error(&out, "--fail-on target");
}

#[test]
fn serve_tcp_shares_the_plan_limits() {
    // The same --work limit as serve udp's.
    let out = tpslab(&["serve", "tcp", "--mode", "echo", "--work", "2s"]);
    assert!(assert_one_line_error(&out, "--work 2s").contains("0s..=1s"));
    let out = tpslab(&["serve", "tcp", "--mode", "echo", "--serial", "11s"]);
    assert!(assert_one_line_error(&out, "--serial 11s").contains("0s..=10s"));
}

#[test]
fn serve_writes_a_record_that_reports_what_it_printed() {
    if !is_root() {
        common::skip(
            "serve_writes_a_record_that_reports_what_it_printed",
            "needs root for a private namespace",
        );
        return;
    }
    let json = common::tmp("serve-record.json");
    let _ = std::fs::remove_file(&json);
    let out = tpslab(&[
        "serve",
        "udp",
        "--bind",
        "127.0.0.1:0",
        "--duration",
        "300ms",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    common::assert_report_reproduces(&json, &out.stdout);
    let rec = common::record(&json);
    assert_eq!(rec["kind"], "serve");
    assert_eq!(rec["server"]["received"], 0);
    assert!(rec["elapsed_s"].as_f64().unwrap() >= 0.3);
}

#[test]
fn a_day_that_does_not_exist_is_refused() {
    let mut c = common::tpslab();
    c.env("XDG_DATA_HOME", common::tmp("history-since"))
        .args(["history", "--since", "2026-02-30"]);
    let out = common::run(c);
    assert_one_line_error(&out, "--since 2026-02-30: allowed a day as YYYY-MM-DD");
}

/// Runs tpslab with `args` (as [`tpslab`]) and kills it if it has not exited within 20 s:
/// a read that never ends fails the test instead of hanging it.
fn tpslab_bounded(args: &[&str]) -> Output {
    let ns = is_root().then(NetNs::new);
    let mut c = match &ns {
        Some(ns) => ns.tpslab(),
        None => common::tpslab(),
    };
    c.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().expect("spawn");
    let t0 = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if t0.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("tpslab {args:?} still running after 20 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("output");
    eprintln!("--- stderr\n{}", String::from_utf8_lossy(&out.stderr));
    out
}

fn fixture(rel: &str) -> String {
    format!("{}/{rel}", env!("CARGO_MANIFEST_DIR"))
}

/// Every file a command reads (records, plans, pool configurations) is a regular file:
/// a device that never ends and a FIFO without a writer are refused at once, with one
/// line naming the flag and what is allowed.
#[test]
fn input_files_that_are_not_regular_files_are_refused_at_once() {
    let dir = common::tmp("input-fifo");
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("fifo");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    assert!(made.unwrap().success(), "mkfifo");
    // report, compare, merge, sweep --plan and agent --plan: the table rows in
    // crates/tpslab-cli/src/plan_tests/.
    for (bad, what) in [
        ("/dev/zero", "a character device"),
        (fifo.to_str().unwrap(), "a FIFO"),
    ] {
        for (args, names) in [
            (
                vec![
                    "fleet",
                    "k8s",
                    "--plan",
                    bad,
                    "--agents",
                    "2",
                    "--start-in",
                    "10s",
                ],
                format!("--plan {bad}"),
            ),
            (
                vec![
                    "doctor",
                    "--for",
                    "pool",
                    "--idle-timeout",
                    "350s",
                    "--pool-config",
                    bad,
                ],
                format!("--pool-config {bad}"),
            ),
        ] {
            let t0 = Instant::now();
            let out = tpslab_bounded(&args);
            let line = assert_one_line_error(&out, &names);
            assert!(
                line.contains(what) && line.contains("allowed a regular file"),
                "{args:?}: {line}"
            );
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "{args:?} took {:?}",
                t0.elapsed()
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Standard input is read up to the same cap as a record file.
#[test]
fn standard_input_over_the_cap_is_refused() {
    // A record or plan file over its cap: the table rows in crates/tpslab-cli/src/plan_tests/.
    // Standard input that never ends.
    let mut c = common::tpslab();
    c.args(["report", "-"])
        .stdin(std::fs::File::open("/dev/zero").unwrap());
    let out = common::run(c);
    assert!(assert_one_line_error(&out, "-: more than 536870912 bytes").contains("allowed up to"));
}

/// A record with an empty series renders as a page (no line for it), never a panic.
#[test]
fn html_of_a_record_with_an_empty_series_renders() {
    let mut v: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("crates/tpslab-report/tests/fixtures/udp_run.json"))
            .unwrap(),
    )
    .unwrap();
    for s in ["server_drops_per_s", "server_rx_queue_bytes"] {
        v["observer"]["series"]["values"][s] = serde_json::json!([]);
    }
    let p = common::tmp("empty-series.json");
    std::fs::write(&p, v.to_string()).unwrap();
    let out = tpslab_bounded(&["report", p.to_str().unwrap(), "--format", "html"]);
    assert_no_panic(&out);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("<!DOCTYPE html>"));
}

/// Every kind of value is refused by the binary in one line of one shape, `--FLAG VALUE:
/// allowed FORMS`, whichever command's flag it is (the whole tree is walked by the unit
/// test beside `cli`); the forms each kind takes are accepted.
#[test]
fn sizes_rates_and_durations_are_refused_alike_by_every_command() {
    let size = "allowed bytes (65536) or a size with a unit: KiB, MiB, GiB";
    let duration = "allowed a duration with a unit: ns, us, ms, s, m (minutes), h, d";
    for (args, want) in [
        (
            &["serve", "tcp", "--sndbuf", "2x"][..],
            format!("--sndbuf 2x: {size}"),
        ),
        (
            &["tcp", "--lab-rtt", "30ms", "--write-size", "2x"][..],
            format!("--write-size 2x: {size}"),
        ),
        (
            &["bdp", "--rtt", "30ms", "--buffer", "2x"][..],
            format!("--buffer 2x: {size}"),
        ),
        (
            &["ramp", "tcp", "--size", "2x"][..],
            format!("--size 2x: {size}"),
        ),
        (
            &["tcp", "--lab-rtt", "30ms", "--lab-rate", "80"][..],
            "--lab-rate 80: allowed a number with a unit".into(),
        ),
        (
            &["probe", "idle", "127.0.0.1:9", "--min", "10"][..],
            format!("--min 10: {duration}"),
        ),
        (
            &[
                "fleet",
                "k8s",
                "--plan",
                "p.toml",
                "--agents",
                "2",
                "--start-in",
                "1x",
            ][..],
            format!("--start-in 1x: {duration}"),
        ),
    ] {
        let out = tpslab(args);
        let line = assert_one_line_error(&out, &want);
        assert!(
            line.starts_with(&format!("tpslab: error: {want}")),
            "{args:?}: {line}"
        );
    }
    // The same forms accepted where they were refused: `bdp --buffer 2MiB` is 2097152 bytes.
    let out = tpslab(&[
        "bdp", "--rtt", "30ms", "--buffer", "2MiB", "--rate", "1.5gbit",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("A window of 2097152 bytes"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// An error about a value the user never typed says it is a default, derived or not.
#[test]
fn a_default_that_conflicts_with_given_flags_names_itself() {
    for (args, want) in [
        (
            &["probe", "idle", "--lab-idle-timeout", "3s", "--min", "1s", "--max", "2s"][..],
            "--resolution 1s (derived default: 5s, or half the range --max - --min when less, at least 1s; not given) is not below the range --min 1s to --max 2s",
        ),
        (
            &["probe", "idle", "127.0.0.1:9", "--min", "2h"][..],
            "--max 1h (its default, not given) is not above --min 2h",
        ),
        (
            &["tcp", "127.0.0.1:1", "--duration", "1s"][..],
            "--skip 1s (its default, not given) leaves less than two samples of --duration 1s",
        ),
    ] {
        let out = tpslab(args);
        assert_one_line_error(&out, want);
    }
    // Typed, the same value is not called a default.
    let out = tpslab(&["tcp", "127.0.0.1:1", "--duration", "1s", "--skip", "1s"]);
    let line = assert_one_line_error(&out, "--skip 1s leaves");
    assert!(!line.contains("default"), "{line}");
}

/// A 50 KB value is not echoed whole, whether clap's parser refuses it (`--rtt`) or the
/// plan does (a URL), nor a value of many long words: one line of at most ~1 KiB that
/// still names the flag and what is allowed.
#[test]
fn a_huge_value_is_cut_in_its_error_line() {
    let long = "x".repeat(50_000);
    let words = "xy ".repeat(20_000);
    let url = format!("http://127.0.0.1:1/{long}");
    for (args, names) in [
        (vec!["bdp", "--rtt", &long, "--rate", "80mbit"], "--rtt"),
        (vec!["bdp", "--rtt", &words, "--rate", "80mbit"], "--rtt"),
        (vec!["load", "http", &url, "--rate", "1"], "URL"),
    ] {
        let out = tpslab(&args);
        let line = assert_one_line_error(&out, names);
        assert!(line.len() < 1200, "{} bytes: {}", line.len(), &line[..200]);
        assert!(line.contains("bytes]..."), "{line}");
        assert!(line.contains("allowed"), "{line}");
    }
}
