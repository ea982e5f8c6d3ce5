//! A fleet on one machine: three agents, each in a network namespace of its own joined to
//! the server's namespace by a veth pair on a bridge (three "hosts"), started together by
//! `tpslab fleet ssh --run` through `ip netns exec`, against one `tpslab serve udp` watched
//! by `tpslab watch --pid`; `tpslab merge` adds them up. Also what merge refuses, and the
//! Kubernetes manifests parsed as YAML.

mod common;

use common::NetNs;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tpslab_analysis::stats::{decode_histogram, new_ns_histogram};

fn ip(args: &[&str]) {
    let st = Command::new("ip").args(args).status().expect("run ip");
    assert!(st.success(), "ip {args:?} failed");
}

const AGENTS: usize = 3;
const PORT: u16 = 9000;

/// The server's namespace with a bridge at 10.203.0.1/24 and AGENTS namespaces at
/// 10.203.0.(10+i), each on a veth pair whose server end is on the bridge.
fn topology() -> (NetNs, Vec<NetNs>) {
    let srv = NetNs::new();
    ip(&["-n", &srv.name, "link", "add", "br0", "type", "bridge"]);
    ip(&[
        "-n",
        &srv.name,
        "addr",
        "add",
        "10.203.0.1/24",
        "dev",
        "br0",
    ]);
    ip(&["-n", &srv.name, "link", "set", "br0", "up"]);
    let agents: Vec<NetNs> = (0..AGENTS).map(|_| NetNs::new()).collect();
    for (i, a) in agents.iter().enumerate() {
        let peer = format!("p{i}");
        ip(&[
            "-n", &a.name, "link", "add", "eth0", "type", "veth", "peer", "name", &peer, "netns",
            &srv.name,
        ]);
        ip(&["-n", &srv.name, "link", "set", &peer, "master", "br0", "up"]);
        ip(&[
            "-n",
            &a.name,
            "addr",
            "add",
            &format!("10.203.0.{}/24", 10 + i),
            "dev",
            "eth0",
        ]);
        ip(&["-n", &a.name, "link", "set", "eth0", "up"]);
    }
    (srv, agents)
}

/// Waits until process `pid` has a UDP socket on `port` (any address) in its namespace.
fn wait_udp(pid: u32, port: u16, child: &mut Child) {
    let want = format!(":{port:04X} ");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let udp = std::fs::read_to_string(format!("/proc/{pid}/net/udp")).unwrap_or_default();
        if udp.lines().skip(1).any(|l| {
            l.split_whitespace()
                .nth(1)
                .is_some_and(|a| format!("{a} ").ends_with(&want))
        }) {
            return;
        }
        assert!(child.try_wait().unwrap().is_none(), "server exited early");
        assert!(Instant::now() < deadline, "server not listening:\n{udp}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn run_ok(mut c: Command) -> std::process::Output {
    let out = common::run({
        c.stdin(Stdio::null());
        c
    });
    assert!(out.status.success(), "exit {:?}", out.status.code());
    out
}

fn stderr_line(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).trim().to_string()
}

