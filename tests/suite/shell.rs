//! Shell integration from the command-line definitions: completion scripts that the
//! shells accept, the man pages, and `--version` with the commit.

use crate::common;

fn out(args: &[&str]) -> std::process::Output {
    let mut c = common::tpslab();
    c.args(args);
    common::run(c)
}

#[test]
fn completion_scripts_name_every_command_and_bash_parses_its_own() {
    for shell in ["bash", "zsh", "fish"] {
        let o = out(&["completions", shell]);
        assert!(o.status.success(), "{shell}");
        let s = String::from_utf8(o.stdout).unwrap();
        for cmd in [
            "diagnose",
            "sweep",
            "ramp",
            "report",
            "doctor",
            "completions",
        ] {
            assert!(s.contains(cmd), "{shell} completion lacks {cmd}");
        }
        // Flags of nested commands too (fish writes `-l html`).
        assert!(
            s.contains("--html") || s.contains("-l html"),
            "{shell} completion lacks --html"
        );
    }
    // bash -n: the script is valid bash.
    let script = common::tmp("tpslab.bash");
    std::fs::write(&script, out(&["completions", "bash"]).stdout).unwrap();
    let ok = std::process::Command::new("bash")
        .arg("-n")
        .arg(&script)
        .status()
        .expect("bash");
    assert!(ok.success(), "bash -n refused the completion script");
    // An unknown shell is refused, naming what is allowed.
    let o = out(&["completions", "powershel"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("bash"));
}

#[test]
fn man_pages_and_version() {
    let o = out(&["man"]);
    assert!(o.status.success());
    let page = String::from_utf8(o.stdout).unwrap();
    assert!(
        page.contains(".TH tpslab 1"),
        "not a man page: {}",
        &page[..200]
    );
    assert!(page.contains("diagnose"));
    // The sections the command tree does not hold (src/man.rs).
    for section in [
        ".SH \"EXIT STATUS\"",
        ".SH ENVIRONMENT",
        ".SH FILES",
        ".SH EXAMPLES",
        ".SH \"SEE ALSO\"",
    ] {
        assert!(page.contains(section), "{section} not in tpslab(1)");
    }
    // A missing folder (two levels) is created.
    let dir = common::tmp("man").join("pages");
    let _ = std::fs::remove_dir_all(dir.parent().unwrap());
    let o = out(&["man", "--dir", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{o:?}");
    for p in [
        "tpslab.1",
        "tpslab-run-udp.1",
        "tpslab-diagnose.1",
        "tpslab-report.1",
    ] {
        let text = std::fs::read_to_string(dir.join(p)).unwrap_or_else(|e| panic!("{p}: {e}"));
        assert!(text.contains(".TH"), "{p}");
    }
    // A file where the folder should be: one line, exit 2.
    let o = out(&["man", "--dir", dir.join("tpslab.1").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("not a folder") && err.lines().count() == 1,
        "{err}"
    );
    // --version: the release and the commit (or that it is unknown, outside git).
    let v = String::from_utf8(out(&["--version"]).stdout).unwrap();
    assert!(
        v.starts_with(concat!("tpslab ", env!("CARGO_PKG_VERSION"), " (")),
        "{v}"
    );
    let inside = v
        .split('(')
        .nth(1)
        .unwrap()
        .trim_end()
        .trim_end_matches(')');
    let hex = inside
        .strip_prefix("commit ")
        .map(|c| c.trim_end_matches("+dirty"));
    assert!(
        hex.is_some_and(|h| h.len() == 12 && h.chars().all(|c| c.is_ascii_hexdigit()))
            || inside == "unknown commit",
        "{v}"
    );
}
