//! A fleet on one machine: three agents, each in a network namespace of its own joined to
//! the server's namespace by a veth pair on a bridge (three "hosts"), started together by
//! `tpslab fleet ssh --run` through `ip netns exec`, against one `tpslab serve udp` watched
//! by `tpslab watch --pid`; `tpslab merge` adds them up. Also what merge refuses, and the
//! Kubernetes manifests parsed as YAML.

use crate::common;

use common::NetNs;
use serde_json::json;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tpslab_analysis::stats::new_ns_histogram;
use tpslab_record::histogram::decode_histogram;

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

/// Fragments of shell and YAML syntax, line breaks of every kind and other characters a
/// quoting bug lets through; an injected `touch MARK` or `>MARK` would leave a file.
const NASTY: &[&str] = &[
    "$(touch MARK)",
    "`touch MARK`",
    ";touch MARK;",
    "|touch MARK",
    "&touch MARK&",
    "\ntouch MARK\n",
    ">MARK",
    "${IFS}",
    "'",
    "\"",
    "\\",
    "\t",
    " ",
    "\r",
    "\u{85}",
    "\u{2028}",
    "\u{2029}",
    "\u{feff}",
    "#",
    "*",
    "?",
    "~",
    "!",
    "{a,b}",
    "-o",
    ": ",
    "- ",
    "a",
    "h1",
    "é",
    "@",
    ":",
    ".",
    "-",
];

/// A string of NASTY fragments and arbitrary characters, without `,` and `/` (which
/// would change how many hosts or folders there are, not how they are quoted).
fn nasty() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    let piece = prop_oneof![
        3 => proptest::sample::select(NASTY).prop_map(str::to_string),
        1 => any::<char>().prop_filter("no separators", |c| !matches!(c, ',' | '/' | '\0')).prop_map(String::from),
    ];
    proptest::collection::vec(piece, 0..6).prop_map(|v| v.concat())
}

/// Runs `tpslab fleet ...` with `args`, each passed whole (`--flag=value`, the hosts after
/// `--`): Ok(stdout) on success, Err(stderr) on a refusal, which must be one line and
/// exit 2.
fn fleet(args: &[String], cwd: &std::path::Path) -> Result<String, String> {
    let out = common::tpslab()
        .arg("fleet")
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    if out.status.success() {
        assert!(stderr.is_empty(), "{stderr}");
        return Ok(String::from_utf8(out.stdout).unwrap());
    }
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(out.stdout.is_empty(), "{args:?}");
    assert!(
        stderr.starts_with("tpslab: error: ") && stderr.trim_end().lines().count() == 1,
        "{args:?}: not one line: {stderr:?}"
    );
    Err(stderr)
}

/// What `fleet ssh` accepts as a host, written from its documentation: [USER@]HOST.
fn host_ok(h: &str) -> bool {
    let (user, host) = h.split_once('@').unwrap_or(("x", h));
    let word = |s: &str, extra: &str| {
        !s.is_empty()
            && !s.starts_with('-')
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || extra.contains(c))
    };
    let label = |l: &str| word(l, "-") && l.len() <= 63 && !l.ends_with('-');
    word(user, "_.-")
        && user.len() <= 32
        && (host.parse::<std::net::IpAddr>().is_ok()
            || (host.len() <= 253 && host.split('.').all(label)))
}

