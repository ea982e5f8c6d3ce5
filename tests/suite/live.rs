//! `--live` under a real terminal: tmux (its own server socket) runs `tpslab run udp --live`
//! in a namespace of the test's; the screen is read with `capture-pane`, keys are sent with
//! `send-keys`: `?` shows the help, `p` freezes the screen, `q` ends the run as Ctrl-C does
//! (exit 130, the record written whole and marked interrupted), and the terminal is given
//! back as it was (the alternate screen left, the tty's modes restored), the report printed,
//! no host setting left changed.

use crate::common;

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
    tpslab_plan::sysctl::SYSCTLS
        .iter()
        .map(|n| (n.to_string(), tpslab_engine::host::env::read_sysctl(n)))
        .collect()
}

/// A tmux server of the test's own (its socket named after the test and this process)
/// running one session `w` x `h` whose shell runs `script`; the server (and the shell it
/// runs) is ended when the test ends, however it ends.
struct Session {
    sock: String,
}

impl Session {
    /// Starts the session. None (the test skipped, said why) without tmux.
    fn start(test: &str, w: u16, h: u16, script: &str) -> Option<Session> {
        if Command::new("tmux").arg("-V").output().is_err() {
            common::skip(test, "tmux is not installed (.ci/run installs it)");
            return None;
        }
        let sock = format!("tpslab-{test}-{}", std::process::id());
        let (w, h) = (w.to_string(), h.to_string());
        tmux(
            &sock,
            &[
                "new-session",
                "-d",
                "-x",
                &w,
                "-y",
                &h,
                "-s",
                "live",
                script,
            ],
        );
        Some(Session { sock })
    }

    /// The screen now.
    fn screen(&self) -> String {
        tmux(&self.sock, &["capture-pane", "-p", "-t", "live"])
    }

    /// The screen now and the lines scrolled off it.
    fn history(&self) -> String {
        tmux(&self.sock, &["capture-pane", "-p", "-t", "live", "-S", "-"])
    }

    /// Types `key`.
    fn key(&self, key: &str) {
        tmux(&self.sock, &["send-keys", "-t", "live", key]);
    }

    /// Pastes `n` keys that ask for nothing (`x`) at once, as a paste into the terminal.
    fn paste(&self, n: usize) {
        tmux(
            &self.sock,
            &["send-keys", "-t", "live", "-l", &"x".repeat(n)],
        );
    }

    /// Whether the alternate screen is on.
    fn alternate(&self) -> bool {
        tmux(
            &self.sock,
            &["display", "-p", "-t", "live", "#{alternate_on}"],
        )
        .trim()
            == "1"
    }

    /// Types `q`: the command must end within `within` with exit 130 and say its record
    /// was written. Returns its stderr (the file `err`).
    fn quit_with_q(&self, rc: &Path, err: &Path, within: Duration) -> String {
        self.quit_with_q_exit(rc, err, within, "130")
    }

    /// [`Session::quit_with_q`] for a command whose Ctrl-C exits with `want`.
    fn quit_with_q_exit(&self, rc: &Path, err: &Path, within: Duration, want: &str) -> String {
        self.quit_with(&["q"], rc, err, within, want)
    }

    /// Types `keys` (each a `send-keys` argument, `-l` for a literal): the command must end
    /// within `within` with exit `want` and say its record was written.
    fn quit_with(
        &self,
        keys: &[&str],
        rc: &Path,
        err: &Path,
        within: Duration,
        want: &str,
    ) -> String {
        let t = Instant::now();
        let mut args = vec!["send-keys", "-t", "live"];
        args.extend_from_slice(keys);
        tmux(&self.sock, &args);
        let code = self.exit_code(rc, Duration::from_secs(10));
        assert!(t.elapsed() < within, "{:?} after q", t.elapsed());
        let stderr = std::fs::read_to_string(err).unwrap_or_default();
        assert_eq!(code, want, "exit code; stderr: {stderr}");
        assert!(stderr.contains("record written to"), "{stderr}");
        stderr
    }

    /// The exit code the script wrote to `rc`, waited for up to `limit`.
    fn exit_code(&self, rc: &Path, limit: Duration) -> String {
        wait_for(limit, || {
            std::fs::read_to_string(rc).ok().filter(|s| !s.is_empty())
        })
        .unwrap_or_else(|| panic!("the command did not end:\n{}", self.screen()))
        .trim()
        .to_string()
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        tmux(&self.sock, &["kill-server"]);
    }
}

