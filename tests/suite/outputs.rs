//! Output files as root on a shared host: nothing is written through a symbolic link
//! another user planted, and nothing is lost when one output fails (the report is printed,
//! every other file written, the failed one named on one line, exit 2). Status lines go to
//! standard error, so `tpslab run udp > out.txt` holds the report alone.

use crate::common;

use common::NetNs;
use std::process::Output;

const SHORT_RUN: &[&str] = &[
    "run",
    "udp",
    "--rate",
    "2000",
    "--duration",
    "300ms",
    "--warmup",
    "100ms",
    "--no-history",
];

fn run(ns: &NetNs, extra: &[&str]) -> Output {
    let mut c = ns.tpslab();
    c.args(SHORT_RUN).args(extra);
    common::run(c)
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn a_failing_output_costs_none_of_the_others() {
    if !common::can_netns("a_failing_output_costs_none_of_the_others") {
        return;
    }
    let ns = NetNs::new();
    let html = common::tmp("outputs-full.html");
    let metrics = common::tmp("outputs-full.prom");
    let _ = std::fs::remove_file(&html);
    let _ = std::fs::remove_file(&metrics);
    let out = run(
        &ns,
        &[
            "--json",
            "/dev/full",
            "--html",
            html.to_str().unwrap(),
            "--metrics-file",
            metrics.to_str().unwrap(),
        ],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "stderr: {err}");
    // The terminal report is there.
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        report.contains("Ledger: where every datagram went"),
        "no report on stdout: {report}"
    );
    // The other files are written and said.
    assert!(std::fs::read_to_string(&html).unwrap().contains("<html"));
    assert!(std::fs::read_to_string(&metrics)
        .unwrap()
        .contains("tpslab_"));
    assert!(
        err.contains(&format!("HTML report written to {}", html.display())),
        "{err}"
    );
    // One error line, naming the output and why.
    let errors: Vec<&str> = err.lines().filter(|l| l.contains("error")).collect();
    assert_eq!(errors.len(), 1, "{err}");
    assert!(
        errors[0].starts_with("tpslab: error: --json /dev/full: No space left on device"),
        "{err}"
    );
}

#[test]
fn a_planted_symlink_is_refused_before_the_run_and_its_target_kept() {
    if !common::can_netns("a_planted_symlink_is_refused_before_the_run_and_its_target_kept") {
        return;
    }
    let ns = NetNs::new();
    use std::os::unix::fs::PermissionsExt;
    let victim = common::tmp("outputs-victim");
    std::fs::write(&victim, "precious\n").unwrap();
    // A shared folder like /tmp (1777), links in it planted by another user (nobody).
    let shared = common::tmp("outputs-shared");
    let _ = std::fs::create_dir(&shared);
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    for flag in ["--json", "--html", "--metrics-file", "--json-stream"] {
        let link = shared.join(format!("link{flag}"));
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        std::os::unix::fs::lchown(&link, Some(65534), Some(65534)).unwrap();
        let out = run(&ns, &[flag, link.to_str().unwrap()]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{flag}: {err}");
        assert!(
            err.starts_with(&format!(
                "tpslab: error: {flag} {}: a symbolic link",
                link.display()
            )),
            "{flag}: {err}"
        );
        assert!(out.stdout.is_empty(), "{flag}: ran anyway");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
        assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
    }
}

#[test]
fn standard_output_holds_the_report_alone() {
    if !common::can_netns("standard_output_holds_the_report_alone") {
        return;
    }
    let ns = NetNs::new();
    let rec = common::tmp("outputs-alone.json");
    let out = run(&ns, &["--json", rec.to_str().unwrap()]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(&format!("tpslab: record written to {}", rec.display())),
        "{err}"
    );
    common::assert_report_reproduces(&rec, &out.stdout);
}

#[test]
fn sigquit_ends_a_run_like_sigterm_with_its_record() {
    if !common::can_netns("sigquit_ends_a_run_like_sigterm_with_its_record") {
        return;
    }
    let ns = NetNs::new();
    let rec = common::tmp("outputs-sigquit.json");
    let _ = std::fs::remove_file(&rec);
    let mut c = ns.tpslab();
    c.args([
        "run",
        "udp",
        "--rate",
        "2000",
        "--duration",
        "20s",
        "--no-history",
        "--json",
    ])
    .arg(&rec)
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null());
    let mut child = c.spawn().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1000));
    // `ip netns exec` execs tpslab, so the child's PID is tpslab's.
    // SAFETY: kill on a PID we spawned.
    unsafe { libc::kill(child.id() as i32, libc::SIGQUIT) };
    let t = std::time::Instant::now();
    let status = child.wait().unwrap();
    assert!(t.elapsed().as_secs() < 10, "must stop promptly");
    // Not killed by the signal (SIGQUIT's default action dumps core, restoring nothing).
    assert_eq!(status.code(), Some(130), "{status:?}");
    assert_eq!(common::record(&rec)["interrupted"], true);
}

