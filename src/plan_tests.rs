//! The commands' plans as tables: each row a command line (split as sh would), parsed by
//! the real command tree and turned into its plan by the command's `plan()` (flags ->
//! validated plan), then the texts its one-line error must say, or the plan's fields.
//! For `merge` and `compare`, whose work is reading and adding up records, the workflow
//! runs too. In a row, `{dir}` is a folder of the test's own, `{fx}` the report layer's
//! record fixtures, `{fleet}` the fleet fixtures.

use super::*;
use clap::{CommandFactory, FromArgMatches};
use std::ffi::OsString;
use std::path::Path;
use tpslab_analysis::record::Record;
use tpslab_engine::udp_run::UdpRunPlan;

/// What a command line makes (one per row, so the variants' sizes do not matter).
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
enum Made {
    Serve(tpslab_run::udp::ServePlan),
    Udp(UdpRunPlan),
    Watch(tpslab_plan::udp::WatchPlan),
    Diagnose(tpslab_run::diagnose::DiagnosePlan),
    Sweep(Option<tpslab_plan::sweep::SweepPlan>),
    Agent(tpslab_run::agent::AgentPlan),
    Record(Record),
    Report(crate::report_cmd::ReportPlan),
}

/// `s` with a row's placeholders filled in.
fn filled(dir: &Path, s: &str) -> String {
    let top = env!("CARGO_MANIFEST_DIR");
    s.replace("{dir}", &dir.display().to_string())
        .replace(
            "{fx}",
            &format!("{top}/crates/tpslab-report/tests/fixtures"),
        )
        .replace("{fleet}", &format!("{top}/tests/fixtures/fleet"))
}

/// The plan the command line `line` (after `tpslab`) makes, or the error tpslab prints
/// for it: clap's usage error as [`usage_error`] rewrites it, or the plan's.
fn made(dir: &Path, line: &str) -> Result<Made, String> {
    let words = shlex::split(&filled(dir, line)).expect("a row sh can split");
    let args: Vec<OsString> = std::iter::once("tpslab".into())
        .chain(words.into_iter().map(OsString::from))
        .collect();
    let mut cmd = Cli::command();
    let cli = cmd
        .try_get_matches_from_mut(&args)
        .and_then(|m| Cli::from_arg_matches(&m))
        .map_err(|e| usage_error(&cmd, e, &args))?;
    let made = match cli.cmd {
        Cmd::Serve {
            proto: ServeProto::Udp(a),
        } => a.plan().map(Made::Serve),
        Cmd::Load {
            proto: LoadProto::Udp(a),
        } => a.plan().map(Made::Udp),
        Cmd::Run {
            proto: RunProto::Udp(a),
        } => a.plan().map(Made::Udp),
        Cmd::Watch(a) => a.plan().map(Made::Watch),
        Cmd::Diagnose(a) => a.plan().map(Made::Diagnose),
        Cmd::Sweep(a) => a.plan().map(Made::Sweep),
        Cmd::Agent(a) => a.plan().map(Made::Agent),
        Cmd::Merge(a) => a
            .plan()
            .and_then(|p| tpslab_run::agent::merge(&p))
            .map(Made::Record),
        Cmd::Compare(a) => a
            .plan()
            .and_then(tpslab_run::compare::compare)
            .map(Made::Record),
        Cmd::Report(a) => a.plan().map(Made::Report),
        other => panic!("not a command these tables cover: {other:?}"),
    };
    made.map_err(|e| format!("{e:#}"))
}

/// Checks every row: the command line's error says each text given. All rows are tried;
/// the failures are listed together.
fn refused(dir: &Path, rows: &[(&str, &[&str])]) {
    let mut failed = vec![];
    for (line, texts) in rows {
        match made(dir, line) {
            Ok(m) => failed.push(format!("{line}: accepted: {m:?}")),
            Err(e) => {
                for t in texts.iter().map(|t| filled(dir, t)) {
                    if !e.contains(&t) {
                        failed.push(format!("{line}: {e:?} does not say {t:?}"));
                    }
                }
            }
        }
    }
    assert!(failed.is_empty(), "{failed:#?}");
}

