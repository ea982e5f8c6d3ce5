//! `tpslab doctor` on a fixture tree (`tests/fixtures/doctor/s1`): S1's sysctl.conf with
//! the missing `net.`, an override chain across /etc/sysctl.d and /usr/lib/sysctl.d, a
//! file masked by one of the same name, a malformed line, and a file value that differs
//! from the running one, set by the test in a network namespace of its own (and
//! restored). `--for tcp` against `bdp`, `--for pool` against S5's pool, `--fail-on`,
//! `--write-snippet`, and the one-line errors. Nothing on the host is changed.

use crate::common;

use std::path::Path;

const S1: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/doctor/s1");

/// Sets a sysctl inside `ns` and puts the old value back when dropped (also when the
/// test fails).
struct NsSysctl<'a> {
    ns: &'a common::NetNs,
    key: &'static str,
    old: String,
}

impl<'a> NsSysctl<'a> {
    fn set(ns: &'a common::NetNs, key: &'static str, value: &str) -> NsSysctl<'a> {
        let read = ns.command("sysctl").args(["-n", key]).output().unwrap();
        let old = String::from_utf8_lossy(&read.stdout).trim().to_string();
        assert!(!old.is_empty(), "sysctl -n {key} in the namespace");
        let w = ns
            .command("sysctl")
            .args(["-w", &format!("{key}={value}")])
            .status()
            .unwrap();
        assert!(w.success(), "sysctl -w {key}={value}");
        NsSysctl { ns, key, old }
    }
}

impl Drop for NsSysctl<'_> {
    fn drop(&mut self) {
        let _ = self
            .ns
            .command("sysctl")
            .args(["-q", "-w", &format!("{}={}", self.key, self.old)])
            .status();
    }
}

/// An empty tree to audit (no sysctl files), for the workload tests.
fn empty_root(name: &str) -> std::path::PathBuf {
    let r = common::tmp(name);
    std::fs::create_dir_all(&r).unwrap();
    r
}

#[test]
fn s1_tree_findings_with_their_evidence() {
    // Changes host-wide state or checks it unchanged: under the suite's host lock.
    let _host = common::host_lock();
    if !common::can_netns("s1_tree_findings_with_their_evidence") {
        return;
    }
    let ns = common::NetNs::new();
    let _set = NsSysctl::set(&ns, "net.ipv4.tcp_rmem", "4096 131072 7654321");
    let json = common::tmp("doctor-s1.json");
    let mut c = ns.tpslab();
    c.args(["doctor", "--root", S1, "--json"]).arg(&json);
    let out = common::run(c);
    assert!(out.status.success());
    common::assert_report_reproduces(&json, &out.stdout);
    let text = String::from_utf8_lossy(&out.stdout);
    let j = common::record(&json);
    assert_eq!(j["kind"], "doctor");
    let files: Vec<&str> = j["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        files,
        [
            "/usr/lib/sysctl.d/50-backlog.conf",
            "/etc/sysctl.d/60-udp.conf",
            "/etc/sysctl.d/70-backlog.conf",
            "/etc/sysctl.d/80-tcp.conf",
            "/etc/sysctl.conf"
        ],
        "boot order"
    );
    assert!(
        text.contains(
            "/usr/lib/sysctl.d/60-udp.conf: not applied, masked by /etc/sysctl.d/60-udp.conf"
        ),
        "{text}"
    );
    let findings = j["findings"].as_array().unwrap();
    let find = |s: &str| {
        findings
            .iter()
            .find(|f| f["what"].as_str().unwrap().contains(s))
            .unwrap_or_else(|| panic!("no finding with {s:?}: {text}"))
    };
    // S1: the key without `net.` is an error, with the key meant and the fixed line.
    let s1 = find("`core.rmem_default` is not a key of this kernel");
    assert_eq!(s1["severity"], "error");
    assert!(s1["what"]
        .as_str()
        .unwrap()
        .contains("probably `net.core.rmem_default`"));
    assert_eq!(
        s1["evidence"][0],
        "/etc/sysctl.conf:2: core.rmem_default = 4608000"
    );
    assert_eq!(s1["fix"]["key"], "net.core.rmem_default");
    assert_eq!(s1["fix"]["value"], "4608000");
    assert!(
        text.contains("      fix: net.core.rmem_default = 4608000\n"),
        "{text}"
    );
    let bad = find("not `key = value`");
    assert_eq!(
        bad["evidence"][0],
        "/etc/sysctl.d/60-udp.conf:2: net.core.rmem_max: 8388608"
    );
    let chain = find("net.core.netdev_max_backlog is set in 2 places with different values");
    assert!(chain["what"]
        .as_str()
        .unwrap()
        .ends_with("/etc/sysctl.d/70-backlog.conf:1"));
    // The namespace runs what the test set; the file says otherwise.
    let tcp = find("net.ipv4.tcp_rmem runs with");
    assert_eq!(tcp["severity"], "warn");
    assert!(
        tcp["what"]
            .as_str()
            .unwrap()
            .contains("runs with 4096 131072 7654321 but the files set 4096 131072 12345678"),
        "{tcp}"
    );
    // The scope of each known setting, checked in a fresh namespace.
    let known = j["known"].as_array().unwrap();
    let scope = |k: &str| known.iter().find(|x| x["key"] == k).unwrap()["scope"].clone();
    assert_eq!(scope("net.ipv4.tcp_rmem"), "netns");
    assert_eq!(scope("net.core.rmem_default"), "host");
    assert!(text.contains("  net.ipv4.tcp_rmem "), "{text}");
    // Errors come first.
    assert_eq!(findings[0]["severity"], "error");
}

