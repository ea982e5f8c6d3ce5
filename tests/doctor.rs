//! `tpslab doctor` on a fixture tree (`tests/fixtures/doctor/s1`): S1's sysctl.conf with
//! the missing `net.`, an override chain across /etc/sysctl.d and /usr/lib/sysctl.d, a
//! file masked by one of the same name, a malformed line, and a file value that differs
//! from the running one in a network namespace of the test's own (net.ipv4.tcp_rmem there
//! is the kernel's default, whatever the host set). Nothing on the host is changed.

mod common;

#[test]
fn s1_tree_findings_with_their_evidence() {
    if !common::can_netns("s1_tree_findings_with_their_evidence") {
        return;
    }
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/doctor/s1");
    let ns = common::NetNs::new();
    let json = common::tmp("doctor-s1.json");
    let mut c = ns.tpslab();
    c.args(["doctor", "--root", root, "--json"]).arg(&json);
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
    assert_eq!(s1["fix"], "net.core.rmem_default = 4608000");
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
    // The namespace runs the kernel's default tcp_rmem; the file says otherwise.
    let running = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_rmem").unwrap_or_default();
    let tcp = find("net.ipv4.tcp_rmem runs with");
    assert_eq!(tcp["severity"], "warn");
    assert!(
        tcp["what"]
            .as_str()
            .unwrap()
            .contains("but the files set 4096 131072 12345678"),
        "{tcp} (host: {running})"
    );
    // Errors come first.
    assert_eq!(findings[0]["severity"], "error");
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
