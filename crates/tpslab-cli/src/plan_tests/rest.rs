//! The table rows of doctor, bdp and fleet.

use super::{
    check, file, joined, Made,
    Want::{Error, Plan},
    BITRATE_FORMS, DURATION_FORMS, SIZE_FORMS,
};
use crate::doctor::DoctorPlan;
use std::time::Duration;
use tpslab_plan::bdp::BdpPlan;
use tpslab_run::fleet::{K8sLaunch, SshLaunch};

#[test]
fn doctor_rows() {
    use tpslab_plan::doctor::Workload;
    use tpslab_record::doctor::Severity;
    let exists = file("exists.conf", b"");
    check(&[
        (
            &["doctor"],
            Plan(|p| {
                matches!(p, Made::Doctor(DoctorPlan { setup, fail_on: None })
            if setup.root == std::path::Path::new("/") && setup.workload.is_none() && setup.pools.is_empty())
            }),
        ),
        (
            &[
                "doctor",
                "--for",
                "udp",
                "--rate",
                "200k",
                "--burst",
                "5000",
                "--size",
                "1KiB",
                "--fail-on",
                "warn",
            ],
            Plan(|p| {
                matches!(p, Made::Doctor(DoctorPlan { setup, fail_on: Some(Severity::Warn) })
                if setup.workload == Some(Workload::Udp { rate_pps: 200_000.0, burst: 5000, size_bytes: 1024, sockets: 1 }))
            }),
        ),
        (
            &[
                "doctor",
                "--for",
                "pool",
                "--idle-timeout",
                "350s",
                "--pool-config",
                file("pgbouncer.ini", b"[pgbouncer]\nserver_idle_timeout = 600\n"),
            ],
            Plan(|p| {
                matches!(p, Made::Doctor(DoctorPlan { setup, .. })
                if matches!(setup.workload, Some(Workload::Pool { idle_timeout, .. }) if idle_timeout == std::time::Duration::from_secs(350)) && setup.pools.len() == 1)
            }),
        ),
        (
            &["doctor", "--rate", "10k"],
            Error("--rate describes a workload: give --for udp, tcp or pool"),
        ),
        (
            &["doctor", "--for", "disk"],
            Error("--for disk: allowed udp, tcp or pool"),
        ),
        (
            &["doctor", "--for", "udp", "--rate", "10k", "--burst", "5"],
            Error("--for udp needs --size (it takes --rate, --burst, --size, --sockets)"),
        ),
        (
            &["doctor", "--pool-config", "x.ini"],
            Error("--pool-config is judged against a timeout: give --for pool --idle-timeout DUR"),
        ),
        (
            &[
                "doctor",
                "--for",
                "pool",
                "--idle-timeout",
                "350s",
                "--pool-config",
                "/dev/zero",
            ],
            Error("--pool-config /dev/zero: a character device; allowed a regular file"),
        ),
        (
            &["doctor", "--fail-on", "often"],
            Error("--fail-on often: allowed warn or error"),
        ),
        (
            &["doctor", "--root", "/nonexistent-root"],
            Error("--root /nonexistent-root: not a folder"),
        ),
        (
            &["doctor", "--write-snippet", exists],
            Error(joined(
                &format!("--write-snippet {exists}"),
                ": exists; doctor does not overwrite (give a new file name)",
            )),
        ),
    ]);
}

#[test]
fn bdp_rows() {
    check(&[
        (&["bdp", "--rtt", "30ms", "--rate", "80mbit"], Plan(|p| matches!(p, Made::Bdp(b) if *b == BdpPlan {
            rtt: Duration::from_millis(30), rate_bps: Some(80e6), buffer_bytes: None }))),
        (&["bdp", "--rtt", "30ms", "--buffer", "2MiB", "--rate", "1.5gbit"], Plan(|p| matches!(p, Made::Bdp(BdpPlan { buffer_bytes: Some(2_097_152), rate_bps: Some(r), .. }) if *r == 1.5e9))),
        (&["bdp", "--rtt", "30ms"], Error("bdp needs --rate RATE (the buffers it needs) or --buffer SIZE (the rate it allows)")),
        (&["bdp", "--rtt", "0s", "--rate", "80mbit"], Error("--rtt 0s: allowed 1us..=1m")),
        (&["bdp", "--rtt", "30ms", "--rate", "80"], Error(joined("--rate 80: ", BITRATE_FORMS))),
        (&["bdp", "--rtt", "30ms", "--buffer", "2x"], Error(joined("--buffer 2x: ", SIZE_FORMS))),
        (&["bdp", "--rtt", "30ms", "--rate", "80mbit", "--json", "/nonexistent-tpslab-dir/b.json"], Error("--json /nonexistent-tpslab-dir/b.json: ")),
    ]);
}

