//! The test command a newcomer runs (README's `./test.sh`, which CI runs too) lists the
//! skipped tests with their reasons after the suite, and a timing test spoiled by a busy
//! machine in every attempt is such a skip, counted, not a failure nor a silent pass.

use crate::common;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn ci_runs_the_readmes_test_command() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    // The first shell block: build-and-diagnose, then the test command.
    let block = readme
        .split("```sh\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("a sh block in README.md");
    let test = block
        .lines()
        .find(|l| l.contains("test"))
        .expect("a test command in README's first sh block");
    assert_eq!(test, "./test.sh");
    let ci = std::fs::read_to_string(repo().join(".ci/run")).unwrap();
    assert!(
        ci.lines().any(|l| l.trim() == test),
        ".ci/run does not run README's test command {test:?}"
    );
}

/// A folder holding a stand-in `cargo` running `script` (sh).
fn stub_cargo(name: &str, script: &str) -> PathBuf {
    let dir = common::tmp(name);
    std::fs::create_dir_all(&dir).unwrap();
    let cargo = dir.join("cargo");
    std::fs::write(&cargo, format!("#!/bin/sh\n{script}\n")).unwrap();
    std::fs::set_permissions(&cargo, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// Runs ./test.sh with `stub` first on PATH, the skip list at `list` and the tests'
/// times and retries in files of this test's own (never the suite's running ones).
fn test_sh(stub: &Path, list: &Path, args: &[&str]) -> (Option<i32>, String) {
    let path = format!("{}:{}", stub.display(), std::env::var("PATH").unwrap());
    let out = Command::new(repo().join("test.sh"))
        .args(args)
        .env("PATH", path)
        .env("TPSLAB_SKIP_LIST", list)
        .env("TPSLAB_TEST_TIMES", common::tmp("test-sh-times.txt"))
        .env("TPSLAB_TEST_RETRIES", common::tmp("test-sh-retries.txt"))
        .output()
        .expect("run test.sh");
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn the_test_command_runs_every_binary_and_lists_the_skipped_ones_at_the_end() {
    let list = common::tmp("test-sh-skipped.txt");
    let argv = common::tmp("test-sh-argv.txt");
    // A suite in which one test skips and one binary fails.
    let stub = stub_cargo(
        "stub-failing",
        &format!(
            "echo \"$@\" > '{}'\necho 'cargo output'\necho 'ledger_x: needs root to create a network namespace' >> \"$TPSLAB_SKIP_LIST\"\nprintf '1.5\\t0.0\\tordinary\\ta::fast\\n12.0\\t2.5\\tserial\\tb::slow\\n' >> \"$TPSLAB_TEST_TIMES\"\nexit 101",
            argv.display()
        ),
    );
    // A list left by an earlier run is not reported again.
    std::fs::write(&list, "stale: from an earlier run\n").unwrap();
    let (code, out) = test_sh(&stub, &list, &["--test", "ledger"]);
    assert_eq!(code, Some(101), "cargo's status: {out}");
    assert_eq!(
        std::fs::read_to_string(&argv).unwrap().trim(),
        "test --workspace --profile suite --no-fail-fast --test ledger"
    );
    // The skipped tests, the slowest tests (slowest first), then the suite's wall time
    // (issue 55: under 15 minutes).
    let (rest, took) = out
        .rsplit_once("test.sh: ")
        .expect("the wall time printed last");
    assert!(
        rest.starts_with(
            "cargo output\nskipped tests: 1\n  ledger_x: needs root to create a network namespace\nslowest suite tests (s running, s waiting for a turn before, turn, name; all in "
        ) && rest.ends_with("):\n  9.5\t2.5\tserial\tb::slow\n  1.5\t0.0\tordinary\ta::fast\n"),
        "{out}"
    );
    assert!(
        took.starts_with("0 min ") && took.ends_with(" s (compiling included), exit 101\n"),
        "{took}"
    );
    // Without arguments: the suite's binary built first and run directly while every other
    // test binary builds (at idle priority), the quiet tests in a second process beside the
    // rest (each test in exactly one of them, their output after the rest's), then the
    // other binaries and the doc tests; a failure of any is the suite's.
    let calls = common::tmp("test-sh-calls.txt");
    let suite = common::tmp("stub-suite-bin").join("deps/suite-0123");
    std::fs::create_dir_all(suite.parent().unwrap()).unwrap();
    for (fail, code_want) in [("no-such-test", 0), ("probe_proxy::", 101), ("--doc", 101)] {
        let _ = std::fs::remove_file(&calls);
        std::fs::write(
            &suite,
            format!(
                "#!/bin/sh\necho \"suite $*\" >> '{}'\ncase \"$*\" in *--skip*) echo main-run;; *) echo quiet-run;; esac\ncase \"$*\" in *--skip*) ;; *'{fail}'*) exit 101;; esac\nexit 0\n",
                calls.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&suite, std::fs::Permissions::from_mode(0o755)).unwrap();
        let stub = stub_cargo(
            "stub-passing",
            &format!(
                "echo \"$@\" >> '{}'\ncase \"$*\" in *--message-format*) echo '{{\"reason\":\"compiler-artifact\",\"executable\":\"{}\"}}';; esac\ncase \"$*\" in *'{fail}'*) exit 101;; esac\nexit 0",
                calls.display(),
                suite.display()
            ),
        );
        let (code, out) = test_sh(&stub, &list, &[]);
        assert_eq!(code, Some(code_want), "{out}");
        let argv: Vec<String> = std::fs::read_to_string(&calls)
            .unwrap()
            .lines()
            .map(String::from)
            .collect();
        assert_eq!(
            argv[0],
            "test --workspace --profile suite --test suite --no-run --message-format=json-render-diagnostics"
        );
        // The suite's two processes and the idle build, in any order.
        assert_eq!(argv.len(), 6, "{argv:?}");
        let mut middle = argv[1..4].to_vec();
        middle.sort();
        assert_eq!(
            middle,
            [
                "suite --skip probe:: --skip probe_proxy:: --skip probe_behaviour::",
                "suite probe:: probe_proxy:: probe_behaviour::",
                "test --workspace --profile suite --no-run",
            ]
        );
        assert_eq!(
            argv[4..],
            [
                "test --workspace --profile suite --no-fail-fast --lib --bins --test engine --test plan --test proc --test record --test report",
                "test --workspace --profile suite --no-fail-fast --doc",
            ]
        );
        let (rest, took) = out
            .rsplit_once("test.sh: ")
            .expect("the wall time printed last");
        assert_eq!(
            rest,
            format!("     Running tests/suite/main.rs ({})\nmain-run\n--- the quiet tests (probe:: probe_proxy:: probe_behaviour::), run beside the rest:\nquiet-run\nskipped tests: none\n", suite.display())
        );
        assert!(took.ends_with(&format!(", exit {code_want}\n")), "{took}");
    }
    // Every module whose tests are quiet is in test.sh's list, and only those.
    let sh = std::fs::read_to_string(repo().join("test.sh")).unwrap();
    let listed = sh
        .lines()
        .find_map(|l| l.trim().strip_prefix("quiet=("))
        .and_then(|l| l.strip_suffix(')'))
        .expect("test.sh's quiet=(...) list");
    let mut listed: Vec<String> = listed.split(' ').map(String::from).collect();
    let mut quiet: Vec<String> = std::fs::read_dir(repo().join("tests/suite"))
        .unwrap()
        .flatten()
        // turns.rs calls quiet() to test the turns themselves (its serial thread must run
        // in the process of the ordinary tests).
        .filter(|e| e.file_name() != "turns.rs")
        .filter(|e| {
            std::fs::read_to_string(e.path())
                .unwrap()
                .contains("\n    common::quiet();\n")
        })
        .map(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            format!("{}::", n.trim_end_matches(".rs"))
        })
        .collect();
    listed.sort();
    quiet.sort();
    assert_eq!(
        listed, quiet,
        "test.sh's quiet list against common::quiet() in tests/suite"
    );
}

#[test]
fn a_skip_named_without_its_module_is_listed_with_it() {
    let list = common::tmp("skip-named.txt");
    let _ = std::fs::remove_file(&list);
    common::own_skip_list(&list);
    let _ = std::fs::remove_file(common::retries_file().unwrap());
    let me = "a_skip_named_without_its_module_is_listed_with_it";
    let r: Option<()> = common::retry(me, 1, || Err("busy".to_string()));
    assert_eq!(r, None);
    common::skip(
        "test_command::a_skip_named_without_its_module_is_listed_with_it",
        "why",
    );
    // A name that is not this test's is kept as given (a helper thread's, another's).
    common::skip("another_test", "why");
    assert_eq!(
        std::fs::read_to_string(&list).unwrap(),
        format!(
            "test_command::{me}: spoiled by the machine in all 1 attempts; the last: busy\n\
             test_command::{me}: why\n\
             another_test: why\n"
        )
    );
    let retries = std::fs::read_to_string(common::retries_file().unwrap()).unwrap();
    assert_eq!(
        retries,
        format!("test_command::{me}\tattempt 1 of 1\tbusy\n")
    );
}

#[test]
fn a_timing_test_spoiled_in_every_attempt_is_a_counted_skip() {
    // This test's own skip list (the suite's is not touched).
    let list = common::tmp("retry-skipped.txt");
    let _ = std::fs::remove_file(&list);
    common::own_skip_list(&list);
    let _ = std::fs::remove_file(common::retries_file().unwrap());
    let mut n = 0;
    let r: Option<()> = common::retry("busy_test", 3, || {
        n += 1;
        Err(format!("generator off schedule ({n})"))
    });
    assert_eq!((r, n), (None, 3), "three attempts, then a skip");
    assert_eq!(
        std::fs::read_to_string(&list).unwrap(),
        "busy_test: spoiled by the machine in all 3 attempts; the last: generator off schedule (3)\n"
    );
    let mut n = 0;
    let r = common::retry("recovering_test", 3, || {
        n += 1;
        if n < 2 {
            Err("busy".to_string())
        } else {
            Ok(n)
        }
    });
    assert_eq!(r, Some(2), "a pass on the second attempt");
    assert_eq!(
        std::fs::read_to_string(&list).unwrap().lines().count(),
        1,
        "a pass adds no skip"
    );
    // A chance result three times running fails.
    let failed = std::panic::catch_unwind(|| {
        common::retry_chance("unlucky", 3, || Err::<(), _>("significant".to_string()))
    });
    assert!(failed.is_err());
    // Each spoiled attempt was noted, one line each, in this test's own file (beside its
    // skip list), never in the suite's.
    let retries = common::retries_file().expect("beside the own skip list");
    let lines: Vec<String> = std::fs::read_to_string(&retries)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    // The chance draws are not the machine's: not noted.
    assert_eq!(lines.len(), 3 + 1, "{lines:?}");
    assert_eq!(
        lines[0],
        "busy_test\tattempt 1 of 3\tgenerator off schedule (1)"
    );
    assert_eq!(lines[3], "recovering_test\tattempt 1 of 3\tbusy");
}
