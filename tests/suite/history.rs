//! The run history: runs finishing at once all land, a killed run leaves it intact, an
//! interrupted one is recorded as such, `history show` renders a run again, `compare`
//! takes history ids, and a database that is not ours (or is newer) is named and never
//! touched.

use crate::common;

use common::NetNs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// tpslab with its history in `home` (XDG_DATA_HOME).
fn tpslab(ns: &NetNs, home: &Path, args: &[&str]) -> Command {
    let mut c = ns.tpslab();
    c.env("XDG_DATA_HOME", home).args(args);
    c
}

fn run(c: Command) -> Output {
    common::run(c)
}

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

const SHORT_RUN: &[&str] = &[
    "run",
    "udp",
    "--rate",
    "5000",
    "--duration",
    "300ms",
    "--warmup",
    "100ms",
];

fn db(home: &Path) -> PathBuf {
    home.join("tpslab/history.sqlite")
}

#[test]
fn runs_finishing_at_once_all_land_and_show_again() {
    if !common::can_netns("runs_finishing_at_once_all_land_and_show_again") {
        return;
    }
    let ns = NetNs::new();
    let home = common::tmp("history-concurrent");
    // Four runs at once, finishing within milliseconds of each other.
    let children: Vec<_> = (0..4)
        .map(|i| {
            let bind = format!("127.0.0.1:{}", 9100 + i);
            let mut c = tpslab(&ns, &home, SHORT_RUN);
            c.args(["--bind", &bind]);
            c.stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn")
        })
        .collect();
    for c in children {
        let o = c.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{err}");
        assert!(!err.contains("not recorded"), "{err}");
    }
    let o = run(tpslab(&ns, &home, &["history", "--kind", "udp_run"]));
    assert!(o.status.success());
    assert!(text(&o).contains("4 run(s) from"), "{}", text(&o));
    // history show renders the stored record as report renders its file.
    let json = common::tmp("history-show.json");
    let o = run(tpslab(
        &ns,
        &home,
        &["history", "show", "2", "--json", json.to_str().unwrap()],
    ));
    assert!(o.status.success());
    let shown = run(tpslab(&ns, &home, &["history", "show", "2"]));
    let reported = run(tpslab(&ns, &home, &["report", json.to_str().unwrap()]));
    assert_eq!(text(&shown), text(&reported));
    assert!(text(&shown).contains("Ledger: where every datagram went"));
    // compare takes history ids.
    let o = run(tpslab(&ns, &home, &["compare", "history:1", "history:3"]));
    assert!(o.status.success());
    assert!(text(&o).contains("A = history:1"), "{}", text(&o));
    // Filters, and --no-history.
    let o = run(tpslab(&ns, &home, &["history", "--kind", "ramp"]));
    assert!(text(&o).contains("0 run(s)"));
    let o = run(tpslab(&ns, &home, &["history", "--since", "2999-01-01"]));
    assert!(text(&o).contains("0 run(s)"));
    let mut args = SHORT_RUN.to_vec();
    args.push("--no-history");
    assert!(run(tpslab(&ns, &home, &args)).status.success());
    let o = run(tpslab(&ns, &home, &["history"]));
    assert!(text(&o).contains("4 run(s) from"), "{}", text(&o));
    // An unknown id: one line, exit 2.
    let o = run(tpslab(&ns, &home, &["history", "show", "99"]));
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no run with id 99"));
}