#[test]
fn agents_in_three_namespaces_merge_into_one_balanced_ledger() {
    let t = "agents_in_three_namespaces_merge_into_one_balanced_ledger";
    if !common::can_netns(t) {
        return;
    }
    let _g = common::serial();
    let (srv, agents) = topology();
    let dir = common::tmp("fleet");
    std::fs::create_dir_all(&dir).unwrap();
    let plan = dir.join("plan.toml");
    // All agents share this machine's clock: the plan does not ask the kernel for its
    // error (here it calls the clock unsynchronized).
    std::fs::write(
        &plan,
        format!(
            "# three agents, 2000 pps each\ntarget = \"10.203.0.1:{PORT}\"\nrate = \"6000\"\nsize = 64\nduration = \"1s\"\nwarmup = \"300ms\"\ndrain = \"300ms\"\nmax_clock_error = \"unchecked\"\n"
        ),
    )
    .unwrap();
    let mut c = srv.tpslab();
    c.args([
        "serve",
        "udp",
        "--bind",
        &format!("0.0.0.0:{PORT}"),
        "--duration",
        "30s",
        "--no-history",
    ])
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    let mut server = common::Kill(c.spawn().unwrap());
    let spid = server.0.id();
    wait_udp(spid, PORT, &mut server.0);
    // The server's side: its threads' reads and sends counted, over the whole fleet run.
    let watch_json = dir.join("server-watch.json");
    let mut c = srv.tpslab();
    c.args([
        "watch",
        "--pid",
        &spid.to_string(),
        "--duration",
        "30s",
        "--no-history",
        "--json",
    ])
    .arg(&watch_json)
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::null());
    let mut watch = common::Kill(c.spawn().unwrap());
    // It says what it follows once its observer runs.
    {
        use std::io::BufRead;
        let mut line = String::new();
        std::io::BufReader::new(watch.0.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(line.contains("following 1 UDP socket"), "{line}");
    }
    let out_dir = dir.join("records");
    let hosts: Vec<String> = agents.iter().map(|a| a.name.clone()).collect();
    let mut c = common::tpslab();
    c.args([
        "fleet",
        "ssh",
        &hosts.join(","),
        "--plan",
        plan.to_str().unwrap(),
        "--ssh",
        "ip netns exec",
        "--remote-tpslab",
        env!("CARGO_BIN_EXE_tpslab"),
        "--start-in",
        "2s",
        "--out",
        out_dir.to_str().unwrap(),
        "--run",
    ]);
    let fan = common::run(c);
    for i in 0..AGENTS {
        eprintln!(
            "--- agent {i}\n{}",
            std::fs::read_to_string(out_dir.join(format!("agent-{i}.log"))).unwrap_or_default()
        );
    }
    assert!(fan.status.success(), "an agent failed");
    // The watch ends on SIGINT like Ctrl-C, and writes its record.
    // SAFETY: kill sends a signal to the watch we started, by its PID.
    unsafe { libc::kill(watch.0.id() as i32, libc::SIGINT) };
    assert!(watch.0.wait().unwrap().success());
    drop(server);
    let recs: Vec<_> = (0..AGENTS)
        .map(|i| out_dir.join(format!("agent-{i}.json")))
        .collect();
    let merged = dir.join("merged.json");
    let mut c = common::tpslab();
    c.arg("merge")
        .args(&recs)
        .arg("--server")
        .arg(&watch_json)
        .args(["--no-history", "--json"])
        .arg(&merged);
    let out = run_ok(c);
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(report.contains("Fleet: 3 of 3 agents"), "{report}");
    let m = common::record(&merged);
    let run = &m;
    // Every datagram accounted for on both paths.
    let ledger = &run["ledger"];
    assert_eq!(ledger["request"]["unattributed"], 0, "{ledger:#}");
    assert_eq!(ledger["reply"]["unattributed"], 0, "{ledger:#}");
    let mut attempted = 0;
    let mut all = new_ns_histogram();
    for (i, r) in recs.iter().enumerate() {
        let a = common::record(r);
        let ar = &a;
        assert_eq!(ar["agent"]["index"], i);
        // Each agent started within 100 ms of the common start (one clock here).
        let err = ar["agent"]["start_error_us"].as_i64().unwrap();
        assert!(
            (0..100_000).contains(&err),
            "agent {i} started {err} us late"
        );
        let g = &ar["generator"];
        assert_eq!(g["rate_pps"], 2000.0);
        attempted += g["attempted"].as_u64().unwrap();
        let h = decode_histogram(g["histograms"]["intended"].as_str().unwrap()).unwrap();
        all.add(&h).unwrap();
    }
    assert_eq!(ledger["request"]["attempted"], attempted);
    // The merged p99 is the p99 of one histogram fed with every agent's samples.
    let g = &run["generator"];
    assert_eq!(
        g["latency_intended"]["p99_ns"],
        all.value_at_quantile(0.99),
        "{g:#}"
    );
    assert_eq!(g["latency_intended"]["count"], all.len());
    assert_eq!(run["merged"]["agents"].as_array().unwrap().len(), AGENTS);
    // Rendered like any record, from the file.
    common::assert_report_reproduces(&merged, &out.stdout);

    // What merge refuses, each with one line and exit 2.
    let refuse = |args: &[&std::path::Path], want: &str| {
        let mut c = common::tpslab();
        c.arg("merge").args(args).arg("--no-history");
        let out = common::run(c);
        assert_eq!(out.status.code(), Some(2));
        let e = stderr_line(&out);
        assert!(e.contains(want), "{e}");
        assert_eq!(e.lines().count(), 1, "{e}");
    };
    // A missing agent, unless --allow-missing (then the total names it).
    refuse(&[&recs[0], &recs[2]], "agent(s) 1 of 3 missing");
    let mut c = common::tpslab();
    c.arg("merge")
        .args([&recs[0], &recs[2]])
        .args(["--allow-missing", "--no-history"]);
    let out = run_ok(c);
    assert!(String::from_utf8_lossy(&out.stdout).contains("PARTIAL: agent(s) 1 of 3 missing"));
    // A histogram that does not decode.
    let mut bad = common::record(&recs[1]);
    bad["generator"]["histograms"]["actual"] = "bm90IGEgaGlzdG9ncmFt".into();
    let bad_path = dir.join("bad-agent-1.json");
    std::fs::write(&bad_path, serde_json::to_string(&bad).unwrap()).unwrap();
    refuse(
        &[&recs[0], &bad_path, &recs[2]],
        "bad-agent-1.json: not a record this release wrote: its actual latency histogram does not decode",
    );
    // Another plan's agent.
    let mut other = common::record(&recs[1]);
    other["agent"]["plan_hash"] = "0".repeat(64).into();
    let other_path = dir.join("other-plan.json");
    std::fs::write(&other_path, serde_json::to_string(&other).unwrap()).unwrap();
    refuse(
        &[&recs[0], &other_path, &recs[2]],
        "from another plan or start (plan hash)",
    );
    // Not an agent's record at all.
    refuse(&[&watch_json], "not an agent's record");
}