/// `--for tcp` proposes the lines `bdp` prints for the same figures, in the same
/// namespace (4 Gbit/s over 100 ms needs a 100 MB buffer: above every default).
#[test]
fn for_tcp_agrees_with_bdp() {
    if !common::can_netns("for_tcp_agrees_with_bdp") {
        return;
    }
    let ns = common::NetNs::new();
    let mut c = ns.tpslab();
    c.args(["bdp", "--rtt", "100ms", "--rate", "4gbit"]);
    let bdp = common::run(c);
    assert!(bdp.status.success());
    let text = String::from_utf8_lossy(&bdp.stdout);
    let start = text
        .find("<<'EOF'\n")
        .expect("bdp proposes a persisted fix")
        + 8;
    let end = start + text[start..].find("\nEOF\n").unwrap();
    let bdp_lines: Vec<&str> = text[start..end].lines().map(str::trim).collect();
    assert!(
        bdp_lines[0].starts_with("net.ipv4.tcp_rmem = "),
        "{bdp_lines:?}"
    );
    let snippet = common::tmp("doctor-tcp.conf");
    let _ = std::fs::remove_file(&snippet);
    let root = empty_root("doctor-empty-tcp");
    let mut c = ns.tpslab();
    c.args([
        "doctor", "--for", "tcp", "--rtt", "100ms", "--rate", "4gbit", "--root",
    ])
    .arg(&root)
    .arg("--write-snippet")
    .arg(&snippet);
    let out = common::run(c);
    assert!(out.status.success());
    let written = std::fs::read_to_string(&snippet).unwrap();
    let doc_lines: Vec<&str> = written
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .collect();
    assert_eq!(doc_lines, bdp_lines);
    assert!(written.starts_with(
        "# sysctl settings proposed by tpslab doctor --for tcp --rtt 100ms --rate 4Gbit"
    ));
    // Never overwritten.
    let mut c = ns.tpslab();
    c.args([
        "doctor",
        "--for",
        "tcp",
        "--rtt",
        "100ms",
        "--rate",
        "4gbit",
        "--write-snippet",
    ])
    .arg(&snippet);
    let again = common::run(c);
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("exists; doctor does not overwrite"));
    assert_eq!(std::fs::read_to_string(&snippet).unwrap(), written);
}