/// The ssh fan-out of `hosts` (comma-separated) through `ssh`, into `out`, with
/// `remote` as the remote tpslab: either refused (exit 2, one line) when any of them is
/// not allowed, or a script that `sh -n` accepts and that, run by sh with `stub-ssh` in
/// PATH, passes each agent exactly its words (the stub writes them into the agent's
/// record), sends the plan on its standard input (the stub copies it into the log), ends
/// with the folder shown quoted, and leaves nothing but `out` and its records in `cwd`.
fn check_ssh(
    t: &Fleet,
    hosts: &str,
    ssh: &str,
    out: &str,
    remote: &str,
) -> Result<(), proptest::test_runner::TestCaseError> {
    use proptest::{prop_assert, prop_assert_eq};
    let n = t.cases.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let cwd = t.dir.join(format!("case-{n}"));
    std::fs::create_dir_all(&cwd).unwrap();
    let args: Vec<String> = vec![
        "ssh".into(),
        format!("--plan={}", t.plan.display()),
        format!("--out={out}"),
        format!("--ssh={ssh}"),
        format!("--remote-tpslab={remote}"),
        "--start-in=5m".into(),
        "--".into(),
        hosts.into(),
    ];
    let list: Vec<&str> = hosts.split(',').map(|h| h.trim_matches(' ')).collect();
    let words = shlex::split(ssh).filter(|w| !w.is_empty());
    let remote_ok = !remote.is_empty()
        && !remote.starts_with('-')
        && remote
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._+:@-".contains(c));
    let allowed =
        list.iter().all(|h| host_ok(h)) && words.is_some() && remote_ok && !out.is_empty();
    let script = match fleet(&args, &cwd) {
        Err(e) => {
            prop_assert_eq!(allowed, false, "refused: {}", e);
            return Ok(());
        }
        Ok(s) => s,
    };
    prop_assert_eq!(allowed, true, "accepted {:?}:\n{}", args, script);
    t.accepted
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let words = words.unwrap();
    let st = Command::new("sh")
        .args(["-n", "-c", &script])
        .status()
        .unwrap();
    prop_assert_eq!(st.success(), true, "sh -n refused:\n{}", script);
    let path = format!(
        "{}:{}",
        t.bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let run = Command::new("sh")
        .args(["-c", &script])
        .current_dir(&cwd)
        .env("PATH", path)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    prop_assert_eq!(run.status.code(), Some(0), "{}\n{}", stderr, script);
    // Nothing but the records' folder (`out` may well be named MARK or >MARK: it is
    // then the folder itself).
    let listing = |d: &std::path::Path| {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        v.sort();
        v
    };
    prop_assert_eq!(listing(&cwd), vec![out.to_string()], "{}", script);
    let mut want: Vec<String> = (0..list.len())
        .flat_map(|i| [format!("agent-{i}.json"), format!("agent-{i}.log")])
        .collect();
    want.sort();
    prop_assert_eq!(listing(&cwd.join(out)), want);
    let mut start = None;
    for (i, h) in list.iter().enumerate() {
        let rec = std::fs::read(cwd.join(out).join(format!("agent-{i}.json"))).unwrap();
        let argv: Vec<String> = rec
            .split(|b| *b == 0)
            .map(|w| String::from_utf8(w.to_vec()).unwrap())
            .collect();
        // The words, then "" after the last NUL.
        let m = list.len().to_string();
        let idx = i.to_string();
        let s = argv
            .iter()
            .position(|a| a == "--start-at")
            .map(|p| argv[p + 1].clone());
        let s = s.expect("a --start-at");
        prop_assert!(humantime::parse_rfc3339(&s).is_ok(), "{}", s);
        prop_assert_eq!(start.get_or_insert_with(|| s.clone()), &s);
        let mut expect: Vec<&str> = words[1..].iter().map(String::as_str).collect();
        expect.extend([
            *h,
            remote,
            "agent",
            "--plan",
            "-",
            "--index",
            &idx,
            "--of",
            &m,
            "--start-at",
            &s,
            "--json",
            "-",
            "--no-history",
            "",
        ]);
        prop_assert_eq!(&argv, &expect, "{}", script);
        let log = std::fs::read_to_string(cwd.join(out).join(format!("agent-{i}.log"))).unwrap();
        prop_assert_eq!(&log, &t.plan_text);
    }
    let q = shlex::try_quote(out).unwrap();
    prop_assert_eq!(
        stderr,
        format!("records in {q}; merge: tpslab merge {q}/agent-*.json\n")
    );
    std::fs::remove_dir_all(&cwd).unwrap();
    Ok(())
}

/// What the ssh and k8s checks share: a plan in a folder whose name needs quoting, and a
/// `stub-ssh` in a folder of its own.
struct Fleet {
    dir: std::path::PathBuf,
    plan: std::path::PathBuf,
    plan_text: String,
    bin: std::path::PathBuf,
    cases: std::sync::atomic::AtomicUsize,
    accepted: std::sync::atomic::AtomicUsize,
    /// The k8s cases for PyYAML.
    pyyaml: std::sync::Mutex<Vec<serde_json::Value>>,
}

impl Fleet {
    fn new(name: &str) -> Fleet {
        use std::os::unix::fs::PermissionsExt;
        let dir = common::tmp(name);
        let pdir = dir.join("plans $(touch MARK) 'q\"");
        std::fs::create_dir_all(&pdir).unwrap();
        let plan = pdir.join("plan.toml");
        let plan_text = "# a plan \u{2028} sent on standard input\ntarget = \"127.0.0.1:9\"\nrate = \"1000000\"\nmax_clock_error = \"unchecked\"\n".to_string();
        std::fs::write(&plan, &plan_text).unwrap();
        let bin = dir.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let stub = bin.join("stub-ssh");
        // Its arguments, each ended by a NUL, on standard output; standard input on
        // standard error.
        std::fs::write(
            &stub,
            "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\0' \"$a\"; done\nexec cat >&2\n",
        )
        .unwrap();
        std::fs::set_permissions(&stub, std::fs::Permissions::from_mode(0o755)).unwrap();
        Fleet {
            dir,
            plan,
            plan_text,
            bin,
            cases: Default::default(),
            accepted: Default::default(),
            pyyaml: Default::default(),
        }
    }
}

fn runner(cases: u32) -> proptest::test_runner::TestRunner {
    proptest::test_runner::TestRunner::new(proptest::test_runner::Config {
        cases,
        failure_persistence: None,
        ..Default::default()
    })
}

#[test]
fn the_ssh_script_quotes_every_value_or_refuses_it() {
    use proptest::prelude::*;
    let t = Fleet::new("ssh-quoting");
    // The injections this was first found with.
    check_ssh(&t, "h1,a;touch${IFS}MARK;true", "stub-ssh", "out", "tpslab").unwrap();
    check_ssh(&t, "h1,h2", "stub-ssh", "x\";touch MARK;\"", "tpslab").unwrap();
    check_ssh(
        &t,
        "h1",
        "stub-ssh -o 'Proxy Command=$(touch MARK)'",
        "o",
        "t",
    )
    .unwrap();
    check_ssh(&t, "h1", "stub-ssh", "o", "tpslab;touch MARK").unwrap();
    check_ssh(&t, "h1", "stub-ssh 'x", "o", "tpslab").unwrap();
    // Failed agents are counted, the folder shown quoted, and `--run` exits 1.
    let out = "x\";touch MARK;\"$(touch MARK)";
    let cwd = t.dir.join("failing");
    std::fs::create_dir_all(&cwd).unwrap();
    let run = common::tpslab()
        .args(["fleet", "ssh", "--ssh=false", "--start-in=5m", "--run"])
        .arg(format!("--plan={}", t.plan.display()))
        .arg(format!("--out={out}"))
        .args(["--", "h1,h2"])
        .current_dir(&cwd)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let q = shlex::try_quote(out).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&run.stderr),
        format!("tpslab fleet: 2 agent(s) failed: see {q}/agent-N.log\nrecords in {q}; merge: tpslab merge {q}/agent-*.json\n")
    );
    assert_eq!(run.status.code(), Some(1));
    let listing: Vec<_> = std::fs::read_dir(&cwd)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(listing, [out]);
    // A record already there, or a link in its place, is not written over: that agent
    // fails, the others write theirs.
    let cwd = t.dir.join("links");
    std::fs::create_dir_all(cwd.join("out")).unwrap();
    let victim = t.dir.join("victim");
    std::fs::write(&victim, "keep").unwrap();
    std::os::unix::fs::symlink(&victim, cwd.join("out/agent-0.json")).unwrap();
    std::os::unix::fs::symlink(t.dir.join("absent"), cwd.join("out/agent-1.json")).unwrap();
    let path = format!(
        "{}:{}",
        t.bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let run = common::tpslab()
        .args([
            "fleet",
            "ssh",
            "--ssh=stub-ssh",
            "--start-in=5m",
            "--run",
            "--out=out",
        ])
        .arg(format!("--plan={}", t.plan.display()))
        .args(["--", "h1,h2,h3"])
        .current_dir(&cwd)
        .env("PATH", path)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        stderr.contains("tpslab fleet: 2 agent(s) failed"),
        "{stderr}"
    );
    assert_eq!(run.status.code(), Some(1));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
    assert!(!t.dir.join("absent").exists());
    assert!(std::fs::read(cwd.join("out/agent-2.json"))
        .unwrap()
        .starts_with(b"h3\0"));
    let host = prop_oneof![
        3 => "[a-z0-9]([a-z0-9-]{0,6}[a-z0-9])?(\\.[a-zA-Z0-9]{1,5}){0,2}",
        1 => "[a-z_][a-z0-9_.-]{0,5}@[a-z]{1,6}",
        1 => any::<[u8; 4]>().prop_map(|a| std::net::Ipv4Addr::from(a).to_string()),
        1 => any::<[u16; 8]>().prop_map(|a| std::net::Ipv6Addr::from(a).to_string()),
        2 => nasty(),
    ];
    let case = (
        proptest::collection::vec(host, 1..=4).prop_map(|h| h.join(",")),
        prop_oneof![
            Just(String::new()),
            Just(" -o BatchMode=yes".into()),
            nasty()
        ]
        .prop_map(|tail| format!("stub-ssh {tail}")),
        // Not empty: clap refuses that itself, with its usage.
        prop_oneof![
            "[a-z]{1,8}",
            nasty().prop_filter("a folder name", |s| !["", ".", ".."].contains(&s.as_str()))
        ],
        prop_oneof![3 => Just("tpslab".to_string()), 1 => Just("/opt/t-1/tpslab".to_string()), 1 => nasty()],
    );
    let started = Instant::now();
    runner(128)
        .run(&case, |(hosts, ssh, out, remote)| {
            check_ssh(&t, &hosts, &ssh, &out, &remote)
        })
        .unwrap();
    let (n, ok) = (t.cases.into_inner(), t.accepted.into_inner());
    eprintln!(
        "{n} cases, {ok} accepted and run, in {:?}",
        started.elapsed()
    );
    // Both sides are exercised: a generator that made every case a refusal would prove
    // nothing about the quoting.
    assert!(ok * 4 >= n && ok < n, "{ok} of {n} accepted");
}

