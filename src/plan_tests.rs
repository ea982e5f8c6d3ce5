//! The commands' plans as tables: each row a command line, parsed by the real command tree
//! and turned into its plan by the command's `plan()` (flags -> validated plan), then the
//! plan's fields expected, or the one-line error (its text) expected. For `merge` and
//! `compare`, whose work is reading and adding up records, the workflow runs too.
//! Files the rows name are made in a folder of the test's own: `{dir}` in a row.

use super::*;
use clap::{CommandFactory, FromArgMatches};
use std::ffi::OsString;
use std::path::Path;
use tpslab_analysis::record::Record;
use tpslab_engine::udp_run::UdpRunPlan;

/// What a command line makes.
#[derive(Debug)]
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

/// The plan `words` (after `tpslab`, `{dir}` replaced by `dir`) make, or the error tpslab
/// prints for them: clap's usage error as [`usage_error`] rewrites it, or the plan's.
fn made(dir: &Path, words: &[&str]) -> Result<Made, String> {
    let args: Vec<OsString> = std::iter::once("tpslab".to_string())
        .chain(
            words
                .iter()
                .map(|w| w.replace("{dir}", &dir.display().to_string())),
        )
        .map(OsString::from)
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

/// Checks every row: the command line's error contains each text given. All rows are
/// tried; the failures are listed together.
fn refused(dir: &Path, rows: &[(&[&str], &[&str])]) {
    let mut failed = vec![];
    for (words, texts) in rows {
        match made(dir, words) {
            Ok(m) => failed.push(format!("{words:?}: accepted: {m:?}")),
            Err(e) => {
                for t in *texts {
                    let t = t.replace("{dir}", &dir.display().to_string());
                    if !e.contains(&t) {
                        failed.push(format!("{words:?}: {e:?} does not say {t:?}"));
                    }
                }
            }
        }
    }
    assert!(failed.is_empty(), "{failed:#?}");
}

/// The plan of a command line that must be accepted.
fn accepted(dir: &Path, words: &[&str]) -> Made {
    made(dir, words).unwrap_or_else(|e| panic!("{words:?}: refused: {e}"))
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

/// A fixture of the repository, by its path from the top.
fn fixture(rel: &str) -> String {
    format!("{}/{rel}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn udp_loads_and_runs_refuse_what_they_cannot_run() {
    let dir = tempfile::tempdir().unwrap();
    payload_files(dir.path());
    let t = "127.0.0.1:9";
    refused(
        dir.path(),
        &[
            (&["load", "udp", t, "--rate", "0"], &["--rate 0"]),
            (&["load", "udp", t, "--size", "70000"], &["--size 70000"]),
            (&["load", "udp", t, "--size", "10"], &["--size 10"]),
            (&["run", "udp", "--mode", "bogus"], &["bogus"]),
            (
                &["load", "udp", t, "--seq-field", "0:2"],
                &["--seq-field", "--payload-file"],
            ),
            (
                &["load", "udp", t, "--payload-file", "{dir}/payload.bin", "--seq-field", "0:9"],
                &["0:9"],
            ),
            (
                &["load", "udp", t, "--payload-file", "{dir}/payload.bin", "--seq-field", "28:2"],
                &["28:2", "29"],
            ),
            (
                &[
                    "load",
                    "udp",
                    t,
                    "--payload-file",
                    "{dir}/payload.bin",
                    "--seq-field",
                    "18446744073709551615:2",
                ],
                &["18446744073709551615:2"],
            ),
            (
                &["run", "udp", "--cpus", "99", "--duration", "100ms"],
                &["--cpus \"99\""],
            ),
            (
                &["run", "udp", "--sched", "fifo:0", "--duration", "100ms"],
                &["fifo:0"],
            ),
            (&["load", "udp", t, "--burst", "0"], &["--burst 0"]),
            (
                &["load", "udp", t, "--burst", "0", "--burst-interval", "50ms"],
                &["--burst 0", "allowed 1..="],
            ),
            (
                &["load", "udp", t, "--pacing-slack", "5ms"],
                &["--pacing-slack 5ms: allowed 0s..=2ms"],
            ),
            (
                &["load", "udp", t, "--rate", "max", "--pacing-slack", "1ms"],
                &["--pacing-slack does not apply"],
            ),
            (&["load", "udp", t, "--interval", "0ms"], &["--interval"]),
            (
                &["load", "udp", t, "--rate", "5000", "--burst", "100", "--burst-interval", "10ms"],
                &["--rate 5000", "10000 pps"],
            ),
            (
                &["load", "udp", t, "--burst", "100000000", "--burst-interval", "1ms"],
                &["--burst 100000000"],
            ),
            (
                &["load", "udp", t, "--payload-file", "/dev/zero"],
                &["/dev/zero", "a character device; allowed a regular file"],
            ),
            (
                &["load", "udp", t, "--payload-file", "/dev/null"],
                &["/dev/null", "a character device; allowed a regular file"],
            ),
            (
                &["load", "udp", t, "--payload-file", "{dir}/big-payload.bin"],
                &["65507", "70000 bytes; allowed up to 65507 bytes"],
            ),
            (&["load", "udp", "127.0.0.1:0"], &["port 0"]),
            (&["load", "udp", t, "--fail-on", "loss>1"], &["loss>1"]),
            (
                &["load", "udp", t, "--fail-on", "loss"],
                &[
                    "--fail-on loss: no threshold; write it in quotes, --fail-on 'loss>1%': unquoted, the shell reads > as a redirection",
                    "writes a file named after the threshold (1%)",
                ],
            ),
            (
                &["load", "udp", t, "--fail-on", "loss>1"],
                &["--fail-on 'loss>1': allowed 'loss>PCT%' (e.g. --fail-on 'loss>0.1%')"],
            ),
            (
                &["serve", "udp", "--busy-poll", "4294967295"],
                &["--busy-poll 4294967295", "0..=1000000 us"],
            ),
            (&["load", "udp", t, "--threads", "0"], &["--threads 0", "1..=256"]),
            (
                &["run", "udp", "--load-threads", "300"],
                &["--load-threads 300", "1..=256"],
            ),
            (&["serve", "udp", "--work", "200000"], &["--work"]),
            (
                &["serve", "udp", "--work", "20us", "--work-ns", "20000"],
                &["--work"],
            ),
            (&["serve", "udp", "--work", "2s"], &["--work 2s", "0s..=1s"]),
            (
                &["load", "udp", t, "--rate", "\u{1b}[2J\u{1b}[31mx"],
                &["--rate", "\\u{1b}[2J"],
            ),
            (
                &["serve", "udp", "--rcvbuf", "2x"],
                &["tpslab: error: --rcvbuf 2x: allowed bytes (65536) or a size with a unit: KiB, MiB, GiB"],
            ),
            (
                &["load", "udp", t, "--rate", "10m"],
                &["tpslab: error: --rate 10m: allowed a rate above 0 up to 100000000 pps (10000, 10k, 1.5M, 100kpps), or max"],
            ),
        ],
    );
    // clap's own error echoes the bad value, never as raw control bytes.
    let e = made(dir.path(), &["run", "udp", "--mode", "\u{1b}[2Jx\u{7}"]).unwrap_err();
    assert!(
        e.contains("--mode") && !e.contains(['\u{1b}', '\u{7}']),
        "{e:?}"
    );
}

#[test]
fn udp_plans_carry_what_the_flags_say() {
    let dir = tempfile::tempdir().unwrap();
    // The same mean rate given both ways is fine: bursts of 100 every 10 ms.
    let Made::Udp(p) = accepted(
        dir.path(),
        &[
            "load",
            "udp",
            "127.0.0.1:9",
            "--rate",
            "10000",
            "--burst",
            "100",
            "--burst-interval",
            "10ms",
            "--duration",
            "100ms",
            "--warmup",
            "0s",
            "--no-replies",
        ],
    ) else {
        panic!("a UDP run")
    };
    assert_eq!((p.load.rate_pps, p.load.burst), (10_000.0, 100));
    assert!(!p.load.expect_replies && p.server.is_none());
    assert_eq!(p.load.target.to_string(), "127.0.0.1:9");
    // Our server with --no-replies is a sink; the generator's threads are --load-threads.
    let Made::Udp(p) = accepted(
        dir.path(),
        &[
            "run",
            "udp",
            "--no-replies",
            "--load-threads",
            "2",
            "--threads",
            "3",
        ],
    ) else {
        panic!("a UDP run")
    };
    let srv = p.server.unwrap();
    assert_eq!(srv.mode, tpslab_engine::server::Mode::Sink);
    assert_eq!((srv.threads, p.load.threads), (3, 2));
    assert_eq!(p.load.target, srv.bind);
    let Made::Serve(s) = accepted(dir.path(), &["serve", "udp", "--duration", "2s"]) else {
        panic!("a server")
    };
    assert_eq!(s.duration, Some(std::time::Duration::from_secs(2)));
    let Made::Watch(w) = accepted(dir.path(), &["watch", "--port", "53"]) else {
        panic!("a watch")
    };
    assert_eq!((w.pid, w.port), (None, Some(53)));
    assert_eq!(w.duration, std::time::Duration::from_secs(10));
}

#[test]
fn output_files_are_checked_by_the_plan() {
    const MISSING: &str = "/nonexistent-tpslab-dir/out.json";
    let dir = tempfile::tempdir().unwrap();
    let rows: Vec<(&[&str], &[&str])> = vec![
        (
            &["load", "udp", "127.0.0.1:9", "--json", MISSING],
            &["does not exist"],
        ),
        (&["run", "udp", "--json", MISSING], &["does not exist"]),
        (
            &["watch", "--port", "9", "--json", MISSING],
            &["does not exist"],
        ),
        (&["diagnose", "--json", MISSING], &["does not exist"]),
        (&["serve", "udp", "--json", MISSING], &["does not exist"]),
        (
            &["run", "udp", "--html", "/nonexistent-tpslab-dir/r.html"],
            &["does not exist"],
        ),
        (
            &["diagnose", "--html", "/nonexistent-tpslab-dir/r.html"],
            &["does not exist"],
        ),
        (
            &[
                "run",
                "udp",
                "--metrics-file",
                "/nonexistent-tpslab-dir/m.prom",
            ],
            &["does not exist"],
        ),
        (
            &[
                "diagnose",
                "--metrics-file",
                "/nonexistent-tpslab-dir/m.prom",
            ],
            &["does not exist"],
        ),
    ];
    refused(dir.path(), &rows);
}

#[test]
fn watch_and_diagnose_refuse_what_they_cannot_do() {
    let dir = tempfile::tempdir().unwrap();
    refused(
        dir.path(),
        &[
            (&["watch", "--duration", "100ms"], &["--pid", "--port"]),
            (&["watch", "--duration", "1s"], &["--pid PID or --port PORT"]),
            (
                &["watch", "--port", "53", "--duration", "400days"],
                &["--duration", "allowed 1ms..="],
            ),
            (
                &["watch", "--port", "9", "--duration", "5"],
                &["tpslab: error: --duration 5: allowed a duration with a unit: ns, us, ms, s, m (minutes), h, d"],
            ),
            (&["diagnose", "udp"], &["--server-cmd"]),
            (&["diagnose", "udp", "--server-cmd", "python3 srv.py"], &["{port}"]),
            (
                &["diagnose", "udp", "127.0.0.1:9", "--server-cmd", "x {port}"],
                &["not both"],
            ),
            (
                &["diagnose", "udp", "127.0.0.1:9", "--verify", "--no-verify"],
                &["--no-verify"],
            ),
            (
                &["diagnose", "--pid", "42"],
                &[
                    "unexpected argument '--pid'",
                    "tip: --pid is a flag of 'tpslab diagnose udp', not of 'tpslab diagnose': write it after 'udp'",
                ],
            ),
        ],
    );
    use tpslab_run::diagnose::Server;
    let Made::Diagnose(d) = accepted(dir.path(), &["diagnose", "--no-verify"]) else {
        panic!("a diagnosis")
    };
    assert_eq!((d.server, d.verify), (Server::BuiltIn, false));
    let Made::Diagnose(d) = accepted(
        dir.path(),
        &[
            "diagnose",
            "udp",
            "--server-cmd",
            "srv {port}",
            "--verify",
            "--rate",
            "20k",
        ],
    ) else {
        panic!("a diagnosis")
    };
    assert_eq!(d.server, Server::Started("srv {port}".into()));
    assert_eq!(d.scenario, "UDP server started by tpslab: srv {port}");
    assert!(d.verify && d.first.server.is_none());
    assert_eq!(d.first.load.rate_pps, 20_000.0);
}

#[test]
fn sweeps_refuse_bad_factors_and_cells_before_any_folder() {
    let dir = tempfile::tempdir().unwrap();
    let none = "/nonexistent/never-created";
    refused(
        dir.path(),
        &[
            (
                &["sweep", "--factor", "bogus=1,2", "--out", none],
                &["bogus"],
            ),
            (
                &["sweep", "--factor", "rcvbuf=212992", "--out", none],
                &["rcvbuf=212992"],
            ),
            (
                &["sweep", "--factor", "kernel.panic=0,1", "--out", none],
                &["kernel.panic"],
            ),
            (
                &["sweep", "--factor", "rate=1000,abc", "--out", none],
                &["--factor rate: level abc", "pps"],
            ),
            (
                &[
                    "sweep",
                    "--factor",
                    "rate=1000,2000",
                    "--out",
                    "/nonexistent/x",
                    "--fail-on",
                    "target",
                ],
                &["target"],
            ),
            (
                &[
                    "sweep",
                    "--factor",
                    "net.ipv4.udp_rmem_min=4096,020000",
                    "--out",
                    "{dir}/octal",
                ],
                &["020000", "octal (8192)"],
            ),
            (
                &[
                    "sweep",
                    "--design",
                    "factorial",
                    "--out",
                    "{dir}/cell",
                    "--factor",
                    "busy_poll=off,4294967295",
                ],
                &["--factor busy_poll: level 4294967295", "0..=1000000 us"],
            ),
            // Each level is fine alone; the cell that combines them is not.
            (
                &[
                    "sweep",
                    "--design",
                    "factorial",
                    "--out",
                    "{dir}/cell",
                    "--factor",
                    "rate=1000,max",
                    "--factor",
                    "burst=1,10",
                ],
                &["burst does not apply", "rate=max", "burst=10"],
            ),
        ],
    );
    for d in ["octal", "cell"] {
        assert!(
            !dir.path().join(d).exists(),
            "the output folder was created"
        );
    }
    let Made::Sweep(Some(p)) = accepted(
        dir.path(),
        &[
            "sweep",
            "--factor",
            "rcvbuf=212992,4MiB",
            "--repeat",
            "2",
            "--out",
            "{dir}/s",
        ],
    ) else {
        panic!("a new sweep")
    };
    assert_eq!((p.factors.len(), p.repeat), (1, 2));
    assert!(matches!(
        accepted(dir.path(), &["sweep", "--resume", "--out", "{dir}/s"]),
        Made::Sweep(None)
    ));
}

/// `{dir}/fifo` (a FIFO without a writer), `{dir}/big.json` (a sparse record over 512
/// MiB), `{dir}/plan.toml` (a sparse plan over 1 MiB).
fn input_files(dir: &Path) {
    let made = std::process::Command::new("mkfifo")
        .arg(dir.join("fifo"))
        .status();
    assert!(made.unwrap().success(), "mkfifo");
    let sparse = |name: &str, len: u64| {
        std::fs::File::create(dir.join(name))
            .unwrap()
            .set_len(len)
            .unwrap()
    };
    sparse("big.json", (512 << 20) + 1);
    sparse("plan.toml", (1 << 20) + 1);
}

#[test]
fn input_files_that_are_not_regular_or_too_big_are_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    input_files(dir.path());
    let run = fixture("crates/tpslab-report/tests/fixtures/udp_run.json");
    let agent = fixture("tests/fixtures/fleet/agent0.json");
    let start = ["--index", "0", "--of", "1", "--start-at", "@2000000000"];
    let t0 = std::time::Instant::now();
    for (bad, what) in [
        ("/dev/zero", "a character device"),
        ("{dir}/fifo", "a FIFO"),
    ] {
        let flagged = |f: &str| format!("{f} {bad}");
        let (server, plan) = (flagged("--server"), flagged("--plan"));
        let rows: Vec<(Vec<&str>, Vec<&str>)> = vec![
            (vec!["report", bad], vec![bad]),
            (vec!["report", bad, "--format", "html"], vec![bad]),
            (vec!["compare", &run, bad], vec![bad]),
            (vec!["merge", bad, "--no-history"], vec![bad]),
            (
                vec!["merge", &agent, "--server", bad, "--no-history"],
                vec![&server],
            ),
            (
                vec!["sweep", "--plan", bad, "--out", "/nonexistent-tpslab/s"],
                vec![&plan],
            ),
            (
                [&["agent", "--plan", bad][..], &start].concat(),
                vec![&plan],
            ),
        ];
        let rows: Vec<(Vec<&str>, Vec<&str>)> = rows
            .into_iter()
            .map(|(w, mut t)| {
                t.extend([what, "allowed a regular file"]);
                (w, t)
            })
            .collect();
        let rows: Vec<(&[&str], &[&str])> = rows.iter().map(|(w, t)| (&w[..], &t[..])).collect();
        refused(dir.path(), &rows);
    }
    refused(
        dir.path(),
        &[
            (
                &["report", "{dir}/big.json"],
                &[
                    "{dir}/big.json",
                    "536870913 bytes; allowed up to 536870912 bytes",
                ],
            ),
            (
                &[&["agent", "--plan", "{dir}/plan.toml"][..], &start].concat(),
                &["--plan", "allowed up to 1048576 bytes"],
            ),
        ],
    );
    assert!(
        t0.elapsed() < std::time::Duration::from_secs(10),
        "{:?}",
        t0.elapsed()
    );
}

#[test]
fn report_and_compare_read_every_record_first_and_name_a_bad_one() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("ramp.json"),
        r#"{"schema": "tpslab.ramp/1", "record": {}}"#,
    )
    .unwrap();
    std::fs::write(d.join("junk.json"), "not json\n").unwrap();
    std::fs::write(d.join("compare-junk.json"), "{}").unwrap();
    let good = fixture("crates/tpslab-report/tests/fixtures/udp_run.json");
    let ramp = fixture("crates/tpslab-report/tests/fixtures/ramp.json");
    refused(
        d,
        &[
            (
                &["report", "{dir}/ramp.json"],
                &["tpslab.ramp/1", "ramp.json", "it reads tpslab.record/2"],
            ),
            (
                &["report", "{dir}/junk.json"],
                &["junk.json", "not a tpslab record"],
            ),
            (&["report", "{dir}/missing.json"], &["missing.json"]),
            (
                &["report", &good, "{dir}/junk.json"],
                &["junk.json", "not a tpslab record"],
            ),
            (
                &["report", "{dir}/junk.json", "--html", "{dir}/page.html"],
                &["junk.json", "not a tpslab record"],
            ),
            (
                &["report", &good, "--html", "/nonexistent-tpslab-dir/p.html"],
                &["--html /nonexistent-tpslab-dir/p.html"],
            ),
            (
                &["report", &good, &good, "--html", "{dir}/page.html"],
                &["--html renders one record"],
            ),
            (
                &["report", &good, &good, "--format", "csv"],
                &["--format svg, csv, html and metrics render one record; give one FILE"],
            ),
            (
                &["compare", &good, &ramp],
                &[
                    "records of different kinds cannot be compared",
                    "udp_run",
                    "ramp",
                ],
            ),
            (
                &["compare", &good, "{dir}/compare-junk.json"],
                &["compare-junk.json"],
            ),
            (&["compare", &good], &["RECORD"]),
            (
                &[
                    "compare",
                    &good,
                    &good,
                    "--html",
                    "/nonexistent-tpslab-dir/c.html",
                ],
                &["does not exist"],
            ),
        ],
    );
    let Made::Report(r) = accepted(d, &["report", &good, "--html", "{dir}/page.html"]) else {
        panic!("a report")
    };
    assert_eq!((r.records.len(), r.html.is_some()), (1, true));
    let Made::Record(c) = accepted(d, &["compare", &good, &good]) else {
        panic!("a comparison")
    };
    assert_eq!(c.kind(), "compare");
}

