//! A folder on an output's path planted as a symbolic link by another user (a user the
//! test makes, removed at the end) in a 1777 folder: every output flag and `sweep --out`
//! is refused before the run, naming the flag, the path and the link, exit 2, and the
//! folder the link names is untouched; root's own link in its own folder still works. A
//! history folder of another user's, or one others can write to, is not used (said on
//! stderr, the run's exit code kept).

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A throwaway user (no home, no login), deleted on drop, also when the test fails. One at
/// a time in this process: the tests run in parallel, and two `useradd`s at once contend
/// for /etc/passwd's lock (and once shared this name: "already exists").
struct User {
    name: String,
    uid: u32,
    gid: u32,
    _one: std::sync::MutexGuard<'static, ()>,
}

static ONE_USER: std::sync::Mutex<()> = std::sync::Mutex::new(());

impl User {
    fn new() -> User {
        let one = ONE_USER.lock().unwrap_or_else(|e| e.into_inner());
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("tpslab-t{}-{n}", std::process::id());
        let o = Command::new("useradd")
            .args(["-M", "-N", "-s", "/usr/sbin/nologin", &name])
            .output()
            .expect("useradd");
        assert!(
            o.status.success(),
            "useradd: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let id = |flag: &str| -> u32 {
            let o = Command::new("id").args([flag, &name]).output().unwrap();
            String::from_utf8_lossy(&o.stdout).trim().parse().unwrap()
        };
        let (uid, gid) = (id("-u"), id("-g"));
        User {
            name,
            uid,
            gid,
            _one: one,
        }
    }

    /// Runs `argv` as this user (`setpriv`, no supplementary groups).
    fn run(&self, argv: &[&str]) {
        let o = Command::new("setpriv")
            .arg(format!("--reuid={}", self.uid))
            .arg(format!("--regid={}", self.gid))
            .arg("--clear-groups")
            .args(argv)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{argv:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

impl Drop for User {
    fn drop(&mut self) {
        let _ = Command::new("userdel").arg(&self.name).output();
    }
}

/// Names and contents of the files in `dir`, sorted.
fn listing(dir: &Path) -> Vec<(String, String)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let body = std::fs::read_to_string(e.path()).unwrap_or_else(|_| "(folder)".into());
            (e.file_name().to_string_lossy().into_owned(), body)
        })
        .collect();
    v.sort();
    v
}

fn fixture() -> String {
    format!(
        "{}/crates/tpslab-report/tests/fixtures/udp_run.json",
        env!("CARGO_MANIFEST_DIR")
    )
}

const BDP: &[&str] = &["bdp", "--rtt", "30ms", "--rate", "80mbit", "--no-history"];
const RUN: &[&str] = &[
    "run",
    "udp",
    "--rate",
    "2000",
    "--duration",
    "300ms",
    "--warmup",
    "100ms",
    "--no-history",
];
const SWEEP: &[&str] = &[
    "sweep",
    "--factor",
    "rcvbuf=16000000,8192",
    "--repeat",
    "1",
    "--duration",
    "100ms",
    "--warmup",
    "0s",
    "--no-history",
];