#[test]
fn an_agent_refuses_a_start_that_passed_or_is_too_far() {
    let dir = common::tmp("agent-start");
    std::fs::create_dir_all(&dir).unwrap();
    let plan = dir.join("plan.toml");
    std::fs::write(
        &plan,
        "target = \"127.0.0.1:9\"\nmax_clock_error = \"unchecked\"\n",
    )
    .unwrap();
    // `agent --plan P --index I --of M --start-at START`: exit 2 and its one line.
    let agent = |plan: &std::path::Path, index: &str, of: &str, start: &str| {
        let mut c = common::tpslab();
        c.args(["agent", "--plan", plan.to_str().unwrap(), "--index", index])
            .args(["--of", of, "--start-at", start, "--no-history"]);
        let out = common::run(c);
        assert_eq!(out.status.code(), Some(2));
        stderr_line(&out)
    };
    let e = agent(&plan, "0", "2", "2020-01-01T00:00:00Z");
    assert!(
        e.contains("passed") && e.contains("ago by this host's clock"),
        "{e}"
    );
    let e = agent(&plan, "0", "2", "@99999999999");
    assert!(e.contains("more than the plan's max_wait 10m"), "{e}");
    let e = agent(&plan, "0", "2", "tomorrow");
    assert!(
        e.contains("--start-at \"tomorrow\": allowed an RFC 3339 time"),
        "{e}"
    );
    // An index outside the fleet.
    let e = agent(&plan, "2", "2", "@99999999999");
    assert!(e.contains("--index 2: allowed 0..=1"), "{e}");
    // A clock the kernel calls unsynchronized is refused unless the plan says unchecked.
    let checked = dir.join("checked.toml");
    std::fs::write(&checked, "target = \"127.0.0.1:9\"\n").unwrap();
    let synced = tpslab_net::clock_status().is_some_and(|c| c.synchronized);
    let e = agent(&checked, "0", "1", "@99999999999");
    if synced {
        // Past the clock check: refused for the far start instead.
        assert!(e.contains("max_wait"), "{e}");
    } else {
        assert!(
            e.contains("not synchronized") && e.contains("unchecked"),
            "{e}"
        );
    }
}