/// `--for udp` sizes the buffers from the truesize it measures on this kernel, the same
/// arithmetic as diagnose (unit-tested against diagnose's verdict in tpslab-analysis):
/// the whole burst, x2, in pages.
#[test]
fn for_udp_sizes_the_buffer_from_this_kernels_truesize() {
    // Changes host-wide state or checks it unchanged: under the suite's host lock.
    let _host = common::host_lock();
    if !common::can_netns("for_udp_sizes_the_buffer_from_this_kernels_truesize") {
        return;
    }
    let ns = common::NetNs::new();
    let root = empty_root("doctor-empty-udp");
    let json = common::tmp("doctor-udp.json");
    let mut c = ns.tpslab();
    c.args([
        "doctor", "--for", "udp", "--rate", "100000", "--burst", "50000", "--size", "1024",
        "--root",
    ])
    .arg(&root)
    .arg("--json")
    .arg(&json);
    let out = common::run(c);
    assert!(out.status.success());
    common::assert_report_reproduces(&json, &out.stdout);
    let j = common::record(&json);
    let p = &j["truesize"]["Ok"];
    let t = p["rx_queue_bytes"].as_u64().unwrap() / p["queued"].as_u64().unwrap();
    assert!(t > 1024 && t < 8192, "truesize {t}");
    let want = (50000 * t * 2).div_ceil(4096) * 4096;
    let fix = j["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["fix"]["key"] == "net.core.rmem_default")
        .expect("no host defaults to a buffer for 50000 datagrams");
    assert_eq!(fix["fix"]["value"], want.to_string());
    assert!(
        fix["what"]
            .as_str()
            .unwrap()
            .contains(&format!("each charged {t} B")),
        "{fix}"
    );
}

/// S5's pool (validated every 50 min, kept 83) behind a 350 s idle timeout, with Linux's
/// keepalive and retries defaults set in the namespace: warnings, so `--fail-on warn`
/// exits 1 and `--fail-on error` does not.
#[test]
fn for_pool_flags_s5s_settings_and_fails_on_warn() {
    if !common::can_netns("for_pool_flags_s5s_settings_and_fails_on_warn") {
        return;
    }
    let ns = common::NetNs::new();
    let _k = NsSysctl::set(&ns, "net.ipv4.tcp_keepalive_time", "7200");
    let _r = NsSysctl::set(&ns, "net.ipv4.tcp_retries2", "15");
    let root = empty_root("doctor-empty-pool");
    let args = |gate: &str| {
        let mut c = ns.tpslab();
        c.args([
            "doctor",
            "--for",
            "pool",
            "--idle-timeout",
            "350s",
            "--pool-validate",
            "50m",
            "--pool-max-idle",
            "83m",
            // As probe idle measured it (a silent control outlived the timeout): only
            // then is keepalive the fix.
            "--keepalive-counts",
            "yes",
            "--fail-on",
            gate,
            "--root",
        ])
        .arg(&root);
        c
    };
    let out = common::run(args("warn"));
    assert_eq!(out.status.code(), Some(1), "warnings fail --fail-on warn");
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        "tpslab: doctor: 4 finding(s) at --fail-on warn or above"
    );
    let text = String::from_utf8_lossy(&out.stdout);
    for s in [
        "WARN  keepalive probes an idle connection first after 7200 s, but the middlebox forgets it after 350 s",
        "fix: net.ipv4.tcp_keepalive_time = 175",
        "retransmitted for at least 924.6 s",
        "WARN  the pool's validation interval (3000 s) is not below the middlebox's idle timeout (350 s)",
        "WARN  the pool's idle lifetime (4980 s)",
    ] {
        assert!(text.contains(s), "{s:?} in {text}");
    }
    let out = common::run(args("error"));
    assert_eq!(out.status.code(), Some(0), "no error-level finding");
}

const POOL: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/crates/tpslab-proc/tests/fixtures/pool"
);

/// S5's c3p0 settings against its 30-minute proxy: the original is flagged with the
/// values that fix it, the fixed one passes; a broken file is a one-line error with its
/// line.
#[test]
fn pool_configs_against_s5s_proxy() {
    let root = empty_root("doctor-empty-pools");
    let json = common::tmp("doctor-pools.json");
    let run = |file: &str| {
        let _ = std::fs::remove_file(&json);
        let mut c = common::tpslab();
        c.args(["doctor", "--for", "pool", "--idle-timeout", "30m", "--root"])
            .arg(&root)
            .arg("--pool-config")
            .arg(format!("{POOL}/{file}"))
            .arg("--json")
            .arg(&json);
        common::run(c)
    };
    let findings = |_: &std::process::Output| -> Vec<serde_json::Value> {
        common::record(&json)["findings"]
            .as_array()
            .unwrap()
            .clone()
    };
    let before = run("s5-before.hibernate.cfg.xml");
    assert!(before.status.success());
    let f = findings(&before);
    let pool = f
        .iter()
        .find(|x| {
            x["what"].as_str().unwrap().contains(
                "s5-before.hibernate.cfg.xml: a connection can sit idle past the path's 1800 s",
            )
        })
        .expect("S5's pool flagged");
    assert_eq!(pool["severity"], "warn");
    assert!(pool["fix"]["line"]
        .as_str()
        .unwrap()
        .starts_with("hibernate.c3p0.idle_test_period = 900"));
    let after = run("s5-after.hibernate.cfg.xml");
    let f = findings(&after);
    let pool: Vec<&serde_json::Value> = f
        .iter()
        .filter(|x| x["what"].as_str().unwrap().contains("s5-after"))
        .collect();
    assert_eq!(pool.len(), 1);
    assert_eq!(pool[0]["severity"], "info", "{pool:?}");
    let broken = run("broken.hibernate.cfg.xml");
    assert_eq!(broken.status.code(), Some(2));
    let err = String::from_utf8_lossy(&broken.stderr);
    assert!(
        err.trim().starts_with(&format!(
            "tpslab: error: {POOL}/broken.hibernate.cfg.xml:5: not well-formed XML"
        )),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1);
}

