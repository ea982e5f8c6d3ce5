//! Case 5 of diagnose: softnet backlog overflow, provoked for real by steering a
//! namespace's `lo` to CPU 1 with RPS and lowering net.core.netdev_max_backlog; and the
//! host-settings guard: a verification run's sysctl is restored afterwards, and after a
//! SIGKILL at the next start of tpslab.
//!
//! This is the one test that changes a host-wide setting other processes use, and it
//! cannot be otherwise: net.core.netdev_max_backlog exists only in the initial network
//! namespace (a namespace shows no copy of its own to lower), and the overflow it
//! reproduces happens in that per-CPU backlog. It is lowered for the shortest time (about
//! 3 s per attempt), under the test binary's serial lock, and restored on drop, also when
//! the test fails.

use crate::common;
use common::{record, row, run, tmp, NetNs};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BACKLOG: &str = "/proc/sys/net/core/netdev_max_backlog";

fn backlog() -> String {
    std::fs::read_to_string(BACKLOG).unwrap().trim().to_string()
}

/// Sets netdev_max_backlog for the test and restores the original on drop (also when the
/// test fails).
struct BacklogGuard(String);
impl BacklogGuard {
    fn set(v: &str) -> BacklogGuard {
        let g = BacklogGuard(backlog());
        std::fs::write(BACKLOG, v).unwrap();
        g
    }
}
impl Drop for BacklogGuard {
    fn drop(&mut self) {
        let _ = std::fs::write(BACKLOG, &self.0);
    }
}

