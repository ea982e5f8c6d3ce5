//! `--live` under a real terminal: tmux (its own server socket) runs `tpslab run udp --live`
//! in a namespace of the test's; the screen is read with `capture-pane`, keys are sent with
//! `send-keys`: `?` shows the help, `p` freezes the screen, `q` ends the run as Ctrl-C does
//! (exit 130, the record written whole and marked interrupted), and the terminal is given
//! back as it was (the alternate screen left, the tty's modes restored), the report printed,
//! no host setting left changed.

mod common;

use common::NetNs;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// tmux on a server socket of this test's own (never the user's server).
fn tmux(sock: &str, args: &[&str]) -> String {
    let out = Command::new("tmux")
        .args(["-L", sock])
        .args(args)
        .output()
        .expect("run tmux");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Polls `f` every 100 ms until it returns Some, up to `limit`.
fn wait_for<T>(limit: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let t0 = Instant::now();
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if t0.elapsed() > limit {
            return None;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The status line's elapsed seconds (`3.4 s / 20.5 s`).
fn elapsed(screen: &str) -> Option<f64> {
    let first = screen.lines().next()?;
    let i = first.find(" s / ")?;
    first[..i].rsplit(' ').next()?.parse().ok()
}

/// Every sysctl tpslab may change, with its value now.
fn sysctls() -> Vec<(String, Option<String>)> {
    tpslab_engine::env::SYSCTLS
        .iter()
        .map(|n| (n.to_string(), tpslab_engine::env::read_sysctl(n)))
        .collect()
}

/// Ends our tmux server (and the shell it runs) when the test ends, however it ends.
struct Server(String);

impl Drop for Server {
    fn drop(&mut self) {
        tmux(&self.0, &["kill-server"]);
    }
}

#[test]
fn q_under_a_real_terminal_ends_the_run_like_ctrl_c() {
    const NAME: &str = "q_under_a_real_terminal_ends_the_run_like_ctrl_c";
    if Command::new("tmux").arg("-V").output().is_err() {
        common::skip(NAME, "tmux is not installed (.ci/run installs it)");
        return;
    }
    if !common::can_netns(NAME) {
        return;
    }
    let ns = NetNs::new();
    let dir = common::tmp("live-tmux");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let state = dir.join("state");
    std::fs::create_dir_all(&state).unwrap();
    let (rec, err, rc) = (dir.join("rec.json"), dir.join("err"), dir.join("rc"));
    let (before_tty, after_tty) = (dir.join("tty.before"), dir.join("tty.after"));
    let q = |p: &Path| format!("'{}'", p.display());
    let script = format!(
        "stty -g > {bt}; env TPSLAB_STATE_DIR={st} XDG_DATA_HOME={st} ip netns exec {ns} {bin} \
         run udp --rate 5000 --duration 20s --interval 50ms --no-history --live --json {rec} \
         2> {err}; echo $? > {rc}; stty -g > {at}; sleep 30",
        bt = q(&before_tty),
        st = q(&state),
        ns = ns.name,
        bin = env!("CARGO_BIN_EXE_tpslab"),
        rec = q(&rec),
        err = q(&err),
        rc = q(&rc),
        at = q(&after_tty),
    );
    let sysctls_before = sysctls();
    let sock = format!("tpslab-live-test-{}", std::process::id());
    let _server = Server(sock.clone());
    tmux(
        &sock,
        &[
            "new-session",
            "-d",
            "-x",
            "160",
            "-y",
            "48",
            "-s",
            "live",
            &script,
        ],
    );
    let screen = || tmux(&sock, &["capture-pane", "-p", "-t", "live"]);

    // The view is up and samples come in: the rate chart names an offered rate.
    let first = wait_for(Duration::from_secs(8), || {
        let s = screen();
        let rate = s.split("offered ").nth(1)?.chars().next()?;
        (s.contains("tpslab run udp") && rate.is_ascii_digit() && elapsed(&s)? > 0.5).then_some(s)
    })
    .unwrap_or_else(|| panic!("no live view with samples:\n{}", screen()));
    assert!(first.contains("drops by layer"), "{first}");
    assert!(first.contains("rx_queue / SO_RCVBUF"), "{first}");
    assert_eq!(
        tmux(&sock, &["display", "-p", "-t", "live", "#{alternate_on}"]).trim(),
        "1",
        "the view draws on the alternate screen"
    );

    // `?` shows the help over the view.
    tmux(&sock, &["send-keys", "-t", "live", "?"]);
    wait_for(Duration::from_secs(3), || {
        screen()
            .contains("stop the run as Ctrl-C does")
            .then_some(())
    })
    .unwrap_or_else(|| panic!("no help after '?':\n{}", screen()));
    tmux(&sock, &["send-keys", "-t", "live", "?"]);

    // `p` freezes the screen: the elapsed time stands still while the run goes on.
    tmux(&sock, &["send-keys", "-t", "live", "p"]);
    let frozen = wait_for(Duration::from_secs(3), || {
        let s = screen();
        s.contains("PAUSED").then(|| elapsed(&s)).flatten()
    })
    .unwrap_or_else(|| panic!("not paused after 'p':\n{}", screen()));
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(elapsed(&screen()), Some(frozen), "{}", screen());
    tmux(&sock, &["send-keys", "-t", "live", "p"]);
    wait_for(Duration::from_secs(3), || {
        let s = screen();
        (!s.contains("PAUSED") && elapsed(&s)? > frozen).then_some(())
    })
    .unwrap_or_else(|| panic!("still frozen after 'p' again:\n{}", screen()));

    // `q` ends the run as Ctrl-C does, long before its 20 s.
    let t = Instant::now();
    tmux(&sock, &["send-keys", "-t", "live", "q"]);
    let code = wait_for(Duration::from_secs(10), || {
        std::fs::read_to_string(&rc).ok().filter(|s| !s.is_empty())
    })
    .unwrap_or_else(|| panic!("the run did not end after 'q':\n{}", screen()));
    assert!(t.elapsed() < Duration::from_secs(10));
    let stderr = std::fs::read_to_string(&err).unwrap_or_default();
    assert_eq!(code.trim(), "130", "exit code; stderr: {stderr}");
    assert!(stderr.contains("record written to"), "{stderr}");

    // The record is whole (it reads back as a record, `report` renders it) and interrupted.
    let r = common::record(&rec);
    assert_eq!(r["interrupted"], true, "{r}");
    assert_eq!(r["kind"], "udp_run");
    let report = common::tpslab().arg("report").arg(&rec).output().unwrap();
    assert!(report.status.success(), "{report:?}");
    let report = String::from_utf8_lossy(&report.stdout).into_owned();
    assert!(
        report.contains("Ledger: where every datagram went"),
        "{report}"
    );

    // The terminal is given back: the alternate screen left, the tty's modes as they were,
    // the report on the normal screen.
    let modes = wait_for(Duration::from_secs(3), || {
        std::fs::read_to_string(&after_tty)
            .ok()
            .filter(|s| !s.is_empty())
    })
    .expect("stty after the run");
    assert_eq!(modes, std::fs::read_to_string(&before_tty).unwrap());
    assert_eq!(
        tmux(&sock, &["display", "-p", "-t", "live", "#{alternate_on}"]).trim(),
        "0"
    );
    let history = tmux(&sock, &["capture-pane", "-p", "-t", "live", "-S", "-"]);
    assert!(
        history.contains("Ledger: where every datagram went"),
        "{history}"
    );
    assert!(history.contains("run interrupted"), "{history}");

    // No host setting left changed, no journal of one left behind.
    assert_eq!(sysctls(), sysctls_before);
    assert!(!state.join("host-settings-journal.json").exists());
}

#[test]
fn live_without_a_terminal_is_one_line_and_exit_2() {
    for args in [
        &["run", "udp", "--rate", "1000", "--duration", "1s"][..],
        &[
            "load",
            "udp",
            "127.0.0.1:9",
            "--rate",
            "1000",
            "--duration",
            "1s",
        ][..],
        &["watch", "--port", "9", "--duration", "1s"][..],
        &["ramp", "tcp", "--users", "1..2", "--step-duration", "100ms"][..],
    ] {
        let out = common::tpslab()
            .args(args)
            .args(["--no-history", "--live"])
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.contains("--live: standard output is not a terminal"),
            "{args:?}: {err}"
        );
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

/// `ramp tcp --live` against its built-in server under tmux: the view follows the steps
/// (step k of n), `q` mid-run ends the ramp as Ctrl-C does: exit 130, the record written
/// with the steps measured whole and marked interrupted, the terminal given back.
#[test]
fn q_ends_a_live_ramp_like_ctrl_c() {
    const NAME: &str = "q_ends_a_live_ramp_like_ctrl_c";
    if Command::new("tmux").arg("-V").output().is_err() {
        common::skip(NAME, "tmux is not installed (.ci/run installs it)");
        return;
    }
    let dir = common::tmp("live-ramp-tmux");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let state = dir.join("state");
    std::fs::create_dir_all(&state).unwrap();
    let (rec, err, rc) = (dir.join("rec.json"), dir.join("err"), dir.join("rc"));
    let q = |p: &Path| format!("'{}'", p.display());
    // 7 steps of 0.2 + 0.5 s: 4.9 s planned.
    let script = format!(
        "env TPSLAB_STATE_DIR={st} XDG_DATA_HOME={st} {bin} ramp tcp --users 1..64 --step x2 \
         --step-duration 500ms --warmup 200ms --server-serial 2ms --no-history --live \
         --json {rec} 2> {err}; echo $? > {rc}; sleep 30",
        st = q(&state),
        bin = env!("CARGO_BIN_EXE_tpslab"),
        rec = q(&rec),
        err = q(&err),
        rc = q(&rc),
    );
    let sock = format!("tpslab-live-ramp-test-{}", std::process::id());
    let _server = Server(sock.clone());
    tmux(
        &sock,
        &[
            "new-session",
            "-d",
            "-x",
            "80",
            "-y",
            "24",
            "-s",
            "ramp",
            &script,
        ],
    );
    let screen = || tmux(&sock, &["capture-pane", "-p", "-t", "ramp"]);

    // The view follows the steps: at step 3, the first two are measured and drawn.
    let s = wait_for(Duration::from_secs(10), || {
        let s = screen();
        s.contains("step 3 of 7: 4 users").then_some(s)
    })
    .unwrap_or_else(|| panic!("no live ramp at step 3:\n{}", screen()));
    assert!(s.contains("tpslab ramp tcp"), "{s}");
    assert!(s.contains("(tpslab's server)"), "{s}");
    assert!(s.contains("TPS by users"), "{s}");
    assert!(s.contains("     2 users █"), "step 2's bar: {s}");
    assert_eq!(
        tmux(&sock, &["display", "-p", "-t", "ramp", "#{alternate_on}"]).trim(),
        "1",
        "the view draws on the alternate screen"
    );

    // `q` mid-run: the ramp ends long before its 4.9 s.
    let t = Instant::now();
    tmux(&sock, &["send-keys", "-t", "ramp", "q"]);
    let code = wait_for(Duration::from_secs(10), || {
        std::fs::read_to_string(&rc).ok().filter(|s| !s.is_empty())
    })
    .unwrap_or_else(|| panic!("the ramp did not end after 'q':\n{}", screen()));
    assert!(t.elapsed() < Duration::from_secs(4));
    let stderr = std::fs::read_to_string(&err).unwrap_or_default();
    assert_eq!(code.trim(), "130", "exit code; stderr: {stderr}");
    assert!(stderr.contains("record written to"), "{stderr}");

    // The record: interrupted, with the steps measured before `q`, each one whole.
    let r = common::record(&rec);
    assert_eq!(r["kind"], "ramp");
    assert_eq!(r["interrupted"], true, "{r}");
    let steps = r["steps"].as_array().unwrap();
    assert!((2..7).contains(&steps.len()), "{} steps", steps.len());
    for (i, st) in steps.iter().enumerate() {
        assert_eq!(st["users"], 1u64 << i);
        assert_eq!(st["measured_s"], 0.5);
        assert!(st["completed"].as_u64().unwrap() > 0, "{st}");
    }
    let report = common::tpslab().arg("report").arg(&rec).output().unwrap();
    assert!(report.status.success(), "{report:?}");

    // The terminal is given back, the report printed on the normal screen.
    assert_eq!(
        tmux(&sock, &["display", "-p", "-t", "ramp", "#{alternate_on}"]).trim(),
        "0"
    );
    let history = tmux(&sock, &["capture-pane", "-p", "-t", "ramp", "-S", "-"]);
    assert!(history.contains("knee"), "{history}");
}
