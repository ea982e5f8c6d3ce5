//! `tpslab sweep` for real: a factor with a real effect is significant, a no-op is not,
//! host settings are restored after every run and after a SIGKILL, and --resume finishes
//! an interrupted sweep without rerunning finished runs.

mod common;
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
    let _restore = Restore(busy_read());
    let before = busy_read();
    let ns = NetNs::new();
    let out = tmp("sweep-effect");
    let json = tmp("sweep-effect.json");
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
        "--duration",
        "600ms",
        "--warmup",
        "200ms",
        "--seed",
        "42",
        "--out",
    ])
    .arg(&out)
    .arg("--json")
    .arg(&json);
    let o = run(c);
    assert!(o.status.success());
    let r = record(&json);
    let result = &r["result"];
    // OFAT: baseline + one cell per other level.
    assert_eq!(result["cells"].as_array().unwrap().len(), 5);
    for cell in result["cells"].as_array().unwrap() {
        assert_eq!(cell["figures"]["loss_pct"]["n"], 3, "{}", cell["cell"]);
    }
    let small = &effect(result, "rcvbuf=8192")["effects"]["loss_pct"];
    assert_eq!(small["significant"], true, "{small}");
    assert!(small["diff"].as_f64().unwrap() > 10.0);
    let noop = &effect(result, "net.core.busy_read=50")["effects"]["loss_pct"];
    assert_eq!(noop["significant"], false, "{noop}");
    assert_eq!(noop["diff"].as_f64(), Some(0.0));
    assert!(result["findings"]
        .to_string()
        .contains("not distinguishable from noise"));
    // The best cell for loss is never the tiny buffer.
    let best = result["best"].as_u64().unwrap() as usize;
    assert_ne!(result["cells"][best]["cell"]["settings"]["rcvbuf"], "8192");
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