#[test]
fn fleet_rows() {
    let plan = file(
        "fleet.toml",
        b"target = \"10.0.0.1:9000\"\nrate = \"20k\"\nmax_wait = \"5m\"\n",
    );
    let not_toml = file("not.toml", b"x");
    check(&[
        (&["fleet", "k8s", "--plan", plan, "--agents", "4"], Plan(|p| matches!(p, Made::K8s(K8sLaunch { how, text, fleet })
            if how.agents == 4 && how.name == "tpslab-fleet" && how.namespace == "default" && how.image == "tpslab:latest"
                && how.start_in == Duration::from_secs(60) && text.starts_with("target = ") && fleet.target == "10.0.0.1:9000"))),
        (&["fleet", "ssh", "--plan", plan, "--ssh", "ip netns exec", "--", "h1, root@10.0.0.2"], Plan(|p| matches!(p, Made::Ssh(SshLaunch { how, plan_path, .. })
            if how.hosts == ["h1", "root@10.0.0.2"] && how.ssh_words().unwrap() == ["ip", "netns", "exec"]
                && how.out == std::path::Path::new("fleet-records") && !how.run && plan_path.ends_with("/fleet.toml")
                && plan_path.starts_with('/')))),
        (&["fleet", "k8s", "--plan", "p.toml", "--agents", "2", "--start-in", "1x"], Error(joined("--start-in 1x: ", DURATION_FORMS))),
        (&["fleet", "k8s", "--plan", "/dev/zero", "--agents", "2", "--start-in", "10s"], Error("--plan /dev/zero: a character device; allowed a regular file")),
        (&["fleet", "k8s", "--plan", not_toml, "--agents", "2"], Error(joined(&format!("--plan {not_toml}: "), "--plan expected `.`, `=`: allowed a TOML fleet plan"))),
        (&["fleet", "k8s", "--plan", plan, "--agents", "2", "--start-in", "5m"], Error("--start-in 5m: allowed above 0 and below the plan's max_wait 5m")),
        (&["fleet", "k8s", "--plan", plan, "--agents", "0"], Error("--agents 0: allowed 1..=1024")),
        (&["fleet", "k8s", "--plan", plan, "--agents", "2", "--name", "Fleet"], Error("--name \"Fleet\": allowed a lowercase RFC 1123 label (a-z, 0-9 and '-', starting and ending with a letter or digit) of at most 61 characters (NAME-INDEX is each pod's host name, at most 63)")),
        (&["fleet", "k8s", "--plan", plan, "--agents", "2", "--namespace", "a_b"], Error("--namespace \"a_b\": allowed a lowercase RFC 1123 label")),
        (&["fleet", "k8s", "--plan", plan, "--agents", "2", "--image", "a b"], Error("--image \"a b\": allowed an image reference of 1..=4096 bytes without white space or control characters")),
        (&["fleet", "ssh", "--plan", plan, "--", "h1,a;b"], Error("host \"a;b\": allowed a comma-separated list of [USER@]HOST")),
        (&["fleet", "ssh", "--plan", plan, "--ssh", "ssh '", "h1"], Error("--ssh \"ssh '\": allowed a command that splits into shell words (quotes closed)")),
        (&["fleet", "ssh", "--plan", plan, "--remote-tpslab=-x", "h1"], Error("--remote-tpslab \"-x\": allowed a path of letters, digits and /._+:@- not starting with '-'")),
        // The flags are checked before the plan file is read.
        (&["fleet", "ssh", "--plan", "/dev/zero", "--", "a;b"], Error("host \"a;b\": allowed")),
        (&["fleet", "ssh", "--plan", plan, &"h,".repeat(1025)[..2049]], Error("1025 hosts: --of 1025: allowed 1..=1024")),
    ]);
}