#[test]
fn kubernetes_manifests_are_an_indexed_job_as_yaml() {
    let dir = common::tmp("k8s");
    std::fs::create_dir_all(&dir).unwrap();
    let plan = dir.join("plan.toml");
    let text = "# the fleet's plan\ntarget = \"10.0.0.5:53\"\nrate = \"90000\"\nsize = 64\n";
    std::fs::write(&plan, text).unwrap();
    let mut c = common::tpslab();
    c.args([
        "fleet",
        "k8s",
        "--plan",
        plan.to_str().unwrap(),
        "--agents",
        "4",
    ])
    .args(["--image", "registry.example/tpslab:1", "--start-in", "90s"]);
    let out = run_ok(c);
    let yaml = String::from_utf8(out.stdout).unwrap();
    let docs: Vec<serde_yaml::Value> = serde_yaml::Deserializer::from_str(&yaml)
        .map(|d| serde::Deserialize::deserialize(d).expect("valid YAML"))
        .collect();
    assert_eq!(docs.len(), 2, "{yaml}");
    let cm = &docs[0];
    assert_eq!(cm["kind"], "ConfigMap");
    assert_eq!(cm["data"]["plan.toml"].as_str(), Some(text));
    let job = &docs[1];
    assert_eq!(job["kind"], "Job");
    assert_eq!(job["apiVersion"], "batch/v1");
    let spec = &job["spec"];
    assert_eq!(spec["completionMode"], "Indexed");
    assert_eq!(spec["completions"], 4);
    assert_eq!(spec["parallelism"], 4);
    let pod = &spec["template"]["spec"];
    assert_eq!(pod["restartPolicy"], "Never");
    let ctr = &pod["containers"][0];
    assert_eq!(ctr["image"], "registry.example/tpslab:1");
    let cmd: Vec<&str> = ctr["command"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let after = |flag: &str| cmd[cmd.iter().position(|a| *a == flag).unwrap() + 1];
    assert_eq!(after("--of"), "4");
    assert_eq!(after("--index"), "$(AGENT_INDEX)");
    assert_eq!(
        ctr["env"][0]["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.annotations['batch.kubernetes.io/job-completion-index']"
    );
    // The start is a little ahead: 90 s from now, give or take the test's own time.
    let start = humantime::parse_rfc3339(after("--start-at")).unwrap();
    let ahead = start
        .duration_since(std::time::SystemTime::now())
        .unwrap_or_default();
    assert!(
        ahead > Duration::from_secs(80) && ahead <= Duration::from_secs(90),
        "{ahead:?}"
    );
    // Guaranteed QoS (requests = limits, whole CPUs), so a static CPU manager pins it.
    assert_eq!(ctr["resources"]["requests"], ctr["resources"]["limits"]);
    assert_eq!(ctr["resources"]["requests"]["cpu"], "2");
    // Too many agents is refused, naming the flag.
    let mut c = common::tpslab();
    c.args([
        "fleet",
        "k8s",
        "--plan",
        plan.to_str().unwrap(),
        "--agents",
        "5000",
    ]);
    let out = common::run(c);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr_line(&out).contains("--agents 5000: allowed 1..=1024"));
}
