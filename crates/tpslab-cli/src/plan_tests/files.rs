//! The table rows of the commands that read files: report, compare, merge, agent and a
//! sweep's plan file.

use super::{accepted, made, refused, Made};
use serde_json::json;
use std::path::Path;

/// `{dir}/fifo` (a FIFO without a writer), `{dir}/big.json` (a sparse record over 512
/// MiB), `{dir}/plan.toml` (a sparse plan over 1 MiB): nothing is written to disk.
fn input_files(dir: &Path) {
    let made = std::process::Command::new("mkfifo")
        .arg(dir.join("fifo"))
        .status();
    assert!(made.unwrap().success(), "mkfifo");
    for (name, len) in [("big.json", (512 << 20) + 1), ("plan.toml", (1 << 20) + 1)] {
        std::fs::File::create(dir.join(name))
            .unwrap()
            .set_len(len)
            .unwrap();
    }
}

const START: &str = "--index 0 --of 1 --start-at @2000000000";

#[test]
fn input_files_that_are_not_regular_or_too_big_are_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    input_files(dir.path());
    let t0 = std::time::Instant::now();
    for (bad, what) in [
        ("/dev/zero", "a character device"),
        ("{dir}/fifo", "a FIFO"),
    ] {
        let (server, plan) = (format!("--server {bad}"), format!("--plan {bad}"));
        let lines = [
            format!("report {bad}"),
            format!("report {bad} --format html"),
            format!("compare {{fx}}/udp_run.json {bad}"),
            format!("merge {bad} --no-history"),
            format!("merge {{fleet}}/agent0.json --server {bad} --no-history"),
            format!("sweep --plan {bad} --out /nonexistent-tpslab/s"),
            format!("agent --plan {bad} {START}"),
        ];
        let names = [bad, bad, bad, bad, &server, &plan, &plan];
        let texts: Vec<[&str; 3]> = names
            .iter()
            .map(|n| [*n, what, "allowed a regular file"])
            .collect();
        let rows: Vec<(&str, &[&str])> = lines
            .iter()
            .zip(&texts)
            .map(|(l, t)| (l.as_str(), &t[..]))
            .collect();
        refused(dir.path(), &rows);
    }
    let agent = format!("agent --plan {{dir}}/plan.toml {START}");
    refused(
        dir.path(),
        &[
            (
                "report {dir}/big.json",
                &[
                    "{dir}/big.json",
                    "536870913 bytes; allowed up to 536870912 bytes",
                ],
            ),
            (&agent, &["--plan", "allowed up to 1048576 bytes"]),
        ],
    );
    assert!(t0.elapsed().as_secs() < 10, "{:?}", t0.elapsed());
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
    let not_a_record = &["junk.json", "not a tpslab record"][..];
    refused(
        d,
        &[
            (
                "report {dir}/ramp.json",
                &["tpslab.ramp/1", "ramp.json", "it reads tpslab.record/2"],
            ),
            ("report {dir}/junk.json", not_a_record),
            ("report {dir}/missing.json", &["missing.json"]),
            ("report {fx}/udp_run.json {dir}/junk.json", not_a_record),
            (
                "report {dir}/junk.json --html {dir}/page.html",
                not_a_record,
            ),
            (
                "report {fx}/udp_run.json --html /nonexistent-tpslab-dir/p.html",
                &["--html /nonexistent-tpslab-dir/p.html"],
            ),
            (
                "report {fx}/udp_run.json {fx}/udp_run.json --html {dir}/page.html",
                &["--html renders one record"],
            ),
            (
                "report {fx}/udp_run.json {fx}/udp_run.json --format csv",
                &["--format svg, csv, html and metrics render one record; give one FILE"],
            ),
            (
                "compare {fx}/udp_run.json {fx}/ramp.json",
                &[
                    "records of different kinds cannot be compared",
                    "udp_run",
                    "ramp",
                ],
            ),
            (
                "compare {fx}/udp_run.json {dir}/compare-junk.json",
                &["compare-junk.json"],
            ),
            ("compare {fx}/udp_run.json", &["RECORD"]),
            (
                "compare {fx}/udp_run.json {fx}/udp_run.json --html /nonexistent-tpslab-dir/c.html",
                &["does not exist"],
            ),
        ],
    );
    let Made::Report(r) = accepted(d, "report {fx}/udp_run.json --html {dir}/page.html") else {
        panic!("a report")
    };
    assert_eq!((r.records.len(), r.html.is_some()), (1, true));
    let Made::Record(c) = accepted(d, "compare {fx}/udp_run.json {fx}/udp_run.json") else {
        panic!("a comparison")
    };
    assert_eq!(c.kind(), "compare");
}