/// Bad input: one line on stderr, exit 2, before anything is read.
#[test]
fn bad_input_is_a_one_line_error() {
    let unreadable = empty_root("doctor-unreadable");
    std::fs::create_dir_all(unreadable.join("etc/sysctl.d/99-dir.conf")).unwrap();
    let existing = common::tmp("doctor-existing.conf");
    std::fs::write(&existing, "keep me\n").unwrap();
    let u = unreadable.to_str().unwrap().to_string();
    let e = existing.to_str().unwrap().to_string();
    let cases: Vec<(Vec<&str>, String)> = vec![
        (
            vec!["--for", "dns"],
            "--for dns: allowed udp, tcp or pool".into(),
        ),
        (
            vec!["--rtt", "30ms"],
            "--rtt describes a workload: give --for udp, tcp or pool".into(),
        ),
        (
            vec!["--for", "udp", "--rate", "1000", "--size", "1024"],
            "--for udp needs --burst (it takes --rate, --burst, --size, --sockets)".into(),
        ),
        (
            vec![
                "--for", "tcp", "--rtt", "30ms", "--rate", "80mbit", "--burst", "5",
            ],
            "--burst does not apply to --for tcp (it takes --rate, --rtt)".into(),
        ),
        (
            vec!["--for", "pool", "--idle-timeout", "0s"],
            "--idle-timeout 0s: allowed 1s..=7days".into(),
        ),
        (
            vec!["--fail-on", "note"],
            "--fail-on note: allowed warn or error".into(),
        ),
        (
            vec!["--root", &u],
            format!("reading {u}/etc/sysctl.d/99-dir.conf: Is a directory (os error 21)"),
        ),
        (
            vec!["--write-snippet", &e],
            format!(
                "--write-snippet {e}: exists; doctor does not overwrite (give a new file name)"
            ),
        ),
    ];
    for (args, want) in cases {
        let out = common::tpslab().arg("doctor").args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim(), format!("tpslab: error: {want}"), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}: nothing printed");
    }
    assert_eq!(std::fs::read_to_string(&existing).unwrap(), "keep me\n");
    assert!(Path::new(&e).exists());
}

#[test]
fn a_root_that_is_not_a_folder_is_a_one_line_error() {
    let out = common::tpslab()
        .args(["doctor", "--root", "/nonexistent/tree"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        err.trim(),
        "tpslab: error: --root /nonexistent/tree: not a folder"
    );
}

/// In a terminal of 80 columns (a pseudo-terminal: script(1), COLUMNS=80) doctor's report
/// fits it, its header lines and tables alike; in a pipe every line is whole (issue 60).
#[test]
fn in_a_terminal_of_80_columns_the_report_fits_it() {
    let test = "in_a_terminal_of_80_columns_the_report_fits_it";
    if !common::need(test, "/usr/bin/script") {
        return;
    }
    let args = [
        "doctor",
        "--root",
        "tests/fixtures/doctor/s1",
        "--for",
        "udp",
        "--rate",
        "100000",
        "--burst",
        "5000",
        "--size",
        "1024",
        "--no-history",
    ];
    let width = |text: &str| {
        text.lines()
            .map(|l| l.trim_end_matches('\r').chars().count())
            .max()
    };
    let mut c = common::tpslab();
    c.args(args);
    let piped = String::from_utf8(common::run(c).stdout).unwrap();
    assert!(width(&piped) > Some(80), "{piped}");
    let mut c = std::process::Command::new("script");
    let line = format!("{} {}", env!("CARGO_BIN_EXE_tpslab"), args.join(" "));
    c.args(["-qec", &line, "/dev/null"]).env("COLUMNS", "80");
    let out = common::run(c);
    let shown = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(shown.contains("net.core.rmem_default"), "{shown}");
    assert!(width(&shown) <= Some(80), "{shown}");
}