#[test]
fn a_fifo_reader_that_leaves_costs_neither_the_run_nor_its_record() {
    if !common::can_netns("a_fifo_reader_that_leaves_costs_neither_the_run_nor_its_record") {
        return;
    }
    let ns = NetNs::new();
    let dir = common::tmp("outputs-fifo");
    let _ = std::fs::create_dir(&dir);
    let fifo = dir.join("stream");
    let _ = std::fs::remove_file(&fifo);
    let ok = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(ok.success());
    // Reads one line and leaves: the next line written gets EPIPE (SIGPIPE before).
    let mut reader = std::process::Command::new("head")
        .args(["-n", "1"])
        .arg(&fifo)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let rec = dir.join("rec.json");
    let _ = std::fs::remove_file(&rec);
    let mut c = ns.tpslab();
    c.args(SHORT_RUN)
        .arg("--json-stream")
        .arg(&fifo)
        .arg("--json")
        .arg(&rec);
    let out = common::run(c);
    let _ = reader.wait();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("--json-stream"),
        "the failed line is said: {err}"
    );
    assert!(
        common::record(&rec)["generator"]["attempted"]
            .as_u64()
            .unwrap()
            > 0
    );
}

#[test]
fn a_records_escape_sequences_are_shown_not_sent_to_the_terminal() {
    // A record from another host (a fleet agent's) whose note carries an OSC 52 (set the
    // clipboard) and a colour sequence.
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/crates/tpslab-report/tests/fixtures/udp_run.json"
    );
    let mut rec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture).unwrap()).unwrap();
    rec["notes"] = serde_json::json!(["\u{1b}]52;c;aGk=\u{7}\u{1b}[31mred note"]);
    let p = common::tmp("outputs-escape.json");
    std::fs::write(&p, rec.to_string()).unwrap();
    let mut c = common::tpslab();
    c.arg("report").arg(&p);
    let out = common::run(c);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!out.stdout.contains(&0x1b) && !out.stdout.contains(&0x07));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("\\u{1b}]52;c;aGk=\\u{7}\\u{1b}[31mred note"),
        "{text}"
    );
}

#[test]
fn sizes_and_rates_take_their_units() {
    // `serve udp --rcvbuf 2MiB` said "invalid digit found in string" while `serve tcp
    // --rcvbuf 64KiB` worked; `--rate 10k` was refused.
    if !common::can_netns("sizes_and_rates_take_their_units") {
        return;
    }
    let ns = NetNs::new();
    let rec = common::tmp("outputs-units.json");
    let mut c = ns.tpslab();
    c.args([
        "run",
        "udp",
        "--rcvbuf",
        "2MiB",
        "--rate",
        "10k",
        "--duration",
        "200ms",
        "--warmup",
        "0s",
        "--no-history",
        "--json",
    ])
    .arg(&rec);
    let out = common::run(c);
    assert!(out.status.success(), "{}", stderr(&out));
    let r = common::record(&rec);
    assert_eq!(r["server"]["rcvbuf_requested_bytes"], 2 * 1024 * 1024);
    assert_eq!(r["generator"]["rate_pps"], 10_000.0);
    let mut c = ns.tpslab();
    c.args(["run", "udp", "--rcvbuf", "2XB"]);
    let out = common::run(c);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--rcvbuf") && stderr(&out).contains("KiB, MiB"),
        "{}",
        stderr(&out)
    );
}

/// The line that names a file written holds what the user gave as its path escaped: a
/// line feed or ESC in the name never splits the line or reaches the terminal raw.
#[test]
fn a_written_files_line_is_one_line_whatever_its_name() {
    let dir = common::tmp("outputs-odd-name");
    std::fs::create_dir_all(&dir).unwrap();
    let rec = dir.join("bad\nname\u{1b}[31m.json");
    let out = common::run({
        let mut c = common::tpslab();
        c.args([
            "bdp",
            "--rtt",
            "30ms",
            "--rate",
            "80mbit",
            "--no-history",
            "--json",
        ])
        .arg(&rec);
        c
    });
    assert!(out.status.success(), "{out:?}");
    assert!(rec.exists(), "the record under its own name");
    let err = stderr(&out);
    let line = err
        .lines()
        .find(|l| l.contains("written to"))
        .unwrap_or_else(|| panic!("no written line: {err:?}"));
    assert!(line.ends_with("bad\\u{a}name\\u{1b}[31m.json"), "{line:?}");
    assert!(!err.contains('\u{1b}'), "{err:?}");
}
