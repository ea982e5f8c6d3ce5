//! The Debian package (pkg/build-deb.sh): made from this test's own release binary, clean
//! for lintian, installed with `dpkg -i` on this machine, and what it puts in place works
//! where the system looks for it (`/usr/bin/tpslab --version`, `man -w` of tpslab(1) and
//! tpslab-watch(1), bash's completion as bash-completion loads it, the systemd unit by
//! `systemd-analyze verify`, then its `ExecStart=` run by hand as its user with its
//! capabilities, scraped and stopped: see `exporter_by_hand`); `dpkg -r` leaves only its
//! conffile (/etc/default/tpslab-exporter), `dpkg -P` none of its files, nor the
//! exporter's state. A tpslab package installed
//! before (a user's, or one a killed run left) is put back afterwards from a `dpkg-repack`
//! copy, and the exporter's state folders with it, also when an assertion fails.

use crate::common;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

const TEST: &str = "package::deb_installs_works_and_leaves_nothing";
/// Where the unit's StateDirectory= keeps the exporter's records (DynamicUser=: a link
/// to the second), which a purge deletes.
const STATE: [&str; 2] = [
    "/var/lib/tpslab-exporter",
    "/var/lib/private/tpslab-exporter",
];
/// The exporter's settings, shipped commented: a conffile (kept by `dpkg -r`).
const CONFFILE: &str = "/etc/default/tpslab-exporter";
/// The folder of DynamicUser= services' state.
const PRIVATE: &str = "/var/lib/private";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `cmd`'s output; panics when it cannot be started.
fn run(cmd: &mut Command) -> Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"))
}

