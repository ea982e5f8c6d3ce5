//! Puts the commit tpslab is built from into `--version` (TPSLAB_COMMIT): `git rev-parse`
//! of the source tree, `+dirty` with uncommitted changes, "unknown commit" outside git.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    let commit = match git(&["rev-parse", "--short=12", "HEAD"]) {
        Some(c) if !c.is_empty() => {
            // --no-optional-locks: status must not refresh .git/index (a write to the file
            // watched below made the next cargo rebuild the whole package: 24 s of test.sh).
            let dirty = git(&[
                "--no-optional-locks",
                "status",
                "--porcelain",
                "--untracked-files=no",
            ])
            .is_some_and(|s| !s.is_empty());
            format!("commit {c}{}", if dirty { "+dirty" } else { "" })
        }
        _ => "unknown commit".to_string(),
    };
    println!("cargo:rustc-env=TPSLAB_COMMIT={commit}");
    // A new commit or a checkout changes HEAD or the ref it points to.
    for p in [".git/HEAD", ".git/index"] {
        println!("cargo:rerun-if-changed={p}");
    }
    if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"]) {
        println!("cargo:rerun-if-changed=.git/{r}");
    }
}