#[test]
fn a_planted_folder_is_refused_for_every_output_before_the_run() {
    // Changes host-wide state or checks it unchanged: under the suite's host lock.
    let _host = common::host_lock();
    let test = "a_planted_folder_is_refused_for_every_output_before_the_run";
    if !common::root(test, "to make a user and a netns")
        || !common::need(test, "/usr/sbin/useradd")
        || !common::need(test, "/usr/bin/setpriv")
    {
        return;
    }
    let ns = common::NetNs::new();
    let user = User::new();
    let base = common::tmp("planted-folder");
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).unwrap();
    // root's folder, which the link will name.
    let victim = base.join("victim");
    std::fs::create_dir(&victim).unwrap();
    std::fs::write(victim.join("out.json"), "precious\n").unwrap();
    // A shared folder like /tmp, and the other user's link in it.
    let shared = base.join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let link = shared.join("dir");
    user.run(&["ln", "-s", victim.to_str().unwrap(), link.to_str().unwrap()]);
    let before = listing(&victim);
    let f = fixture();
    let doctor_root = base.join("root");
    std::fs::create_dir(&doctor_root).unwrap();
    let doctor: Vec<&str> = vec![
        "doctor",
        "--for",
        "tcp",
        "--rtt",
        "100ms",
        "--rate",
        "4gbit",
        "--no-history",
        "--root",
        doctor_root.to_str().unwrap(),
    ];
    let ramp: &[&str] = &["ramp", "tcp", "--users", "1..2", "--step-duration", "200ms"];
    let report: &[&str] = &["report", &f];
    let compare: &[&str] = &["compare", &f, &f];
    let out = link.join("out.json");
    let sweep_out = link.join("sweep");
    // doctor never writes over a file: a new name, which it would make through the link.
    let snippet = link.join("60-tpslab.conf");
    let cases: Vec<(&[&str], &str, &Path)> = vec![
        (BDP, "--json", &out),
        (BDP, "--html", &out),
        (BDP, "--metrics-file", &out),
        (RUN, "--json-stream", &out),
        (ramp, "--svg", &out),
        (report, "--html", &out),
        (compare, "--json", &out),
        (&doctor, "--write-snippet", &snippet),
        (SWEEP, "--out", &sweep_out),
    ];
    // Every case is tried; the ones that failed are listed together.
    let mut failed = vec![];
    for (cmd, flag, path) in cases {
        let mut c = ns.tpslab();
        c.args(cmd).arg(flag).arg(path);
        if cmd == SWEEP {
            c.arg("--csv").arg(base.join("sweep.csv"));
        }
        let o = common::run(c);
        let err = String::from_utf8_lossy(&o.stderr);
        let want = format!(
            "tpslab: error: {flag} {}: {} is a symbolic link in a folder others can write to",
            path.display(),
            link.display()
        );
        let untouched = listing(&victim) == before;
        if o.status.code() != Some(2)
            || !err.starts_with(&want)
            || err.lines().count() != 1
            || !o.stdout.is_empty()
            || !untouched
        {
            failed.push(format!(
                "{} {flag}: exit {:?}, stdout {} bytes, the folder {}: {err}",
                cmd[0],
                o.status.code(),
                o.stdout.len(),
                if untouched { "untouched" } else { "changed" }
            ));
            // The next case starts from the same folder.
            let _ = std::fs::remove_dir_all(&victim);
            std::fs::create_dir(&victim).unwrap();
            std::fs::write(victim.join("out.json"), "precious\n").unwrap();
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    // sweep --csv through the link, --out elsewhere: refused before the folder is made.
    let mut c = ns.tpslab();
    c.args(SWEEP)
        .arg("--out")
        .arg(base.join("sweep"))
        .arg("--csv")
        .arg(link.join("s.csv"));
    let o = common::run(c);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--csv"));
    assert!(!base.join("sweep").exists());
    assert_eq!(listing(&victim), before);

    // root's own link in root's own 0755 folder: followed.
    let own = base.join("own");
    std::fs::create_dir(&own).unwrap();
    std::fs::set_permissions(&own, std::fs::Permissions::from_mode(0o755)).unwrap();
    let real = base.join("real");
    std::fs::create_dir(&real).unwrap();
    std::os::unix::fs::symlink(&real, own.join("out")).unwrap();
    for (flag, name) in [
        ("--json", "r.json"),
        ("--html", "r.html"),
        ("--metrics-file", "r.prom"),
    ] {
        let mut c = common::tpslab();
        c.args(BDP).arg(flag).arg(own.join("out").join(name));
        let o = common::run(c);
        assert!(
            o.status.success(),
            "{flag}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(
            std::fs::metadata(real.join(name)).unwrap().len() > 0,
            "{flag}"
        );
    }
    let _ = std::fs::remove_dir_all(&base);
}

/// Runs `bdp` with its history in `xdg` and returns its stderr (exit 0 asserted).
fn bdp_with_history(xdg: &Path) -> String {
    let mut c = common::tpslab();
    c.env("XDG_DATA_HOME", xdg)
        .args(["bdp", "--rtt", "30ms", "--rate", "80mbit"]);
    let o = common::run(c);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{err}");
    err
}

#[test]
fn a_history_folder_others_can_change_is_not_used() {
    // Changes host-wide state or checks it unchanged: under the suite's host lock.
    let _host = common::host_lock();
    let test = "a_history_folder_others_can_change_is_not_used";
    if !common::root(test, "to make a user") || !common::need(test, "/usr/sbin/useradd") {
        return;
    }
    let user = User::new();
    let xdg = common::tmp("history-theirs");
    let _ = std::fs::remove_dir_all(&xdg);
    let dir: PathBuf = xdg.join("tpslab");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    std::os::unix::fs::chown(&dir, Some(user.uid), Some(user.gid)).unwrap();
    let err = bdp_with_history(&xdg);
    let want = format!(
        "tpslab: not recorded in the history: history folder {}: owned by uid {}, neither this user nor root; the history is not used there",
        dir.display(),
        user.uid
    );
    assert!(err.contains(&want), "{err}");
    // root's own, but 0777: the same.
    std::os::unix::fs::chown(&dir, Some(0), Some(0)).unwrap();
    let err = bdp_with_history(&xdg);
    assert!(
        err.contains("mode 777: group or others can write it"),
        "{err}"
    );
    assert!(
        std::fs::read_dir(&dir).unwrap().next().is_none(),
        "written to"
    );
    // A folder above it of the other user's (who could swap it for theirs): the same.
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::chown(&xdg, Some(user.uid), Some(user.gid)).unwrap();
    let err = bdp_with_history(&xdg);
    assert!(
        err.contains(&format!(
            "folder {}: owned by uid {}",
            xdg.display(),
            user.uid
        )),
        "{err}"
    );
    assert!(
        std::fs::read_dir(&dir).unwrap().next().is_none(),
        "written to"
    );
    // Once root's alone, recorded.
    std::os::unix::fs::chown(&xdg, Some(0), Some(0)).unwrap();
    let err = bdp_with_history(&xdg);
    assert!(!err.contains("not recorded"), "{err}");
    assert!(dir.join("history.sqlite").exists());
    let _ = std::fs::remove_dir_all(&xdg);
}