/// A namespace whose `lo` is processed on CPU 1 (RPS), with a sink server pinned to CPU 1.
fn setup(test: &str) -> Option<(NetNs, common::Kill)> {
    if !common::can_netns(test) {
        return None;
    }
    if !std::path::Path::new(BACKLOG).exists()
        || std::thread::available_parallelism().map_or(1, |n| n.get()) < 2
    {
        common::skip(test, &format!("needs 2 CPUs and {BACKLOG}"));
        return None;
    }
    let ns = NetNs::new();
    let ok = ns
        .command("sh")
        .args(["-c", "echo 2 > /sys/class/net/lo/queues/rx-0/rps_cpus"])
        .status()
        .unwrap();
    assert!(ok.success(), "RPS steering in the namespace");
    let mut c = ns.tpslab();
    c.args([
        "serve",
        "udp",
        "--bind",
        "127.0.0.1:9500",
        "--mode",
        "sink",
        "--cpus",
        "1",
        "--batch",
        "64",
        "--rcvbuf",
        "16000000",
        "--duration",
        "60s",
    ])
    .stdout(Stdio::null());
    let srv = common::Kill(c.spawn().unwrap());
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(5) {
        let udp = Command::new("ip")
            .args(["netns", "exec", &ns.name, "cat", "/proc/net/udp"])
            .output()
            .unwrap();
        if String::from_utf8_lossy(&udp.stdout).contains("0100007F:251C") {
            return Some((ns, srv));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("server did not bind 127.0.0.1:9500");
}

fn diagnose_cmd(
    ns: &NetNs,
    srv_pid: u32,
    state: &std::path::Path,
    duration: &str,
    json: &std::path::Path,
) -> Command {
    // The generator on CPU 0, the server and lo's softirq on CPU 1.
    let mut c = ns.command("taskset");
    common::free_of_host_lock(&mut c);
    c.env("TPSLAB_STATE_DIR", state)
        .env("XDG_DATA_HOME", common::history_home())
        .args(["-c", "0", env!("CARGO_BIN_EXE_tpslab")]);
    c.args([
        "diagnose",
        "udp",
        "127.0.0.1:9500",
        "--pid",
        &srv_pid.to_string(),
        "--no-replies",
        "--burst",
        "1000",
        "--burst-interval",
        "50ms",
        "--size",
        "64",
        "--duration",
        duration,
        "--warmup",
        "0s",
        "--verify",
        "--json",
    ])
    .arg(json);
    c
}

#[test]
fn softnet_backlog_overflow_is_named_fixed_and_restored() {
    let _serial = common::serial();
    // Changes host-wide state or checks it unchanged: under the suite's host lock,
    // taken after serial(): another test may hold serial() while its tpslab waits for it.
    let _host = common::host_lock();
    let Some((ns, srv)) = setup("softnet_backlog_overflow_is_named_fixed_and_restored") else {
        return;
    };
    let _restore = BacklogGuard::set("16");
    let state = tmp("state-softnet");
    let out = tmp("softnet.json");
    // Backlog drops need the sender to outrun the receiving CPU: a run where a loaded
    // host provoked none, or where the fix helped but not 4x, is retried (reason
    // printed); drops that are not named, or a fix that does not help, fail at once.
    const TEST: &str = "softnet_backlog_overflow_is_named_fixed_and_restored";
    let mut provoked_once = false;
    let mut last = String::new();
    let mut found = None;
    for attempt in 1..=3 {
        let o = run(diagnose_cmd(&ns, srv.0.id(), &state, "1s", &out));
        assert!(o.status.success());
        let rec = record(&out);
        let b = row(&rec["before"]["ledger"]["request"], "softnet_drops");
        // Fewer than 100 backlog drops: no real overflow was provoked (a loaded host's
        // sender cannot outrun the receiving CPU): the machine, not tpslab.
        if b < 100 {
            last = format!(
                "only {b} backlog drops provoked: {}",
                rec["diagnosis"]["headline"]
            );
            eprintln!("{TEST}: attempt {attempt} of 3 spoiled by the machine: {last}");
            continue;
        }
        provoked_once = true;
        // Drops there and not named: a classifier bug, not the machine.
        assert_eq!(
            rec["diagnosis"]["case"], "softnet_backlog",
            "{}",
            rec["diagnosis"]["headline"]
        );
        let a = row(&rec["after"]["ledger"]["request"], "softnet_drops");
        assert!(
            a < b,
            "the fix did not help at all: {a} drops after vs {b} before"
        );
        if a >= b / 4 {
            last = format!("{a} backlog drops after the fix vs {b} before");
            eprintln!("{TEST}: attempt {attempt} of 3 spoiled by the machine: {last}");
            continue;
        }
        found = Some(rec);
        break;
    }
    let Some(rec) = found else {
        // Never provoked on this machine as loaded as it is: counted as skipped, not
        // passed; provoked but never fixed 4x: a failure.
        assert!(
            !provoked_once,
            "{TEST}: the fix never cut the drops 4x: {last}"
        );
        assert_eq!(backlog(), "16");
        common::skip(TEST, &format!("no backlog overflow could be provoked on this loaded machine in 3 attempts ({last})"));
        return;
    };
    // Restored after every attempt.
    assert_eq!(backlog(), "16");
    let d = &rec["diagnosis"];
    assert_eq!(d["case"], "softnet_backlog", "{}", d["headline"]);
    let before = &rec["before"]["ledger"]["request"];
    assert!(row(before, "softnet_drops") > 0);
    assert_eq!(before["unattributed"], 0);
    // The kernel counts backlog drops in lo's rx_dropped too: not charged twice.
    assert_eq!(row(before, "nic_drops"), 0);
    let lines = d["recommendations"][0]["lines"].to_string();
    assert!(
        lines.contains("sysctl -w net.core.netdev_max_backlog=2048"),
        "{lines}"
    );
    assert!(d["evidence"]
        .to_string()
        .contains("netdev_max_backlog = 16"));
    // Verified with the sysctl raised, then restored by tpslab itself.
    assert_eq!(
        rec["after"]["environment"]["sysctls"]["net.core.netdev_max_backlog"],
        "2048"
    );
    let after = &rec["after"]["ledger"]["request"];
    assert!(
        row(after, "softnet_drops") < row(before, "softnet_drops") / 4,
        "the fix must help"
    );
    assert_eq!(rec["restored"][0][1], "16");
    assert_eq!(
        backlog(),
        "16",
        "tpslab restores the host setting after the verification run"
    );
    assert!(!state.join("host-settings-journal.json").exists());
}

#[test]
fn host_setting_left_by_a_killed_run_is_restored_at_next_start() {
    let _serial = common::serial();
    // Changes host-wide state or checks it unchanged: under the suite's host lock,
    // taken after serial(): another test may hold serial() while its tpslab waits for it.
    let _host = common::host_lock();
    let Some((ns, srv)) = setup("host_setting_left_by_a_killed_run_is_restored_at_next_start")
    else {
        return;
    };
    let _restore = BacklogGuard::set("16");
    let state = tmp("state-kill");
    let journal = state.join("host-settings-journal.json");
    let mut c = diagnose_cmd(&ns, srv.0.id(), &state, "4s", &tmp("killed.json"));
    c.stdout(Stdio::null()).stderr(Stdio::null());
    let mut child = c.spawn().unwrap();
    // `ip netns exec` and taskset exec: the child's PID is tpslab's.
    let t = Instant::now();
    while !journal.exists() {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "the verification run never started"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "tpslab ended before the verification run"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    child.kill().unwrap(); // SIGKILL: no destructor, no signal handler runs
    child.wait().unwrap();
    assert_eq!(backlog(), "2048", "the killed run left its setting");
    // Any next start of tpslab restores it from the journal.
    let mut next = common::tpslab();
    next.env("TPSLAB_STATE_DIR", &state)
        .args(["watch", "--port", "1", "--duration", "10ms"]);
    let o = run(next);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("restored net.core.netdev_max_backlog=16"));
    assert_eq!(backlog(), "16");
    assert!(!journal.exists());
}