/// The plan of a command line that must be accepted.
fn accepted(dir: &Path, line: &str) -> Made {
    made(dir, line).unwrap_or_else(|e| panic!("{line}: refused: {e}"))
}

/// A 29-byte DNS query (id at 0..2) as `{dir}/payload.bin`, and 70 000 bytes (more than a
/// UDP datagram holds) as `{dir}/big-payload.bin`.
fn payload_files(dir: &Path) {
    let mut q = vec![0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0];
    q.extend_from_slice(b"\x06tpslab\x04test\x00\x00\x01\x00\x01");
    assert_eq!(q.len(), 29);
    std::fs::write(dir.join("payload.bin"), q).unwrap();
    std::fs::write(dir.join("big-payload.bin"), vec![7u8; 70_000]).unwrap();
}

const SIZE_FORMS: &str = "allowed bytes (65536) or a size with a unit: KiB, MiB, GiB";

#[test]
fn udp_loads_and_runs_refuse_what_they_cannot_run() {
    let dir = tempfile::tempdir().unwrap();
    payload_files(dir.path());
    let seq = "load udp 127.0.0.1:9 --payload-file {dir}/payload.bin --seq-field";
    let (seq_9, seq_28) = (format!("{seq} 0:9"), format!("{seq} 28:2"));
    let seq_max = format!("{seq} 18446744073709551615:2");
    let rcvbuf = format!("tpslab: error: --rcvbuf 2x: {SIZE_FORMS}");
    refused(
        dir.path(),
        &[
            ("load udp 127.0.0.1:9 --rate 0", &["--rate 0"]),
            ("load udp 127.0.0.1:9 --size 70000", &["--size 70000"]),
            ("load udp 127.0.0.1:9 --size 10", &["--size 10"]),
            ("run udp --mode bogus", &["bogus"]),
            ("load udp 127.0.0.1:9 --seq-field 0:2", &["--seq-field", "--payload-file"]),
            (&seq_9, &["0:9"]),
            (&seq_28, &["28:2", "29"]),
            (&seq_max, &["18446744073709551615:2"]),
            ("run udp --cpus 99 --duration 100ms", &["--cpus \"99\""]),
            ("run udp --sched fifo:0 --duration 100ms", &["fifo:0"]),
            ("load udp 127.0.0.1:9 --burst 0", &["--burst 0"]),
            (
                "load udp 127.0.0.1:9 --burst 0 --burst-interval 50ms",
                &["--burst 0", "allowed 1..="],
            ),
            (
                "load udp 127.0.0.1:9 --pacing-slack 5ms",
                &["--pacing-slack 5ms: allowed 0s..=2ms"],
            ),
            (
                "load udp 127.0.0.1:9 --rate max --pacing-slack 1ms",
                &["--pacing-slack does not apply"],
            ),
            ("load udp 127.0.0.1:9 --interval 0ms", &["--interval"]),
            (
                "load udp 127.0.0.1:9 --rate 5000 --burst 100 --burst-interval 10ms",
                &["--rate 5000", "10000 pps"],
            ),
            (
                "load udp 127.0.0.1:9 --burst 100000000 --burst-interval 1ms",
                &["--burst 100000000"],
            ),
            (
                "load udp 127.0.0.1:9 --payload-file /dev/zero",
                &["/dev/zero", "a character device; allowed a regular file"],
            ),
            (
                "load udp 127.0.0.1:9 --payload-file /dev/null",
                &["/dev/null", "a character device; allowed a regular file"],
            ),
            (
                "load udp 127.0.0.1:9 --payload-file {dir}/big-payload.bin",
                &["65507", "70000 bytes; allowed up to 65507 bytes"],
            ),
            ("load udp 127.0.0.1:0", &["port 0"]),
            (
                "load udp 127.0.0.1:9 --fail-on loss",
                &[
                    "--fail-on loss: no threshold; write it in quotes, --fail-on 'loss>1%': unquoted, the shell reads > as a redirection",
                    "writes a file named after the threshold (1%)",
                ],
            ),
            (
                "load udp 127.0.0.1:9 --fail-on 'loss>1'",
                &["loss>1", "--fail-on 'loss>1': allowed 'loss>PCT%' (e.g. --fail-on 'loss>0.1%')"],
            ),
            (
                "serve udp --busy-poll 4294967295",
                &["--busy-poll 4294967295", "0..=1000000 us"],
            ),
            ("load udp 127.0.0.1:9 --threads 0", &["--threads 0", "1..=256"]),
            ("run udp --load-threads 300", &["--load-threads 300", "1..=256"]),
            ("serve udp --work 200000", &["--work"]),
            ("serve udp --work 20us --work-ns 20000", &["--work"]),
            ("serve udp --work 2s", &["--work 2s", "0s..=1s"]),
            (
                "load udp 127.0.0.1:9 --rate '\u{1b}[2J\u{1b}[31mx'",
                &["--rate", "\\u{1b}[2J"],
            ),
            ("serve udp --rcvbuf 2x", &[&rcvbuf]),
            (
                "load udp 127.0.0.1:9 --rate 10m",
                &["tpslab: error: --rate 10m: allowed a rate above 0 up to 100000000 pps (10000, 10k, 1.5M, 100kpps), or max"],
            ),
        ],
    );
    // clap's own error echoes the bad value, never as raw control bytes.
    let e = made(dir.path(), "run udp --mode '\u{1b}[2Jx\u{7}'").unwrap_err();
    assert!(
        e.contains("--mode") && !e.contains(['\u{1b}', '\u{7}']),
        "{e:?}"
    );
}