/// PyYAML (a YAML 1.1 reader, which breaks lines also at U+0085, U+2028 and U+2029, and
/// reads `on` as a boolean), on a JSON list of cases on standard input: each case's YAML
/// must be two documents, a ConfigMap and a Job of the case's names, the plan text and
/// image as given, every word of the command a string. Prints the cases that are not, as
/// JSON, and how many were read.
const PYYAML: &str = r#"
import json, sys, yaml
bad, cases = [], json.load(sys.stdin)
for c in cases:
    try:
        docs = list(yaml.safe_load_all(c["yaml"]))
        cm, job = docs
        ctr = job["spec"]["template"]["spec"]["containers"][0]
        ok = (cm["kind"] == "ConfigMap" and job["kind"] == "Job"
              and cm["metadata"]["name"] == c["name"] + "-plan"
              and job["metadata"]["name"] == c["name"]
              and cm["metadata"]["namespace"] == job["metadata"]["namespace"] == c["namespace"]
              and cm["data"] == {"plan.toml": c["plan"]}
              and ctr["image"] == c["image"]
              and all(isinstance(w, str) for w in ctr["command"])
              and c["agents"] in ctr["command"])
    except Exception as e:
        ok = False
    if not ok:
        bad.append(c)
json.dump({"read": len(cases), "bad": bad}, sys.stdout)
"#;