/// A fresh folder for a test's files and tpslab's state (`state/`), and the paths of the
/// record, the stderr and the exit code files in it.
fn files(name: &str) -> (std::path::PathBuf, [std::path::PathBuf; 3]) {
    let dir = common::tmp(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("state")).unwrap();
    let f = [dir.join("rec.json"), dir.join("err"), dir.join("rc")];
    (dir, f)
}

/// A path quoted for the shell.
fn q(p: &Path) -> String {
    format!("'{}'", p.display())
}

#[test]
fn q_under_a_real_terminal_ends_the_run_like_ctrl_c() {
    // Changes host-wide state or checks it unchanged: under the suite's host lock.
    let _host = common::host_lock();
    const NAME: &str = "q_under_a_real_terminal_ends_the_run_like_ctrl_c";
    if !common::can_netns(NAME) {
        return;
    }
    let ns = NetNs::new();
    let (dir, [rec, err, rc]) = files("live-tmux");
    let state = dir.join("state");
    let (before_tty, after_tty) = (dir.join("tty.before"), dir.join("tty.after"));
    let script = format!(
        "stty -g > {bt}; env -u TPSLAB_HOST_LOCK TPSLAB_STATE_DIR={st} XDG_DATA_HOME={st} ip netns exec {ns} {bin} \
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
    let Some(tm) = Session::start(NAME, 160, 48, &script) else {
        return;
    };
    let screen = || tm.screen();

    // The view is up and samples come in: the rate chart names an offered rate.
    let first = wait_for(Duration::from_secs(8), || {
        let s = screen();
        let rate = s.split("offered ").nth(1)?.chars().next()?;
        (s.contains("tpslab run udp") && rate.is_ascii_digit() && elapsed(&s)? > 0.5).then_some(s)
    })
    .unwrap_or_else(|| panic!("no live view with samples:\n{}", screen()));
    assert!(first.contains("drops by layer"), "{first}");
    assert!(first.contains("rx_queue / SO_RCVBUF"), "{first}");
    assert!(tm.alternate(), "the view draws on the alternate screen");

    // `?` shows the help over the view, which says a second q quits at once.
    tm.key("?");
    wait_for(Duration::from_secs(3), || {
        screen()
            .contains("stop the run as Ctrl-C does")
            .then_some(())
    })
    .unwrap_or_else(|| panic!("no help after '?':\n{}", screen()));
    assert!(screen().contains("twice: quit at once"), "{}", screen());
    tm.key("?");

    // `p` freezes the screen: the elapsed time stands still while the run goes on.
    tm.key("p");
    let frozen = wait_for(Duration::from_secs(3), || {
        let s = screen();
        s.contains("PAUSED").then(|| elapsed(&s)).flatten()
    })
    .unwrap_or_else(|| panic!("not paused after 'p':\n{}", screen()));
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(elapsed(&screen()), Some(frozen), "{}", screen());
    tm.key("p");
    wait_for(Duration::from_secs(3), || {
        let s = screen();
        (!s.contains("PAUSED") && elapsed(&s)? > frozen).then_some(())
    })
    .unwrap_or_else(|| panic!("still frozen after 'p' again:\n{}", screen()));

    // `q` ends the run as Ctrl-C does, long before its 20 s, also right after a paste of
    // 3000 keys (crossterm's reader took 1 KiB of it per key typed: the q waited behind).
    tm.paste(3000);
    tm.quit_with_q(&rc, &err, Duration::from_secs(10));

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
    assert!(!tm.alternate());
    let history = tm.history();
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
        &["diagnose", "--no-verify"][..],
        &[
            "sweep",
            "--factor",
            "batch=1,8",
            "--out",
            "/nonexistent/tpslab-live",
        ][..],
        &["capacity", "udp", "127.0.0.1:9", "--budget", "10s"][..],
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
    let (dir, [rec, err, rc]) = files("live-ramp-tmux");
    // 7 steps of 0.2 + 0.5 s: 4.9 s planned.
    let script = format!(
        "env TPSLAB_STATE_DIR={st} XDG_DATA_HOME={st} {bin} ramp tcp --users 1..64 --step x2 \
         --step-duration 500ms --warmup 200ms --server-serial 2ms --no-history --live \
         --json {rec} 2> {err}; echo $? > {rc}; sleep 30",
        st = q(&dir.join("state")),
        bin = env!("CARGO_BIN_EXE_tpslab"),
        rec = q(&rec),
        err = q(&err),
        rc = q(&rc),
    );
    let Some(tm) = Session::start("q_ends_a_live_ramp_like_ctrl_c", 80, 24, &script) else {
        return;
    };
    let screen = || tm.screen();

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
    assert!(tm.alternate(), "the view draws on the alternate screen");

    // `q` mid-run, typed with an Escape before it in one write (Alt-q, or Esc and q
    // together: the q was once swallowed as part of ESC q): the ramp ends long before
    // its 4.9 s.
    tm.quit_with(&["-l", "\u{1b}q"], &rc, &err, Duration::from_secs(4), "130");

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
    assert!(!tm.alternate());
    let history = tm.history();
    assert!(history.contains("knee"), "{history}");
}

/// `capacity udp --live` under tmux against tpslab's server in a namespace of the test's:
/// the view shows the steps judged so far and the bracket above the step running now;
/// `q` mid-search ends it as Ctrl-C does: exit 130, the record written whole (its steps
/// judged before `q`) and marked interrupted, the terminal given back, no host setting
/// left changed.
#[test]
fn q_ends_a_live_capacity_search_like_ctrl_c() {
    // Changes host-wide state or checks it unchanged: under the suite's host lock.
    let _host = common::host_lock();
    const NAME: &str = "q_ends_a_live_capacity_search_like_ctrl_c";
    if !common::can_netns(NAME) {
        return;
    }
    let ns = NetNs::new();
    let (dir, [rec, err, rc]) = files("live-capacity-tmux");
    // Steps of 0.2 + 0.6 s from 2k pps doubling up to 64k: q comes at the third.
    let script = format!(
        "ip netns exec {ns} sh -c '{bin} serve udp --bind 127.0.0.1:9000 --duration 60s \
         >/dev/null 2>&1 & srv=$!; sleep 0.3; env -u TPSLAB_HOST_LOCK TPSLAB_STATE_DIR={st} XDG_DATA_HOME={st} \
         {bin} capacity udp 127.0.0.1:9000 --start-rate 2k --max-rate 64k \
         --step-duration 600ms --warmup 200ms --drain 100ms --interval 50ms --no-history \
         --live --json {rec} 2> {err}; echo $? > {rc}; kill $srv'; sleep 30",
        st = dir.join("state").display(),
        ns = ns.name,
        bin = env!("CARGO_BIN_EXE_tpslab"),
        rec = rec.display(),
        err = err.display(),
        rc = rc.display(),
    );
    let sysctls_before = sysctls();
    let Some(tm) = Session::start(NAME, 80, 24, &script) else {
        return;
    };
    let screen = || tm.screen();

    // Two steps judged, the third running. On a quiet host they are 2k and 4k pps,
    // both within the objective; on a busy one a step whose generator fell behind is
    // INVALID and repeated at its rate (2k, 2k, then 4k): the view and `q` are what this
    // test is about, so either is taken.
    let s = wait_for(Duration::from_secs(15), || {
        let s = screen();
        s.contains("now capacity step 3").then_some(s)
    })
    .unwrap_or_else(|| panic!("no live search at step 3:\n{}", screen()));
    assert!(s.contains("tpslab capacity udp"), "{s}");
    let first_invalid = s
        .lines()
        .any(|l| l.contains("step 1 ") && l.contains("INVALID"));
    let step = |n: u32, rate: &str, call: &str| {
        s.lines()
            .any(|l| l.contains(&format!("step {n} ")) && l.contains(rate) && l.contains(call))
    };
    if first_invalid {
        assert!(step(2, "2.00k", ""), "{s}");
        assert!(s.contains("bracket so far: sustains"), "{s}");
    } else {
        assert!(s.contains("bracket so far: sustains 4.00k pps"), "{s}");
        assert!(step(1, "2.00k", "pass") && step(2, "4.00k", "pass"), "{s}");
    }
    assert!(s.contains("drops by layer"), "{s}");
    assert!(tm.alternate(), "the view draws on the alternate screen");

    let stderr = tm.quit_with_q(&rc, &err, Duration::from_secs(5));
    // The steps' lines were held while the view had the screen, said after it.
    assert!(
        stderr.contains(if first_invalid {
            "capacity step 1: 2,000 pps: INVALID"
        } else {
            "capacity step 1: 2,000 pps: pass"
        }),
        "{stderr}"
    );

    // The record: interrupted, the steps judged before q whole, the step cut short not
    // counted.
    let r = common::record(&rec);
    assert_eq!(r["kind"], "capacity");
    assert_eq!(r["interrupted"], true, "{r}");
    let steps = r["steps"].as_array().unwrap();
    assert!(steps.len() >= 2, "{} steps", steps.len());
    assert_eq!(steps[0]["rate_pps"], 2000.0);
    assert_eq!(
        steps[0]["status"],
        if first_invalid { "invalid" } else { "pass" }
    );
    let report = common::tpslab().arg("report").arg(&rec).output().unwrap();
    assert!(report.status.success(), "{report:?}");

    // The terminal given back, the report on the normal screen; the host as it was.
    assert!(!tm.alternate());
    let history = tm.history();
    assert!(history.contains("interrupted"), "{history}");
    assert_eq!(sysctls(), sysctls_before);
    assert!(!dir.join("state/host-settings-journal.json").exists());
}

/// The terminal hung up mid-run (its tmux server killed, as when an ssh session drops):
/// `run udp --live` must stop as on a signal within seconds, not outlive its terminal
/// at full load. The pane's shell ignores SIGHUP and so does not pass one on: tpslab
/// learns of the hangup from its terminal alone. Exit 130, the record written whole and
/// marked interrupted, no host setting left changed.
#[test]
fn a_hung_up_terminal_ends_a_live_run() {
    // Changes host-wide state or checks it unchanged: under the suite's host lock.
    let _host = common::host_lock();
    const NAME: &str = "a_hung_up_terminal_ends_a_live_run";
    if !common::can_netns(NAME) {
        return;
    }
    let ns = NetNs::new();
    let (dir, [rec, err, rc]) = files("live-hangup-tmux");
    let state = dir.join("state");
    let pid = dir.join("pid");
    let script = format!(
        "trap '' HUP; sh -c 'echo $$ > {pid}; exec env -u TPSLAB_HOST_LOCK TPSLAB_STATE_DIR={st} \
         XDG_DATA_HOME={st} ip netns exec {ns} {bin} run udp --rate 5000 --duration 20s \
         --interval 50ms --no-history --live --json {rec}' 2> {err}; echo $? > {rc}",
        pid = pid.display(),
        st = state.display(),
        ns = ns.name,
        bin = env!("CARGO_BIN_EXE_tpslab"),
        rec = rec.display(),
        err = err.display(),
        rc = rc.display(),
    );
    let sysctls_before = sysctls();
    let Some(tm) = Session::start(NAME, 80, 24, &script) else {
        return;
    };
    wait_for(Duration::from_secs(8), || {
        let s = tm.screen();
        (s.contains("tpslab run udp") && elapsed(&s)? > 0.5).then_some(())
    })
    .unwrap_or_else(|| panic!("no live view with samples:\n{}", tm.screen()));
    let tpslab: u32 = std::fs::read_to_string(&pid)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let server = tmux(&tm.sock, &["display", "-p", "#{pid}"]);
    let server = server.trim();
    assert!(server.parse::<u32>().is_ok(), "tmux server pid {server:?}");

    // The tmux server (this test's own, on its own socket) killed: the pane's terminal
    // hangs up under the view.
    let t = Instant::now();
    let killed = Command::new("kill")
        .args(["-KILL", server])
        .status()
        .unwrap();
    assert!(killed.success());
    let gone = wait_for(Duration::from_secs(6), || {
        (!Path::new(&format!("/proc/{tpslab}")).exists()).then_some(())
    });
    if gone.is_none() {
        // Not left running at full load past the test, whatever the outcome.
        let _ = Command::new("kill")
            .args(["-KILL", &tpslab.to_string()])
            .status();
        panic!(
            "tpslab still running {:?} after its terminal hung up",
            t.elapsed()
        );
    }
    let code = wait_for(Duration::from_secs(3), || {
        std::fs::read_to_string(&rc).ok().filter(|s| !s.is_empty())
    })
    .expect("the exit code");
    let stderr = std::fs::read_to_string(&err).unwrap_or_default();
    assert_eq!(code.trim(), "130", "exit code; stderr: {stderr}");
    assert!(stderr.contains("record written to"), "{stderr}");

    let r = common::record(&rec);
    assert_eq!(r["kind"], "udp_run");
    assert_eq!(r["interrupted"], true, "{r}");
    let report = common::tpslab().arg("report").arg(&rec).output().unwrap();
    assert!(report.status.success(), "{report:?}");

    assert_eq!(sysctls(), sysctls_before);
    assert!(!state.join("host-settings-journal.json").exists());
}

/// `load http --live` under tmux against `serve http` started by the same shell: the view
/// shows intended vs achieved requests/s and the connections; `q` mid-run ends the run as
/// Ctrl-C does (exit 130 as every command, docs/ci.md), the record
/// written whole and marked interrupted, the terminal given back, the report printed.
#[test]
fn q_ends_a_live_load_http_like_ctrl_c() {
    let (dir, [rec, err, rc]) = files("live-load-http-tmux");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let script = format!(
        "{bin} serve http --bind 127.0.0.1:{port} --duration 40s --no-history -q > /dev/null \
         2>&1 & S=$!; sleep 0.5; env TPSLAB_STATE_DIR={st} XDG_DATA_HOME={st} {bin} load http \
         http://127.0.0.1:{port}/ --rate 400 --connections 8 --duration 20s --no-history \
         --live --json {rec} 2> {err}; echo $? > {rc}; kill $S; sleep 30",
        st = q(&dir.join("state")),
        bin = env!("CARGO_BIN_EXE_tpslab"),
        rec = q(&rec),
        err = q(&err),
        rc = q(&rc),
    );
    let Some(tm) = Session::start("q_ends_a_live_load_http_like_ctrl_c", 80, 24, &script) else {
        return;
    };
    let screen = || tm.screen();

    // The view is up and intervals come in: the achieved rate is named, 8 connections open.
    let s = wait_for(Duration::from_secs(10), || {
        let s = screen();
        (s.contains("tpslab load http")
            && s.contains("intended 400")
            && s.contains("connections open  8")
            && elapsed(&s)? > 1.0)
            .then_some(s)
    })
    .unwrap_or_else(|| panic!("no live load http with samples:\n{}", screen()));
    assert!(s.contains("achieved "), "{s}");
    // Replies by status code, as oha shows them (the classes before codes were kept).
    assert!(s.lines().any(|l| l.contains("│200 ")), "{s}");
    assert!(tm.alternate(), "the view draws on the alternate screen");

    // Two keys in one write (a paste of `p?`): both taken at once, the second not left
    // waiting for a next byte.
    tm.key("p?");
    wait_for(Duration::from_secs(2), || {
        let s = screen();
        (s.contains("PAUSED") && s.contains("stop the run as Ctrl-C does")).then_some(())
    })
    .unwrap_or_else(|| panic!("not paused with the help after 'p?':\n{}", screen()));
    tm.key("p?");
    wait_for(Duration::from_secs(2), || {
        let s = screen();
        (!s.contains("PAUSED") && !s.contains("stop the run as Ctrl-C does")).then_some(())
    })
    .unwrap_or_else(|| panic!("still paused after 'p?' again:\n{}", screen()));

    // `q` mid-run: the run ends long before its 20 s.
    let stderr = tm.quit_with_q_exit(&rc, &err, Duration::from_secs(6), "130");
    assert!(!stderr.contains("panicked"), "{stderr}");

    // The record: whole, interrupted, requests answered.
    let r = common::record(&rec);
    assert_eq!(r["kind"], "load_http");
    assert_eq!(r["meta"]["interrupted"], true, "{r}");
    let res = &r["result"];
    assert!(res["status"]["s2xx"].as_u64().unwrap() > 100, "{res}");
    assert!(
        res["sent"].as_u64().unwrap() < 400 * 15,
        "stopped early: {res}"
    );
    let report = common::tpslab().arg("report").arg(&rec).output().unwrap();
    assert!(report.status.success(), "{report:?}");

    // The terminal is given back, the report printed on the normal screen.
    assert!(!tm.alternate());
    let history = tm.history();
    assert!(
        history.contains("INTERRUPTED: the last request went"),
        "{history}"
    );
    assert!(history.contains("Status: 2xx"), "{history}");
}

/// `load http --live` under tmux against tests/servers/status_mix.py (replies of 200, 404
/// and 503, a slow tail every 40th request): the view shows a row per status code with its
/// interval's and total counts, the progress gauge under the status line (the share, the
/// seconds of the planned 20, the requests done of the 8,000 planned) and the latency
/// histogram; the `--json-stream` lines written beside carry the codes and the histogram
/// (each line's bins hold its replies); `q` ends the run.
#[test]
fn live_load_http_shows_status_codes_the_gauge_and_the_histogram() {
    const T: &str = "live_load_http_shows_status_codes_the_gauge_and_the_histogram";
    if !common::need(T, "/usr/bin/python3") {
        return;
    }
    let (dir, [rec, err, rc]) = files("live-load-http-codes");
    let stream = dir.join("stream.ndjson");
    let server = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/servers/status_mix.py");
    let port = common::free_port();
    let script = format!(
        "python3 {srv} {port} > /dev/null 2>&1 & S=$!; sleep 0.7; env TPSLAB_STATE_DIR={st} \
         XDG_DATA_HOME={st} {bin} load http http://127.0.0.1:{port}/ --rate 400 --connections 8 \
         --duration 20s --no-history --live --json-stream {stream} --json {rec} 2> {err}; \
         echo $? > {rc}; kill $S; sleep 30",
        srv = q(&server),
        st = q(&dir.join("state")),
        bin = env!("CARGO_BIN_EXE_tpslab"),
        stream = q(&stream),
        rec = q(&rec),
        err = q(&err),
        rc = q(&rc),
    );
    let Some(tm) = Session::start(T, 80, 24, &script) else {
        return;
    };
    // Over a second in: every code has come (a 404 every 10 requests, a 503 every 25).
    let s = wait_for(Duration::from_secs(12), || {
        let s = tm.screen();
        (["│200 ", "│404 ", "│503 "].iter().all(|c| s.contains(c)) && elapsed(&s)? > 1.5)
            .then_some(s)
    })
    .unwrap_or_else(|| panic!("no row per status code:\n{}", tm.screen()));
    // A code's row: its interval's count, then its total (`200   330   1.42k`).
    let row = s.lines().find(|l| l.contains("│200 ")).unwrap();
    let cells: Vec<&str> = row
        .split("│200 ")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .collect();
    assert!(cells.len() >= 2, "{row}");
    // The gauge: the line under the status line.
    let gauge = s.lines().nth(1).unwrap();
    assert!(
        gauge.contains(" % ")
            && gauge.contains(" s of 20.0 s, ")
            && gauge.contains(" of 8.00k requests done"),
        "{gauge}"
    );
    assert!(s.contains("latency histogram: "), "{s}");
    assert!(s.contains('≤'), "the histogram's rows:\n{s}");

    let stderr = tm.quit_with_q_exit(&rc, &err, Duration::from_secs(6), "130");
    assert!(!stderr.contains("panicked"), "{stderr}");
    // The lines of --json-stream: codes and histogram in each, adding up.
    let lines = std::fs::read_to_string(&stream).unwrap();
    let mut replies = 0;
    for l in lines.lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        let codes: u64 = v["codes"]["codes"]
            .as_array()
            .unwrap_or_else(|| panic!("no codes: {l}"))
            .iter()
            .map(|c| c["count"].as_u64().unwrap())
            .sum();
        let st = &v["status"];
        let classes: u64 = ["s2xx", "s3xx", "s4xx", "s5xx", "other"]
            .iter()
            .map(|k| st[k].as_u64().unwrap())
            .sum();
        assert_eq!(codes, classes, "{l}");
        let binned: u64 = v["histogram"]
            .as_array()
            .unwrap_or_else(|| panic!("no histogram: {l}"))
            .iter()
            .map(|b| b["count"].as_u64().unwrap())
            .sum();
        let read = v["latency"]["replies"].as_u64().unwrap_or(0);
        assert_eq!(binned, read, "{l}");
        replies += read;
    }
    assert!(replies > 400, "{replies} replies in the stream");
    let r = common::record(&rec);
    let codes = &r["result"]["codes"]["codes"];
    assert_eq!(codes[0]["code"], 200, "{codes}");
    assert_eq!(codes[1]["code"], 404, "{codes}");
    assert_eq!(codes[2]["code"], 503, "{codes}");
    assert!(
        tm.history().contains("Status codes: 200 "),
        "{}",
        tm.history()
    );
}
