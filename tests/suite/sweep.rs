//! `tpslab sweep` for real: a factor with a real effect is significant, a no-op is not,
//! host settings are restored after every run and after a SIGKILL, and --resume finishes
//! an interrupted sweep without rerunning finished runs.

use crate::common;
use common::{record, run, tmp, NetNs};
use serde_json::Value;
use std::process::Stdio;
use std::time::{Duration, Instant};

const BUSY_READ: &str = "/proc/sys/net/core/busy_read";

fn busy_read() -> String {
    std::fs::read_to_string(BUSY_READ)
        .unwrap()
        .trim()
        .to_string()
}

/// Restores busy_read at the end of the test whatever happens.
struct Restore(String);
impl Drop for Restore {
    fn drop(&mut self) {
        let _ = std::fs::write(BUSY_READ, &self.0);
    }
}

fn effect<'a>(result: &'a Value, change: &str) -> &'a Value {
    result["effects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["change"] == change)
        .unwrap_or_else(|| panic!("no cell {change}: {}", result["effects"]))
}

#[test]
fn sweep_separates_a_real_effect_from_a_noop_and_restores_the_host() {
    if !common::can_netns("sweep_separates_a_real_effect_from_a_noop_and_restores_the_host") {
        return;
    }
    let _serial = common::serial();
    // Changes host-wide state or checks it unchanged: under the suite's host lock,
    // taken after serial(): another test may hold serial() while its tpslab waits for it.
    let _host = common::host_lock();
    let _restore = Restore(busy_read());
    let before = busy_read();
    let ns = NetNs::new();
    let out = tmp("sweep-effect");
    let json = tmp("sweep-effect.json");
    let csv = tmp("sweep-effect.csv");
    // A cell every run of which missed the generator's schedule (a busy host) has no
    // figures to compare: the sweep is run again, at most twice, then the test is counted
    // as spoiled by the machine.
    let test = "sweep_separates_a_real_effect_from_a_noop_and_restores_the_host";
    let Some(o) = common::retry(test, 2, || {
        let _ = std::fs::remove_dir_all(&out);
        let mut c = ns.tpslab();
        c.env("TPSLAB_STATE_DIR", tmp("state-sweep"));
        // Baseline: a buffer that holds the bursts (no loss). rcvbuf=8192 overflows on every
        // burst; busy_read only acts on NIC queues with busy polling, not on loopback.
        c.args([
            "sweep",
            "--factor",
            "rcvbuf=16000000,8192",
            "--factor",
            "net.core.busy_read=0,50",
            "--factor",
            "cpus=all,1",
            "--factor",
            "sched=other,fifo:10",
            "--repeat",
            "3",
            "--burst",
            "1000",
            "--burst-interval",
            "20ms",
            // 20 bursts a run (every one overflowing 8192 B): enough to tell the buffer's
            // effect from busy_read's none in 3 runs a cell.
            "--duration",
            "400ms",
            "--warmup",
            "100ms",
            "--seed",
            "42",
            "--out",
        ])
        .arg(&out)
        .arg("--json")
        .arg(&json)
        .arg("--csv")
        .arg(&csv);
        let o = run(c);
        assert!(o.status.success());
        let r = record(&json);
        for cell in r["result"]["cells"].as_array().unwrap() {
            if cell["figures"]["loss_pct"].is_null() {
                return Err(format!(
                    "every run of cell {} missed the generator's schedule",
                    cell["cell"]
                ));
            }
        }
        Ok(o)
    }) else {
        return;
    };
    common::assert_report_reproduces(&json, &o.stdout);
    // The CSV is the report layer's table of the record: one row per run.
    let table = std::fs::read_to_string(&csv).expect("--csv written");
    assert_eq!(table.lines().count(), 1 + 5 * 3, "{table}");
    assert!(table.starts_with("cell,rep,"));
    let mut r = common::tpslab();
    r.args(["report", "--format", "csv"]).arg(&json);
    let again = r.output().expect("tpslab report --format csv");
    assert_eq!(String::from_utf8_lossy(&again.stdout), table);
    let r = record(&json);
    assert_eq!(r["kind"], "sweep");
    let result = &r["result"];
    // OFAT: baseline + one cell per other level.
    assert_eq!(result["cells"].as_array().unwrap().len(), 5);
    // Every run is accounted for: in the cell's estimates, or reported as a run whose
    // generator missed its schedule (on 2 busy CPUs that happens) and left out of them.
    for cell in result["cells"].as_array().unwrap() {
        let n = cell["figures"]["loss_pct"]["n"].as_u64().unwrap();
        let invalid = cell["invalid_runs"].as_u64().unwrap();
        assert_eq!(n + invalid, 3, "{}", cell["cell"]);
        assert!(n >= 1, "{}", cell["cell"]);
    }
    let small = &effect(result, "rcvbuf=8192")["effects"]["loss_pct"];
    // Runs the generator spoiled (off its schedule on a busy host) are left out of the
    // estimates: with one valid run left in a cell the effect cannot be tested. Then the
    // machine, not the sweep, is at fault: the test says so and is counted as skipped.
    let invalid = |rcvbuf: &str, base: bool| {
        result["cells"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| (c["cell"]["id"] == 0) == base)
            .filter(|c| base || c["cell"]["settings"]["rcvbuf"] == rcvbuf)
            .map(|c| c["invalid_runs"].as_u64().unwrap_or(0))
            .sum::<u64>()
    };
    if small["significant"] != true && invalid("", true) + invalid("8192", false) > 0 {
        common::skip(
            "sweep_separates_a_real_effect_from_a_noop_and_restores_the_host",
            &format!("spoiled by the machine: runs off schedule left too few to test ({small})"),
        );
        assert_eq!(busy_read(), before);
        return;
    }
    assert_eq!(small["significant"], true, "{small}");
    assert!(small["diff"].as_f64().unwrap() > 10.0);
    // The kernel's own reason for the tiny buffer's losses, per cell (root reads them).
    let drops = |rcvbuf: &str| {
        result["cells"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["cell"]["settings"]["rcvbuf"] == rcvbuf && c["cell"]["id"] != 0)
            .and_then(|c| c["figures"]["drops:SOCKET_RCVBUFF"]["mean"].as_f64())
    };
    if tpslab_net::is_root() {
        let d = drops("8192").unwrap_or_else(|| panic!("{result}"));
        assert!(
            d > 1000.0,
            "SOCKET_RCVBUFF drops per run at rcvbuf=8192: {d}"
        );
    }
    let noop = &effect(result, "net.core.busy_read=50")["effects"]["loss_pct"];
    assert_eq!(noop["significant"], false, "{noop}");
    assert_eq!(noop["diff"].as_f64(), Some(0.0));
    assert!(result["findings"]
        .to_string()
        .contains("not distinguishable from noise"));
    // The best cell for loss is never the tiny buffer.
    // No best is named only when the baseline's evidence was spoiled by the machine (a
    // run off schedule), and then the findings say so.
    match result["best"].as_u64() {
        Some(best) => assert_ne!(
            result["cells"][best as usize]["cell"]["settings"]["rcvbuf"],
            "8192"
        ),
        None => {
            assert!(
                result["cells"][0]["invalid_runs"].as_u64().unwrap() > 0,
                "{result}"
            );
            assert!(
                result["findings"]
                    .to_string()
                    .contains("no best cell named"),
                "{result}"
            );
        }
    }
    // Every run's record is kept; the host setting is back.
    let records = std::fs::read_dir(&out)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("cell")
        })
        .count();
    assert_eq!(records, 15);
    assert_eq!(busy_read(), before);
    assert!(!tmp("state-sweep")
        .join("host-settings-journal.json")
        .exists());
}