#[test]
fn merge_refuses_what_no_fleet_run_writes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let agent: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("tests/fixtures/fleet/agent0.json")).unwrap(),
    )
    .unwrap();
    let watch = fixture("tests/fixtures/fleet/watch.json");
    let write =
        |name: &str, v: &serde_json::Value| std::fs::write(d.join(name), v.to_string()).unwrap();
    write("good.json", &agent);
    // The fixtures merge: the watch covers the agent's run.
    let Made::Record(m) = accepted(
        d,
        &[
            "merge",
            "{dir}/good.json",
            "--server",
            &watch,
            "--no-history",
        ],
    ) else {
        panic!("a merged record")
    };
    assert_eq!(m.kind(), "udp_run");
    let mut rows = vec![];
    for (i, (set, value, names)) in [
        (
            "/agent/of",
            serde_json::json!(0),
            "agent of 0: allowed 1..=1024 agents",
        ),
        (
            "/agent/of",
            serde_json::json!(1_000_000_000u64),
            "agent of 1000000000: allowed 1..=1024",
        ),
        (
            "/agent/index",
            serde_json::json!(1),
            "agent 1 of 1: allowed 0..=0",
        ),
        (
            "/generator/attempted",
            serde_json::json!(u64::MAX),
            "18446744073709551615 at generator.attempted",
        ),
        (
            "/ledger_inputs/gen_attempted",
            serde_json::json!(u64::MAX),
            "at ledger_inputs.gen_attempted",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let mut v = agent.clone();
        *v.pointer_mut(set).unwrap() = value;
        write(&format!("bad{i}.json"), &v);
        rows.push((
            vec![
                "merge".to_string(),
                format!("{{dir}}/bad{i}.json"),
                "--no-history".into(),
            ],
            vec![names.to_string(), format!("bad{i}.json")],
        ));
    }
    // A watch of the server an hour before the agents' run.
    let mut w: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&watch).unwrap()).unwrap();
    let t = w["started_unix_ms"].as_u64().unwrap() - 3_600_000;
    w["started_unix_ms"] = t.into();
    w["meta"]["started_unix_ms"] = t.into();
    write("early-watch.json", &w);
    rows.push((
        [
            "merge",
            "{dir}/good.json",
            "--server",
            "{dir}/early-watch.json",
            "--no-history",
        ]
        .map(String::from)
        .into(),
        vec![
            "early-watch.json: watched ".into(),
            "outside the agents' run".into(),
        ],
    ));
    let words: Vec<(Vec<&str>, Vec<&str>)> = rows
        .iter()
        .map(|(w, t)| {
            (
                w.iter().map(String::as_str).collect(),
                t.iter().map(String::as_str).collect(),
            )
        })
        .collect();
    let rows: Vec<(&[&str], &[&str])> = words.iter().map(|(w, t)| (&w[..], &t[..])).collect();
    refused(d, &rows);
}