#[test]
fn a_killed_run_leaves_the_history_intact_and_an_interrupted_one_is_recorded() {
    if !common::can_netns(
        "a_killed_run_leaves_the_history_intact_and_an_interrupted_one_is_recorded",
    ) {
        return;
    }
    let ns = NetNs::new();
    let home = common::tmp("history-killed");
    assert!(run(tpslab(&ns, &home, SHORT_RUN)).status.success());
    // SIGKILL in the middle of a watch: nothing is appended, nothing is damaged.
    let mut w = tpslab(&ns, &home, &["watch", "--port", "9", "--duration", "30s"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(800));
    w.kill().unwrap();
    let _ = w.wait();
    // SIGINT: the run ends early, its record is written and kept, marked interrupted.
    let w = tpslab(&ns, &home, &["watch", "--port", "9", "--duration", "30s"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(800));
    // SAFETY: kill(2) on our own child's PID.
    assert_eq!(unsafe { libc::kill(w.id() as i32, libc::SIGINT) }, 0);
    let o = w.wait_with_output().unwrap();
    assert!(
        o.status.success() || o.status.code() == Some(130),
        "{:?}",
        o.status
    );
    let o = run(tpslab(&ns, &home, &["history"]));
    assert!(o.status.success());
    let t = text(&o);
    assert!(t.contains("2 run(s) from"), "{t}");
    assert!(t.contains("(interrupted)"), "{t}");
    assert!(t.contains("watch"), "{t}");
}

#[test]
fn a_database_that_is_not_ours_or_is_newer_is_named_and_never_touched() {
    if !common::can_netns("a_database_that_is_not_ours_or_is_newer_is_named_and_never_touched") {
        return;
    }
    let ns = NetNs::new();
    for (name, make) in [
        ("junk", "open(p, 'wb').write(b'not a database, ' * 64)"),
        (
            "newer",
            "import sqlite3; c = sqlite3.connect(p); c.executescript(\"CREATE TABLE tpslab_meta (key TEXT PRIMARY KEY, value TEXT); INSERT INTO tpslab_meta VALUES ('schema_version', '2'); CREATE TABLE runs (id INTEGER PRIMARY KEY, x TEXT);\"); c.commit(); c.close()",
        ),
        (
            "foreign",
            "import sqlite3; c = sqlite3.connect(p); c.executescript('CREATE TABLE photos (id INTEGER);'); c.commit(); c.close()",
        ),
    ] {
        let home = common::tmp(&format!("history-{name}"));
        std::fs::create_dir_all(home.join("tpslab")).unwrap();
        let p = db(&home);
        let ok = Command::new("python3")
            .args(["-c", &format!("p = {:?}; {make}", p.to_str().unwrap())])
            .status()
            .expect("python3");
        assert!(ok.success());
        let before = std::fs::read(&p).unwrap();
        let o = run(tpslab(&ns, &home, &["history"]));
        assert_eq!(o.status.code(), Some(2), "{name}");
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert_eq!(err.lines().count(), 1, "{name}: {err}");
        assert!(err.contains(p.to_str().unwrap()) && err.contains("left as it is"), "{name}: {err}");
        if name == "newer" {
            assert!(err.contains("schema version 2, newer"), "{err}");
        }
        // A run still succeeds, says the history was not written, and leaves it alone.
        let o = run(tpslab(&ns, &home, SHORT_RUN));
        assert!(o.status.success(), "{name}");
        assert!(String::from_utf8_lossy(&o.stderr).contains("not recorded in the history"));
        assert_eq!(std::fs::read(&p).unwrap(), before, "{name}: the database was changed");
    }
}

#[test]
fn the_history_is_the_users_alone_and_never_written_through_a_link() {
    use std::os::unix::fs::PermissionsExt;
    if !common::can_netns("the_history_is_the_users_alone_and_never_written_through_a_link") {
        return;
    }
    let ns = NetNs::new();
    let home = common::tmp("history-modes");
    let _ = std::fs::remove_dir_all(&home);
    let o = run(tpslab(&ns, &home, SHORT_RUN));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&home.join("tpslab")), 0o700);
    assert_eq!(mode(&db(&home)), 0o600);
    // One an older tpslab made 0755/0644 is narrowed at the next run.
    std::fs::set_permissions(home.join("tpslab"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(db(&home), std::fs::Permissions::from_mode(0o644)).unwrap();
    let o = run(tpslab(&ns, &home, SHORT_RUN));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(mode(&home.join("tpslab")), 0o700);
    assert_eq!(mode(&db(&home)), 0o600);
    // A link planted at the database's name: the run succeeds, the history is not written,
    // the link's target is untouched.
    let home = common::tmp("history-link");
    let _ = std::fs::remove_dir_all(&home);
    std::fs::create_dir_all(home.join("tpslab")).unwrap();
    let victim = home.join("victim");
    // Empty: SQLite would make it a database through the link.
    std::fs::write(&victim, "").unwrap();
    std::os::unix::fs::symlink(&victim, db(&home)).unwrap();
    let o = run(tpslab(&ns, &home, SHORT_RUN));
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("not recorded in the history"));
    assert_eq!(std::fs::read(&victim).unwrap(), b"");
}

#[test]
fn a_watch_records_when_it_started_and_what_it_watched_and_history_lists_both() {
    // A socket of this test process: the watch follows it by our PID and its port.
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = sock.local_addr().unwrap().port();
    let pid = std::process::id();
    let home = common::tmp("history-watch");
    let json = common::tmp("watch.json");
    let now_ms = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64
    };
    let before = now_ms();
    let mut c = common::tpslab();
    c.env("XDG_DATA_HOME", &home).args([
        "watch",
        "--pid",
        &pid.to_string(),
        "--port",
        &port.to_string(),
        "--duration",
        "300ms",
        "--no-drop-reasons",
        "--json",
        json.to_str().unwrap(),
    ]);
    let o = run(c);
    let after = now_ms();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = common::record(&json);
    assert_eq!(r["kind"], "watch");
    let started = r["meta"]["started_unix_ms"].as_u64().unwrap();
    assert!(
        (before..=after).contains(&started),
        "started {started} outside this test's window {before}..={after}"
    );
    assert_eq!(r["started_unix_ms"].as_u64(), Some(started));
    assert_eq!(
        r["target"]["pid"].as_u64(),
        Some(pid as u64),
        "{}",
        r["target"]
    );
    assert!(!r["target"]["exe"].as_str().unwrap().is_empty());
    let target = format!("pid {pid} ");
    let on_port = format!("port {port}");
    // The report says what was watched and when.
    let date = tpslab_report::html::utc(started);
    let out = text(&o);
    assert!(out.contains(&format!("Watched {target}")), "{out}");
    assert!(out.contains(&on_port) && out.contains(&date), "{out}");
    // History lists it with that date (to the second) and that target.
    let mut c = common::tpslab();
    c.env("XDG_DATA_HOME", &home)
        .args(["history", "--kind", "watch"]);
    let o = run(c);
    assert!(o.status.success());
    let list = text(&o);
    let row = list
        .lines()
        .find(|l| l.contains(" watch "))
        .unwrap_or_else(|| panic!("no watch row: {list}"));
    assert!(row.contains(date.trim_end_matches(" UTC")), "{row}");
    assert!(!row.contains("1970-01-01"), "{row}");
    assert!(row.contains(&target) && row.contains(&on_port), "{row}");
    // And `--target` finds it by its port.
    let mut c = common::tpslab();
    c.env("XDG_DATA_HOME", &home)
        .args(["history", "--target", &on_port]);
    assert!(text(&run(c)).contains("1 run(s) from"));
    // Its HTML page says when and what.
    let html = common::tmp("watch.html");
    let mut c = common::tpslab();
    c.arg("report").arg("--html").arg(&html).arg(&json);
    let o = run(c);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains(&format!("started {date}")),
        "no start in the page"
    );
    assert!(
        page.contains(&format!("target: {target}")),
        "no target in the page"
    );
    drop(sock);
}