#[test]
fn killed_sweep_restores_the_host_at_next_start_and_resumes() {
    if !common::can_netns("killed_sweep_restores_the_host_at_next_start_and_resumes") {
        return;
    }
    let _serial = common::serial();
    // Changes host-wide state or checks it unchanged: under the suite's host lock,
    // taken after serial(): another test may hold serial() while its tpslab waits for it.
    let _host = common::host_lock();
    let _restore = Restore(busy_read());
    let before = busy_read();
    let ns = NetNs::new();
    let out = tmp("sweep-kill");
    let state = tmp("state-sweep-kill");
    let _ = std::fs::remove_dir_all(&out);
    let args = |c: &mut std::process::Command| {
        c.env("TPSLAB_STATE_DIR", &state).args([
            "sweep",
            "--factor",
            "net.core.busy_read=50,60",
            "--repeat",
            "2",
            "--rate",
            "5000",
            "--duration",
            "1s",
            "--warmup",
            "100ms",
            "--rcvbuf",
            "4000000",
            "--out",
        ]);
        c.arg(&out);
    };
    let mut c = ns.tpslab();
    args(&mut c);
    c.stdout(Stdio::null()).stderr(Stdio::null());
    let mut child = c.spawn().unwrap();
    let journal = state.join("host-settings-journal.json");
    let t = Instant::now();
    while !journal.exists() {
        assert!(t.elapsed() < Duration::from_secs(20), "no run started");
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(300));
    child.kill().unwrap();
    child.wait().unwrap();
    let left = busy_read();
    assert!(
        left == "50" || left == "60",
        "the killed run left busy_read={left}"
    );
    // The next start of tpslab restores it; --resume then finishes the sweep.
    let mut c = ns.tpslab();
    c.env("TPSLAB_STATE_DIR", &state)
        .args(["sweep", "--resume", "--out"])
        .arg(&out);
    let o = run(c);
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("restored net.core.busy_read={before}")),
        "{err}"
    );
    assert_eq!(busy_read(), before);
    let records = |out: &std::path::Path| {
        std::fs::read_dir(out)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with("cell")
            })
            .count()
    };
    assert_eq!(records(&out), 4);
    // A second resume finds every run done: nothing is run again.
    let t = Instant::now();
    let mut c = ns.tpslab();
    c.env("TPSLAB_STATE_DIR", &state)
        .args(["sweep", "--resume", "--out"])
        .arg(&out);
    let o = run(c);
    assert!(o.status.success());
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "finished runs were rerun"
    );
    assert!(String::from_utf8_lossy(&o.stdout).contains("Effects against the baseline"));
    assert_eq!(busy_read(), before);
}