#[test]
fn udp_plans_carry_what_the_flags_say() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // The same mean rate given both ways is fine: bursts of 100 every 10 ms.
    let line = "load udp 127.0.0.1:9 --rate 10000 --burst 100 --burst-interval 10ms --duration 100ms --warmup 0s --no-replies";
    let Made::Udp(p) = accepted(d, line) else {
        panic!("a UDP run")
    };
    assert_eq!((p.load.rate_pps, p.load.burst), (10_000.0, 100));
    assert!(!p.load.expect_replies && p.server.is_none());
    assert_eq!(p.load.target.to_string(), "127.0.0.1:9");
    // Our server with --no-replies is a sink; the generator's threads are --load-threads.
    let line = "run udp --no-replies --load-threads 2 --threads 3";
    let Made::Udp(p) = accepted(d, line) else {
        panic!("a UDP run")
    };
    let srv = p.server.unwrap();
    assert_eq!(srv.mode, tpslab_engine::server::Mode::Sink);
    assert_eq!(
        (srv.threads, p.load.threads, p.load.target),
        (3, 2, srv.bind)
    );
    let Made::Serve(s) = accepted(d, "serve udp --duration 2s") else {
        panic!("a server")
    };
    assert_eq!(s.duration, Some(std::time::Duration::from_secs(2)));
    let Made::Watch(w) = accepted(d, "watch --port 53") else {
        panic!("a watch")
    };
    assert_eq!((w.pid, w.port, w.duration.as_secs()), (None, Some(53), 10));
}

#[test]
fn output_files_are_checked_by_the_plan() {
    let dir = tempfile::tempdir().unwrap();
    let gone = &["does not exist"][..];
    refused(
        dir.path(),
        &[
            (
                "load udp 127.0.0.1:9 --json /nonexistent-tpslab-dir/out.json",
                gone,
            ),
            ("run udp --json /nonexistent-tpslab-dir/out.json", gone),
            (
                "watch --port 9 --json /nonexistent-tpslab-dir/out.json",
                gone,
            ),
            ("diagnose --json /nonexistent-tpslab-dir/out.json", gone),
            ("serve udp --json /nonexistent-tpslab-dir/out.json", gone),
            ("run udp --html /nonexistent-tpslab-dir/r.html", gone),
            ("diagnose --html /nonexistent-tpslab-dir/r.html", gone),
            (
                "run udp --metrics-file /nonexistent-tpslab-dir/m.prom",
                gone,
            ),
            (
                "diagnose --metrics-file /nonexistent-tpslab-dir/m.prom",
                gone,
            ),
        ],
    );
}

#[path = "plan_tests_runs.rs"]
mod runs;

#[path = "plan_tests_files.rs"]
mod files;