/// Runs [`PYYAML`] on `cases` and fails on the first case it does not read back.
fn pyyaml_check(cases: &[serde_json::Value]) {
    use std::io::Write;
    let mut c = Command::new("python3")
        .args(["-c", PYYAML])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin
        .take()
        .unwrap()
        .write_all(serde_json::to_string(cases).unwrap().as_bytes())
        .unwrap();
    let out = c.wait_with_output().unwrap();
    assert!(out.status.success(), "python3 failed");
    let got: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(got["read"], cases.len());
    if let Some(bad) = got["bad"].get(0) {
        panic!(
            "PyYAML does not read back {}:\n{}",
            bad,
            bad["yaml"].as_str().unwrap()
        );
    }
}

/// Whether python3 can import PyYAML.
fn pyyaml() -> bool {
    Command::new("python3")
        .args(["-c", "import yaml"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// `fleet k8s` with this plan text and these names: refused (exit 2, one line) when a
/// name, the namespace or the image is not allowed, else manifests that two YAML readers
/// (serde_yaml, and PyYAML when `py`) read as exactly a ConfigMap and a Job of these
/// names, whose plan.toml is the text byte for byte, after a header of comment lines.
#[allow(clippy::too_many_arguments)]
fn check_k8s(
    t: &Fleet,
    py: bool,
    plan_text: &str,
    agents: usize,
    name: &str,
    namespace: &str,
    image: &str,
) -> Result<(), proptest::test_runner::TestCaseError> {
    use proptest::{prop_assert, prop_assert_eq};
    let n = t.cases.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let plan = t.dir.join(format!("plan-{n}.toml"));
    std::fs::write(&plan, plan_text).unwrap();
    let args: Vec<String> = vec![
        "k8s".into(),
        format!("--plan={}", plan.display()),
        format!("--agents={agents}"),
        format!("--name={name}"),
        format!("--namespace={namespace}"),
        format!("--image={image}"),
    ];
    let label = |s: &str, max: usize| {
        !s.is_empty()
            && s.len() <= max
            && s.bytes()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
            && !s.starts_with('-')
            && !s.ends_with('-')
    };
    // NAME-INDEX is a pod's host name, at most 63.
    let digits = (agents - 1).to_string().len();
    let allowed = label(name, 63 - 1 - digits)
        && label(namespace, 63)
        && !image.is_empty()
        && !image.chars().any(|c| c.is_whitespace() || c.is_control());
    let yaml = match fleet(&args, &t.dir) {
        Err(e) => {
            prop_assert_eq!(allowed, false, "refused: {}", e);
            return Ok(());
        }
        Ok(s) => s,
    };
    prop_assert_eq!(allowed, true, "accepted {:?}", args);
    t.accepted
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    // The header: comment lines only, up to the first document.
    let body = yaml.find("---\n").expect("a document");
    prop_assert!(
        yaml[..body].lines().all(|l| l.starts_with("# ")),
        "{}",
        &yaml[..body]
    );
    let plan_name = format!("{name}-plan");
    let of = agents.to_string();
    let want = [
        ("ConfigMap", plan_name.as_str(), Some(plan_text)),
        ("Job", name, None),
    ];
    let docs: Vec<serde_yaml::Value> = serde_yaml::Deserializer::from_str(&yaml)
        .map(|d| serde::Deserialize::deserialize(d).expect("valid YAML"))
        .collect();
    prop_assert_eq!(docs.len(), 2, "{}", yaml);
    for (d, (kind, dname, text)) in docs.iter().zip(want) {
        prop_assert_eq!(d["kind"].as_str(), Some(kind));
        prop_assert_eq!(d["metadata"]["name"].as_str(), Some(dname));
        prop_assert_eq!(d["metadata"]["namespace"].as_str(), Some(namespace));
        prop_assert_eq!(d["data"]["plan.toml"].as_str(), text);
    }
    let ctr = &docs[1]["spec"]["template"]["spec"]["containers"][0];
    prop_assert_eq!(ctr["image"].as_str(), Some(image));
    if py {
        // Read by PyYAML after the run, all in one python3.
        let want = json!({
            "yaml": yaml, "name": name, "namespace": namespace, "plan": plan_text,
            "image": image, "agents": of,
        });
        t.pyyaml.lock().unwrap().push(want);
    }
    let _ = std::fs::remove_file(&plan);
    Ok(())
}

#[test]
fn kubernetes_manifests_hold_any_plan_text_and_refuse_bad_names() {
    use proptest::prelude::*;
    let test = "kubernetes_manifests_hold_any_plan_text_and_refuse_bad_names";
    let py = pyyaml();
    if !py {
        // serde_yaml still reads every case; PyYAML is the YAML 1.1 reader kubectl's
        // family of parsers resembles.
        common::skip(
            test,
            "python3 with PyYAML (python3-yaml) not installed: serde_yaml only",
        );
    }
    let t = Fleet::new("k8s-yaml");
    let body = "target = \"127.0.0.1:9\"\nrate = \"1000000\"\nmax_clock_error = \"unchecked\"\n";
    // The injections this was first found with.
    let name = "x\nkind: Pod\nmetadata:\n  name: evil";
    check_k8s(&t, py, body, 2, name, "default", "tpslab:1").unwrap();
    check_k8s(&t, py, body, 2, "Bad_Name!", "default", "tpslab:1").unwrap();
    check_k8s(&t, py, body, 2, "ok", "", "tpslab:1").unwrap();
    for sep in ["\u{85}", "\u{2028}", "\u{2029}"] {
        let text = format!("# c{sep}kind: Pod\n{body}");
        check_k8s(&t, py, &text, 2, "on", "yes", "tpslab:1").unwrap();
    }
    // A TOML comment holds any character but the controls other than tab.
    let comment_char = any::<char>().prop_filter(
        "allowed in a TOML comment",
        |c| !matches!(*c as u32, 0..=8 | 0x0a..=0x1f | 0x7f),
    );
    let comment = prop_oneof![
        3 => proptest::sample::select(NASTY)
            .prop_filter("one line", |s| !s.contains(['\n', '\r']))
            .prop_map(str::to_string),
        1 => comment_char.prop_map(String::from),
    ];
    let comment = proptest::collection::vec(comment, 0..8).prop_map(|v| format!("#{}", v.concat()));
    let lines = proptest::collection::vec(comment, 0..3);
    let plan = (
        prop_oneof![Just(""), Just(" "), Just("\t"), Just("\n")],
        lines.clone(),
        lines,
        prop_oneof![Just("\n"), Just("\r\n")],
        prop_oneof![Just(""), Just("\n"), Just("\n\n"), Just(" ")],
    )
        .prop_map(move |(lead, before, after, eol, tail)| {
            let mut l = before;
            l.extend(body.lines().map(str::to_string));
            l.extend(after);
            format!("{lead}{}{tail}", l.join(eol))
        });
    let word = prop_oneof![
        4 => "[a-z0-9]([a-z0-9-]{0,10}[a-z0-9])?",
        1 => "[a-z][a-z0-9-]{54,61}[a-z]",
        1 => proptest::sample::select(&["on", "off", "yes", "no", "y", "n", "true", "null", "0", "1e3", "0x1f", "012", "1-2"][..]).prop_map(str::to_string),
        1 => nasty(),
    ];
    let case = (
        plan,
        proptest::sample::select(&[1usize, 2, 10, 11, 100, 101, 1000, 1001, 1024][..]),
        word.clone(),
        word,
        prop_oneof![4 => Just("registry.example/tpslab:1".to_string()), 1 => nasty()],
    );
    let started = Instant::now();
    runner(192)
        .run(&case, |(plan, agents, name, ns, image)| {
            check_k8s(&t, py, &plan, agents, &name, &ns, &image)
        })
        .unwrap();
    let py_cases = t.pyyaml.into_inner().unwrap();
    if py {
        pyyaml_check(&py_cases);
    }
    let (n, ok) = (t.cases.into_inner(), t.accepted.into_inner());
    eprintln!(
        "{n} cases, {ok} accepted and parsed ({} by PyYAML), in {:?}",
        py_cases.len(),
        started.elapsed()
    );
    assert!(ok * 4 >= n && ok < n, "{ok} of {n} accepted");
}