#[test]
fn plan_file_sweeps_a_users_server_and_sets_its_affinity_and_policy() {
    if !common::can_netns("plan_file_sweeps_a_users_server_and_sets_its_affinity_and_policy") {
        return;
    }
    if !common::need(
        "plan_file_sweeps_a_users_server_and_sets_its_affinity_and_policy",
        "/usr/sbin/dnsmasq",
    ) {
        return;
    }
    let _serial = common::serial();
    let ns = NetNs::new();
    let plan = tmp("plan.toml");
    std::fs::write(
        &plan,
        r#"design = "ofat"
repeat = 2
server_cmd = "/usr/sbin/dnsmasq --keep-in-foreground --conf-file=/dev/null --no-resolv --no-hosts --no-poll --pid-file= --user=root --group=root --listen-address=127.0.0.1 --bind-interfaces --port={port} --address=/tpslab.test/127.0.0.1"

[load]
rate = 2000
duration = "300ms"
warmup = "100ms"

[[factor]]
name = "cpus"
levels = ["all", "1"]

[[factor]]
name = "sched"
levels = ["other", "fifo:10"]
"#,
    )
    .unwrap();
    // A DNS query for tpslab.test; its id (the first two bytes) is echoed in the reply.
    let q = tmp("q.bin");
    std::fs::write(&q, common::dns_query("tpslab.test")).unwrap();
    let out = tmp("sweep-user");
    let _ = std::fs::remove_dir_all(&out);
    let mut c = ns.tpslab();
    c.args(["sweep", "--plan"])
        .arg(&plan)
        .arg("--payload-file")
        .arg(&q)
        .args(["--seq-field", "0:2", "--out"])
        .arg(&out);
    let o = run(c);
    assert!(o.status.success());
    let saved = record(&out.join("plan.json"));
    assert_eq!(
        saved["repeat"], 2,
        "the plan file's repeat is kept when --repeat is not given"
    );
    let mut seen = 0;
    for entry in std::fs::read_dir(&out).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if !name.starts_with("cell") {
            continue;
        }
        let rec = record(&path);
        let g = &rec["generator"];
        assert_eq!(
            g["replies_matched"], g["attempted"],
            "{name}: dnsmasq answered every query"
        );
        // The observer saw the user's server with the cell's affinity and policy.
        let sched = rec["observer"]["target_sched"].to_string();
        let expect = match &name[..6] {
            "cell00" => "other cpus 0-1",
            "cell01" => "other cpus 1",
            "cell02" => "fifo:10 cpus 0-1",
            _ => panic!("unexpected record {name}"),
        };
        assert!(sched.contains(expect), "{name}: {sched}");
        // The server was stopped after its run.
        let pid = sched.trim_start_matches("[\"").split(' ').next().unwrap();
        assert!(
            !std::path::Path::new(&format!("/proc/{pid}")).exists(),
            "{name}: dnsmasq {pid} still runs"
        );
        seen += 1;
    }
    assert_eq!(seen, 6);
}