#[test]
fn an_agent_reads_its_plan_and_start() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("fleet.toml"),
        "target = \"127.0.0.1:9\"\nrate = \"20k\"\n",
    )
    .unwrap();
    let Made::Agent(a) = accepted(
        dir.path(),
        &[
            "agent",
            "--plan",
            "{dir}/fleet.toml",
            "--index",
            "1",
            "--of",
            "4",
            "--start-at",
            "@2000000000.5",
        ],
    ) else {
        panic!("an agent")
    };
    assert_eq!(
        (a.index, a.of, a.start_ns),
        (1, 4, 2_000_000_000_500_000_000)
    );
    refused(
        dir.path(),
        &[(
            &["agent", "--plan", "{dir}/fleet.toml", "--index", "0", "--of", "1", "--start-at", "tomorrow"],
            &["--start-at \"tomorrow\": allowed an RFC 3339 time such as 2026-11-24T10:00:00Z, or @UNIX_SECONDS"],
        )],
    );
}

#[test]
fn the_help_says_to_quote_fail_on() {
    let mut cmd = Cli::command();
    let load = cmd.find_subcommand_mut("load").unwrap();
    let help = load
        .find_subcommand_mut("udp")
        .unwrap()
        .render_long_help()
        .to_string();
    assert!(
        help.contains("'loss>PCT%'") && help.contains("--fail-on 'loss>1%,invalid'"),
        "{help}"
    );
}