/// `cmd`'s standard output, asserting it succeeded.
fn ok(cmd: &mut Command) -> String {
    let out = run(cmd);
    assert!(
        out.status.success(),
        "{cmd:?}: {}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// dpkg ARGS, waiting (up to 2 min) while another dpkg or apt on the host holds its lock.
fn dpkg(args: &[&str]) -> Output {
    let mut out = run(Command::new("dpkg").args(args));
    for _ in 0..60 {
        if out.status.success() || !String::from_utf8_lossy(&out.stderr).contains("lock") {
            break;
        }
        std::thread::sleep(Duration::from_secs(2));
        out = run(Command::new("dpkg").args(args));
    }
    out
}

/// `dpkg ARGS`, asserting it succeeded.
fn dpkg_ok(args: &[&str]) {
    let out = dpkg(args);
    assert!(
        out.status.success(),
        "dpkg {args:?}: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// tpslab's state in dpkg's database ("ii": installed, "rc": removed with its
/// configuration, i.e. its postrm, kept); None when dpkg does not know it.
fn status() -> Option<String> {
    let out = run(Command::new("dpkg-query").args(["-W", "-f=${db:Status-Abbrev}", "tpslab"]));
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .filter(|s| !s.is_empty() && s != "un")
}

/// Whether anything (a link too, even a dangling one) is at `p`.
fn exists(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok()
}

/// What the test changes on the host, put back when dropped (after a failed assertion
/// too): tpslab purged, the package installed before reinstalled from its repacked copy,
/// the exporter's state folders moved back.
struct Restore {
    previous: Option<PathBuf>,
    aside: Vec<(PathBuf, PathBuf)>,
    /// /var/lib/private was not there (systemd-tmpfiles makes it at boot; not here).
    no_private: bool,
}

impl Drop for Restore {
    fn drop(&mut self) {
        let out = dpkg(&["--purge", "tpslab"]);
        if !out.status.success() {
            eprintln!(
                "{TEST}: restoring: dpkg --purge tpslab: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        if let Some(deb) = &self.previous {
            let out = dpkg(&["-i", &deb.to_string_lossy()]);
            if !out.status.success() {
                eprintln!(
                    "{TEST}: restoring: the tpslab installed before, from {}: {}",
                    deb.display(),
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
        for (orig, moved) in &self.aside {
            if let Err(e) = std::fs::rename(moved, orig) {
                eprintln!("{TEST}: restoring {}: {e}", orig.display());
            }
        }
        if self.no_private {
            let _ = std::fs::remove_dir(PRIVATE);
        }
    }
}

/// The paths a .deb holds (`dpkg-deb -c`), absolute, without the root: (files and
/// links, folders).
fn contents(deb: &Path) -> (BTreeSet<PathBuf>, BTreeSet<PathBuf>) {
    let list = ok(Command::new("dpkg-deb").arg("-c").arg(deb));
    let (mut files, mut dirs) = (BTreeSet::new(), BTreeSet::new());
    for line in list.lines() {
        // drwxr-xr-x root/root 0 2026-11-27 23:45 ./usr/bin/ (a link: "name -> target")
        let name = line
            .split_whitespace()
            .nth(5)
            .unwrap_or_else(|| panic!("dpkg-deb -c line {line:?}"));
        let path = PathBuf::from(name.trim_start_matches('.').trim_end_matches('/'));
        if path.as_os_str().is_empty() {
            continue;
        }
        if line.starts_with('d') {
            dirs.insert(path);
        } else {
            files.insert(path);
        }
    }
    (files, dirs)
}

/// The unit's settings that `exporter_by_hand` reproduces: `Environment=` values, the
/// `ExecStart=` line, the capability sets and `NoNewPrivileges=`, `DynamicUser=`.
struct Unit {
    env: Vec<(String, String)>,
    exec: String,
    bounding: Vec<String>,
    ambient: Vec<String>,
    no_new_privs: bool,
    dynamic_user: bool,
    /// `IPAddressAllow=` and `IPAddressDeny=`, in order.
    ip_allow: Vec<String>,
    ip_deny: Vec<String>,
    /// `InaccessiblePaths=` (a leading `-` kept: a path that may be missing).
    inaccessible: Vec<String>,
}

/// The installed unit file's `[Service]` lines (one `Key=value` a line; comments left out).
fn parse_unit(text: &str) -> Unit {
    let mut u = Unit {
        env: vec![],
        exec: String::new(),
        bounding: vec![],
        ambient: vec![],
        no_new_privs: false,
        dynamic_user: false,
        ip_allow: vec![],
        ip_deny: vec![],
        inaccessible: vec![],
    };
    let caps = |v: &str| -> Vec<String> {
        v.split_whitespace()
            .map(|c| {
                c.strip_prefix("CAP_")
                    .unwrap_or_else(|| panic!("a capability {c}"))
                    .to_lowercase()
            })
            .collect()
    };
    for line in text.lines() {
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        match key {
            "Environment" => {
                let (k, v) = value.split_once('=').expect("Environment=KEY=VALUE");
                u.env.push((k.to_string(), v.to_string()));
            }
            "ExecStart" => u.exec = value.to_string(),
            "CapabilityBoundingSet" => u.bounding = caps(value),
            "AmbientCapabilities" => u.ambient = caps(value),
            "NoNewPrivileges" => u.no_new_privs = value == "yes",
            "DynamicUser" => u.dynamic_user = value == "yes",
            "IPAddressAllow" => u
                .ip_allow
                .extend(value.split_whitespace().map(String::from)),
            "IPAddressDeny" => u.ip_deny.extend(value.split_whitespace().map(String::from)),
            "InaccessiblePaths" => u
                .inaccessible
                .extend(value.split_whitespace().map(String::from)),
            _ => {}
        }
    }
    u
}

/// `ExecStart=` as systemd expands it: `%i` the instance, `%S` the state root, `${KEY}`
/// one word, `$KEY` split at blanks (none when empty). The line quotes nothing.
fn exec_words(u: &Unit, instance: &str, state_root: &Path) -> Vec<String> {
    let value = |k: &str| {
        u.env
            .iter()
            .rev()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    let mut out = vec![];
    for w in u.exec.split_whitespace() {
        if let Some(k) = w.strip_prefix('$').filter(|k| !k.starts_with('{')) {
            out.extend(value(k).split_whitespace().map(String::from));
            continue;
        }
        let mut s = w
            .replace("%i", instance)
            .replace("%S", &state_root.to_string_lossy());
        while let Some(i) = s.find("${") {
            let end = s[i..].find('}').expect("${KEY}") + i;
            let k = s[i + 2..end].to_string();
            s.replace_range(i..=end, &value(&k));
        }
        out.push(s);
    }
    out
}

/// The capability bits of `names` (lower case, without CAP_), as /proc/PID/status
/// prints them.
fn cap_mask(names: &[String]) -> u64 {
    names
        .iter()
        .map(|n| match n.as_str() {
            "dac_read_search" => 2,
            "sys_ptrace" => 19,
            "syslog" => 34,
            "perfmon" => 38,
            other => panic!("capability {other}: add its number"),
        })
        .fold(0, |m, bit| m | 1u64 << bit)
}

/// What systemd would do with the installed unit, done by hand (PID 1 here is not
/// systemd): its `ExecStart=` line, expanded from the unit file, run for a few seconds
/// in a network namespace of its own (its default 127.0.0.1:19464 free) against a UDP
/// server there, as an unprivileged user (`nobody`, standing in for `DynamicUser=`) with
/// exactly the unit's bounding and ambient capabilities, no_new_privs (`setpriv`) and
/// its `UMask=`; its process is checked for those capabilities, its metrics endpoint
/// scraped on loopback, then it is stopped by its PID with SIGTERM (systemd's stop) and
/// must exit 0 having written its record, private to its user, into the state
/// directory, with the kernel's drop reasons read. Not checked here: the sandboxing
/// systemd alone applies (ProtectSystem=, ProtectHome=, PrivateTmp=, PrivateDevices=,
/// ReadOnlyPaths=, SystemCallFilter=, RestrictAddressFamilies=, RestrictNamespaces=,
/// MemoryDenyWriteExecute=, LockPersonality=, ...), a real DynamicUser= allocation,
/// StateDirectory= creation, EnvironmentFile= reading and Restart=.
fn exporter_by_hand(dir: &Path) {
    let unit = parse_unit(
        &std::fs::read_to_string("/usr/lib/systemd/system/tpslab-exporter@.service").unwrap(),
    );
    assert!(
        unit.dynamic_user && unit.no_new_privs,
        "the unit's hardening changed"
    );
    assert!(!unit.ambient.is_empty() && unit.bounding == unit.ambient);
    // Another process's memory only for an instance that follows a --pid (a drop-in adds
    // CAP_SYS_PTRACE); what CAP_DAC_READ_SEARCH could read of the host's secrets hidden;
    // the unauthenticated endpoint reachable from this host alone.
    assert!(
        !unit.bounding.iter().any(|c| c == "sys_ptrace"),
        "CAP_SYS_PTRACE for every instance: {:?}",
        unit.bounding
    );
    assert_eq!(
        (&unit.ip_allow[..], &unit.ip_deny[..]),
        (&["localhost".to_string()][..], &["any".to_string()][..])
    );
    for secret in [
        "/etc/shadow",
        "/etc/gshadow",
        "/etc/sudoers",
        "/etc/ssh",
        "/etc/ssl/private",
    ] {
        assert!(
            unit.inaccessible
                .iter()
                .any(|p| p.trim_start_matches('-') == secret),
            "{secret} not in InaccessiblePaths=: {:?}",
            unit.inaccessible
        );
    }
    // Under /tmp: the unit's user must reach it (cargo's target/ may be private).
    let state_root = std::env::temp_dir().join(format!("tpslab-exporter-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&state_root);
    let state = state_root.join("tpslab-exporter");
    std::fs::create_dir_all(&state).unwrap();
    // StateDirectory= with DynamicUser=: the service's user owns it, mode 0700 (UMask=).
    ok(Command::new("chown").arg("nobody:nogroup").arg(&state));
    ok(Command::new("chmod").arg("0700").arg(&state));
    let port = "19753";
    let words = exec_words(&unit, port, &state_root);
    assert_eq!(words[0], "/usr/bin/tpslab", "{words:?}");
    assert!(words.iter().any(|w| w == "127.0.0.1:19464"), "{words:?}");
    let caps = |set: &[String]| {
        std::iter::once("-all".to_string())
            .chain(set.iter().map(|c| format!("+{c}")))
            .collect::<Vec<_>>()
            .join(",")
    };
    let setpriv = format!(
        "setpriv --reuid nobody --regid nogroup --clear-groups --bounding-set {b} \
         --inh-caps {a} --ambient-caps {a} --no-new-privs",
        b = caps(&unit.bounding),
        a = caps(&unit.ambient)
    );
    let exec = words.join(" ");
    // Everything in one namespace: the server, the exporter as the unit runs it, the
    // scrape; the exporter stopped by its PID, the server by its PID.
    let script = format!(
        r#"set -u
mount -t tracefs tracefs /sys/kernel/tracing
ip link set lo up
/usr/bin/tpslab serve udp --bind 127.0.0.1:{port} --duration 60s >/dev/null 2>&1 & s=$!
for _ in $(seq 100); do ss -Hlun "sport = :{port}" | grep -q . && break; sleep 0.1; done
(umask 0077; exec {setpriv} {exec}) >/dev/null 2>{dir}/exporter.err & w=$!
up=
for _ in $(seq 100); do
  if curl -sf http://127.0.0.1:19464/metrics >{dir}/scrape.txt; then up=1; break; fi
  sleep 0.1
done
sleep 2
curl -sf http://127.0.0.1:19464/metrics >{dir}/scrape.txt
echo "scraped ${{up:-no}}"
grep -E '^(Uid|CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs):' /proc/$w/status
kill -TERM $w; wait $w; echo "exporter exit $?"
kill -INT $s; wait $s
"#,
        dir = dir.display(),
    );
    // A network namespace (its own 127.0.0.1:19464) and a mount namespace where tracefs
    // is mounted, as systemd mounts it at boot (this host has it unmounted); the host's
    // mounts are left alone.
    let out = run(Command::new("unshare").args([
        "-n",
        "-m",
        "--propagation",
        "private",
        "sh",
        "-c",
        &script,
    ]));
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    let err = std::fs::read_to_string(dir.join("exporter.err")).unwrap_or_default();
    assert!(
        said.contains("scraped 1"),
        "the exporter never answered on 127.0.0.1:19464:\n{said}\n{err}"
    );
    assert!(
        said.contains("exporter exit 0"),
        "SIGTERM: the exporter's exit:\n{said}\n{err}"
    );
    let field = |k: &str| {
        said.lines()
            .find_map(|l| l.strip_prefix(&format!("{k}:")))
            .unwrap_or_else(|| panic!("{k} of the exporter's process:\n{said}"))
            .trim()
            .to_string()
    };
    let hex = |k: &str| u64::from_str_radix(&field(k), 16).unwrap();
    let want = cap_mask(&unit.ambient);
    assert_eq!(hex("CapBnd"), cap_mask(&unit.bounding), "{said}");
    assert_eq!(hex("CapAmb"), want, "{said}");
    assert_eq!(hex("CapEff"), want, "{said}");
    assert_eq!(hex("CapPrm"), want, "{said}");
    assert_eq!(field("NoNewPrivs"), "1");
    assert!(!field("Uid").starts_with("0\t"), "{said}");
    let scrape = std::fs::read_to_string(dir.join("scrape.txt")).unwrap();
    assert!(
        scrape.contains("tpslab_exporter_info{command=\"watch\""),
        "the scrape:\n{scrape}"
    );
    for metric in ["tpslab_socket_drops_total", "tpslab_socket_rx_queue_bytes"] {
        assert!(
            scrape.contains(metric),
            "{metric} not in the scrape:\n{scrape}"
        );
    }
    // The record, written by the unit's user into the state directory.
    let record = state.join(format!("watch-{port}.json"));
    let meta = std::fs::metadata(&record)
        .unwrap_or_else(|e| panic!("{}: {e}\n{said}\n{err}", record.display()));
    use std::os::unix::fs::MetadataExt;
    assert_eq!(meta.mode() & 0o077, 0, "UMask=0077: {:o}", meta.mode());
    assert_ne!(meta.uid(), 0, "written by the unit's user");
    // The kernel's drop reasons were readable with the unit's capabilities alone
    // (CAP_PERFMON, CAP_DAC_READ_SEARCH for tracefs), their sites named (CAP_SYSLOG).
    let rec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&record).unwrap()).unwrap();
    let reasons = &rec["drop_reasons"];
    assert!(
        reasons.is_object() && reasons["unavailable"].is_null(),
        "drop reasons not read with the unit's capabilities: {reasons}"
    );
    for site in reasons["by_site"].as_array().into_iter().flatten() {
        assert!(
            site[1].as_str().is_some_and(|s| s.contains("+0x")),
            "a drop's kernel function not named (kallsyms): {site}"
        );
    }
    let _ = std::fs::remove_dir_all(&state_root);
}

#[test]
fn deb_installs_works_and_leaves_nothing() {
    if cfg!(debug_assertions) {
        common::skip(
            TEST,
            "the package holds an optimised binary: run with --profile suite (./test.sh does) or --release",
        );
        return;
    }
    if !common::root(TEST, "to install a package with dpkg") {
        return;
    }
    for tool in [
        "/usr/bin/dpkg",
        "/usr/bin/lintian",
        "/usr/bin/man",
        "/usr/bin/systemd-analyze",
        "/usr/share/bash-completion/bash_completion",
        "/usr/bin/setpriv",
        "/usr/bin/unshare",
        "/usr/bin/curl",
    ] {
        if !common::need(TEST, tool) {
            return;
        }
    }
    if !run(Command::new("cargo").args(["deb", "--version"]))
        .status
        .success()
    {
        common::skip(
            TEST,
            "cargo-deb not installed (cargo install cargo-deb --locked; .ci/run does)",
        );
        return;
    }
    // Slim Debian images tell dpkg to leave out man pages and docs: none to find then.
    let excluded = std::fs::read_dir("/etc/dpkg/dpkg.cfg.d")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .find_map(|t| {
            t.lines()
                .find(|l| l.trim_start().starts_with("path-exclude") && l.contains("/usr/share/"))
                .map(str::to_string)
        });
    if let Some(rule) = excluded {
        common::skip(
            TEST,
            &format!("dpkg is told {rule:?} (/etc/dpkg/dpkg.cfg.d)"),
        );
        return;
    }
    // Changes host-wide state (dpkg) and checks it unchanged: under the suite's host lock.
    // Not serial: it measures no rate, and the ordinary turn keeps it from beside a test
    // that does.
    let _host = common::host_lock();
    // The binary build-deb.sh packages is the one this test was built with: target/PROFILE/
    // (./test.sh's `--profile suite`, or `--release`). Under test.sh that is the test
    // build, whose cold crates are at opt-level 0 where a release has 1 (Cargo.toml): the
    // same code and package, only larger (30.4 MB stripped against 22.4).
    let this = PathBuf::from(env!("CARGO_BIN_EXE_tpslab"));
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| repo().join("target"), PathBuf::from);
    let profile = this
        .parent()
        .and_then(|d| d.file_name())
        .and_then(|n| n.to_str())
        .expect("the binary's profile folder")
        .to_string();
    assert_eq!(
        this.canonicalize().unwrap(),
        target.join(&profile).join("tpslab").canonicalize().unwrap(),
        "build-deb.sh --no-build --profile {profile} packages target/{profile}/tpslab"
    );

    let t0 = std::time::Instant::now();
    let took = |what: &str| eprintln!("{TEST}: {what} after {:.1} s", t0.elapsed().as_secs_f64());
    let dir = common::tmp("package");
    std::fs::create_dir_all(&dir).unwrap();
    let built = ok(Command::new(repo().join("pkg/build-deb.sh"))
        .args(["--no-build", "--profile", &profile, "--fast", "--output"])
        .arg(&dir));
    let deb = PathBuf::from(
        built
            .lines()
            .last()
            .expect("build-deb.sh prints the package's path"),
    );
    let version = env!("CARGO_PKG_VERSION");
    let arch = String::from_utf8(
        Command::new("dpkg")
            .arg("--print-architecture")
            .output()
            .expect("dpkg --print-architecture")
            .stdout,
    )
    .expect("dpkg's architecture");
    assert_eq!(
        deb.file_name().unwrap().to_string_lossy(),
        format!("tpslab_{version}-1_{}.deb", arch.trim())
    );

    took("built");
    // lintian: no tag of any severity (the overrides installed with the package each say
    // why theirs is no fault).
    let lint = run(Command::new("lintian")
        .args([
            "--fail-on",
            "error,warning,info,pedantic",
            "-I",
            "--pedantic",
        ])
        .arg(&deb));
    let tags = String::from_utf8_lossy(&lint.stdout);
    assert!(
        lint.status.success() && tags.trim().is_empty(),
        "lintian: {}\n{tags}{}",
        lint.status,
        String::from_utf8_lossy(&lint.stderr)
    );

    took("lintian");
    let (files, dirs) = contents(&deb);
    for want in [
        "/usr/bin/tpslab",
        "/usr/share/man/man1/tpslab.1.gz",
        "/usr/share/man/man1/tpslab-watch.1.gz",
        "/usr/share/bash-completion/completions/tpslab",
        "/usr/share/zsh/vendor-completions/_tpslab",
        "/usr/share/fish/vendor_completions.d/tpslab.fish",
        "/usr/lib/systemd/system/tpslab-exporter@.service",
        "/usr/share/doc/tpslab/copyright",
        "/usr/share/doc/tpslab/changelog.Debian.gz",
        "/usr/share/doc/tpslab/README.md",
        "/usr/share/doc/tpslab/ARCHITECTURE.md",
        "/usr/share/doc/tpslab/docs/s1-udp-loss.md",
        "/usr/share/doc/tpslab/docs/monitoring.md",
        "/usr/share/lintian/overrides/tpslab",
        CONFFILE,
    ] {
        assert!(
            files.contains(Path::new(want)),
            "{want} not in the package: {files:?}"
        );
    }
    // The synopsis whole (cargo-deb cuts one over 79 characters into a second line), the
    // archive's root folder 0755, the exporter's settings a conffile.
    let synopsis = ok(Command::new("dpkg-deb")
        .arg("-f")
        .arg(&deb)
        .arg("Description"));
    assert_eq!(
        synopsis.lines().next(),
        Some("Load, serve, observe and explain UDP loss and TPS limits")
    );
    let listing = ok(Command::new("dpkg-deb").arg("-c").arg(&deb));
    assert!(listing.starts_with("drwxr-xr-x root/root "), "{listing}");
    let control = dir.join("control");
    let _ = std::fs::remove_dir_all(&control);
    ok(Command::new("dpkg-deb").arg("-e").arg(&deb).arg(&control));
    assert_eq!(
        std::fs::read_to_string(control.join("conffiles")).unwrap(),
        format!("{CONFFILE}\n")
    );
    // A man page for every command: as many as `tpslab man --dir` writes.
    let pages = dir.join("man");
    let _ = std::fs::remove_dir_all(&pages);
    std::fs::create_dir_all(&pages).unwrap();
    ok(Command::new(&this).arg("man").arg("--dir").arg(&pages));
    let written: BTreeSet<PathBuf> = std::fs::read_dir(&pages)
        .unwrap()
        .map(|e| {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            Path::new("/usr/share/man/man1").join(format!("{name}.gz"))
        })
        .collect();
    let packed: BTreeSet<PathBuf> = files
        .iter()
        .filter(|f| f.starts_with("/usr/share/man/man1"))
        .cloned()
        .collect();
    assert!(written.len() > 30, "tpslab man --dir wrote {written:?}");
    assert_eq!(
        packed, written,
        "man pages in the package vs tpslab man --dir"
    );

    // A tpslab installed now is kept (repacked) to be put back; the exporter's state too.
    let installed = status().as_deref() == Some("ii");
    if installed && !Path::new("/usr/bin/dpkg-repack").exists() {
        common::skip(
            TEST,
            "tpslab is installed and dpkg-repack (to put it back) is not",
        );
        return;
    }
    // The copy is made before `Restore` exists: its drop purges tpslab, which must never
    // happen to an installed one not kept first (a failed repack panics here, with the
    // host's package untouched).
    let previous = installed.then(|| {
        let keep = dir.join("previous");
        let _ = std::fs::remove_dir_all(&keep);
        std::fs::create_dir_all(&keep).unwrap();
        ok(Command::new("dpkg-repack").arg("tpslab").current_dir(&keep));
        let copy = std::fs::read_dir(&keep)
            .unwrap()
            .next()
            .expect("dpkg-repack's .deb")
            .unwrap()
            .path();
        eprintln!("{TEST}: tpslab was installed: kept as {}", copy.display());
        copy
    });
    let mut restore = Restore {
        previous,
        aside: vec![],
        no_private: !exists(Path::new(PRIVATE)),
    };
    for s in STATE {
        let p = PathBuf::from(s);
        if exists(&p) {
            let moved = PathBuf::from(format!("{s}.package-test"));
            std::fs::rename(&p, &moved).unwrap();
            restore.aside.push((p, moved));
        }
    }
    if status().is_some() {
        dpkg_ok(&["--purge", "tpslab"]);
    }
    // What is on the host without the package (shared folders such as /usr/share/man/man1):
    // the rest must go with it.
    let before: BTreeSet<PathBuf> = files
        .iter()
        .chain(&dirs)
        .filter(|p| exists(p))
        .cloned()
        .collect();
    if let Some(stray) = before.iter().find(|p| !dirs.contains(*p)) {
        // Not a package's (dpkg knows no tpslab now): dpkg -i would overwrite it.
        common::skip(
            TEST,
            &format!(
                "{} is on this host, not from a package: left alone",
                stray.display()
            ),
        );
        return;
    }

    dpkg_ok(&["-i", &deb.to_string_lossy()]);
    assert_eq!(status().as_deref(), Some("ii"));
    took("installed");
    // dpkg's list of what it installed is the package's.
    let listed: BTreeSet<PathBuf> = ok(Command::new("dpkg").args(["-L", "tpslab"]))
        .lines()
        .map(PathBuf::from)
        .filter(|p| p != Path::new("/."))
        .collect();
    let all: BTreeSet<PathBuf> = files.union(&dirs).cloned().collect();
    assert_eq!(listed, all, "dpkg -L tpslab vs the package's contents");
    // Every file as packed (DEBIAN/md5sums).
    let verify = ok(Command::new("dpkg").args(["--verify", "tpslab"]));
    assert!(verify.is_empty(), "dpkg --verify tpslab: {verify}");

    let version_line = ok(Command::new("/usr/bin/tpslab").arg("--version"));
    assert_eq!(version_line, ok(Command::new(&this).arg("--version")));
    assert!(
        version_line.starts_with(&format!("tpslab {version}")),
        "{version_line}"
    );

    // man finds the pages where man-db looks, and renders one.
    for (page, path) in [
        ("tpslab", "/usr/share/man/man1/tpslab.1.gz"),
        ("tpslab-watch", "/usr/share/man/man1/tpslab-watch.1.gz"),
    ] {
        assert_eq!(ok(Command::new("man").args(["-w", page])).trim(), path);
    }
    let shown = ok(Command::new("man")
        .args(["-P", "cat", "tpslab-watch"])
        .env("MANWIDTH", "100"));
    assert!(
        shown.contains("--metrics-listen"),
        "man tpslab-watch:\n{shown}"
    );
    // MANWIDTH: rendered now, never a cat page man-db cached from an earlier install.
    let shown = ok(Command::new("man")
        .args(["-P", "cat", "tpslab"])
        .env("MANWIDTH", "100"));
    for section in [
        "EXIT STATUS",
        "FILES",
        "history.sqlite",
        "EXAMPLES",
        "SEE ALSO",
    ] {
        assert!(
            shown.contains(section),
            "{section} not in man tpslab:\n{shown}"
        );
    }

    // bash: the file itself, then as bash-completion loads it on first use, completing.
    let complete = ok(Command::new("bash").args([
        "-c",
        "source /usr/share/bash-completion/completions/tpslab && complete -p tpslab",
    ]));
    assert!(complete.contains("-F _tpslab tpslab"), "{complete}");
    let completed = ok(Command::new("bash").args([
        "-c",
        ". /usr/share/bash-completion/bash_completion
         _completion_loader tpslab
         complete -p tpslab
         COMP_WORDS=(tpslab wat); COMP_CWORD=1; COMP_LINE='tpslab wat'; COMP_POINT=10
         _tpslab tpslab wat tpslab
         printf '%s\\n' \"${COMPREPLY[@]}\"",
    ]));
    assert!(completed.contains("-F _tpslab tpslab"), "{completed}");
    assert!(completed.lines().any(|l| l == "watch"), "{completed}");

    // The unit: clean for systemd-analyze as an instance, installed but not enabled.
    let verify =
        run(Command::new("systemd-analyze").args(["verify", "tpslab-exporter@53.service"]));
    let said = String::from_utf8_lossy(&verify.stderr);
    // Nothing said of it (a host's other units may draw warnings of their own).
    assert!(
        verify.status.success() && !said.contains("tpslab"),
        "systemd-analyze verify: {}\n{said}",
        verify.status
    );
    let enabled = ok(Command::new("find").args(["/etc/systemd", "-name", "tpslab-exporter@*"]));
    assert!(enabled.is_empty(), "enabled by the package: {enabled}");

    // What systemd cannot do here (PID 1 is not systemd): the unit's command, as its
    // user with its capabilities, run and scraped by hand.
    exporter_by_hand(&dir);
    took("exporter run by hand");

    // What the unit leaves while it runs (StateDirectory= with DynamicUser=: a folder
    // under /var/lib/private and a link to it), for the purge to take.
    std::fs::create_dir_all(STATE[1]).unwrap();
    std::fs::write(Path::new(STATE[1]).join("watch-53.json"), "{}").unwrap();
    std::os::unix::fs::symlink("private/tpslab-exporter", STATE[0]).unwrap();

    dpkg_ok(&["-r", "tpslab"]);
    // Removed, its postrm kept for the purge; every file gone but the conffile (an
    // administrator's settings), the state kept.
    assert_eq!(status().as_deref(), Some("rc"));
    let left: Vec<&PathBuf> = files.iter().filter(|p| exists(p)).collect();
    assert_eq!(left, [Path::new(CONFFILE)], "left after dpkg -r");
    assert!(Path::new(STATE[0]).join("watch-53.json").exists());

    dpkg_ok(&["-P", "tpslab"]);
    took("purged");
    assert_eq!(status(), None);
    let left: Vec<&PathBuf> = files
        .iter()
        .chain(&dirs)
        .filter(|p| exists(p) && !before.contains(*p))
        .collect();
    assert!(left.is_empty(), "left after dpkg -P: {left:?}");
    for s in STATE {
        assert!(!exists(Path::new(s)), "{s} left after dpkg -P");
    }
    drop(restore);
}