/// A sysctl level the kernel refuses (rmem_max below its minimum) stops the sweep before
/// its first run with one line naming the factor and the level: no run, no plan to
/// --resume into the same failure, the host as it was.
#[test]
fn a_sysctl_level_the_kernel_refuses_stops_the_sweep_before_any_run() {
    if !common::can_netns("a_sysctl_level_the_kernel_refuses_stops_the_sweep_before_any_run") {
        return;
    }
    let _serial = common::serial();
    // Changes host-wide state or checks it unchanged: under the suite's host lock,
    // taken after serial(): another test may hold serial() while its tpslab waits for it.
    let _host = common::host_lock();
    const RMEM_MAX: &str = "/proc/sys/net/core/rmem_max";
    let before = std::fs::read_to_string(RMEM_MAX)
        .unwrap()
        .trim()
        .to_string();
    let ns = NetNs::new();
    let out = tmp("sweep-refused");
    let _ = std::fs::remove_dir_all(&out);
    let mut c = ns.tpslab();
    c.env("TPSLAB_STATE_DIR", tmp("state-sweep-refused"));
    // The baseline is the current value (writing it changes nothing); 1 is below the
    // kernel's minimum receive buffer: EINVAL, nothing written.
    c.args([
        "sweep",
        "--factor",
        &format!("net.core.rmem_max={before},1"),
        "--repeat",
        "1",
        "--rate",
        "1000",
        "--duration",
        "200ms",
        "--warmup",
        "100ms",
        "--seed",
        "1",
        "--out",
    ])
    .arg(&out);
    let o = run(c);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    assert!(
        err.contains("net.core.rmem_max") && err.contains("level \"1\""),
        "{err}"
    );
    assert!(
        o.stdout.is_empty(),
        "a run started: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert!(
        !out.join("plan.json").exists(),
        "a plan to resume was saved"
    );
    assert_eq!(
        std::fs::read_to_string(RMEM_MAX).unwrap().trim(),
        before,
        "host restored"
    );
}