#[test]
fn merge_refuses_what_no_fleet_run_writes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let fleet = |name: &str| -> serde_json::Value {
        let top = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
        let text = std::fs::read_to_string(format!("{top}/tests/fixtures/fleet/{name}"));
        serde_json::from_str(&text.unwrap()).unwrap()
    };
    let write = |name: &str, v: &serde_json::Value| {
        std::fs::write(d.join(name), v.to_string()).unwrap();
    };
    // The fixtures merge: the watch covers the agent's run.
    let line = "merge {fleet}/agent0.json --server {fleet}/watch.json --no-history";
    let Made::Record(m) = accepted(d, line) else {
        panic!("a merged record")
    };
    assert_eq!(m.kind(), "udp_run");
    let bad = [
        ("/agent/of", json!(0), "agent of 0: allowed 1..=1024 agents"),
        (
            "/agent/of",
            json!(1_000_000_000u64),
            "agent of 1000000000: allowed 1..=1024",
        ),
        ("/agent/index", json!(1), "agent 1 of 1: allowed 0..=0"),
        (
            "/generator/attempted",
            json!(u64::MAX),
            "18446744073709551615 at generator.attempted",
        ),
        (
            "/ledger_inputs/gen_attempted",
            json!(u64::MAX),
            "at ledger_inputs.gen_attempted",
        ),
    ];
    let mut lines = vec![];
    for (i, (set, value, _)) in bad.iter().enumerate() {
        let mut v = fleet("agent0.json");
        *v.pointer_mut(set).unwrap() = value.clone();
        write(&format!("bad{i}.json"), &v);
        lines.push(format!("merge {{dir}}/bad{i}.json --no-history"));
    }
    let files: Vec<String> = (0..bad.len()).map(|i| format!("bad{i}.json")).collect();
    let texts: Vec<[&str; 2]> = bad
        .iter()
        .zip(&files)
        .map(|(b, f)| [b.2, f.as_str()])
        .collect();
    let mut rows: Vec<(&str, &[&str])> = lines
        .iter()
        .map(String::as_str)
        .zip(texts.iter().map(|t| &t[..]))
        .collect();
    // A watch of the server an hour before the agents' run.
    let mut w = fleet("watch.json");
    let t = w["started_unix_ms"].as_u64().unwrap() - 3_600_000;
    w["started_unix_ms"] = t.into();
    w["meta"]["started_unix_ms"] = t.into();
    write("early-watch.json", &w);
    rows.push((
        "merge {fleet}/agent0.json --server {dir}/early-watch.json --no-history",
        &["early-watch.json: watched ", "outside the agents' run"],
    ));
    refused(d, &rows);
}

#[test]
fn an_agent_reads_its_plan_and_its_start() {
    let dir = tempfile::tempdir().unwrap();
    let plan = "target = \"127.0.0.1:9\"\nrate = \"20k\"\n";
    std::fs::write(dir.path().join("fleet.toml"), plan).unwrap();
    let line = "agent --plan {dir}/fleet.toml --index 1 --of 4 --start-at @2000000000.5";
    let Made::Agent(a) = accepted(dir.path(), line) else {
        panic!("an agent")
    };
    assert_eq!(
        (a.index, a.of, a.start_ns),
        (1, 4, 2_000_000_000_500_000_000)
    );
    let e = made(
        dir.path(),
        "agent --plan {dir}/fleet.toml --index 0 --of 1 --start-at x",
    );
    assert_eq!(
        e.unwrap_err(),
        "--start-at \"x\": allowed an RFC 3339 time such as 2026-11-24T10:00:00Z, or @UNIX_SECONDS"
    );
}

#[test]
fn the_help_says_to_quote_fail_on() {
    use clap::CommandFactory;
    let mut cmd = super::Cli::command();
    let load = cmd.find_subcommand_mut("load").unwrap();
    // Not wrapped: the quoted example whole on one line.
    let udp = load.find_subcommand_mut("udp").unwrap();
    let help = udp.clone().term_width(0).render_long_help();
    let help = help.to_string();
    assert!(
        help.contains("'loss>PCT%'") && help.contains("--fail-on 'loss>1%,invalid'"),
        "{help}"
    );
}

/// `ramp http`'s positional is a URL (it said HOST:PORT, `ramp tcp`'s), and `load http`
/// says how to quote its thresholds.
#[test]
fn ramp_http_says_url_and_load_http_its_thresholds() {
    use clap::CommandFactory;
    let mut cmd = super::Cli::command();
    let ramp = cmd.find_subcommand_mut("ramp").unwrap();
    let help = ramp.find_subcommand_mut("http").unwrap().render_long_help();
    let help = help.to_string();
    assert!(
        help.contains("[URL]") && help.contains("http[s]://HOST[:PORT]/PATH"),
        "{help}"
    );
    assert!(!help.contains("HOST:PORT (TCP"), "{help}");
    let load = cmd.find_subcommand_mut("load").unwrap();
    let help = load.find_subcommand_mut("http").unwrap().render_long_help();
    // Wrapped to the terminal (help::sized): compared as words.
    let help = help
        .to_string()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        help.contains("'pNN<DURATION'") && help.contains("`max`: a closed loop"),
        "{help}"
    );
    // --duration's default shown (it showed none; -h shows the first sentence and it).
    assert!(
        help.contains("--duration <DURATION> How long requests are sent;")
            && help.contains("the longest a run may last [default: 10s]"),
        "{help}"
    );
}