/// `--server-cmd` as a shell command (cd, &&, a pipeline): each cell's cpus are those of
/// the process owning the socket (python3), not of the shell, and no process of the
/// command outlives the sweep.
#[test]
fn server_cmd_pipeline_cells_pin_the_server_not_the_shell() {
    let test = "server_cmd_pipeline_cells_pin_the_server_not_the_shell";
    if !common::can_netns(test) || !common::need(test, "/usr/bin/tee") {
        return;
    }
    let _serial = common::serial();
    let ns = NetNs::new();
    let dir = tmp("sweep-server-cmd");
    let out = tmp("sweep-server-cmd-out");
    let _ = std::fs::remove_dir_all(&out);
    let mut c = ns.tpslab();
    c.args(["sweep", "--server-cmd", &common::pipeline_cmd(&dir)])
        .args(["--factor", "cpus=all,1", "--repeat", "1", "--rate", "1000"])
        .args([
            "--duration",
            "300ms",
            "--warmup",
            "100ms",
            "--seed",
            "3",
            "--out",
        ])
        .arg(&out);
    let o = run(c);
    assert!(o.status.success());
    for (cell, cpus) in [
        ("cell00-rep0.json", "cpus 0-"),
        ("cell01-rep0.json", "cpus 1"),
    ] {
        let rec = record(&out.join(cell));
        let sched = rec["observer"]["target_sched"].to_string();
        assert!(
            sched.contains("python3") && sched.contains(cpus),
            "{cell}: {sched}"
        );
    }
    let left = common::live_with(dir.to_str().unwrap());
    assert!(left.is_empty(), "still running after the sweep: {left:?}");
}

/// A sweep folder another user owns or can write to is refused before its plan is read:
/// its plan.json names the command `--resume` runs as root.
#[test]
fn a_sweep_folder_others_can_write_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    if !common::root(
        "a_sweep_folder_others_can_write_is_refused",
        "chown of a folder to another user",
    ) {
        return;
    }
    let marker = tmp("sweep-foreign-ran");
    let _ = std::fs::remove_file(&marker);
    for (name, uid, mode) in [("owned", 65534, 0o755), ("writable", 0, 0o777)] {
        let out = tmp(&format!("sweep-foreign-{name}"));
        let _ = std::fs::remove_dir_all(&out);
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(
            out.join("plan.json"),
            format!("{{\"server_cmd\": \"touch {}\"}}", marker.display()),
        )
        .unwrap();
        std::os::unix::fs::chown(&out, Some(uid), Some(uid)).unwrap();
        std::fs::set_permissions(&out, std::fs::Permissions::from_mode(mode)).unwrap();
        let mut c = common::tpslab();
        c.args(["sweep", "--resume", "--no-history", "--out"])
            .arg(&out);
        let o = run(c);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{name}: {err}");
        assert!(
            err.starts_with("tpslab: error: --resume: ")
                && err.contains(&format!("--out {}: ", out.display()))
                && err.contains("allowed a folder of this user's"),
            "{name}: {err}"
        );
        // A new sweep into such an (empty) folder is refused as well, before anything runs.
        let fresh = tmp(&format!("sweep-foreign-{name}-new"));
        let _ = std::fs::remove_dir_all(&fresh);
        std::fs::create_dir_all(&fresh).unwrap();
        std::os::unix::fs::chown(&fresh, Some(uid), Some(uid)).unwrap();
        std::fs::set_permissions(&fresh, std::fs::Permissions::from_mode(mode)).unwrap();
        let mut c = common::tpslab();
        c.args([
            "sweep",
            "--factor",
            "rate=1000,2000",
            "--no-history",
            "--out",
        ])
        .arg(&fresh);
        let o = run(c);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{name}: {err}");
        assert!(
            err.contains("allowed a folder of this user's"),
            "{name}: {err}"
        );
        assert!(
            std::fs::read_dir(&fresh).unwrap().next().is_none(),
            "{name}: wrote into it"
        );
        assert!(!marker.exists());
    }
}
